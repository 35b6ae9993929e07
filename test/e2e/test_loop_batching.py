"""The event-loop batcher the servers use: batches formed in the loop, cheap ones run in it,
the rest in threads while the loop goes on; timeouts, a bounded queue, cancellation, failing
batches and draining as in the threaded batcher."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from inferx_compiler.errors import InferXError
from inferx_compiler.runtime.batching import BatchingConfig, DynamicBatcher, QueueFullError, RequestTimeoutError
from inferx_compiler.runtime.loop_batching import INLINE_BUDGET_S, LoopBatcher
from inferx_compiler.runtime.scheduler import Lane
from inferx_compiler.tensor_spec import TensorSpec

SPECS = [TensorSpec("x", "float32", ("batch", 4))]
SEQ_SPECS = [TensorSpec("x", "float32", ("batch", "seq"))]


class Model:
    """y = 2x; records each batch's rows and the thread it ran in; sleeps `seconds` a run (or
    spends them on the CPU, `spin`)."""

    def __init__(self, seconds: float = 0.0, fail_on=None, spin: bool = False):
        self.seconds = seconds
        self.spin = spin
        self.fail_on = fail_on
        self.rows: list[int] = []
        self.threads: list[int] = []
        self.started = threading.Event()  # set as the first batch starts

    def __call__(self, feeds):
        self.started.set()
        x = feeds["x"]
        self.rows.append(x.shape[0])
        self.threads.append(threading.get_ident())
        if self.seconds and self.spin:
            until = time.thread_time() + self.seconds
            while time.thread_time() < until:
                pass
        elif self.seconds:
            time.sleep(self.seconds)
        if self.fail_on is not None and np.any(x[:, 0] == self.fail_on):
            raise RuntimeError(f"boom on {self.fail_on}")
        return {"y": x * 2.0}


def loop_batcher(model, *, cheap: bool, specs=SPECS, **config) -> LoopBatcher:
    cfg = BatchingConfig(**{"max_batch_size": 8, "max_queue_delay_us": 2000, **config})
    batcher = DynamicBatcher(model, specs, cfg, start=False)
    return LoopBatcher(batcher, asyncio.get_running_loop(), full_batch_run_s=1e-6 if cheap else None)


def req(value: float, cols: int = 4) -> dict:
    return {"x": np.full((1, cols), value, np.float32)}


def run(coro):
    return asyncio.run(coro)


def test_concurrent_requests_share_a_batch_and_get_their_own_rows():
    async def main():
        model = Model()
        lb = loop_batcher(model, cheap=True)
        results = await asyncio.gather(*(lb.infer(req(v)) for v in range(8)))
        assert model.rows == [8]  # full at 8 rows: one batch, no waiting for the delay
        assert [r["y"][0, 0] for r in results] == [2.0 * v for v in range(8)]
        await lb.aclose()

    run(main())


def test_partial_batch_goes_after_the_queue_delay():
    async def main():
        model = Model()
        lb = loop_batcher(model, cheap=True, max_queue_delay_us=20_000)
        started = time.perf_counter()
        results = await asyncio.gather(*(lb.infer(req(v)) for v in range(3)))
        assert time.perf_counter() - started >= 0.015
        assert model.rows == [3] and [r["y"][0, 0] for r in results] == [0.0, 2.0, 4.0]
        await lb.aclose()

    run(main())


def test_cheap_batches_run_in_the_loop_thread_others_in_a_thread():
    async def main():
        loop_thread = threading.get_ident()
        cheap, costly = Model(), Model()
        for model, is_cheap in ((cheap, True), (costly, False)):
            lb = loop_batcher(model, cheap=is_cheap)
            await asyncio.gather(*(lb.infer(req(v)) for v in range(8)))
            await lb.aclose()
        assert cheap.threads == [loop_thread]
        assert costly.threads and costly.threads[0] != loop_thread

    run(main())


def test_the_loop_keeps_going_while_a_long_batch_runs():
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.001)
                ticks += 1

        lb = loop_batcher(Model(seconds=0.2), cheap=False, max_batch_size=1)
        task = asyncio.create_task(ticker())
        await lb.infer(req(1.0))
        task.cancel()
        assert ticks >= 20  # a run in the loop's thread would have left it at 0 or 1
        await lb.aclose()

    run(main())


def test_a_batch_that_runs_over_the_budget_leaves_the_loop_after_three_runs():
    async def main():
        loop_thread = threading.get_ident()
        model = Model(seconds=INLINE_BUDGET_S * 20, spin=True)
        lb = loop_batcher(model, cheap=True, max_batch_size=1)
        for v in range(5):
            await lb.infer(req(v))
        assert [t == loop_thread for t in model.threads] == [True, True, True, False, False]
        await lb.aclose()

    run(main())


def test_waiting_is_not_counted_against_the_budget():
    """A run that waits (for the interpreter lock, the scheduler, a device) without using the
    loop thread's CPU stays in the loop: what counts is the CPU time it takes."""

    async def main():
        loop_thread = threading.get_ident()
        model = Model(seconds=INLINE_BUDGET_S * 20)
        lb = loop_batcher(model, cheap=True, max_batch_size=1)
        for v in range(5):
            await lb.infer(req(v))
        assert all(t == loop_thread for t in model.threads)
        await lb.aclose()

    run(main())


def test_a_batch_bigger_than_the_measured_one_runs_in_a_thread():
    async def main():
        loop_thread = threading.get_ident()
        model = Model()
        lb = loop_batcher(model, cheap=True, specs=SEQ_SPECS)  # measured with seq = 1
        await lb.infer({"x": np.ones((1, 1), np.float32)})
        await lb.infer({"x": np.ones((1, 64), np.float32)})  # 64x the elements
        assert model.threads[0] == loop_thread and model.threads[1] != loop_thread
        await lb.aclose()

    run(main())


def test_timeout_while_the_only_slot_is_busy():
    async def main():
        model = Model(seconds=0.2)
        lb = loop_batcher(model, cheap=False, max_batch_size=1)
        first = asyncio.create_task(lb.infer(req(1.0)))
        # the first batch runs now, in the only slot (its thread says so; the loop keeps running)
        assert await asyncio.get_running_loop().run_in_executor(None, model.started.wait, 30)
        with pytest.raises(RequestTimeoutError):
            await lb.infer(req(2.0), timeout_s=0.01)
        assert (await first)["y"][0, 0] == 2.0
        assert lb.batcher.stats.timed_out == 1
        await lb.aclose()

    run(main())


def test_bounded_queue_refuses():
    async def main():
        lb = loop_batcher(Model(), cheap=True, max_queue_size=2, max_queue_delay_us=50_000)
        waiting = [asyncio.create_task(lb.infer(req(v))) for v in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(QueueFullError):
            await lb.infer(req(9.0))
        assert [(await w)["y"][0, 0] for w in waiting] == [0.0, 2.0]
        await lb.aclose()

    run(main())


def test_a_cancelled_request_is_left_out_of_its_batch():
    async def main():
        model = Model()
        lb = loop_batcher(model, cheap=True, max_queue_delay_us=20_000)
        kept = asyncio.create_task(lb.infer(req(1.0)))
        gone = asyncio.create_task(lb.infer(req(2.0)))
        await asyncio.sleep(0.001)
        gone.cancel()
        assert (await kept)["y"][0, 0] == 2.0
        assert model.rows == [1]
        await lb.aclose()

    run(main())


def test_a_failing_batch_fails_only_its_own_requests():
    async def main():
        model = Model(fail_on=7.0)
        lb = loop_batcher(model, cheap=True, max_batch_size=2)
        results = await asyncio.gather(*(lb.infer(req(v)) for v in (6.0, 7.0, 8.0, 9.0)), return_exceptions=True)
        assert isinstance(results[0], RuntimeError) and isinstance(results[1], RuntimeError)
        assert [r["y"][0, 0] for r in results[2:]] == [16.0, 18.0]
        assert lb.batcher.stats.failed_batches == 1
        await lb.aclose()

    run(main())


def test_close_runs_what_is_queued_then_refuses():
    async def main():
        model = Model()
        lb = loop_batcher(model, cheap=False, max_queue_delay_us=30_000)
        waiting = [asyncio.create_task(lb.infer(req(v))) for v in range(3)]
        await asyncio.sleep(0)
        await lb.aclose()
        assert [w.result()["y"][0, 0] for w in waiting] == [0.0, 2.0, 4.0]
        with pytest.raises(InferXError, match="closed"):
            await lb.infer(req(1.0))

    run(main())


def test_invalid_feeds_are_refused_before_queueing():
    async def main():
        lb = loop_batcher(Model(), cheap=True)
        with pytest.raises(InferXError):
            await lb.infer({"x": np.ones((1, 5), np.float32)})
        assert len(lb) == 0
        await lb.aclose()

    run(main())


def test_lane_wait_counts_requests_queued_in_loops():
    async def main():
        lb = loop_batcher(Model(), cheap=True, max_queue_delay_us=50_000)
        lane = Lane("cpu#0", lb.batcher, speed=100.0)
        lane.loop_queues.append(lb.queue)
        waiting = [asyncio.create_task(lb.infer(req(v))) for v in range(4)]
        await asyncio.sleep(0)
        assert lane.expected_wait() == pytest.approx(4 / 100.0)
        await asyncio.gather(*waiting)
        assert lane.expected_wait() == 0.0
        await lb.aclose()

    run(main())
