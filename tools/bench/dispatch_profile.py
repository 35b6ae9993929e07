"""Time every dispatch of an artifact on this CPU: where does a call's time go?

    python tools/bench/dispatch_profile.py model.ixa --batch 1 [--function main] [--threads 1] [--top 15]

Runs the artifact's module with `iree-benchmark-module` and IREE's host-execution profiling
(`--device_profiling_mode=host-execution`; the local HAL records each dispatch's run), reads
`iree-profile statistics --format=jsonl` and prints one row per dispatch: mean time per call,
share of the call, and the root op, loop extents and FLOPs from the artifact's report.json.
Inputs are seeded random data of the manifest's shapes (dynamic dims take --batch).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import numpy as np


def _tool(name: str) -> str:
    cand = os.path.join(os.path.dirname(sys.executable), name)
    return cand if os.path.exists(cand) else (shutil.which(name) or name)


_NP_TO_IREE = {"float32": "f32", "float16": "f16", "int64": "i64", "int32": "i32", "int8": "i8",
               "bool": "i1", "float64": "f64"}


def _inputs(manifest: dict, batch: int, workdir: str) -> list[str]:
    rng = np.random.default_rng(0)
    flags = []
    for i, spec in enumerate(manifest["inputs"]):
        shape = [d if isinstance(d, int) else batch for d in spec["shape"]]
        dtype = np.dtype(spec["dtype"])
        if dtype.kind == "f":
            arr = rng.standard_normal(shape).astype(dtype)
        else:
            arr = rng.integers(0, 100, size=shape).astype(dtype)
        path = os.path.join(workdir, f"in{i}.npy")
        np.save(path, arr)
        flags.append(f"--input=@{path}")
    return flags


def profile(artifact: str, batch: int, function: str | None, threads: int, min_time: float) -> dict:
    workdir = tempfile.mkdtemp(prefix="inferx-profile-")
    try:
        with zipfile.ZipFile(artifact) as z:
            z.extractall(workdir)
        manifest = json.load(open(os.path.join(workdir, "manifest.json")))
        report = json.load(open(os.path.join(workdir, "report.json")))
        fn = function or manifest.get("entry_function", "main")
        cmd = [_tool("iree-benchmark-module"), f"--module={os.path.join(workdir, 'module.vmfb')}",
               f"--function={fn}", "--device=local-task", f"--task_topology_max_group_count={threads}",
               f"--benchmark_min_time={min_time}s", "--device_profiling_mode=host-execution",
               f"--device_profiling_output={os.path.join(workdir, 'p.ireeprof')}",
               *_inputs(manifest, batch, workdir)]
        if manifest.get("weights"):
            cmd.append(f"--parameters={manifest['weights']['scope']}="
                       f"{os.path.join(workdir, manifest['weights']['member'])}")
        bench = subprocess.run(cmd, capture_output=True, text=True)
        if bench.returncode != 0:
            raise SystemExit(f"iree-benchmark-module failed:\n{bench.stderr[-2000:]}")
        stats = subprocess.run([_tool("iree-profile"), "statistics", "--format=jsonl",
                                os.path.join(workdir, "p.ireeprof")], capture_output=True, text=True)
        calls, rows = 0, {}
        for line in stats.stdout.splitlines():
            rec = json.loads(line)
            if rec.get("row_type") == "host_execution_queue_operation" and rec.get("event_name") == "execute":
                calls += rec["sample_count"]
            if rec.get("row_type") == "host_execution_function":
                rows[rec["function_name"]] = rec
        by_name = {d["dispatch"]: d for d in report.get("dispatches", [])}
        return {"calls": calls, "rows": rows, "report": by_name, "benchmark": bench.stdout}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _report_entry(by_name: dict, function_name: str) -> dict:
    for name, d in by_name.items():
        if function_name == name or function_name.startswith(name + "_"):
            return d
    return {}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("artifact")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--function")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--min-time", type=float, default=1.0, help="seconds of benchmark runs")
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args(argv)
    res = profile(args.artifact, args.batch, args.function, args.threads, args.min_time)
    rows = sorted(res["rows"].values(), key=lambda r: -r["total_duration_ns"])
    # An executable that IREE deduplicated runs several times per call: divide by calls.
    per_call = {r["function_name"]: r["total_duration_ns"] / max(res["calls"], 1) / 1e3 for r in rows}
    total = sum(per_call.values())
    print(f"{len(rows)} dispatches, {total:.1f} us of dispatch time per call ({args.threads} thread(s))")
    print("| dispatch | runs/call | us/call | share | root | loops | GFLOP/s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows[:args.top]:
        name = r["function_name"]
        d = _report_entry(res["report"], name)
        flops = d.get("flops", -1)
        runs = r["sample_count"] / max(res["calls"], 1)
        rate = f"{runs * flops / per_call[name] / 1e3:.1f}" if flops and flops > 0 else ""
        print(f"| {name} | {runs:g} | {per_call[name]:.1f} | {per_call[name] / total:.0%} | {d.get('root', '')} "
              f"{d.get('kind', '')} | {d.get('loops', '')} | {rate} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
