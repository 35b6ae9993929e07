"""Per-call cost: `cpu` picks the executor from the work per call; repeated calls allocate nothing
and take the validated fast path, which still refuses bad inputs and gives the same numbers."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferx_compiler
from e2e_models import mlp
from helpers import onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.errors import InputValidationError
from inferx_compiler.runtime.devices import SYNC_MAX_FLOPS, DeviceSpec, choose_cpu_executor, parse_device


def _trivial() -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Add", ["x", "one"], ["y"], name="add")], "trivial",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
                          [numpy_helper.from_array(np.ones(4, np.float32), "one")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    root = tmp_path_factory.mktemp("call_cost")
    out = {}
    for name, model in (("trivial", _trivial()), ("mlp", mlp())):
        path = save(model, root / f"{name}.onnx")
        assert compile_main([path, "--target", "cpu", "-o", str(root / f"{name}.ixa"), "-q"]) == 0
        out[name] = (path, str(root / f"{name}.ixa"))
    return out


def test_cpu_picks_the_executor_from_the_largest_batch_built(tmp_path):
    """The bundled encoder built for batch 1, then for batches 1 and 4: its b1 call is small,
    its b4 one is not; the batch sizes a build names are the ones it serves, so `cpu` takes the
    pool for the second."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "encoder.onnx")
    small, both = str(tmp_path / "b1.ixa"), str(tmp_path / "b1_4.ixa")
    assert compile_main([path, "--target", "cpu", "--batch-sizes", "1", "--no-measure", "-o", small, "-q"]) == 0
    assert compile_main([path, "--target", "cpu", "--batch-sizes", "1,4", "--no-measure", "-o", both, "-q"]) == 0
    flops = {f["name"]: f["flops"] for f in inferx_compiler.load(both, device="cpu:task").artifact.manifest.functions}
    assert flops["main$b1"] <= SYNC_MAX_FLOPS < flops["main$b4"], flops
    assert inferx_compiler.load(small, device="cpu").device == "cpu:sync"
    assert inferx_compiler.load(both, device="cpu").device == "cpu:task"


def test_cpu_picks_the_executor_from_the_work_per_call(artifacts):
    sess = inferx_compiler.load(artifacts["trivial"][1], device="cpu")
    assert sess.device == "cpu:sync"  # 4 FLOPs a call: waking a worker pool would cost more
    assert inferx_compiler.load(artifacts["trivial"][1], device="cpu:task").device == "cpu:task"
    auto = parse_device("cpu")
    assert choose_cpu_executor(auto, SYNC_MAX_FLOPS) == DeviceSpec("cpu", sync=True)
    assert choose_cpu_executor(auto, SYNC_MAX_FLOPS + 1) == DeviceSpec("cpu", sync=False)
    assert choose_cpu_executor(auto, None) == DeviceSpec("cpu", sync=False)  # unknown work: the pool
    assert choose_cpu_executor(parse_device("cpu:sync"), 10**12).sync  # explicit choices stay


def test_repeated_calls_allocate_nothing_and_match(artifacts):
    onnx_path, artifact = artifacts["mlp"]
    sess = inferx_compiler.load(artifact, device="cpu")
    rng = np.random.default_rng(0)
    shapes = [(1, 64), (3, 64)]  # the static batch-1 function and the dynamic one
    for shape in shapes:
        sess.run({"x": rng.standard_normal(shape).astype(np.float32)})
    allocated = sess.buffer_allocations
    for i in range(20):
        x = rng.standard_normal(shapes[i % 2]).astype(np.float32)
        got = sess.run({"x": x})["y"]
        want = onnxruntime_outputs(onnx_path, {"x": x})["y"]
        assert rel_l2(got, want) <= 1e-5
    assert sess.buffer_allocations == allocated


def test_results_are_not_overwritten_by_the_next_call(artifacts):
    sess = inferx_compiler.load(artifacts["trivial"][1], device="cpu")
    a = sess.run({"x": np.zeros((1, 4), np.float32)})["y"]
    b = sess.run({"x": np.full((1, 4), 5.0, np.float32)})["y"]
    assert a.tolist() == [[1.0] * 4] and b.tolist() == [[6.0] * 4]


def test_fast_path_still_checks_inputs(artifacts):
    sess = inferx_compiler.load(artifacts["trivial"][1], device="cpu")
    sess.run({"x": np.zeros((1, 4), np.float32)})  # makes the batch-1 call plan
    with pytest.raises(InputValidationError, match="expected dtype float32, got float64"):
        sess.run({"x": np.zeros((1, 4), np.float64)})
    with pytest.raises(InputValidationError, match="dim 1 must be 4"):
        sess.run({"x": np.zeros((1, 5), np.float32)})
    with pytest.raises(InputValidationError, match="unexpected input"):
        sess.run({"x": np.zeros((1, 4), np.float32), "z": np.zeros(1, np.float32)})
    assert sess.run({"x": np.ones((1, 4), np.float32)})["y"].tolist() == [[2.0] * 4]
