"""The dynamic-batch function's convolutions as loops over the images (inferx-conv-image-loop):
a batch with no static function of its own runs them on the static-convolution paths (our f32
kernel, IREE's NCHWc and matmuls), and its numbers match onnxruntime's."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferx_compiler
from helpers import onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.compile import main as compile_main


def _residual_net():
    """A stem (3x3 over 3 channels), a bottleneck whose 1x1 layers read more than one K block
    (320 channels: the bias added after the product inside the loop), a 3x3 with padding, a
    strided 1x1 projection and a residual add."""
    rng = np.random.default_rng(0)

    def conv(name, x, c, f, k, stride=1, pad=0, relu=True):
        w = numpy_helper.from_array((rng.standard_normal((f, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32), f"{name}_w")
        b = numpy_helper.from_array(rng.standard_normal(f).astype(np.float32) * 0.1, f"{name}_b")
        nodes = [helper.make_node("Conv", [x, w.name, b.name], [f"{name}_c" if relu else name], name=name,
                                  kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)]
        if relu:
            nodes.append(helper.make_node("Relu", [f"{name}_c"], [name], name=f"{name}_relu"))
        return nodes, [w, b]

    nodes, inits = [], []
    for spec in (("stem", "x", 3, 320, 3, 1, 1), ("reduce", "stem", 320, 64, 1), ("mid", "reduce", 64, 64, 3, 1, 1),
                 ("expand", "mid", 64, 320, 1, 1, 0, False), ("proj", "sum", 320, 96, 1, 2, 0, False)):
        n, i = conv(*spec)
        nodes += n
        inits += i
        if spec[0] == "expand":
            nodes.append(helper.make_node("Add", ["expand", "stem"], ["sum"], name="residual"))
    g = helper.make_graph(nodes, "residual", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 12, 12])],
                          [helper.make_tensor_value_info("proj", TensorProto.FLOAT, ["batch", 96, 6, 6])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("conv_image_loop")
    model = save(_residual_net(), root / "residual.onnx")
    looped, plain = str(root / "looped.ixa"), str(root / "plain.ixa")
    assert compile_main([model, "--target", "cpu", "-o", looped, "-q"]) == 0
    assert compile_main([model, "--target", "cpu", "--disable-pass", "inferx-conv-image-loop", "-o", plain, "-q"]) == 0
    return model, looped, plain


def test_the_dynamic_batch_matches_onnxruntime(builds):
    model, looped, _ = builds
    sess = inferx_compiler.load(looped)
    for batch in (1, 3, 6):  # 3: one image an iteration; 6: a chunk of 4, then 2 one by one
        x = np.random.default_rng(batch).standard_normal((batch, 3, 12, 12)).astype(np.float32)
        got = sess.run({"x": x})["proj"]
        assert sess.function_for([x.shape]) == ("main$b1" if batch == 1 else "main")
        assert rel_l2(got, onnxruntime_outputs(model, {"x": x})["proj"]) <= 1e-5


def test_every_dynamic_batch_convolution_is_looped(builds):
    _, looped, plain = builds

    def decisions(path):
        with zipfile.ZipFile(path) as z:
            return [d for d in json.loads(z.read("report.json"))["decisions"] if d["pass"] == "inferx-conv-image-loop"]

    looped_decisions = decisions(looped)
    assert sorted(d["node"] for d in looped_decisions if d["function"] == "main" and "looped" in d["decision"]) == \
        ["expand", "mid", "proj", "reduce", "stem"]
    assert all("declined: static batch" in d["decision"] for d in looped_decisions if d["function"] == "main$b1")
    assert decisions(plain) == []
