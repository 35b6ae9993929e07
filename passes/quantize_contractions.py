"""inferx-quantize-contractions: int8/int4 matmuls against stored weights.

Runs in IREE's context before IREE's pipeline (after inferx-unbroadcast-matmul, which leaves
every projection as `linalg.matmul(x[M, K], w[K, N])`). For each linalg.matmul annotated
`inferx.precision = "i8" | "i4"` whose right-hand operand is a weight (an entry argument
tagged `inferx.parameter`, or its `linalg.transpose`, as ONNX Gemm transB=1 gives), it rewrites

    y = x . w                                             (f32, into y0)
into
    d[m]    = (max_k x[m, k] - min_k x[m, k]) / 255           (per-row range, 0 included)
    z[m]    = roundeven(-min_k x[m, k] / d[m]) - 128         (per-row zero point)
    xq      = clamp(roundeven(x / d[m]) + z[m], -128, 127) : i8   (dynamic, asymmetric)
    acc[m, n] = sum_k xq[m, k] * w8[k, n]                              (s8 x s8 -> s32)
    y[m, n]   = y0[m, n] + d[m] * s8[n] * (acc[m, n] - z[m] * sum_k w8[k, n])
    int8:  w8 = wq, s8 = s
    int4:  s8[n] = max_g s4[g, n] * 7/127, w8 = roundeven(wq4[g, kk, n] * s4[g, n] / s8[n]) collapsed
           to [K, N]: the int4 weight requantized per column, once, at load

where `wq` and `s` are new entry arguments tagged with the derived parameter keys of
`inferx_compiler.precision.quantization` ("W#q:int8", "W#q:int8:scale", ...): the driver stores the
integer weights under those keys, and the f32 weight argument is dropped when nothing else
reads it. Asymmetric rows: activations after ReLU/GELU are mostly positive, and a symmetric
range would waste half the levels on them (the MLP's int8 error was 4.5%, onnxruntime's
asymmetric quantize_dynamic 3.5%). The column sums depend on the weight alone (IREE hoists them
to load time). Why integer arithmetic and not dequantization into an f32 matmul: on the AVX2 build
machine (IREE 3.13, 2 threads, one 4096x4096 layer) the fused dequantize-matmul dispatch took
8-9 ms at batch 1 against 3.3 ms for f32, while this form runs IREE's s8 mmt4d microkernel:
0.89 ms. Why int4 is requantized to int8 at load rather than summed per group: x86 mmt4d has no
s4 input either way, and one s32 sum per group ran the 8x4096^2 MLP at batch 8 in 32 ms against
int8's 14.5 (same run): int4 now stores half of int8's bytes and computes at int8's speed, the
requantization adding at most half an int8 step per weight.

On CPUs with AVX-512 VNNI the sums run on our own kernels (kernels/u8s8_gemm.c, u8s4_gemm.c,
dispatched through cpu_extern.py; static and dynamic rows; `vnni-kernel=false` keeps IREE's):
    int8:  acc' = (xq + 128) . w8 by `vpdpbusd` (u8 x s8: twice the rate of IREE's s8 x s8
           microkernel, which uses 16-bit pairs), acc = acc' - 128 * colsum in s32, then as above:
           the same numbers bit for bit (BERT-base int8 b1 on a Zen 5: 36.4 -> 22.7 ms)
    int4:  f[m, n] = sum_g s4[g, n] * sum_{k in g} (xq + 128) * wq4 (the int4 weight read as stored,
           widened in registers), y = y0 + d[m] * (f - (z[m] + 128) * sum_g s4[g, n] colsum_g[n]):
           true group scales, half of int8's bytes at run time
On CPUs with AMX (amx_int8) and K a multiple of 64, the int8 sums run on kernels/u8s8_amx_gemm.c
instead (`tdpbusd` on the same u8 activations and packed weight: the same sums, bit for bit).
The weights are packed for the kernels at load (IREE hoists it). Without a C compiler, or where a
kernel's shape rules decline (kernels/cpu_objects.vnni_kernel_declined, which calibration's
emulation asks too), IREE's code and the requantized int4 stay, with the reason in the remark.

On CUDA targets the form is weight-only (IREE 3.13's CUDA code has no integer MMA): the
activations are rounded to f16, the weights dequantized to f16 by an elementwise generic with f16
scales that IREE fuses into the matmul's dispatch (the kernel reads the int8/int4 weight), and
the f16 x f16 linalg.matmul accumulates in f32:
    int8:  y = y0 + truncf(x) . (sitofp(wq[k, n]) * s[n])
    int4:  y = y0 + truncf(x) . collapse(sitofp(wq[g, kk, n]) * s[g, n])      ([K/G, G, N] -> [K, N])
This form is right against the onnxruntime emulation; two others IREE 3.13 compiled wrong for
a BERT's matmuls (the reduction-innermost weight as a transposed-B generic contraction, and the
int4 contraction over (group, element) as one generic). The cost: IREE's matvec over a [K, N]
int8 weight is slow, about 10x the f16 one (docs/levers/gpu-int4-matvec.md).
Where the rows are not tokens (the matrix-vector form: weight stored [N, K] / [N, K/G, G]), the
product runs on our Triton kernel instead (passes/support/dequant_matvec.py: static rows up to 64, sm_80
and later, Triton installed; `matvec-kernel=false` or `--disable-pass inferx-dequant-matvec`
keeps IREE's form), with the reason in the remark where it declines.

A generation model built in f16 (its projections annotated by
inferx-annotate-precision{stored-weights=true}) brings f16 x f16 products on CUDA: their
activations are used as they are, an f16 result becomes an f32 sum truncated for its users
(`widen_f16_product`), and a decode step's few token rows (at most MATVEC_TOKEN_ROWS static rows)
take the matrix-vector layout and our kernel, as an MLP's rows do.

Declined, with a remark: a weight that is not a stored parameter, a non-static weight, int4
whose group size does not divide K, a matmul whose operands are not f32 (or f16 on CUDA). A target without an
executable backend fails the pass. Spelled
`inferx-quantize-contractions{group-size=128 vnni-kernel=true matvec-kernel=true}` (the target is
the module's `inferx.target`: inferx-set-target{target=NAME} before it on a bare module).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from inferx_compiler.dialects.inferx import PARAMETER_ATTR, PRECISION_ATTR
from inferx_compiler.precision.quantization import INT4_MAX, INT8_MAX, WeightScheme
from inferx_compiler.passes.support import cpu_extern
from inferx_compiler.passes.support import dequant_matvec
from inferx_compiler.passes.infra.base import PassFailure, TargetedPass
from inferx_compiler.passes.analysis.func_util import add_parameter_argument, arg_attrs, erase_unused_parameter_arguments, public_functions
from inferx_compiler.passes.support.iree_ir import defining_op, generic, is_zero_fill, plain_matmul, resized
from inferx_compiler.passes.analysis.linalg_analysis import collect
from inferx_compiler.passes.analysis.matmul_epilogue import fusible_epilogue
from inferx_compiler.passes.analysis.remarks import op_counts, remark
from inferx_compiler.passes.support.rounding import round_half_even

INTEGER_PRECISIONS = ("i8", "i4")
ACTIVATION_LEVELS = 255  # int8 activations: 256 levels per row, asymmetric
U8_OFFSET = 128.0  # the VNNI kernel reads activations as u8: the int8 code plus 128


@dataclasses.dataclass(frozen=True)
class StoredWeight:
    """The parameter a matmul's right-hand operand reads, and whether it reads it transposed."""

    key: str
    value: object  # the f32 [K, N] or [N, K] entry argument
    transposed: bool


def _parameter_key(value) -> Optional[str]:
    from iree.compiler import ir

    if not isinstance(value, ir.BlockArgument):
        return None
    func_op = value.owner.owner
    if func_op is None or func_op.operation.name != "func.func":
        return None
    func_op = func_op.operation
    attrs = arg_attrs(func_op)
    if value.arg_number >= len(attrs) or PARAMETER_ATTR not in attrs[value.arg_number]:
        return None
    return ir.StringAttr(attrs[value.arg_number][PARAMETER_ATTR]).value


def stored_weight(value) -> Optional[StoredWeight]:
    """The weight behind a matmul operand: a parameter argument, or its 2-D transpose."""
    from iree.compiler import ir

    key = _parameter_key(value)
    if key is not None:
        return StoredWeight(key, value, False)
    op = defining_op(value, ("linalg.transpose",))
    if op is None or [int(p) for p in ir.DenseI64ArrayAttr(op.attributes["permutation"])] != [1, 0]:
        return None
    key = _parameter_key(op.operands[0])
    return StoredWeight(key, op.operands[0], True) if key is not None else None


def ir_dynamic() -> int:
    from iree.compiler import ir

    return ir.ShapedType.get_dynamic_size()


def _f32(op) -> bool:
    from iree.compiler import ir

    return all(isinstance(v.type.element_type, ir.F32Type) for v in op.operands)


def _dim(value, index: int):
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    size = value.type.shape[index]
    if size != ir.ShapedType.get_dynamic_size():
        return size
    return tensor.dim(value, arith.constant(ir.IndexType.get(), index))


def _filled(sizes: list, element_type, fill):
    """A tensor of `sizes` (ints or index values) filled with the scalar `fill`."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, linalg, tensor

    value = (ir.FloatAttr.get(element_type, fill) if isinstance(element_type, ir.FloatType)
             else ir.IntegerAttr.get(element_type, int(fill)))
    scalar = arith.ConstantOp(element_type, value).result
    return linalg.fill(scalar, outs=[tensor.EmptyOp(sizes, element_type).result])


def _maps(loops: int, *operand_dims):
    from iree.compiler import ir

    return [ir.AffineMap.get(loops, 0, [ir.AffineDimExpr.get(d) for d in dims]) for dims in operand_dims]


def _row_reduce(x, combine, fill: float):
    """r[m] = combine over k of x[m, k], starting from `fill`."""
    from iree.compiler import ir

    init = _filled([_dim(x, 0)], ir.F32Type.get(), fill)
    return generic([x], init, _maps(2, (0, 1), (0,)), ["parallel", "reduction"],
                   lambda b: combine(b.arguments[1], b.arguments[0]))


def row_ranges(x):
    """Per row: step[m] = max(max_k x - min_k x, tiny) / 255 and the zero point
    zp[m] = roundeven(-min_k x / step) - 128, so that x / step + zp spans [-128, 127]."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, math, tensor

    f32 = ir.F32Type.get()
    # the range always includes 0: the zero point stays in [-128, 127] and exact zeros stay exact
    high = _row_reduce(x, arith.maximumf, 0.0)
    low = _row_reduce(x, arith.minimumf, 0.0)
    rows = [_dim(x, 0)]

    def step_body(b):
        width = arith.maximumf(arith.subf(b.arguments[0], b.arguments[1]), arith.constant(f32, 1e-30))
        return arith.mulf(width, arith.constant(f32, 1.0 / ACTIVATION_LEVELS))

    step = generic([high, low], tensor.EmptyOp(rows, f32).result, _maps(1, (0,), (0,), (0,)), ["parallel"],
                   step_body)
    zero_point = generic([low, step], tensor.EmptyOp(rows, f32).result, _maps(1, (0,), (0,), (0,)), ["parallel"],
                         lambda b: arith.subf(round_half_even(arith.divf(arith.negf(b.arguments[0]), b.arguments[1]),
                                                              ir, arith, math),
                                              arith.constant(f32, 128.0)))
    return step, zero_point


def quantize_rows(x, step, zero_point, unsigned: bool = False):
    """xq[m, k] = clamp(roundeven(x / step[m]) + zp[m], -128, 127) as i8; `unsigned`: the same
    plus 128, clamp(..., 0, 255), as the u8 bits in an i8 tensor (the VNNI kernel's operand)."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, math, tensor

    f32, i8, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(32)
    init = tensor.EmptyOp([_dim(x, 0), x.type.shape[1]], i8).result
    low, high = (0.0, 255.0) if unsigned else (-128.0, 127.0)

    def body(b):
        q = arith.addf(round_half_even(arith.divf(b.arguments[0], b.arguments[1]), ir, arith, math), b.arguments[2])
        if unsigned:
            q = arith.addf(q, arith.constant(f32, U8_OFFSET))
        q = arith.minimumf(arith.maximumf(q, arith.constant(f32, low)), arith.constant(f32, high))
        return arith.trunci(i8, arith.fptosi(i32, q))

    return generic([x, step, zero_point], init, _maps(2, (0, 1), (0,), (0,), (0, 1)), ["parallel"] * 2, body)


def _widen_add(b, i32):
    from iree.compiler.dialects import arith

    return arith.addi(b.arguments[1], arith.extsi(i32, b.arguments[0]))


def column_sums(wq):
    """colsum[n] = sum_k wq[k, n] (i32). Depends on the weight alone: IREE computes it once, at load."""
    from iree.compiler import ir

    i32 = ir.IntegerType.get_signless(32)
    return generic([wq], _filled([wq.type.shape[1]], i32, 0), _maps(2, (0, 1), (1,)),
                   ["reduction", "parallel"], lambda b: _widen_add(b, i32))


def int8_product(xq, wq):
    """acc[m, n] = sum_k xq[m, k] * wq[k, n] (s8 x s8 -> s32: IREE's microkernel)."""
    from iree.compiler import ir

    i32 = ir.IntegerType.get_signless(32)
    return plain_matmul(xq, wq, _filled([_dim(xq, 0), wq.type.shape[1]], i32, 0))


def vnni_packed(wq):
    """The [K, N] int8 weight in the VNNI kernel's layout, [N/16][K/4][16][4] flattened
    (kernels/u8s8_gemm.c). Depends on the weight alone: IREE computes it once, at load."""
    from iree.compiler import ir
    from iree.compiler.dialects import linalg, tensor

    i8 = ir.IntegerType.get_signless(8)
    k, n = wq.type.shape
    grouped = tensor.ExpandShapeOp(ir.RankedTensorType.get([k // 4, 4, n // 16, 16], i8), wq,
                                   [[0, 1], [2, 3]], [], [k // 4, 4, n // 16, 16]).result
    dest = tensor.EmptyOp([n // 16, k // 4, 16, 4], i8).result
    packed = linalg.transpose(grouped, outs=[dest], permutation=[2, 0, 3, 1])
    packed = packed if isinstance(packed, ir.Value) else packed.results[0]
    return tensor.CollapseShapeOp(ir.RankedTensorType.get([n * k], i8), packed, [[0, 1, 2, 3]]).result


def vnni_product(module, xq_u8, wq, kernel_object: str, kind: str = "u8s8", workers: int = 0):
    """acc[m, n] = sum_k (xq[m, k] + 128) * wq[k, n], by our u8 x s8 -> s32 kernel: `kind` "u8s8"
    (AVX-512 VNNI) or "u8s8_amx" (AMX tiles; the same packed weight, the same sums); `workers`
    the target's cores (0: unknown), which a few rows' column tiles follow."""
    k, n = wq.type.shape
    return cpu_extern.kernel_product(module, kind, xq_u8, k, n, 0,
                                     lambda padded: [vnni_packed(resized(wq, [k, padded]))], kernel_object, workers)


def s4_vnni_packed(wq4):
    """The int4 weight [K/G, G, N] in the u8s4 kernel's layout (kernels/u8s4_gemm.c), flattened:
    byte (nb, j, c, q) holds w[8j + q, 16nb + c] in its low nibble and w[8j + 4 + q, 16nb + c] in
    its high one. Depends on the weight alone: IREE computes it once, at load."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    i4, i8 = ir.IntegerType.get_signless(4), ir.IntegerType.get_signless(8)
    groups, size, n = wq4.type.shape
    k = groups * size
    w = tensor.CollapseShapeOp(ir.RankedTensorType.get([k, n], i4), wq4, [[0, 1], [2]]).result
    d = [ir.AffineDimExpr.get(i) for i in range(4)]  # (nb, j, c, q)
    low_k, high_k, column = d[1] * 8 + d[3], d[1] * 8 + d[3] + 4, d[0] * 16 + d[2]
    maps = [ir.AffineMap.get(4, 0, [low_k, column]), ir.AffineMap.get(4, 0, [high_k, column]),
            ir.AffineMap.get_identity(4)]

    def body(b):
        low = arith.andi(arith.extsi(i8, b.arguments[0]), arith.constant(i8, 15))
        high = arith.shli(arith.extsi(i8, b.arguments[1]), arith.constant(i8, 4))
        return arith.ori(low, high)

    packed = generic([w, w], tensor.EmptyOp([n // 16, k // 8, 16, 4], i8).result, maps, ["parallel"] * 4, body)
    return tensor.CollapseShapeOp(ir.RankedTensorType.get([n * k // 2], i8), packed, [[0, 1, 2, 3]]).result


def s4_correction(wq4, s4):
    """c[n] = sum_g s4[g, n] * sum_kk wq4[g, kk, n]: what the u8 offset and the zero points add
    to the kernel's group-scaled sums. Depends on the weight alone (computed at load)."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith

    f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
    n = wq4.type.shape[2]

    def body(b):
        w = arith.sitofp(f32, arith.extsi(i32, b.arguments[0]))
        return arith.addf(b.arguments[2], arith.mulf(w, b.arguments[1]))

    return generic([wq4, s4], _filled([n], f32, 0.0), _maps(3, (0, 1, 2), (0, 2), (2,)),
                   ["reduction", "reduction", "parallel"], body)


def s4_vnni_product(module, xq_u8, wq4, s4, kernel_object: str, workers: int = 0):
    """f[m, n] = sum_g s4[g, n] * sum_{k in g} (xq[m, k] + 128) * wq4[k, n] (f32), by our
    VNNI kernel (u8 x s4, int4 read as stored)."""
    groups, size, n = wq4.type.shape

    def weights(padded):
        return [s4_vnni_packed(resized(wq4, [groups, size, padded])), resized(s4, [groups, padded])]

    return cpu_extern.kernel_product(module, "u8s4", xq_u8, groups * size, n, size, weights, kernel_object, workers)


def rescale_groups(f, correction, step, zero_point, y0):
    """y = y0 + step[m] * (f[m, n] - (zp[m] + 128) * c[n]): the u8s4 kernel's sums, corrected."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith

    f32 = ir.F32Type.get()

    def body(b):
        sums, c, st, zp, out = b.arguments
        offset = arith.addf(zp, arith.constant(f32, U8_OFFSET))
        return arith.addf(out, arith.mulf(st, arith.subf(sums, arith.mulf(offset, c))))

    return generic([f, correction, step, zero_point], y0, _maps(2, (0, 1), (1,), (0,), (0,), (0, 1)),
                   ["parallel"] * 2, body)


def int4_as_int8(wq4, s4):
    """The int4 weight [K/G, G, N] with group scales s4 [K/G, N] requantized to int8 per column:
    s8[n] = max_g s4[g, n] * 7 / 127, w8 = clamp(roundeven(wq4 * s4 / s8), -127, 127), [K, N].
    Depends on the weight alone: IREE evaluates it once, at load (the artifact stores int4)."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, math, tensor

    f32, i8, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(32)
    groups, size, n = wq4.type.shape
    top = generic([s4], _filled([n], f32, 0.0), _maps(2, (0, 1), (1,)), ["reduction", "parallel"],
                  lambda b: arith.maximumf(b.arguments[1], b.arguments[0]))
    s8 = generic([top], tensor.EmptyOp([n], f32).result, _maps(1, (0,), (0,)), ["parallel"],
                 lambda b: arith.mulf(b.arguments[0], arith.constant(f32, INT4_MAX / INT8_MAX)))

    def body(b):
        q, group_scale, column_scale = b.arguments[0], b.arguments[1], b.arguments[2]
        value = arith.divf(arith.mulf(arith.sitofp(f32, arith.extsi(i32, q)), group_scale), column_scale)
        r = arith.minimumf(arith.maximumf(math.roundeven(value), arith.constant(f32, -float(INT8_MAX))),
                           arith.constant(f32, float(INT8_MAX)))
        return arith.trunci(i8, arith.fptosi(i32, r))

    w8 = generic([wq4, s4, s8], tensor.EmptyOp([groups, size, n], i8).result,
                 _maps(3, (0, 1, 2), (0, 2), (2,), (0, 1, 2)), ["parallel"] * 3, body)
    w8 = tensor.CollapseShapeOp(ir.RankedTensorType.get([groups * size, n], i8), w8, [[0, 1], [2]]).result
    return w8, s8


def rescale(acc, colsum, step, zero_point, scale, y0, u8_offset: bool = False):
    """y = y0 + step[m] * s[n] * (acc - zp[m] * colsum[n]); `u8_offset`: acc summed the
    activations + 128 (the VNNI kernel's u8), taken back exactly in s32 first."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith

    f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)

    def body(b):
        acc_v, col, st, zp, ws, out = b.arguments
        if u8_offset:
            acc_v = arith.subi(acc_v, arith.muli(col, arith.constant(i32, int(U8_OFFSET))))
        corrected = arith.subf(arith.sitofp(f32, acc_v), arith.mulf(zp, arith.sitofp(f32, col)))
        return arith.addf(out, arith.mulf(corrected, arith.mulf(st, ws)))

    return generic([acc, colsum, step, zero_point, scale], y0,
                   _maps(2, (0, 1), (1,), (0,), (0,), (1,), (0, 1)), ["parallel"] * 2, body)


def to_f16(x):
    """truncf of a 2-D f32 tensor to f16 (the GPU form's activations); an f16 tensor as it is."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    f16 = ir.F16Type.get()
    if x.type.element_type == f16:
        return x
    init = tensor.EmptyOp([_dim(x, 0), x.type.shape[1]], f16).result
    return generic([x], init, _maps(2, (0, 1), (0, 1)), ["parallel"] * 2,
                   lambda b: arith.truncf(f16, b.arguments[0]))


def dequantize_f16(wq, scale, k_inner: bool):
    """sitofp(wq) * s in f16, as the [K, N] weight (int4: [K/G, G, N]). wq is stored [K, N] with
    s [N] (int4: [K/G, G, N], s [K/G, N]), or, k_inner, [N, K] with s [N] (int4: [N, K/G, G],
    s [N, K/G]) and read through a permuted map."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    f16 = ir.F16Type.get()
    rank = wq.type.rank
    if not k_inner:
        init = tensor.EmptyOp(list(wq.type.shape), f16).result
        maps = _maps(rank, tuple(range(rank)), (rank - 1,) if rank == 2 else (0, 2), tuple(range(rank)))
    elif rank == 2:  # loops (k, n)
        n, k = wq.type.shape
        init = tensor.EmptyOp([k, n], f16).result
        maps = _maps(2, (1, 0), (1,), (0, 1))
    else:  # loops (g, kk, n)
        n, groups, size = wq.type.shape
        init = tensor.EmptyOp([groups, size, n], f16).result
        maps = _maps(3, (2, 0, 1), (2, 0), (0, 1, 2))
    return generic([wq, scale], init, maps, ["parallel"] * rank,
                   lambda b: arith.mulf(arith.sitofp(f16, b.arguments[0]), b.arguments[1]))


def weight_only_product(x, wq, scale, y0, k_inner: bool):
    """y0 + truncf(x) . dequantize(wq) as one f16 x f16 -> f32 linalg.matmul (int4: the
    dequantized [K/G, G, N] weight collapsed to [K, N])."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    x16, w16 = to_f16(x), dequantize_f16(wq, scale, k_inner)
    if wq.type.rank == 3:
        groups, size, n = w16.type.shape
        w16 = tensor.CollapseShapeOp(ir.RankedTensorType.get([groups * size, n], ir.F16Type.get()), w16,
                                     [[0, 1], [2]]).result
    return plain_matmul(x16, w16, y0)


def widen_f16_product(matmul):
    """An f16 x f16 -> f16 matmul (a generation model built in f16) as the f16 x f16 -> f32
    matmul the weight-only forms rewrite, then truncf to f16 for its users: the sums in f32,
    as the f32 models' weight-only layers have them. Returns the new matmul."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith

    x, w, y0 = matmul.operands
    f32, f16 = ir.F32Type.get(), ir.F16Type.get()
    with ir.InsertionPoint(matmul), matmul.location:
        sizes = [_dim(y0, 0), y0.type.shape[1]]
        if is_zero_fill(y0):
            init = _filled(sizes, f32, 0.0)
        else:
            init = generic([y0], tensor_empty(sizes, f32), _maps(2, (0, 1), (0, 1)), ["parallel"] * 2,
                           lambda b: arith.extf(f32, b.arguments[0]))
        wide = plain_matmul(x, w, init)
        y = generic([wide], tensor_empty(sizes, f16), _maps(2, (0, 1), (0, 1)), ["parallel"] * 2,
                    lambda b: arith.truncf(f16, b.arguments[0]))
    matmul.results[0].replace_all_uses_with(y)
    matmul.erase()
    return wide.owner.operation


def tensor_empty(sizes: list, element_type):
    from iree.compiler.dialects import tensor

    return tensor.EmptyOp(sizes, element_type).result


def f16_product(op) -> bool:
    """f16 x f16 into f16 or f32 (a generation model built in f16)."""
    from iree.compiler import ir

    x, w, y0 = (v.type.element_type for v in op.operands)
    return isinstance(x, ir.F16Type) and isinstance(w, ir.F16Type) and isinstance(y0, (ir.F16Type, ir.F32Type))


MATVEC_TOKEN_ROWS = 16  # token rows (a decoder's decode step: one a sequence) read as a matrix-vector product


def matrix_vector(x) -> bool:
    """Whether a GPU weight-only product takes the matrix-vector form (weight stored reduction
    innermost, our few-row kernel): rows that are not tokens (an MLP's batch), or at most
    MATVEC_TOKEN_ROWS static token rows (a decode step of a few sequences)."""
    rows = x.type.shape[0]
    return not rows_are_tokens(x) or (rows != ir_dynamic() and rows <= MATVEC_TOKEN_ROWS)


def rows_are_tokens(x) -> bool:
    """Whether the matmul's rows are batch x sequence (its input collapsed from a rank-3 tensor
    by inferx-unbroadcast-matmul): many rows per call, a matrix-matrix product on GPUs."""
    return defining_op(x, ("tensor.collapse_shape",)) is not None


def _stored_types(scheme: WeightScheme, k: int, n: int):
    from iree.compiler import ir

    i8, i4 = ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(4)
    groups = k // scheme.group_size if scheme.kind == "int4" else 0
    if scheme.k_inner:  # the GPU's matrix-vector form: reduction innermost, f16 scales
        f16 = ir.F16Type.get()
        if scheme.kind == "int8":
            return ir.RankedTensorType.get([n, k], i8), ir.RankedTensorType.get([n], f16)
        return (ir.RankedTensorType.get([n, groups, scheme.group_size], i4),
                ir.RankedTensorType.get([n, groups], f16))
    scale = ir.F16Type.get() if scheme.f16_scales else ir.F32Type.get()
    if scheme.kind == "int8":
        return ir.RankedTensorType.get([k, n], i8), ir.RankedTensorType.get([n], scale)
    return (ir.RankedTensorType.get([groups, scheme.group_size, n], i4),
            ir.RankedTensorType.get([groups, n], scale))


def rewrite(matmul, weight: StoredWeight, scheme: WeightScheme, kernel=None, workers: int = 0) -> None:
    """`kernel`: (kind, object file) of the VNNI kernel to use (CPU: "u8s8", or "u8s4" for int4;
    None: IREE's s8 x s8 code), or (CUDA, the weight-only form) the DequantSpec of our kernel
    and the epilogue plan it finishes (None: IREE's dequantize-and-matmul); `workers` the CPU
    target's cores (the kernels' column tiles for a few rows)."""
    x, y0, matmul_rhs = matmul.operands[0], matmul.operands[2], matmul.operands[1]
    k, n = x.type.shape[1], y0.type.shape[1]
    func_op = weight.value.owner.owner.operation
    with matmul.location:
        weight_type, scale_type = _stored_types(scheme, k, n)
        wq = add_parameter_argument(func_op, weight_type, scheme.weight_key(weight.key))
        scale = add_parameter_argument(func_op, scale_type, scheme.scale_key(weight.key))
    from iree.compiler import ir

    with ir.InsertionPoint(matmul), matmul.location:
        if scheme.f16_scales and kernel is not None:  # (DequantSpec, EpiloguePlan or None)
            dequant_matvec.rewrite(func_op.parent, matmul, to_f16(x), wq, scale, y0, *kernel)
            erase_unused_transpose(matmul_rhs)
            return
        if scheme.f16_scales:
            y = weight_only_product(x, wq, scale, y0, scheme.k_inner)
        elif kernel is not None and kernel[0] == "u8s4":
            step, zero_point = row_ranges(x)
            xq = quantize_rows(x, step, zero_point, unsigned=True)
            sums = s4_vnni_product(func_op.parent, xq, wq, scale, kernel[1], workers)
            y = rescale_groups(sums, s4_correction(wq, scale), step, zero_point, y0)
        else:
            if scheme.kind == "int4":
                wq, scale = int4_as_int8(wq, scale)
            step, zero_point = row_ranges(x)
            colsum = column_sums(wq)
            if kernel is not None:
                xq = quantize_rows(x, step, zero_point, unsigned=True)
                acc = vnni_product(func_op.parent, xq, wq, kernel[1], kernel[0], workers)
            else:
                xq = quantize_rows(x, step, zero_point)
                acc = int8_product(xq, wq)
            y = rescale(acc, colsum, step, zero_point, scale, y0, u8_offset=kernel is not None)
    matmul.results[0].replace_all_uses_with(y)
    matmul.erase()
    erase_unused_transpose(matmul_rhs)


def erase_unused_transpose(weight) -> None:
    """The f32 weight's transpose (Gemm transB), once the rewritten matmul no longer reads it."""
    transpose = defining_op(weight, ("linalg.transpose",))
    if transpose is not None and not list(transpose.results[0].uses):
        transpose.erase()


@dataclasses.dataclass(frozen=True)
class QuantizeContractions(TargetedPass):
    """Rewrites i8/i4-annotated matmuls against stored weights: integer arithmetic (CPU), weight-only (CUDA)."""

    name: ClassVar[str] = "inferx-quantize-contractions"
    level: ClassVar[str] = "iree"
    parts: ClassVar[dict] = {"inferx-dequant-matvec": "matvec_kernel"}
    summary: ClassVar[str] = "int8/int4 matmuls: integer weights, dynamic int8 activations, s32 sums"

    group_size: int = 128
    vnni_kernel: bool = True  # CPU targets with AVX-512 VNNI: our u8 x s8 / u8 x s4 kernels
    matvec_kernel: bool = True  # CUDA targets, rows that are not tokens: our Triton kernel (dequant_matvec)

    @classmethod
    def for_build(cls, build) -> "Optional[QuantizeContractions]":
        if not build.expects_integer_layers():
            return None
        return cls(group_size=build.request.group_size, matvec_kernel=build.runs("inferx-dequant-matvec"))

    def __post_init__(self):
        if self.group_size <= 0 or self.group_size % 2:
            raise ValueError(f"group-size must be a positive even number, got {self.group_size}")

    def run(self, module) -> None:
        from iree.compiler import ir

        target = self.target_of(module)
        ops = collect(module, lambda o: PRECISION_ATTR in o.attributes)
        if target.backend == "cuda":
            # last layer first: a layer's f16 input cast then exists when the layer before it is
            # rewritten, and our kernel can finish that cast in its epilogue
            ops = list(reversed(ops))
        for op in ops:
            precision = ir.StringAttr(op.attributes[PRECISION_ATTR]).value
            if precision not in INTEGER_PRECISIONS:
                continue
            del op.attributes[PRECISION_ATTR]
            self._quantize(op, precision, target)
        for func_op in public_functions(module):
            erase_unused_parameter_arguments(func_op)

    def _quantize(self, op, precision: str, target) -> None:
        from iree.compiler import ir

        label = "int8" if precision == "i8" else "int4"
        backend = target.backend
        if backend not in ("llvm-cpu", "cuda"):
            raise PassFailure(f"{label} contractions need an executable target (target '{target.name}')", op)
        if op.name != "linalg.matmul":
            remark(self.name, op, f"declined: {label} is built for linalg.matmul, not {op.name}")
            return
        gpu = backend == "cuda"
        if not _f32(op) and not (gpu and f16_product(op)):
            remark(self.name, op, f"declined: {label} needs f32 operands" + (" (or f16)" if gpu else ""))
            return
        weight = stored_weight(op.operands[1])
        if weight is None or not weight.value.type.has_static_shape:
            remark(self.name, op, f"declined: {label} needs a stored weight on the right-hand side")
            return
        k = op.operands[0].type.shape[1]
        if precision == "i4" and k % self.group_size:
            remark(self.name, op, f"declined: int4 groups of {self.group_size} do not divide K={k}")
            return
        if gpu and isinstance(op.operands[2].type.element_type, ir.F16Type):
            with op.context:
                op = widen_f16_product(op)
        k_inner = gpu and matrix_vector(op.operands[0])
        scheme = (WeightScheme("int8", 0, weight.transposed, gpu, k_inner) if precision == "i8"
                  else WeightScheme("int4", self.group_size, weight.transposed, gpu, k_inner))
        n = op.operands[2].type.shape[1]
        kernel, why_not = None, None
        if not gpu and self.vnni_kernel:
            kernel, why_not = self._vnni_kernel(k, n, self.group_size if precision == "i4" else 0, target)
        if gpu and k_inner:
            kernel, why_not = self._matvec_kernel(op, n, k, precision, target)
        if gpu and kernel is not None:
            spec, plan = kernel
            finished = ("" if plan is None else f", {op_counts(plan.fused)} finished in it" if plan.ops
                        else ", the init added in it")
            how = f"f16 activations, weights widened in our kernel (Triton, split {spec.split}{finished}), f32 sums"
        elif gpu:
            how = "f16 activations, weights dequantized in the matmul, f32 sums" + (
                f" (not our kernel: {why_not})" if why_not else "")
        elif kernel is not None and kernel[0] == "u8s4":
            how = "u8 activations, int4 read as stored, group sums by the VNNI kernel (u8 x s4)"
        elif kernel is not None:
            how = ("requantized to int8 at load, " if precision == "i4" else "") + \
                  ("u8 activations, s32 sums by the AMX kernel (u8 x s8)" if kernel[0] == "u8s8_amx"
                   else "u8 activations, s32 sums by the VNNI kernel (u8 x s8)")
        else:
            how = "int8 activations, s32 sums" + (f" (not the VNNI kernel: {why_not})" if why_not else "")
        remark(self.name, op, f"{label}: {k}x{n} weight '{weight.key}' stored as {scheme.tag}, {how}")
        with op.context:
            rewrite(op, weight, scheme, kernel, target.cores or 0)

    def _matvec_kernel(self, op, n: int, k: int, precision: str, target):
        """((DequantSpec, EpiloguePlan or None), None) for a CUDA weight-only product in the
        matrix-vector form, or (None, why not)."""
        if not self.matvec_kernel:
            return None, "matvec-kernel=false"
        why = dequant_matvec.declined(target)
        if why:
            return None, why
        m = op.operands[0].type.shape[0]
        if m == ir_dynamic():
            return None, "dynamic rows"
        plan, _ = fusible_epilogue(op, add_init=not is_zero_fill(op.operands[2]))
        kind = "int8" if precision == "i8" else "int4"
        spec = dequant_matvec.matvec_spec(m, n, k, kind, self.group_size,
                                          target.cores or 1, dequant_matvec.triton_arch(target.arch),
                                          plan.epilogue if plan is not None else None)
        if isinstance(spec, str):
            return None, spec
        return (spec, plan if spec.epilogue is not None else None), None

    def _vnni_kernel(self, k: int, n: int, group: int, target) -> tuple[Optional[tuple[str, str]], Optional[str]]:
        """((kind, object file), None), or (None, why not) for a product with a [K, N] weight:
        u8s4 for int4 in groups of `group`, else (int8, or int4 the u8s4 kernel declines,
        requantized to int8) u8s8."""
        from inferx_compiler.kernels import cpu_objects

        choices = ([("u8s4", group)] if group else []) + [("u8s8", 0)]
        why = None
        for kind, g in choices:
            declined = cpu_objects.vnni_kernel_declined(target, k, n, g)
            if declined is None and kind == "u8s8" and cpu_objects.int8_amx_declined(target, k) is None:
                kind = "u8s8_amx"  # the same sums on AMX tiles
            if declined is None:
                try:
                    return (kind, cpu_objects.build(f"{kind}_gemm.c").path), None
                except cpu_objects.KernelBuildError as e:
                    declined = str(e)
            why = why or declined
        return None, why
