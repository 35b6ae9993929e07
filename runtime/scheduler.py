"""Several devices under one scheduler, each with its own batcher, max batch and latency target.

Default routing policy (replaceable: any callable `(RequestInfo, lanes) -> Lane`):
  * large requests (rows >= `large_rows`, or any dynamic non-batch dim >= `long_dim`)
    go to the fastest device;
  * latency-sensitive requests go to the second-fastest device (the fastest if alone),
    keeping them out of the queues that big batches fill;
  * background requests (Priority.BACKGROUND) go to the slowest device;
  * everything else goes to the lane with the least expected wait (queued rows / speed).
Speed is a lane's measured throughput (rows per second at its max batch), taken from the
artifact's bucket latency table for that device kind or measured when the lane starts.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from inferx_compiler.runtime.batching import BatchingConfig, DynamicBatcher, Priority


@dataclass(frozen=True)
class RequestInfo:
    rows: int
    max_dim: int  # largest non-batch dim of any input (a sequence length, say)
    priority: int
    latency_sensitive: bool


@dataclass
class Lane:
    name: str
    batcher: DynamicBatcher
    speed: float  # rows per second at max batch; higher is faster
    latency_target_ms: Optional[float] = None
    # queues fed from event loops (loop_batching.LoopBatcher) in front of this lane's model
    loop_queues: list = field(default_factory=list)

    def expected_wait(self) -> float:
        queued = len(self.batcher.queue) + sum(len(q) for q in self.loop_queues)
        return queued / max(self.speed, 1e-9)


@dataclass(frozen=True)
class RoutingPolicy:
    large_rows: int = 8
    long_dim: int = 512

    def __call__(self, info: RequestInfo, lanes: Sequence[Lane]) -> Lane:
        by_speed = sorted(lanes, key=lambda lane: -lane.speed)
        if info.rows >= self.large_rows or info.max_dim >= self.long_dim:
            return by_speed[0]
        if info.latency_sensitive:
            return by_speed[1] if len(by_speed) > 1 else by_speed[0]
        if info.priority >= Priority.BACKGROUND:
            return by_speed[-1]
        return min(lanes, key=Lane.expected_wait)


class Scheduler:
    def __init__(self, lanes: Sequence[Lane], policy: Callable[[RequestInfo, Sequence[Lane]], Lane] = None):
        if not lanes:
            raise ValueError("a scheduler needs at least one lane")
        self.lanes = list(lanes)
        self.policy = policy or RoutingPolicy()
        self.routed: dict[str, int] = {lane.name: 0 for lane in self.lanes}

    def route(self, feeds: dict, *, priority: int = Priority.NORMAL, latency_sensitive: bool = False) -> Lane:
        if len(self.lanes) == 1:
            return self.lanes[0]
        arrays = [np.asarray(a) for a in feeds.values()]
        rows = int(arrays[0].shape[0]) if arrays and arrays[0].ndim else 1
        max_dim = max((d for a in arrays for d in a.shape[1:]), default=0)
        return self.policy(RequestInfo(rows, max_dim, priority, latency_sensitive), self.lanes)

    def submit(self, feeds: dict, *, priority: int = Priority.NORMAL, latency_sensitive: bool = False,
               timeout_s: Optional[float] = None) -> Future:
        lane = self.route(feeds, priority=priority, latency_sensitive=latency_sensitive)
        self.routed[lane.name] += 1
        return lane.batcher.submit(feeds, priority=priority, timeout_s=timeout_s)

    def run(self, feeds: dict, *, priority: int = Priority.NORMAL, latency_sensitive: bool = False,
            timeout_s: Optional[float] = None) -> dict:
        """Route, then submit and wait (see DynamicBatcher.run)."""
        lane = self.route(feeds, priority=priority, latency_sensitive=latency_sensitive)
        self.routed[lane.name] += 1
        return lane.batcher.run(feeds, priority=priority, timeout_s=timeout_s)

    def close(self) -> None:
        for lane in self.lanes:
            lane.batcher.close()


def measure_speed(run: Callable[[dict], dict], feeds: dict, rounds: int = 3) -> float:
    """Rows per second of `run` on `feeds` (median of a few runs after one warm-up)."""
    from inferx_compiler.runtime.timing import median_ms

    rows = next(iter(feeds.values())).shape[0]
    return rows / max(median_ms(lambda: run(feeds), rounds) * 1e-3, 1e-12)


def lane_for_session(session, config: BatchingConfig, *, name: Optional[str] = None,
                     speed: Optional[float] = None, latency_target_ms: Optional[float] = None) -> Lane:
    """A lane over one loaded session; speed measured at max batch unless given."""
    return lane_for_sessions([session], config, name=name, speed=speed, latency_target_ms=latency_target_ms)


def lane_for_sessions(sessions: Sequence, config: BatchingConfig, *, name: Optional[str] = None,
                      speed: Optional[float] = None, latency_target_ms: Optional[float] = None) -> Lane:
    """A lane over one or several instances of an artifact on one device kind (one queue, a
    batch runs on whichever instance is free); speed measured at max batch on one instance,
    times the instances, unless given."""
    from inferx_compiler.runtime.bench_inputs import random_feeds

    first = sessions[0]
    buckets = tuple(b["size"] for b in first.artifact.manifest.batch_buckets or [])
    batcher = DynamicBatcher.for_sessions(list(sessions), config, buckets=buckets, name=name or first.device)
    if speed is None:
        speed = len(sessions) * measure_speed(first.run, random_feeds(first.inputs, batcher.config.max_batch_size))
    return Lane(name or first.device, batcher, speed, latency_target_ms)
