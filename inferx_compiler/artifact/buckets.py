"""Batch buckets: the batch sizes an artifact is meant to run at, with their latency.

`inferx-compile --batch-sizes 1,2,4,8` keeps the batch dim dynamic (one module serves
every size) and records, per bucket, the latency measured right after the build when
the target's device is present on the build machine, or a roofline estimate otherwise
(FLOPs per row from the dispatch report over the target's peak rate, plus weight bytes
over its bandwidth). Measured latencies make the artifact's bytes vary from build to
build; `--no-measure` keeps builds reproducible. The batcher derives its defaults from
this table (`runtime/bucket_table.py`: `default_batching`).
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
    from inferx_compiler.runtime.bucket_table import measure_session
    from inferx_compiler.runtime.session import load

    return measure_session(load(artifact_path, device=device), sizes, rounds)
