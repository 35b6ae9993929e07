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
import math
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field

import numpy as np

from inferx_compiler.errors import InferXError


@dataclass
class DispatchTimes:
    calls: int  # function calls profiled
    us_per_run: dict[str, float] = field(default_factory=dict)  # export -> mean us per dispatch run
    runs: dict[str, int] = field(default_factory=dict)  # export -> dispatch runs recorded

    @property
    def us_per_call(self) -> dict[str, float]:
        """Microseconds per function call."""
        return {k: self.us_per_run[k] * self.runs[k] / self.calls for k in self.us_per_run}

    @property
    def runs_per_call(self) -> dict[str, float]:
        return {k: self.runs[k] / self.calls for k in self.runs}


def _tool(name: str) -> str:
    cand = os.path.join(os.path.dirname(sys.executable), name)
    return cand if os.path.exists(cand) else (shutil.which(name) or name)


def _generation_inputs(manifest: dict, function: str) -> list[np.ndarray]:
    """Inputs of a generation entry point (frontend/llm/export.py's signatures): tokens, start
    positions (past half the context, so attention reads a realistic cache span), lengths, a
    block table of distinct blocks a row, the cache (zeros) and, for sampling entries, greedy
    sampling parameters."""
    record = manifest["generation"]
    entry = next((e for e in record["entries"] if e["name"] == function), None)
    if entry is None:
        raise InferXError(f"no entry point {function}; the artifact has {', '.join(e['name'] for e in record['entries'])}")
    config, cache = record["config"], record["cache"]
    b, t, width = entry["batch"], entry["length"], int(cache["table_width"])
    usable = int(cache["blocks"]) - 1
    table = (np.arange(b * width).reshape(b, width) % usable + 1).astype(np.int64)
    start = np.full(b, max(0, min(record["max_seq"] // 2, record["max_seq"] - t)), np.int64)
    row = int(cache.get("row", config["head_dim"]))
    dtype = {"bfloat16": np.uint16}.get(cache["dtype"], cache["dtype"])  # (bf16 zeros are zero bits)
    cache_zeros = np.zeros((config["layers"], 2, int(cache["blocks"]), config["kv_heads"], int(cache["block_size"]), row),
                           dtype)
    tokens = np.full((b, t), 5, np.int64)
    if entry["kind"] == "decode":
        arrays = [tokens, start, table, cache_zeros]
    else:
        arrays = [tokens, start, np.full(b, t, np.int64), table, cache_zeros]
    if entry["output"] == "sample":
        arrays += [np.zeros(b, np.float32), np.zeros(b, np.int64), np.ones(b, np.float32), np.zeros(b, np.int64)]
    return arrays


def _write_inputs(manifest: dict, dims: dict, workdir: str, function: str = "") -> list[str]:
    if manifest.get("generation"):
        arrays = _generation_inputs(manifest, function)
        for i, arr in enumerate(arrays):
            np.save(os.path.join(workdir, f"in{i}.npy"), arr)
        return [f"--input=@{os.path.join(workdir, f'in{i}.npy')}" for i in range(len(arrays))]
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
               f"--benchmark_min_time={min_time}s", *_write_inputs(manifest, dims, workdir, function)]
        if manifest.get("weights"):
            cmd.append(f"--parameters={manifest['weights']['scope']}="
                       f"{os.path.join(workdir, manifest['weights']['member'])}")
        yield cmd, workdir
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# glibc's malloc keeps a freed block for the next call instead of unmapping it: no mmap for
# large blocks, no trimming of the heap. iree-benchmark-module allocates a call's intermediates
# afresh every call (ResNet-50 b8's: one 78 MB block), and glibc maps a block that large anew
# each time, so the first dispatch writing each page took its page faults: the stem's 11 ms
# were profiled as 19.5 and the first 56x56 layers' twice theirs. `load(...).run()` allocates
# that storage once (runtime/output_entry.py), so the profile is taken the same way. Other C
# libraries ignore the variable.
KEEP_FREED_MEMORY = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296"


def _benchmark_env() -> dict:
    env = dict(os.environ)
    env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES"), KEEP_FREED_MEMORY]))
    return env


def _run(cmd: list[str], what: str) -> str:
    env = _benchmark_env() if os.path.basename(cmd[0]).startswith("iree-benchmark-module") else None
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise InferXError(f"{what} failed ({os.path.basename(cmd[0])}): {done.stderr[-1500:]}")
    return done.stdout


MAX_PROFILED_CALLS = 10_000  # bounds the profile's size for microsecond-sized functions


def profile_dispatches(artifact: str, function: str, dims: dict, threads: int = 1,
                       min_time: float = 1.0) -> DispatchTimes:
    """Per-dispatch host times over a known number of calls: one timed call sizes the run, then
    the profiled run makes exactly that many calls (`--benchmark_min_time=Nx`: no estimation
    runs). Queue executions are not calls: IREE may split one call into several."""
    with _benchmark_command(artifact, function, dims, threads, min_time) as (cmd, workdir):
        once = _run(_with_min_time(cmd, "1x") + ["--benchmark_format=json"], f"timing {function}")
        seconds = _median_ms(once, function) / 1e3
        calls = max(2, min(MAX_PROFILED_CALLS, math.ceil(min_time / max(seconds, 1e-7))))
        profile = os.path.join(workdir, "p.ireeprof")
        _run(_with_min_time(cmd, f"{calls}x") + ["--device_profiling_mode=host-execution",
                                                  f"--device_profiling_output={profile}"], f"profiling {function}")
        stats = _run([_tool("iree-profile"), "statistics", "--format=jsonl", profile], "iree-profile")
    rows = [rec for rec in map(json.loads, stats.splitlines()) if rec.get("row_type") == "host_execution_function"]
    times = DispatchTimes(calls)
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
    return _median_ms(out, function)


def _median_ms(out: str, function: str) -> float:
    """Milliseconds per call from iree-benchmark-module's JSON report: the median aggregate, or
    the single run's time when it has no aggregates."""
    rows = json.loads(out[out.index("{"):])["benchmarks"]
    for row in [r for r in rows if r.get("aggregate_name") == "median"] or rows[:1]:
        unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[row.get("time_unit", "ns")]
        return row["real_time"] * unit
    raise InferXError(f"benchmarking {function}: no time in iree-benchmark-module's report")


def _with_min_time(cmd: list[str], value: str) -> list[str]:
    """`cmd` with its --benchmark_min_time set to `value` ("2.5s", or "40x": exactly 40 calls)."""
    return [f"--benchmark_min_time={value}" if c.startswith("--benchmark_min_time=") else c for c in cmd]
