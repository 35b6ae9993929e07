"""Dynamic batching: requests queue up; a batch goes when it is full or its oldest request has
waited `max_queue_delay_us`; it is padded to a bucket, run once, and the results are sliced
back to each request.

The decision logic lives in `batch_queue.BatchQueue` (pure, fake-clock testable). Here are
the threads and futures around it, arranged so that per-request Python work stays small and
never stalls the device:

  * `submit()` checks a request against the model's inputs once per distinct shape signature
    (later requests with the same signature skip the full check) and queues it;
  * `pipeline_depth` batch threads per model instance (2 on GPUs, 1 on CPUs by default) each
    form a batch and gather its request rows straight into their own set of the session's
    reused input buffers (`gather`); runs are serialized on an instance, so while one batch
    runs (the interpreter lock is released then) the next is already formed and written,
    waiting for the device;
  * several model instances (sessions of one artifact, Triton's instance_group `count`) share
    the one queue: batch thread i runs on instance i mod n, so n batches run at once (one per
    core with `cpu:sync` instances), and partial batches wait only while every instance is busy;
  * a completion thread slices the outputs back and resolves the futures, so no batch thread
    spends device time handing results out (when nothing else waits, the batch thread resolves
    them itself: one thread hand-off fewer for a lone request).

A model whose inputs do not all lead with one dynamic dim cannot batch: each request then runs
alone, through the same queue and threads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import queue
import threading
from collections import Counter, deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from inferx_compiler.errors import InferXError, InputValidationError
from inferx_compiler.tensor_spec import TensorSpec
from inferx_compiler.runtime.batch_queue import (Batch, BatchingConfig, BatchQueue, Clock, MonotonicClock, PendingRequest, Priority,
                          QueueFullError, RequestTimeoutError)
from inferx_compiler.runtime.buffers import concat_padded
from inferx_compiler.runtime.interpreter import tune_for_serving
from inferx_compiler.runtime.validation import strip_fixed_inputs, validate_feeds

__all__ = ["Batch", "BatchingConfig", "BatchQueue", "BatcherStats", "DynamicBatcher", "Priority",
           "QueueFullError", "RequestTimeoutError"]

# gather(parts, rows, bucket, slot) -> outputs: parts[i] lists input i's arrays, one per request,
# in batch order; the runner writes them (plus padding up to `bucket` rows) into input buffers of
# its own for `slot` (one slot per batch thread: two slots are never written at once).
GatherRunner = Callable[[list, int, int, int], dict]

_MAX_SIGNATURES = 256  # distinct accepted shape signatures remembered per batcher


@dataclass
class BatcherStats:
    batches: int = 0
    rows: int = 0
    padded_rows: int = 0
    requests: int = 0
    failed_batches: int = 0
    rejected: int = 0
    timed_out: int = 0
    batch_histogram: Counter = field(default_factory=Counter)  # rows in a batch -> batches
    exec_seconds: deque = field(default_factory=lambda: deque(maxlen=4096))  # recent batches' run times
    # recent batches' service times: formed -> run -> every result handed out
    service_seconds: deque = field(default_factory=lambda: deque(maxlen=4096))

    def observe_exec(self, seconds: float) -> None:
        self.exec_seconds.append(seconds)

    def exec_ms(self, percentile: float = 50) -> float:
        """A percentile of the recent batches' run times (gathering the rows and running them)."""
        return _percentile_ms(self.exec_seconds, percentile)

    def service_ms(self, percentile: float = 50) -> float:
        """A percentile of the recent batches' service times (gather, run, hand the results out:
        Triton's compute input + infer + output)."""
        return _percentile_ms(self.service_seconds, percentile)

    @property
    def batch_sizes(self) -> list[int]:
        """The distinct batch sizes run so far."""
        return sorted(self.batch_histogram)

    @property
    def mean_batch(self) -> float:
        return self.rows / self.batches if self.batches else 0.0

    @property
    def padding_waste(self) -> float:
        total = self.rows + self.padded_rows
        return self.padded_rows / total if total else 0.0


def _percentile_ms(seconds: deque, percentile: float) -> float:
    return float(np.percentile(seconds, percentile)) * 1e3 if seconds else float("nan")


class DynamicBatcher:
    """Thread-safe front of one model: `submit(feeds) -> Future`, `await submit_async(...)`,
    `run(feeds)` (submit and wait).

    `run_batch(feeds) -> outputs` runs one padded batch (e.g. `InferenceSession.run`); `gather`,
    when given (see `for_session`), runs a batch from the request arrays directly, skipping the
    intermediate concatenation. `instance_runs` (one `run_batch` per model instance, see
    `for_sessions`) lets that many batches run at once. `default_pipeline_depth` applies when
    the config leaves `pipeline_depth` unset. With `start=False` nothing runs in the background: call `step()`
    (tests, fake clock).
    """

    def __init__(self, run_batch: Callable[[dict], dict], inputs: list[TensorSpec],
                 config: BatchingConfig = BatchingConfig(), *, buckets: tuple[int, ...] = (),
                 clock: Clock = None, start: bool = True, name: str = "batcher",
                 gather: Optional[GatherRunner] = None, default_pipeline_depth: int = 1,
                 instance_runs: Optional[list[Callable[[dict], dict]]] = None,
                 fixed_inputs: Optional[dict] = None):
        self.inputs = inputs
        self._fixed = fixed_inputs or {}  # --input-value inputs: accepted at their values, dropped
        self._names = tuple(s.name for s in inputs)
        # Inputs that do not all lead with one dynamic dim cannot share a batch: each request then
        # runs alone, through the same queue (priorities, timeouts, bounded size) and threads.
        self.batchable = _has_batch_dim(inputs)
        if self.batchable:
            self._gather = gather or _concatenating_runner(instance_runs or [run_batch], self._names)
        else:
            config = dataclasses.replace(config, max_batch_size=1, preferred_batch_sizes=(), max_queue_delay_us=0)
            buckets = ()
            self._gather = _whole_request_runner(instance_runs or [run_batch], self._names)
        self.config = config
        # model instances: batches that can run at once (slot i runs on instance i mod n)
        self.instances = len(instance_runs) if instance_runs else 1
        self.pipeline_depth = config.pipeline_depth or default_pipeline_depth
        self._slots = self.pipeline_depth * self.instances  # batch threads; slot _slots: the inline run()
        self.clock = clock or MonotonicClock()
        self.queue = BatchQueue(config, buckets)
        self.stats = BatcherStats()
        self._signatures: dict[tuple, tuple] = {}  # accepted shape signature -> (rows, shape key)
        self._cond = threading.Condition()
        self._in_flight = 0  # batches taken from the queue and not yet run (under self._cond)
        self._stats_lock = threading.Lock()
        self._batch_threads: list[threading.Thread] = []
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._completions: queue.SimpleQueue = queue.SimpleQueue()
        # observer(batch, now) is called in the batch thread as each batch starts (now: the
        # batcher's clock, as the requests' `enqueued`): queue-delay and batch-size metrics. It
        # must be quick and must not raise. None: nothing is called.
        self.batch_observer: Optional[Callable[[Batch, float], None]] = None
        if start:
            tune_for_serving(config.switch_interval_us, config.gc_threshold)
            self._batch_threads = [threading.Thread(target=self._batch_loop, args=(slot,), daemon=True,
                                                    name=f"{name}-batch{slot}")
                                   for slot in range(self._slots)]
            self._threads = self._batch_threads + [
                threading.Thread(target=self._completion_loop, name=f"{name}-complete", daemon=True)]
            for t in self._threads:
                t.start()

    @classmethod
    def for_session(cls, session, config: BatchingConfig = BatchingConfig(), **kw) -> "DynamicBatcher":
        """A batcher over a loaded `InferenceSession` that gathers rows into its input buffers
        (pipelined two batches deep on GPUs unless the config says otherwise)."""
        return cls.for_sessions([session], config, **kw)

    @classmethod
    def for_sessions(cls, sessions: list, config: BatchingConfig = BatchingConfig(), **kw) -> "DynamicBatcher":
        """One queue over several instances of one artifact (loaded sessions); each batch runs on
        one of them, gathered into that instance's input buffers."""
        depth = 2 if sessions[0].device_spec.kind == "cuda" else 1
        return cls(sessions[0].run, sessions[0].inputs, config, gather=_instances_runner(sessions),
                   default_pipeline_depth=depth, instance_runs=[s.run for s in sessions],
                   fixed_inputs=getattr(sessions[0], "fixed_inputs", None), **kw)

    # -- submitting ---------------------------------------------------------------------
    def prepare(self, feeds: dict, priority: int = Priority.NORMAL, timeout_s: Optional[float] = None,
                future=None) -> PendingRequest:
        """Check `feeds` against the model's inputs (InputValidationError) and wrap them as a
        request stamped with this batcher's clock, resolved through `future` (a new
        concurrent.futures.Future unless given: `loop_batching` passes asyncio futures)."""
        if self._fixed:
            feeds = strip_fixed_inputs(feeds, self._fixed)
        arrays, rows, shape_key = self._check(feeds)
        timeout_s = timeout_s if timeout_s is not None else self.config.default_timeout_s
        now = self.clock.monotonic()
        return PendingRequest(arrays, rows, shape_key, priority, now,
                              now + timeout_s if timeout_s is not None else None,
                              Future() if future is None else future)

    def _check(self, feeds: dict) -> tuple[dict, int, tuple]:
        """Feeds as contiguous arrays keyed by input name, their rows, and their shape key.
        A signature (names, shapes, dtypes) that passed the full check once is trusted after."""
        try:
            signature = tuple((k, v.shape, v.dtype, v.flags.c_contiguous) for k, v in feeds.items())
        except AttributeError:  # not a dict of numpy arrays: the full check converts or says why
            signature = None
        known = self._signatures.get(signature) if signature is not None else None
        if known is not None:
            return dict(feeds), known[0], known[1]  # a copy: the caller may reuse its dict
        arrays = validate_feeds(feeds, self.inputs)
        if self.batchable:
            rows = int(next(iter(arrays.values())).shape[0])
            if rows > self.config.max_batch_size:
                raise InputValidationError(
                    f"request has {rows} rows, more than max_batch_size={self.config.max_batch_size}")
            shape_key = tuple((a.shape[1:], a.dtype.str) for a in arrays.values())
        else:  # one request, one run
            rows, shape_key = 1, tuple((a.shape, a.dtype.str) for a in arrays.values())
        if signature is not None and len(self._signatures) < _MAX_SIGNATURES and \
                all(a is feeds[k] for k, a in arrays.items()) and tuple(feeds) == self._names:
            self._signatures[signature] = (rows, shape_key)
        return arrays, rows, shape_key

    def _enqueue(self, request: PendingRequest) -> None:
        """Add to the queue and wake the batch thread; the caller holds self._cond."""
        if self._closed:
            raise InferXError("batcher is closed")
        try:
            wake = self.queue.add(request)
        except QueueFullError:
            self.stats.rejected += 1
            raise
        self.stats.requests += 1
        if wake:  # otherwise the batch thread is busy, or its timed wait already covers this
            self._cond.notify()

    def submit(self, feeds: dict, *, priority: int = Priority.NORMAL,
               timeout_s: Optional[float] = None) -> Future:
        request = self.prepare(feeds, priority, timeout_s)
        with self._cond:
            self._enqueue(request)
        return request.future

    def run(self, feeds: dict, *, priority: int = Priority.NORMAL,
            timeout_s: Optional[float] = None) -> dict:
        """Submit and wait. When the queue is empty, nothing runs, and this request alone
        would form a batch at once anyway (it fills the batch, or there is no queue delay),
        it runs in the calling thread: the same decision, without two thread hand-offs."""
        request = self.prepare(feeds, priority, timeout_s)
        with self._cond:
            alone_ready = len(self.queue) == 0 and (
                request.rows >= self.queue.full_rows() or self.config.max_queue_delay_us == 0)
            inline = alone_ready and not self._closed and self._in_flight == 0
            if inline:
                self.stats.requests += 1
                self._in_flight += 1
            else:
                self._enqueue(request)
        if inline:
            request.future.set_running_or_notify_cancel()
            batch = Batch([request], request.rows, self.queue.bucket_for(request.rows))
            formed = self.clock.monotonic()
            self._finish(batch, self.execute(batch, self.inline_slot), formed)
        return request.future.result()

    async def submit_async(self, feeds: dict, **kw) -> dict:
        return await asyncio.wrap_future(self.submit(feeds, **kw))

    # -- running ------------------------------------------------------------------------
    def step(self) -> Optional[Batch]:
        """Form, run and resolve at most one batch at the clock's current time (no waiting)."""
        with self._cond:
            batch = self._form(self.clock.monotonic())[0]
            if batch is not None:
                self._in_flight += 1
        if batch is not None:
            formed = self.clock.monotonic()
            self._finish(batch, self.execute(batch, 0), formed)
        return batch

    def _form(self, now: float) -> tuple[Optional[Batch], Optional[float]]:
        """Expire timed-out requests, then take the next batch if one is ready (under self._cond)."""
        fail_expired(self.queue, now, self.stats)
        batch, wait = self.queue.next_batch(now, device_busy=self._in_flight >= self.instances)
        if batch is not None:
            live = [r for r in batch.requests if r.future.set_running_or_notify_cancel()]
            if len(live) != len(batch.requests):  # some were cancelled while queued
                if not live:
                    return None, 0.0
                batch = Batch(live, sum(r.rows for r in live), 0)
                batch.bucket = self.queue.bucket_for(batch.rows)
        return batch, wait

    def _batch_loop(self, slot: int) -> None:
        try:
            while True:
                with self._cond:
                    batch = self._wait_for_batch()
                    if batch is None:
                        return
                    self._in_flight += 1
                formed = self.clock.monotonic()
                outcome = self.execute(batch, slot)
                with self._cond:
                    self._in_flight -= 1
                    self._cond.notify()  # the device is free: a partial batch may go now
                    idle = len(self.queue) == 0 and self._in_flight == 0
                if idle:  # nothing else to run: hand the results out here, one thread hand-off fewer
                    self.hand_out(batch, outcome, formed)
                else:
                    self._completions.put((batch, outcome, formed))
        finally:
            self._completions.put(slot)  # this batch thread is done

    def _finish(self, batch: Batch, outcome, formed: float) -> None:
        """Resolve a batch run outside the batch threads (inline run(), step())."""
        with self._cond:
            self._in_flight -= 1
        self.hand_out(batch, outcome, formed)

    def hand_out(self, batch: Batch, outcome, formed: float) -> None:
        """Resolve the batch's futures; its service time (formed -> every result handed out) is
        recorded: gathering the inputs, running, and handing the outputs back."""
        resolve(batch, outcome, split=self.batchable)
        elapsed = self.clock.monotonic() - formed  # (one clock per batcher: a fake one in tests)
        with self._stats_lock:
            self.stats.service_seconds.append(elapsed)

    def _wait_for_batch(self) -> Optional[Batch]:
        """The next batch to run, waiting as the queue says; None once closed and drained.
        The caller holds self._cond."""
        while True:
            if self._closed and len(self.queue) == 0:
                return None
            batch, wait = self._form(self.clock.monotonic())
            if batch is not None:
                return batch
            if wait != 0.0:
                self._cond.wait(timeout=wait)  # None: until a submit, a finished batch or close

    def _completion_loop(self) -> None:
        running = len(self._batch_threads)
        while running:
            item = self._completions.get()
            if isinstance(item, int):  # a batch thread ended
                running -= 1
            else:
                self.hand_out(*item)

    @property
    def slots(self) -> int:
        """Input-buffer slots for batches run at once (pipeline depth x instances): slot i runs
        on instance i mod `instances`; the batch threads use slots 0..slots-1."""
        return self._slots

    @property
    def inline_slot(self) -> int:
        """The slot of batches run outside the batch threads (`run()` inline, `step()`)."""
        return self._slots

    def execute(self, batch: Batch, slot: int):
        """Run one batch from input-buffer slot `slot`; returns its outputs, or the exception
        it raised (the batch fails as a whole: every request of it, and only those). Two batches
        must never run from one slot at once."""
        if self.batch_observer is not None:
            self.batch_observer(batch, self.clock.monotonic())
        parts = [[r.feeds[name] for r in batch.requests] for name in self._names]
        started = self.clock.monotonic()
        try:
            outputs = self._gather(parts, batch.rows, batch.bucket, slot)
            if self.batchable:
                _check_splittable(outputs, batch.bucket)
        except BaseException as e:
            with self._stats_lock:
                self.stats.failed_batches += 1
            return e
        elapsed = self.clock.monotonic() - started
        with self._stats_lock:
            self.stats.observe_exec(elapsed)
            self.stats.batches += 1
            self.stats.rows += batch.rows
            self.stats.padded_rows += batch.padding
            self.stats.batch_histogram[batch.rows] += 1
        return outputs

    def close(self, wait: bool = True) -> None:
        """Stop taking requests; queued ones still run. With wait, return once all are resolved."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if wait:
            for t in self._threads:
                t.join()


def fail_expired(queue: BatchQueue, now: float, stats: BatcherStats) -> None:
    """Take the requests past their deadline out of `queue` and fail them (RequestTimeoutError);
    a request whose caller already gave up (its future cancelled) is only dropped."""
    for r in queue.expire(now):
        stats.timed_out += 1
        if not r.future.done():
            r.future.set_exception(RequestTimeoutError(
                f"request waited {now - r.enqueued:.3f}s in the queue, past its timeout"))


def resolve(batch: Batch, outcome, split: bool = True) -> None:
    """Hand each request its rows of the outputs (or the batch's exception); without `split`,
    the batch is one request and gets the outputs whole. Requests whose future is already done
    (an asyncio future cancelled while its batch ran) are skipped."""
    if isinstance(outcome, BaseException):
        for r in batch.requests:
            if not r.future.done():
                r.future.set_exception(outcome)
        return
    if not split:
        if not batch.requests[0].future.done():
            batch.requests[0].future.set_result(outcome)
        return
    start = 0
    for r in batch.requests:
        stop = start + r.rows
        if not r.future.done():
            r.future.set_result({name: arr[start:stop].copy() for name, arr in outcome.items()})
        start = stop


def _check_splittable(outputs: dict, bucket: int) -> None:
    for name, arr in outputs.items():
        if arr.ndim == 0 or arr.shape[0] != bucket:
            raise InferXError(f"output '{name}' has leading dim {arr.shape[:1]}, expected the batch "
                              f"size {bucket}: this model's outputs cannot be split per request")


def _instances_runner(sessions: list) -> GatherRunner:
    """gather() over n instances: slot i runs on instance i mod n, in its buffer slot i div n
    (so no two batch threads ever write the same buffers; the inline run() has a slot of its
    own, and each instance serializes its own runs)."""
    n = len(sessions)

    def run(parts: list, rows: int, bucket: int, slot: int) -> dict:
        return sessions[slot % n].run_gathered(parts, rows, bucket, slot // n)

    return run


def _concatenating_runner(runs: list[Callable[[dict], dict]], names: tuple[str, ...]) -> GatherRunner:
    """gather() for plain `run_batch(feeds)` callables (one per instance): concatenate along the
    batch dim and pad to the bucket by repeating the last row."""

    def run(parts: list, rows: int, bucket: int, slot: int) -> dict:
        alone = len(parts[0]) == 1 and rows == bucket  # one request filling its bucket: as it is
        return runs[slot % len(runs)]({name: arrays[0] if alone else concat_padded(arrays, rows, bucket)
                                       for name, arrays in zip(names, parts)})

    return run


def _whole_request_runner(runs: list[Callable[[dict], dict]], names: tuple[str, ...]) -> GatherRunner:
    """gather() for models that cannot batch: the one request's feeds, as they are, on
    instance slot mod n."""

    def run(parts: list, rows: int, bucket: int, slot: int) -> dict:
        return runs[slot % len(runs)]({name: arrays[0] for name, arrays in zip(names, parts)})

    return run


def _has_batch_dim(inputs: list[TensorSpec]) -> bool:
    """Whether every input leads with the same dynamic dim (requests can share a batch)."""
    leads = {s.shape[0] if s.shape else None for s in inputs}
    return len(leads) == 1 and isinstance(next(iter(leads)), str)
