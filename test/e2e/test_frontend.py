"""ONNX front end: opset upgrade, float64 kept, weights lifted however they are stored."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferx_compiler
from helpers import onnxruntime_outputs, rel_l2, save
from e2e_models import mlp, random_inputs, transformer_block


def _compile_and_compare(model, tmp_path, feeds, tol=1e-4, target="cpu", **kw):
    path = save(model, tmp_path / "m.onnx")
    inferx_compiler.compile_onnx(path, target=target, output=str(tmp_path / "m.ixa"), **kw)
    got = inferx_compiler.load(str(tmp_path / "m.ixa")).run(feeds)
    expected = onnxruntime_outputs(path, feeds)
    for k in expected:
        assert got[k].dtype == expected[k].dtype, k
        assert rel_l2(got[k], expected[k]) <= tol, (k, rel_l2(got[k], expected[k]))
    return got


def test_old_opset_is_upgraded(tmp_path, capfd):
    """BatchNormalization-9 and attribute-style Slice-9 do not import; opset 17 does."""
    rng = np.random.default_rng(0)
    c = 4
    inits = [numpy_helper.from_array(a, n) for n, a in {
        "s": rng.random(c, dtype=np.float32) + 0.5, "b": rng.standard_normal(c).astype(np.float32),
        "m": rng.standard_normal(c).astype(np.float32), "v": rng.random(c, dtype=np.float32) + 0.5}.items()]
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"], name="bn"),
             helper.make_node("Slice", ["n"], ["y"], name="crop", starts=[1, 1], ends=[7, 7], axes=[2, 3])]
    g = helper.make_graph(nodes, "old", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c, 6, 6])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 4
    path = save(model, tmp_path / "old.onnx")
    from inferx_compiler.cli.compile import main

    assert main([path, "--target", "cpu", "-o", str(tmp_path / "old.ixa")]) == 0
    assert "upgraded the model from opset 9 to opset 17" in capfd.readouterr().err
    feeds = {"x": rng.standard_normal((2, c, 8, 8)).astype(np.float32)}
    got = inferx_compiler.load(str(tmp_path / "old.ixa")).run(feeds)
    assert rel_l2(got["y"], onnxruntime_outputs(path, feeds)["y"]) <= 1e-5


def test_float64_stays_float64(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["n", 3])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["n", 3])
    w = numpy_helper.from_array(np.array([1.0 + 1e-12, 2.0, 3.0]), "w")
    g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"], name="mul")], "f64", [x], [y], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": np.random.default_rng(1).standard_normal((5, 3))}
    got = _compile_and_compare(model, tmp_path, feeds, tol=1e-15)
    assert got["y"].dtype == np.float64
    flags = inferx_compiler.load(str(tmp_path / "m.ixa")).artifact.manifest.iree_flags
    assert "--iree-input-demote-f64-to-f32=false" in flags


def test_weights_in_constant_nodes_and_legacy_inputs(tmp_path):
    """Large Constant nodes and initializers also listed as graph inputs are both lifted."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    nodes = [helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w)),
             helper.make_node("MatMul", ["x", "w"], ["h"]),  # unnamed nodes get names
             helper.make_node("MatMul", ["h", "b"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, [64, 64])]  # IR<4 style
    g = helper.make_graph(nodes, "legacy", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])],
                          [numpy_helper.from_array(b, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": rng.standard_normal((3, 64)).astype(np.float32)}
    _compile_and_compare(model, tmp_path, feeds)
    sess = inferx_compiler.load(str(tmp_path / "m.ixa"))
    assert [s.name for s in sess.inputs] == ["x"]
    assert sess.artifact.manifest.weights["count"] == 2


def test_dynamic_batch_any_size(tmp_path):
    model = mlp()
    path = save(model, tmp_path / "m.onnx")
    inferx_compiler.compile_onnx(path, target="cpu", output=str(tmp_path / "m.ixa"))
    sess = inferx_compiler.load(str(tmp_path / "m.ixa"))
    for batch in (1, 7, 64):
        feeds = random_inputs(model, batch)
        assert sess.run(feeds)["y"].shape == (batch, 10)


@pytest.mark.parametrize("precision,tol", [("fp16", 5e-3), ("bf16", 3e-2)])
def test_reduced_precision_contractions(tmp_path, precision, tol):
    model = transformer_block()
    feeds = random_inputs(model, 2)
    _compile_and_compare(model, tmp_path, feeds, tol=tol, precision=precision)
    sess = inferx_compiler.load(str(tmp_path / "m.ixa"))
    assert sess.artifact.manifest.precision_plan["mode"] == precision


def _gemm_model(bias: np.ndarray, as_constant_node: bool = False, alpha: float = 1.0):
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((96, 64)).astype(np.float32), "w")
    c = numpy_helper.from_array(bias, "c")
    nodes = [helper.make_node("Constant", [], ["c"], name="c", value=c)] if as_constant_node else []
    nodes.append(helper.make_node("Gemm", ["x", "w", "c"], ["y"], name="proj", transB=1, alpha=alpha))
    g = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 96])],
                          [w] if as_constant_node else [w, c])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_zero_gemm_bias_is_dropped(tmp_path):
    """A Gemm whose C is all zeros (an initializer or a Constant node) loses it: its product is
    the whole dispatch work, not a product and a bias add over the result; a nonzero bias, or
    a zero initializer a graph input of its name overrides, stays. Its alpha still scales the
    product (torch-mlir's lowering drops the alpha of a Gemm without C: scale_biasless_gemms)."""
    import json
    import zipfile

    from inferx_compiler.frontend.onnx_rewrites import drop_zero_gemm_bias

    zero = np.zeros(96, np.float32)
    assert drop_zero_gemm_bias(_gemm_model(zero)) == ["proj"]
    assert drop_zero_gemm_bias(_gemm_model(zero, as_constant_node=True)) == ["proj"]
    assert drop_zero_gemm_bias(_gemm_model(np.full(96, 1e-30, np.float32))) == []
    overridden = _gemm_model(zero)
    overridden.graph.input.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [96]))
    assert drop_zero_gemm_bias(overridden) == []

    feeds = {"x": np.random.default_rng(4).standard_normal((16, 64)).astype(np.float32)}
    work = {}  # the ops compiled: each dispatch's root plus what IREE fused into it
    bias = np.linspace(-1, 1, 96, dtype=np.float32)
    for name, model in {"zero": _gemm_model(zero), "zero_scaled": _gemm_model(zero, alpha=0.5),
                        "constant": _gemm_model(zero, as_constant_node=True, alpha=-2.0),
                        "biased": _gemm_model(bias), "biased_scaled": _gemm_model(bias, alpha=0.5)}.items():
        (tmp_path / name).mkdir()
        # x86-avx2 (runs on every x86-64 CI host): which kernel takes the product must not depend
        # on the host (our f32 kernel takes it for targets that have it)
        _compile_and_compare(model, tmp_path / name, feeds, tol=1e-6, target="x86-avx2")
        with zipfile.ZipFile(tmp_path / name / "m.ixa") as z:
            dispatches = json.loads(z.read("report.json"))["dispatches"]
        work[name] = sorted([d["root"], *d["fused"]] for d in dispatches)
    assert work["zero"] == [["linalg.matmul"]], work  # no bias add, fused or on its own
    assert sum(map(len, work["biased"])) > 1, work


def test_gemm_without_bias_keeps_its_alpha(tmp_path):
    """A two-input Gemm with alpha 0.5 gave twice onnxruntime's values (torch-mlir lowers it to a
    plain product); it is written as the product then a Mul."""
    model = _gemm_model(np.zeros(96, np.float32), alpha=0.5)
    del model.graph.node[0].input[2]
    del model.graph.initializer[1]
    feeds = {"x": np.random.default_rng(5).standard_normal((16, 64)).astype(np.float32)}
    _compile_and_compare(model, tmp_path, feeds, tol=1e-6)


def _sliced_position_ids_model(axes_input: str = "axes"):
    """What the TorchScript exporter writes for every Hugging Face encoder: a [1, 512] buffer
    sliced to the sequence length with a computed end (onnx's inference then loses the 1),
    expanded to the batch."""
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("y", TensorProto.INT64, ["batch", "seq"])
    inits = [numpy_helper.from_array(np.arange(512, dtype=np.int64)[None], "buffer"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([1], np.int64), "axes"),
             numpy_helper.from_array(np.array([1], np.int64), "one")]
    nodes = [helper.make_node("Shape", ["ids"], ["shape"], name="shape"),
             helper.make_node("Gather", ["shape", "one"], ["seq_len"], name="seq_len", axis=0),
             helper.make_node("Slice", ["buffer", "zero", "seq_len", axes_input], ["positions"], name="positions"),
             helper.make_node("Expand", ["positions", "shape"], ["expanded"], name="to_batch"),
             helper.make_node("Add", ["expanded", "ids"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "positions", [ids], [out], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_slice_keeps_the_static_dims_of_axes_it_does_not_slice():
    import onnx

    from inferx_compiler.frontend.onnx_shapes import refine_static_dims

    def infer(m):
        return onnx.shape_inference.infer_shapes(m, data_prop=True)

    def dims(m, name):
        vi = next(v for v in m.graph.value_info if v.name == name)
        return [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]

    model = infer(_sliced_position_ids_model())
    assert dims(model, "positions") == [None, None]  # what onnx's inference alone knows
    refined, count = refine_static_dims(model, infer)
    assert count == 1
    assert dims(refined, "positions") == [1, None]  # axis 1 sliced: stays dynamic
    # axes computed at run time: which axis keeps its size is unknown, nothing is set
    computed = _sliced_position_ids_model("seq_len")
    assert refine_static_dims(infer(computed), infer)[1] == 0


def test_expand_of_a_sliced_buffer_runs_at_any_batch(tmp_path):
    """Before onnx_shapes, torch-mlir took the lost 1 for a batch dim and failed every call at
    batch > 1 ('onnx.Expand input has a dim that is not statically 1')."""
    model = _sliced_position_ids_model()
    path = save(model, tmp_path / "m.onnx")
    inferx_compiler.compile_onnx(path, target="cpu", output=str(tmp_path / "m.ixa"))
    session = inferx_compiler.load(str(tmp_path / "m.ixa"))
    for batch, seq in ((1, 5), (3, 7)):
        feeds = {"ids": np.arange(batch * seq, dtype=np.int64).reshape(batch, seq)}
        np.testing.assert_array_equal(session.run(feeds)["y"], onnxruntime_outputs(path, feeds)["y"])


def _window_partition_model():
    """Swin's window partition as the TorchScript exporter writes it: the window counts are
    read from the shape of a [batch, H, W, C] tensor whose batch is dynamic, the batch is -1."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             {"i1": 1, "i2": 2, "two": 2, "axes0": [0], "minus1": [-1], "w": [2], "c": [8], "tail": [4, 8]}.items()]
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "i1"], ["h"], name="h", axis=0),
             helper.make_node("Gather", ["s", "i2"], ["wd"], name="wd", axis=0),
             helper.make_node("Div", ["h", "two"], ["nh"], name="nh"),
             helper.make_node("Div", ["wd", "two"], ["nw"], name="nw"),
             helper.make_node("Unsqueeze", ["nh", "axes0"], ["nh1"], name="nh1"),
             helper.make_node("Unsqueeze", ["nw", "axes0"], ["nw1"], name="nw1"),
             helper.make_node("Concat", ["minus1", "nh1", "w", "nw1", "w", "c"], ["shape6"], name="shape6", axis=0),
             helper.make_node("Reshape", ["x", "shape6"], ["r"], name="split"),
             helper.make_node("Transpose", ["r"], ["t"], name="windows", perm=[0, 1, 3, 2, 4, 5]),
             helper.make_node("Concat", ["minus1", "tail"], ["shape3"], name="shape3", axis=0),
             helper.make_node("Reshape", ["t", "shape3"], ["y"], name="flatten")]
    graph = helper.make_graph(nodes, "windows", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_static_dims_of_a_partly_dynamic_shape_fold():
    from inferx_compiler.frontend.onnx_rewrites import fold_shape_computations

    model = _window_partition_model()
    folded = fold_shape_computations(model)
    assert {"h", "wd", "nh", "nw", "shape6"} <= set(folded)
    assert "shape" not in folded  # the batch is dynamic: Shape itself stays


def test_window_partition_runs_at_any_batch(tmp_path):
    """The folded window counts give onnxruntime's values at every batch (the real Swin, whose
    build IREE rejected before the fold with 'invalid Read access range [0 to -16384]', is in
    test_transformers_zoo's sample)."""
    model = _window_partition_model()
    path = save(model, tmp_path / "m.onnx")
    inferx_compiler.compile_onnx(path, target="cpu", output=str(tmp_path / "m.ixa"))
    session = inferx_compiler.load(str(tmp_path / "m.ixa"))
    for batch in (1, 3):
        feeds = {"x": np.random.default_rng(batch).standard_normal((batch, 4, 6, 8)).astype(np.float32)}
        np.testing.assert_array_equal(session.run(feeds)["y"], onnxruntime_outputs(path, feeds)["y"])


def _expanded_mask_model():
    """GPT-2's mask as the TorchScript exporter writes `mask.expand(batch, -1, q, k)`: the
    target shape is Where(Equal(shape, -1), 1, shape), which onnx's inference cannot evaluate,
    so the mask's head dim of 1 is unknown where it meets the [batch, heads, q, k] scores."""
    s = helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 4, "q", "q"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, "q", "q"])
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             {"i0": 0, "i2": 2, "axes0": [0], "minus1": [-1], "one4": [1, 1, 1, 1]}.items()]
    inits.append(numpy_helper.from_array(np.full((1, 1, 1, 1), -10.0, np.float32), "bias"))
    nodes = [helper.make_node("Shape", ["scores"], ["shape"], name="shape"),
             helper.make_node("Gather", ["shape", "i0"], ["b"], name="b", axis=0),
             helper.make_node("Gather", ["shape", "i2"], ["q"], name="q", axis=0),
             helper.make_node("Unsqueeze", ["b", "axes0"], ["b1"], name="b1"),
             helper.make_node("Unsqueeze", ["q", "axes0"], ["q1"], name="q1"),
             helper.make_node("Concat", ["b1", "minus1", "q1", "q1"], ["wanted"], name="wanted", axis=0),
             helper.make_node("Equal", ["wanted", "minus1"], ["keep"], name="keep"),
             helper.make_node("Where", ["keep", "one4", "wanted"], ["target"], name="target"),
             helper.make_node("Expand", ["bias", "target"], ["mask"], name="mask"),
             helper.make_node("Add", ["scores", "mask"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "mask", [s], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_expand_to_a_computed_shape_keeps_its_unit_dims():
    import onnx

    from inferx_compiler.frontend.onnx_shapes import refine_static_dims

    def infer(m):
        return onnx.shape_inference.infer_shapes(m, data_prop=True)

    refined, count = refine_static_dims(infer(_expanded_mask_model()), infer)
    vi = next(v for v in refined.graph.value_info if v.name == "mask")
    dims = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
    assert dims == [None, 1, None, None] and count == 1


def test_expanded_mask_broadcasts_over_the_heads(tmp_path):
    """Before the Expand refinement torch-mlir took the mask's head dim for the heads' (4) and
    every call failed ('mismatched size for broadcast')."""
    path = save(_expanded_mask_model(), tmp_path / "m.onnx")
    inferx_compiler.compile_onnx(path, target="cpu", output=str(tmp_path / "m.ixa"))
    session = inferx_compiler.load(str(tmp_path / "m.ixa"))
    for batch, q in ((1, 3), (2, 5)):
        feeds = {"scores": np.random.default_rng(q).standard_normal((batch, 4, q, q)).astype(np.float32)}
        np.testing.assert_allclose(session.run(feeds)["y"], onnxruntime_outputs(path, feeds)["y"], rtol=1e-6)


def _merged_heads_model(heads: int = 4, head_dim: int = 16, with_matmul: bool = True):
    """GPT-2's merge of the heads then Conv1D: [batch, seq, heads, head_dim] viewed as
    [-1, heads * head_dim] (a constant target), times a weight."""
    width = heads * head_dim
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", heads, head_dim])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array(np.array([-1, width], np.int64), "target"),
             numpy_helper.from_array(np.random.default_rng(0).standard_normal((width, 8)).astype(np.float32), "w")]
    nodes = [helper.make_node("Reshape", ["x", "target"], ["flat" if with_matmul else "y"], name="merge")]
    if with_matmul:
        nodes.append(helper.make_node("MatMul", ["flat", "w"], ["y"], name="proj"))
    graph = helper.make_graph(nodes, "merge", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_reshape_of_two_dynamic_dims_becomes_flatten():
    from inferx_compiler.frontend.onnx_rewrites import flatten_dynamic_reshapes

    model = _merged_heads_model()
    assert flatten_dynamic_reshapes(model) == ["merge"]
    assert [(n.op_type, n.attribute[0].i) for n in model.graph.node if n.op_type == "Flatten"] == [("Flatten", 2)]
    one_dynamic = _merged_heads_model()
    one_dynamic.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 8  # seq static: torch-mlir sizes it
    assert flatten_dynamic_reshapes(one_dynamic) == []


def test_merged_heads_give_every_row_at_batch_above_one(tmp_path):
    """Before the rewrite the -1 came out as the batch alone: [3, 64] for 15 rows, wrong values
    and no error."""
    path = save(_merged_heads_model(), tmp_path / "m.onnx")
    inferx_compiler.compile_onnx(path, target="cpu", output=str(tmp_path / "m.ixa"))
    session = inferx_compiler.load(str(tmp_path / "m.ixa"))
    for batch, seq in ((1, 4), (3, 5)):
        feeds = {"x": np.random.default_rng(seq).standard_normal((batch, seq, 4, 16)).astype(np.float32)}
        got, want = session.run(feeds)["y"], onnxruntime_outputs(path, feeds)["y"]
        assert got.shape == want.shape == (batch * seq, 8)
        assert rel_l2(got, want) <= 1e-6
