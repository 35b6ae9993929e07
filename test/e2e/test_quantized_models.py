"""Quantized models as onnxruntime's tools write them (frontend/onnx_quantized_ops.py,
frontend/onnx_contrib_ops.py, tools/corpus/quantized_zoo.py).

Three layers: each rewrite of a contrib op means what onnxruntime's kernel computes (both run
in onnxruntime, no compiler involved); the compiler bugs found on the way stay fixed (exact
integer results against onnx's reference implementation); and a sample of the quantized zoo
compiles with no flags and matches onnxruntime."""

from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from inferx_compiler.frontend.onnx_contrib_ops import decompose_contrib_ops
from inferx_compiler.frontend.onnx_quantized_ops import decompose_quantized_ops
from helpers import rel_l2

ort = pytest.importorskip("onnxruntime")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "corpus"))
import quantized_zoo as zoo  # noqa: E402

MS = "com.microsoft"
RS = np.random.RandomState(0)


def _f(value, name):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def _u8(value, name):
    return numpy_helper.from_array(np.asarray(value, np.uint8), name)


def _model(nodes, inputs, outputs, inits, opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])


def _ort(model, feeds, optimize=True):
    options = ort.SessionOptions()
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)


def _u8_input(name, shape):
    return helper.make_tensor_value_info(name, T.UINT8, shape)


def _out(name, elem=T.UINT8):
    return helper.make_tensor_value_info(name, elem, None)


# --------------------------------------------------- the rewrites mean what onnxruntime computes

X_Q = [_f(0.031, "xs"), _u8(121, "xz"), _f(0.027, "bs"), _u8(97, "bz"), _f(0.045, "ys"), _u8(110, "yz")]


def _qlinear_cases():
    """(name, contrib node(s), inputs, initializers, output elem, feeds)."""
    a = RS.randint(0, 256, (2, 6, 5, 5)).astype(np.uint8)
    b_ = RS.randint(0, 256, (2, 6, 5, 5)).astype(np.uint8)
    cond = RS.rand(2, 6, 5, 5) > 0.5
    w_u8 = RS.randint(0, 256, (16, 12)).astype(np.uint8)
    bias = RS.randint(-300, 300, (12,)).astype(np.int32)
    a2 = RS.randint(0, 256, (4, 16)).astype(np.uint8)
    f4 = RS.randn(2, 6, 5, 5).astype(np.float32)
    img = [_u8_input("a", [2, 6, 5, 5])]
    feeds = {"a": a}
    cases = [
        ("QLinearAdd", [helper.make_node("QLinearAdd", ["a", "xs", "xz", "b", "bs", "bz", "ys", "yz"], ["y"], domain=MS)],
         img + [_u8_input("b", [2, 6, 5, 5])], X_Q, {"a": a, "b": b_}),
        ("QLinearMul", [helper.make_node("QLinearMul", ["a", "xs", "xz", "b", "bs", "bz", "ys", "yz"], ["y"], domain=MS)],
         img + [_u8_input("b", [2, 6, 5, 5])], X_Q, {"a": a, "b": b_}),
        ("QLinearSigmoid", [helper.make_node("QLinearSigmoid", ["a", "xs", "xz", "ys", "yz"], ["y"], domain=MS)], img, X_Q, feeds),
        ("QLinearLeakyRelu", [helper.make_node("QLinearLeakyRelu", ["a", "xs", "xz", "ys", "yz"], ["y"], domain=MS, alpha=0.2)],
         img, X_Q, feeds),
        ("QLinearSoftmax", [helper.make_node("QLinearSoftmax", ["a", "xs", "xz", "ys", "yz"], ["y"], domain=MS, axis=-1,
                                             opset=13)], img, [_f(0.031, "xs"), _u8(121, "xz"), _f(1 / 256, "ys"), _u8(0, "yz")], feeds),
        ("QLinearConcat", [helper.make_node("QLinearConcat", ["ys", "yz", "a", "xs", "xz", "b", "bs", "bz"], ["y"], domain=MS, axis=1)],
         img + [_u8_input("b", [2, 6, 5, 5])], X_Q, {"a": a, "b": b_}),
        ("QLinearGlobalAveragePool", [helper.make_node("QLinearGlobalAveragePool", ["a", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
                                                       channels_last=0)], img, X_Q, feeds),
        ("QLinearGlobalAveragePool channels_last", [helper.make_node("QLinearGlobalAveragePool", ["a", "xs", "xz", "ys", "yz"], ["y"],
                                                                     domain=MS, channels_last=1)], img, X_Q, feeds),
        ("QLinearAveragePool", [helper.make_node("QLinearAveragePool", ["a", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
                                                 kernel_shape=[2, 2], strides=[1, 2], pads=[1, 0, 0, 1])], img, X_Q, feeds),
        ("QLinearWhere", [helper.make_node("QLinearWhere", ["c", "a", "xs", "xz", "b", "bs", "bz", "ys", "yz"], ["y"], domain=MS)],
         img + [_u8_input("b", [2, 6, 5, 5]), helper.make_tensor_value_info("c", T.BOOL, [2, 6, 5, 5])], X_Q,
         {"a": a, "b": b_, "c": cond}),
        ("QGemm", [helper.make_node("QGemm", ["a", "xs", "xz", "w", "bs", "bz", "bias", "ys", "yz"], ["y"], domain=MS, alpha=0.5)],
         [_u8_input("a", [4, 16])], X_Q + [numpy_helper.from_array(w_u8, "w"), numpy_helper.from_array(bias, "bias")], {"a": a2}),
        ("QGemm float out, transB", [helper.make_node("QGemm", ["a", "xs", "xz", "wt", "bs", "bz"], ["y"], domain=MS, transB=1)],
         [_u8_input("a", [4, 16])], X_Q + [numpy_helper.from_array(np.ascontiguousarray(w_u8.T), "wt")], {"a": a2}),
        ("DynamicQuantizeMatMul", [helper.make_node("DynamicQuantizeMatMul", ["f", "w", "bs", "bz", "fb"], ["y"], domain=MS)],
         [helper.make_tensor_value_info("f", T.FLOAT, [4, 16])],
         X_Q + [numpy_helper.from_array(w_u8, "w"), _f(RS.randn(12), "fb")], {"f": RS.randn(4, 16).astype(np.float32)}),
        ("MatMulIntegerToFloat", [helper.make_node("MatMulIntegerToFloat", ["a", "w", "xs", "bs", "xz", "bz"], ["y"], domain=MS)],
         [_u8_input("a", [4, 16])], X_Q + [numpy_helper.from_array(w_u8, "w")], {"a": a2}),
        ("Gelu", [helper.make_node("Gelu", ["f"], ["y"], domain=MS)], [helper.make_tensor_value_info("f", T.FLOAT, [2, 6, 5, 5])],
         [], {"f": f4}),
        ("FastGelu", [helper.make_node("FastGelu", ["f", "fb"], ["y"], domain=MS)],
         [helper.make_tensor_value_info("f", T.FLOAT, [2, 6, 5, 5])], [_f(RS.randn(5), "fb")], {"f": f4}),
        ("BiasGelu", [helper.make_node("BiasGelu", ["f", "fb"], ["y"], domain=MS)],
         [helper.make_tensor_value_info("f", T.FLOAT, [2, 6, 5, 5])], [_f(RS.randn(5), "fb")], {"f": f4}),
        ("QuickGelu", [helper.make_node("QuickGelu", ["f"], ["y"], domain=MS, alpha=1.5)],
         [helper.make_tensor_value_info("f", T.FLOAT, [2, 6, 5, 5])], [], {"f": f4}),
        ("SkipLayerNormalization", [helper.make_node("SkipLayerNormalization", ["f", "s", "g", "be", "fb"], ["y", "", "", "sum"],
                                                     domain=MS, epsilon=1e-3)],
         [helper.make_tensor_value_info(n, T.FLOAT, [2, 6, 5]) for n in ("f", "s")],
         [_f(RS.rand(5) + 0.5, "g"), _f(RS.randn(5), "be"), _f(RS.randn(5), "fb")],
         {"f": RS.randn(2, 6, 5).astype(np.float32), "s": RS.randn(2, 6, 5).astype(np.float32)}),
        ("SkipSimplifiedLayerNormalization", [helper.make_node("SkipSimplifiedLayerNormalization", ["f", "s", "g"], ["y"], domain=MS)],
         [helper.make_tensor_value_info(n, T.FLOAT, [2, 6, 5]) for n in ("f", "s")], [_f(RS.rand(5) + 0.5, "g")],
         {"f": RS.randn(2, 6, 5).astype(np.float32), "s": RS.randn(2, 6, 5).astype(np.float32)}),
        ("FusedMatMul", [helper.make_node("FusedMatMul", ["f", "s"], ["y"], domain=MS, transA=1, alpha=0.25)],
         [helper.make_tensor_value_info("f", T.FLOAT, [2, 5, 6]), helper.make_tensor_value_info("s", T.FLOAT, [2, 5, 3])], [],
         {"f": RS.randn(2, 5, 6).astype(np.float32), "s": RS.randn(2, 5, 3).astype(np.float32)}),
    ]
    return cases


CASES = _qlinear_cases()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rewrite_computes_what_onnxruntime_computes(case):
    """The contrib node in onnxruntime against its rewrite, also in onnxruntime (without graph
    optimizations, so the standard ops run as written): a quantized output within one unit
    (onnxruntime's lookup tables and fixed point round their own way) and mostly exact, a float
    output within float rounding."""
    name, nodes, inputs, inits, feeds = case
    quantized = not name.startswith(("Gelu", "FastGelu", "BiasGelu", "QuickGelu", "Skip", "Fused")) \
        and "float out" not in name and name not in ("DynamicQuantizeMatMul", "MatMulIntegerToFloat")
    outputs = [_out(o, T.UINT8 if quantized else T.FLOAT) for o in nodes[-1].output if o]
    model = _model(nodes, inputs, outputs, inits)
    expected = _ort(model, feeds)
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    rewritten_names = decompose_contrib_ops(rewritten) + decompose_quantized_ops(rewritten)
    assert rewritten_names == [n.name for n in model.graph.node]
    assert not [n for n in rewritten.graph.node if n.domain == MS], "a contrib node was left"
    got = _ort(rewritten, feeds, optimize=False)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        if quantized:
            steps = np.abs(g.astype(np.int64) - e.astype(np.int64))
            assert steps.max() <= 1 and np.mean(steps > 0) < 0.02, (name, steps.max(), np.mean(steps > 0))
        else:
            assert rel_l2(g, e) < 1e-6, (name, rel_l2(g, e))


@pytest.mark.parametrize("bits,symmetric,k", [(4, True, 64), (4, False, 80), (8, False, 64)])
def test_matmul_nbits_weight_is_decoded_as_onnxruntime_reads_it(bits, symmetric, k):
    """A MatMulNBits of packed codes (K not a multiple of the block where k=80) against
    onnxruntime's kernel: the decoded float weight gives its product to float rounding."""
    n, block = 12, 32
    blocks = -(-k // block)
    codes = RS.randint(0, 1 << bits, (n, blocks * block))
    packed = _pack_low_first(codes, bits).reshape(n, blocks, block * bits // 8)
    scales = (RS.rand(n, blocks) * 0.1 + 0.01).astype(np.float32)
    inputs = ["a", "b", "scales"]
    inits = [numpy_helper.from_array(packed, "b"), numpy_helper.from_array(scales.reshape(-1), "scales")]
    if not symmetric:
        zp = RS.randint(0, 1 << bits, (n, blocks))
        inits.append(numpy_helper.from_array(_pack_low_first(zp, bits).reshape(-1), "zp"))
        inputs.append("zp")
    node = helper.make_node("MatMulNBits", inputs, ["y"], domain=MS, K=k, N=n, bits=bits, block_size=block)
    model = _model([node], [helper.make_tensor_value_info("a", T.FLOAT, [3, k])], [_out("y", T.FLOAT)], inits)
    feeds = {"a": RS.randn(3, k).astype(np.float32)}
    expected = _ort(model, feeds)[0]
    decompose_quantized_ops(model)
    assert [x.op_type for x in model.graph.node] == ["MatMul"]
    assert rel_l2(_ort(model, feeds, optimize=False)[0], expected) < 1e-6


def _pack_low_first(codes: np.ndarray, bits: int) -> np.ndarray:
    """Rows of `bits`-bit codes packed into bytes, the first code in the lowest bits."""
    rows = codes.shape[0]
    per_row = -(-codes.shape[1] * bits // 8)
    as_bits = ((codes[..., None] >> np.arange(bits)) & 1).reshape(rows, -1)
    as_bits = np.pad(as_bits, ((0, 0), (0, per_row * 8 - as_bits.shape[1])))
    return np.packbits(as_bits.astype(np.uint8), axis=1, bitorder="little")


def test_accuracy_level_4_is_refused_naming_the_node():
    node = helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], name="proj", domain=MS, K=32, N=4, bits=4,
                            block_size=32, accuracy_level=4)
    model = _model([node], [helper.make_tensor_value_info("a", T.FLOAT, [1, 32])], [_out("y", T.FLOAT)],
                   [numpy_helper.from_array(np.zeros((4, 1, 16), np.uint8), "b"), _f(np.ones(4), "s")])
    with pytest.raises(Exception, match=r"node 'proj' \(op_type=MatMulNBits.*accuracy_level 4"):
        decompose_quantized_ops(model)


# ----------------------------------------------------------- the reference on saturating hosts


def test_reencoded_int8_weights_give_onnxruntime_the_exact_product():
    """quantized_zoo's reference: int8 weights re-encoded as uint8 (w + 128, zp + 128) keep the
    real values, so onnxruntime's product equals the exact integer one on every host (on AVX2
    without VNNI its uint8 x int8 kernel saturates pairs of products at int16)."""
    w = RS.randint(-128, 128, (64, 24)).astype(np.int8)
    node = helper.make_node("MatMulInteger", ["a", "w", "", "wz"], ["y"])
    model = _model([node], [_u8_input("a", [5, 64])], [_out("y", T.INT32)],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(3, np.int8), "wz")])
    a = RS.randint(200, 256, (5, 64)).astype(np.uint8)  # large activations: where saturation bites
    assert zoo.reencode_int8_weights(model) == 1
    exact = a.astype(np.int64) @ (w.astype(np.int64) - 3)
    np.testing.assert_array_equal(_ort(model, {"a": a})[0], exact)


# ----------------------------------------------------------- compiler bugs that stay fixed


def _compile_and_run(model, feeds, tmp_path):
    import inferx_compiler as ix

    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    ix.compile_onnx(str(path), "cpu", str(tmp_path / "m.ixa"))
    got = ix.load(str(tmp_path / "m.ixa"), device="cpu").run(feeds)
    return list(got.values()) if isinstance(got, dict) else list(got)


def _reference(model, feeds):
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, feeds)


def test_uint8_max_pool_and_clip_compare_unsigned(tmp_path):
    """torch-mlir compared uint8 values as signed: MaxPool picked 67 over 251."""
    nodes = [helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Clip", ["a", "lo", "hi"], ["c"])]
    model = _model(nodes, [_u8_input("a", [1, 2, 4, 4])], [_out("p"), _out("c")], [_u8(40, "lo"), _u8(200, "hi")], opset=19)
    feeds = {"a": RS.randint(0, 256, (1, 2, 4, 4)).astype(np.uint8)}
    for got, want in zip(_compile_and_run(model, feeds, tmp_path), _reference(model, feeds)):
        np.testing.assert_array_equal(got, want)


def test_quantize_rounds_the_quotient_not_a_product_by_the_reciprocal(tmp_path):
    """round(x / scale): 3.1413999 / 0.0452 is 69.49999 in float32, 69.5 as x * (1 / 0.0452);
    onnx and onnxruntime give 69 (+ zero point 117 = 186)."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [2])], [_out("y")], [_f(0.0452, "s"), _u8(117, "z")],
                   opset=19)
    feeds = {"x": np.array([3.1413999, -1.0], np.float32)}
    (got,) = _compile_and_run(model, feeds, tmp_path)
    np.testing.assert_array_equal(got, _reference(model, feeds)[0])
    assert got[0] == 186


def test_product_of_dequantized_activations_with_a_dynamic_batch(tmp_path):
    """DequantizeLinear pairs into a MatMul of dynamic batch became IREE's
    quantized_batch_matmul, 23% off at zero point 37."""
    inits = [_f(0.05, "s"), _u8(37, "z")]
    nodes = [helper.make_node("Transpose", ["b"], ["bt"], perm=[0, 1, 3, 2]),
             helper.make_node("DequantizeLinear", ["a", "s", "z"], ["ad"]),
             helper.make_node("DequantizeLinear", ["bt", "s", "z"], ["bd"]), helper.make_node("MatMul", ["ad", "bd"], ["y"])]
    model = _model(nodes, [_u8_input("a", ["n", 4, 12, 16]), _u8_input("b", ["n", 4, 12, 16])], [_out("y", T.FLOAT)], inits,
                   opset=19)
    feeds = {k: RS.randint(0, 256, (2, 4, 12, 16)).astype(np.uint8) for k in "ab"}
    (got,) = _compile_and_run(model, feeds, tmp_path)
    assert rel_l2(got, _reference(model, feeds)[0]) < 1e-6


# ------------------------------------------------------------------- the quantized zoo, sampled


@pytest.mark.parametrize("model,recipe", [
    ("cnn", "static-qoperator-channel"),  # QLinearConv per channel, QLinearAdd/Mul/Sigmoid, uint8 MaxPool, QGemm
    ("encoder", "static-qdq"),  # Q/DQ around attention: dequantized activations multiplied, dynamic batch
    # MatMulInteger with int8 weights: the saturation-free reference (its own test above runs in CI)
    pytest.param("mlp", "dynamic-s8", marks=pytest.mark.slow),
    ("encoder", "ort-fused"),  # DynamicQuantizeMatMul, Gelu, SkipLayerNormalization from onnxruntime's optimizer
])
def test_zoo_sample_compiles_with_no_flags_and_matches_onnxruntime(model, recipe, tmp_path):
    pytest.importorskip("torch")
    result = zoo.run_one(zoo.by_name()[model], recipe, "cpu", tmp_path)
    assert result.stage == "match", dataclasses.asdict(result)
    assert [c[0] for c in result.cases] == list(zoo.BATCHES)
    assert result.worst_rel_l2 <= 1e-5, dataclasses.asdict(result)


@pytest.mark.slow
def test_whole_quantized_zoo(tmp_path):
    """Every model and recipe matches, but the LSTM: onnxruntime quantizes its activations at
    every step, we keep them in float (within 1e-2)."""
    import json

    zoo.main(["run", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(results) == 4 * len(zoo.RECIPES) + 4
    for r in results:
        if r["model"] == "lstm":
            assert r["worst_rel_l2"] < 1e-2, r
        else:
            assert r["stage"] == "match", r
