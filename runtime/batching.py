"""Dynamic batching: requests queue up; a batch goes when it is full or its oldest
request has waited `max_queue_delay_us`; it is padded to a bucket, run once, and the
results are sliced back to each request.

Vocabulary as in Triton's dynamic batcher and Ray Serve's `@serve.batch`:
`max_batch_size`, `preferred_batch_sizes`, `max_queue_delay_us`. The decision logic
(`BatchQueue`) is pure and reads time from a replaceable clock, so tests drive it with a
fake clock and no sleeps; `DynamicBatcher` adds the worker thread and the futures.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import itertools
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

import numpy as np

from inferx_compiler.errors import InferXError, InputValidationError
from inferx_compiler.tensor_spec import TensorSpec

from .validation import validate_feeds


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

    def __post_init__(self):
        if self.max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        if any(s < 1 or s > self.max_batch_size for s in self.preferred_batch_sizes):
            raise ValueError(f"preferred_batch_sizes {self.preferred_batch_sizes} must lie in "
                             f"[1, max_batch_size={self.max_batch_size}]")


@dataclass
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

    def __len__(self) -> int:
        return self._count

    def add(self, request: PendingRequest) -> None:
        if self._count >= self.config.max_queue_size:
            raise QueueFullError(f"queue full ({self.config.max_queue_size} requests waiting)")
        request.seq = next(self._seq)
        request.state = _QUEUED
        group = self._groups.setdefault(request.shape_key, _Group())
        heapq.heappush(group.heap, (request.priority, request.seq, request))
        group.arrivals.append(request)
        group.rows += request.rows
        if request.deadline is not None:
            heapq.heappush(self._deadlines, (request.deadline, request.seq, request))
        self._count += 1

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

    def next_batch(self, now: float) -> tuple[Optional[Batch], Optional[float]]:
        """A batch ready to run now, or None and how long until one may be (None: idle)."""
        if not self._groups:
            return None, None
        key = min(self._groups, key=lambda k: self._groups[k].head().sort_key())
        group = self._groups[key]
        oldest = group.oldest()
        delay = self.config.max_queue_delay_us * 1e-6
        full = self.full_rows()
        ready = group.rows >= full or now - oldest >= delay - 1e-9  # 1 ns slack for float clocks
        if not ready:
            wait = oldest + delay - now
            if self._deadlines:
                wait = min(wait, self._deadlines[0][0] - now)
            return None, max(0.0, wait)
        return self._take(key), 0.0

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


@dataclass
class BatcherStats:
    batches: int = 0
    rows: int = 0
    padded_rows: int = 0
    requests: int = 0
    failed_batches: int = 0
    rejected: int = 0
    timed_out: int = 0
    batch_sizes: list = field(default_factory=list)

    @property
    def mean_batch(self) -> float:
        return self.rows / self.batches if self.batches else 0.0

    @property
    def padding_waste(self) -> float:
        total = self.rows + self.padded_rows
        return self.padded_rows / total if total else 0.0


class DynamicBatcher:
    """Thread-safe front of one session: `submit(feeds) -> Future`, `await submit_async(...)`.

    `run_batch(feeds) -> outputs` runs one padded batch (normally `InferenceSession.run`).
    With `start=False` nothing runs in the background: call `step()` (tests, fake clock).
    """

    def __init__(self, run_batch: Callable[[dict], dict], inputs: list[TensorSpec],
                 config: BatchingConfig = BatchingConfig(), *, buckets: tuple[int, ...] = (),
                 clock: Clock = None, start: bool = True, name: str = "batcher"):
        self._run_batch = run_batch
        self.inputs = inputs
        self.batch_dim = _batch_dim(inputs)
        self.config = config
        self.clock = clock or MonotonicClock()
        self.queue = BatchQueue(config, buckets)
        self.stats = BatcherStats()
        self._cond = threading.Condition()
        self._exec_lock = threading.Lock()  # one batch executes at a time (worker or inline)
        self._closed = False
        self._thread = None
        if start:
            self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
            self._thread.start()

    # -- submitting ---------------------------------------------------------------------
    def _request(self, feeds: dict, priority: int, timeout_s: Optional[float]) -> PendingRequest:
        arrays = validate_feeds(feeds, self.inputs)
        rows = int(next(iter(arrays.values())).shape[0])
        if rows > self.config.max_batch_size:
            raise InputValidationError(
                f"request has {rows} rows, more than max_batch_size={self.config.max_batch_size}")
        timeout_s = timeout_s if timeout_s is not None else self.config.default_timeout_s
        now = self.clock.monotonic()
        return PendingRequest(arrays, rows, _shape_key(arrays), priority, now,
                              now + timeout_s if timeout_s is not None else None, Future())

    def _enqueue(self, request: PendingRequest) -> None:
        """Add to the queue and wake the worker; the caller holds self._cond."""
        if self._closed:
            raise InferXError("batcher is closed")
        try:
            self.queue.add(request)
        except QueueFullError:
            self.stats.rejected += 1
            raise
        self.stats.requests += 1
        self._cond.notify()

    def submit(self, feeds: dict, *, priority: int = Priority.NORMAL,
               timeout_s: Optional[float] = None) -> Future:
        request = self._request(feeds, priority, timeout_s)
        with self._cond:
            self._enqueue(request)
        return request.future

    def run(self, feeds: dict, *, priority: int = Priority.NORMAL,
            timeout_s: Optional[float] = None) -> dict:
        """Submit and wait. When the queue is empty, nothing runs, and this request alone
        would form a batch at once anyway (it fills the batch, or there is no queue delay),
        it runs in the calling thread: the same decision, without two thread hand-offs."""
        request = self._request(feeds, priority, timeout_s)
        with self._cond:
            alone_ready = len(self.queue) == 0 and (
                request.rows >= self.queue.full_rows() or self.config.max_queue_delay_us == 0)
            inline = alone_ready and not self._closed and self._exec_lock.acquire(blocking=False)
            if inline:
                self.stats.requests += 1
            else:
                self._enqueue(request)
        if inline:
            try:
                request.future.set_running_or_notify_cancel()
                self._execute(Batch([request], request.rows, self.queue.bucket_for(request.rows)))
            finally:
                self._exec_lock.release()
        return request.future.result()

    async def submit_async(self, feeds: dict, **kw) -> dict:
        return await asyncio.wrap_future(self.submit(feeds, **kw))

    # -- running ------------------------------------------------------------------------
    def step(self) -> Optional[Batch]:
        """Form and run at most one batch at the clock's current time (no waiting)."""
        with self._cond:
            batch = self._form(self.clock.monotonic())[0]
        if batch is not None:
            with self._exec_lock:
                self._execute(batch)
        return batch

    def _form(self, now: float) -> tuple[Optional[Batch], Optional[float]]:
        for r in self.queue.expire(now):
            self.stats.timed_out += 1
            r.future.set_exception(RequestTimeoutError(
                f"request waited {now - r.enqueued:.3f}s in the queue, past its timeout"))
        batch, wait = self.queue.next_batch(now)
        if batch is not None:
            batch.requests = [r for r in batch.requests if r.future.set_running_or_notify_cancel()]
            batch.rows = sum(r.rows for r in batch.requests)
            if not batch.requests:
                return None, 0.0
            batch.bucket = self.queue.bucket_for(batch.rows)
        return batch, wait

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed and len(self.queue) == 0:
                        return
                    batch, wait = self._form(self.clock.monotonic())
                    if batch is not None:
                        break
                    if wait == 0.0:
                        continue
                    self._cond.wait(timeout=wait)
            with self._exec_lock:
                self._execute(batch)

    def _execute(self, batch: Batch) -> None:
        try:
            feeds = _assemble(batch, self.inputs)
            outputs = self._run_batch(feeds)
            results = _split(outputs, batch)
        except BaseException as e:  # the batch fails as a whole: every request of it, only those
            self.stats.failed_batches += 1
            for r in batch.requests:
                r.future.set_exception(e)
            return
        self.stats.batches += 1
        self.stats.rows += batch.rows
        self.stats.padded_rows += batch.padding
        self.stats.batch_sizes.append(batch.rows)
        for r, result in zip(batch.requests, results):
            r.future.set_result(result)

    def close(self, wait: bool = True) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if wait and self._thread is not None:
            self._thread.join()


def _batch_dim(inputs: list[TensorSpec]) -> str:
    names = {s.shape[0] for s in inputs if s.shape}
    if len(names) != 1 or not isinstance(next(iter(names)), str):
        raise InputValidationError(
            "dynamic batching needs every input to lead with the same dynamic dim (e.g. 'batch'); "
            f"this model's inputs lead with {sorted(map(str, names))}")
    return next(iter(names))


def _shape_key(arrays: dict) -> tuple:
    return tuple((a.shape[1:], a.dtype.str) for a in arrays.values())


def _assemble(batch: Batch, inputs: list[TensorSpec]) -> dict[str, np.ndarray]:
    """Concatenate along the batch dim; pad to the bucket by repeating the last row."""
    feeds = {}
    for spec in inputs:
        parts = [r.feeds[spec.name] for r in batch.requests]
        if batch.padding:
            last = parts[-1][-1:]
            parts.append(np.repeat(last, batch.padding, axis=0))
        feeds[spec.name] = np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
    return feeds


def _split(outputs: dict[str, np.ndarray], batch: Batch) -> list[dict]:
    for name, arr in outputs.items():
        if arr.ndim == 0 or arr.shape[0] != batch.bucket:
            raise InferXError(f"output '{name}' has leading dim {arr.shape[:1]}, expected the batch "
                              f"size {batch.bucket}: this model's outputs cannot be split per request")
    results, start = [], 0
    for r in batch.requests:
        results.append({name: arr[start:start + r.rows].copy() for name, arr in outputs.items()})
        start += r.rows
    return results
