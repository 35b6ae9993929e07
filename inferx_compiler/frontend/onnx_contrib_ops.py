"""onnxruntime's fused float operators (`com.microsoft`) rewritten in standard ONNX before import.

A model saved by onnxruntime's graph optimizer (`SessionOptions.optimized_model_filepath`) or
its transformers optimizer holds fusions of its own that no lowering takes. The ones covered
here are written back as the standard ops they fuse:

- `Gelu` (erf form), `FastGelu` (tanh form, optional bias), `BiasGelu`, `QuickGelu`
  (x * sigmoid(alpha * x));
- `SkipLayerNormalization` (input + skip [+ bias], then LayerNormalization over the last axis;
  its optional outputs mean, inverse standard deviation and the sum are given too) and
  `SkipSimplifiedLayerNormalization` / `SimplifiedLayerNormalization` (RMS normalization);
- `FusedMatMul` (MatMul with transposes of either operand's last two axes and a scale alpha).

Quantized contrib ops are `onnx_quantized_ops`'s. Other contrib ops (Attention,
MultiHeadAttention, EmbedLayerNormalization...) are left for the import's check, which names them.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np
import onnx

from inferx_compiler.frontend.onnx_builder import GraphFacts, NodeBuilder, NodeView
from inferx_compiler.frontend.onnx_rewrites import replace_nodes

CONTRIB = "com.microsoft"


def decompose_contrib_ops(model: onnx.ModelProto) -> list[str]:
    """Rewrite, in place, the main graph's contrib nodes that `REWRITES` covers; returns the
    names of the nodes rewritten."""
    graph = model.graph
    if not any(n.domain == CONTRIB and n.op_type in REWRITES for n in graph.node):
        return []
    facts = GraphFacts(model)

    def rewrite(node: onnx.NodeProto) -> Optional[list]:
        if node.domain != CONTRIB or node.op_type not in REWRITES:
            return None
        b = NodeBuilder(node)
        REWRITES[node.op_type](b, NodeView(node), facts)
        return b.nodes
    return replace_nodes(graph, rewrite)


# ------------------------------------------------------------------------------- activations


class _Consts:
    """Constants in the element type of the value they combine with (float16 models stay so)."""

    def __init__(self, b: NodeBuilder, like: str, facts: GraphFacts):
        self.b = b
        self.dtype = onnx.helper.tensor_dtype_to_np_dtype(facts.types.get(like, onnx.TensorProto.FLOAT))

    def __call__(self, value) -> str:
        return self.b.const(value, self.dtype)


def _erf_gelu(b: NodeBuilder, x: str, c: _Consts, output: Optional[str]) -> str:
    """0.5 x (1 + erf(x / sqrt 2))."""
    erf = b.op("Erf", [b.op("Div", [x, c(math.sqrt(2.0))])])
    half_x = b.op("Mul", [x, c(0.5)])
    return b.op("Mul", [half_x, b.op("Add", [erf, c(1.0)])], output=output)


def _gelu(b, n, facts):
    _erf_gelu(b, n.input(0), _Consts(b, n.input(0), facts), n.outputs[0])


def _bias_gelu(b, n, facts):
    _erf_gelu(b, b.op("Add", [n.input(0), n.input(1)]), _Consts(b, n.input(0), facts), n.outputs[0])


def _fast_gelu(b, n, facts):
    """0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), x plus the optional bias."""
    c = _Consts(b, n.input(0), facts)
    x = n.input(0) if n.input(1) is None else b.op("Add", [n.input(0), n.input(1)])
    cube = b.op("Mul", [b.op("Mul", [x, x]), x])
    inner = b.op("Add", [x, b.op("Mul", [cube, c(0.044715)])])
    tanh = b.op("Tanh", [b.op("Mul", [inner, c(math.sqrt(2.0 / math.pi))])])
    b.op("Mul", [b.op("Mul", [x, c(0.5)]), b.op("Add", [tanh, c(1.0)])], output=n.outputs[0])


def _quick_gelu(b, n, facts):
    x = n.input(0)
    scaled = b.op("Mul", [x, _Consts(b, x, facts)(float(n.attr("alpha", 1.702)))])
    b.op("Mul", [x, b.op("Sigmoid", [scaled])], output=n.outputs[0])


# --------------------------------------------------------------------------- normalizations


def _mean_last(b: NodeBuilder, x: str, facts: GraphFacts) -> str:
    if facts.opset >= 18:
        return b.op("ReduceMean", [x, b.const([-1], np.int64)], keepdims=1)
    return b.op("ReduceMean", [x], axes=[-1], keepdims=1)


def _output(n: NodeView, k: int) -> Optional[str]:
    return n.outputs[k] if k < len(n.outputs) and n.outputs[k] else None


def _normalize(b: NodeBuilder, n: NodeView, x: str, gamma: str, beta: Optional[str], facts: GraphFacts,
               centered: bool, mean_output: int, inv_std_output: int, epsilon: float) -> None:
    """LayerNormalization (centered) or RMS normalization over the last axis, in float32
    arithmetic, with the optional mean and inverse-standard-deviation outputs. `epsilon`: the
    op's default where the node has none (1e-12 for the Skip forms, 1e-5 otherwise)."""
    eps = _Consts(b, x, facts)(float(n.attr("epsilon", epsilon)))
    if centered:
        mean = _mean_last(b, x, facts)
        if _output(n, mean_output):
            b.op("Identity", [mean], output=_output(n, mean_output))
        x = b.op("Sub", [x, mean])
    variance = _mean_last(b, b.op("Mul", [x, x]), facts)
    inv_std = b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [variance, eps])])])
    if _output(n, inv_std_output):
        b.op("Identity", [inv_std], output=_output(n, inv_std_output))
    scaled = b.op("Mul", [b.op("Mul", [x, inv_std]), gamma], output=None if beta else n.outputs[0])
    if beta:
        b.op("Add", [scaled, beta], output=n.outputs[0])


def _skip_sum(b: NodeBuilder, n: NodeView, bias_input: int, sum_output: int) -> str:
    total = b.op("Add", [n.input(0), n.input(1)])
    if n.input(bias_input):
        total = b.op("Add", [total, n.input(bias_input)])
    if _output(n, sum_output):
        b.op("Identity", [total], output=_output(n, sum_output))
    return total


def _skip_layer_norm(b, n, facts):
    """SkipLayerNormalization(input, skip, gamma, beta, bias) -> output, mean, inv_std, sum."""
    total = _skip_sum(b, n, 4, 3)
    _normalize(b, n, total, n.input(2), n.input(3), facts, centered=True, mean_output=1, inv_std_output=2, epsilon=1e-12)


def _skip_simplified_layer_norm(b, n, facts):
    """SkipSimplifiedLayerNormalization(input, skip, gamma, bias) -> output, mean (unused),
    inv_std, sum."""
    total = _skip_sum(b, n, 3, 3)
    _normalize(b, n, total, n.input(2), None, facts, centered=False, mean_output=1, inv_std_output=2,
               epsilon=1e-12)


def _simplified_layer_norm(b, n, facts):
    """SimplifiedLayerNormalization(X, scale) over axis -1 -> Y, inv_std."""
    axis = int(n.attr("axis", -1))
    rank = facts.ranks.get(n.input(0))
    if axis != -1 and (rank is None or axis != rank - 1):
        raise n.refuse(f"normalization over axis {axis} (only the last axis is supported)")
    _normalize(b, n, n.input(0), n.input(1), None, facts, centered=False, mean_output=-1, inv_std_output=1,
               epsilon=1e-5)


# ------------------------------------------------------------------------------- FusedMatMul


def _fused_matmul(b, n, facts):
    """FusedMatMul(A, B): alpha * (A or its last two axes swapped) @ (B likewise)."""
    if n.attr("transBatchA", 0) or n.attr("transBatchB", 0):
        raise n.refuse("transBatchA/transBatchB are not supported")
    operands = []
    for k, flag in ((0, "transA"), (1, "transB")):
        x = n.input(k)
        if n.attr(flag, 0):
            rank = facts.ranks.get(x)
            if rank is None:
                raise n.refuse(f"{flag} needs the rank of input '{x}', which shape inference did not find")
            x = b.op("Transpose", [x], perm=list(range(rank - 2)) + [rank - 1, rank - 2])
        operands.append(x)
    alpha = float(n.attr("alpha", 1.0))
    product = b.op("MatMul", operands, output=n.outputs[0] if alpha == 1.0 else None)
    if alpha != 1.0:
        b.op("Mul", [product, _Consts(b, n.input(0), facts)(alpha)], output=n.outputs[0])


REWRITES: dict[str, Callable] = {
    "Gelu": _gelu,
    "BiasGelu": _bias_gelu,
    "FastGelu": _fast_gelu,
    "QuickGelu": _quick_gelu,
    "SkipLayerNormalization": _skip_layer_norm,
    "SkipSimplifiedLayerNormalization": _skip_simplified_layer_norm,
    "SimplifiedLayerNormalization": _simplified_layer_norm,
    "FusedMatMul": _fused_matmul,
}
