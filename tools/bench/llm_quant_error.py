"""How far a quantized generation build is from the float model it came from.

    inferx-compile model.gguf --target cpu --precision int4 --group-size 64 --greedy-only --with-logits \
        --prefill-lengths 32 --max-seq 64 -o m_int4.ixa
    python tools/bench/llm_quant_error.py --gguf model.gguf m_fp32.ixa m_int8.ixa m_int4.ixa [--out DIR]

The reference is transformers loading the same GGUF file (its tensors dequantized to float32:
the float model a GGUF's quantized blocks stand for). For each of a fixed set of prompts
(tokenized by the artifact's own tokenizer), each artifact's prefill logits at the prompt's last
token (its `_logits` entry: build with --with-logits) are compared with the reference's:
relative L2, whether the top-1 token is the same, and the overlap of the top-5 sets. Medians
over the prompts, one row an artifact.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import numpy as np

PROMPTS = ("The capital of France is", "def fibonacci(n):", "Once upon a time, in a small village,",
           "The three primary colors are", "Water boils at a temperature of", "import numpy as np\n",
           "My favourite book is", "The quick brown fox jumps over the")


def reference_logits(gguf: str, prompts: list[list[int]]) -> list[np.ndarray]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(gguf)),
                                                 gguf_file=os.path.basename(gguf), dtype=torch.float32).eval()
    with torch.no_grad():
        return [model(torch.tensor([ids])).logits[0, -1].numpy() for ids in prompts]


def artifact_logits(artifact: str, prompts: list[list[int]]) -> list[np.ndarray]:
    import inferx_compiler

    sess = inferx_compiler.load(artifact)
    chunk = max(sess.prefill_lengths(1))
    table = sess.block_table([list(range(1, 1 + sess.table_width))], 1)
    out = []
    for ids in prompts:
        if len(ids) > chunk:
            raise SystemExit(f"{artifact}: a prompt of {len(ids)} tokens is longer than its chunk ({chunk})")
        tokens = np.zeros((1, chunk), np.int64)
        tokens[0, :len(ids)] = ids
        out.append(sess.prefill_logits(tokens, np.array([0]), np.array([len(ids)]), table)[0])
    return out


def compare(got: np.ndarray, want: np.ndarray) -> dict:
    top5 = len(set(np.argsort(got)[-5:]) & set(np.argsort(want)[-5:]))
    return {"rel_l2": float(np.linalg.norm(got - want) / np.linalg.norm(want)),
            "top1_same": bool(np.argmax(got) == np.argmax(want)), "top5_overlap": top5}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("artifacts", nargs="+", help="builds of the GGUF file with --with-logits")
    p.add_argument("--gguf", required=True)
    p.add_argument("--out")
    args = p.parse_args(argv)
    import inferx_compiler

    tokenizer = inferx_compiler.load(args.artifacts[0]).tokenizer
    prompts = [tokenizer.encode(text).ids for text in PROMPTS]
    reference = reference_logits(args.gguf, prompts)
    rows = {}
    for artifact in args.artifacts:
        per_prompt = [compare(g, w) for g, w in zip(artifact_logits(artifact, prompts), reference)]
        rows[os.path.basename(artifact)] = {
            "rel_l2_median": statistics.median(r["rel_l2"] for r in per_prompt),
            "rel_l2_max": max(r["rel_l2"] for r in per_prompt),
            "top1_same": sum(r["top1_same"] for r in per_prompt), "prompts": len(per_prompt),
            "top5_overlap_mean": statistics.mean(r["top5_overlap"] for r in per_prompt), "per_prompt": per_prompt}
    table = ["| artifact | logits rel L2 (median / max) | top-1 same | top-5 overlap (mean of 5) |", "|---|---|---|---|"]
    for name, r in rows.items():
        table.append(f"| {name} | {r['rel_l2_median']:.4f} / {r['rel_l2_max']:.4f} | {r['top1_same']}/{r['prompts']} "
                     f"| {r['top5_overlap_mean']:.2f} |")
    print("\n".join(table))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "quant_error.json"), "w") as f:
            json.dump({"gguf": os.path.basename(args.gguf), "rows": rows}, f, indent=1)
        with open(os.path.join(args.out, "quant_error.md"), "w") as f:
            f.write("\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
