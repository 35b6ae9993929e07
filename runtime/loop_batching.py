"""Dynamic batching driven from an asyncio event loop: the servers' way into a model.

`DynamicBatcher` serves callers in threads: each request is handed to a batch thread and its
result handed back, two thread wake-ups and interpreter-lock hand-offs a request. The servers'
requests all arrive on one event loop, and for a small model those hand-offs cost more than the
model (the trivial model behind the HTTP front end, measured in process without sockets: about
9 k requests/s through the batch threads, 36 k with the queue kept in the loop). A
`LoopBatcher` keeps one lane's queue in the loop's own thread:

  * requests are checked (the batcher's `prepare`) and queued in the loop: no lock, no thread
    wake-up a request; the same `BatchQueue` decides when a batch goes (full, or its oldest
    request has waited `max_queue_delay_us`: a loop timer), with the same priorities, queue
    bound and timeouts;
  * a cheap batch runs in the loop's thread: no hand-off at all, the loop held that long. Cheap:
    the lane's full batch ran within `inline_budget_s` when its speed was measured (inputs with
    their dynamic non-batch dims at 1), this batch has no more elements than that one, and
    batches of its bucket and shape have not taken more than four times the budget of the loop
    thread's CPU time three times in a row. (CPU time, not wall time: a run's waits for the interpreter
    lock, held by grpc's poller thread under gRPC load, or for the OS scheduler, would be waited
    for in any thread; counted, they sent the trivial model's batches to threads for good, and
    HTTP fell from 14.5 to 11.7 k requests/s.) Other
    batches run in a thread per input-buffer slot (pipeline depth x instances, as the batch
    threads would): one hand-off each way a batch, while the loop goes on reading requests;
  * outputs are split and the requests' futures resolved in the loop.

The batcher's own threads stay idle (nothing is queued on them); its slots are used here, so a
batcher served through a LoopBatcher must not also be given requests through `submit`/`run`.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from inferx_compiler.errors import InferXError
from inferx_compiler.runtime.batch_queue import Batch, BatchQueue, Priority, QueueFullError
from inferx_compiler.runtime.batching import DynamicBatcher, fail_expired

__all__ = ["INLINE_BUDGET_S", "LoopBatcher"]

# A batch may run in the loop's thread when it takes at most this long: about what two thread
# hand-offs cost on a busy 2-core machine, and short enough not to stall the I/O.
INLINE_BUDGET_S = 100e-6
# A bucket and shape leave the loop after this many consecutive runs over _SLOW_FACTOR x the
# budget. Not the budget itself: a bucket's first runs allocate its buffers and call plan, and a
# rarely used bucket runs cold (the trivial model: 130-560 us of CPU for such runs, 15 us warm).
_SLOW_RUNS = 3
_SLOW_FACTOR = 4


class LoopBatcher:
    """One lane's requests, queued and batched in `loop`'s thread (see the module docstring).
    Every method but the constructor runs in the loop's thread."""

    def __init__(self, batcher: DynamicBatcher, loop: asyncio.AbstractEventLoop, *,
                 full_batch_run_s: Optional[float] = None, inline_budget_s: float = INLINE_BUDGET_S,
                 name: str = "batcher"):
        """`full_batch_run_s`: how long one run at max_batch_size takes (dynamic non-batch dims
        at 1); None: unknown, every batch runs in a thread."""
        self.batcher = batcher
        self.loop = loop
        self.inline_budget_s = inline_budget_s
        self.name = name
        self.queue = BatchQueue(batcher.config, batcher.queue.buckets)
        cheap = full_batch_run_s is not None and full_batch_run_s <= inline_budget_s
        self.cheap_elements = batcher.config.max_batch_size * _row_elements(batcher.inputs) if cheap else -1
        self.slow_runs: dict[tuple, int] = {}  # (bucket, shape key) -> consecutive runs over the budget
        self._free_slots = list(range(batcher.slots - 1, -1, -1))
        self._in_flight = 0  # batches running in the pool's threads
        self._pool: Optional[ThreadPoolExecutor] = None
        self._pump_handle: Optional[asyncio.Handle] = None
        self._pump_at = 0.0
        self._closed = False
        self._drained: Optional[asyncio.Event] = None

    def __len__(self) -> int:
        return len(self.queue)

    # -- requests -------------------------------------------------------------------------
    async def infer(self, feeds: dict, *, priority: int = Priority.NORMAL,
                    timeout_s: Optional[float] = None) -> dict:
        """Queue one request and wait for its outputs. Raises InputValidationError,
        QueueFullError, RequestTimeoutError, the batch's own exception, or InferXError once
        closed; cancelling the caller drops the request if it has not run yet."""
        if self._closed:
            raise InferXError("batcher is closed")
        request = self.batcher.prepare(feeds, priority, timeout_s, self.loop.create_future())
        stats = self.batcher.stats
        try:
            wake = self.queue.add(request)
        except QueueFullError:
            stats.rejected += 1
            raise
        stats.requests += 1
        if wake:
            self._schedule(0.0)
        return await request.future

    # -- forming and running batches -------------------------------------------------------
    def _schedule(self, delay: float) -> None:
        """Make sure the queue is looked at within `delay` seconds."""
        when = self.loop.time() + delay
        if self._pump_handle is not None:
            if self._pump_at <= when:
                return
            self._pump_handle.cancel()
        self._pump_at = when
        self._pump_handle = (self.loop.call_soon(self._pump) if delay <= 0
                             else self.loop.call_later(delay, self._pump))

    def _pump(self) -> None:
        """Fail expired requests, then start every batch that may go now."""
        self._pump_handle = None
        clock = self.batcher.clock
        now = clock.monotonic()
        fail_expired(self.queue, now, self.batcher.stats)
        while self._free_slots:
            batch, wait = self.queue.next_batch(now, device_busy=self._in_flight >= self.batcher.instances)
            if batch is None:
                if wait is not None:
                    self._schedule(wait)
                break
            batch = self._live(batch)
            if batch is None:
                continue
            if self._in_flight == 0 and self._cheap(batch):
                self._run_inline(batch)
            else:
                self._start(batch, self._free_slots.pop())
            now = clock.monotonic()
        self._check_drained()

    def _live(self, batch: Batch) -> Optional[Batch]:
        """The batch without the requests whose callers gave up while they were queued."""
        live = [r for r in batch.requests if not r.future.done()]
        if len(live) == len(batch.requests):
            return batch
        if not live:
            return None
        rows = sum(r.rows for r in live)
        return Batch(live, rows, self.queue.bucket_for(rows))

    def _cheap(self, batch: Batch) -> bool:
        key = (batch.bucket, batch.requests[0].shape_key)
        slow = self.slow_runs.get(key)
        if slow is None:  # not run here yet: no bigger than the measured full batch?
            return batch.bucket * sum(_elements(shape) for shape, _ in key[1]) <= self.cheap_elements
        return slow < _SLOW_RUNS

    def _run_inline(self, batch: Batch) -> None:
        formed, cpu = self.batcher.clock.monotonic(), time.thread_time()
        outcome = self.batcher.execute(batch, self.batcher.inline_slot)
        key = (batch.bucket, batch.requests[0].shape_key)
        over = time.thread_time() - cpu > self.inline_budget_s * _SLOW_FACTOR
        self.slow_runs[key] = self.slow_runs.get(key, 0) + 1 if over else 0
        self.batcher.hand_out(batch, outcome, formed)

    def _start(self, batch: Batch, slot: int) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.batcher.slots, thread_name_prefix=f"{self.name}-run")
        self._in_flight += 1
        formed = self.batcher.clock.monotonic()
        self._pool.submit(self.batcher.execute, batch, slot).add_done_callback(
            lambda done: self._post(self._finished, batch, slot, done.result(), formed))


    def _post(self, callback, *args) -> None:
        try:
            self.loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: nobody waits for these results any more
            pass

    def _finished(self, batch: Batch, slot: int, outcome, formed: float) -> None:
        self._in_flight -= 1
        self._free_slots.append(slot)
        self.batcher.hand_out(batch, outcome, formed)
        self._pump()

    # -- shutdown ---------------------------------------------------------------------------
    def _check_drained(self) -> None:
        if self._drained is not None and self._in_flight == 0 and len(self.queue) == 0:
            self._drained.set()

    async def aclose(self) -> None:
        """Refuse new requests, run the queued ones (partial batches still wait their delay),
        then stop the run threads."""
        self._closed = True
        if self._drained is None:
            self._drained = asyncio.Event()
        self._schedule(0.0)
        self._check_drained()
        await self._drained.wait()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None


def _elements(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _row_elements(specs) -> int:
    """Elements of one row of every input, dynamic non-batch dims at 1 (as the speed probe)."""
    return sum(_elements(d if isinstance(d, int) else 1 for d in spec.shape[1:]) for spec in specs)
