"""Matmuls against stored weights, the operands our C kernels take (inferx-amx-matmul,
inferx-f32-matmul): which operands IREE computes once, at load, from the parameters alone (so a
kernel's packed layout of them costs nothing per call), the weight on the right (projections)
or on the left (convolutions as matmuls, w[F, K] x columns[K, pixels]), the accumulator added
back after a kernel's product, and the passes' common loop over the candidates."""

from __future__ import annotations

from typing import Optional

from inferx_compiler.dialects.inferx import PARAMETER_ATTR
from inferx_compiler.passes.support import cpu_extern
from inferx_compiler.passes.analysis.func_util import arg_attrs
from inferx_compiler.passes.support.iree_ir import generic, is_zero_fill, resized
from inferx_compiler.passes.analysis.linalg_analysis import indexing_maps
from inferx_compiler.passes.analysis.remarks import remark

_FROM_PARAMETERS = ("linalg.generic", "linalg.transpose", "linalg.fill", "tensor.expand_shape",
                    "tensor.collapse_shape", "tensor.extract_slice", "tensor.insert_slice", "tensor.pad",
                    "tensor.empty", "arith.constant")


def from_parameters(value, depth: int = 0) -> bool:
    """Whether `value` is computed from parameter arguments (and constants) alone: what IREE
    evaluates once, at load."""
    from iree.compiler import ir

    if depth > 16:
        return False
    if isinstance(value, ir.BlockArgument):
        func_op = value.owner.owner
        if func_op is None or func_op.operation.name != "func.func":
            return False
        attrs = arg_attrs(func_op.operation)
        return value.arg_number < len(attrs) and PARAMETER_ATTR in attrs[value.arg_number]
    op = value.owner
    if op.name not in _FROM_PARAMETERS:
        return False
    tensors = [v for v in op.operands if isinstance(v.type, ir.ShapedType)]
    return all(from_parameters(v, depth + 1) for v in tensors)


def _plain_form_problem(op, element_types: tuple[str, str, str]) -> str:
    """Why the `linalg.matmul` op is not y[M, N] = init + a[M, K] b[K, N] with the kernel's
    `element_types` (a, b, init) and plain indexing maps ("" when it is)."""
    from iree.compiler import ir

    a, b, init = op.operands[:3]
    types = tuple(str(v.type.element_type) for v in (a, b, init))
    if types != tuple(element_types):
        return f"{types[0]} x {types[1]} -> {types[2]}: the kernel takes {' x '.join(element_types[:2])} -> {element_types[2]}"
    d0, d1, d2 = (ir.AffineDimExpr.get(i) for i in range(3))
    plain = [ir.AffineMap.get(3, 0, e) for e in ([d0, d2], [d2, d1], [d0, d1])]
    maps = indexing_maps(op)
    if maps and [str(m) for m in maps] != [str(m) for m in plain]:
        return "transposed or broadcast indexing maps"
    return ""


def left_weight_candidate(op) -> bool:
    """Whether the matmul's left operand is computed from stored weights and its right one is
    not: w[F, K] x columns[K, pixels], the convolutions inferx-conv-strategy made matmuls."""
    a, b = op.operands[:2]
    return from_parameters(a) and not from_parameters(b)


def left_weight_form(op, element_types: tuple[str, str, str]) -> tuple[Optional[tuple[int, int, int]], str]:
    """((M, N, K), "") for a `linalg.matmul` y[M, N] = init + w[M, K] x[K, N] (a
    left_weight_candidate) with the kernel's `element_types`, plain maps and static shapes; else
    (None, why not)."""
    why = _plain_form_problem(op, element_types)
    if why:
        return None, why
    w, x = op.operands[:2]
    if not (w.type.has_static_shape and x.type.has_static_shape):
        return None, "dynamic operands (the left-weight kernel takes static shapes)"
    (m, k), n = w.type.shape, x.type.shape[1]
    return (m, n, k), ""


def weight_product_form(op, element_types: tuple[str, str, str]) -> tuple[Optional[tuple[int, int, int]], str]:
    """((M or -1, N, K), "") for a `linalg.matmul` y[M, N] = init + a[M, K] b[K, N] with the
    kernel's `element_types` (a, b, init), plain indexing maps and a static right-hand operand
    computed from stored weights alone; else (None, why not)."""
    why = _plain_form_problem(op, element_types)
    if why:
        return None, why
    a, b = op.operands[:2]
    if not b.type.has_static_shape or b.type.rank != 2:
        return None, "a dynamic right-hand operand"
    k, n = b.type.shape
    if not from_parameters(b):
        return None, "the right-hand operand is not computed from stored weights alone"
    m = a.type.shape[0] if a.type.has_static_shape else cpu_extern.DYNAMIC
    return (m, n, k), ""


def add_init(c, init):
    """init + c, elementwise (f32, any rank)."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith

    rank = len(c.type.shape)
    identity = ir.AffineMap.get_identity(rank)
    return generic([c], init, [identity, identity], ["parallel"] * rank,
                   lambda b: arith.addf(b.arguments[1], b.arguments[0]))


def replace_product(op, product) -> None:
    """Replace the matmul `op` by `product(a, b)` (a kernel's product of its operands, built at
    the matmul) plus the matmul's init."""
    from iree.compiler import ir

    a, b, init = op.operands[:3]
    with ir.InsertionPoint(op), op.location:
        c = product(a, b)
        y = c if is_zero_fill(init) else add_init(c, init)
    op.results[0].replace_all_uses_with(y)
    op.erase()


def rewrite_products(pass_name: str, matmuls, form_of, declined, source: str, describe, rewrite) -> None:
    """The loop of the weight-kernel passes: for each matmul of `matmuls`, `form_of(op)` ((M, N,
    K) or None and why not: a remark, none when why is empty), then `declined(k)` (the kernel's
    rule: None or why not), then the kernel object `source` (built once); then a remark
    `describe(form)` saying what is done, and `rewrite(op, form, object path)` does it."""
    from inferx_compiler.kernels import cpu_objects

    obj = None
    for op in matmuls:
        form, why = form_of(op)
        if form is None:
            if why:
                remark(pass_name, op, f"declined: {why}")
            continue
        why = declined(form[2])
        if why is None and obj is None:
            try:
                obj = cpu_objects.build(source).path
            except cpu_objects.KernelBuildError as e:
                why = str(e)
        if why is not None:
            remark(pass_name, op, f"declined: {why}")
            continue
        remark(pass_name, op, describe(form))
        with op.context:
            rewrite(op, form, obj)


def run_weight_kernel(pass_name: str, module, matmuls, types: tuple[str, str, str], declined, source: str, kind: str,
                      pack, where: str, workers: int = 0, l2_bytes: int = 0) -> None:
    """The weight on the right: each matmul of `matmuls` whose left operand has `types[0]` and
    whose weight product form holds (else a remark) goes to kernel `kind` (in `source`) on
    `pack(w)` (the weight zero-padded to the kernel's columns, in its layout), with a remark
    saying so (`where`: the unit it runs on; `workers`: the target's cores, `l2_bytes` a core's L2;
    0 unknown)."""

    def form_of(op):
        if str(op.operands[0].type.element_type) != types[0]:
            return None, ""  # another element type: not this pass's
        return weight_product_form(op, types)

    def describe(form) -> str:
        m, n, k = form
        rows = "dynamic rows" if m == cpu_extern.DYNAMIC else f"{m} rows"
        return f"{types[0]} {rows} x {k}x{n} weight on {where} (inferx_{kind}, weight packed at load)"

    def rewrite(op, form, obj) -> None:
        _, n, k = form
        replace_product(op, lambda a, b: cpu_extern.kernel_product(
            module, kind, a, k, n, 0, lambda padded: [pack(resized(b, [k, padded]))], obj, workers, l2_bytes))

    rewrite_products(pass_name, matmuls, form_of, declined, source, describe, rewrite)
