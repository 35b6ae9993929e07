"""Split-K sweep for inferx-split-reduction: one matmul (+ bias, f16 out) per shape and split factor.

    # here (IREE compiler): builds DIR/*.vmfb and DIR/index.json
    python tools/bench/gpu_split_sweep.py prepare build/split-sweep [--target h200]
    # on the GPU host (iree-base-runtime + torch for CUPTI):
    python tools/bench/gpu_split_sweep.py run build/split-sweep --out $OUT

Each matmul is f16 x f16 -> f32 plus a bias, truncated to f16 (`--dtype f32`: f32 throughout) (a transformer projection's or an
im2col convolution's dispatch at --precision fp16). Split 1 is IREE's own code; split S is the
module rewritten by `inferx-split-reduction{split=S}`; `rule` marks the factor the pass chooses by
itself for the target. Timing: CUPTI kernel time per call (tools/bench/gpu_kernels.py), median
of 5 profiles of 20 calls each; plus each module's output against split 1's (relative L2).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# (M, N, K, where the shape comes from)
SHAPES = [
    (128, 768, 3072, "BERT/GPT-2 b1 FFN down"),
    (128, 768, 768, "BERT/GPT-2 b1 attention projections"),
    (128, 3072, 768, "BERT/GPT-2 b1 FFN up"),
    (256, 196, 2304, "ResNet-50 b1 conv4 3x3 (im2col)"),
    (512, 49, 4608, "ResNet-50 b1 conv5 3x3 (im2col)"),
    (512, 49, 2048, "ResNet-50 b1 conv5 1x1"),
    (64, 4096, 4096, "MLP b64"),
    (1024, 768, 3072, "BERT b8 FFN down"),
]
SPLITS = (1, 2, 4, 8, 16)


def module_text(m: int, n: int, k: int, dtype: str = "f16") -> str:
    """matmul (+ bias) with `dtype` inputs and output, f32 accumulation."""
    out_cast = "%t = arith.truncf %s : f32 to f16" if dtype == "f16" else "%t = arith.addf %s, %z : f32"
    return f"""
func.func @main(%a: tensor<{m}x{k}x{dtype}>, %b: tensor<{k}x{n}x{dtype}>, %bias: tensor<{n}xf32>) -> tensor<{m}x{n}x{dtype}> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %p = linalg.matmul ins(%a, %b : tensor<{m}x{k}x{dtype}>, tensor<{k}x{n}x{dtype}>) outs(%f : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %e2 = tensor.empty() : tensor<{m}x{n}x{dtype}>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
       ins(%p, %bias : tensor<{m}x{n}xf32>, tensor<{n}xf32>) outs(%e2 : tensor<{m}x{n}x{dtype}>) {{
  ^bb0(%x: f32, %y: f32, %o: {dtype}):
    %s = arith.addf %x, %y : f32
    {out_cast}
    linalg.yield %t : {dtype}
  }} -> tensor<{m}x{n}x{dtype}>
  return %r : tensor<{m}x{n}x{dtype}>
}}
"""


def prepare(out: str, target_name: str, dtype: str = "f16") -> int:
    from inferx_compiler.cli.common import python_entry
    from inferx_compiler.passes.split_reduction import SplitReduction, decide
    from inferx_compiler.targets import get_target

    target = get_target(target_name)
    os.makedirs(out, exist_ok=True)
    index = []
    for m, n, k, what in SHAPES:
        rule = decide(m, n, k, target.cores, SplitReduction.max_split, SplitReduction.min_chunk).factor or 1
        src = os.path.join(out, f"mm_{m}x{n}x{k}.mlir")
        with open(src, "w") as f:
            f.write(module_text(m, n, k, dtype))
        for s in SPLITS:
            if k % s:
                continue
            text = src
            if s > 1:
                text = os.path.join(out, f"mm_{m}x{n}x{k}_s{s}.mlir")
                subprocess.run(python_entry("inferx_compiler.cli.opt") + [
                    "--context=iree", src, f"--pass-pipeline=builtin.module(inferx-split-reduction{{split={s}}})",
                    "-o", text], check=True, stderr=subprocess.DEVNULL)
            vmfb = f"mm_{m}x{n}x{k}_s{s}.vmfb"
            subprocess.run(["iree-compile", text, "--iree-hal-target-device=cuda",
                            f"--iree-cuda-target={target.cuda_target}", "-o", os.path.join(out, vmfb)], check=True)
            index.append({"m": m, "n": n, "k": k, "what": what, "split": s, "rule": s == rule, "vmfb": vmfb,
                          "dtype": dtype})
            print(f"{m}x{n}x{k} split {s}{' (rule)' if s == rule else ''}", flush=True)
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    return 0


def measure_modules(directory: str, index: list[dict]):
    """For each record (m, n, k, vmfb[, dtype]) of a sweep: load its module on the GPU, run it on
    the shape's inputs (the same for every module of a shape), compare with the shape's first
    module, and time it. Yields (record, kernel us per call, kernels per call, relative L2)."""
    import iree.runtime as rt

    from gpu_kernels import profile_kernels

    device = rt.get_driver("cuda").create_default_device()
    rng = np.random.default_rng(0)
    shapes: dict = {}
    for rec in index:
        m, n, k = rec["m"], rec["n"], rec["k"]
        shape = shapes.get((m, n, k))
        if shape is None:
            dt = np.float16 if rec.get("dtype", "f16") == "f16" else np.float32
            host = [rng.standard_normal((m, k)).astype(dt) / 8, rng.standard_normal((k, n)).astype(dt) / 8,
                    rng.standard_normal(n).astype(np.float32)]
            shape = shapes[(m, n, k)] = {"inputs": [rt.asdevicearray(device, x) for x in host], "out": None}
        config = rt.Config(device=device)
        with open(os.path.join(directory, rec["vmfb"]), "rb") as f:
            module = rt.VmModule.copy_buffer(config.vm_instance, f.read())
        ctx = rt.SystemContext(config=config)
        ctx.add_vm_module(module)
        main, ins = ctx.modules.module["main"], shape["inputs"]
        result = main(*ins).to_host().astype(np.float32)
        ref = shape["out"] = result if shape["out"] is None else shape["out"]
        err = float(np.linalg.norm(result - ref) / max(np.linalg.norm(ref), 1e-30))
        for _ in range(3):
            main(*ins)
        profiles = [profile_kernels(lambda: main(*ins), 20) for _ in range(5)]
        busy = float(np.median([p["gpu_busy_ms"] for p in profiles])) * 1e3
        yield rec, busy, profiles[0]["kernels"], err


def timed_rows(directory: str, label, err_key: str) -> list[dict]:
    """Measure every module of DIR/index.json (measure_modules); one row per module: its record,
    busy_us, kernels, TFLOP/s and `err_key` (relative L2 against the shape's first module),
    printed as it comes (`label(rec)` names the variant)."""
    with open(os.path.join(directory, "index.json")) as f:
        index = json.load(f)
    rows = []
    for rec, busy, kernels, err in measure_modules(directory, index):
        m, n, k = rec["m"], rec["n"], rec["k"]
        rows.append(dict(rec, busy_us=busy, kernels=kernels, tflops=2 * m * n * k / (busy * 1e-6) / 1e12,
                         **{err_key: err}))
        print(f"{m}x{n}x{k} {label(rec):30s} {busy:8.1f} us {rows[-1]['tflops']:6.1f} TFLOP/s  kernels "
              f"{kernels:.0f}  rel_l2 {err:.1e}", flush=True)
    return rows


def write_rows(out: str, stem: str, rows: list[dict], table: str = "") -> None:
    """OUT/STEM.json (every row) and, with a table, OUT/STEM.md (also printed)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{stem}.json"), "w") as f:
        json.dump(rows, f, indent=1)
    if table:
        with open(os.path.join(out, f"{stem}.md"), "w") as f:
            f.write(table)
        print(table)


def run(directory: str, out: str) -> int:
    rows = timed_rows(directory, lambda r: f"s{r['split']:<2} {'rule' if r['rule'] else ''}", "rel_l2_vs_split1")
    write_rows(out, "split_sweep", rows, markdown(rows))
    return 0


def markdown(rows) -> str:
    lines = ["| M x N x K | from | " + " | ".join(f"split {s}" for s in SPLITS) + " | rule's pick | rule ÷ IREE |",
             "| --- | --- | " + " | ".join("---" for _ in SPLITS) + " | --- | --- |"]
    shapes = sorted({(r["m"], r["n"], r["k"], r["what"]) for r in rows}, key=lambda t: [s[:3] for s in SHAPES].index(t[:3]))
    for m, n, k, what in shapes:
        mine = {r["split"]: r for r in rows if (r["m"], r["n"], r["k"]) == (m, n, k)}
        cells = [f"{mine[s]['busy_us']:.1f} us" if s in mine else "-" for s in SPLITS]
        rule = next(r for r in mine.values() if r["rule"])
        lines.append(f"| {m}x{n}x{k} | {what} | " + " | ".join(cells) +
                     f" | {rule['split']} | {rule['busy_us'] / mine[1]['busy_us']:.2f} |")
    return "\n".join(lines) + "\n\nKernel time per call (CUPTI), median of 5 x 20 calls; all splits agree with split 1 " \
                              "to the relative L2 in split_sweep.json.\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["prepare", "run"])
    p.add_argument("dir")
    p.add_argument("--target", default="h200")
    p.add_argument("--dtype", default="f16", choices=["f16", "f32"], help="prepare: input/output type")
    p.add_argument("--out", default=os.environ.get("OUT", "split-sweep-out"))
    a = p.parse_args(argv)
    return prepare(a.dir, a.target, a.dtype) if a.mode == "prepare" else run(a.dir, a.out)


if __name__ == "__main__":
    sys.exit(main())
