"""Bad input exits non-zero with a clear message that names what is wrong, never a traceback."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferx_compiler
from helpers import save
from inferx_compiler.errors import InputValidationError
from e2e_models import mlp


def _cli(*args):
    from inferx_compiler.cli.common import python_entry

    proc = subprocess.run(python_entry(f"inferx_compiler.cli.{args[0]}") + list(args[1:]),
                          capture_output=True, text=True)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_not_an_onnx_file(tmp_path):
    bogus = tmp_path / "model.onnx"
    bogus.write_bytes(b"this is not a protobuf \x00\xff\xfe")
    proc = _cli("compile", str(bogus), "--target", "cpu", "-o", str(tmp_path / "m.ixa"))
    assert proc.returncode != 0
    assert "model.onnx: not an ONNX model" in proc.stderr
    assert not (tmp_path / "m.ixa").exists()


def test_missing_file(tmp_path):
    proc = _cli("compile", str(tmp_path / "nope.onnx"), "--target", "cpu")
    assert proc.returncode != 0 and "no such file" in proc.stderr


def test_unknown_target_lists_valid_names(tmp_path):
    path = save(mlp(), tmp_path / "m.onnx")
    proc = _cli("compile", path, "--target", "tpu9000")
    assert proc.returncode != 0
    assert "unknown target 'tpu9000'" in proc.stderr
    for name in ("cpu", "a100", "h200", "orin", "ascend910b"):
        assert name in proc.stderr


def _graph_with(nodes, opsets=(("", 17),)):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def test_every_unsupported_node_is_named(tmp_path):
    model = _graph_with([
        helper.make_node("Relu", ["x"], ["a"], name="relu_ok"),
        helper.make_node("DFT", ["a"], ["b"], name="spectrum"),
        helper.make_node("LpPool", ["b"], ["c"], name="pool_lp", kernel_shape=[2]),
        helper.make_node("Col2Im", ["c"], ["y"], name="fold"),
    ])
    proc = _cli("compile", save(model, tmp_path / "u.onnx"), "--target", "cpu")
    assert proc.returncode != 0
    assert "3 node(s) use ops that inferx-compile cannot lower" in proc.stderr
    for line in ("node 'spectrum': op_type=DFT domain=ai.onnx opset=17",
                 "node 'pool_lp': op_type=LpPool", "node 'fold': op_type=Col2Im"):
        assert line in proc.stderr
    assert "relu_ok" not in proc.stderr


def test_foreign_domain_ops_are_named(tmp_path):
    model = _graph_with([
        helper.make_node("FusedGemm", ["x"], ["a"], name="contrib_gemm", domain="com.microsoft"),
        helper.make_node("MyOp", ["a"], ["y"], name="custom", domain="acme.ops"),
    ], opsets=(("", 17), ("com.microsoft", 1), ("acme.ops", 3)))
    proc = _cli("compile", save(model, tmp_path / "c.onnx"), "--target", "cpu")
    assert proc.returncode != 0
    assert "node 'contrib_gemm': op_type=FusedGemm domain=com.microsoft opset=1" in proc.stderr
    assert "node 'custom': op_type=MyOp domain=acme.ops opset=3" in proc.stderr


@pytest.fixture(scope="module")
def mlp_session(tmp_path_factory):
    root = tmp_path_factory.mktemp("err")
    path = save(mlp(), root / "m.onnx")
    inferx_compiler.compile_onnx(path, target="cpu", output=str(root / "m.ixa"))
    return inferx_compiler.load(str(root / "m.ixa"))


@pytest.mark.parametrize("feeds,message", [
    ({}, "missing input(s): x"),
    ({"x": np.zeros((2, 64), np.float32), "extra": np.zeros(1)}, "unexpected input(s): extra"),
    ({"x": np.zeros((2, 64), np.float64)}, "input 'x': expected dtype float32, got float64"),
    ({"x": np.zeros((2, 63), np.float32)}, "input 'x': expected shape [batch, 64], got [2, 63]"),
    ({"x": np.zeros((64,), np.float32)}, "expected rank 2 shape [batch, 64], got rank 1 shape [64]"),
])
def test_bad_runtime_inputs(mlp_session, feeds, message):
    with pytest.raises(InputValidationError) as err:
        mlp_session.run(feeds)
    assert message in str(err.value)


def test_cli_run_bad_input_exits_nonzero(tmp_path, mlp_session):
    np.savez(tmp_path / "in.npz", x=np.zeros((2, 5), np.float32))
    proc = _cli("run", mlp_session.artifact.path, "--inputs", str(tmp_path / "in.npz"),
                "--outputs", str(tmp_path / "out.npz"))
    assert proc.returncode != 0
    assert "expected shape [batch, 64], got [2, 5]" in proc.stderr
    assert not (tmp_path / "out.npz").exists()


def test_cpu_artifact_refuses_cuda_device(mlp_session):
    from inferx_compiler.errors import DeviceError

    with pytest.raises(DeviceError, match="runs on 'cpu' devices, not on 'cuda:0'"):
        inferx_compiler.load(mlp_session.artifact.path, device="cuda:0")


def test_not_an_artifact(tmp_path):
    (tmp_path / "x.ixa").write_bytes(b"nope")
    proc = _cli("run", str(tmp_path / "x.ixa"), "--inputs", "a.npz", "--outputs", "b.npz")
    assert proc.returncode != 0


def test_pipeline_failure_saves_reproducer(tmp_path, monkeypatch):
    """A failing pass saves its input IR and prints an inferx-opt command that reproduces it."""
    import re
    import shlex

    from inferx_compiler.errors import PipelineError
    from inferx_compiler.mlir_contexts import new_graph_context
    from inferx_compiler.passes.infra.pipeline import run_pipeline
    from torch_mlir import ir

    monkeypatch.setenv("INFERX_REPRO_DIR", str(tmp_path))
    src = """func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
      %0 = linalg.matmul {inferx.precision = "f8"} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
      return %0 : tensor<4x16xf32>
    }"""
    with new_graph_context():
        module = ir.Module.parse(src)
        with pytest.raises(PipelineError) as err:
            run_pipeline(module.operation, "builtin.module(canonicalize,inferx-apply-precision)", "graph",
                         stage="graph")
    message = str(err.value)
    assert 'inferx.precision must be one of' in message
    command = re.search(r"reproduce with:\n  (.*)", message).group(1)
    argv = shlex.split(command)
    assert argv[0] == "inferx-opt" and argv[1].startswith(str(tmp_path))
    proc = _cli("opt", *argv[1:])
    assert proc.returncode != 0 and "inferx.precision must be one of" in proc.stderr


def test_iree_failure_prints_an_iree_compile_reproducer(tmp_path, monkeypatch):
    """A failing IREE phase saves its input and prints an iree-compile command that fails the same
    way. (Forcing f64 on a model whose MaxPool lowering adds f64 scalars fails in IREE 3.13.)"""
    import re
    import shlex
    import shutil

    monkeypatch.setenv("INFERX_REPRO_DIR", str(tmp_path))
    g = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y"], name="pool", auto_pad="SAME_LOWER",
                                            kernel_shape=[2, 2])], "pool",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 32, 32])])
    path = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "p.onnx")
    proc = _cli("compile", path, "--target", "cpu", "-o", str(tmp_path / "p.ixa"),
                "--iree-flag=--iree-input-demote-f64-to-f32=false")
    assert proc.returncode != 0 and "IREE compile to executable-sources failed" in proc.stderr
    command = re.search(r"reproduce with:\n  (iree-compile .*)", proc.stderr).group(1)
    argv = shlex.split(command)
    tool = shutil.which("iree-compile")
    if tool is None:
        pytest.skip("iree-compile not on PATH")
    again = subprocess.run([tool] + argv[1:-2] + ["-o", str(tmp_path / "out.vmfb")], capture_output=True, text=True)
    assert again.returncode != 0 and "failed to legalize" in again.stderr


def test_iree_diagnostics_do_not_spell_out_the_target():
    """IREE prints its executable target (thousands of characters of CPU features) in codegen
    errors; inferx keeps the backend and format only."""
    from inferx_compiler.passes.infra.pipeline import shorten_targets

    features = ",".join(f"+f{i}" for i in range(500))
    message = (f'failed to translate for backend #hal.executable.target<"llvm-cpu", "embedded-elf-x86_64", '
               f'{{cpu_features = "{features}", nested = #iree_cpu.x<a = <1>>}}> (stage 2)')
    short = shorten_targets(message)
    assert short == 'failed to translate for backend #hal.executable.target<"llvm-cpu", "embedded-elf-x86_64", ...> (stage 2)'
    assert shorten_targets("no target here") == "no target here"
