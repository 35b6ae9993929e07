"""The weight-only kernel as builds configure it (passes/dequant_matvec.matvec_spec), checked on a
GPU host against float64 for a set of layer shapes: the forms a shape gets (one int4 row resident
with the word products, the byte form, tiles, split K) each meet fresh random data once.

    python tools/bench/gpu_dequant_check.py --out $OUT        # on the GPU host (torch + Triton)

The kernels are JIT-compiled by the host's Triton, which can differ from the version builds use;
a shape whose error passes 2e-3 (int4: f16 sums of eight; int8 below that) fails the run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_dequant_sweep import check, make_layers  # noqa: E402

from passes.dequant_matvec import matvec_spec  # noqa: E402

# (rows, N, K, kind, group): the MLP's layer, ragged N, long rows, K too short for the word
# products, small groups, and the tiled and split forms for a few rows
SHAPES = [(1, 4096, 4096, "int4", 128), (1, 100, 1024, "int4", 128), (1, 11008, 4096, "int4", 128),
          (1, 4096, 8192, "int4", 128), (1, 1000, 512, "int4", 32), (1, 300, 2048, "int4", 64),
          (1, 96, 1024, "int4", 32), (1, 4096, 4096, "int4", 16), (1, 768, 3072, "int4", 128),
          (8, 4096, 4096, "int4", 128), (64, 4096, 4096, "int8", 0), (16, 1000, 2048, "int8", 0)]
TOLERANCE = 2e-3


def form(spec) -> str:
    if spec.programs:
        return f"resident x {spec.programs} programs, {spec.block_n} rows, {spec.warps} warps" + (
            ", words" if spec.words else ", bytes")
    return f"tiles {spec.block_m}x{spec.block_n}, split {spec.split}" + ("" if spec.dot else ", CUDA cores")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import torch

    props = torch.cuda.get_device_properties(0)
    arch = 10 * props.major + props.minor
    gen = torch.Generator().manual_seed(0)
    rows, failed = [], 0
    for m, n, k, kind, group in SHAPES:
        spec = matvec_spec(m, n, k, kind, group, props.multi_processor_count, arch)
        if isinstance(spec, str):
            print(f"{m} x {n} x {k} {kind}: declined ({spec})", flush=True)
            continue
        err = check(torch, spec, make_layers(torch, kind, n, k, group or 1, 1, gen)[0], gen)
        failed += not err <= TOLERANCE
        rows.append({"m": m, "n": n, "k": k, "kind": kind, "group": group, "form": form(spec), "err": err})
        print(f"{m} x {n} x {k} {kind} g{group}: {form(spec)}: err {err:.1e}"
              + ("" if err <= TOLERANCE else "  WRONG"), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "dequant_check.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "triton": __import__("triton").__version__,
                   "rows": rows}, f, indent=1)
    print(f"{len(rows)} shapes, {failed} wrong", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
