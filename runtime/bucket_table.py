"""The artifact's batch buckets at serve time: measured on this device where the recorded
figures are estimates or from another device, and turned into batching limits."""

from __future__ import annotations

from inferx_compiler.runtime.batching import BatchingConfig
from inferx_compiler.runtime.bench_inputs import random_feeds
from inferx_compiler.runtime.timing import median_ms


def measure_session(session, sizes: list[int], rounds: int = 5, warmup: int = 1) -> list[dict]:
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
    sizes = [b["size"] for b in buckets]
    throughput = {b["size"]: b["size"] / max(b["latency_ms"], 1e-6) for b in buckets}
    best = max(throughput.values())
    preferred = tuple(s for s in sizes if throughput[s] >= 0.8 * best)
    delay_us = int(min(min(buckets, key=lambda b: b["size"])["latency_ms"] * 1e3, 5000))
    return BatchingConfig(max_batch_size=max(sizes), preferred_batch_sizes=preferred,
                          max_queue_delay_us=max(delay_us, 100)), tuple(sizes)
