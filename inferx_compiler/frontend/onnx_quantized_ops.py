"""Quantized operators rewritten in the standard ops that define them, before import.

No lowering takes onnxruntime's contrib domain, yet onnxruntime's own tools write it: its static
quantizer in the QOperator format (`QLinearAdd`, `QLinearMul`, `QGemm`, `QLinearSoftmax`,
`QLinearConcat`, `QLinearGlobalAveragePool`...), its dynamic quantizer (`DynamicQuantizeLSTM`),
its 4-bit weight quantizer (`MatMulNBits`) and its graph optimizer (`DynamicQuantizeMatMul`,
`MatMulIntegerToFloat`). And torch-mlir's lowerings of the standard `QLinearMatMul` (3-D
operands: not lowered) and `QLinearConv` (per-channel weight scales: wrong values) fail on what
that quantizer writes. Each is rewritten here:

- a quantized op `QLinearX` is `QuantizeLinear(X(DequantizeLinear(a), ...), y_scale, y_zp)`,
  the definition of these ops (onnxruntime's kernels compute the same up to one unit in the
  output's last place: lookup tables for Sigmoid/LeakyRelu, fixed point for Add/Mul);
  `QGemm` and `QLinearConv` keep their int32 bias at scale a_scale * b_scale; `QGemm` gives
  float where it has no output scale;
- `DynamicQuantizeMatMul` and `MatMulIntegerToFloat` are the `DynamicQuantizeLinear` +
  `MatMulInteger` + scale + bias chains onnxruntime fused them from (exact integer products);
- `MatMulNBits` (2-8 bit codes in blocks along K, packed low bits first) is decoded here, at
  compile time, into a float weight `(code - zero_point) * scale` of A's type and a MatMul:
  the artifact's weight is float (4-8x the packed bytes). onnxruntime computes in A's type as
  well unless the node asks for `accuracy_level` 4 (int8 activations), which is refused;
- `DynamicQuantizeLSTM` becomes an `LSTM` on its weights dequantized at compile time (float
  activations, where onnxruntime quantizes them to uint8 on the fly at every step: the two
  differ by that rounding, ~6e-3 relative on tools/corpus/quantized_zoo.py's LSTM);
- `QuantizeLinear`/`DequantizeLinear` of the contrib domain are the standard ops;
- `MaxPool` and `Clip` over unsigned integers (a QOperator model pools its uint8 activations)
  run in float32, which holds every uint8/uint16 value: torch-mlir compares them as signed.

The Q/DQ nodes written here are standard ops; `onnx_narrow_types` writes out those torch-mlir
cannot lower itself (per-axis scales, 16-bit types). A node with an input or attribute outside
what is written here is refused naming the node and what is wrong; other contrib ops are left
for the import's check, which names them.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper

from inferx_compiler.frontend.onnx_builder import GraphFacts, NodeBuilder, NodeView
from inferx_compiler.frontend.onnx_rewrites import replace_nodes

CONTRIB = "com.microsoft"
F32 = TensorProto.FLOAT


def decompose_quantized_ops(model: onnx.ModelProto) -> list[str]:
    """Rewrite, in place, the nodes of the main graph that `REWRITES`, then `AFTER_REWRITES`, cover (see the module
    docstring); returns the names of the nodes rewritten."""
    graph = model.graph
    rewritten = []
    for table in (REWRITES, AFTER_REWRITES):  # the second reads types of the first's outputs
        if any(_key(n) in table for n in graph.node):
            facts = GraphFacts(model)
            rewritten += replace_nodes(graph, lambda node: _rewrite(node, facts, table))
    return rewritten


def _key(node: onnx.NodeProto) -> tuple[str, str]:
    return ("" if node.domain in ("", "ai.onnx") else node.domain, node.op_type)


def _rewrite(node: onnx.NodeProto, facts: GraphFacts, table: dict) -> Optional[list]:
    rewrite = table.get(_key(node))
    if rewrite is None:
        return None
    b = NodeBuilder(node)
    if rewrite(b, NodeView(node), facts) is False:
        return None
    return b.nodes


# ----------------------------------------------------------------------- dequantize, quantize


def _dequantize(b: NodeBuilder, x: str, scale: str, zero_point: Optional[str], axis: Optional[int] = None) -> str:
    attrs = {} if axis is None else {"axis": axis}
    return b.op("DequantizeLinear", [x, scale] + ([zero_point] if zero_point else []), **attrs)


def _quantize(b: NodeBuilder, y: str, scale: str, zero_point: Optional[str], like: Optional[str],
              facts: GraphFacts, output: str) -> str:
    """QuantizeLinear to the type of `zero_point` (absent: a zero of `like`'s type, the type of
    the op's quantized input, as onnxruntime's contrib ops default to)."""
    if zero_point is None:
        elem = facts.types.get(like, TensorProto.UINT8) if like else TensorProto.UINT8
        zero_point = b.const(0, helper.tensor_dtype_to_np_dtype(elem))
    return b.op("QuantizeLinear", [y, scale, zero_point], output=output)


def _quantized_operand(n: NodeView, first: int) -> tuple:
    """(x, scale, zero point) at inputs first, first + 1, first + 2."""
    return n.input(first), n.input(first + 1), n.input(first + 2)


def _require(n: NodeView, *positions: int) -> None:
    missing = [k for k in positions if n.input(k) is None]
    if missing:
        raise n.refuse(f"input(s) {missing} are required and missing")


# -------------------------------------------------------------------------- the QLinear ops


def _qlinear_binary(op_type: str) -> Callable:
    """QLinearAdd / QLinearMul(A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp)."""

    def rewrite(b: NodeBuilder, n: NodeView, facts: GraphFacts) -> None:
        _require(n, 0, 1, 3, 4, 6)
        a = _dequantize(b, *_quantized_operand(n, 0))
        c = _dequantize(b, *_quantized_operand(n, 3))
        _quantize(b, b.op(op_type, [a, c]), n.input(6), n.input(7), n.input(0), facts, n.outputs[0])
    return rewrite


def _qlinear_unary(build: Callable) -> Callable:
    """QLinearX(X, X_scale, X_zp, Y_scale, Y_zp): `build(b, n, x, facts)` writes X in float."""

    def rewrite(b: NodeBuilder, n: NodeView, facts: GraphFacts) -> None:
        _require(n, 0, 1, 3)
        x = _dequantize(b, *_quantized_operand(n, 0))
        _quantize(b, build(b, n, x, facts), n.input(3), n.input(4), n.input(0), facts, n.outputs[0])
    return rewrite


def _sigmoid(b, n, x, facts):
    return b.op("Sigmoid", [x])


def _leaky_relu(b, n, x, facts):
    return b.op("LeakyRelu", [x], alpha=float(n.attr("alpha", 0.01)))


def _softmax(b, n, x, facts):
    """Softmax over `axis`; with the node's `opset` attribute below 13, the softmax of the
    input flattened to 2-D at `axis` (the older operator's meaning)."""
    axis = int(n.attr("axis", -1))
    if int(n.attr("opset", 13)) >= 13:
        return b.op("Softmax", [x], axis=axis)
    flat = b.op("Flatten", [x], axis=axis)
    return b.op("Reshape", [b.op("Softmax", [flat], axis=1), b.op("Shape", [x])])


def _channels_last_axes(n: NodeView, x: str, facts: GraphFacts) -> list[int]:
    rank = facts.ranks.get(n.input(0))
    if rank is None:
        raise n.refuse(f"channels_last pooling needs the rank of input '{n.input(0)}', which shape "
                       f"inference did not find")
    return list(range(1, rank - 1))


def _global_average_pool(b, n, x, facts):
    if not n.attr("channels_last", 0):
        return b.op("GlobalAveragePool", [x])
    return _reduce_mean(b, x, _channels_last_axes(n, x, facts), True, facts)


def _average_pool(b, n, x, facts):
    attrs = {k: v for k, v in n.attrs.items() if k != "channels_last"}
    attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
    if not n.attr("channels_last", 0):
        return b.op("AveragePool", [x], **attrs)
    rank = len(_channels_last_axes(n, x, facts)) + 2
    to_first = [0, rank - 1] + list(range(1, rank - 1))
    to_last = [0] + list(range(2, rank)) + [1]
    pooled = b.op("AveragePool", [b.op("Transpose", [x], perm=to_first)], **attrs)
    return b.op("Transpose", [pooled], perm=to_last)


def _reduce_mean_node(b, n, x, facts):
    axes = n.attr("axes")
    return _reduce_mean(b, x, None if axes is None else list(axes), bool(n.attr("keepdims", 1)), facts)


def _reduce_mean(b: NodeBuilder, x: str, axes: Optional[list], keepdims: bool, facts: GraphFacts) -> str:
    """ReduceMean in the model's opset (axes an attribute before 18, an input from 18)."""
    if axes is None:
        return b.op("ReduceMean", [x], keepdims=int(keepdims))
    if facts.opset >= 18:
        return b.op("ReduceMean", [x, b.const(axes, np.int64)], keepdims=int(keepdims))
    return b.op("ReduceMean", [x], axes=axes, keepdims=int(keepdims))


def _qlinear_concat(b: NodeBuilder, n: NodeView, facts: GraphFacts) -> None:
    """QLinearConcat(Y_scale, Y_zp, X1, X1_scale, X1_zp, X2, ...)."""
    _require(n, 0)
    if (len(n.inputs) - 2) % 3 or len(n.inputs) < 5:
        raise n.refuse(f"expects Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) triples; "
                       f"got {len(n.inputs)} inputs")
    parts = [_dequantize(b, *_quantized_operand(n, k)) for k in range(2, len(n.inputs), 3)]
    joined = b.op("Concat", parts, axis=int(n.attr("axis")))
    _quantize(b, joined, n.input(0), n.input(1), n.input(2), facts, n.outputs[0])


def _qlinear_where(b: NodeBuilder, n: NodeView, facts: GraphFacts) -> None:
    """QLinearWhere(condition, X, x_scale, x_zp, Y, y_scale, y_zp, z_scale, z_zp)."""
    _require(n, 0, 1, 2, 4, 5, 7)
    x = _dequantize(b, *_quantized_operand(n, 1))
    y = _dequantize(b, *_quantized_operand(n, 4))
    _quantize(b, b.op("Where", [n.input(0), x, y]), n.input(7), n.input(8), n.input(1), facts, n.outputs[0])


def _qgemm(b: NodeBuilder, n: NodeView, facts: GraphFacts) -> None:
    """QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp): alpha * (A'B' + C) with C an
    int32 bias at scale a_scale * b_scale (b_scale per tensor or per output column); quantized
    to y_scale/y_zp, or float where y_scale is absent."""
    _require(n, 0, 1, 3, 4)
    trans_a, trans_b = int(n.attr("transA", 0)), int(n.attr("transB", 0))
    a = _dequantize(b, *_quantized_operand(n, 0))
    per_column = _per_axis(facts, n.input(4))
    w = _dequantize(b, *_quantized_operand(n, 3), axis=(0 if trans_b else 1) if per_column else None)
    inputs = [a, w]
    alpha = float(n.attr("alpha", 1.0))
    if n.input(6):  # onnxruntime scales the int32 bias by alpha too: alpha * (A'B' + C)
        scale = b.op("Mul", [b.op("Mul", [n.input(1), n.input(4)]), b.const(alpha)])
        inputs.append(b.op("Mul", [b.op("Cast", [n.input(6)], to=F32), scale]))
    y_scale = n.input(7)
    gemm_out = None if y_scale else n.outputs[0]
    y = b.op("Gemm", inputs, output=gemm_out, alpha=alpha, transA=trans_a, transB=trans_b)
    if y_scale:
        _quantize(b, y, y_scale, n.input(8), n.input(0), facts, n.outputs[0])


def _size(facts: GraphFacts, name: str) -> Optional[int]:
    value = facts.constant(name)
    return None if value is None else int(value.size)


# -------------------------------------------------------------- integer matmuls to float


def _matmul_integer_to_float(b: NodeBuilder, n: NodeView, facts: GraphFacts) -> None:
    """MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zp, b_zp, bias)."""
    _require(n, 0, 1, 2, 3)
    _integer_product(b, n.input(0), n.input(1), n.input(4), n.input(5),
                     b.op("Mul", [n.input(2), n.input(3)]), n.input(6), n.outputs[0])


def _dynamic_quantize_matmul(b: NodeBuilder, n: NodeView, facts: GraphFacts) -> None:
    """DynamicQuantizeMatMul(A, B, b_scale, b_zp, bias): A quantized to uint8 per tensor on the
    fly (DynamicQuantizeLinear), then an exact integer product."""
    _require(n, 0, 1, 2)
    a_q, a_scale, a_zp = b.op_n("DynamicQuantizeLinear", [n.input(0)], 3)
    _integer_product(b, a_q, n.input(1), a_zp, n.input(3), b.op("Mul", [a_scale, n.input(2)]),
                     n.input(4), n.outputs[0])


def _integer_product(b: NodeBuilder, a: str, w: str, a_zp: Optional[str], w_zp: Optional[str],
                     scale: str, bias: Optional[str], output: str) -> None:
    inputs = [a, w] + ([a_zp or "", w_zp] if w_zp else [a_zp] if a_zp else [])
    product = b.op("Cast", [b.op("MatMulInteger", inputs)], to=F32)
    scaled = b.op("Mul", [product, scale], output=None if bias else output)
    if bias:
        b.op("Add", [scaled, bias], output=output)


# ------------------------------------------------------------------------------ MatMulNBits


def _matmul_nbits(b: NodeBuilder, n: NodeView, facts: GraphFacts) -> None:
    """MatMulNBits(A, B, scales, zero_points, g_idx, bias): Y = A @ dequantize(B)^T + bias."""
    _require(n, 0, 1, 2)
    if int(n.attr("accuracy_level", 0)) == 4:
        raise n.refuse("accuracy_level 4 (onnxruntime quantizes A to int8 per block) is not supported; "
                       "quantize with accuracy_level 0 (A's float type)")
    weight = _nbits_weight(n, facts)
    w_name = facts.add_initializer(weight, f"{n.name}/dequantized_weight")
    y = b.op("MatMul", [n.input(0), w_name], output=None if n.input(5) else n.outputs[0])
    if n.input(5):
        b.op("Add", [y, n.input(5)], output=n.outputs[0])


def _nbits_weight(n: NodeView, facts: GraphFacts) -> np.ndarray:
    """The [K, N] float weight of a MatMulNBits node whose B, scales and zero points are
    initializers."""
    k, cols, bits, block = (int(n.attr(a, 0)) for a in ("K", "N", "bits", "block_size"))
    bits = bits or 4
    if bits not in (2, 3, 4, 5, 6, 7, 8) or block < 16 or block & (block - 1):
        raise n.refuse(f"bits={bits}, block_size={block}: expected 2-8 bits and a power-of-two block of "
                       f"at least 16")
    packed, scales = facts.constant(n.input(1)), facts.constant(n.input(2))
    if packed is None or scales is None:
        raise n.refuse("B and scales must be initializers (the weight is decoded at compile time)")
    g_idx = facts.constant(n.input(4))
    blocks = -(-k // block)
    if g_idx is not None and not np.array_equal(g_idx.reshape(-1), np.arange(k) // block):
        raise n.refuse("a g_idx that reorders K (act-order) is not supported")
    if packed.dtype != np.uint8 or packed.size != cols * blocks * block * bits // 8:
        raise n.refuse(f"B holds {packed.size} {packed.dtype} values; K={k}, N={cols}, bits={bits}, "
                       f"block_size={block} need uint8 [{cols}, {blocks}, {block * bits // 8}]")
    codes = _unpack_low_first(packed.reshape(cols, blocks * block * bits // 8), bits, blocks * block)
    scales = scales.reshape(cols, blocks)
    zero_points = _nbits_zero_points(n, facts, cols, blocks, bits)
    per_block = (codes.reshape(cols, blocks, block).astype(np.float32) - zero_points[:, :, None]) \
        * scales.astype(np.float32)[:, :, None]
    weight = per_block.reshape(cols, blocks * block)[:, :k]
    return np.ascontiguousarray(weight.T).astype(scales.dtype)


def _unpack_low_first(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Rows of bytes holding `bits`-bit codes, the first code in the lowest bits."""
    as_bits = np.unpackbits(packed, axis=1, bitorder="little")[:, :count * bits]
    weights = (1 << np.arange(bits)).astype(np.int32)
    return (as_bits.reshape(packed.shape[0], count, bits).astype(np.int32) * weights).sum(-1)


def _nbits_zero_points(n: NodeView, facts: GraphFacts, cols: int, blocks: int, bits: int) -> np.ndarray:
    """[N, blocks] float zero points: packed uint8 codes (like B's), float values, or the
    middle code 2^(bits-1) where absent."""
    if n.input(3) is None:
        return np.full((cols, blocks), float(1 << (bits - 1)), np.float32)
    zp = facts.constant(n.input(3))
    if zp is None:
        raise n.refuse("zero_points must be an initializer (the weight is decoded at compile time)")
    if zp.dtype != np.uint8:
        return zp.reshape(cols, blocks).astype(np.float32)
    row_bytes = -(-blocks * bits // 8)
    return _unpack_low_first(zp.reshape(cols, row_bytes), bits, blocks).astype(np.float32)


# ---------------------------------------------------------------------- DynamicQuantizeLSTM


def _dynamic_quantize_lstm(b: NodeBuilder, n: NodeView, facts: GraphFacts) -> None:
    """DynamicQuantizeLSTM(X, W, R, B, seq, h0, c0, P, W_scale, W_zp, R_scale, R_zp) as an LSTM
    on weights dequantized here ([dirs, in, 4h] int8 -> LSTM's [dirs, 4h, in] float)."""
    _require(n, 0, 1, 2, 8, 9, 10, 11)
    weights = []
    for q, scale, zp in ((1, 8, 9), (2, 10, 11)):
        values = [facts.constant(n.input(k)) for k in (q, scale, zp)]
        if any(v is None for v in values):
            raise n.refuse("weights and their quantization parameters must be initializers")
        weights.append(facts.add_initializer(_dequantize_lstm_weight(*values), f"{n.name}/{n.input(q)}_dequantized"))
    inputs = [n.input(0), *weights] + [n.input(k) or "" for k in range(3, 8)]
    while not inputs[-1]:
        inputs.pop()
    lstm = helper.make_node("LSTM", inputs, n.outputs, name=n.name)
    lstm.attribute.extend(n.proto.attribute)
    b.nodes.append(lstm)


def _dequantize_lstm_weight(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    dirs = q.shape[0]
    scale = scale.reshape(dirs, 1, -1).astype(np.float32)
    zero_point = zero_point.reshape(dirs, 1, -1).astype(np.float32)
    return np.ascontiguousarray(((q.astype(np.float32) - zero_point) * scale).transpose(0, 2, 1))


# ------------------------------------------------------- standard QLinearConv, QLinearMatMul


def _per_axis(facts: GraphFacts, scale: str) -> bool:
    """Whether a scale holds more than one value (per channel, row or column)."""
    size = _size(facts, scale)
    return size != 1 if size is not None else facts.ranks.get(scale, 0) == 1


def _qlinear_conv(b: NodeBuilder, n: NodeView, facts: GraphFacts) -> None:
    """QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B): a Conv of the
    dequantized operands (w per output channel where w_scale is a vector), the int32 bias B at
    scale x_scale * w_scale, quantized to y_scale/y_zp."""
    _require(n, 0, 1, 3, 4, 6)
    x = _dequantize(b, *_quantized_operand(n, 0))
    w = _dequantize(b, *_quantized_operand(n, 3), axis=0 if _per_axis(facts, n.input(4)) else None)
    inputs = [x, w]
    if n.input(8):
        scale = b.op("Mul", [n.input(1), n.input(4)])
        inputs.append(b.op("Mul", [b.op("Cast", [n.input(8)], to=F32), scale]))
    y = b.op("Conv", inputs, **{k: n.attr(k) for k in n.attrs})
    _quantize(b, y, n.input(6), n.input(7), n.input(0), facts, n.outputs[0])


def _qlinear_matmul(b: NodeBuilder, n: NodeView, facts: GraphFacts) -> None:
    """QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): a MatMul of the
    dequantized operands (a per row, b per column where their scales are vectors)."""
    _require(n, 0, 1, 3, 4, 6)
    operands = []
    for first, from_end in ((0, 2), (3, 1)):
        axis = None
        if _per_axis(facts, n.input(first + 1)):
            rank = facts.ranks.get(n.input(first))
            if rank is None:
                raise n.refuse(f"a per-axis scale needs the rank of input '{n.input(first)}', which shape "
                               f"inference did not find")
            axis = rank - from_end
        operands.append(_dequantize(b, *_quantized_operand(n, first), axis=axis))
    _quantize(b, b.op("MatMul", operands), n.input(6), n.input(7), n.input(0), facts, n.outputs[0])


# ------------------------------------------------------------------- unsigned order ops


UNSIGNED = {TensorProto.UINT8: np.uint8, TensorProto.UINT16: np.uint16}


def _in_float_if_unsigned(b: NodeBuilder, n: NodeView, facts: GraphFacts):
    """MaxPool/Clip over uint8/uint16 computed in float32 (exact for every such value) and cast
    back; False (node kept) for other types."""
    elem = facts.types.get(n.input(0))
    if elem not in UNSIGNED:
        return False
    inputs = [b.op("Cast", [name], to=F32) if name else "" for name in n.inputs]
    op_type = n.proto.op_type
    attrs = {k: n.attr(k) for k in n.attrs}
    if len(n.outputs) > 1 and n.outputs[1]:  # MaxPool's Indices keep their meaning
        value, indices = b.op_n(op_type, inputs, 2, **attrs)
        b.op("Identity", [indices], output=n.outputs[1])
    else:
        value = b.op(op_type, inputs, **attrs)
    as_int = b.op("Cast", [value], to=TensorProto.INT32)  # float -> uint8 directly saturates at 127
    b.op("Cast", [as_int], output=n.outputs[0], to=elem)


# ------------------------------------------------------------------------------- Q and DQ


def _standard(op_type: str) -> Callable:
    """The contrib domain's QuantizeLinear/DequantizeLinear: the standard op, same inputs."""

    def rewrite(b: NodeBuilder, n: NodeView, facts: GraphFacts) -> None:
        attrs = {k: v for k, v in n.attrs.items() if k == "axis"}
        b.nodes.append(helper.make_node(op_type, n.inputs, n.outputs, name=n.name, **attrs))
    return rewrite


REWRITES: dict[tuple[str, str], Callable] = {
    (CONTRIB, "QLinearAdd"): _qlinear_binary("Add"),
    (CONTRIB, "QLinearMul"): _qlinear_binary("Mul"),
    (CONTRIB, "QLinearSigmoid"): _qlinear_unary(_sigmoid),
    (CONTRIB, "QLinearLeakyRelu"): _qlinear_unary(_leaky_relu),
    (CONTRIB, "QLinearSoftmax"): _qlinear_unary(_softmax),
    (CONTRIB, "QLinearGlobalAveragePool"): _qlinear_unary(_global_average_pool),
    (CONTRIB, "QLinearAveragePool"): _qlinear_unary(_average_pool),
    (CONTRIB, "QLinearReduceMean"): _qlinear_unary(_reduce_mean_node),
    (CONTRIB, "QLinearConcat"): _qlinear_concat,
    (CONTRIB, "QLinearWhere"): _qlinear_where,
    (CONTRIB, "QGemm"): _qgemm,
    (CONTRIB, "MatMulIntegerToFloat"): _matmul_integer_to_float,
    (CONTRIB, "DynamicQuantizeMatMul"): _dynamic_quantize_matmul,
    (CONTRIB, "MatMulNBits"): _matmul_nbits,
    (CONTRIB, "DynamicQuantizeLSTM"): _dynamic_quantize_lstm,
    (CONTRIB, "QuantizeLinear"): _standard("QuantizeLinear"),
    (CONTRIB, "DequantizeLinear"): _standard("DequantizeLinear"),
    ("", "QLinearConv"): _qlinear_conv,
    ("", "QLinearMatMul"): _qlinear_matmul,
}
# After those: the element types of their outputs are known to shape inference only then.
AFTER_REWRITES: dict[tuple[str, str], Callable] = {
    ("", "MaxPool"): _in_float_if_unsigned,
    ("", "Clip"): _in_float_if_unsigned,
}
