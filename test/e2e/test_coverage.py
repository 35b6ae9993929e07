"""Failure classes seen on third-party models, each reproduced by a small model built here."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferx_compiler
from helpers import onnxruntime_outputs, save
from inferx_compiler.artifact import Artifact
from inferx_compiler.cli.common import python_entry
from inferx_compiler.cli.compile import main as compile_main

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _conv_net_with_dynamic_image(seed=0):
    """A detector-neck-like stack whose image size is dynamic: conv, upsample, concat, conv."""
    rng = np.random.default_rng(seed)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.2, "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((4, 11, 3, 3)).astype(np.float32) * 0.2, "w2")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["a"], ["b"], name="relu"),
             helper.make_node("Resize", ["b", "", "scales"], ["u"], name="up", mode="nearest"),
             helper.make_node("Concat", ["u", "x"], ["c"], name="cat", axis=1),
             helper.make_node("Conv", ["c", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1])]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [1, 3, "height", "width"])],
                  [helper.make_tensor_value_info("y", F, [1, 4, "height", "width"])], [w1, w2, scales])


def test_input_shape_makes_a_dynamic_image_model_static(tmp_path):
    path = save(_conv_net_with_dynamic_image(), tmp_path / "neck.onnx")
    out = tmp_path / "neck.ixa"
    assert compile_main([path, "--target", "cpu", "--input-shape", "x=1,3,40,56", "-o", str(out), "-q"]) == 0
    manifest = Artifact(str(out)).manifest
    assert manifest.inputs[0].shape == (1, 3, 40, 56) and manifest.outputs[0].shape == (1, 4, 40, 56)
    x = np.random.default_rng(1).standard_normal((1, 3, 40, 56)).astype(np.float32)
    got = inferx_compiler.load(str(out)).run({"x": x})["y"]
    np.testing.assert_allclose(got, onnxruntime_outputs(path, {"x": x})["y"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("flag, message", [
    ("x=1,3,40", "3 dims given, but input 'x' has rank 4 [1, 3, height, width]"),
    ("img=1,3,40,40", "has no input 'img' (its inputs: x)"),
    ("x=2,3,40,40", "dim 0 of 'x' is 1 in the model"),
    ("x=1,3,forty,40", "expected NAME=D0,D1,..."),
])
def test_input_shape_errors_name_the_input(tmp_path, flag, message):
    path = save(_conv_net_with_dynamic_image(), tmp_path / "neck.onnx")
    proc = subprocess.run(python_entry("inferx_compiler.cli.compile") +
                          [path, "--target", "cpu", "--input-shape", flag, "-o", str(tmp_path / "n.ixa")],
                          capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
