"""inferx-fuse-attention: matmul -> scale [-> + mask] -> softmax -> matmul into one attention op.

Runs in IREE's context before IREE's pipeline, on the form the ONNX importer produces for
scaled dot-product attention over `[batch*heads, seq, dim]` tensors:

    s   = linalg.batch_matmul(q, kT)                    (into zeros)
    x   = s * c  [ + mask ]                             (elementwise, after expanding heads)
    p   = exp(x - max(x)) / sum(exp(x - max(x)))       (torch-mlir's softmax over the last dim)
    out = linalg.batch_matmul(p, v)                     (into zeros)

and rewrites it into `iree_linalg_ext.attention(q, k, v, c[, mask])`, which IREE compiles as one
flash-attention kernel (online softmax: the seq x seq score matrix never reaches memory). A
division by a constant counts as the scale 1/c; no scale op means scale 1. A float additive mask
(GPT-2's causal mask) becomes the op's mask operand. f16/bf16 truncations that the precision
passes put in front of the matmuls are looked through; the attention op then reads the
truncated q, k and v.

Decided from the target record: CUDA targets get it (IREE 3.13 lowers the op with
VectorDistribute and f32-accumulating mma.sync on sm_80); CPU targets decline with a remark
(IREE's CPU attention tiles one query row at a time, and its maintainers decompose attention
again for CPUs), unless `force=true` (tests, and anyone measuring it).
Declined, with a remark: a softmax not over the matmul's last dim, a non-constant scale,
masks that are not elementwise additions, a value matrix with another batch.

Spelled `inferx-fuse-attention{force=false}` (the target is the module's `inferx.target`:
inferx-set-target{target=h200} before it on a bare module).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from inferx_compiler.passes.infra.base import TargetedPass
from inferx_compiler.passes.support.iree_ir import constant_scalar, defining_op, generic, is_zero_fill
from inferx_compiler.passes.analysis.linalg_analysis import collect
from inferx_compiler.passes.analysis.remarks import remark


@dataclasses.dataclass(frozen=True)
class Attention:
    """What the matcher found: the operands of the fused op and the op it replaces."""

    q: object
    k_t: object  # [batch, dim, seq]: the transposed keys the first matmul reads
    v: object
    scale: float
    mask: Optional[object]  # [.., seq, seq] float, added to the scores
    output: object  # the second batch_matmul


def _op(value, name: str | tuple):
    """The op defining `value` when it is one of `name`."""
    return defining_op(value, (name,) if isinstance(name, str) else name)


def _body_ops(generic) -> list[str]:
    return [o.operation.name for o in generic.regions[0].blocks[0].operations
            if o.operation.name not in ("linalg.yield", "linalg.index", "arith.index_cast")]


def _elementwise(value, *body: str):
    """The all-parallel linalg.generic defining `value` whose body is exactly `body`."""
    op = _op(value, "linalg.generic")
    if op is None or _body_ops(op) != list(body):
        return None
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    return op if all("parallel" in it for it in iterators) else None


def _reduction(value, *body: str):
    op = _op(value, "linalg.generic")
    if op is None or _body_ops(op) != list(body):
        return None
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    return op if "reduction" in iterators[-1] and all("parallel" in i for i in iterators[:-1]) else None


def _through(value, *names: str):
    """Look through ops that only reshape or change precision (expand/collapse shapes, a
    truncf generic)."""
    while True:
        op = _op(value, ("tensor.expand_shape", "tensor.collapse_shape") + names)
        if op is None:
            truncate = _elementwise(value, "arith.truncf")
            if truncate is None:
                return value
            op = truncate
        value = op.operands[0]


def match(matmul) -> tuple[Optional[Attention], str]:
    """(the attention feeding this batch_matmul, "") or (None, why not)."""
    if matmul.name != "linalg.batch_matmul" or not is_zero_fill(matmul.operands[2], through_reshapes=False):
        return None, ""
    probs = _through(matmul.operands[0])
    divide = _elementwise(probs, "arith.divf")
    if divide is None:
        return None, ""
    exps, sums = divide.operands[0], _through(divide.operands[1])
    total = _reduction(sums, "arith.addf")
    exp = _elementwise(exps, "math.exp")
    if total is None or exp is None or total.operands[0] != exps:
        return None, "softmax: the normalizer is not the sum of the exponentials"
    shifted = _elementwise(exp.operands[0], "arith.subf")
    if shifted is None:
        return None, "softmax: no max subtraction before the exponential"
    scores = shifted.operands[0]
    maximum = _reduction(_through(shifted.operands[1]), "arith.maximumf", "arith.cmpf", "arith.select")
    if maximum is None or maximum.operands[0] != scores:
        return None, "softmax: the subtracted value is not the row maximum"
    mask, scale = None, 1.0
    add = _elementwise(scores, "arith.addf")
    if add is not None:
        scores, mask = add.operands[0], add.operands[1]
        t = mask.type
        if t.rank < 2 or any(dim != 1 for dim in t.shape[:-2]):
            return None, f"the mask {t} is not one [seq, seq] matrix for all heads"
    scaled = _elementwise(scores, "arith.mulf") or _elementwise(scores, "arith.divf")
    if scaled is not None:
        constant = constant_scalar(scaled.operands[1])
        if constant is None or constant == 0.0:
            return None, "the scores are scaled by a non-constant"
        scale = constant if _body_ops(scaled) == ["arith.mulf"] else 1.0 / constant
        scores = scaled.operands[0]
    first = _op(_through(scores), "linalg.batch_matmul")
    if first is None or not is_zero_fill(first.operands[2], through_reshapes=False):
        return None, "the scores do not come from a batch_matmul"
    return Attention(first.operands[0], first.operands[1], matmul.operands[1], scale, mask, matmul), ""


def _maps(with_mask: bool):
    from iree.compiler import ir

    b, m, k1, k2, n = (ir.AffineDimExpr.get(i) for i in range(5))
    maps = [[b, m, k1], [b, k1, k2], [b, k2, n], []]  # q [B,S,D], kT [B,D,S], v [B,S,Dv], scale
    if with_mask:
        maps.append([b, m, k2])
    maps.append([b, m, n])
    return ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(5, 0, exprs)) for exprs in maps])


def _mask_3d(mask, found: Attention):
    """The mask as [batch*heads, seq, kv-seq], broadcast from a [.., seq, kv-seq] tensor whose
    leading dims are 1 (a generic copy)."""
    from iree.compiler import ir

    t = mask.type
    d = [ir.AffineDimExpr.get(i) for i in range(3)]
    source = [ir.AffineConstantExpr.get(0)] * (t.rank - 2) + [d[1], d[2]]
    empty = _empty(found.q, [found.q.type.shape[1], found.v.type.shape[1]], t.element_type)
    return generic([mask], empty, [ir.AffineMap.get(3, 0, source), ir.AffineMap.get_identity(3)],
                   ["parallel"] * 3, lambda block: block.arguments[0])


def _index(i: int):
    from iree.compiler import ir
    from iree.compiler.dialects import arith

    return arith.ConstantOp(ir.IndexType.get(), i).result


def _empty(q, trailing: list[int], element_type):
    """tensor.empty [q's batch, *trailing] (the batch read off q when it is dynamic)."""
    from iree.compiler.dialects import tensor

    batch = tensor.DimOp(q, _index(0)).result if q.type.is_dynamic_dim(0) else q.type.shape[0]
    return tensor.EmptyOp([batch] + list(trailing), element_type).result


def rewrite(found: Attention) -> None:
    from iree.compiler import ir
    from iree.compiler.dialects import arith

    out = found.output
    out_t = out.results[0].type
    context = out.context
    context.dialects["iree_linalg_ext"]  # load it before creating its op
    with ir.InsertionPoint(out), out.location:
        score_t = ir.F32Type.get()
        scale = arith.ConstantOp(score_t, ir.FloatAttr.get(score_t, found.scale)).result
        operands = [found.q, found.k_t, found.v, scale]
        if found.mask is not None:
            operands.append(_mask_3d(found.mask, found))
        init = _empty(found.q, [found.q.type.shape[1], found.v.type.shape[2]], out_t.element_type)
        attention = ir.Operation.create("iree_linalg_ext.attention", results=[out_t],
                                        operands=operands + [init],
                                        attributes={"indexing_maps": _maps(found.mask is not None)},
                                        regions=1)
        block = attention.regions[0].blocks.append(score_t)
        with ir.InsertionPoint(block):
            ir.Operation.create("iree_linalg_ext.yield", operands=[block.arguments[0]])
    out.results[0].replace_all_uses_with(attention.results[0])
    out.erase()


@dataclasses.dataclass(frozen=True)
class FuseAttention(TargetedPass):
    """Rewrites scaled dot-product attention chains into IREE's fused attention op (GPU targets)."""

    name: ClassVar[str] = "inferx-fuse-attention"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "matmul-scale-softmax-matmul chains -> iree_linalg_ext.attention (GPU targets)"

    force: bool = False

    @classmethod
    def for_build(cls, build) -> "Optional[FuseAttention]":
        mode = build.request.fuse_attention
        if mode == "off" or not build.target.executable or not build.runs(cls.name):
            return None
        return cls(force=mode == "on")

    def run(self, module) -> None:
        target = self.target_of(module)
        for op in collect(module, lambda o: o.name == "linalg.batch_matmul"):
            found, why = match(op)
            if found is None:
                if why:
                    remark(self.name, op, f"declined: {why}")
                continue
            if target.backend != "cuda" and not self.force:
                remark(self.name, op, f"declined: target '{target.name}' ({target.backend}): IREE's CPU "
                                      f"attention is slower than the decomposed form")
                continue
            mask = " with a mask" if found.mask is not None else ""
            remark(self.name, op, f"fused: attention{mask}, scale {found.scale:g}")
            with op.context:
                rewrite(found)
