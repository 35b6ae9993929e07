"""The serving engine (runtime/llm_engine.py): continuous batching over the paged KV cache.

A tiny random Llama compiled at decode batches 1, 2 and 4 with blocks of 4 positions. Many
requests with different prompts, lengths, seeds and temperatures go through the engine at once,
some cancelled while they stream: every finished stream must equal the same request run alone
through `generate_ids` (tokens of one request never leak into another's), a cancelled stream
must be a prefix of it, and every block must be free at the end. The prefix cache must give the
same tokens as no cache while reusing blocks, and a block budget too small for the load must
preempt requests and still finish every one with the right tokens.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import inferx_compiler  # noqa: E402
from inferx_compiler.cli.compile import main as compile_main  # noqa: E402
from inferx_compiler.errors import InputValidationError  # noqa: E402
from inferx_compiler.runtime.generation import Sampling  # noqa: E402
from inferx_compiler.runtime.llm_engine import Engine  # noqa: E402
from llm_models import family_configs, save_tiny  # noqa: E402

MAX_SEQ, BLOCK = 64, 4


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    folder = tmp_path_factory.mktemp("engine")
    class_name, config = family_configs()["llama3_rope_untied"]
    save_tiny(folder, class_name, config)
    out = folder / "model.ixa"
    assert compile_main([str(folder), "--target", "cpu", "--prefill-lengths", "4,16", "--batch-sizes", "1,2,4",
                         "--max-seq", str(MAX_SEQ), "--kv-block-size", str(BLOCK), "-q", "-o", str(out)]) == 0
    return str(out)


def _alone(artifact, prompt, max_new, sampling, stop_ids=()):
    sess = inferx_compiler.load(artifact)
    return [step[0] for step in sess.generate_ids([prompt], max_new, sampling, stop_ids=stop_ids)]


def _workload(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        prompt = [int(t) for t in rng.integers(3, 320, int(rng.integers(1, 30)))]
        sampling = Sampling(temperature=float(rng.choice([0.0, 0.8])), top_k=int(rng.choice([0, 20])),
                            top_p=float(rng.choice([1.0, 0.9])), seed=int(rng.integers(0, 2**31)))
        out.append((prompt, int(rng.integers(1, 20)), sampling))
    return out


def _run_all(engine, work, cancel_every: int = 0):
    """Submit everything at once; cancel every `cancel_every`-th request after its 2nd token."""
    requests = []
    for i, (prompt, max_new, sampling) in enumerate(work):
        requests.append(engine.submit(prompt, max_new, sampling, stop_ids=()))
    streams = [None] * len(requests)

    def consume(i, r):
        got = []
        for token in r.token_ids(timeout=120):
            got.append(token)
            if cancel_every and i % cancel_every == 0 and len(got) == 2:
                r.cancel()
        streams[i] = got

    threads = [threading.Thread(target=consume, args=(i, r)) for i, r in enumerate(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return requests, streams


def test_concurrent_streams_equal_each_request_alone(artifact):
    sess = inferx_compiler.load(artifact)
    engine = Engine(sess, max_batch=4).start()
    work = _workload(40)
    try:
        requests, streams = _run_all(engine, work, cancel_every=7)
    finally:
        engine.stop()
    assert engine.stats.decode_steps < sum(len(s) for s in streams)  # requests shared decode steps
    for i, ((prompt, max_new, sampling), r, got) in enumerate(zip(work, requests, streams)):
        alone = _alone(artifact, prompt, max_new, sampling)
        assert got == r.output
        if r.finish_reason == "cancelled":
            assert i % 7 == 0 and got == alone[:len(got)], i
        else:
            assert r.finish_reason == "length" and got == alone, (i, got, alone)
    assert any(r.finish_reason == "cancelled" for r in requests)
    assert engine.pool.in_use == 0 and engine.running == 0 and engine.waiting == 0


def test_the_prefix_cache_reuses_blocks_and_gives_the_same_tokens(artifact):
    rng = np.random.default_rng(5)
    shared = [int(t) for t in rng.integers(3, 320, 36)]  # 9 blocks of 4
    first, second = shared + [7, 8, 9], shared + [11, 12]
    sess = inferx_compiler.load(artifact)
    engine = Engine(sess, max_batch=2).start()
    try:
        a = engine.submit(first, 8, stop_ids=())
        list(a.token_ids(timeout=120))
        hits = engine.pool.prefix_hits
        b = engine.submit(second, 8, stop_ids=())
        list(b.token_ids(timeout=120))
    finally:
        engine.stop()
    assert engine.pool.prefix_hits - hits == 9 and b.cached_tokens == 36
    assert b.output == _alone(artifact, second, 8, Sampling())
    assert engine.pool.in_use == 0 and engine.pool.cached > 0  # kept for the next one


def test_a_tiny_block_budget_preempts_and_still_finishes_right(artifact):
    sess = inferx_compiler.load(artifact)
    engine = Engine(sess, max_batch=4, kv_blocks=12, prefix_caching=False).start()
    work = [(p, 16, s) for p, _, s in _workload(10, seed=3)]
    try:
        requests, streams = _run_all(engine, work)
    finally:
        engine.stop()
    assert engine.stats.preemptions > 0
    for (prompt, max_new, sampling), r, got in zip(work, requests, streams):
        assert r.finish_reason == "length" and got == _alone(artifact, prompt, max_new, sampling)
    assert engine.pool.in_use == 0


def test_requests_that_can_never_run_are_refused(artifact):
    sess = inferx_compiler.load(artifact)
    engine = Engine(sess)
    with pytest.raises(InputValidationError, match="context holds 64"):
        engine.submit(list(range(3, 3 + MAX_SEQ)), 4)
    with pytest.raises(InputValidationError, match="max_tokens must be >= 1"):
        engine.submit([5, 6], 0)
    with pytest.raises(InputValidationError, match="no tokens"):
        engine.submit([], 4)


def test_the_engine_shares_its_sessions_block_pool(artifact):
    """The engine takes over the session's own pool (with its limit): blocks that generate()
    holds on the same session are never handed to a request, and the pool cannot be
    reconfigured under a running generation."""
    sess = inferx_compiler.load(artifact)
    prompt = [5, 6, 7, 8, 9]
    stream = sess.generate_ids([prompt], 8, stop_ids=())
    next(stream)  # the prompt's blocks are now held by generate()
    held = sess.blocks.in_use
    assert held > 0
    with pytest.raises(RuntimeError, match="blocks are held"):
        Engine(sess)
    expected = _alone(artifact, prompt, 8, Sampling())
    rest = list(stream)
    assert sess.blocks.in_use == 0 and len(rest) == 7
    engine = Engine(sess, kv_blocks=10, prefix_caching=False)
    assert engine.pool is sess.blocks and sess.blocks.capacity == 10 and not sess.blocks.prefix_caching
    engine.start()
    try:
        request = engine.submit(prompt, 8, Sampling())
        got = list(request.token_ids())
    finally:
        engine.stop()
    assert got == expected and sess.blocks.in_use == 0
