"""The call's intermediate tensors in storage the session allocates once (CPU targets): the
`$into` entry takes a transient buffer (inferx-add-output-entry{transients=true}), sized by
IREE per function, and the runtime passes the same buffer on every call.

The model's one intermediate is 4096 x 4096 f32 (64 MiB, 16,384 pages of 4 KiB): without the
storage, IREE's CPU device mallocs it on every call, past glibc's mmap threshold, and every
page faults in again on every call. Numbers are checked against onnxruntime, for the static
function (its entry takes the storage) and the dynamic one (its entry does not: IREE 3.13 fails
on some models' dynamic functions with the storage passed in)."""

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


def _feeds(rows):
    return {"x": np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)}


def _check(path, got, feeds):
    ref = onnxruntime_outputs(path, feeds)
    assert rel_l2(got["s"], ref["s"]) < 1e-5 and rel_l2(got["m"], ref["m"]) < 1e-5


def test_intermediates_reuse_one_buffer(built):
    path, out = built
    feeds = _feeds(ROWS)
    session = inferx_compiler.load(str(out), device="cpu:task")
    faults = _faults_per_call(session, feeds)
    assert session.transient_bytes >= ROWS * WIDTH * 4  # the intermediate lies in the session's storage
    _check(path, session.run(feeds), feeds)
    # a fresh intermediate would fault in its 16,384 pages on every call
    assert faults < INTERMEDIATE_PAGES / 4, faults


def test_dynamic_function_keeps_its_own_transients(built):
    path, out = built
    feeds = _feeds(3000)  # no static function for 3000 rows: the dynamic one, its entry without storage
    session = inferx_compiler.load(str(out), device="cpu:task")
    _check(path, session.run(feeds), feeds)
    assert session.transient_bytes == 0


def test_entry_invoked_with_device_arrays(built):
    """The entry's own call (the session's path where no call plan serves): buffer views in,
    the results as device arrays, the storage passed by the entry."""
    import iree.runtime as rt

    path, out = built
    feeds = _feeds(ROWS)
    session = inferx_compiler.load(str(out), device="cpu:task")
    entry = session._invokers_for([feeds["x"].shape])[1]
    assert entry.takes_transients
    views = [rt.asdevicearray(session._device, a)._buffer_view
             for a in (feeds["x"], np.zeros(WIDTH, np.float32), np.zeros(ROWS, np.float32))]
    s, m = entry(*views)
    _check(path, {"s": s.to_host(), "m": m.to_host()}, feeds)


def test_build_falls_back_to_the_plain_entry(tmp_path, monkeypatch, capfd):
    """Where IREE fails with the storage passed in, the build goes through with the plain output
    entry, says so, and records the pipeline it used (the session then allocates per call)."""
    from inferx_compiler.backend import iree_backend
    OUTPUT_ENTRY_WITH_TRANSIENTS = "inferx-add-output-entry{transients=true}"
    from inferx_compiler.errors import PipelineError

    compile_module = iree_backend.compile_module

    def failing_with_transients(bytecode, flags, *, input_pipeline, **kwargs):
        if OUTPUT_ENTRY_WITH_TRANSIENTS in input_pipeline:
            raise PipelineError("IREE compile failed:\nerror: explicit execution regions must only contain explicit ops")
        return compile_module(bytecode, flags, input_pipeline=input_pipeline, **kwargs)

    monkeypatch.setattr(iree_backend, "compile_module", failing_with_transients)
    monkeypatch.setenv("INFERX_CLI_CHILD", "1")  # build in this process, where the patch is
    path = save(wide_intermediate(d_in=8), tmp_path / "wide.onnx")
    out = tmp_path / "wide.ixa"
    assert compile_main([path, "--target", "cpu", "--batch-sizes", "16", "--no-measure", "-o", str(out)]) == 0
    assert "IREE failed with the transient storage passed in" in capfd.readouterr().err
    session = inferx_compiler.load(str(out), device="cpu:task")
    assert OUTPUT_ENTRY_WITH_TRANSIENTS not in session.artifact.manifest.pipeline["iree-input"]
    feeds = {"x": np.ones((16, 8), np.float32)}
    _check(path, session.run(feeds), feeds)
    assert session.transient_bytes == 0
