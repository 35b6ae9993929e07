"""Ahead-of-time builds in CI: the click CLIs, `--check`, the build cache, reproducibility."""

from __future__ import annotations

import json
import os
import subprocess
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_models import cnn, mlp
from helpers import save
from inferx_compiler.cli.common import python_entry
from inferx_compiler.cli.compile import main as compile_main

F = TensorProto.FLOAT


def _compile_cli(*args, env=None):
    """inferx-compile in a fresh interpreter, as a user runs it."""
    return subprocess.run(python_entry("inferx_compiler.cli.compile") + list(args), capture_output=True,
                          text=True, env=dict(os.environ, **(env or {})))


def _model(nodes, inputs, outputs, inits=(), opsets=(("", 18),)):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def _unpool(name, x, out):
    return helper.make_node("MaxUnpool", [x, "idx"], [out], name=name, kernel_shape=[2, 2], strides=[2, 2])


# -- click CLIs ------------------------------------------------------------------------------

def test_bare_compile_asks_for_a_model():
    proc = _compile_cli()
    assert proc.returncode == 2
    assert "Missing argument 'MODEL'" in proc.stderr and "Usage: inferx-compile" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_target_lists_the_targets(tmp_path):
    path = save(mlp(), tmp_path / "m.onnx")
    proc = _compile_cli(path)
    assert proc.returncode == 2 and "Missing option '--target'" in proc.stderr and "h200" in proc.stderr


def test_help_has_examples_and_completion():
    proc = _compile_cli("--help")
    assert proc.returncode == 0
    assert "inferx-compile model.onnx --target a100 -o model.ixa" in proc.stdout
    assert "_INFERX_COMPILE_COMPLETE=bash_source inferx-compile" in proc.stdout


def test_shell_completion_offers_targets():
    env = {"_INFERX_COMPILE_COMPLETE": "bash_complete", "COMP_WORDS": "inferx-compile --target h",
           "COMP_CWORD": "2"}
    proc = subprocess.run(python_entry("inferx_compiler.cli.compile"), capture_output=True, text=True,
                          env=dict(os.environ, **env))
    offered = {line.split(",", 1)[1] for line in proc.stdout.splitlines()}
    assert offered == {"h100", "h200"}, proc.stdout


def test_batch_sizes_on_a_static_model_fail_before_compiling(tmp_path):
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                   [helper.make_tensor_value_info("x", F, [1, 4])], [helper.make_tensor_value_info("y", F, [1, 4])])
    path = save(model, tmp_path / "static.onnx")
    proc = _compile_cli(path, "--target", "cpu", "--batch-sizes", "1,4", "-o", str(tmp_path / "s.ixa"))
    assert proc.returncode == 2
    assert "Invalid value for '--batch-sizes'" in proc.stderr and "x[1, 4]" in proc.stderr
    assert "imported" not in proc.stderr  # refused before the model was imported
    assert not (tmp_path / "s.ixa").exists()


def test_unnamed_dynamic_dims_keep_one_symbol_from_input_to_output(tmp_path):
    from inferx_compiler.artifact.archive import Artifact

    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                   [helper.make_tensor_value_info("x", F, [None, 4]), ],
                   [helper.make_tensor_value_info("y", F, None)])
    path = save(model, tmp_path / "dyn.onnx")
    out = tmp_path / "dyn.ixa"
    assert compile_main([path, "--target", "cpu", "-o", str(out), "-q"]) == 0
    manifest = Artifact(str(out)).manifest
    assert manifest.inputs[0].shape == ("x_dim0", 4)
    assert manifest.outputs[0].shape == ("x_dim0", 4)


def test_a_zero_sized_dim_stays_static():
    """dim_value 0 (an empty tensor, e.g. ReduceSum's empty axes) is a size, not an unnamed dim."""
    from inferx_compiler.frontend.onnx_import import prepare
    from inferx_compiler.log import BuildLog

    model = _model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="sum")],
                   [helper.make_tensor_value_info("x", F, [None, 3]),
                    helper.make_tensor_value_info("axes", TensorProto.INT64, [0])],
                   [helper.make_tensor_value_info("y", F, None)])
    prepared = prepare(model, name="m", sha256="0", log=BuildLog(quiet=True))
    dims = {vi.name: vi.type.tensor_type.shape.dim for vi in prepared.proto.graph.input}
    assert dims["x"][0].dim_param == "x_dim0"
    assert dims["axes"][0].HasField("dim_value") and dims["axes"][0].dim_value == 0


def test_small_models_get_no_rss_ratio(tmp_path):
    path = save(mlp(), tmp_path / "m.onnx")
    proc = _compile_cli(path, "--target", "cpu", "-o", str(tmp_path / "m.ixa"))
    assert proc.returncode == 0, proc.stderr
    wrote = [ln for ln in proc.stderr.splitlines() if "wrote" in ln and "peak RSS" in ln]
    assert wrote and "x the model" not in wrote[0]


# -- --check -----------------------------------------------------------------------------------

def _check(path, *extra):
    proc = _compile_cli(path, "--target", "cpu", "--check", "--json", "-q", *extra)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else None


def test_check_reports_every_problem_with_its_stage_and_node(tmp_path):
    """One model with a failure in three stages (a custom-domain op, an op torch-mlir cannot
    convert at opset 17, two ops torch-to-linalg cannot lower) and healthy nodes between them."""
    x = helper.make_tensor_value_info("x", F, [1, 4, 9])
    p = helper.make_tensor_value_info("p", F, [1, 1, 2, 2])
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [1, 1, 2, 2])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu_in"),
             helper.make_node("MyOp", ["r"], ["c"], name="custom", domain="acme.ops"),
             helper.make_node("Col2Im", ["r", "isz", "bsz"], ["ci"], name="col2im"),
             _unpool("unpool_a", "p", "u"),
             helper.make_node("Sigmoid", ["u"], ["s"], name="between"),
             _unpool("unpool_b", "s", "y")]
    inits = [numpy_helper.from_array(np.array([4, 4], np.int64), "isz"),
             numpy_helper.from_array(np.array([2, 2], np.int64), "bsz")]
    outputs = [helper.make_tensor_value_info("c", F, [1, 4, 9]), helper.make_tensor_value_info("ci", F, None),
               helper.make_tensor_value_info("y", F, None)]
    path = save(_model(nodes, [x, p, idx], outputs, inits, opsets=(("", 17), ("acme.ops", 3))),
                tmp_path / "many.onnx")
    code, report = _check(path)
    assert code == 1 and not report["ok"] and report["complete"]
    found = {(pr["node"]["name"], pr["node"]["op_type"], pr["stage"]) for pr in report["problems"]}
    assert found == {("custom", "MyOp", "onnx"), ("col2im", "Col2Im", "onnx-to-torch"),
                     ("unpool_a", "MaxUnpool", "torch-to-linalg"), ("unpool_b", "MaxUnpool", "torch-to-linalg")}
    assert all(pr["node"]["opset"] for pr in report["problems"])


def test_check_passes_a_good_model(tmp_path):
    path = save(cnn(), tmp_path / "cnn.onnx")
    code, report = _check(path)
    assert code == 0 and report["ok"] and report["problems"] == []


def test_check_names_string_tensors(tmp_path):
    model = _model([helper.make_node("Identity", ["x"], ["y"], name="passthrough")],
                   [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    code, report = _check(save(model, tmp_path / "s.onnx"))
    assert code == 1
    assert [(p["stage"], p["node"]["name"]) for p in report["problems"]] == [("onnx", "passthrough")]
    assert "string" in report["problems"][0]["message"]


def test_check_reports_an_unreadable_model(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"not a protobuf at all")
    code, report = _check(str(tmp_path / "bad.onnx"))
    assert code == 1 and report["problems"][0]["stage"] == "load"
    assert "not an ONNX model" in report["problems"][0]["message"]


def _f64_pool(tmp_path):
    """MaxPool SAME_LOWER: its lowering adds f64 scalars, which IREE 3.13 cannot legalize when
    f64 demotion is switched off: an IREE-stage failure."""
    model = _model([helper.make_node("MaxPool", ["x"], ["y"], name="pool", auto_pad="SAME_LOWER",
                                     kernel_shape=[2, 2])],
                   [helper.make_tensor_value_info("x", F, [1, 3, 32, 32])],
                   [helper.make_tensor_value_info("y", F, [1, 3, 32, 32])], opsets=(("", 17),))
    return save(model, tmp_path / "pool.onnx")


def test_check_names_the_node_of_an_iree_failure(tmp_path):
    code, report = _check(_f64_pool(tmp_path), "--iree-flag=--iree-input-demote-f64-to-f32=false")
    assert code == 1
    (problem,) = report["problems"]
    assert problem["stage"].startswith("IREE") and problem["node"]["name"] == "pool"
    assert "failed to legalize" in problem["message"]


def test_compile_failures_name_the_onnx_node(tmp_path):
    proc = _compile_cli(_f64_pool(tmp_path), "--target", "cpu", "-o", str(tmp_path / "p.ixa"),
                        "--iree-flag=--iree-input-demote-f64-to-f32=false")
    assert proc.returncode != 0
    assert "ONNX node 'pool' (op_type=MaxPool, domain=ai.onnx, opset=17)" in proc.stderr
    assert "cpu_features" not in proc.stderr  # IREE's target attribute is elided


def test_check_json_goes_with_check(tmp_path):
    proc = _compile_cli(save(mlp(), tmp_path / "m.onnx"), "--target", "cpu", "--json")
    assert proc.returncode == 2 and "--json goes with --check" in proc.stderr


# -- build cache and reproducibility ------------------------------------------------------------

def test_cached_build_is_byte_identical_to_a_fresh_one(tmp_path):
    path = save(mlp(), tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    fresh, first, second = tmp_path / "fresh.ixa", tmp_path / "first.ixa", tmp_path / "second.ixa"
    assert compile_main([path, "--target", "cpu", "-o", str(fresh), "-q"]) == 0
    miss = _compile_cli(path, "--target", "cpu", "-o", str(first), "--cache-dir", str(cache))
    assert miss.returncode == 0 and "build cache: miss" in miss.stderr and "stored as" in miss.stderr
    hit = _compile_cli(path, "--target", "cpu", "-o", str(second), "--report", str(tmp_path / "r.json"),
                       env={"INFERX_CACHE_DIR": str(cache)})
    assert hit.returncode == 0 and "from the build cache" in hit.stderr and "IREE" not in hit.stderr
    assert fresh.read_bytes() == first.read_bytes() == second.read_bytes()
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["cache"].startswith("build cache") and report["dispatches"]
    assert len(list(cache.rglob("*.ixa"))) == 1


def test_cache_key_follows_flags_model_and_tuning_db(tmp_path):
    from inferx_compiler.artifact.build_cache import cache_key, key_inputs
    from inferx_compiler.options import CompileOptions

    path = save(mlp(), tmp_path / "m.onnx")
    other = save(mlp(seed=1), tmp_path / "other.onnx")
    base = cache_key(key_inputs(path, CompileOptions(target="cpu")))
    assert base == cache_key(key_inputs(path, CompileOptions(target="cpu")))
    (tmp_path / "db.json").write_text("{}")
    variants = [key_inputs(path, CompileOptions(target="cpu", precision="fp16")),
                key_inputs(path, CompileOptions(target="x86-avx2")),
                key_inputs(path, CompileOptions(target="cpu", extra_iree_flags=("--iree-opt-level=O2",))),
                key_inputs(path, CompileOptions(target="cpu", tuning_db=str(tmp_path / "db.json"))),
                key_inputs(other, CompileOptions(target="cpu"))]
    keys = {cache_key(v) for v in variants}
    assert len(keys) == len(variants) and base not in keys


def test_measured_bucket_builds_are_not_cached(tmp_path):
    path = save(mlp(), tmp_path / "m.onnx")
    proc = _compile_cli(path, "--target", "cpu", "--batch-sizes", "1,2", "-o", str(tmp_path / "m.ixa"),
                        "--cache-dir", str(tmp_path / "cache"))
    assert proc.returncode == 0 and "build cache: not used (bucket latencies are measured" in proc.stderr
    assert not list((tmp_path / "cache").rglob("*.ixa"))


@pytest.mark.parametrize("target", ["x86-avx2", "a100", "h200"])
def test_builds_are_reproducible(tmp_path, target):
    """Two builds to two paths give the same bytes, CPU and CUDA (CUDA code is compiled here,
    without a GPU)."""
    path = save(mlp(), tmp_path / "m.onnx")
    (tmp_path / "elsewhere").mkdir()
    one, two = tmp_path / "one.ixa", tmp_path / "elsewhere" / "two.ixa"
    assert compile_main([path, "--target", target, "--precision", "fp16", "-o", str(one), "-q"]) == 0
    assert compile_main([path, "--target", target, "--precision", "fp16", "-o", str(two), "-q"]) == 0
    assert one.read_bytes() == two.read_bytes()
    with open(one, "rb") as f:
        assert f.read(2) == b"PK"
    assert onnx.load(path).graph.node  # the model file is untouched by the builds


def test_placeholder_dim_names_are_distinct_symbols(tmp_path):
    """Exporters that write '?' for every dynamic dim do not make those dims equal: two inputs
    whose '?' dims take different sizes run (was: "dynamic dim '?' is 192 here but 48")."""
    import inferx_compiler
    from helpers import onnxruntime_outputs

    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                   [helper.make_tensor_value_info("a", F, ["?", "?"]), helper.make_tensor_value_info("b", F, ["?", 5])],
                   [helper.make_tensor_value_info("y", F, ["?", 5])])
    path = save(model, tmp_path / "q.onnx")
    out = tmp_path / "q.ixa"
    assert compile_main([path, "--target", "cpu", "-o", str(out), "-q"]) == 0
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((3, 7)).astype(np.float32), "b": rng.standard_normal((7, 5)).astype(np.float32)}
    got = inferx_compiler.load(str(out)).run(feeds)["y"]
    np.testing.assert_allclose(got, onnxruntime_outputs(path, feeds)["y"], rtol=1e-5, atol=1e-5)


def test_a_damaged_cache_entry_is_rebuilt(tmp_path):
    path = save(mlp(), tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    first, second = tmp_path / "first.ixa", tmp_path / "second.ixa"
    assert compile_main([path, "--target", "cpu", "-o", str(first), "--cache-dir", str(cache), "-q"]) == 0
    (entry,) = cache.rglob("*.ixa")
    data = bytearray(entry.read_bytes())
    with zipfile.ZipFile(entry) as z:  # a byte inside the largest member's data (not a header's date field)
        member = max(z.infolist(), key=lambda i: i.compress_size)
    start = member.header_offset + 30 + len(member.filename.encode()) + len(member.extra)
    data[start + member.compress_size // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    proc = _compile_cli(path, "--target", "cpu", "-o", str(second), "--cache-dir", str(cache))
    assert proc.returncode == 0 and "build cache: miss" in proc.stderr and "stored as" in proc.stderr
    assert second.read_bytes() == first.read_bytes() == entry.read_bytes()
