"""f16/bf16 builds store their weights at f16/bf16 (inferx-narrow-parameters +
inferx_compiler/precision/weight_casts.py): half the artifact, the same numbers.

The stored copies are rounded as `arith.truncf` rounds, so a build that stores them computes
exactly what a build truncating the f32 weights computes: outputs compared bit for bit, and
against onnxruntime fp32 at the precision's tolerance.
"""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from e2e_models import mlp
from helpers import onnxruntime_outputs, rel_l2, save
from inferx_compiler import load
from inferx_compiler.precision import weight_casts
from inferx_compiler.cli.compile import main as compile_main

TOLERANCE = {"fp16": 2e-3, "bf16": 2e-2}


def _build(tmp_path, model: str, name: str, *extra: str) -> str:
    out = str(tmp_path / f"{name}.ixa")
    assert compile_main([model, "--target", "cpu", "-o", out, "-q", *extra]) == 0
    return out


def _weights_bytes(artifact: str) -> tuple[int, list]:
    with zipfile.ZipFile(artifact) as z:
        manifest = json.loads(z.read("manifest.json"))
        return z.getinfo("weights.irpa").file_size, manifest["weights"]["keys"]


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_weights_are_stored_narrow_with_identical_outputs(tmp_path, precision):
    model = save(mlp(d_in=256, hidden=512, d_out=128), tmp_path / "mlp.onnx")
    narrow = _build(tmp_path, model, "narrow", "--precision", precision)
    wide = _build(tmp_path, model, "wide", "--precision", precision, "--disable-pass", "inferx-narrow-parameters")
    narrow_bytes, keys = _weights_bytes(narrow)
    wide_bytes, wide_keys = _weights_bytes(wide)
    element = {"fp16": "f16", "bf16": "bf16"}[precision]
    assert set(keys) == {f"{k}#cast:{element}" if k.startswith("w") else k for k in wide_keys}, (keys, wide_keys)
    # the matmul weights dominate: the archive shrinks to about half
    assert narrow_bytes < 0.55 * wide_bytes, (narrow_bytes, wide_bytes)
    x = np.random.default_rng(0).standard_normal((6, 256)).astype(np.float32)
    got = load(narrow).run({"x": x})["y"]
    assert np.array_equal(got, load(wide).run({"x": x})["y"])
    error = rel_l2(got, onnxruntime_outputs(model, {"x": x})["y"])
    assert 1e-6 < error <= TOLERANCE[precision], error  # lowered, and within the precision's error


def _gemm_transposed(d_in=128, d_out=96):
    """y = x W^T + b through ONNX Gemm transB=1 (the weight stored [N, K], read transposed)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = numpy_helper.from_array((rng.standard_normal((d_out, d_in)) / 8).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(d_out) / 8).astype(np.float32), "b")
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1, name="fc")], "gemm_t",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d_in])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", d_out])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_transposed_weight_is_stored_narrow_too(tmp_path):
    model = save(_gemm_transposed(), tmp_path / "gemm_t.onnx")
    narrow = _build(tmp_path, model, "narrow", "--precision", "bf16", "--batch-sizes", "4")
    wide = _build(tmp_path, model, "wide", "--precision", "bf16", "--batch-sizes", "4",
                  "--disable-pass", "inferx-narrow-parameters")
    assert "w#cast:bf16" in _weights_bytes(narrow)[1] and "w" not in _weights_bytes(narrow)[1]
    for rows in (4, 3):  # the static-shape function and the dynamic one read the one bf16 copy
        x = np.random.default_rng(rows).standard_normal((rows, 128)).astype(np.float32)
        got = load(narrow).run({"x": x})["y"]
        assert np.array_equal(got, load(wide).run({"x": x})["y"])
        assert rel_l2(got, onnxruntime_outputs(model, {"x": x})["y"]) <= TOLERANCE["bf16"]


def test_fp32_builds_keep_f32_weights(tmp_path):
    model = save(mlp(d_in=64, hidden=128, d_out=10), tmp_path / "mlp.onnx")
    _, keys = _weights_bytes(_build(tmp_path, model, "fp32"))
    assert not any("#cast:" in k for k in keys), keys


def test_bf16_rounding_is_round_to_nearest_even():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    special = np.array([0.0, -0.0, 1.0, np.inf, -np.inf, np.finfo(np.float32).max, -np.finfo(np.float32).max,
                        1e-40, -1e-40, np.finfo(np.float32).tiny], np.float32)
    bits = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    ties = (bits & np.uint32(0xFFFF0000)) | np.uint32(0x8000)  # exactly half way: to even
    values = np.concatenate([special, bits.view(np.float32), ties.view(np.float32)])
    values = values[~np.isnan(values)]
    ours = weight_casts.cast(values, "bf16")
    ref = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(ours, ref)
    assert np.isnan(weight_casts.bf16_to_f32(weight_casts.cast(np.array([np.nan], np.float32), "bf16"))).all()
    f16 = weight_casts.cast(values, "f16")
    assert f16.dtype == np.float16 and np.array_equal(f16, values.astype(np.float16))


def test_cast_keys_round_trip():
    assert weight_casts.parse_key(weight_casts.cast_key("L0.attn.q.w", "bf16")) == ("L0.attn.q.w", "bf16")
    assert weight_casts.parse_key("w#q:int8") is None and weight_casts.parse_key("w#cast:f8") is None
