"""inferx-lower-to-linalg: rewrite every `inferx` op to linalg.generic + arith/math.

IREE's bindings cannot load our Python-defined dialect, so nothing of it may cross to
IREE: this pass runs last at graph level. It rewrites

  inferx.quantize    x -> trunc_to_storage(clamp(roundeven(x / scale) + zp, qmin, qmax))
  inferx.dequantize  q -> (ext_to_i32(q) - zp) * scale     (computed in f32, then cast)

as one all-parallel linalg.generic each, reading `scale` and `zero_point` as
`arith.constant` tensors: rank 0 (per-tensor), [C] indexed by the channel loop
(per-channel), or [..., L/g] after a `tensor.expand_shape` of the last axis into
[L/g, g] (grouped; the result is collapsed back), the form IREE recognises as a
dequantization it can fuse into the consuming matmul. Rounding is round-half-to-even
(`rounding.round_half_even`: IREE's code for `math.roundeven` is slow on x86). Storage stays a
signless integer tensor of the storage width:
i8 for "i8"/"u8" and i4 for "i4"/"u4" (IREE packs i4 two to a byte); unsigned storage
is widened with `arith.extui`, signed with `arith.extsi`. The precision annotation
`inferx.precision` is dropped from every op except the integer ones ("i8", "i4"), which
inferx-quantize-contractions carries out in IREE's context (a discardable attribute crosses;
the dialect's ops do not), and so is the module's `inferx.precision_plan`.

Spelled `inferx-lower-to-linalg` (no options).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, math, tensor

from inferx_compiler.dialects.inferx import (
    IREE_LEVEL_PRECISIONS, PLAN_ATTR, PRECISION_ATTR, DequantizeOp, QuantizeOp, QuantScheme, read_scheme)

from inferx_compiler.passes.infra.base import ModulePass, PassFailure
from inferx_compiler.passes.analysis.linalg_analysis import collect
from inferx_compiler.passes.support.linalg_util import empty_like, parallel_generic
from inferx_compiler.passes.support.rounding import round_half_even


@dataclass(frozen=True)
class _Params:
    """How the loop nest reads scale/zero point, and the shape it runs over."""

    inputs: list  # [scale] or [scale, zero_point] constants
    maps: list
    grouped: bool


def _constant(values: np.ndarray, element_type: ir.Type, loc) -> ir.Value:
    shape = list(values.shape)
    if values.size and (values == values.flat[0]).all():  # keep splats compact
        scalar = (ir.FloatAttr.get(element_type, float(values.flat[0]))
                  if isinstance(element_type, ir.F32Type)
                  else ir.IntegerAttr.get(element_type, int(values.flat[0])))
        attr = ir.DenseElementsAttr.get_splat(
            ir.RankedTensorType.get(shape, element_type), scalar)
    else:
        attr = ir.DenseElementsAttr.get(np.ascontiguousarray(values), type=element_type,
                                        shape=shape)
    return arith.ConstantOp(attr.type, attr, loc=loc).result


def _scale_values(s: QuantScheme) -> np.ndarray:
    shape = list(s.scale.type.shape)
    if s.scale.is_splat:
        return np.full(shape, s.scale.get_splat_value().value, dtype=np.float32)
    return np.array([s.scale[i] for i in range(len(s.scale))], np.float32).reshape(shape)


def _zero_point_values(s: QuantScheme) -> Optional[np.ndarray]:
    zp = s.zero_point
    if zp is None:
        return None
    shape = list(zp.type.shape)
    if zp.is_splat:
        return np.full(shape, zp.get_splat_value().value, dtype=np.int32)
    return np.array([zp[i] for i in range(len(zp))], np.int32).reshape(shape)


def _params(s: QuantScheme, rank: int, loc) -> _Params:
    """Constants for scale/zero point and their indexing maps over the (expanded) loops."""
    scale, zp = _scale_values(s), _zero_point_values(s)
    grouped = s.group_size is not None
    loops = rank + 1 if grouped else rank
    if grouped:  # loops (d0 .. d{rank}) over [..., L/g, g]; params drop the last loop
        dims = [ir.AffineDimExpr.get(i) for i in range(rank)]
    elif s.axis is not None:
        dims = [ir.AffineDimExpr.get(s.axis)]
    else:  # per-tensor: rank-0 constants
        scale = scale.reshape([])
        zp = None if zp is None else zp.reshape([])
        dims = []
    amap = ir.AffineMap.get(loops, 0, dims)
    inputs = [_constant(scale, ir.F32Type.get(), loc)]
    if zp is not None:
        inputs.append(_constant(zp, ir.IntegerType.get_signless(32), loc))
    return _Params(inputs, [amap] * len(inputs), grouped)


def _expand_groups(value: ir.Value, group_size: int, loc) -> ir.Value:
    t = value.type
    shape = list(t.shape[:-1]) + [t.shape[-1] // group_size, group_size]
    assoc = [[i] for i in range(t.rank - 1)] + [[t.rank - 1, t.rank]]
    out = ir.RankedTensorType.get(shape, t.element_type)
    return tensor.ExpandShapeOp(out, value, assoc, [], shape, loc=loc).result


def _collapse_groups(value: ir.Value, loc) -> ir.Value:
    t = value.type
    shape = list(t.shape[:-2]) + [t.shape[-2] * t.shape[-1]]
    assoc = [[i] for i in range(t.rank - 2)] + [[t.rank - 2, t.rank - 1]]
    out = ir.RankedTensorType.get(shape, t.element_type)
    return tensor.CollapseShapeOp(out, value, assoc, loc=loc).result


def _lower_elementwise(op, body) -> None:
    """Shared frame: params, optional group expansion, generic, collapse, replace."""
    s = read_scheme(op)
    loc = op.location
    src, result_type = op.operands[0], op.results[0].type
    with ir.InsertionPoint(op), loc:
        p = _params(s, src.type.rank, loc)
        if p.grouped:
            src = _expand_groups(src, s.group_size, loc)
        init = empty_like(src, result_type.element_type, loc)
        identity = ir.AffineMap.get_identity(src.type.rank)
        out = parallel_generic([src] + p.inputs, [identity] + p.maps, init,
                               lambda x, scale, zp=None: body(s, x, scale, zp,
                                                              result_type.element_type),
                               loc)
        if p.grouped:
            out = _collapse_groups(out, loc)
    op.results[0].replace_all_uses_with(out)
    op.operation.erase()


def _quantize_body(s: QuantScheme, x, scale, zp, storage_type):
    f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
    if not isinstance(x.type, ir.F32Type):
        x = arith.extf(f32, x)
    q = round_half_even(arith.divf(x, scale), ir, arith, math)
    if zp is not None:
        q = arith.addf(q, arith.sitofp(f32, zp))
    q = arith.maximumf(q, arith.constant(f32, float(s.qmin)))
    q = arith.minimumf(q, arith.constant(f32, float(s.qmax)))
    return arith.trunci(storage_type, arith.fptosi(i32, q))


def _dequantize_body(s: QuantScheme, q, scale, zp, float_type):
    f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
    w = arith.extsi(i32, q) if s.signed else arith.extui(i32, q)
    if zp is not None:
        w = arith.subi(w, zp)
    y = arith.mulf(arith.sitofp(f32, w), scale)
    return y if isinstance(float_type, ir.F32Type) else arith.truncf(float_type, y)


def lower_quantize(op) -> bool:
    """inferx.quantize -> linalg.generic; declines anything else."""
    if not isinstance(op, QuantizeOp):
        return False
    _lower_elementwise(op, _quantize_body)
    return True


def lower_dequantize(op) -> bool:
    """inferx.dequantize -> linalg.generic; declines anything else."""
    if not isinstance(op, DequantizeOp):
        return False
    _lower_elementwise(op, _dequantize_body)
    return True


def drop_precision_annotation(op) -> bool:
    """Remove `inferx.precision` (a decision already applied or not taken); integer decisions
    stay for IREE's level."""
    if PRECISION_ATTR not in op.attributes:
        return False
    attr = op.attributes[PRECISION_ATTR]
    if isinstance(attr, ir.StringAttr) and attr.value in IREE_LEVEL_PRECISIONS:
        return False
    del op.attributes[PRECISION_ATTR]
    return True


PATTERNS = (lower_quantize, lower_dequantize)


@dataclass(frozen=True)
class LowerInferXToLinalg(ModulePass):
    """Rewrites inferx.quantize/dequantize to linalg.generic and drops inferx attributes."""

    name: ClassVar[str] = "inferx-lower-to-linalg"
    level: ClassVar[str] = "graph"
    summary: ClassVar[str] = "lower the inferx dialect to linalg/arith before IREE"

    @classmethod
    def for_build(cls, build) -> "Optional[LowerInferXToLinalg]":
        return cls()

    def run(self, module) -> None:
        for op in collect(module, lambda o: o.name.startswith("inferx.")):
            if not any(pattern(op.opview) for pattern in PATTERNS):
                raise PassFailure(f"no lowering for '{op.name}'", op=op)
        for op in collect(module, lambda o: PRECISION_ATTR in o.attributes):
            drop_precision_annotation(op)
        if PLAN_ATTR in module.attributes:
            del module.attributes[PLAN_ATTR]
