"""The call's intermediate tensors in storage the session allocates once (CPU targets): the
`$into` entry takes a transient buffer (inferx-add-output-entry{transients=true}), sized by
IREE per function, and the runtime passes the same buffer on every call.

The model's one intermediate is 4096 x 4096 f32 (64 MiB, 16,384 pages of 4 KiB): without the
storage, IREE's CPU device mallocs it on every call, past glibc's mmap threshold, and every
page faults in again on every call. Numbers are checked against onnxruntime, for the static
function (its storage size a constant) and the dynamic one (its size computed per shape)."""

from __future__ import annotations

import resource

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferx_compiler
from e2e_models import _model, _w
from helpers import onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.compile import main as compile_main

ROWS, WIDTH = 4096, 4096
INTERMEDIATE_PAGES = ROWS * WIDTH * 4 // 4096


def wide_intermediate(seed=11, d_in=64):
    """x [B, 64] -> MatMul 64x4096 -> Relu -> h [B, 4096] -> its column sums [4096] and row
    maxima [B]: h is read by two reductions, so it is stored (a transient)."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"], name="expand"),
             helper.make_node("Relu", ["p"], ["h"], name="relu"),
             helper.make_node("ReduceSum", ["h", "axis0"], ["s"], keepdims=0, name="column_sums"),
             helper.make_node("ReduceMax", ["h"], ["m"], axes=[1], keepdims=0, name="row_max")]
    inits = {"w": _w(rng, d_in, WIDTH), "axis0": np.array([0], np.int64)}
    return _model(nodes, "wide_intermediate", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d_in])],
                  [helper.make_tensor_value_info("s", TensorProto.FLOAT, [WIDTH]),
                   helper.make_tensor_value_info("m", TensorProto.FLOAT, ["batch"])], inits, opset=17)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("transients")
    path = save(wide_intermediate(), tmp / "wide.onnx")
    out = tmp / "wide.ixa"
    assert compile_main([path, "--target", "cpu", "--batch-sizes", str(ROWS), "--no-measure", "-o", str(out), "-q"]) == 0
    return path, out


def _faults_per_call(session, feeds, calls=4) -> float:
    session.run(feeds)
    session.run(feeds)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        session.run(feeds)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


@pytest.mark.parametrize("rows", [ROWS, 3000])  # the static function, the dynamic one
def test_intermediates_reuse_one_buffer(built, rows):
    path, out = built
    x = np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)
    session = inferx_compiler.load(str(out), device="cpu:task")
    faults = _faults_per_call(session, {"x": x})
    assert session.transient_bytes >= rows * WIDTH * 4  # the intermediate lies in the session's storage
    got = session.run({"x": x})
    ref = onnxruntime_outputs(path, {"x": x})
    assert rel_l2(got["s"], ref["s"]) < 1e-5 and rel_l2(got["m"], ref["m"]) < 1e-5
    # a fresh intermediate would fault in rows x 4096 x 4 bytes of pages on every call
    assert faults < INTERMEDIATE_PAGES * rows / ROWS / 4, faults
