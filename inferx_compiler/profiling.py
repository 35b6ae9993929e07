"""Time each dispatch of an artifact's function on this CPU (IREE's host-execution profiling).

`profile_dispatches(artifact, function, batch)` runs the function with `iree-benchmark-module`
(`--device_profiling_mode=host-execution`: the local HAL records every dispatch it runs), reads
`iree-profile statistics --format=jsonl` and returns the mean microseconds per run of each
dispatch export (comparable between builds of one model: an export runs as often in each). Inputs
are seeded random data of the manifest's shapes (dynamic dims take `batch`). Used by
`inferx-compile --tune` and tools/bench/dispatch_profile.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field

import numpy as np

from .errors import InferXError


@dataclass
class DispatchTimes:
    calls: int  # queue executions seen (not always one per function call: IREE may split one)
    us_per_run: dict[str, float] = field(default_factory=dict)  # export -> mean us per dispatch run
    runs: dict[str, int] = field(default_factory=dict)  # export -> dispatch runs recorded

    @property
    def us_per_call(self) -> dict[str, float]:
        """Estimated us per function call (runs spread over the queue executions)."""
        return {k: self.us_per_run[k] * self.runs[k] / self.calls for k in self.us_per_run}

    @property
    def runs_per_call(self) -> dict[str, float]:
        return {k: self.runs[k] / self.calls for k in self.runs}


def _tool(name: str) -> str:
    cand = os.path.join(os.path.dirname(sys.executable), name)
    return cand if os.path.exists(cand) else (shutil.which(name) or name)


def _write_inputs(manifest: dict, dims: dict, workdir: str) -> list[str]:
    rng = np.random.default_rng(0)
    flags = []
    for i, spec in enumerate(manifest["inputs"]):
        shape = [d if isinstance(d, int) else dims.get(d, 1) for d in spec["shape"]]
        dtype = np.dtype(spec["dtype"])
        arr = (rng.standard_normal(shape) if dtype.kind == "f" else rng.integers(0, 100, size=shape)).astype(dtype)
        path = os.path.join(workdir, f"in{i}.npy")
        np.save(path, arr)
        flags.append(f"--input=@{path}")
    return flags


def executable_of(export_name: str, executables: list[str]) -> str:
    """The executable an export (`main$b1_dispatch_5_matmul_16x576x16_f32`) belongs to."""
    best = ""
    for name in executables:
        if (export_name == name or export_name.startswith(name + "_")) and len(name) > len(best):
            best = name
    return best or export_name


@contextlib.contextmanager
def _benchmark_command(artifact: str, function: str, dims: dict, threads: int, min_time: float):
    """The artifact unpacked in a temporary folder, and the `iree-benchmark-module` command that
    runs `function` on seeded inputs with its weights; yields (command, folder)."""
    workdir = tempfile.mkdtemp(prefix="inferx-profile-")
    try:
        with zipfile.ZipFile(artifact) as z:
            z.extractall(workdir)
        with open(os.path.join(workdir, "manifest.json")) as f:
            manifest = json.load(f)
        cmd = [_tool("iree-benchmark-module"), f"--module={os.path.join(workdir, 'module.vmfb')}",
               f"--function={function}", "--device=local-task", f"--task_topology_max_group_count={threads}",
               f"--benchmark_min_time={min_time}s", *_write_inputs(manifest, dims, workdir)]
        if manifest.get("weights"):
            cmd.append(f"--parameters={manifest['weights']['scope']}="
                       f"{os.path.join(workdir, manifest['weights']['member'])}")
        yield cmd, workdir
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run(cmd: list[str], what: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise InferXError(f"{what} failed ({os.path.basename(cmd[0])}): {done.stderr[-1500:]}")
    return done.stdout


def profile_dispatches(artifact: str, function: str, dims: dict, threads: int = 1,
                       min_time: float = 1.0) -> DispatchTimes:
    with _benchmark_command(artifact, function, dims, threads, min_time) as (cmd, workdir):
        profile = os.path.join(workdir, "p.ireeprof")
        _run(cmd + ["--device_profiling_mode=host-execution", f"--device_profiling_output={profile}"],
             f"profiling {function}")
        stats = _run([_tool("iree-profile"), "statistics", "--format=jsonl", profile], "iree-profile")
    calls, rows = 0, []
    for line in stats.splitlines():
        rec = json.loads(line)
        if rec.get("row_type") == "host_execution_queue_operation" and rec.get("event_name") == "execute":
            calls += rec["sample_count"]
        elif rec.get("row_type") == "host_execution_function":
            rows.append(rec)
    times = DispatchTimes(max(calls, 1))
    for rec in rows:
        name = rec["function_name"]
        times.runs[name] = max(rec["sample_count"], 1)
        times.us_per_run[name] = rec["total_duration_ns"] / times.runs[name] / 1e3
    return times


def benchmark_function(artifact: str, function: str, dims: dict, threads: int = 1,
                       min_time: float = 1.0) -> float:
    """Median milliseconds per call of an artifact's function (iree-benchmark-module, no
    profiling)."""
    with _benchmark_command(artifact, function, dims, threads, min_time) as (cmd, _):
        out = _run(cmd + ["--benchmark_repetitions=5", "--benchmark_report_aggregates_only=true",
                          "--benchmark_format=json"], f"benchmarking {function}")
    report = json.loads(out[out.index("{"):])
    for row in report["benchmarks"]:
        if row.get("aggregate_name") == "median":
            unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[row.get("time_unit", "ns")]
            return row["real_time"] * unit
    raise InferXError(f"benchmarking {function}: no median in iree-benchmark-module's report")
