"""inferx-unbroadcast-matmul: a batch matmul against a batch-broadcast operand -> one matmul.

Runs in IREE's context before IREE's pipeline. An ONNX `MatMul` of activations `[B, M, K]`
with a weight `[K, N]` (every transformer projection) reaches linalg as

    w3  = broadcast w[K, N] to [B, K, N]            (linalg.generic or linalg.broadcast)
    w3h = truncf(w3)                                 (when the precision passes lowered it)
    y   = linalg.batch_matmul(x, w3h)                (into y0 [B, M, N])

and IREE keeps that form: every call materializes the broadcast weight (and its f16 copy) B
times over, in a dispatch of its own, before the matmul reads it (on GPUs those copies were
about 40% of BERT-base b8's kernel time at fp16: docs/levers/unbroadcast-matmul.md); on CPU the
data-tiled matmul packs the broadcast weight on every call.
This pass rewrites it into

    y = expand(linalg.matmul(collapse(x)[B*M, K], truncf(w)[K, N]) into collapse(y0))

one matmul with M' = B*M rows against the weight itself, whose conversion or packing IREE then
hoists out of the call (it reads a global). Casts between the broadcast and the matmul
(extf/truncf generics, one input, identity maps) are re-applied to the unbroadcast weight.

Declined, with a remark: a broadcast on the left-hand operand (the weight on the left; rare in
ONNX exports), a batch matmul with transposing indexing maps. Batch matmuls with no operand
broadcast along the batch (attention's q.k^T) are left alone silently.
Applies on every target: it only removes work.

Spelled `inferx-unbroadcast-matmul`.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from inferx_compiler.dialects.inferx import PRECISION_ATTR
from inferx_compiler.passes.infra.base import ModulePass
from inferx_compiler.passes.support.iree_ir import body_ops, cast_generic, defining_op, generic, plain_matmul
from inferx_compiler.passes.analysis.linalg_analysis import collect, indexing_maps
from inferx_compiler.passes.analysis.remarks import remark



@dataclasses.dataclass(frozen=True)
class SharedOperand:
    """A batch matmul operand that is one `[K, N]` tensor broadcast over the batch."""

    source: object  # the [K, N] value before the broadcast
    casts: tuple  # (op name, element type) applied after the broadcast, in order


def _default_maps(batch_matmul) -> bool:
    """Whether the op reads x[b, m, k] and w[b, k, n] into y[b, m, n] (no transposed operand)."""
    from iree.compiler import ir

    b, m, n, k = (ir.AffineDimExpr.get(i) for i in range(4))
    want = [ir.AffineMap.get(4, 0, e) for e in ([b, m, k], [b, k, n], [b, m, n])]
    return indexing_maps(batch_matmul) == want


def _broadcast_source(op):
    """The `[K, N]` source when `op` broadcasts it along dim 0 of a rank-3 result, else None."""
    from iree.compiler import ir

    if op is None or op.results[0].type.rank != 3:
        return None
    if op.name == "linalg.broadcast":
        dims = [int(d) for d in ir.DenseI64ArrayAttr(op.attributes["dimensions"])]
        return op.operands[0] if dims == [0] else None
    if op.name != "linalg.generic" or len(op.operands) != 2:
        return None
    body = body_ops(op)
    if len(body) != 1 or body[0].operands[0] != op.regions[0].blocks[0].arguments[0]:
        return None
    source_map, out_map = indexing_maps(op)
    d = [ir.AffineDimExpr.get(i) for i in range(3)]
    if out_map != ir.AffineMap.get_identity(3) or source_map != ir.AffineMap.get(3, 0, d[1:]):
        return None
    return op.operands[0]


def shared_operand(value) -> Optional[SharedOperand]:
    """Look up from a batch matmul operand through casts to a batch broadcast."""
    casts = []
    op = defining_op(value)
    while (cast := cast_generic(op)) is not None:
        casts.append(cast)
        op = defining_op(op.operands[0])
    source = _broadcast_source(op)
    return SharedOperand(source, tuple(reversed(casts))) if source is not None else None


def _apply_cast(value, cast: tuple):
    """A generic applying `cast` (op name, element type) elementwise to a 2-D tensor."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    name, element_type = cast
    empty = tensor.EmptyOp(list(value.type.shape), element_type).result
    convert = arith.ExtFOp if name == "arith.extf" else arith.TruncFOp
    identity = ir.AffineMap.get_identity(2)
    return generic([value], empty, [identity, identity], ["parallel"] * 2,
                   lambda block: convert(element_type, block.arguments[0]).result)


def rewrite(matmul, shared: SharedOperand) -> None:
    """batch_matmul(x[B,M,K], broadcast(w)) into y0 -> expand(matmul(x[B*M,K], w) into y0[B*M,N])."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    x, old_rhs, init = matmul.operands[0], matmul.operands[1], matmul.operands[2]
    with ir.InsertionPoint(matmul), matmul.location:
        weight = shared.source
        for cast in shared.casts:
            weight = _apply_cast(weight, cast)
        dyn = ir.ShapedType.get_dynamic_size()
        b, m, _ = init.type.shape
        rows = dyn if dyn in (b, m) else b * m
        x2 = tensor.CollapseShapeOp(ir.RankedTensorType.get([rows, x.type.shape[2]], x.type.element_type),
                                    x, [[0, 1], [2]]).result
        acc_t = init.type.element_type
        init2 = tensor.CollapseShapeOp(ir.RankedTensorType.get([rows, init.type.shape[2]], acc_t),
                                       init, [[0, 1], [2]]).result
        product = plain_matmul(x2, weight, init2)
        if PRECISION_ATTR in matmul.attributes:  # a decision for a later pass travels with the op
            defining_op(product).attributes[PRECISION_ATTR] = matmul.attributes[PRECISION_ATTR]
        sizes = [tensor.dim(init, arith.constant(ir.IndexType.get(), i)) if s == dyn else None
                 for i, s in enumerate(init.type.shape[:2])]
        out = tensor.ExpandShapeOp(init.type, product, [[0, 1], [2]], [s for s in sizes if s is not None],
                                   [dyn if s == dyn else s for s in init.type.shape]).result
    matmul.results[0].replace_all_uses_with(out)
    matmul.erase()
    _erase_unused_chain(defining_op(old_rhs))


def _erase_unused_chain(op) -> None:
    """Erase the broadcast and its casts where nothing else reads them (the weight stays)."""
    while op is not None and op.name in ("linalg.generic", "linalg.broadcast") and not list(op.results[0].uses):
        source = op.operands[0]
        op.erase()
        op = defining_op(source)


@dataclasses.dataclass(frozen=True)
class UnbroadcastMatmul(ModulePass):
    """batch_matmul(x, broadcast(w)) -> matmul(collapse(x), w): no per-call weight broadcast."""

    name: ClassVar[str] = "inferx-unbroadcast-matmul"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "batch matmuls against a batch-broadcast weight -> one matmul over B*M rows"

    @classmethod
    def for_build(cls, build) -> "Optional[UnbroadcastMatmul]":
        return cls() if build.target.executable and build.runs(cls.name) else None

    def run(self, module) -> None:
        for op in collect(module, lambda o: o.name == "linalg.batch_matmul"):
            lhs, rhs = shared_operand(op.operands[0]), shared_operand(op.operands[1])
            if lhs is not None:
                remark(self.name, op, "declined: the left-hand operand is broadcast over the batch "
                                      "(only a shared right-hand operand folds into one matmul)")
                continue
            if rhs is None:
                continue
            if not _default_maps(op):
                remark(self.name, op, "declined: a batch matmul with transposing indexing maps")
                continue
            b, m, _ = op.operands[2].type.shape
            rows = "B*M" if min(b, m) < 0 else f"{b * m}"
            weight = "x".join(str(s) for s in rhs.source.type.shape)
            remark(self.name, op, f"one matmul over {rows} rows against the unbroadcast {weight} operand")
            with op.context:
                rewrite(op, rhs)

