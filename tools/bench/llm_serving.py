"""LLM serving under load: inferx's engine (continuous batching, paged KV cache, chunked prefill,
prefix caching) against transformers `generate` with static batching, same weights and card.

An open-loop load: requests arrive as a Poisson process, prompts of 128-2048 tokens and outputs
of 128-512 (uniform, seeded), greedy, no end-of-sequence stop (every request runs its length).
At each concurrency C the arrival rate is C / (the mean request's service time at batch C,
estimated from inferx's own decode step and prefill chunk at that batch, measured first), so
about C requests are in flight. Reported per engine and C: time to first token and time per
output token (p50, p99), end-to-end latency p99, output tokens/s over the run.

    python tools/bench/llm_serving.py inferx --artifact A --weights W --json $OUT/serve_inferx.json
    python tools/bench/llm_serving.py torch --weights W --rates $OUT/serve_inferx.json --json $OUT/serve_torch.json
    python tools/bench/llm_serving.py report $OUT/serve_inferx.json $OUT/serve_torch.json

The baseline (what a transformers user without a serving engine runs): whenever the card is
free, the requests that have arrived (up to C) form a batch, left-padded, and
`model.generate(max_new_tokens=the longest output)` runs it to its end (eager, DynamicCache); a
request's first token comes after the batch's prefill, its last when the batch ends. The inferx
run also measures the prefix cache: C=8 with 90% of every prompt shared, caching on and off.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

import numpy as np

DEVICE = os.environ.get("LLM_BENCH_DEVICE", "cuda")
CONCURRENCY = (1, 8, 32)
REQUESTS = {1: 4, 8: 16, 32: 64}
SCALE = float(os.environ.get("LLM_BENCH_REQUESTS_SCALE", "1"))  # (fewer requests: a dry run on the CPU)
PROMPT_RANGE, OUTPUT_RANGE = (128, 2048), (128, 512)


def workload(n: int, vocab: int, seed: int, shared: float = 0.0) -> list[dict]:
    """n requests: arrival order, prompt ids, output length. `shared`: that share of each
    prompt is one common prefix."""
    rng = np.random.default_rng(seed)
    common = [int(t) for t in rng.integers(10, vocab, PROMPT_RANGE[1])]
    out = []
    for _ in range(n):
        length = int(rng.integers(PROMPT_RANGE[0], PROMPT_RANGE[1] + 1))
        head = int(length * shared)
        prompt = common[:head] + [int(t) for t in rng.integers(10, vocab, length - head)]
        out.append({"prompt": prompt, "max_tokens": int(rng.integers(OUTPUT_RANGE[0], OUTPUT_RANGE[1] + 1))})
    return out


def _count(c: int) -> int:
    return max(1, int(REQUESTS[c] * SCALE))


def arrivals(n: int, rate: float, seed: int) -> list[float]:
    gaps = np.random.default_rng(seed + 1).exponential(1.0 / rate, n)
    gaps[0] = 0.0
    return list(np.cumsum(gaps))


def summarize(records: list[dict], wall_s: float) -> dict:
    def pct(values, q):
        return float(np.percentile(values, q)) if values else None

    ttft = [r["ttft"] for r in records]
    tpot = [r["tpot"] for r in records if r["tpot"] is not None]
    e2e = [r["e2e"] for r in records]
    tokens = sum(r["tokens"] for r in records)
    return {"requests": len(records), "ttft_p50_ms": 1e3 * pct(ttft, 50), "ttft_p99_ms": 1e3 * pct(ttft, 99),
            "tpot_p50_ms": 1e3 * pct(tpot, 50), "tpot_p99_ms": 1e3 * pct(tpot, 99),
            "e2e_p99_s": pct(e2e, 99), "output_tokens_per_s": tokens / wall_s, "wall_s": wall_s}


# -- inferx -----------------------------------------------------------------------------------
def _step_times(sess, batch: int, context: int = 1024) -> tuple[float, float]:
    """(decode step s at `batch`, prefill s per prompt token at batch 1), measured on the card."""
    from inferx_compiler.runtime.generation import Sampling

    greedy = [Sampling()] * batch
    blocks = sess.allocate_blocks([context + 16] * batch)
    try:
        table = sess.block_table(blocks, batch)
        prompt = list(range(10, 10 + context))
        t = time.perf_counter()
        nxt = sess.prefill_prompts([prompt] * batch, greedy, table)
        prefill_per_token = (time.perf_counter() - t) / (context * batch)
        times = []
        for i in range(12):
            t = time.perf_counter()
            nxt = sess.decode(nxt, np.full(batch, context + i), table, greedy)
            times.append(time.perf_counter() - t)
        return statistics.median(times[2:]), prefill_per_token
    finally:
        for b in blocks:
            sess.blocks.release(b)


def _drive_engine(engine, work, times) -> dict:
    from inferx_compiler.runtime.generation import Sampling

    requests = []
    t0 = time.monotonic()
    for item, at in zip(work, times):
        delay = t0 + at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        requests.append(engine.submit(item["prompt"], item["max_tokens"], Sampling(), stop_ids=()))
    for r in requests:
        for _ in r.token_ids(timeout=600):
            pass
    records = [{"ttft": r.times.first_token - r.times.arrived, "e2e": r.times.finished - r.times.arrived,
                "tpot": (r.times.finished - r.times.first_token) / (len(r.output) - 1) if len(r.output) > 1 else None,
                "tokens": len(r.output), "cached": r.cached_tokens} for r in requests]
    wall = max(r.times.finished for r in requests) - t0
    out = summarize(records, wall)
    out["prefix_cached_tokens"] = sum(r["cached"] for r in records)
    out["preemptions"] = sum(r.preemptions for r in requests)
    return out


def run_inferx(artifact: str, weights: str, seed: int) -> dict:
    import inferx_compiler
    from inferx_compiler.runtime.llm_engine import Engine

    sess = inferx_compiler.load(artifact, device=DEVICE, weights=weights)
    vocab = sess.config["vocab"]
    result = {"engine": "inferx", "runs": {}, "rates": {}}
    mean_prompt, mean_out = sum(PROMPT_RANGE) / 2, sum(OUTPUT_RANGE) / 2
    for c in CONCURRENCY:
        step, per_token = _step_times(sess, min(c, max(sess.batch_sizes)))
        rate = c / (mean_out * step + mean_prompt * per_token * min(c, 8))
        result["rates"][c] = rate
        engine = Engine(sess, max_batch=c).start()
        try:
            work = workload(_count(c), vocab, seed + c)
            result["runs"][c] = _drive_engine(engine, work, arrivals(len(work), rate, seed + c))
        finally:
            engine.stop()
        print(f"inferx C={c}: {json.dumps(result['runs'][c])}", flush=True)
    for caching in (True, False):  # 90% shared prompts at C=8
        engine = Engine(sess, max_batch=8, prefix_caching=caching).start()
        try:
            work = workload(_count(8), vocab, seed + 100, shared=0.9)
            result["runs"][f"8_shared_{'cache' if caching else 'nocache'}"] = _drive_engine(
                engine, work, arrivals(len(work), result["rates"][8], seed + 100))
        finally:
            engine.stop()
    return result


# -- transformers static batching -------------------------------------------------------------
def run_torch(weights: str, rates: dict, seed: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, StoppingCriteria, StoppingCriteriaList

    model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float16, device_map=DEVICE).eval()
    vocab = model.config.vocab_size
    result = {"engine": f"transformers {__import__('transformers').__version__} generate, static batching",
              "runs": {}}

    class StepClock(StoppingCriteria):
        def __init__(self):
            self.stamps = []

        def __call__(self, input_ids, scores, **kw):
            if DEVICE == "cuda":
                torch.cuda.synchronize()
            self.stamps.append(time.monotonic())
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    for c in CONCURRENCY:
        work = workload(_count(c), vocab, seed + c)
        times = arrivals(len(work), float(rates[str(c)]), seed + c)
        t0 = time.monotonic()
        pending = list(range(len(work)))
        records = []
        while pending:
            now = time.monotonic() - t0
            arrived = [i for i in pending if times[i] <= now]
            if not arrived:
                time.sleep(max(0.0, times[pending[0]] - now))
                continue
            batch = arrived[:c]
            pending = [i for i in pending if i not in batch]
            longest = max(len(work[i]["prompt"]) for i in batch)
            ids = torch.zeros((len(batch), longest), dtype=torch.long)
            mask = torch.zeros_like(ids)
            for row, i in enumerate(batch):
                p = work[i]["prompt"]
                ids[row, longest - len(p):] = torch.tensor(p)
                mask[row, longest - len(p):] = 1
            new = max(work[i]["max_tokens"] for i in batch)
            clock = StepClock()
            with torch.no_grad():
                model.generate(input_ids=ids.to(DEVICE), attention_mask=mask.to(DEVICE), max_new_tokens=new,
                               min_new_tokens=new, do_sample=False, pad_token_id=0,
                               stopping_criteria=StoppingCriteriaList([clock]))
            end = time.monotonic()
            for i in batch:
                n = work[i]["max_tokens"]
                first, last = clock.stamps[0], clock.stamps[min(n, len(clock.stamps)) - 1]
                records.append({"ttft": first - (t0 + times[i]), "e2e": end - (t0 + times[i]),
                                "tpot": (last - first) / (n - 1), "tokens": n})
        result["runs"][c] = summarize(records, time.monotonic() - t0)
        print(f"torch C={c}: {json.dumps(result['runs'][c])}", flush=True)
    return result


def report(ours: dict, theirs: dict) -> str:
    rows = ["| C | engine | TTFT p50 / p99 (ms) | TPOT p50 / p99 (ms) | e2e p99 (s) | output tok/s |",
            "|---|---|---|---|---|---|"]
    for c in CONCURRENCY:
        for name, res in (("inferx", ours), ("transformers", theirs)):
            r = res["runs"].get(str(c)) or res["runs"].get(c)
            if r:
                rows.append(f"| {c} | {name} | {r['ttft_p50_ms']:.0f} / {r['ttft_p99_ms']:.0f} | "
                            f"{r['tpot_p50_ms']:.1f} / {r['tpot_p99_ms']:.1f} | {r['e2e_p99_s']:.1f} | "
                            f"{r['output_tokens_per_s']:.0f} |")
    on, off = ours["runs"].get("8_shared_cache"), ours["runs"].get("8_shared_nocache")
    if on and off:
        rows.append(f"\nC=8, 90% of each prompt shared: TTFT p50 {on['ttft_p50_ms']:.0f} ms with the prefix cache, "
                    f"{off['ttft_p50_ms']:.0f} ms without ({off['ttft_p50_ms'] / on['ttft_p50_ms']:.1f}x); "
                    f"{on['prefix_cached_tokens']} prompt tokens read from the cache")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("inferx")
    i.add_argument("--artifact", required=True)
    t = sub.add_parser("torch")
    t.add_argument("--rates", required=True, help="the inferx run's JSON: the same arrival rates")
    for p in (i, t):
        p.add_argument("--weights", required=True)
        p.add_argument("--json", required=True)
        p.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("report")
    r.add_argument("ours")
    r.add_argument("theirs")
    a = ap.parse_args(argv)
    if a.cmd == "report":
        with open(a.ours) as f, open(a.theirs) as g:
            print(report(json.load(f), json.load(g)))
        return 0
    if a.cmd == "inferx":
        result = run_inferx(a.artifact, a.weights, a.seed)
    else:
        with open(a.rates) as f:
            rates = json.load(f)["rates"]
        result = run_torch(a.weights, rates, a.seed)
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
