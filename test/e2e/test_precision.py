"""Per-layer precision: int8/int4 layers compiled for this CPU, calibrated `auto`, plan files.

Numbers are checked two ways: against onnxruntime fp32 (the error a user sees, which must be
there: a build that silently stayed fp32 fails), and against the onnxruntime emulation of the
plan (calibration.py) that `auto` decides with: the compiled code must compute what was measured.
"""

from __future__ import annotations

import json
import subprocess
import zipfile

import numpy as np
import onnx
import pytest

import inferx_compiler
from e2e_models import random_inputs, sensitive_mlp, tied_lm, wide_mlp
from helpers import emulated_output, onnxruntime_outputs, rel_l2, save
from inferx_compiler.precision import precision_plan
from inferx_compiler.cli.common import python_entry


def _compile(*args) -> subprocess.CompletedProcess:
    proc = subprocess.run(python_entry("inferx_compiler.cli.compile") + [str(a) for a in args],
                          capture_output=True, text=True)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _manifest(artifact) -> dict:
    with zipfile.ZipFile(artifact) as z:
        return json.loads(z.read("manifest.json"))


@pytest.mark.parametrize("precision, weight_ratio", [("int8", 0.27), ("int4", 0.16)])
def test_integer_layers_compute_the_emulated_plan(tmp_path, precision, weight_ratio):
    path = save(wide_mlp(width=256, layers=2), tmp_path / "m.onnx")
    out = tmp_path / f"m_{precision}.ixa"
    proc = _compile(path, "--target", "cpu", "--precision", precision, "--group-size", 64, "-o", out)
    assert proc.returncode == 0, proc.stderr
    feeds = random_inputs(onnx.load(path), 4, seed=3)
    got = inferx_compiler.load(str(out)).run(feeds)["y"]
    ref = onnxruntime_outputs(path, feeds)["y"]
    emulated = emulated_output(path, precision, feeds, 64)
    assert rel_l2(got, emulated) < 2e-3  # the compiled layers compute the measured ones
    error = rel_l2(got, ref)
    assert 1e-3 < error < (0.03 if precision == "int8" else 0.25)  # quantized, and not broken
    manifest = _manifest(out)
    keys_bytes = manifest["weights"]["bytes"]
    fp32_bytes = sum(l["bytes_fp32"] for l in manifest["precision_plan"]["layers"])
    assert keys_bytes < weight_ratio * fp32_bytes + 4096  # the f32 weights are not stored
    assert [l["precision"] for l in manifest["precision_plan"]["layers"]] == [precision] * 2
    report = json.loads(zipfile.ZipFile(out).read("report.json"))
    decided = [d for d in report["decisions"] if d["pass"] == "inferx-quantize-contractions"]
    assert {d["node"] for d in decided} == {"linear0", "linear1"}


def test_tied_weight_is_lowered_only_where_the_layer_reads_it(tmp_path):
    """The embedding table is also the lm_head's weight: at int8 the lm_head reads the int8 copy,
    the Gather still the f32 table (both stored), and the emulation lowers only the lm_head."""
    path = save(tied_lm(), tmp_path / "t.onnx")
    out = tmp_path / "t.ixa"
    proc = _compile(path, "--target", "cpu", "--precision", "int8", "-o", out)
    assert proc.returncode == 0, proc.stderr
    keys = _manifest(out)["weights"]["keys"]
    assert "wte" in keys and "wte#q:int8t" in keys and "w_mid#q:int8" in keys and "w_mid" not in keys
    feeds = {"ids": np.random.default_rng(2).integers(0, 512, (2, 8), dtype=np.int64)}
    got = inferx_compiler.load(str(out)).run(feeds)["logits"]
    assert rel_l2(got, emulated_output(path, "int8", feeds, 128)) < 2e-3
    assert rel_l2(got, onnxruntime_outputs(path, feeds)["logits"]) > 1e-3


def test_auto_keeps_the_sensitive_layer_and_meets_its_budget(tmp_path):
    path = save(sensitive_mlp(), tmp_path / "s.onnx")
    np.savez(tmp_path / "cal.npz", **random_inputs(onnx.load(path), 12, seed=1))
    out, plan_file, chart = tmp_path / "s.ixa", tmp_path / "plan.json", tmp_path / "plan.png"
    proc = _compile(path, "--target", "cpu", "--precision", "auto", "--calibration", tmp_path / "cal.npz",
                    "--accuracy-budget", 0.05, "--emit-plan", plan_file, "--plan-chart", chart, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "sensitivity" in proc.stderr and "fc2" in proc.stderr  # progress and the table
    plan = json.loads(plan_file.read_text())
    chosen = {l["layer"]: l["precision"] for l in plan["layers"]}
    from inferx_compiler.precision.precision_plan import candidates
    from inferx_compiler.targets import get_target

    floats = [c for c in candidates(get_target("cpu")) if not c.startswith("int")]  # fp32, and bf16 where native
    assert chosen["fc2"] in floats  # its int8 error alone is far over budget
    assert all(chosen[f"fc{i}"] in ("int8", "int4") for i in (0, 1, 3))
    sens = {l["layer"]: l["sensitivity"] for l in plan["layers"]}
    assert sens["fc2"]["int8"] > 10 * max(sens[f"fc{i}"]["int8"] for i in (0, 1, 3))
    assert plan["calibration"]["held_out_error"] <= 0.05
    assert _manifest(out)["precision_plan"] == plan
    held_out = random_inputs(onnx.load(path), 8, seed=7)  # samples neither step has seen
    got = inferx_compiler.load(str(out)).run(held_out)["y"]
    assert rel_l2(got, onnxruntime_outputs(path, held_out)["y"]) <= 0.05
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 5000

    replay = tmp_path / "replay.ixa"
    proc = _compile(path, "--target", "cpu", "--precision-plan", plan_file, "-o", replay)
    assert proc.returncode == 0, proc.stderr
    assert replay.read_bytes() == out.read_bytes()


def test_auto_without_calibration_warns_and_follows_the_rule(tmp_path):
    path = save(sensitive_mlp(), tmp_path / "s.onnx")
    proc = _compile(path, "--target", "cpu", "--precision", "auto", "--emit-plan", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stderr
    assert "warning: no calibration data: rule-based plan" in proc.stderr
    plan = json.loads((tmp_path / "p.json").read_text())
    by_layer = {l["layer"]: l for l in plan["layers"]}
    # fc1's weight has an outlier column (max|w|/std over the int4 threshold): at least int8;
    # the first and last layers never go below int8
    assert by_layer["fc1"]["outlier_ratio"] > precision_plan.OUTLIER_RATIO_INT8
    assert {by_layer[n]["precision"] for n in ("fc0", "fc1", "fc3")} == {"int8"}
    assert by_layer["fc2"]["precision"] == "int4"
    assert not (tmp_path / "s.ixa").exists()  # --emit-plan without -o builds nothing


def test_auto_keeps_int4_off_token_rows_on_cpus(tmp_path):
    """The same layers with a sequence dim (rows are tokens, compute-bound): on a CPU the rule
    takes int8 where it took int4 for batch rows (the int4 kernel is the slower one there), and
    the calibrated search neither measures nor picks int4 for them. The plan records the rows."""
    path = save(sensitive_mlp(seq=8), tmp_path / "s.onnx")
    proc = _compile(path, "--target", "cpu", "--precision", "auto", "--emit-plan", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stderr
    by_layer = {l["layer"]: l for l in json.loads((tmp_path / "p.json").read_text())["layers"]}
    assert all(by_layer[f"fc{i}"]["token_rows"] for i in range(4))
    assert by_layer["fc2"]["precision"] == "int8"
    assert "int4" not in {l["precision"] for l in by_layer.values()}
    np.savez(tmp_path / "cal.npz", **random_inputs(onnx.load(path), 8, seed=1))
    proc = _compile(path, "--target", "cpu", "--precision", "auto", "--calibration", tmp_path / "cal.npz",
                    "--accuracy-budget", 0.05, "--emit-plan", tmp_path / "c.json")
    assert proc.returncode == 0, proc.stderr
    calibrated = json.loads((tmp_path / "c.json").read_text())["layers"]
    assert all("int4" not in l["sensitivity"] and "int8" in l["sensitivity"] for l in calibrated)
    assert {l["precision"] for l in calibrated} & {"int8"} and "int4" not in {l["precision"] for l in calibrated}
    # a fixed mode is the user's choice: int4 stays int4 on token rows
    proc = _compile(path, "--target", "cpu", "--precision", "int4", "--emit-plan", tmp_path / "q.json")
    assert proc.returncode == 0, proc.stderr
    assert {l["precision"] for l in json.loads((tmp_path / "q.json").read_text())["layers"]} == {"int4"}


def _bad_calibration(tmp_path, arrays) -> str:
    np.savez(tmp_path / "bad.npz", **arrays)
    return str(tmp_path / "bad.npz")


@pytest.mark.parametrize("case, message", [
    ("name", "missing: x; unknown: z"),
    ("dtype", "input 'x' is float64, the model takes float32"),
    ("shape", "input 'x' has shape [4, 100], the model takes [batch, 256]"),
])
def test_calibration_that_does_not_fit_the_model(tmp_path, case, message):
    path = save(sensitive_mlp(), tmp_path / "s.onnx")
    arrays = {"name": {"z": np.zeros((4, 256), np.float32)},
              "dtype": {"x": np.zeros((4, 256), np.float64)},
              "shape": {"x": np.zeros((4, 100), np.float32)}}[case]
    proc = _compile(path, "--target", "cpu", "--precision", "auto", "--calibration",
                    _bad_calibration(tmp_path, arrays), "-o", tmp_path / "s.ixa")
    assert proc.returncode != 0
    assert message in proc.stderr and "bad.npz" in proc.stderr
    assert not (tmp_path / "s.ixa").exists()


def test_fixed_precision_over_budget_names_the_layers(tmp_path):
    path = save(sensitive_mlp(), tmp_path / "s.onnx")
    np.savez(tmp_path / "cal.npz", **random_inputs(onnx.load(path), 8, seed=1))
    proc = _compile(path, "--target", "cpu", "--precision", "int8", "--calibration", tmp_path / "cal.npz",
                    "--accuracy-budget", 0.05, "-o", tmp_path / "s.ixa")
    assert proc.returncode != 0
    assert "--precision int8 misses --accuracy-budget 0.05" in proc.stderr
    assert "fc2 (fp32)" in proc.stderr and "--precision auto" in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--precision", "fp8", "--target", "h200"], "--precision fp8: not built"),
    (["--precision", "int4", "--target", "ascend910b"], "no executable backend to build integer layers for"),
    (["--precision", "int8", "--target", "cpu", "--accuracy-budget", "0.01"],
     "--accuracy-budget needs --calibration data"),
    (["--precision", "int4", "--target", "cpu", "--group-size", "3"], "--group-size must be a positive even number"),
])
def test_precision_requests_refused(tmp_path, args, message):
    path = save(sensitive_mlp(), tmp_path / "s.onnx")
    proc = _compile(path, *args, "-o", tmp_path / "s.ixa")
    assert proc.returncode != 0
    assert message in proc.stderr


def test_plan_of_another_model_is_refused(tmp_path):
    path = save(sensitive_mlp(), tmp_path / "s.onnx")
    other = save(wide_mlp(width=256, layers=2), tmp_path / "w.onnx")
    assert _compile(other, "--target", "cpu", "--precision", "int8", "--emit-plan", tmp_path / "p.json").returncode == 0
    proc = _compile(path, "--target", "cpu", "--precision-plan", tmp_path / "p.json", "-o", tmp_path / "s.ixa")
    assert proc.returncode != 0
    assert "layer 'linear0' is not a weight layer of this model" in proc.stderr


def test_quantizers_round_trip_and_pack_as_iree_reads_i4():
    from inferx_compiler.precision import quantization as q

    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 12)).astype(np.float32)
    scheme = q.WeightScheme("int4", 16)
    stored, scale = q.stored_arrays(w, scheme)
    assert stored.dtype == np.uint8 and stored.size == 64 * 12 // 2 and scale.shape == (4, 12)
    values = q.unpack_int4(stored, (4, 16, 12))
    assert values.min() >= -7 and values.max() <= 7
    assert np.array_equal(values, q.quantize_int4(w, 16)[0])
    w8, s8 = q.requantize_int4_to_int8(values, scale)  # the CPU computes int4 as int8 per column
    assert np.allclose(w8 * s8, q.fake_quantize(w, scheme))
    assert np.abs(w8 * s8 - (values * scale[:, None, :]).reshape(64, 12)).max() <= 0.5 * s8.max() + 1e-6
    gpu = q.WeightScheme("int4", 16, f16_scales=True)  # the GPU dequantizes int4 groups directly
    assert np.allclose((values * scale[:, None, :].astype(np.float16)).reshape(64, 12), q.fake_quantize(w, gpu),
                       rtol=1e-3)
    assert q.pack_int4(np.array([1, -2], np.int8))[0] == 0xE1  # element 0 in the low nibble
    assert q.parse_key(scheme.scale_key("a#b")) == ("a#b", scheme, True)
    assert q.parse_key("plain.weight") is None
    err = np.linalg.norm(q.fake_quantize(w, q.WeightScheme("int8")) - w) / np.linalg.norm(w)
    assert 1e-4 < err < 1e-2


def test_a_replayed_plan_prints_the_same_table():
    """A sensitivity whose 3-digit rounding differs from the 3-digit rounding of its stored
    4-digit form (0.100450001 -> 1.00e-01, but stored 0.1005 -> 1.01e-01): the table is printed
    from the stored value, so a build and its replay write the same report."""
    from inferx_compiler.precision.precision_plan import Layer, PrecisionPlan, format_table, stored_sensitivity

    def plan(value):
        layer = Layer("fc0", "MatMul", "w0", [64, 64], "int8", sensitivity={"int8": value})
        return PrecisionPlan(mode="auto", target="cpu", layers=[layer])

    measured = 0.100450001
    assert f"{measured:.2e}" != f"{stored_sensitivity(measured):.2e}"  # the case this is about
    assert format_table(plan(measured)) == format_table(plan(stored_sensitivity(measured)))


def test_plan_chart_legend_has_each_precisions_colour(tmp_path):
    """Each legend entry is drawn in its precision's bar colour (it showed every entry blue)."""
    from matplotlib.colors import to_hex

    from inferx_compiler.precision.precision_plan import CHART_COLOURS, Layer, PrecisionPlan, chart_figure

    layers = [Layer("fc0", "MatMul", "w0", [64, 64], "int8"), Layer("fc1", "MatMul", "w1", [64, 64], "fp32"),
              Layer("fc2", "MatMul", "w2", [64, 64], "int4")]
    fig = chart_figure(PrecisionPlan(mode="auto", target="cpu", layers=layers))
    legend = fig.axes[0].get_legend()
    entries = {text.get_text(): to_hex(handle.get_facecolor()) for text, handle in
               zip(legend.get_texts(), legend.legend_handles)}
    assert entries == {p: CHART_COLOURS[p] for p in ("fp32", "int8", "int4")}
