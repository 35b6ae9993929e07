"""LLM generation on a GPU: inferx against transformers (what a PyTorch user runs), same weights.

Built here (CPU host, code only: --weights reference keeps gigabytes out of the artifact):

    python tools/bench/llm_gpu.py config --out CONFIG_DIR      # Llama-3-8B's shape, no weights
    inferx-compile CONFIG_DIR --target h100 --precision fp16 --weights reference --greedy-only \
        --prefill-lengths 128,512 --prefill-batch-sizes 1 --batch-sizes 1,8 --max-seq 2560 \
        -o build/llm-gpu/llama8b.ixa

Run on the device machine, each engine in its own process (timing apart from the other's
allocator, compiler and CUDA graphs):

    python tools/bench/llm_gpu.py weights --config CONFIG_DIR --out /tmp/w     # seeded random fp16
    python tools/bench/llm_gpu.py inferx --artifact A --weights /tmp/w --json $OUT/inferx.json
    python tools/bench/llm_gpu.py torch --weights /tmp/w --json $OUT/torch.json
    python tools/bench/llm_gpu.py report $OUT/inferx.json $OUT/torch.json
    python tools/bench/llm_gpu.py profile --artifact A --weights /tmp/w --json $OUT/profile.json   # kernels (CUPTI), own process

What is timed (both engines alike): a decode step is one call that takes the previous token and
gives the next token id back on the host (greedy), the way a streaming server needs it; the
context is `--context` tokens prefilled first (the same prompt for every sequence of the batch),
then `--steps` steps, the first `--warmup` not counted; medians. Prefill: a `--context`-token
prompt at batch 1 (inferx: in its compiled chunk lengths, as generate reads it), medians of
`--rounds`. transformers runs LlamaForCausalLM with a
StaticCache (max length = the artifact's cache rows), decode under torch.compile
(mode="reduce-overhead": CUDA graph replay) and prefill eager (a compiled prefill would recompile
per length). Correctness: both write the greedy tokens of a fixed 128-token prompt; transformers
also writes its eager tokens, so the agreement of compiled vs eager PyTorch is the yardstick for
fp16 noise on random weights.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

PROMPT_SEED, PROMPT_LEN, CHECK_TOKENS = 7, 128, 24
DEVICE = os.environ.get("LLM_BENCH_DEVICE", "cuda")  # (cpu: to try this script on a tiny model)


def _prompt(vocab: int, length: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(PROMPT_SEED).integers(10, vocab, length)]


# -- config and weights -----------------------------------------------------------------------
LLAMA3_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                 rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False, torch_dtype="float16",
                 bos_token_id=1, eos_token_id=2)


def write_config(out: str) -> None:
    """A Llama-3-8B-shaped model folder without weights: config.json and a word-level tokenizer
    of the vocabulary's size (token i is the word "t<i>"), enough to build and run it."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig

    os.makedirs(out, exist_ok=True)
    LlamaConfig(**LLAMA3_8B).save_pretrained(out)
    vocab = {f"t{i}": i for i in range(LLAMA3_8B["vocab_size"])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.save(os.path.join(out, "tokenizer.json"))
    print(f"wrote {out}/config.json and tokenizer.json", flush=True)


def write_weights(config_dir: str, out: str, shard_bytes: int = 4 << 30) -> None:
    """Seeded random fp16 weights for the config's LlamaForCausalLM, as safetensors shards
    (std 0.02 as transformers initializes; norm scales near 1). Generated on the GPU."""
    import shutil

    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(config_dir)
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in AutoModelForCausalLM.from_config(config).state_dict().items()}
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(config_dir):
        if name.endswith(".json"):
            shutil.copy(os.path.join(config_dir, name), out)
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    shards, shard, size = [], {}, 0
    for key, shape in shapes.items():
        t = torch.randn(shape, generator=gen, device=DEVICE, dtype=torch.float32)
        t = (1.0 + 0.1 * t) if key.endswith("norm.weight") else 0.02 * t
        shard[key] = t.to(torch.float16).cpu()
        size += shard[key].numel() * 2
        if size >= shard_bytes:
            shards.append(shard)
            shard, size = {}, 0
    if shard:
        shards.append(shard)
    weight_map = {}
    for i, tensors in enumerate(shards, 1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(tensors, os.path.join(out, name), metadata={"format": "pt"})
        weight_map.update({key: name for key in tensors})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    index = len(shards) - 1
    print(f"wrote {len(shapes)} tensors into {index + 1} shards in {out}", flush=True)


# -- inferx -----------------------------------------------------------------------------------
def run_inferx(artifact: str, weights: str, context: int, steps: int, warmup: int, rounds: int) -> dict:
    import inferx_compiler
    from inferx_compiler.runtime.generation import Sampling

    t0 = time.perf_counter()
    sess = inferx_compiler.load(artifact, device=DEVICE, weights=weights)
    out = {"engine": "inferx", "load_s": time.perf_counter() - t0}
    vocab = sess.config["vocab"]
    greedy = [Sampling()]
    prompt = _prompt(vocab, PROMPT_LEN)
    out["tokens"] = [s[0] for s in sess.generate_ids([prompt], CHECK_TOKENS, stop_ids=())]
    chunk = _prompt(vocab, context)
    blocks = sess.allocate_blocks([context + steps] * max(sess.batch_sizes))  # every sequence its own blocks
    times = []
    for _ in range(rounds):  # the prompt in the compiled chunk lengths, as generate reads it
        t = time.perf_counter()
        sess.prefill_prompts([chunk], greedy, sess.block_table(blocks[:1], 1))
        times.append(time.perf_counter() - t)
    out["prefill_ms"] = {context: 1e3 * statistics.median(times)}
    out["prefill_chunks"] = sess.prefill_lengths(1)
    out["decode_ms"] = {}
    for batch in sess.batch_sizes:
        table = sess.block_table(blocks[:batch], batch)
        nxt = sess.prefill_prompts([chunk] * batch, greedy * batch, table)
        per_step = []
        for i in range(steps):
            t = time.perf_counter()
            nxt = sess.decode(nxt, np.full(batch, context + i), table, greedy * batch)
            per_step.append(time.perf_counter() - t)
        out["decode_ms"][batch] = 1e3 * statistics.median(per_step[warmup:])
        print(f"inferx decode b{batch}: {out['decode_ms'][batch]:.2f} ms/step", flush=True)
    return out


def profile_inferx(artifact: str, weights: str, context: int, steps: int, top: int) -> dict:
    """Kernels of `steps` decode steps at batch 1 and of one prefill chunk, recorded by CUPTI
    through torch.profiler (it sees every kernel of the process, IREE's too). Run apart from
    the timed runs: CUPTI slows launches."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    import inferx_compiler
    from inferx_compiler.runtime.generation import Sampling

    sess = inferx_compiler.load(artifact, device=DEVICE, weights=weights)
    greedy = [Sampling()]
    chunk = _prompt(sess.config["vocab"], context)
    blocks = sess.allocate_blocks([context + 2 * steps + 8])
    table = sess.block_table(blocks[:1], 1)
    nxt = sess.prefill_prompts([chunk], greedy, table)
    for i in range(4):  # warm
        nxt = sess.decode(nxt, np.full(1, context + i), table, greedy)
    out = {}
    for what in ("decode_b1", "prefill"):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            if what == "decode_b1":
                for i in range(steps):
                    nxt = sess.decode(nxt, np.full(1, context + 4 + i), table, greedy)
            else:
                sess.prefill_prompts([chunk[:max(sess.prefill_lengths(1))]], greedy, table)
            torch.cuda.synchronize()
        per = steps if what == "decode_b1" else 1
        rows = [(e.key, e.count / per, e.device_time_total / per) for e in prof.key_averages()
                if e.device_time_total > 0]
        rows.sort(key=lambda r: -r[2])
        total = sum(r[2] for r in rows)
        out[what] = {"kernels_per_call": sum(r[1] for r in rows), "kernel_us_per_call": total,
                     "top": [{"kernel": k[:160], "per_call": c, "us_per_call": us} for k, c, us in rows[:top]]}
        print(f"{what}: {out[what]['kernels_per_call']:.0f} kernels, {total / 1e3:.2f} ms of kernels per call",
              flush=True)
        for k, c, us in rows[:top]:
            print(f"  {us:9.1f} us  x{c:5.1f}  {k[:150]}", flush=True)
    return out


# -- transformers -----------------------------------------------------------------------------
def _static_cache(model, batch: int, max_len: int):
    import inspect

    import torch
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kw = {"config": model.config, "max_cache_len": max_len}
    if "max_batch_size" in params:
        kw["max_batch_size"] = batch
    if "device" in params:
        kw["device"] = DEVICE
    if "dtype" in params:
        kw["dtype"] = torch.float16
    return StaticCache(**kw)


def run_torch(weights: str, context: int, steps: int, warmup: int, rounds: int, max_len: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float16, device_map=DEVICE).eval()
    out = {"engine": f"transformers {__import__('transformers').__version__} + torch {torch.__version__}",
           "load_s": time.perf_counter() - t0}
    vocab = model.config.vocab_size
    eager = model.forward
    compiled = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)

    @torch.no_grad()
    def step(fn, cache, tokens, position):
        pos = torch.full((tokens.shape[0], 1), position, device=DEVICE, dtype=torch.long)
        logits = fn(input_ids=tokens, position_ids=pos, cache_position=torch.tensor([position], device=DEVICE),
                    past_key_values=cache, use_cache=True).logits
        return logits[:, -1].argmax(-1, keepdim=True)

    @torch.no_grad()
    def prefill(cache, ids):
        # a prefill starts the sequence over: transformers 5.17's StaticCache writes at its own
        # counter, not at cache_position, so a second prefill into a used cache runs past its end
        cache.reset()
        n = ids.shape[1]
        logits = eager(input_ids=ids, cache_position=torch.arange(n, device=DEVICE), past_key_values=cache,
                       use_cache=True).logits
        return logits[:, -1].argmax(-1, keepdim=True)

    # one cache per batch size, kept: the compiled step's CUDA graphs are recorded over its tensors
    caches = {b: _static_cache(model, b, max_len) for b in (1, 8)}
    prompt = torch.tensor([_prompt(vocab, PROMPT_LEN)], device=DEVICE)
    for name, fn, cache in (("tokens_eager", eager, _static_cache(model, 1, max_len)),
                            ("tokens", compiled, caches[1])):
        nxt, toks = prefill(cache, prompt), []
        for i in range(CHECK_TOKENS):
            toks.append(int(nxt.item()))
            if i + 1 < CHECK_TOKENS:
                nxt = step(fn, cache, nxt, PROMPT_LEN + i)
        out[name] = toks
    chunk = torch.tensor([_prompt(vocab, context)], device=DEVICE)
    times = []
    for _ in range(rounds):
        _synchronize()
        t = time.perf_counter()
        prefill(caches[1], chunk).item()
        times.append(time.perf_counter() - t)
    out["prefill_ms"] = {context: 1e3 * statistics.median(times)}
    out["decode_ms"] = {}
    for batch, cache in caches.items():
        nxt = prefill(cache, chunk.repeat(batch, 1))
        per_step = []
        for i in range(steps):
            t = time.perf_counter()
            nxt = step(compiled, cache, nxt, context + i)
            nxt.cpu()  # the next tokens on the host, as a stream needs them
            per_step.append(time.perf_counter() - t)
        out["decode_ms"][batch] = 1e3 * statistics.median(per_step[warmup:])
        print(f"torch decode b{batch}: {out['decode_ms'][batch]:.2f} ms/step", flush=True)
    return out


def _synchronize():
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()


# -- report -----------------------------------------------------------------------------------
def report(ours: dict, theirs: dict) -> str:
    def agree(a, b):
        n = 0
        for x, y in zip(a, b):
            if x != y:
                break
            n += 1
        return n

    rows = ["| measure | inferx | transformers (reduce-overhead decode, eager prefill) | ratio |", "|---|---|---|---|"]
    for k in ours["prefill_ms"]:
        a, b = ours["prefill_ms"][k], theirs["prefill_ms"].get(k)
        rows.append(f"| prefill {k} tokens, b1 (ms) | {a:.1f} | {b:.1f} | {b / a:.2f}x |")
    for k in ours["decode_ms"]:
        a, b = ours["decode_ms"][k], theirs["decode_ms"].get(str(k), theirs["decode_ms"].get(k))
        if b is not None:
            rows.append(f"| decode b{k} (ms/step) | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
    rows.append(f"\ngreedy tokens of the 128-token prompt: inferx = transformers compiled for the first "
                f"{agree(ours['tokens'], theirs['tokens'])} of {CHECK_TOKENS}; transformers compiled = eager for "
                f"{agree(theirs['tokens'], theirs['tokens_eager'])}; inferx = eager for "
                f"{agree(ours['tokens'], theirs['tokens_eager'])}")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("config")
    c.add_argument("--out", required=True)
    w = sub.add_parser("weights")
    w.add_argument("--config", required=True)
    w.add_argument("--out", required=True)
    for name in ("inferx", "torch"):
        p = sub.add_parser(name)
        p.add_argument("--weights", required=True)
        p.add_argument("--json", required=True)
        p.add_argument("--context", type=int, default=2048)
        p.add_argument("--steps", type=int, default=72)
        p.add_argument("--warmup", type=int, default=8)
        p.add_argument("--rounds", type=int, default=5)
        if name == "inferx":
            p.add_argument("--artifact", required=True)
        else:
            p.add_argument("--max-len", type=int, default=2560)
    pr = sub.add_parser("profile")
    pr.add_argument("--artifact", required=True)
    pr.add_argument("--weights", required=True)
    pr.add_argument("--json", required=True)
    pr.add_argument("--context", type=int, default=2048)
    pr.add_argument("--steps", type=int, default=8)
    pr.add_argument("--top", type=int, default=25)
    r = sub.add_parser("report")
    r.add_argument("ours")
    r.add_argument("theirs")
    a = ap.parse_args(argv)
    if a.cmd == "config":
        write_config(a.out)
        return 0
    if a.cmd == "weights":
        write_weights(a.config, a.out)
        return 0
    if a.cmd == "report":
        with open(a.ours) as f, open(a.theirs) as g:
            print(report(json.load(f), json.load(g)))
        return 0
    if a.cmd == "profile":
        result = profile_inferx(a.artifact, a.weights, a.context, a.steps, a.top)
    elif a.cmd == "inferx":
        result = run_inferx(a.artifact, a.weights, a.context, a.steps, a.warmup, a.rounds)
    else:
        result = run_torch(a.weights, a.context, a.steps, a.warmup, a.rounds, a.max_len)
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
