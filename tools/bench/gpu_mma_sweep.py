"""MMA tile sweep: IREE's TileAndFuse matmul configuration against alternatives, per shape.

    python tools/bench/gpu_mma_sweep.py prepare build/mma-sweep      # here: DIR/*.vmfb, DIR/index.json
    python tools/bench/gpu_mma_sweep.py run build/mma-sweep --out $OUT   # on the GPU host

Each module is gpu_split_sweep.py's f16 matmul (+ bias, f16 out, f32 accumulation) with a
`compilation_info` on the matmul (IREE honours it in place of its own choice), one per variant
below; `iree` is IREE's own configuration. Kernel time per call through CUPTI (gpu_kernels.py),
median of 5 x 20 calls, and each output against the `iree` one (relative L2).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpu_split_sweep import module_text, timed_rows, write_rows  # noqa: E402

SHAPES = [(1024, 3072, 768), (1024, 768, 3072), (1024, 768, 768), (512, 2304, 768)]
MMA = "#iree_gpu.mma_layout<NV_MMA_SYNC_F32_16x8x16_F16>"
# name -> (workgroup M, N), subgroup (M, N) in MMA tiles (16 x 8), reduction (K / 16), stages
VARIANTS = {
    "wg64x64_sg2x4_r8": ((64, 64), (2, 4), 8, 2),  # what IREE 3.13 picks for these shapes
    "wg128x128_sg4x8_r4": ((128, 128), (4, 8), 4, 2),
    "wg128x128_sg4x4_r4": ((128, 128), (4, 4), 4, 2),
    "wg128x64_sg2x4_r8": ((128, 64), (2, 4), 8, 2),
    "wg64x128_sg2x4_r8": ((64, 128), (2, 4), 8, 2),
    "wg128x128_sg2x8_r4_s3": ((128, 128), (2, 8), 4, 3),
    "wg64x64_sg2x4_r8_s3": ((64, 64), (2, 4), 8, 3),
}


def compilation_info(workgroup, subgroup, reduction, stages) -> str:
    subgroups = (workgroup[0] // (16 * subgroup[0])) * (workgroup[1] // (8 * subgroup[1]))
    return ("#iree_codegen.compilation_info<lowering_config = #iree_gpu.lowering_config<{convert_acc_gemm, "
            f"mma_kind = {MMA}, promote_operands = [0, 1], reduction = [0, 0, {reduction}], "
            f"subgroup = [{subgroup[0]}, {subgroup[1]}, 0], workgroup = [{workgroup[0]}, {workgroup[1]}, 0]}}>, "
            "translation_info = #iree_codegen.translation_info<pipeline = #iree_gpu.pipeline<TileAndFuse> "
            f"workgroup_size = [{32 * subgroups}, 1, 1] subgroup_size = 32, {{gpu_pipeline_options = "
            f"#iree_gpu.pipeline_options<prefetch_num_stages = {stages}, no_reduce_shared_memory_bank_conflicts = false, "
            "use_igemm_convolution = false>}>>")


def prepare(out: str) -> int:
    os.makedirs(out, exist_ok=True)
    index = []
    for m, n, k in SHAPES:
        base = module_text(m, n, k)
        for name, (wg, sg, red, stages) in [("iree", (None, None, None, None))] + list(VARIANTS.items()):
            text = base
            if wg is not None:
                text = base.replace("%p = linalg.matmul ins(", "%p = linalg.matmul {compilation_info = "
                                    + compilation_info(wg, sg, red, stages) + "} ins(")
            src = os.path.join(out, f"mm_{m}x{n}x{k}_{name}.mlir")
            with open(src, "w") as f:
                f.write(text)
            vmfb = src[:-5] + ".vmfb"
            r = subprocess.run(["iree-compile", src, "--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80",
                                "-o", vmfb], capture_output=True, text=True)
            ok = r.returncode == 0
            print(f"{m}x{n}x{k} {name}: {'ok' if ok else 'FAILED ' + r.stderr.strip().splitlines()[-1][:200]}", flush=True)
            if ok:
                index.append({"m": m, "n": n, "k": k, "variant": name, "vmfb": os.path.basename(vmfb)})
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    return 0


def run(directory: str, out: str) -> int:
    write_rows(out, "mma_sweep", timed_rows(directory, lambda r: r["variant"], "rel_l2_vs_iree"))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["prepare", "run"])
    p.add_argument("dir")
    p.add_argument("--out", default=os.environ.get("OUT", "mma-sweep-out"))
    a = p.parse_args(argv)
    return prepare(a.dir) if a.mode == "prepare" else run(a.dir, a.out)


if __name__ == "__main__":
    sys.exit(main())
