"""float8/float4/e8m0/int4/int2 values and quantize ops: compiled results against onnx's
reference implementation (onnx.reference, which converts through ml_dtypes), bit for bit."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import inferx_compiler
from helpers import save
from inferx_compiler.artifact.archive import Artifact
from inferx_compiler.errors import InputValidationError, ModelLoadError
from inferx_compiler.frontend.onnx_narrow_types import widen_narrow_types

OPSET = 25

# Ties to even at several binades, subnormals of each format, values either side of each
# format's largest, overflow, infinities, NaN, negative zero, and truncation/wrap cases.
# No float32 subnormals: IREE's CPU code reads them as zero (see onnx_narrow_types).
TRICKY = np.array([
    0.0, -0.0, 0.25, 0.75, 1.0, 1.0625, 1.125, 1.1875, -1.3125, 2.5, 3.5, -3.5, 5.0, 5.5,
    7.6, 8.5, -9.0, 15.7, 16.2, -100.0, 0.48, 0.124, 1.1,
    2.0 ** -7, 2.0 ** -9, 3 * 2.0 ** -10, 2.0 ** -10, 2.0 ** -11, 2.0 ** -16, 2.0 ** -17, 3 * 2.0 ** -18,
    232.0, 240.0, 248.0, 440.0, 448.0, 456.0, 464.0, 470.0, 480.0, 500.0,
    57344.0, 60000.0, 61440.0, 65536.0, 1e6, -1e6, 1e-7, -1e-7,
    2.0 ** -126, 1.5 * 2.0 ** -126, 2.0 ** 127 * 1.5, 3e38,
    np.inf, -np.inf, np.nan], np.float32)

CASTS = [  # (output name, to, extra attributes)
    ("e4m3fn", T.FLOAT8E4M3FN, {}), ("e4m3fn_nosat", T.FLOAT8E4M3FN, {"saturate": 0}),
    ("e4m3fnuz", T.FLOAT8E4M3FNUZ, {}), ("e4m3fnuz_nosat", T.FLOAT8E4M3FNUZ, {"saturate": 0}),
    ("e5m2", T.FLOAT8E5M2, {}), ("e5m2_nosat", T.FLOAT8E5M2, {"saturate": 0}),
    ("e5m2fnuz", T.FLOAT8E5M2FNUZ, {}), ("e5m2fnuz_nosat", T.FLOAT8E5M2FNUZ, {"saturate": 0}),
    ("fp4", T.FLOAT4E2M1, {}),
    ("e8m0_up", T.FLOAT8E8M0, {"round_mode": "up"}), ("e8m0_down", T.FLOAT8E8M0, {"round_mode": "down"}),
    ("e8m0_nearest", T.FLOAT8E8M0, {"round_mode": "nearest"}),
    ("e8m0_up_nosat", T.FLOAT8E8M0, {"round_mode": "up", "saturate": 0}),
    ("int4", T.INT4, {}), ("uint4", T.UINT4, {}), ("int2", T.INT2, {}), ("uint2", T.UINT2, {}),
]


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _compile(model, tmp_path):
    path = save(model, tmp_path / "m.onnx")
    out = str(tmp_path / "m.ixa")
    inferx_compiler.compile_onnx(path, target="cpu", output=out)
    return inferx_compiler.load(out, device="cpu"), out


def _assert_same(got: np.ndarray, want: np.ndarray, what: str):
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    g, w = got.astype(np.float64), want.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    assert same.all(), f"{what}: at inputs {TRICKY[~same.ravel()] if g.size == TRICKY.size else ''} " \
                       f"got {g[~same]}, onnx reference {w[~same]}"


def _cast_model():
    nodes = [helper.make_node("Cast", ["x"], [name], name=f"cast_{name}", to=to, **attrs)
             for name, to, attrs in CASTS]
    outputs = [helper.make_tensor_value_info(name, to, [len(TRICKY)]) for name, to, _ in CASTS]
    return _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [len(TRICKY)])], outputs)


def test_casts_to_narrow_types_round_as_onnx_does(tmp_path):
    model = _cast_model()
    want = dict(zip([c[0] for c in CASTS], ReferenceEvaluator(model).run(None, {"x": TRICKY})))
    session, out = _compile(model, tmp_path)
    assert [s.dtype for s in Artifact(out).manifest.outputs] == [want[c[0]].dtype.name for c in CASTS]
    got = session.run({"x": TRICKY})
    for name, _, _ in CASTS:
        _assert_same(got[name], want[name], name)


def test_a_float16_source_rounds_once():
    """float16 -> float8 goes through float32 (exact), so it rounds like the float32 cast."""
    with np.errstate(over="ignore"):
        x = TRICKY.astype(np.float16)  # (1e6 and up become inf)
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT8E4M3FN)],
                   [helper.make_tensor_value_info("x", T.FLOAT16, [len(x)])],
                   [helper.make_tensor_value_info("y", T.FLOAT8E4M3FN, [len(x)])])
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    widen_narrow_types(model)
    got = ReferenceEvaluator(model).run(None, {"x": x})[0]
    _assert_same(got.astype(want.dtype), want, "float16 -> e4m3fn")


def test_narrow_inputs_and_outputs_keep_their_types(tmp_path):
    """int4 and float8 at the interface: the manifest lists them, run() takes and returns
    ml_dtypes arrays, and casts out of them and between them match the reference."""
    nodes = [helper.make_node("Cast", ["q"], ["q_f16"], to=T.FLOAT16),
             helper.make_node("Cast", ["f8"], ["f8_f16"], to=T.FLOAT16),
             helper.make_node("Cast", ["f8"], ["f8_e5m2"], to=T.FLOAT8E5M2),
             helper.make_node("Transpose", ["q"], ["q_t"], perm=[1, 0])]
    model = _model(nodes, [helper.make_tensor_value_info("q", T.INT4, [3, 4]),
                           helper.make_tensor_value_info("f8", T.FLOAT8E4M3FN, [6])],
                   [helper.make_tensor_value_info("q_f16", T.FLOAT16, [3, 4]),
                    helper.make_tensor_value_info("f8_f16", T.FLOAT16, [6]),
                    helper.make_tensor_value_info("f8_e5m2", T.FLOAT8E5M2, [6]),
                    helper.make_tensor_value_info("q_t", T.INT4, [4, 3])])
    import ml_dtypes

    feeds = {"q": np.arange(-8, 4).reshape(3, 4).astype(ml_dtypes.int4),
             "f8": np.array([0.5, -448, 0.001953125, 3.75, 13.0, -0.0], ml_dtypes.float8_e4m3fn)}
    want = ReferenceEvaluator(model).run(None, feeds)
    session, _ = _compile(model, tmp_path)
    assert [s.dtype for s in session.inputs] == ["int4", "float8_e4m3fn"]
    got = session.run(feeds)
    for (name, w) in zip(["q_f16", "f8_f16", "f8_e5m2", "q_t"], want):
        _assert_same(got[name], w, name)
    with pytest.raises(InputValidationError, match="input 'q': expected dtype int4, got int8"):
        session.run({**feeds, "q": feeds["q"].astype(np.int8)})


def _quantize_models():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 6, 4)) * 20).astype(np.float32)
    per_axis = numpy_helper.from_array(np.array([1.5, 2.0, 0.5, 3.0, 1.0, 4.0], np.float32), "s")
    blocked = numpy_helper.from_array(rng.uniform(0.5, 3, (2, 2, 4)).astype(np.float32), "s")
    cases = []
    for q_type, zp in [(T.INT4, np.array([1, -2, 0, 3, -1, 2])), (T.UINT8, np.array([128, 7, 200, 0, 90, 255])),
                       (T.UINT2, np.array([1, 0, 2, 3, 1, 0])), (T.FLOAT8E4M3FN, np.zeros(6))]:
        zp_t = helper.make_tensor("zp", q_type, [6], zp.tolist())
        q = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1)
        dq = helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=1)
        cases.append((f"per_axis_{T.DataType.Name(q_type)}", _model(
            [q, dq], [helper.make_tensor_value_info("x", T.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info("q", q_type, list(x.shape)),
             helper.make_tensor_value_info("y", T.FLOAT, list(x.shape))], [per_axis, zp_t])))
    q = helper.make_node("QuantizeLinear", ["x", "s"], ["q"], axis=1, block_size=3, output_dtype=T.INT4)
    dq = helper.make_node("DequantizeLinear", ["q", "s"], ["y"], axis=1, block_size=3)
    cases.append(("blocked_int4", _model(
        [q, dq], [helper.make_tensor_value_info("x", T.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("q", T.INT4, list(x.shape)),
         helper.make_tensor_value_info("y", T.FLOAT, list(x.shape))], [blocked])))
    return x, cases


@pytest.mark.parametrize("case", range(5), ids=[c[0] for c in _quantize_models()[1]])
def test_quantize_per_axis_and_blocked_match_the_reference(tmp_path, case):
    x, cases = _quantize_models()
    _, model = cases[case]
    want = ReferenceEvaluator(model).run(None, {"x": x})
    got = _compile(model, tmp_path)[0].run({"x": x})
    _assert_same(got["q"], want[0], "quantized")
    np.testing.assert_array_equal(got["y"], want[1])


def test_plain_int8_quantize_keeps_its_own_lowering():
    """Per-tensor int8 quantize ops are left to torch-mlir (which fuses them into quantized
    matmuls); nothing is rewritten."""
    model = _model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
                    helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"])],
                   [helper.make_tensor_value_info("x", T.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [4])],
                   [numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.int8(3), "zp")])
    before = model.SerializeToString()
    assert widen_narrow_types(model) == ({}, [])
    assert model.SerializeToString() == before


def test_computing_on_a_narrow_value_is_refused_by_name():
    model = _model([helper.make_node("Add", ["a", "a"], ["b"], name="add_int4")],
                   [helper.make_tensor_value_info("a", T.INT4, [4])],
                   [helper.make_tensor_value_info("b", T.INT4, [4])])
    with pytest.raises(ModelLoadError, match="node 'add_int4' \\(op_type=Add\\) computes on 'a' of type INT4"):
        widen_narrow_types(model)


def test_model_without_narrow_types_is_untouched():
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT16)],
                   [helper.make_tensor_value_info("x", T.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", T.FLOAT16, [4])])
    before = model.SerializeToString()
    assert widen_narrow_types(model) == ({}, [])
    assert model.SerializeToString() == before
    onnx.checker.check_model(model)
