"""Weight-only int8/int4 products with few rows on CUDA targets, through our Triton kernel
(inferx_compiler/kernels/triton_dequant.py), dispatched from IREE as an external executable.

inferx-quantize-contractions builds a CUDA weight-only layer whose rows are not tokens (an MLP's
batch: a matrix-vector product) with its weight stored reduction-innermost, [N, K] int8 or
[N, K/G, G] int4 with f16 scales. IREE 3.13 compiles `truncf(x) . dequantize(w)` there into a
loop that reads the packed weight far below the memory's rate (the 8x4096^2 MLP at batch 1 in
int4: 1.31 ms on an H200 against 16.5 us of weight bytes at its copy rate). This module builds,
for such a layer,

    p[S, M, N] = extern(x16[M, K], wq, scale[, y0])      (the kernel; y0 read when S = 1)
    y = p (S = 1)  or  y0 + sum_s p[s]                    (split-K: a linalg reduction)

Configuration (`matvec_spec`): 64 weight rows a program, one int4 group (or 128 int8 values) a
step, 16 activation rows a program (zero-padded; 64 above 16 rows), 4 warps, 3 stages; K split
in S slices, the smallest power of two that gives every SM three programs, at most 8, with at
least two steps a slice (eight for 64-row tiles). The sweep's best for the MLP's 4096x4096
layers: 1 and 8 rows 64x16 tiles split 8, 64 rows 64x64 tiles split 4 (139 us for 8 layers
against 181 with 16-row tiles). Measured on an H200 (tools/bench/gpu_dequant_sweep.py, docs/bench/2026-12-03-h200-int4/).
Declined (the caller keeps IREE's form): dynamic rows, more than 64 rows, int8 below 16 rows
(IREE's matrix-vector code is as fast there, in fewer dispatches), shapes the kernel
does not take (an int4 group that is not a power of two of at least 16, K not a multiple of a
step), a CUDA architecture before sm_80, builds without Triton.
"""

from __future__ import annotations

from typing import Optional

from .extern_dispatch import ExternalKernel, declare, dispatch, scratch_types
from .split_reduction import sum_slices

MAX_ROWS = 64
# int8 below this many rows stays IREE's: on the H200 its matrix-vector loop read the MLP's int8
# weights at 2 TB/s (8.6 us a layer) against the kernel's 6.5 us plus the split-K sum, 0.148
# against 0.176 ms a call at batch 1; at 64 rows the kernel won, 0.506 -> 0.305 ms.
MIN_INT8_ROWS = 16
BLOCK_N = 64
MAX_SPLIT = 8
PROGRAMS_PER_SM = 3


def triton_arch(arch: str) -> Optional[int]:
    """sm_90 -> 90; None for an architecture the kernel does not take (before sm_80)."""
    digits = arch[3:] if arch.startswith("sm_") else ""
    return int(digits) if digits.isdigit() and int(digits) >= 80 else None


def matvec_spec(m: int, n: int, k: int, kind: str, group: int, sms: int, arch: int):
    """The kernel configuration for an M x N x K layer (triton_dequant.DequantSpec), or a string
    saying why the kernel declines it."""
    from inferx_compiler.kernels.triton_dequant import DequantSpec

    if m < 0:
        return "dynamic rows"
    if m > MAX_ROWS:
        return f"{m} rows (the kernel takes at most {MAX_ROWS})"
    if kind == "int8" and m < MIN_INT8_ROWS:
        return (f"int8 with {m} rows: IREE's matrix-vector code reads an int8 weight about as fast, in fewer "
                f"dispatches")
    block_m = 16 if m <= 16 else 64
    min_steps = 2 if block_m == 16 else 8  # a 64-row tile does four times the work per weight byte
    tiles = -(-m // block_m) * -(-n // BLOCK_N)
    split = 1
    step = group if kind == "int4" else 128
    while (split < MAX_SPLIT and tiles * split < PROGRAMS_PER_SM * sms and k % (2 * split) == 0
           and (k // (2 * split)) % step == 0 and k // (2 * split) >= min_steps * step):
        split *= 2
    try:
        return DequantSpec(m, n, k, kind, group if kind == "int4" else 0, split == 1, split, block_m, BLOCK_N,
                           step, warps=4, stages=3, arch=arch)
    except ValueError as e:
        return str(e)


def declined(target) -> Optional[str]:
    """Why the kernel is not available for `target` (a CUDA Target), or None."""
    from inferx_compiler.kernels import triton_matmul

    if triton_arch(target.arch) is None:
        return f"{target.arch} is before sm_80"
    return triton_matmul.available()


def product(module, x16, wq, scale, y0, spec):
    """y0 + x16 . dequantize(wq, scale) through the kernel (declared in `module` once per
    configuration). Call inside an insertion point and location."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    from inferx_compiler.kernels import triton_dequant

    kernel = _external(triton_dequant.compile_kernel(spec))
    if not _declared(module, kernel.name):
        declare(module, kernel)
    arguments = [x16, wq, scale] + ([y0] if spec.has_init else [])
    partial_t = ir.RankedTensorType.get([spec.split, spec.m, spec.n], ir.F32Type.get())
    partial = dispatch(kernel, arguments, [partial_t] + scratch_types(kernel, 1))[0]
    if spec.split == 1:
        return tensor.CollapseShapeOp(y0.type, partial, [[0, 1], [2]]).result
    return sum_slices(partial, y0)


def _declared(module, name: str) -> bool:
    from iree.compiler import ir

    for op in module.regions[0].blocks[0].operations:
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return True
    return False


def _external(compiled) -> ExternalKernel:
    from .dispatch_config import CONFIG_ATTR
    from .dispatch_report import REPORT_ATTR

    spec = compiled.spec
    name = f"inferx_dequant_{spec.kind}_{spec.m}x{spec.n}x{spec.k}_{spec.key()[:8]}"
    report = {"root": f"inferx_dequant_matvec (Triton, sm_{spec.arch})", "kind": "contraction",
              "element_type": spec.kind, "loops": [spec.m, spec.n, spec.k], "flops": 2 * spec.m * spec.n * spec.k,
              "linalg_ops": 0, "fused": ["dequantization"]}
    config = {"source": "rule (inferx-quantize-contractions)",
              "signature": f"weight-only {spec.kind} {spec.m}x{spec.n}x{spec.k}",
              "config": f"{spec.block_m}x{spec.block_n} rows, step {spec.step}, {spec.warps} warps, "
                        f"{spec.stages} stages, split {spec.split}", "candidates": 0}
    return ExternalKernel(name, compiled.name, compiled.ptx, spec.grid, compiled.threads, compiled.shared_bytes,
                          read_only=spec.input_bindings, written=compiled.parameters - spec.input_bindings,
                          annotations=((REPORT_ATTR, report), (CONFIG_ATTR, config)),
                          scratch_bytes=compiled.scratch_bytes)
