"""inferx-cpu-math on this CPU: erf as a division-free piecewise polynomial and divisions by
constants as multiplications, checked value by value against erf in float64 (absolute 2e-7
everywhere, relative 2e-7 below 0.5, where erf is odd and small) and, in an erf GELU, against
onnxruntime fp32 and the same build with the pass disabled (IREE's rational erf)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferx_compiler
from e2e_models import _model
from helpers import artifact_json, onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.compile import main as compile_main

N = 4096


def erf_and_gelu():
    """erf(x) alone, and the ONNX erf GELU x * 0.5 * (1 + erf(x / sqrt 2)) of another input."""
    inits = {"sqrt2": np.array(math.sqrt(2.0), np.float32), "one": np.array(1.0, np.float32),
             "half": np.array(0.5, np.float32)}
    nodes = [helper.make_node("Erf", ["x"], ["erf"], name="erf"),
             helper.make_node("Div", ["g", "sqrt2"], ["a"], name="gelu_div"),
             helper.make_node("Erf", ["a"], ["b"], name="gelu_erf"),
             helper.make_node("Add", ["b", "one"], ["c"], name="gelu_add"),
             helper.make_node("Mul", ["g", "c"], ["d"], name="gelu_mul"),
             helper.make_node("Mul", ["d", "half"], ["gelu"], name="gelu_half")]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [N]) for n in ("x", "g")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [N]) for n in ("erf", "gelu")]
    return _model(nodes, "erf_gelu", inputs, outputs, inits)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("cpu_math")
    path = save(erf_and_gelu(), root / "erf_gelu.onnx")
    out = {}
    for name, extra in (("ours", []), ("iree", ["--disable-pass", "inferx-cpu-math"])):
        assert compile_main([str(path), "--target", "cpu", "--no-measure", "-q", "-o", str(root / f"{name}.ixa"),
                             *extra]) == 0
        out[name] = (inferx_compiler.load(str(root / f"{name}.ixa"), device="cpu"), artifact_json(root / f"{name}.ixa"))
    return path, out


def _inputs() -> dict:
    """Every region of erf: tiny magnitudes (down to 1e-30), around the polynomials' split at 1.5
    and saturation at 4, beyond it, both signs; the GELU's input is the same, shuffled."""
    tiny = np.logspace(-30, -1, 512)
    spread = np.linspace(0.0, 6.0, N // 2 - 512)
    x = np.concatenate([tiny, spread, -tiny, -spread]).astype(np.float32)
    return {"x": x, "g": np.random.default_rng(0).permutation(x * 3).astype(np.float32)}


def test_erf_polynomial_is_within_rounding_of_erf(builds):
    _, out = builds
    model, (_, report) = out["ours"]
    decisions = {d["node"]: d["decision"] for d in report["decisions"] if d["pass"] == "inferx-cpu-math"}
    assert decisions.get("erf") == "erf as a division-free polynomial", decisions
    assert "division by 1.41421354" in decisions.get("gelu_div", ""), decisions
    x = _inputs()["x"]
    got = model.run(_inputs())["erf"].astype(np.float64)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    assert np.abs(got - want).max() <= 2e-7
    small = np.abs(x) < 0.5
    assert (np.abs(got - want)[small] / np.abs(want[small]).clip(1e-300)).max() <= 2e-7
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0] + [0.0] * (N - 5), np.float32)
    y = model.run({"x": special, "g": special})["erf"]
    assert np.isnan(y[0]) and y[1] == 1.0 and y[2] == -1.0 and y[3] == 0.0 and np.signbit(y[4])


def test_gelu_matches_onnxruntime_and_iree(builds):
    path, out = builds
    feeds = _inputs()
    ours, iree = out["ours"][0].run(feeds)["gelu"], out["iree"][0].run(feeds)["gelu"]
    want = onnxruntime_outputs(str(path), feeds)["gelu"]
    assert rel_l2(ours, want) <= 1e-6, rel_l2(ours, want)
    assert rel_l2(ours, iree) <= 1e-6
    _, report = out["iree"][1]
    assert not [d for d in report["decisions"] if d["pass"] == "inferx-cpu-math"]
