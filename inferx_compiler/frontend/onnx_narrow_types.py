"""Narrow element types (float8, float4, int4, int2, e8m0) and quantize ops, rewritten in ONNX.

torch-mlir's importer rejects int2/uint2/float4/e8m0 tensors, IREE cannot size int4 tensors at
a function boundary, and neither has ONNX's conversion semantics for casts into float8
(saturation, NaN and infinity rules) or int4 (wrap-around). So before import,
`widen_narrow_types` carries every value of such a type in a *container* type that holds each
of its values exactly (float32 for the float formats, int8/uint8 for the integer ones; the
table is `tensor_spec.NARROW_CONTAINERS`), and writes the conversions *into* those types as
standard ONNX arithmetic:

- `Cast`/`CastLike` to a float format: round to nearest even at the format's precision in the
  value's binade (exponent found by log2, then corrected exactly against a table of powers of
  two), subnormals at the smallest binade's step, saturation or the format's overflow value
  (inf for E5M2, NaN for the others), NaN kept (0 for float4, which has none);
  to e8m0 (powers of two): rounding up, down or to nearest by `round_mode`;
  to int4/int2: truncation, then wrap-around in two's complement (ml_dtypes' and onnx's rule).
- `QuantizeLinear`/`DequantizeLinear` whose quantized type is narrow, whose scale is per axis
  or blocked (torch-mlir's lowering handles per-tensor scales only: per-axis ones fail or come
  out wrong), whose type torch-mlir crashes on (uint16 quantize), or a DequantizeLinear
  without a zero point (an int32 bias: torch-mlir leaves it illegal): scale and zero point are
  broadcast to the input (unsqueezed per axis, gathered per block) and the formula is written
  out: `saturate(round(x / scale) + zero_point)`, `(x - zero_point) * scale`.
- Casts *from* a narrow type need nothing: the container already holds the value.

One known difference: IREE's CPU code reads float32 subnormal inputs as zero, so an e8m0
cast of one (below 2**-126) gives 2**-127 where onnx's bit-level rule rounds up to 2**-126.
(Every other format maps all float32 subnormals to zero anyway.)

The model's interface keeps its declared types: `widen_narrow_types` returns them, the
manifest lists them, and the runtime converts arrays to and from the containers.
Values of a narrow type may flow only through ops that move data without computing on it
(Reshape, Transpose, Gather...); any other op seeing one is refused with a message that
names the node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from inferx_compiler.errors import ModelLoadError
from inferx_compiler.frontend.onnx_builder import NodeBuilder
from inferx_compiler.frontend.onnx_rewrites import replace_nodes

F32 = TensorProto.FLOAT


@dataclass(frozen=True)
class FloatFormat:
    mantissa_bits: int
    min_exponent: int  # exponent of the smallest normal value
    max_value: float
    overflow: Optional[float]  # non-saturating result above max_value; None: always saturates
    nan: float  # what NaN becomes

    @property
    def max_exponent(self) -> int:
        return int(math.floor(math.log2(self.max_value)))


FLOAT_FORMATS = {
    TensorProto.FLOAT8E4M3FN: FloatFormat(3, -6, 448.0, math.nan, math.nan),
    TensorProto.FLOAT8E4M3FNUZ: FloatFormat(3, -7, 240.0, math.nan, math.nan),
    TensorProto.FLOAT8E5M2: FloatFormat(2, -14, 57344.0, math.inf, math.nan),
    TensorProto.FLOAT8E5M2FNUZ: FloatFormat(2, -15, 57344.0, math.nan, math.nan),
    TensorProto.FLOAT4E2M1: FloatFormat(1, 0, 6.0, None, 0.0),
}
E8M0 = TensorProto.FLOAT8E8M0
INT_FORMATS = {TensorProto.INT4: (-8, 7), TensorProto.UINT4: (0, 15),
               TensorProto.INT2: (-2, 1), TensorProto.UINT2: (0, 3)}
CONTAINERS = {**{t: F32 for t in FLOAT_FORMATS}, E8M0: F32,
              TensorProto.INT4: TensorProto.INT8, TensorProto.INT2: TensorProto.INT8,
              TensorProto.UINT4: TensorProto.UINT8, TensorProto.UINT2: TensorProto.UINT8}
NARROW = frozenset(CONTAINERS)

# Ops that move values without computing on them: a container value is as good as the original.
DATA_MOVEMENT = frozenset({
    "Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Concat", "Split",
    "Slice", "Gather", "GatherElements", "GatherND", "Expand", "Tile", "Shape", "Size",
    "DepthToSpace", "SpaceToDepth", "Compress", "Where", "Cast", "CastLike"})
# Quantize ops torch-mlir lowers itself: per-tensor scales of these quantized types.
NATIVE_QUANTIZE = frozenset({TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16})
NATIVE_DEQUANTIZE = frozenset({TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16,
                               TensorProto.UINT16, TensorProto.INT32})


def widen_narrow_types(model: onnx.ModelProto) -> tuple[dict[str, str], list[str]]:
    """Rewrite `model` in place (see the module docstring). Returns the interface values of a
    narrow type ({name: numpy dtype name}) and the names of the nodes rewritten."""
    graph = model.graph
    if not _mentions_narrow_or_quantize(graph):
        return {}, []
    facts = _Facts.of(model)
    types = facts.types
    interface = {vi.name: _dtype_name(types[vi.name]) for vi in list(graph.input) + list(graph.output)
                 if types.get(vi.name) in NARROW}
    rewritten = replace_nodes(graph, lambda node: _rewrite(node, facts))
    _retype(graph)
    return interface, rewritten


# ------------------------------------------------------------------------------ the graph


def _mentions_narrow_or_quantize(graph: onnx.GraphProto) -> bool:
    return _mentions_narrow(graph) or any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in graph.node)


def _narrow_attribute(node: onnx.NodeProto) -> bool:
    for a in node.attribute:
        if a.type == onnx.AttributeProto.INT and a.name in ("to", "output_dtype") and a.i in NARROW:
            return True
        if a.type == onnx.AttributeProto.TENSOR and a.t.data_type in NARROW:
            return True
    return False


@dataclass
class _Facts:
    """Element types and shapes (None: a dim not known statically) after shape inference, and
    the op types reading each value."""
    types: dict
    shapes: dict
    readers: dict = field(default_factory=dict)

    @classmethod
    def of(cls, model: onnx.ModelProto) -> "_Facts":
        try:
            g = onnx.shape_inference.infer_shapes(model).graph
        except Exception:
            g = model.graph
        types, shapes = {}, {}
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            t = vi.type.tensor_type
            if vi.type.HasField("tensor_type"):
                types[vi.name] = t.elem_type
                if t.HasField("shape"):
                    shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
        tensors = [(i.name, i) for i in g.initializer]
        tensors += [(n.output[0], a.t) for n in g.node if n.op_type == "Constant"
                    for a in n.attribute if a.type == onnx.AttributeProto.TENSOR]
        for name, t in tensors:
            types.setdefault(name, t.data_type)
            shapes.setdefault(name, tuple(t.dims))
        readers: dict = {}
        for n in g.node:
            for name in n.input:
                readers.setdefault(name, set()).add(n.op_type)
        return cls(types, shapes, readers)

    def size(self, name: str) -> Optional[int]:
        shape = self.shapes.get(name)
        return None if shape is None or None in shape else int(np.prod(shape))


def _dtype_name(elem_type: int) -> str:
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name


def _type_name(elem_type: int) -> str:
    return TensorProto.DataType.Name(elem_type)


def _retype(graph: onnx.GraphProto) -> None:
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        t = vi.type.tensor_type
        if t.elem_type in NARROW:
            t.elem_type = CONTAINERS[t.elem_type]
    for i, init in enumerate(graph.initializer):
        if init.data_type in NARROW:
            graph.initializer[i].CopyFrom(_widened_tensor(init))


def _widened_tensor(t: onnx.TensorProto) -> onnx.TensorProto:
    container = helper.tensor_dtype_to_np_dtype(CONTAINERS[t.data_type])
    return numpy_helper.from_array(numpy_helper.to_array(t).astype(container), t.name)


# ------------------------------------------------------------------------ node rewrites


def _rewrite(node: onnx.NodeProto, facts: _Facts) -> Optional[list]:
    op, types = node.op_type, facts.types
    if node.domain not in ("", "ai.onnx"):
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if op in ("Constant", "ConstantOfShape"):
        return _widened_constant(node)
    if op == "Cast" and attrs.get("to") in NARROW:
        return _cast(node, node.input[0], types, attrs["to"], attrs)
    if op == "CastLike" and types.get(node.input[1]) in NARROW:
        return _cast(node, node.input[0], types, types[node.input[1]], attrs)
    if op == "QuantizeLinear":
        return _quantize(node, facts, attrs)
    if op == "DequantizeLinear":
        return _dequantize(node, facts, attrs)
    _refuse_narrow_compute(node, types)
    return None


def _refuse_narrow_compute(node: onnx.NodeProto, types: dict) -> None:
    if node.op_type in DATA_MOVEMENT or node.op_type in ("QuantizeLinear", "DequantizeLinear"):
        return
    for name in list(node.input) + list(node.output):
        if types.get(name) in NARROW:
            raise ModelLoadError(
                f"node '{node.name}' (op_type={node.op_type}) computes on '{name}' of type "
                f"{_type_name(types[name])}: inferx carries {_type_name(types[name])} values in "
                f"{_type_name(CONTAINERS[types[name]])} and lets only Cast, QuantizeLinear, "
                f"DequantizeLinear and data-movement ops see them")
    for a in node.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                if _mentions_narrow(g):
                    raise ModelLoadError(
                        f"node '{node.name}' (op_type={node.op_type}) has a subgraph with 4-bit, "
                        f"2-bit or 8-bit float values, which inferx does not take inside control flow")


def _mentions_narrow(graph: onnx.GraphProto) -> bool:
    infos = list(graph.input) + list(graph.output) + list(graph.value_info)
    return any(vi.type.tensor_type.elem_type in NARROW for vi in infos) or \
        any(t.data_type in NARROW for t in graph.initializer) or any(_narrow_attribute(n) for n in graph.node)


def _widened_constant(node: onnx.NodeProto) -> Optional[list]:
    if not _narrow_attribute(node):
        return None
    new = onnx.NodeProto()
    new.CopyFrom(node)
    for a in new.attribute:
        if a.type == onnx.AttributeProto.TENSOR and a.t.data_type in NARROW:
            a.t.CopyFrom(_widened_tensor(a.t))
    return [new]


def _cast(node, x: str, types: dict, to: int, attrs: dict) -> list:
    """Cast to a narrow type: the rounding written out, the result in the container."""
    b = NodeBuilder(node)
    saturate = bool(attrs.get("saturate", 1))
    src = types.get(x)
    out = node.output[0]
    if to in INT_FORMATS:
        _wrap_to_int(b, x, src, to, out)
    elif to == E8M0:
        mode = attrs.get("round_mode", b"up")
        _round_to_e8m0(b, b.f32(x, src), saturate, mode.decode() if isinstance(mode, bytes) else mode, out)
    else:
        _round_to_float(b, b.f32(x, src), FLOAT_FORMATS[to], saturate, out)
    return b.nodes


def _wrap_to_int(b: NodeBuilder, x: str, src: Optional[int], to: int, out: str) -> None:
    """Truncate toward zero (NaN and infinities to 0), then wrap into [lo, hi]."""
    lo, hi = INT_FORMATS[to]
    if src is None or helper.tensor_dtype_to_np_dtype(src).kind == "f" or src in FLOAT_FORMATS or src == E8M0:
        x = b.f32(x, src)
        bad = b.op("Or", [b.op("IsNaN", [x]), b.op("IsInf", [x])])
        x = b.op("Where", [bad, b.const(0.0), x])
    v = b.op("Cast", [x], to=TensorProto.INT64)
    span = b.const(hi - lo + 1, np.int64)
    low = b.const(lo, np.int64)
    wrapped = b.op("Add", [b.op("Mod", [b.op("Sub", [v, low]), span]), low])
    b.op("Cast", [wrapped], output=out, to=CONTAINERS[to])


def _pow2(b: NodeBuilder, e: str, low: int, high: int) -> str:
    """2**e for float e in [low, high], exact, from a table (e is integral)."""
    table = b.const(np.ldexp(np.float32(1), np.arange(low, high + 1)).astype(np.float32))
    index = b.op("Cast", [b.op("Sub", [e, b.const(float(low))])], to=TensorProto.INT64)
    return b.op("Gather", [table, index])


def _binade(b: NodeBuilder, a: str, low: int, high: int) -> tuple[str, str]:
    """(e, 2**e) with e = floor(log2(a)) clamped to [low, high], for a >= 0 (not NaN).
    log2 gives the estimate; one exact correction each way against powers of two."""
    clamped = b.op("Clip", [a, b.const(2.0 ** low), b.const(2.0 ** high)])
    e = b.op("Floor", [b.op("Mul", [b.op("Log", [clamped]), b.const(1 / math.log(2))])])
    e = b.op("Clip", [e, b.const(float(low)), b.const(float(high))])
    p = _pow2(b, e, low, high)
    down = b.op("And", [b.op("Less", [clamped, p]), b.op("Greater", [e, b.const(float(low))])])
    e = b.op("Sub", [e, b.op("Cast", [down], to=F32)])
    p = _pow2(b, e, low, high)
    up = b.op("And", [b.op("GreaterOrEqual", [clamped, b.op("Mul", [p, b.const(2.0)])]),
                      b.op("Less", [e, b.const(float(high))])])
    e = b.op("Add", [e, b.op("Cast", [up], to=F32)])
    return e, _pow2(b, e, low, high)


def _round_to_float(b: NodeBuilder, x: str, fmt: FloatFormat, saturate: bool, out: str) -> str:
    """x (float32) rounded to the nearest value of `fmt`, ties to even, as a float32."""
    nan = b.op("IsNaN", [x])
    a = b.op("Where", [nan, b.const(0.0), b.op("Abs", [x])])
    _, p = _binade(b, a, fmt.min_exponent, fmt.max_exponent)
    step = b.op("Mul", [p, b.const(2.0 ** -fmt.mantissa_bits)])
    r = b.op("Mul", [b.op("Round", [b.op("Div", [a, step])]), step])
    if saturate or fmt.overflow is None:
        r = b.op("Min", [r, b.const(fmt.max_value)])
    else:
        r = b.op("Where", [b.op("Greater", [r, b.const(fmt.max_value)]), b.const(fmt.overflow), r])
    signed = b.op("Where", [b.op("Less", [x, b.const(0.0)]), b.op("Neg", [r]), r])
    return b.op("Where", [nan, b.const(fmt.nan), signed], output=out)


def _round_to_e8m0(b: NodeBuilder, x: str, saturate: bool, mode: str, out: str) -> str:
    """x (float32) to a power of two 2**k, k in [-127, 127], as onnx rounds it: the sign is
    dropped, `mode` up/down/nearest decides between the two powers around |x|, NaN and
    infinities become NaN, and above 2**127 saturation keeps 2**127 (else NaN)."""
    if mode not in ("up", "down", "nearest"):
        raise ModelLoadError(f"node '{b.node.name}' (Cast to FLOAT8E8M0): unknown round_mode '{mode}'")
    special = b.op("Or", [b.op("IsNaN", [x]), b.op("IsInf", [x])])
    a = b.op("Where", [special, b.const(1.0), b.op("Abs", [x])])
    e, p = _binade(b, a, -126, 127)
    ratio = b.op("Div", [a, p])  # in [1, 2) for normal a
    threshold = {"up": 1.0, "nearest": 1.5, "down": None}[mode]
    if threshold is not None:
        bump = b.op("Greater" if mode == "up" else "GreaterOrEqual", [ratio, b.const(threshold)])
        e = b.op("Add", [e, b.op("Cast", [bump], to=F32)])
    over = b.op("Greater", [e, b.const(127.0)])
    e = b.op("Min", [e, b.const(127.0)])
    normal = _pow2(b, e, -126, 127)
    if not saturate:
        normal = b.op("Where", [over, b.const(math.nan), normal])
    # Below 2**-126 onnx looks at the float32 bits: exponent field 0 is 2**-127, and rounding
    # up (any fraction) or to nearest (a fraction over one half) gives 2**-126.
    fraction = b.op("Mul", [a, b.const(2.0 ** 126)])
    tiny = b.const(2.0 ** -127)
    if threshold is not None:
        cut = 0.0 if mode == "up" else 0.5
        tiny = b.op("Where", [b.op("Greater", [fraction, b.const(cut)]), b.const(2.0 ** -126), tiny])
    y = b.op("Where", [b.op("Less", [a, b.const(2.0 ** -126)]), tiny, normal])
    return b.op("Where", [special, b.const(math.nan), y], output=out)


# --------------------------------------------------------------------- quantize ops


def _quantized_type(node: onnx.NodeProto, types: dict, attrs: dict) -> int:
    if attrs.get("output_dtype"):
        return attrs["output_dtype"]
    if len(node.input) > 2 and node.input[2]:
        return types.get(node.input[2], TensorProto.UINT8)
    return TensorProto.UINT8


def _per_tensor(node: onnx.NodeProto, attrs: dict, facts: _Facts) -> bool:
    return not attrs.get("block_size", 0) and facts.size(node.input[1]) == 1


def _quantize(node: onnx.NodeProto, facts: _Facts, attrs: dict) -> Optional[list]:
    """saturate(round(x / scale) + zero_point), the result in the quantized type's container."""
    types = facts.types
    q = _quantized_type(node, types, attrs)
    if q in NATIVE_QUANTIZE and _per_tensor(node, attrs, facts):
        return None
    b = NodeBuilder(node)
    x, scale = node.input[0], node.input[1]
    zp = node.input[2] if len(node.input) > 2 and node.input[2] else None
    spread = _Broadcast(b, node, attrs, facts)
    v = b.op("Div", [b.f32(x, types.get(x)), spread(b.f32(scale, types.get(scale)))])
    zp_f = spread(b.f32(zp, types.get(zp))) if zp else None
    out = node.output[0]
    if q in FLOAT_FORMATS:
        _round_to_float(b, b.op("Add", [v, zp_f]) if zp_f else v, FLOAT_FORMATS[q],
                        bool(attrs.get("saturate", 1)), out)
        return b.nodes
    if q in INT_FORMATS:
        lo, hi = INT_FORMATS[q]
    elif helper.tensor_dtype_to_np_dtype(q).kind in "iu":
        info = np.iinfo(helper.tensor_dtype_to_np_dtype(q))
        lo, hi = int(info.min), int(info.max)
    else:
        raise ModelLoadError(f"node '{node.name}' (QuantizeLinear): quantized type {_type_name(q)} "
                             f"is not one inferx can quantize to")
    r = b.op("Round", [v])
    if zp_f:
        r = b.op("Add", [r, zp_f])
    r = b.op("Clip", [r, b.const(float(lo)), b.const(float(hi))])
    container = CONTAINERS.get(q, q)
    if container == TensorProto.INT16:  # torch-mlir has no Cast to int16, but quantizes to it
        b.op("QuantizeLinear", [r, b.const(1.0), b.const(0, np.int16)], output=out)
        return b.nodes
    if helper.tensor_dtype_to_np_dtype(container).kind == "u":
        r = b.op("Cast", [r], to=TensorProto.INT32)  # float -> unsigned saturates at the signed range
    b.op("Cast", [r], output=out, to=container)
    return b.nodes


def _dequantize(node: onnx.NodeProto, facts: _Facts, attrs: dict) -> Optional[list]:
    """(x - zero_point) * scale, in float32, then the scale's (or output_dtype's) type."""
    types = facts.types
    x, scale = node.input[0], node.input[1]
    q = types.get(x)
    zp = node.input[2] if len(node.input) > 2 and node.input[2] else None
    if q in NATIVE_DEQUANTIZE and _per_tensor(node, attrs, facts) and zp and not _dynamic_matmul_operand(node, facts):
        return None  # (torch-mlir's lowering wants the zero point: an int32 bias has none)
    b = NodeBuilder(node)
    spread = _Broadcast(b, node, attrs, facts)
    v = b.f32(x, q)
    if zp:
        v = b.op("Sub", [v, spread(b.f32(zp, types.get(zp)))])
    out_type = attrs.get("output_dtype") or types.get(scale, F32)
    y = b.op("Mul", [v, spread(b.f32(scale, types.get(scale)))], output=None if out_type != F32 else node.output[0])
    if out_type != F32:
        b.op("Cast", [y], output=node.output[0], to=out_type)
    return b.nodes


def _dynamic_matmul_operand(node: onnx.NodeProto, facts: _Facts) -> bool:
    """Whether `node` dequantizes a MatMul operand whose shape is not known statically:
    torch-mlir fuses such a pair into `linalg.quantized_batch_matmul`, which IREE 3.13 computes
    wrong with a dynamic batch (23% relative L2 on [?, 4, 12, 16] x [?, 4, 16, 12] uint8 operands
    with zero point 37; right at zero point 128 and with static shapes), so its dequantization is
    written out instead."""
    shape = facts.shapes.get(node.input[0])
    return (shape is None or None in shape) and "MatMul" in facts.readers.get(node.output[0], set())


class _Broadcast:
    """A quantize op's scale or zero point made broadcastable against its input: as is per
    tensor, unsqueezed after `axis` per axis, gathered along `axis` per block."""

    def __init__(self, b: NodeBuilder, node: onnx.NodeProto, attrs: dict, facts: _Facts):
        self.b, self.node = b, node
        self.block = int(attrs.get("block_size", 0))
        self.per_tensor = not self.block and facts.size(node.input[1]) == 1
        self.shape = facts.shapes.get(node.input[0])
        axis = int(attrs.get("axis", 1))
        if self.shape is None and not self.per_tensor:
            raise ModelLoadError(f"node '{node.name}' ({node.op_type}): a per-axis or blocked scale needs "
                                 f"the rank of input '{node.input[0]}', which shape inference did not find")
        self.axis = axis + len(self.shape) if axis < 0 and self.shape is not None else axis

    def __call__(self, v: str) -> str:
        b = self.b
        if self.per_tensor:
            return v
        if self.block:
            return b.op("Gather", [v, self._block_index()], axis=self.axis)
        trailing = len(self.shape) - self.axis - 1
        if trailing <= 0:
            return v
        return b.op("Unsqueeze", [v, b.const(list(range(1, trailing + 1)), np.int64)])

    def _block_index(self) -> str:
        """[0, 0, ..., 1, 1, ...]: the block of each position along the axis."""
        b = self.b
        size = self.shape[self.axis]
        if size is not None:
            return b.const(np.arange(size) // self.block, np.int64)
        dim = b.op("Shape", [self.node.input[0]], start=self.axis, end=self.axis + 1)
        positions = b.op("Range", [b.const(0, np.int64), b.op("Squeeze", [dim]), b.const(1, np.int64)])
        return b.op("Div", [positions, b.const(self.block, np.int64)])
