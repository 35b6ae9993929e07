"""Small IR helpers for the passes that run in IREE's context (input and dispatch level):
find a value's producer, build a linalg.generic or a zero-filled tensor. (The graph-level
passes' counterparts, in torch-mlir's bindings, are in linalg_util.py.)"""

from __future__ import annotations

from typing import Callable, Optional, Sequence


def defining_op(value, names: Optional[Sequence[str]] = None):
    """The op that defines `value` (None for a block argument, or when it is not one of `names`)."""
    from iree.compiler import ir

    if not isinstance(value, ir.OpResult):
        return None
    op = value.owner.operation
    return op if names is None or op.name in names else None


FLOAT_CASTS = ("arith.extf", "arith.truncf")


def body_ops(op) -> list:
    """The operations of a structured op's (first) body block."""
    return [o.operation for o in op.regions[0].blocks[0].operations]


def cast_generic(op) -> Optional[tuple]:
    """(cast op name, result element type) when `op` is a one-input elementwise linalg.generic
    whose body only extends or truncates its input (arith.extf / arith.truncf), else None."""
    from inferx_compiler.passes.analysis.linalg_analysis import indexing_maps

    if op is None or op.name != "linalg.generic" or len(op.operands) != 2 or len(op.results) != 1:
        return None
    maps = indexing_maps(op)
    if not all(m.is_permutation and m == maps[-1] for m in maps):
        return None
    body = body_ops(op)
    if len(body) != 2 or body[0].name not in FLOAT_CASTS or body[1].name != "linalg.yield":
        return None
    if body[0].operands[0] != op.regions[0].blocks[0].arguments[0]:
        return None
    return body[0].name, op.results[0].type.element_type


NARROW_FLOATS = ("bf16", "f16")


def narrowing_cast_input(op):
    """The input of `op` when it is an elementwise generic that only truncates to bf16/f16."""
    cast = cast_generic(op)
    if cast is None or cast[0] != "arith.truncf" or str(cast[1]) not in NARROW_FLOATS:
        return None
    return op.operands[0]


def constant_scalar(value) -> Optional[float]:
    """The float an arith.constant defines (a scalar, or a splat / one-element tensor), else None."""
    from iree.compiler import ir

    op = defining_op(value, ("arith.constant",))
    if op is None:
        return None
    attr = op.attributes["value"]
    if isinstance(attr, ir.FloatAttr):
        return attr.value
    try:
        values = list(ir.DenseFPElementsAttr(attr))
    except (TypeError, ValueError):
        return None
    return float(values[0]) if len(values) == 1 or ir.DenseElementsAttr(attr).is_splat else None


def before_reshapes(value):
    """The value `value` reshapes (through expand/collapse_shape ops), or `value` itself."""
    while True:
        reshape = defining_op(value, ("tensor.expand_shape", "tensor.collapse_shape"))
        if reshape is None:
            return value
        value = reshape.operands[0]


def is_zero_fill(value, through_reshapes: bool = True) -> bool:
    """Whether `value` is a tensor filled with 0.0 (linalg.fill of a zero constant), looking
    through expand/collapse_shape ops when `through_reshapes`."""
    if through_reshapes:
        value = before_reshapes(value)
    fill = defining_op(value, ("linalg.fill",))
    return fill is not None and constant_scalar(fill.operands[0]) == 0.0


def generic(inputs: Sequence, init, maps: Sequence, iterators: Sequence[str], body: Callable):
    """A linalg.generic reading `inputs` into `init` with these affine maps (inputs' then the
    init's) and iterator types ("parallel" / "reduction"); `body(block)` builds the region and
    returns the value to yield. Returns the result."""
    from iree.compiler import ir
    from iree.compiler.dialects import linalg

    op = linalg.GenericOp([init.type], list(inputs), [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                          ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{i}>") for i in iterators]))
    block = op.regions[0].blocks.append(*[v.type.element_type for v in (*inputs, init)])
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(block)])
    return op.results[0]


def zeros(shape: Sequence[int], element_type):
    """A static-shape tensor filled with zero (float or integer)."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, linalg, tensor

    value = (ir.FloatAttr.get(element_type, 0.0) if isinstance(element_type, ir.FloatType)
             else ir.IntegerAttr.get(element_type, 0))
    zero = arith.ConstantOp(element_type, value).result
    return linalg.fill(zero, outs=[tensor.EmptyOp(list(shape), element_type).result])


def plain_matmul(lhs, rhs, init):
    """`linalg.matmul` of lhs [M, K] and rhs [K, N] into init [M, N], with its indexing maps
    set as the parser sets them. The Python op DSL leaves the optional `indexing_maps`
    property empty, and IREE 3.13 crashes on such a matmul in some graphs (SIGSEGV compiling
    to executable-sources: a 1x1 convolution fed by a transpose, PP-OCRv4's recognizer);
    the same IR printed and parsed again, which fills the maps, compiles."""
    from iree.compiler import ir
    from iree.compiler.dialects import linalg

    result = linalg.matmul(lhs, rhs, outs=[init])
    d0, d1, d2 = (ir.AffineDimExpr.get(i) for i in range(3))
    maps = [ir.AffineMap.get(3, 0, exprs) for exprs in ([d0, d2], [d2, d1], [d0, d1])]
    result.owner.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
    return result


def resized(value, shape: Sequence[int]):
    """A static tensor cut or zero-padded (at the end of each dim) to `shape`."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    shape = list(shape)
    et = value.type.element_type
    have = list(value.type.shape)
    if have == shape:
        return value
    common = [min(a, b) for a, b in zip(have, shape)]
    if common != have:
        value = tensor.ExtractSliceOp(ir.RankedTensorType.get(common, et), value, [], [], [],
                                      [0] * len(shape), common, [1] * len(shape)).result
    if common == shape:
        return value
    return tensor.InsertSliceOp(value, zeros(shape, et), [], [], [], [0] * len(shape), common,
                                [1] * len(shape)).result


def zero_padding(value):
    """(source, (top, left)) when `value` is a tensor.pad of an NCHW tensor by zeros along H and
    W only, with static sizes (the convolution entry reads the source and treats the rest as
    zeros); else (value, (0, 0))."""
    return spatial_padding(value, 0.0)


def spatial_padding(value, fill: float):
    """(source, (top, left)) when `value` is a tensor.pad of an NCHW tensor by the constant
    `fill` along H and W only, with static sizes; else (value, (0, 0))."""
    from iree.compiler import ir

    pad = defining_op(value, ("tensor.pad",))
    if pad is None:
        return value, (0, 0)
    low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
    high = list(ir.DenseI64ArrayAttr(pad.attributes["static_high"]))
    dyn = ir.ShapedType.get_dynamic_size()
    region = pad.regions[0].blocks[0]
    yielded = list(region.operations)[-1].operands[0]
    if (dyn in low + high or low[:2] + high[:2] != [0, 0, 0, 0] or constant_scalar(yielded) != fill
            or not pad.operands[0].type.has_static_shape):
        return value, (0, 0)
    return pad.operands[0], (low[2], low[3])
