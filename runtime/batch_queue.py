"""The batching decision, apart from threads and futures: pending requests grouped by their
non-batch shape, a priority order, deadlines, and when a batch goes (full, or its oldest
request has waited `max_queue_delay_us`). Time comes from a replaceable clock, so tests
drive every decision with a fake clock and no sleeps.

Vocabulary as in Triton's dynamic batcher and Ray Serve's `@serve.batch`:
`max_batch_size`, `preferred_batch_sizes`, `max_queue_delay_us`.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Optional, Protocol

import numpy as np

from inferx_compiler.errors import InferXError


class QueueFullError(InferXError):
    """The batcher's queue holds `max_queue_size` requests already: rejected, retry later."""


class RequestTimeoutError(InferXError, TimeoutError):
    """The request waited in the queue past its timeout and was not run."""


class Clock(Protocol):
    def monotonic(self) -> float: ...


class MonotonicClock:
    def monotonic(self) -> float:
        return time.monotonic()


class Priority:
    HIGH = 0
    NORMAL = 1
    BACKGROUND = 2


@dataclass(frozen=True)
class BatchingConfig:
    max_batch_size: int = 8
    max_queue_delay_us: int = 2000
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_size: int = 4096
    default_timeout_s: Optional[float] = None
    # The interpreter's thread switch interval while a batcher runs (None: leave it, the default:
    # a library leaves the process alone; inferx-serve opts in, see interpreter.py). Python's
    # default (5 ms) delays the batch thread's return from the device.
    switch_interval_us: Optional[int] = None
    # Collect garbage less often while serving (None: leave the collector alone, the default;
    # inferx-serve opts in): with default thresholds full collections stretched p99 2.5x.
    gc_threshold: Optional[int] = None
    # Batches in flight: with 2, while one runs on the device the next is formed and its rows
    # are written into a second set of input buffers, so a GPU waits for no Python work. None:
    # 2 on GPUs, 1 on CPUs (there the "device" is the same cores the Python threads run on).
    pipeline_depth: Optional[int] = None

    def __post_init__(self):
        if self.pipeline_depth is not None and self.pipeline_depth < 1:
            raise ValueError("pipeline_depth must be >= 1")
        if self.max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        if any(s < 1 or s > self.max_batch_size for s in self.preferred_batch_sizes):
            raise ValueError(f"preferred_batch_sizes {self.preferred_batch_sizes} must lie in "
                             f"[1, max_batch_size={self.max_batch_size}]")


@dataclass(slots=True, eq=False)
class PendingRequest:
    feeds: dict[str, np.ndarray]
    rows: int
    shape_key: tuple
    priority: int
    enqueued: float
    deadline: Optional[float]
    future: Future
    seq: int = 0
    state: int = 0

    def sort_key(self) -> tuple:
        return (self.priority, self.seq)


@dataclass
class Batch:
    requests: list[PendingRequest]
    rows: int
    bucket: int

    @property
    def padding(self) -> int:
        return self.bucket - self.rows


class _Group:
    """Requests of one non-batch shape: a priority heap, plus arrival order for the oldest."""

    def __init__(self):
        self.heap: list = []  # (priority, seq, request)
        self.arrivals: deque = deque()  # requests in arrival order (lazily cleaned)
        self.rows = 0

    def oldest(self) -> float:
        while self.arrivals and self.arrivals[0].state != _QUEUED:
            self.arrivals.popleft()
        return self.arrivals[0].enqueued

    def head(self):
        while self.heap and self.heap[0][2].state != _QUEUED:
            heapq.heappop(self.heap)
        return self.heap[0][2] if self.heap else None


_QUEUED, _TAKEN, _DROPPED = 0, 1, 2


class BatchQueue:
    """Pending requests grouped by non-batch shape; decides when and what to batch.

    Every operation is O(log n) in the queue length: expired and cancelled requests are
    dropped lazily (a deadline heap, and a check when a request reaches a batch).
    """

    def __init__(self, config: BatchingConfig, buckets: tuple[int, ...] = ()):
        self.config = config
        self.buckets = tuple(sorted(set(buckets) | set(config.preferred_batch_sizes)))
        self._groups: dict[tuple, _Group] = {}
        self._deadlines: list = []  # (deadline, seq, request)
        self._count = 0
        self._seq = itertools.count()
        self._full_rows = self.full_rows()

    def __len__(self) -> int:
        return self._count

    def add(self, request: PendingRequest) -> bool:
        """Queue a request; True when this may change when the next batch goes (the queue was
        empty, the request's group is now full, or it has a deadline): wake the batch thread."""
        if self._count >= self.config.max_queue_size:
            raise QueueFullError(f"queue full ({self.config.max_queue_size} requests waiting)")
        request.seq = next(self._seq)
        request.state = _QUEUED
        group = self._groups.get(request.shape_key)
        if group is None:
            group = self._groups[request.shape_key] = _Group()
        heapq.heappush(group.heap, (request.priority, request.seq, request))
        group.arrivals.append(request)
        group.rows += request.rows
        if request.deadline is not None:
            heapq.heappush(self._deadlines, (request.deadline, request.seq, request))
        self._count += 1
        return self._count == 1 or group.rows >= self._full_rows or request.deadline is not None

    def _drop(self, request: PendingRequest) -> None:
        request.state = _DROPPED
        group = self._groups[request.shape_key]
        group.rows -= request.rows
        self._count -= 1
        if group.head() is None:
            del self._groups[request.shape_key]

    def expire(self, now: float) -> list[PendingRequest]:
        """Remove requests past their deadline (returned, to be failed)."""
        expired = []
        while self._deadlines and self._deadlines[0][0] <= now:
            request = heapq.heappop(self._deadlines)[2]
            if request.state == _QUEUED:
                self._drop(request)
                expired.append(request)
        return expired

    def next_batch(self, now: float, device_busy: bool = False) -> tuple[Optional[Batch], Optional[float]]:
        """A batch ready to run now, or None and how long until one may be (None: no timed
        wake-up needed). A batch is ready when full, or when its oldest request has waited
        `max_queue_delay_us`; while the device is busy with another batch only full batches
        are (a partial one would only wait for the device, while more requests could join it)."""
        if not self._groups:
            return None, None
        full = self._full_rows
        if device_busy:
            ready = [k for k, g in self._groups.items() if g.rows >= full]
            if not ready:
                return None, self._until_next_deadline(now)
            return self._take(min(ready, key=lambda k: self._groups[k].head().sort_key())), 0.0
        key = min(self._groups, key=lambda k: self._groups[k].head().sort_key())
        group = self._groups[key]
        oldest = group.oldest()
        delay = self.config.max_queue_delay_us * 1e-6
        if group.rows >= full or now - oldest >= delay - 1e-9:  # 1 ns slack for float clocks
            return self._take(key), 0.0
        wait = oldest + delay - now
        deadline = self._until_next_deadline(now)
        return None, max(0.0, wait if deadline is None else min(wait, deadline))

    def _until_next_deadline(self, now: float) -> Optional[float]:
        return max(0.0, self._deadlines[0][0] - now) if self._deadlines else None

    def full_rows(self) -> int:
        """Rows at which a batch goes without waiting: max_batch_size, or the largest
        preferred size when there are preferred sizes."""
        return min(self.config.max_batch_size, max(self.config.preferred_batch_sizes, default=10**9))

    def _take(self, key: tuple) -> Batch:
        group = self._groups[key]
        taken, rows = [], 0
        while (r := group.head()) is not None:
            if taken and rows + r.rows > self.config.max_batch_size:
                break
            heapq.heappop(group.heap)
            r.state = _TAKEN
            taken.append(r)
            rows += r.rows
        group.rows -= rows
        self._count -= len(taken)
        if group.head() is None:
            del self._groups[key]
        return Batch(taken, rows, self.bucket_for(rows))

    def bucket_for(self, rows: int) -> int:
        i = bisect.bisect_left(self.buckets, rows)
        return self.buckets[i] if i < len(self.buckets) else rows
