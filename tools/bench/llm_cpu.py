"""LLM generation on this CPU: inferx against transformers eager (fp32), same weights, same prompt.

    python tools/bench/llm_cpu.py --gguf SmolLM2-135M-Instruct.Q4_1.gguf --artifact smollm2.ixa \
        --threads 2 --rounds 3 --new-tokens 64 --out docs/bench/DATE-llm-cpu

Method: each engine runs in its own child process (torch's and IREE's thread pools then never
compete for the cores), in alternating rounds (inferx, transformers, inferx, ...); each round
prefills the prompt and decodes `--new-tokens` greedy tokens, and records the time to the first
token and every decode step's wall time. Medians over all steps of all rounds. transformers runs
`model(...)` step by step with its DynamicCache (what `generate` does), torch.set_num_threads(N);
inferx runs the artifact's decode entry point (sampling on the device) on IREE's task executor
with N workers. Both produce their tokens greedily: the run checks that they agree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PROMPT = "The history of the Roman Empire begins"


def run_inferx(artifact: str, prompt: str, new_tokens: int, threads: int) -> dict:
    import iree.runtime as rt

    rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
    import inferx_compiler

    sess = inferx_compiler.load(artifact, device="cpu:task")
    ids = sess.encode(prompt)
    steps, tokens = [], []
    t0 = time.perf_counter()
    last = t0
    first = None
    for i, step in enumerate(sess.generate_ids([ids], new_tokens, stop_ids=())):
        now = time.perf_counter()
        if i == 0:
            first = now - t0
        else:
            steps.append(now - last)
        last = now
        tokens.append(step[0])
    return {"ttft_s": first, "steps_s": steps, "tokens": tokens, "prompt_tokens": len(ids)}


def run_transformers(gguf: str, prompt: str, new_tokens: int, threads: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

    torch.set_num_threads(threads)
    folder, name = os.path.split(gguf)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    ids = AutoTokenizer.from_pretrained(folder, gguf_file=name).encode(prompt, add_special_tokens=False)
    steps, tokens = [], []
    with torch.no_grad():
        cache = DynamicCache()
        t0 = time.perf_counter()
        out = model(torch.tensor([ids]), past_key_values=cache, use_cache=True)
        nxt = int(out.logits[0, -1].argmax())
        first = time.perf_counter() - t0
        tokens.append(nxt)
        last = time.perf_counter()
        for _ in range(new_tokens - 1):
            out = model(torch.tensor([[nxt]]), past_key_values=cache, use_cache=True)
            nxt = int(out.logits[0, -1].argmax())
            now = time.perf_counter()
            steps.append(now - last)
            last = now
            tokens.append(nxt)
    return {"ttft_s": first, "steps_s": steps, "tokens": tokens, "prompt_tokens": len(ids)}


def child(args) -> None:
    result = (run_inferx(args.artifact, args.prompt, args.new_tokens, args.threads) if args.engine == "inferx"
              else run_transformers(args.gguf, args.prompt, args.new_tokens, args.threads))
    print(json.dumps(result))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gguf", required=True)
    p.add_argument("--artifact", required=True, help="an inferx artifact built from the same GGUF file")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--prompt", default=PROMPT)
    p.add_argument("--out")
    p.add_argument("--engine", choices=("inferx", "transformers"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.engine:
        child(args)
        return 0
    runs = {"inferx": [], "transformers": []}
    for r in range(args.rounds):
        for engine in ("inferx", "transformers"):
            cmd = [sys.executable, __file__, "--engine", engine, "--gguf", args.gguf, "--artifact", args.artifact,
                   "--threads", str(args.threads), "--new-tokens", str(args.new_tokens), "--prompt", args.prompt]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[engine].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1}/{args.rounds} {engine}: decode "
                  f"{statistics.median(runs[engine][-1]['steps_s']) * 1e3:.1f} ms/token", file=sys.stderr)
    summary = {}
    for engine, rs in runs.items():
        steps = [s for r in rs for s in r["steps_s"]]
        summary[engine] = {"decode_ms_per_token": statistics.median(steps) * 1e3,
                           "tokens_per_s": 1.0 / statistics.median(steps),
                           "ttft_ms": statistics.median(r["ttft_s"] for r in rs) * 1e3,
                           "prompt_tokens": rs[0]["prompt_tokens"]}
    agree = runs["inferx"][0]["tokens"] == runs["transformers"][0]["tokens"]
    summary["speedup_decode"] = summary["transformers"]["decode_ms_per_token"] / summary["inferx"]["decode_ms_per_token"]
    summary["tokens_agree"] = agree
    ours, theirs = runs["inferx"][0]["tokens"], runs["transformers"][0]["tokens"]
    # (a quantized build is not the float reference: how long the greedy streams stay equal)
    summary["tokens_equal_prefix"] = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    summary["host"] = {"cpu": _cpu_name(), "threads": args.threads}
    table = ["| engine | decode ms/token | tokens/s | time to first token ms |", "|---|---|---|---|"]
    for engine in ("inferx", "transformers"):
        s = summary[engine]
        table.append(f"| {engine} | {s['decode_ms_per_token']:.1f} | {s['tokens_per_s']:.1f} | {s['ttft_ms']:.1f} |")
    print("\n".join(table))
    print(f"decode speedup {summary['speedup_decode']:.2f}x; greedy tokens agree: {agree} "
          f"(the first {summary['tokens_equal_prefix']} equal)")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump({"summary": summary, "runs": runs, "args": vars(args)}, f, indent=1)
        with open(os.path.join(args.out, "results.md"), "w") as f:
            f.write("\n".join(table) + f"\n\ndecode speedup {summary['speedup_decode']:.2f}x, "
                    f"tokens agree: {agree} (the first {summary['tokens_equal_prefix']} equal); {summary['host']}\n")
    return 0


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
