"""inferx-hopper-matmul in isolation: IREE's own f16 matmul against the sm_90a Triton kernel, per
shape and tile.

    # here (IREE compiler + Triton): builds DIR/*.vmfb and DIR/index.json
    python tools/bench/gpu_extern_sweep.py prepare build/extern-sweep [--target h200]
    # on the GPU host (iree-base-runtime + torch for CUPTI):
    python tools/bench/gpu_extern_sweep.py run build/extern-sweep --out $OUT

Each module is gpu_split_sweep.module_text's matmul + bias, truncated to f16 (a projection's or
an im2col convolution's dispatch at --precision fp16). "iree" is IREE's code for it (with
inferx-split-reduction's rule where it splits); "tile T" is the module rewritten by
`inferx-hopper-matmul{tile=T}`; `rule` marks the tile the pass picks by itself. The epilogue
stays an IREE dispatch in the rewritten modules, so the kernel time per call covers both. Timing
and the relative L2 against the "iree" module: gpu_split_sweep.measure_modules (CUPTI).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gpu_split_sweep import SHAPES as SPLIT_SHAPES, module_text, timed_rows, write_rows  # noqa: E402

SHAPES = SPLIT_SHAPES + [
    (128, 2304, 768, "GPT-2 b1 fused QKV projection"),
    (128, 784, 1152, "ResNet-50 b1 conv3 3x3 (im2col)"),
    (128, 784, 256, "ResNet-50 b1 conv3 1x1 reduce"),
    (512, 196, 256, "ResNet-50 b1 conv4 1x1 expand"),
    (512, 49, 1024, "ResNet-50 b1 conv5 1x1 reduce"),
    (2048, 49, 512, "ResNet-50 b1 conv5 1x1 expand"),
    (1024, 768, 768, "BERT b8 attention projections"),
    (1024, 2304, 768, "BERT b8 q, k, v grouped"),
    (1024, 3072, 768, "BERT b8 FFN up"),
    (6272, 256, 576, "ResNet-50 b8 conv2 3x3 (im2col)"),
]
TILES = ("128x128", "128x64", "64x128", "64x64", "128x256", "256x128", "64x256")
# TMA descriptors are written into the global scratch binding, 128-byte aligned
TMA_FLAGS = ["--iree-stream-resource-min-offset-alignment=128"]


def _fits(variant: str, m: int, k: int) -> bool:
    """The tile's rows fit the shape, a forced split cuts K into multiples of 64."""
    tile, split = (variant.split(":") + [""])[:2]
    s = int(split or 1)
    return int(tile.split("x")[0]) <= max(m, 64) and k % s == 0 and (k // s) % 64 == 0


def _variant_pipeline(variant: str, target: str) -> str:
    """"64x32", "64x32:2" or "64x32:1:tma" (tile, split-K factor (without one, the rule's), operand
    loads through TMA descriptors) -> the pass pipeline."""
    tile, split, tma = (variant.split(":") + ["", ""])[:3]
    options = f"target={target} tile={tile}" + (f" split={split}" if split else "") + (" tma=true" if tma else "")
    return f"builtin.module(inferx-hopper-matmul{{{options}}})"


def _opt(src: str, dst: str, pipeline: str) -> None:
    from inferx_compiler.cli.common import python_entry

    subprocess.run(python_entry("inferx_compiler.cli.opt") + ["--context=iree", src, f"--pass-pipeline={pipeline}",
                                                             "-o", dst], check=True, stderr=subprocess.DEVNULL)


def _rule_tile(src: str, target: str) -> str:
    from inferx_compiler.cli.common import python_entry

    proc = subprocess.run(python_entry("inferx_compiler.cli.opt") + [
        "--context=iree", src, f"--pass-pipeline=builtin.module(inferx-hopper-matmul{{target={target}}})",
        "-o", os.devnull], check=True, capture_output=True, text=True)
    if ", tile " not in proc.stderr:
        return "", ""
    tile = proc.stderr.split(", tile ")[1].split(" ")[0]
    split = proc.stderr.split(" split ")[1].split(" ")[0] if " split " in proc.stderr else "1"
    return tile, split


def prepare(out: str, target_name: str, only: str = "", tiles: str = "") -> int:
    from inferx_compiler.targets import get_target

    target = get_target(target_name)
    flags = ["--iree-hal-target-device=cuda", f"--iree-cuda-target={target.cuda_target}"]
    os.makedirs(out, exist_ok=True)
    index = []
    for m, n, k, what in SHAPES:
        if only and f"{m}x{n}x{k}" not in only.split(","):
            continue
        src = os.path.join(out, f"mm_{m}x{n}x{k}.mlir")
        with open(src, "w") as f:
            f.write(module_text(m, n, k))
        rule, rule_split = _rule_tile(src, target.name)
        variants = [("iree", f"builtin.module(inferx-split-reduction{{target={target.name}}})")]
        variants += [(f"tile {t}", _variant_pipeline(t, target.name))
                     for t in (tiles.split(",") if tiles else TILES) if _fits(t, m, k)]
        for name, pipeline in variants:
            tag = f"mm_{m}x{n}x{k}_{name.replace(' ', '')}"
            mlir = os.path.join(out, tag + ".mlir")
            _opt(src, mlir, pipeline)
            subprocess.run(["iree-compile", mlir, *flags, *(TMA_FLAGS if name.endswith(":tma") else []),
                            "-o", os.path.join(out, tag + ".vmfb")], check=True)
            index.append({"m": m, "n": n, "k": k, "what": what, "variant": name,
                          "rule": name in (f"tile {rule}", f"tile {rule}:{rule_split}"),
                          "vmfb": tag + ".vmfb", "split": 1})
            print(f"{m}x{n}x{k} {name}{' (rule)' if index[-1]['rule'] else ''}", flush=True)
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    return 0


def run(directory: str, out: str) -> int:
    rows = timed_rows(directory, lambda r: f"{r['variant']} {'rule' if r['rule'] else ''}", "rel_l2_vs_iree")
    write_rows(out, "extern_sweep", rows, markdown(rows))
    return 0


def markdown(rows) -> str:
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    lines = ["| M x N x K | from | " + " | ".join(variants) + " | rule's tile | rule ÷ IREE |",
             "| --- | --- | " + " | ".join("---" for _ in variants) + " | --- | --- |"]
    for m, n, k, what in SHAPES:
        mine = {r["variant"]: r for r in rows if (r["m"], r["n"], r["k"]) == (m, n, k)}
        if "iree" not in mine:
            continue
        cells = [f"{mine[v]['busy_us']:.1f} us ({mine[v]['kernels']:.0f})" if v in mine else "-" for v in variants]
        rule = next((r for r in mine.values() if r["rule"]), None)
        ratio = f"{rule['busy_us'] / mine['iree']['busy_us']:.2f}" if rule else "-"
        lines.append(f"| {m}x{n}x{k} | {what} | " + " | ".join(cells) +
                     f" | {rule['variant'][5:] if rule else 'declined'} | {ratio} |")
    return "\n".join(lines) + ("\n\nKernel time per call (CUPTI: the matmul and its epilogue dispatch), median of 5 x "
                               "20 calls; every variant's output against IREE's: rel_l2_vs_iree in extern_sweep.json.\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["prepare", "run"])
    p.add_argument("dir")
    p.add_argument("--target", default="h200")
    p.add_argument("--shapes", default="", help="prepare only these (comma list of MxNxK)")
    p.add_argument("--tiles", default="", help="variants to build: comma list of TILE or TILE:SPLIT "
                                               f"(default: {','.join(TILES)}, with the rule's split)")
    p.add_argument("--out", default=os.environ.get("OUT", "extern-sweep-out"))
    a = p.parse_args(argv)
    return prepare(a.dir, a.target, a.shapes, a.tiles) if a.mode == "prepare" else run(a.dir, a.out)


if __name__ == "__main__":
    sys.exit(main())
