"""Compile the example models for the host CPU and check them against onnxruntime."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

import inferx_compiler
from helpers import artifact_json, onnxruntime_outputs, rel_l2, save
from e2e_models import MODELS, random_inputs
from inferx_compiler.cli.compile import main as compile_main

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """name -> (onnx path, artifact path), each model compiled once for `cpu`."""
    out = {}
    root = tmp_path_factory.mktemp("models")
    for name, build in MODELS.items():
        onnx_path = save(build(), root / f"{name}.onnx")
        artifact = str(root / f"{name}.ixa")
        assert compile_main([onnx_path, "--target", "cpu", "-o", artifact, "-q"]) == 0
        out[name] = (onnx_path, artifact)
    return out


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("batch", [1, 3])
def test_matches_onnxruntime(compiled, name, batch):
    onnx_path, artifact = compiled[name]
    import onnx

    feeds = random_inputs(onnx.load(onnx_path), batch, seed=batch)
    expected = onnxruntime_outputs(onnx_path, feeds)
    got = inferx_compiler.load(artifact, device="cpu").run(feeds)
    assert list(got) == list(expected)
    for key in expected:
        assert got[key].shape == expected[key].shape
        err = rel_l2(got[key], expected[key])
        assert err <= TOLERANCE, f"{name} b{batch} output {key}: relative L2 {err:.2e}"


def test_manifest_describes_interface(compiled):
    _, artifact = compiled["mlp"]
    with zipfile.ZipFile(artifact) as zf:
        assert zf.namelist() == ["manifest.json", "module.vmfb", "weights.irpa", "report.json"]
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["format"] == "inferx-artifact" and manifest["format_version"] == 2
    with zipfile.ZipFile(artifact) as zf:  # the weights stored (mapped in place), the rest deflated
        kinds = {i.filename: i.compress_type for i in zf.infolist()}
    assert kinds == {"manifest.json": zipfile.ZIP_DEFLATED, "module.vmfb": zipfile.ZIP_DEFLATED,
                     "weights.irpa": zipfile.ZIP_STORED, "report.json": zipfile.ZIP_DEFLATED}
    assert manifest["target"]["name"] == "cpu"
    assert manifest["inputs"] == [{"name": "x", "dtype": "float32", "shape": ["batch", 64]}]
    assert manifest["outputs"] == [{"name": "y", "dtype": "float32", "shape": ["batch", 10]}]
    assert manifest["weights"]["count"] == 2  # w1 (64x128) and w2 (128x10) cross the threshold
    assert "--iree-hal-local-target-device-backends=llvm-cpu" in manifest["iree_flags"]
    assert set(manifest["compiler"]) >= {"iree-base-compiler", "torch-mlir", "onnx"}
    assert manifest["precision_plan"]["mode"] == "fp32"
    assert len(manifest["model"]["sha256"]) == 64


def test_session_metadata(compiled):
    sess = inferx_compiler.load(compiled["transformer"][1])
    assert [s.name for s in sess.inputs] == ["x"]
    assert sess.inputs[0].shape == ("batch", 16, 64)
    assert sess.device == "cpu:sync"  # `cpu` chose the caller's thread: 0.3 MFLOP a call at batch 1


def test_dispatch_report_in_artifact(compiled):
    from inferx_compiler.artifact.archive import Artifact

    report = Artifact(compiled["cnn"][1]).report
    kinds = [d["kind"] for d in report["dispatches"]]
    # two convolutions (IREE hands them over as linalg.generic contractions) and the Gemm
    assert kinds.count("contraction") >= 3, report["dispatches"]


def test_reproducible_bytes(tmp_path):
    onnx_path = save(MODELS["mlp"](), tmp_path / "m.onnx")
    (tmp_path / "a").mkdir()
    first, second = tmp_path / "a" / "one.ixa", tmp_path / "two.ixa"
    assert compile_main([onnx_path, "--target", "cpu", "-o", str(first), "-q"]) == 0
    assert compile_main([onnx_path, "--target", "cpu", "-o", str(second), "-q"]) == 0
    assert first.read_bytes() == second.read_bytes()


def test_cli_run_npz(compiled, tmp_path):
    from inferx_compiler.cli.run import main as run_main

    onnx_path, artifact = compiled["cnn"]
    import onnx

    feeds = random_inputs(onnx.load(onnx_path), 2)
    np.savez(tmp_path / "in.npz", **feeds)
    assert run_main([artifact, "--inputs", str(tmp_path / "in.npz"), "--outputs",
                     str(tmp_path / "out.npz")]) == 0
    got = dict(np.load(tmp_path / "out.npz"))
    expected = onnxruntime_outputs(onnx_path, feeds)
    assert set(got) == {"logits"}
    assert rel_l2(got["logits"], expected["logits"]) <= TOLERANCE


def test_emit_vmfb_runs_with_iree_run_module(tmp_path):
    import shutil
    import subprocess

    onnx_path = save(MODELS["mlp"](), tmp_path / "m.onnx")
    vmfb = tmp_path / "m.vmfb"
    assert compile_main([onnx_path, "--target", "cpu", "--emit", "vmfb", "-o", str(vmfb), "-q"]) == 0
    tool = shutil.which("iree-run-module")
    if tool is None:
        pytest.skip("iree-run-module not on PATH")
    x = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    proc = subprocess.run([tool, f"--module={vmfb}", "--device=local-task", "--function=main",
                           f"--input=@{tmp_path / 'x.npy'}", f"--output=@{tmp_path / 'y.npy'}"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    expected = onnxruntime_outputs(onnx_path, {"x": x})["y"]
    assert rel_l2(np.load(tmp_path / "y.npy"), expected) <= TOLERANCE


@pytest.mark.parametrize("emit,marker", [("torch", "torch.aten"), ("linalg", "linalg.matmul"),
                                         ("inferx", "linalg.matmul"),
                                         ("executable-sources", "hal.executable")])
def test_emit_stages(tmp_path, emit, marker):
    onnx_path = save(MODELS["mlp"](), tmp_path / "m.onnx")
    out = tmp_path / f"m.{emit}.mlir"
    assert compile_main([onnx_path, "--target", "cpu", "--emit", emit, "-o", str(out), "-q"]) == 0
    assert marker in out.read_text()


def _norm_block(d=768, s=128, n=256, seed=0):
    """x + pos -> LayerNormalization -> MatMul d x n + bias -> MatMul n x d -> + (x + pos): a
    GPT-2-like block whose layer norm IREE 3.13 cannot compile with aggressive dispatch fusion
    on CPU (its dispatch exceeds the 32 KiB stack limit at d = 768, s = 128)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    arrays = {"g": rng.standard_normal(d), "b": rng.standard_normal(d), "pos": rng.standard_normal((s, d)),
              "w": rng.standard_normal((d, n)) / np.sqrt(d), "wb": rng.standard_normal(n),
              "w2": rng.standard_normal((n, d)) / np.sqrt(n)}
    inits = [numpy_helper.from_array(a.astype(np.float32), name) for name, a in arrays.items()]
    nodes = [helper.make_node("Add", ["x", "pos"], ["h"], name="embed"),
             helper.make_node("LayerNormalization", ["h", "g", "b"], ["n"], axis=-1, epsilon=1e-5, name="ln"),
             helper.make_node("MatMul", ["n", "w"], ["q"], name="up"),
             helper.make_node("Add", ["q", "wb"], ["qb"], name="up_bias"),
             helper.make_node("MatMul", ["qb", "w2"], ["o"], name="down"),
             helper.make_node("Add", ["o", "h"], ["y"], name="residual")]
    graph = helper.make_graph(nodes, "norm_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, d])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_aggressive_fusion_fallback(tmp_path, capfd):
    """CPU targets build with IREE's aggressive dispatch fusion; where IREE fails with it (this
    layer norm), the build goes through without it, keeping data tiling, says so, and records
    the flags it really used."""
    from inferx_compiler.targets import AGGRESSIVE_FUSION_FLAG, get_target

    assert AGGRESSIVE_FUSION_FLAG in get_target("x86-avx512").iree_flags()
    path = save(_norm_block(), tmp_path / "norm.onnx")
    out = tmp_path / "norm.ixa"
    assert compile_main([path, "--target", "x86-avx512", "--no-measure", "-o", str(out)]) == 0
    assert "IREE failed with aggressive dispatch fusion" in capfd.readouterr().err
    manifest, _ = artifact_json(out)
    assert AGGRESSIVE_FUSION_FLAG not in manifest["iree_flags"]
    assert "--iree-opt-data-tiling=true" in manifest["iree_flags"] and not manifest.get("notes")
    if "avx512f" in get_target("cpu").features:
        x = np.random.default_rng(1).standard_normal((1, 128, 768)).astype(np.float32)
        got = inferx_compiler.load(str(out)).run({"x": x})["y"]
        assert rel_l2(got, onnxruntime_outputs(path, {"x": x})["y"]) <= 1e-4


def test_data_tiling_fallback(tmp_path, capfd):
    """IREE 3.13's data tiling rejects some bool-masked attention graphs; the build goes through
    without it, says so (and in the manifest's notes), and records the flags it really used."""
    from onnx.backend.test.case.node import collect_testcases

    case = next(c for c in collect_testcases(None) if c.name == "test_attention_4d_attn_mask_bool_expanded")
    path = save(case.model, tmp_path / "attn.onnx")
    assert compile_main([path, "--target", "cpu", "-o", str(tmp_path / "attn.ixa"), "-q"]) == 0
    assert "building again without data tiling" in capfd.readouterr().err  # -q drops progress, not warnings
    sess = inferx_compiler.load(str(tmp_path / "attn.ixa"))
    assert "--iree-opt-data-tiling=false" in sess.artifact.manifest.iree_flags
    assert any(n.startswith("built without data tiling: IREE failed with it") for n in sess.artifact.manifest.notes)
    inputs, outputs = case.data_sets[0]
    got = sess.run({s.name: x for s, x in zip(sess.inputs, inputs)})
    assert rel_l2(next(iter(got.values())), outputs[0]) <= 1e-4
