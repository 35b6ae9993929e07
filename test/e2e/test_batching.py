"""The dynamic batcher: decisions under a fake clock (no sleeps), then real threads."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import threading

import numpy as np
import pytest

from helpers import run_clients
from inferx_compiler.runtime.batching import (BatchingConfig, DynamicBatcher, Priority, QueueFullError,
                                              RequestTimeoutError)
from inferx_compiler.tensor_spec import TensorSpec

SPECS = [TensorSpec("x", "float32", ("batch", 4))]


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def advance_us(self, us: float) -> None:
        self.now += us * 1e-6


class Recorder:
    """A fake model: y = 2x + row index marker; records every batch it ran."""

    def __init__(self, fail_on=None):
        self.batches = []
        self.fail_on = fail_on

    def __call__(self, feeds):
        x = feeds["x"]
        self.batches.append(x.shape[0])
        if self.fail_on is not None and np.any(x[:, 0] == self.fail_on):
            raise RuntimeError(f"boom on {self.fail_on}")
        return {"y": x * 2.0, "s": x.sum(axis=1)}


def req(value: float, rows: int = 1) -> dict:
    return {"x": np.full((rows, 4), value, np.float32)}


def doubled_by_clients(batcher, clients: int, each: int) -> list:
    """`clients` threads each submit `each` distinct values to a y = 2x model and wait for each;
    the batcher is closed after. Returns the (client, i) whose answer was not its own."""
    errors = []

    def client(tid):
        for i in range(each):
            value = tid * 1000 + i
            if batcher.submit(req(value)).result(timeout=30)["y"][0, 0] != 2.0 * value:
                errors.append((tid, i))

    run_clients(client, clients)
    batcher.close()
    return errors


def make(config=BatchingConfig(max_batch_size=4, max_queue_delay_us=1000), buckets=(), **kw):
    clock, model = FakeClock(), Recorder(**kw)
    return DynamicBatcher(model, SPECS, config, buckets=buckets, clock=clock, start=False), clock, model


def test_waits_for_delay_then_runs_partial_batch():
    b, clock, model = make()
    f1, f2 = b.submit(req(1)), b.submit(req(2))
    assert b.step() is None  # neither full nor old enough
    clock.advance_us(999)
    assert b.step() is None
    clock.advance_us(1)
    batch = b.step()
    assert batch.rows == 2 and model.batches == [2]
    assert f1.result()["y"].tolist() == [[2.0] * 4] and f2.result()["s"].tolist() == [8.0]


def test_full_batch_goes_at_once_and_respects_max():
    b, clock, model = make()
    futures = [b.submit(req(i)) for i in range(6)]
    assert b.step().rows == 4  # full: no waiting
    assert b.step() is None  # the remaining 2 wait for the delay
    clock.advance_us(1000)
    assert b.step().rows == 2
    assert [f.result()["s"][0] for f in futures] == [4.0 * i for i in range(6)]


def test_pads_to_bucket_and_slices_back():
    b, clock, model = make(buckets=(1, 4, 8))
    f = [b.submit(req(i, rows=r)) for i, r in ((1, 2), (2, 1))]
    clock.advance_us(1000)
    batch = b.step()
    assert (batch.rows, batch.bucket, batch.padding) == (3, 4, 1)
    assert model.batches == [4]
    assert f[0].result()["y"].shape == (2, 4) and f[1].result()["y"].shape == (1, 4)
    assert b.stats.padding_waste == pytest.approx(1 / 4)


def test_preferred_batch_size_forms_without_waiting():
    b, clock, model = make(BatchingConfig(max_batch_size=8, max_queue_delay_us=10_000,
                                          preferred_batch_sizes=(2,)))
    b.submit(req(1))
    assert b.step() is None
    b.submit(req(2))
    assert b.step().rows == 2


def test_different_non_batch_shapes_never_share_a_batch():
    specs = [TensorSpec("x", "float32", ("batch", "seq"))]
    clock = FakeClock()
    seen = []
    b = DynamicBatcher(lambda feeds: seen.append(feeds["x"].shape) or {"y": feeds["x"]}, specs,
                       BatchingConfig(max_batch_size=8, max_queue_delay_us=10), clock=clock, start=False)
    fa = b.submit({"x": np.zeros((1, 5), np.float32)})
    fb = b.submit({"x": np.zeros((1, 7), np.float32)})
    fc = b.submit({"x": np.zeros((1, 5), np.float32)})
    clock.advance_us(10)
    b.step(), b.step()
    assert sorted(seen) == [(1, 7), (2, 5)]
    assert fa.result()["y"].shape == (1, 5) and fb.result()["y"].shape == (1, 7) and fc.done()


def test_priority_goes_first():
    b, clock, model = make(BatchingConfig(max_batch_size=2, max_queue_delay_us=0))
    low = [b.submit(req(i), priority=Priority.BACKGROUND) for i in range(2)]
    high = b.submit(req(9), priority=Priority.HIGH)
    b.step()
    assert high.done() and not all(f.done() for f in low)


def test_bounded_queue_rejects():
    b, clock, model = make(BatchingConfig(max_batch_size=4, max_queue_size=2))
    b.submit(req(1)), b.submit(req(2))
    with pytest.raises(QueueFullError):
        b.submit(req(3))
    assert b.stats.rejected == 1


def test_timeout_and_cancellation():
    b, clock, model = make(BatchingConfig(max_batch_size=4, max_queue_delay_us=5000))
    slow = b.submit(req(1), timeout_s=0.001)
    cancelled = b.submit(req(2))
    kept = b.submit(req(3))
    assert cancelled.cancel()
    clock.advance_us(5000)
    b.step()
    with pytest.raises(RequestTimeoutError):
        slow.result()
    assert kept.result()["s"][0] == 12.0
    assert model.batches == [1]  # only the live request ran


def test_exception_reaches_exactly_its_batch():
    b, clock, model = make(BatchingConfig(max_batch_size=2, max_queue_delay_us=0), fail_on=7.0)
    first = [b.submit(req(7)), b.submit(req(1))]
    second = [b.submit(req(2)), b.submit(req(3))]
    b.step(), b.step()
    for f in first:
        with pytest.raises(RuntimeError, match="boom on 7"):
            f.result()
    assert [f.result()["s"][0] for f in second] == [8.0, 12.0]


def test_validation_happens_at_submit():
    b, clock, model = make()
    with pytest.raises(Exception, match="expected shape"):
        b.submit({"x": np.zeros((1, 3), np.float32)})
    with pytest.raises(Exception, match="more than max_batch_size"):
        b.submit(req(1, rows=5))


def test_many_threads_each_get_their_own_result():
    """Thousands of distinct requests from many threads: none lost, none swapped."""
    model = Recorder()
    b = DynamicBatcher(model, SPECS, BatchingConfig(max_batch_size=16, max_queue_delay_us=200))
    n_threads, per_thread = 16, 150
    errors = []

    def client(tid):
        rng = random.Random(tid)
        for i in range(per_thread):
            value = tid * 10_000 + i
            rows = rng.choice((1, 1, 2, 3))
            out = b.submit(req(value, rows)).result(timeout=30)
            if out["y"].shape != (rows, 4) or not np.all(out["y"] == 2.0 * value):
                errors.append((tid, i))

    run_clients(client, n_threads)
    b.close()
    assert not errors
    assert b.stats.requests == n_threads * per_thread
    assert b.stats.batches < n_threads * per_thread  # some batching happened
    assert max(b.stats.batch_sizes) <= 16


def test_asyncio_submit():
    model = Recorder()
    b = DynamicBatcher(model, SPECS, BatchingConfig(max_batch_size=8, max_queue_delay_us=500))

    async def main():
        return await asyncio.gather(*(b.submit_async(req(i)) for i in range(20)))

    results = asyncio.run(main())
    b.close()
    assert [r["s"][0] for r in results] == [4.0 * i for i in range(20)]


def test_run_inline_when_idle_and_ready():
    """run() executes in the calling thread when the request alone would go at once."""
    ran_in = []
    b = DynamicBatcher(lambda f: ran_in.append(threading.get_ident()) or {"y": f["x"]}, SPECS,
                       BatchingConfig(max_batch_size=1, max_queue_delay_us=0))
    out = b.run(req(3))
    b.close()
    assert ran_in == [threading.get_ident()] and out["y"][0, 0] == 3.0
    assert b.stats.requests == 1 and b.stats.batches == 1


def test_run_waits_for_batching_when_it_should():
    """With a queue delay and room in the batch, run() queues like submit(): no inline run."""
    ran_in = []
    b = DynamicBatcher(lambda f: ran_in.append(threading.get_ident()) or {"y": f["x"]}, SPECS,
                       BatchingConfig(max_batch_size=8, max_queue_delay_us=200))
    b.run(req(1))
    b.close()
    assert ran_in and ran_in[0] != threading.get_ident()


def test_partial_batches_wait_while_the_device_is_busy():
    """While another batch runs, only a full batch goes; once the device is free, the delay rule."""
    from inferx_compiler.runtime.batching import BatchQueue
    from inferx_compiler.runtime.batch_queue import PendingRequest
    from concurrent.futures import Future

    q = BatchQueue(BatchingConfig(max_batch_size=4, max_queue_delay_us=100))

    def add(n, t):
        for _ in range(n):
            q.add(PendingRequest({}, 1, ((4,), "<f4"), Priority.NORMAL, t, None, Future()))

    add(2, t=0.0)
    assert q.next_batch(1.0, device_busy=True) == (None, None)  # past the delay, but the device is busy
    add(2, t=1.0)
    batch, _ = q.next_batch(1.0, device_busy=True)
    assert batch.rows == 4  # full: goes even while busy
    add(1, t=2.0)
    assert q.next_batch(2.0 + 200e-6, device_busy=False)[0].rows == 1  # free: the delay rule applies


def test_request_keeps_its_arrays_when_the_caller_reuses_its_dict():
    b, clock, model = make()
    feeds = req(1)
    f1 = b.submit(feeds)  # the signature is now known: later submits take the fast path
    feeds["x"] = np.full((1, 4), 7, np.float32)
    f2 = b.submit(feeds)
    clock.advance_us(1000)
    b.step()
    assert f1.result()["y"][0, 0] == 2.0 and f2.result()["y"][0, 0] == 14.0
    with pytest.raises(Exception, match="expected shape"):  # a new signature gets the full check
        b.submit({"x": np.zeros((1, 5), np.float32)})


def test_pipelined_batches_with_many_threads():
    """Two batches in flight (pipeline_depth=2) over a slow fake model: nothing lost or swapped."""
    import time

    def slow(feeds):
        time.sleep(0.001)
        return {"y": feeds["x"] * 2.0}

    b = DynamicBatcher(slow, SPECS, BatchingConfig(max_batch_size=8, max_queue_delay_us=300, pipeline_depth=2))
    assert not doubled_by_clients(b, clients=12, each=100)
    assert b.stats.requests == 1200 and b.stats.rows == 1200


def test_inputs_without_a_batch_dim_run_one_request_per_batch():
    """No shared dynamic leading dim: requests never share a run and get the outputs whole."""
    specs = [TensorSpec("x", "float32", (2, 4))]
    seen = []
    b = DynamicBatcher(lambda f: seen.append(f["x"].shape) or {"y": f["x"] + 1}, specs,
                       BatchingConfig(max_batch_size=8, max_queue_delay_us=1000), start=False)
    assert not b.batchable and b.config.max_batch_size == 1
    futures = [b.submit({"x": np.full((2, 4), i, np.float32)}) for i in range(3)]
    while b.step() is not None:
        pass
    assert seen == [(2, 4)] * 3
    assert [f.result()["y"][0, 0] for f in futures] == [1.0, 2.0, 3.0]


def test_instances_run_batches_at_once():
    """Two model instances share one queue: while one is stuck in a batch, a partial batch goes
    to the other (the device is not busy until every instance is), and each request's result
    comes from the instance that ran its batch."""
    gate, started, holder = threading.Event(), threading.Event(), []
    lock = threading.Lock()

    def instance(index):
        def run(feeds):
            with lock:
                first = not holder
                if first:
                    holder.append(index)
            if first:  # the first batch, wherever it runs, holds its instance until the gate opens
                started.set()
                gate.wait(timeout=30)
            return {"y": feeds["x"] * 2.0, "who": np.full(feeds["x"].shape[0], index, np.int32)}
        return run

    runs = [instance(0), instance(1)]
    # A long delay: the four first requests form one full batch however slowly this thread
    # submits them on a loaded machine (with 100 us, a descheduled submitter split them).
    b = DynamicBatcher(runs[0], SPECS, BatchingConfig(max_batch_size=4, max_queue_delay_us=200_000),
                       instance_runs=runs)
    assert b.instances == 2 and b.pipeline_depth == 1
    first = [b.submit(req(i)) for i in range(4)]  # a full batch, taken at once
    assert started.wait(timeout=30)
    late = b.submit(req(9))  # partial; one instance is busy, the other free: goes after the delay
    assert late.result(timeout=30)["y"][0, 0] == 18.0 and late.result()["who"][0] != holder[0]
    assert not any(f.done() for f in first)
    gate.set()
    assert [f.result(timeout=30)["y"][0, 0] for f in first] == [0.0, 2.0, 4.0, 6.0]
    assert {int(f.result()["who"][0]) for f in first} == {holder[0]}
    b.close()


def test_instances_with_many_threads():
    """Several instances, many clients: nothing lost or swapped, and every instance ran batches."""
    import time

    ran = [0, 0, 0]

    def instance(index):
        def run(feeds):
            ran[index] += 1
            time.sleep(0.0005)
            return {"y": feeds["x"] * 2.0}
        return run

    runs = [instance(i) for i in range(3)]
    b = DynamicBatcher(runs[0], SPECS, BatchingConfig(max_batch_size=4, max_queue_delay_us=200),
                       instance_runs=runs)
    assert not doubled_by_clients(b, clients=16, each=80)
    assert b.stats.requests == 16 * 80 and b.stats.rows == 16 * 80
    assert all(n > 0 for n in ran), ran


_PROCESS_STATE = """
import gc, sys
from inferx_compiler.runtime.batching import BatchingConfig, DynamicBatcher
from inferx_compiler.runtime.interpreter import tune_for_serving
from inferx_compiler.tensor_spec import TensorSpec

def state():
    return sys.getswitchinterval(), gc.get_threshold(), gc.get_freeze_count() > 0

before = state()
b = DynamicBatcher(lambda feeds: {"y": feeds["x"]}, [TensorSpec("x", "float32", ("N", 4))])
b.close()
print(before == state())
tune_for_serving(50, 50_000)  # what inferx-serve opts in to
after = state()
print(abs(after[0] - 50e-6) < 2e-6, after[1][0] == 50_000, after[2])
"""


def test_a_batcher_leaves_the_process_alone_unless_asked():
    """A library user's process keeps its GC and thread switch settings; inferx-serve opts in
    (in a child interpreter: the test process's own settings are whatever earlier tests left)."""
    out = subprocess.run([sys.executable, "-c", _PROCESS_STATE], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "True", "True"]
