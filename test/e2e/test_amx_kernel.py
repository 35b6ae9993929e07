"""bf16 products through our AMX kernel on this CPU (inferx_compiler/kernels/bf16_amx_gemm.c,
inferx-amx-matmul), on shapes that reach every edge of it: rows below, between and above its
16- and 32-row blocks, a last 16-column panel, columns zero-padded to its tiles, static and
dynamic rows, a weight stored transposed (Gemm transB=1). The reference is the same build with
the pass disabled (IREE's bf16 code: the same bf16 inputs, f32 sums in another order), and
onnxruntime in f32."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferx_compiler
from e2e_models import _model, _w, transformer_block
from helpers import artifact_json, onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.kernels import cpu_objects
from inferx_compiler.targets import get_target

pytestmark = [
    pytest.mark.skipif("amx_bf16" not in get_target("cpu").features, reason="this CPU has no AMX"),
    pytest.mark.skipif(cpu_objects.c_compiler()[0] is None, reason="no C compiler for the kernel"),
]


def gemm_projections(seed=5, d_in=96, d_mid=80, d_out=100, seq=11):
    """x [B, 11, 96] -> MatMul 96x80 (two 32-column panels and a last 16-column one) -> Relu ->
    Gemm-like MatMul against a transposed weight 100x80 (padded to 128 columns, the extra 28 cut)."""
    rng = np.random.default_rng(seed)
    inits = {"w0": _w(rng, d_in, d_mid), "w1t": _w(rng, d_out, d_mid)}
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"], name="proj0"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Transpose", ["w1t"], ["w1"], perm=[1, 0], name="t"),
             helper.make_node("MatMul", ["r", "w1"], ["y"], name="proj1")]
    return _model(nodes, "gemm_projections", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", seq, d_in])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", seq, d_out])], inits)


def _build(path, out, *extra):
    # x86-amx, not this host's record: the build is the same on any machine that runs it
    assert compile_main([str(path), "--target", "x86-amx", "--precision", "bf16", "--no-measure", "-o", str(out), "-q",
                         *extra]) == 0
    return artifact_json(out)


def _amx_dispatches(report) -> list[str]:
    return [d["dispatch"] for d in report["dispatches"] if d["dispatch"].startswith("inferx_bf16_amx_")]


@pytest.mark.parametrize("model_name", ["gemm_projections", "transformer_block"])
def test_amx_products_match_iree_bf16_code(tmp_path, model_name):
    model = gemm_projections() if model_name == "gemm_projections" else transformer_block(d=64, heads=4, seq=13,
                                                                                         ffn=128)
    path = save(model, tmp_path / "m.onnx")
    manifest, report = _build(path, tmp_path / "amx.ixa", "--batch-sizes", "1,3")
    _, reference = _build(path, tmp_path / "iree.ixa", "--batch-sizes", "1,3", "--disable-pass", "inferx-amx-matmul")
    used = _amx_dispatches(report)
    assert used and not _amx_dispatches(reference)
    rows = {d.rsplit("_", 1)[1].split("x")[0] for d in used}
    assert "D" in rows and len(rows) >= 3  # the static functions' rows and the dynamic function's
    assert "bf16_amx_gemm.c" in manifest["compiler"]["c_kernels"]
    amx = inferx_compiler.load(str(tmp_path / "amx.ixa"), device="cpu")
    iree = inferx_compiler.load(str(tmp_path / "iree.ixa"), device="cpu")
    name = amx.inputs[0].name
    out = amx.outputs[0].name
    for batch in (1, 3, 2, 5):  # 2 and 5: the dynamic function (22 and 55 rows: a partial second block)
        x = np.random.default_rng(batch).standard_normal([batch] + list(amx.inputs[0].shape[1:])).astype(np.float32)
        got, want = amx.run({name: x})[out], iree.run({name: x})[out]
        # Only the summation order differs; a layer's f32 output rounds to bf16 for the next one, where
        # an order difference can flip a rounding (2^-8 of that element): 1e-6 to 4e-5 here. A
        # misplaced tile, row or column is off by the size of the values (> 1e-1).
        assert rel_l2(got, want) < 2e-4, (batch, rel_l2(got, want))
        ref = onnxruntime_outputs(str(path), {name: x})[out]
        assert rel_l2(got, ref) < 3e-2, batch  # bf16 inputs against f32


def test_amx_kernel_declines_on_a_target_without_amx(tmp_path):
    """A cross build for AVX-512 without AMX keeps IREE's bf16 code (the pass is not run)."""
    path = save(gemm_projections(), tmp_path / "m.onnx")
    assert compile_main([str(path), "--target", "x86-avx512-vnni", "--precision", "bf16", "--batch-sizes", "1",
                         "--no-measure", "-o", str(tmp_path / "x.ixa"), "-q"]) == 0
    _, report = artifact_json(tmp_path / "x.ixa")
    assert not _amx_dispatches(report)
