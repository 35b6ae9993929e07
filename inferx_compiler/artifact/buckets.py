"""Batch buckets: the batch sizes an artifact is meant to run at, with their latency.

`inferx-compile --batch-sizes 1,2,4,8` keeps the batch dim dynamic (one module serves
every size) and records, per bucket, the latency measured right after the build when
the target's device is present on the build machine, or a roofline estimate otherwise
(FLOPs per row from the dispatch report over the target's peak rate, plus weight bytes
over its bandwidth). Measured latencies make the artifact's bytes vary from build to
build; `--no-measure` keeps builds reproducible. The batcher derives its defaults from
this table (`default_batching`).
"""

from __future__ import annotations

import math
from typing import Optional

from inferx_compiler.errors import InferXError, TargetError
from inferx_compiler.targets import Target
from inferx_compiler.tensor_spec import TensorSpec

LAUNCH_OVERHEAD_MS = 0.02


def parse_batch_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise TargetError(f"--batch-sizes expects comma-separated positive integers, got '{text}'") from None
    if not sizes or sizes[0] < 1:
        raise TargetError(f"--batch-sizes expects comma-separated positive integers, got '{text}'")
    return sizes


def check_batchable(inputs: list[TensorSpec]) -> None:
    leads = {s.shape[0] if s.shape else None for s in inputs}
    if len(leads) != 1 or not isinstance(next(iter(leads)), str):
        detail = ", ".join(f"{s.name}{s.format_shape()}" for s in inputs)
        raise InferXError(f"--batch-sizes needs every input to lead with the same dynamic batch dim; "
                          f"inputs are {detail}")


def estimate(target: Target, dispatches: list[dict], weight_bytes: int, sizes: list[int]) -> list[dict]:
    flops_per_row = sum(_flops_per_row(d) for d in dispatches)
    peak = (target.peak_gflops or 100.0) * 1e9
    bw = (target.bandwidth_gbs or 20.0) * 1e9
    rows = []
    for b in sizes:
        seconds = max(weight_bytes / bw, b * flops_per_row / peak) + LAUNCH_OVERHEAD_MS * 1e-3 * max(len(dispatches), 1)
        rows.append({"size": b, "latency_ms": round(seconds * 1e3, 4), "measured": False,
                     "device": target.runtime_driver or "none"})
    return rows


def _flops_per_row(d: dict) -> float:
    loops = [x if x > 0 else 1 for x in d.get("loops", [])]
    return (2 if d.get("kind") == "contraction" else 1) * math.prod(loops) if loops else 0.0


def present_device(target: Target) -> Optional[str]:
    """The device string to measure on, if this machine has the target's device kind."""
    if target.backend == "llvm-cpu" and target.name == "cpu":
        return "cpu"
    if target.backend == "cuda":
        try:
            import iree.runtime as rt

            if rt.get_driver("cuda").query_available_devices():
                return "cuda"
        except Exception:
            return None
    return None


def measure(artifact_path: str, device: str, sizes: list[int], rounds: int = 5) -> list[dict]:
    from inferx_compiler.runtime.session import load

    return measure_session(load(artifact_path, device=device), sizes, rounds)


def measure_session(session, sizes: list[int], rounds: int = 5, warmup: int = 1) -> list[dict]:
    from inferx_compiler.runtime.bench_inputs import random_feeds
    from inferx_compiler.runtime.timing import median_ms

    rows = []
    for b in sizes:
        feeds = random_feeds(session.inputs, b)
        ms = median_ms(lambda: session.run(feeds), rounds, warmup)
        rows.append({"size": b, "latency_ms": round(ms, 4), "measured": True,
                     "device": session.device_spec.executor})
    return rows


def serving_buckets(session) -> list[dict] | None:
    """The artifact's bucket table, re-measured on this session's device when the recorded
    figures are estimates or come from another kind of device."""
    table = session.artifact.manifest.batch_buckets
    if not table:
        return None
    executor = session.device_spec.executor
    if all(b.get("measured") and b.get("device") == executor for b in table):
        return table
    return measure_session(session, [b["size"] for b in table])


def default_batching(buckets: list[dict]):
    """max_batch_size = the largest bucket; preferred sizes = buckets within 80% of the best
    throughput (rows per ms); max_queue_delay = one execution of the smallest bucket (a
    lone request waits at most about as long as it runs); buckets = padding targets."""
    from inferx_compiler.runtime.batching import BatchingConfig

    sizes = [b["size"] for b in buckets]
    throughput = {b["size"]: b["size"] / max(b["latency_ms"], 1e-6) for b in buckets}
    best = max(throughput.values())
    preferred = tuple(s for s in sizes if throughput[s] >= 0.8 * best)
    delay_us = int(min(min(buckets, key=lambda b: b["size"])["latency_ms"] * 1e3, 5000))
    return BatchingConfig(max_batch_size=max(sizes), preferred_batch_sizes=preferred,
                          max_queue_delay_us=max(delay_us, 100)), tuple(sizes)
