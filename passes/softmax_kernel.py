"""inferx-softmax-kernel: softmax over the last dim on AVX-512 CPUs, through our kernel.

IREE 3.13 raises a softmax to `linalg.softmax` and compiles it with two passes of `exp` a value,
a divide a value and a horizontal max and sum per row in scalar steps: BERT-base's attention
softmax over 12x128x128 scores took 0.28 ms on one Xeon core (f32 reductions reassociated,
0.53 without) against onnxruntime's 0.07, a tenth of an int8 BERT's time.
inferx_compiler/kernels/softmax_rows.c does it in 0.08: per row one max, one pass of exp into
the output summing it, one scaling by the reciprocal of the sum.

This pass finds what the importers make of a softmax over the last dim (torch-mlir:
`e = exp(x - b)`, `s = sum(e)` along the last dim, `y = e / s`, with `b` a row value, the row's
max) and replaces `y` by the kernel's dispatch (passes/support/cpu_extern.py), x viewed as [rows, N]:

    b = max(x) ...; e = exp(x - b); s = sum(e); y = e / s    ->    y = softmax_rows(x)

Any row value `b` cancels in e / s, so the kernel's own max gives the same function (with the
row's max, the same numbers to f32 rounding: exp to about an ulp, e * (1 / s) instead of e / s).
Declined, with a remark: dynamic shapes (the static-shape functions are where it applies),
element types other than f32, a rank-1 tensor, an `e` with other users, a build machine without
a C compiler. Targets without AVX-512 keep IREE's code silently.
Spelled `inferx-softmax-kernel` (the target is the module's `inferx.target`:
inferx-set-target{target=x86-avx512} before it on a bare module).
"""

from __future__ import annotations

import dataclasses

from typing import ClassVar, Optional

from inferx_compiler.passes.infra.base import TargetedPass
from inferx_compiler.passes.support.cpu_extern import row_kernel_object
from inferx_compiler.passes.support.iree_ir import before_reshapes, body_ops, defining_op, is_zero_fill
from inferx_compiler.passes.analysis.linalg_analysis import all_parallel, collect, indexing_maps, reduction_loops
from inferx_compiler.passes.analysis.remarks import remark


def _binary_body(op, name: str, commutative: bool = False) -> bool:
    """Whether a generic's body is `name(arg0, arg1)` yielded (either order when `commutative`)."""
    from iree.compiler import ir

    body = body_ops(op)
    if len(body) != 2 or body[0].name != name or body[1].name != "linalg.yield" \
            or body[1].operands[0] != body[0].results[0]:
        return False
    args = list(op.regions[0].blocks[0].arguments)
    used = [next((i for i, a in enumerate(args) if a == v), -1) if isinstance(v, ir.BlockArgument) else -1
            for v in body[0].operands]
    return used == [0, 1] or (commutative and used == [1, 0])


def _unary_body(op, name: str) -> bool:
    body = body_ops(op)
    return len(body) == 2 and body[0].name == name and body[1].operands[0] == body[0].results[0]


def _is_identity(m, rank: int) -> bool:
    from iree.compiler import ir

    return m == ir.AffineMap.get_identity(rank)


def _is_row_value(m, rank: int) -> bool:
    """(d0, ..., dn) -> (d0, ..., dn-1) or (d0, ..., dn-1, 0): one value a row, broadcast along it."""
    from iree.compiler import ir

    lead = [ir.AffineDimExpr.get(i) for i in range(rank - 1)]
    return m in (ir.AffineMap.get(rank, 0, lead), ir.AffineMap.get(rank, 0, lead + [ir.AffineConstantExpr.get(0)]))


def _generic(value):
    op = defining_op(before_reshapes(value), ("linalg.generic",))
    return op if op is not None and len(op.results) >= 1 else None


def match(div) -> tuple[Optional[tuple], Optional[str]]:
    """(x, the ops of the chain) when `div` is y = e / sum(e) with e = exp(x - b); (None, why)
    when the chain is a softmax the kernel declines; (None, None) when it is none."""
    if len(div.operands) != 3 or not all_parallel(div) or not _binary_body(div, "arith.divf"):
        return None, None
    rank = len(div.results[0].type.shape)
    maps = indexing_maps(div)
    if not (_is_identity(maps[0], rank) and _is_row_value(maps[1], rank)):
        return None, None
    exp, total = _generic(div.operands[0]), _generic(div.operands[1])
    if exp is None or total is None or exp.results[0] != div.operands[0]:
        return None, None
    if len(exp.operands) != 2 or not all_parallel(exp) or not _unary_body(exp, "math.exp"):
        return None, None
    total_maps = indexing_maps(total)
    if (len(total.operands) != 2 or total.operands[0] != exp.results[0]
            or not _binary_body(total, "arith.addf", commutative=True) or not is_zero_fill(total.operands[1])
            or not _is_identity(total_maps[0], rank) or not _is_row_value(total_maps[1], rank)
            or reduction_loops(total) != [rank - 1]):
        return None, None
    sub = _generic(exp.operands[0])
    if sub is None or len(sub.operands) != 3 or not _binary_body(sub, "arith.subf"):
        return None, None
    sub_maps = indexing_maps(sub)
    if (not _is_identity(sub_maps[0], rank) or not _is_row_value(sub_maps[1], rank)
            or sub.results[0] != exp.operands[0]):
        return None, None
    x = sub.operands[0]
    users = [u.owner for u in exp.results[0].uses]
    if any(u != div and u != total for u in users):
        return None, "exp(x - max) has other users (the kernel writes only the result)"
    if not x.type.has_static_shape:
        return None, "dynamic shape"
    if str(x.type.element_type) != "f32":
        return None, f"element type {x.type.element_type} (the kernel takes f32)"
    if rank < 2:
        return None, "a rank-1 tensor"
    return (x, [div, total, exp, sub]), None


@dataclasses.dataclass(frozen=True)
class SoftmaxKernel(TargetedPass):
    """Softmax over the last dim to our AVX-512 kernel (inferx_compiler/kernels/softmax_rows.c)."""

    name: ClassVar[str] = "inferx-softmax-kernel"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "softmax over the last dim on our AVX-512 C kernel"

    @classmethod
    def for_build(cls, build) -> "Optional[SoftmaxKernel]":
        target = build.target
        fits = target.backend == "llvm-cpu" and "avx512f" in target.features
        return cls() if fits and build.runs(cls.name) else None

    def run(self, module) -> None:
        target = self.target_of(module)
        if target.backend != "llvm-cpu" or "avx512f" not in target.features:
            return  # nothing to decline: the target has no use for the kernel
        found = []
        for div in collect(module, lambda o: o.name == "linalg.generic"):
            chain, why = match(div)
            if why is not None:
                remark(self.name, div, f"softmax left to IREE: {why}")
            if chain is not None:
                found.append(chain)
        path = row_kernel_object(self.name, "softmax", [ops[0] for _, ops in found], "softmax") if found else None
        if path is None:
            return
        for x, ops in found:
            self._rewrite(module, x, ops, path)

    def _rewrite(self, module, x, ops, object_path: str) -> None:
        from iree.compiler import ir
        from iree.compiler.dialects import tensor

        from inferx_compiler.passes.support.cpu_extern import RowKernel, row_kernel

        div = ops[0]
        shape = list(x.type.shape)
        rows = 1
        for d in shape[:-1]:
            rows *= d
        kernel = RowKernel("softmax", rows, shape[-1], "inferx_softmax_rows (C, AVX-512)",
                           "max, exp and sum in 16 lanes a row, scaled by the sum's reciprocal")
        groups = [list(range(len(shape) - 1)), [len(shape) - 1]]
        with ir.InsertionPoint(div), div.location:
            flat = ir.RankedTensorType.get([rows, shape[-1]], x.type.element_type)
            rows_view = tensor.CollapseShapeOp(flat, x, groups).result
            result = row_kernel(module, kernel, rows_view, object_path, self.name)
            y = tensor.ExpandShapeOp(x.type, result, groups, [], shape).result
        remark(self.name, div, f"softmax over {shape[-1]} values, {rows} rows, on our AVX-512 kernel")
        div.results[0].replace_all_uses_with(y)
        for op in ops:  # the chain, now unused (its max and fills are left to IREE's cleanup)
            if all(not list(r.uses) for r in op.results):
                op.erase()
