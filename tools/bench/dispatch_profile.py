"""Time every dispatch of an artifact on this CPU: where does a call's time go?

    python tools/bench/dispatch_profile.py model.ixa [--function 'main$b1'] [--batch 1] [--threads 1] [--top 15]

Runs the artifact's function under IREE's host-execution profiling (inferx_compiler.tuning.profiling)
and prints one row per dispatch: runs and microseconds per call, share of the call, and the
root op, loop extents, FLOPs and GFLOP/s from the artifact's report.json, with the
configuration's source (IREE, tuned, rule).
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile

from inferx_compiler.tuning.profiling import executable_of, profile_dispatches


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("artifact")
    p.add_argument("--function", help="module function (default: the entry function)")
    p.add_argument("--batch", type=int, default=1, help="size of the dynamic dims")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--min-time", type=float, default=1.0, help="seconds of benchmark runs")
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args(argv)
    with zipfile.ZipFile(args.artifact) as z:
        manifest = json.loads(z.read("manifest.json"))
        report = json.loads(z.read("report.json"))
    function = args.function or manifest["entry_function"]
    dims = {d: args.batch for s in manifest["inputs"] for d in s["shape"] if isinstance(d, str)}
    for f in manifest.get("functions", []):
        if f["name"] == function:
            dims.update(f["dims"])  # a static-shape function's own sizes
    times = profile_dispatches(args.artifact, function, dims, args.threads, args.min_time)
    by_name = {d["dispatch"]: d for d in report.get("dispatches", [])}
    rows = sorted(times.us_per_call.items(), key=lambda kv: -kv[1])
    total = sum(times.us_per_call.values())
    print(f"{function}: {len(rows)} dispatches, {total:.1f} us of dispatch time per call "
          f"({args.threads} thread(s))")
    print("| dispatch | runs/call | us/call | share | root | loops | GFLOP/s | config |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, us in rows[:args.top]:
        d = by_name.get(executable_of(name, list(by_name)), {})
        runs = times.runs_per_call[name]
        flops = d.get("flops", -1)
        rate = f"{runs * flops / us / 1e3:.1f}" if flops and flops > 0 else ""
        print(f"| {name} | {runs:g} | {us:.1f} | {us / total:.0%} | {d.get('root', '')} {d.get('kind', '')} "
              f"| {d.get('loops', '')} | {rate} | {d.get('config_source', '')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
