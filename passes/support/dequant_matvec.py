"""Weight-only int8/int4 products with few rows on CUDA targets, through our Triton kernel
(inferx_compiler/kernels/triton_dequant.py), dispatched from IREE as an external executable.
The same kernel takes f16 weights as stored (kind f16: passes/f16_matvec.py, a float decode step).

inferx-quantize-contractions builds a CUDA weight-only layer whose rows are not tokens (an MLP's
batch: a matrix-vector product) with its weight stored reduction-innermost, [N, K] int8 or
[N, K/G, G] int4 with f16 scales. IREE 3.13 compiles `truncf(x) . dequantize(w)` there into a
loop that reads the packed weight far below the memory's rate (the 8x4096^2 MLP at batch 1 in
int4: about 80x the time its weight bytes take at the GPU's copy rate). This module builds,
for such a layer,

    p[S, M, N] = extern(x16[M, K], wq, scale[, y0])      (the kernel; y0 read when S = 1)
    y = p (S = 1)  or  y0 + sum_s p[s]                    (split-K: a linalg reduction)
    z = extern(x16, wq, scale, epilogue inputs...)        (one slice: the ops after the product
                                                           finished in the kernel, as
                                                           passes/analysis/matmul_epilogue.py finds them)

Configuration (`matvec_spec`): 64 weight rows a program, one int4 group (or 128 int8 values) a
step, 16 activation rows a program (zero-padded; 64 above 16 rows), 4 warps, 3 stages; K split
in S slices, the smallest power of two that gives every SM three programs, at most 8, with at
least two steps a slice (eight for 64-row tiles): the sweep's best for the MLP's 4096x4096
layers (1 and 8 rows in 16-row tiles of 64 weight rows, split 8; 64 rows in one 64-row tile,
split 4). Up to 16 int4 rows whose product is followed by elementwise ops take one slice instead
(32 weight rows, two groups a step, 4 stages) and finish those ops: slower in the kernel but a
launch fewer a layer, which IREE's per-call host work makes the larger cost. One int4 row takes
the dot-free form instead, always in one slice (`_one_row_spec`): f16 products on the CUDA cores
rather than a 16-row tensor-core tile that is 15/16 padding, with x loaded once a program where
the whole row fits; there the weights are loaded as 32-bit words and multiplied by x held as the
f16 pairs of each word (no relayout between them), each next tile loaded before this one's
products, under a budget of 128 registers that makes ptxas issue a tile's loads at once, four
words a product call and 8 rows a tile on 8 warps (about as fast as a kernel that only reads
the weights, a launch a layer). Each step's figures (H200 sweeps, H100 runs):
docs/levers/gpu-int4-matvec.md.
Declined (the caller keeps IREE's form): dynamic rows, more than 64 rows, int8 below 16 rows
(IREE's matrix-vector code is as fast there, in fewer dispatches), shapes the kernel
does not take (an int4 group that is not a power of two of at least 16, K not a multiple of a
step), a CUDA architecture before sm_80, builds without Triton.
"""

from __future__ import annotations

from typing import Optional

from inferx_compiler.passes.support.extern_dispatch import ExternalKernel, declare, is_declared, replace_product

MAX_ROWS = 64
# int8 below this many rows stays IREE's: its matrix-vector loop reads an int8 weight about as fast
# as the kernel plus its split-K sum, in fewer dispatches; at 64 rows the kernel wins
# (docs/levers/gpu-int4-matvec.md).
MIN_INT8_ROWS = 16
BLOCK_N = 64
MAX_SPLIT = 8
# one slice with the epilogue fused (int4, up to 16 rows): the sweep's best one-slice tile
# (docs/levers/gpu-int4-matvec.md)
FUSED_BLOCK_N = 32
FUSED_STEP = 256
PROGRAMS_PER_SM = 3
# one int4 row, x resident, word products (INT4_WORDS_DOT): 8 rows on 8 warps, 2 programs a SM,
# the fastest in the model (fewer cross-warp reductions a row than 4 rows on 4 warps, 4 a SM);
# the dot-free form beats the tensor-core form's best one-slice tile (docs/levers/gpu-int4-matvec.md)
RESIDENT_BLOCK_N = 8
RESIDENT_WARPS = 8
ONE_ROW_PROGRAMS_PER_SM = 2
RESIDENT_MAX_K = 8192  # x's whole row lives in registers
# x resident: its weights as words with each next tile loaded ahead, under this register budget (2 programs
# of 256 threads a SM still fit: 64 K registers); without a budget ptxas issued a tile's loads two at a time
RESIDENT_REGISTERS = 128
ONE_ROW_BLOCK_N = 8
ONE_ROW_MAX_STEP = 2048


def triton_arch(arch: str) -> Optional[int]:
    """sm_90 -> 90; None for an architecture the kernel does not take (before sm_80)."""
    digits = arch[3:] if arch.startswith("sm_") else ""
    return int(digits) if digits.isdigit() and int(digits) >= 80 else None


def matvec_spec(m: int, n: int, k: int, kind: str, group: int, sms: int, arch: int, epilogue=None):
    """The kernel configuration for an M x N x K layer (triton_dequant.DequantSpec), or a string
    saying why the kernel declines it. `epilogue` (a triton_matmul.Epilogue, the ops after the
    product, the init its first input): up to 16 int4 rows take one slice and finish it (32
    weight rows a program, two groups of 128 a step, 4 stages), which costs the kernel more time
    than split-K but saves the second dispatch a layer that IREE's per-call work makes dear (an
    f16 weight, a float decode step, takes the same form: not measured on a GPU itself yet);
    otherwise the split rule decides and a one-slice pick finishes it too."""
    from inferx_compiler.kernels.triton_dequant import DequantSpec

    if m < 0:
        return "dynamic rows"
    if m > MAX_ROWS:
        return f"{m} rows (the kernel takes at most {MAX_ROWS})"
    if kind not in ("int8", "int4", "f16"):
        return f"weight kind {kind}"
    if kind == "int8" and m < MIN_INT8_ROWS:
        return (f"int8 with {m} rows: IREE's matrix-vector code reads an int8 weight about as fast, in fewer "
                f"dispatches")
    group = group if kind == "int4" else 0
    try:
        if kind == "int4" and m == 1:
            return _one_row_spec(n, k, group, sms, arch, epilogue)
        if epilogue is not None and kind in ("int4", "f16") and m <= 16 and k % max(FUSED_STEP, group) == 0:
            return DequantSpec(m, n, k, kind, group, False, 1, 16, FUSED_BLOCK_N, max(FUSED_STEP, group), warps=4,
                               stages=4, arch=arch, epilogue=epilogue)
        block_m = 16 if m <= 16 else 64
        min_steps = 2 if block_m == 16 else 8  # a 64-row tile does four times the work per weight byte
        tiles = -(-m // block_m) * -(-n // BLOCK_N)
        split = 1
        step = group if kind == "int4" else 128
        while (split < MAX_SPLIT and tiles * split < PROGRAMS_PER_SM * sms and k % (2 * split) == 0
               and (k // (2 * split)) % step == 0 and k // (2 * split) >= min_steps * step):
            split *= 2
        fused = epilogue if split == 1 else None
        return DequantSpec(m, n, k, kind, group, split == 1 and fused is None, split, block_m, BLOCK_N, step,
                           warps=4, stages=3, arch=arch, epilogue=fused)
    except ValueError as e:
        return str(e)


def _one_row_spec(n: int, k: int, group: int, sms: int, arch: int, epilogue):
    """One int4 row: the dot-free form in one slice (the init, or the epilogue, finished in it):
    x resident on ONE_ROW_PROGRAMS_PER_SM programs a SM taking whole weight rows where K / group is a
    power of two and K at most RESIDENT_MAX_K, else ONE_ROW_BLOCK_N rows a program in steps of
    the largest power-of-two number of groups up to ONE_ROW_MAX_STEP values that divides K."""
    from inferx_compiler.kernels.triton_dequant import DequantSpec, words_fit

    groups = k // group if group and k % group == 0 else 0
    common = dict(stages=3, arch=arch, dot=False, epilogue=epilogue)
    if groups and not groups & (groups - 1) and k <= RESIDENT_MAX_K:
        programs = min(ONE_ROW_PROGRAMS_PER_SM * sms, -(-n // RESIDENT_BLOCK_N))
        words = words_fit(RESIDENT_BLOCK_N, k, group, RESIDENT_WARPS)
        return DequantSpec(1, n, k, "int4", group, epilogue is None, 1, 1, RESIDENT_BLOCK_N, k, warps=RESIDENT_WARPS,
                           programs=programs, words=words, ahead=True, max_registers=RESIDENT_REGISTERS, **common)
    step = group
    while step * 2 <= ONE_ROW_MAX_STEP and k % (step * 2) == 0:
        step *= 2
    return DequantSpec(1, n, k, "int4", group, epilogue is None, 1, 1, ONE_ROW_BLOCK_N, step, warps=4, **common)


def declined(target) -> Optional[str]:
    """Why the kernel is not available for `target` (a CUDA Target), or None."""
    from inferx_compiler.kernels import triton_matmul

    if triton_arch(target.arch) is None:
        return f"{target.arch} is before sm_80"
    return triton_matmul.available()


def rewrite(module, matmul, x16, wq, scale, y0, spec, plan=None) -> None:
    """Replace `matmul` (whose operands are now x16, the stored weight and its scales (None for
    an f16 weight), the init y0) by the kernel, declared in `module` once per configuration: y0 + x16 . dequantize(wq,
    scale), or, with an epilogue `plan` (matmul_epilogue.EpiloguePlan; spec.epilogue is its
    Epilogue), the value its ops computed, which are erased with the matmul. x16 must be built
    before the matmul; call inside the matmul's location."""
    from inferx_compiler.kernels import triton_dequant

    kernel = _external(triton_dequant.compile_kernel(spec), plan)
    if not is_declared(module, kernel.name):
        declare(module, kernel)
    inputs = [x16, wq] + ([scale] if scale is not None else []) + ([y0] if spec.has_init else [])
    replace_product(matmul, kernel, inputs, spec.split, y0, plan)


def _external(compiled, plan=None) -> ExternalKernel:
    from inferx_compiler.passes.infra.attributes import CONFIG_ATTR, REPORT_ATTR

    spec = compiled.spec
    name = f"inferx_dequant_{spec.kind}_{spec.m}x{spec.n}x{spec.k}_{spec.key()[:8]}"  # (the key covers the epilogue)
    widened = spec.kind != "f16"  # an f16 weight is read as stored
    report = {"root": f"inferx_dequant_matvec (Triton, sm_{spec.arch})", "kind": "contraction",
              "element_type": spec.kind, "loops": [spec.m, spec.n, spec.k], "flops": 2 * spec.m * spec.n * spec.k,
              "linalg_ops": 0,
              "fused": ["dequantization"] * widened + (sorted(set(plan.fused)) if plan is not None else [])}
    config = {"source": "rule (inferx-quantize-contractions)" if widened else "rule (inferx-f16-matvec)",
              "signature": f"{'weight-only ' * widened}{spec.kind} {spec.m}x{spec.n}x{spec.k}",
              "config": f"{spec.block_m}x{spec.block_n} rows, step {spec.step}, {spec.warps} warps, "
                        f"{spec.stages} stages, split {spec.split}" + _form(spec) + (", epilogue" if spec.epilogue else ""),
              "candidates": 0}
    return ExternalKernel(name, compiled.name, compiled.ptx, spec.grid, compiled.threads, compiled.shared_bytes,
                          read_only=spec.input_bindings, written=compiled.parameters - spec.input_bindings,
                          annotations=((REPORT_ATTR, report), (CONFIG_ATTR, config)),
                          scratch_bytes=compiled.scratch_bytes)


def _form(spec) -> str:
    if spec.programs:
        return (f", CUDA cores, x resident on {spec.programs} programs" + (", word products" if spec.words else "")
                + (", a warp a row" if spec.warp_rows else "") + (", next tile ahead" if spec.ahead else "")
                + (f", {spec.max_registers} registers" if spec.max_registers else ""))
    return "" if spec.dot else ", CUDA cores"
