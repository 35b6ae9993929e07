"""inferx-f32-matmul: f32 matmuls against stored weights on AVX-512 CPUs, through our kernel.

IREE 3.13 runs an f32 matmul as data-tiled `mmt4d`: the activations are packed into 16x1 tiles
on every call and its microkernel's 16x16 register tile loads a weight vector for each 16
multiply-adds. On BERT-base's products (128x768 by 768x3072 and back) on a Xeon with AVX-512
that ran at 79-110 GFLOP/s a core (tools/bench/dispatch_profile.py), where this pass's kernel,
inferx_compiler/kernels/f32_gemm.c, runs at 140-150: a 14x32 register tile (28 accumulators, two
weight loads for 28 FMAs), the weight packed once in 32-column panels per K block, the rows read
in place (packed per K block only where their stride puts them in few L1 sets), the next
weight rows prefetched (one row of activations streams the weight at memory speed).

This pass replaces each `linalg.matmul` with f32 operands whose right-hand operand is computed
from stored parameters alone (a weight, directly or through the transpose of a Gemm with
transB=1) by a `flow.dispatch` to that kernel, linked through passes/support/cpu_extern.py:

    y[M, N] = init + a[M, K] b[K, N]    ->    c = f32(a, pack(pad(b)))[:, :N];  y = init + c
                                               (y = c when init is a zero fill)

and each whose left-hand operand is the weight and the right one is not (the convolutions that
inferx-conv-strategy made matmuls, w[F, C kh kw] x columns[C kh kw, pixels], static) by one to
the kernel's left-weight entry: the weight packed at load in blocks of 14 rows (its register
tile), the columns read per tile, any pixel count (the last panel masked). The elementwise ops
after such a product that matmul_epilogue finds (the init: the conv's bias; a residual add; a
ReLU) run in the kernel on its registers, from C generated for them
(inferx_compiler/kernels/c_epilogue.py, one object per distinct epilogue); where it cannot run
them (exp, a transposed result), they stay IREE's and the init is added after the kernel.

Convolutions inferx-conv-strategy marked "kernel" (`inferx.conv_strategy`) go to the kernel's
convolution entry (`inferx_f32c_tile`): the filter [F, C, KH, KW] packed at load as the
left-weight rows [F, C KH KW], the image read where it is (a zero `tensor.pad` before it folded
into the kernel, whose column panels are gathered from the image per tile: implicit im2col), the
result NCHW image by image, the ops after it in a generated epilogue as above (the image's rows
offset). Declined, with a remark: operands other than f32, dynamic shapes, a filter not computed
from stored weights alone, more than 64 filter taps.

`pack` depends on the parameters alone, so IREE computes it once, at load. Numbers: f32 sums in
k order (IREE's order differs; results agree to f32 rounding).

On targets whose record has `f32_kernel` (Intel Xeons with AVX-512: measured faster there; on AMD
Zen 4 IREE's mmt4d runs at the kernel's rate and the pass declines, see Target.f32_kernel).
Declined, with a remark: such records, operands other than f32 x f32 -> f32, neither operand
computed from parameters alone (attention's products), transposed or broadcast indexing maps,
dynamic operands with the weight on the left, a K over 256 with no divisor from 64 to 256 (the
packed weight is in whole K blocks), a build machine without a C compiler; targets without
AVX-512 silently (nothing to decline there).
Spelled `inferx-f32-matmul` (the target is the module's `inferx.target`:
inferx-set-target{target=x86-avx512} before it on a bare module).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from inferx_compiler.kernels.cpu_objects import f32_k_block
from inferx_compiler.passes.support import cpu_extern
from inferx_compiler.passes.infra.base import TargetedPass
from inferx_compiler.passes.conv_strategy import KERNEL_TAPS_MAX, conv_shape, marked_for_kernel
from inferx_compiler.passes.support.cpu_extern import F32_LEFT_ROWS
from inferx_compiler.passes.support.iree_ir import generic, is_zero_fill, resized, zero_padding
from inferx_compiler.passes.analysis.linalg_analysis import collect
from inferx_compiler.passes.analysis.matmul_epilogue import fusible_epilogue
from inferx_compiler.passes.analysis.remarks import remark
from inferx_compiler.passes.analysis.weight_products import (from_parameters, left_weight_candidate, left_weight_form, replace_product,
                              rewrite_products, run_weight_kernel)


def f32_packed(w, transposed: bool = False):
    """w [K, N] f32 (N a multiple of 32) in the kernel's layout, flattened: K blocks of kc rows
    (cpu_objects.f32_k_block), each N / 32 panels of kc rows of 32 columns: element
    (kb, p, r, c) = w[kc kb + r, 32 p + c]. `transposed`: w is [N, K] (a convolution's filter
    rows for the pixel-rows layout), element (kb, p, r, c) = w[32 p + c, kc kb + r]. Depends on
    the weight alone."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    n, k = w.type.shape if transposed else w.type.shape[::-1]
    kc = f32_k_block(k)
    f32 = w.type.element_type
    d = [ir.AffineDimExpr.get(i) for i in range(4)]  # (kb, p, r, c)
    at = [d[0] * kc + d[2], d[1] * 32 + d[3]]
    maps = [ir.AffineMap.get(4, 0, at[::-1] if transposed else at), ir.AffineMap.get_identity(4)]
    packed = generic([w], tensor.EmptyOp([k // kc, n // 32, kc, 32], f32).result, maps, ["parallel"] * 4,
                     lambda b: b.arguments[0])
    return tensor.CollapseShapeOp(ir.RankedTensorType.get([n * k], f32), packed, [[0, 1, 2, 3]]).result


def f32_left_packed(w):
    """w [M, K] f32 in the left-weight kernel's layout, flattened: blocks of 14 rows (its register
    tile), k-major: element (mb, k, r) = w[14 mb + r, k], the rows past M zero. Depends on the
    weight alone. (The same size as w but for the last block's rows: IREE 3.13 evaluates a
    weight's expression at load only while it grows by at most 1 MiB; a 16-float line a k for
    a 2048x1024 weight stayed in the call, 3.6 ms of ResNet-50's 108.)"""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    m, k = w.type.shape
    blocks = -(-m // F32_LEFT_ROWS)
    f32 = w.type.element_type
    padded = resized(w, [blocks * F32_LEFT_ROWS, k])
    d = [ir.AffineDimExpr.get(i) for i in range(3)]  # (mb, k, r)
    maps = [ir.AffineMap.get(3, 0, [d[0] * F32_LEFT_ROWS + d[2], d[1]]), ir.AffineMap.get_identity(3)]
    packed = generic([padded], tensor.EmptyOp([blocks, k, F32_LEFT_ROWS], f32).result, maps, ["parallel"] * 3,
                     lambda b: b.arguments[0])
    return tensor.CollapseShapeOp(ir.RankedTensorType.get([blocks * k * F32_LEFT_ROWS], f32), packed,
                                  [[0, 1, 2]]).result


@dataclasses.dataclass(frozen=True)
class F32Matmul(TargetedPass):
    """f32 matmuls against stored weights to our AVX-512 kernel."""

    name: ClassVar[str] = "inferx-f32-matmul"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "f32 matmuls with stored weights on our AVX-512 C kernel"

    @classmethod
    def for_build(cls, build) -> "Optional[F32Matmul]":
        target = build.target
        fits = target.backend == "llvm-cpu" and "avx512f" in target.features
        return cls() if fits and build.runs(cls.name) else None

    def run(self, module) -> None:
        from inferx_compiler.kernels import cpu_objects

        target = self.target_of(module)
        if target.backend != "llvm-cpu" or "avx512f" not in target.features:
            return  # nothing to decline: the target has no use for the kernel
        declined = lambda k: cpu_objects.f32_kernel_declined(target, k)  # noqa: E731
        matmuls = collect(module, lambda o: o.name == "linalg.matmul")
        on_left = [str(op.operands[0].type.element_type) == "f32" and left_weight_candidate(op) for op in matmuls]
        left = [op for op, flag in zip(matmuls, on_left) if flag]
        run_weight_kernel(self.name, module, [op for op, flag in zip(matmuls, on_left) if not flag],
                          ("f32", "f32", "f32"), declined, "f32_gemm.c", "f32", f32_packed, "AVX-512", target.cores or 0,
                          target.l2_bytes or 0)
        rewrite_products(self.name, left, lambda op: left_weight_form(op, ("f32", "f32", "f32")), declined,
                         "f32_gemm.c", _describe_left, lambda op, form, obj: _rewrite_left(self.name, module, op, obj))
        convs = collect(module, marked_for_kernel)
        rewrite_products(self.name, convs, _conv_form, declined, "f32_gemm.c", _describe_conv,
                         lambda op, form, obj: _rewrite_left(self.name, module, op, obj, conv_geometry(op), target))


def _describe_left(form) -> str:
    m, n, k = form
    return f"f32 {m}x{k} weight x {k}x{n} activations on AVX-512 (inferx_f32l, weight packed at load)"


def _c_epilogue(op, conv=None):
    """(the matmul_epilogue plan, its CEpilogue and its built variant, "") or (None, None, None,
    why not). `conv`: the ConvGeometry of a convolution `op` (its [images, F, OH, OW] result
    read as the [images F, OH OW] product of the convolution entry)."""
    from inferx_compiler.kernels import c_epilogue, cpu_objects

    product = None
    if conv is not None:
        f = op.results[0].type.shape[1]
        m, n = conv.images * f, conv.oh * conv.ow
        product = (m, n, [(("m", f, conv.images),), (("m", 1, f),), (("n", conv.ow, conv.oh),), (("n", 1, conv.ow),)])
    else:
        m, n = op.results[0].type.shape
    generated = {}

    def accept(plan) -> str:
        """"" when the C kernel can run the plan (its source generated), else why not."""
        if not plan.epilogue.body:
            return "nothing but reshapes after it"
        try:
            generated[id(plan)] = c_epilogue.generate(plan.epilogue, m, n, conv=conv is not None)
        except c_epilogue.Unsupported as e:
            return str(e)
        return ""

    plan, why = fusible_epilogue(op, add_init=not is_zero_fill(op.operands[2]), product=product, accept=accept)
    if plan is None:
        return None, None, None, why
    epilogue = generated[id(plan)]
    try:
        variant = cpu_objects.build_generated(epilogue.source, f"f32_gemm_{epilogue.tag}", "f32_gemm.c")
    except cpu_objects.KernelBuildError as e:
        return None, None, None, str(e)
    return plan, epilogue, variant, ""


def _rewrite_left(pass_name: str, module, op, obj: str, conv=None, target=None) -> None:
    """The matmul w x columns (or, with a ConvGeometry `conv`, the convolution of x by w) -> the
    left-weight kernel (its convolution entry); the elementwise ops after it (the init, a bias,
    a residual, an activation) in the kernel's generated epilogue where it can run them, else
    the init added after it."""
    from iree.compiler import ir

    plan, epilogue, variant, why = _c_epilogue(op, conv)
    pack = (lambda w: f32_packed(w, transposed=True)) if conv is not None and conv.pixel_rows else f32_left_packed
    if conv is not None:
        source = zero_padding(op.operands[0])[0]
        operands = lambda: (_weight_rows(op.operands[1]), source)  # noqa: E731
    else:
        operands = lambda: tuple(op.operands[:2])  # noqa: E731
    if epilogue is None:
        remark(pass_name, op, f"the ops after it stay IREE's: {why}")
        with ir.InsertionPoint(op), op.location:
            w, x = operands()
        replace_product(op, lambda *_: cpu_extern.left_weight_product(module, w, pack(w), x, obj, conv=conv,
                                                                      target=target))
        return
    remark(pass_name, op, f"fused {len(plan.ops)} ops after it ({', '.join(plan.fused) or 'the init'}) in its epilogue")
    last = plan.ops[-1] if plan.ops else op
    with ir.InsertionPoint(last), last.location:
        w, x = operands()
        result = cpu_extern.left_weight_product(module, w, pack(w), x, variant, epilogue, plan, conv=conv,
                                                target=target)
    plan.replace(op, result)


# ----------------------------------------------------------------------------- convolutions
def conv_geometry(op):
    """The ConvGeometry of a static linalg.conv_2d_nchw_fchw, its padding folded in, in the
    pixel-rows layout where cpu_extern.pixel_rows_fit takes it."""
    s = conv_shape(op)
    source, pads = zero_padding(op.operands[0])
    _, c, h, w = source.type.shape
    g = cpu_extern.ConvGeometry(s.n, c, h, w, s.oh, s.ow, s.kh, s.kw, s.strides, s.dilations, pads)
    return dataclasses.replace(g, pixel_rows=cpu_extern.pixel_rows_fit(g, op.results[0].type.shape[1]))


def _weight_rows(w):
    """w [F, C, KH, KW] -> [F, C KH KW] (the kernel's rows, k = (c, kh, kw))."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    f, c, kh, kw = w.type.shape
    return tensor.CollapseShapeOp(ir.RankedTensorType.get([f, c * kh * kw], w.type.element_type), w,
                                  [[0], [1, 2, 3]]).result


def _conv_form(op):
    """((F, OH OW, C KH KW), "") for a static f32 convolution with a stored filter, else (None, why)."""
    types = [str(v.type.element_type) for v in op.operands[:3]]
    if types != ["f32"] * 3:
        return None, f"operands {' x '.join(types[:2])} -> {types[2]} (the kernel takes f32)"
    if not all(v.type.has_static_shape for v in op.operands[:3]):
        return None, "dynamic shapes (the convolution entry takes static ones)"
    if not from_parameters(op.operands[1]):
        return None, "the filter is not computed from stored weights alone"
    g = conv_geometry(op)
    if g.kh * g.kw > KERNEL_TAPS_MAX:
        return None, f"a {g.kh}x{g.kw} filter has more than {KERNEL_TAPS_MAX} taps (the kernel's tap table)"
    return (op.results[0].type.shape[1], g.oh * g.ow, g.c * g.kh * g.kw), ""


def _describe_conv(form) -> str:
    f, n, k = form
    return (f"f32 convolution as a {f}x{k} filter x {k}x{n} columns on AVX-512 (inferx_f32c: implicit im2col, "
            f"filter packed at load)")

