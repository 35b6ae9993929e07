"""Every target in the table compiles the example model; CPU-only facts of each are checked."""

from __future__ import annotations

import json
import zipfile

import pytest

from helpers import save
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.targets import all_targets, get_target
from e2e_models import cnn, mlp

NON_HOST = [name for name in all_targets() if name != "cpu"]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return save(cnn(), tmp_path_factory.mktemp("targets") / "cnn.onnx")


@pytest.mark.parametrize("target", NON_HOST)
def test_compiles_for_target(model_path, tmp_path, target):
    out = tmp_path / f"{target}.ixa"
    assert compile_main([model_path, "--target", target, "-o", str(out), "-q"]) == 0
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        names = zf.namelist()
    t = get_target(target)
    assert manifest["target"]["name"] == target
    assert manifest["executable"] == t.executable
    if t.executable:
        assert "module.vmfb" in names and manifest["iree_flags"] == t.iree_flags()
    else:
        assert "module.mlir" in names and "module.vmfb" not in names
        assert any("no executable" in n for n in manifest["notes"])
        assert "linalg" in zipfile.ZipFile(out).read("module.mlir").decode()


def test_hopper_route_is_recorded():
    for name in ("h100", "h200"):
        t = get_target(name)
        assert t.arch == "sm_90" and t.cuda_target == "sm_80"
        assert "sm_80 PTX" in t.route_note
        assert "--iree-cuda-target=sm_80" in t.iree_flags()


def test_ascend_refuses_vmfb(tmp_path):
    path = save(mlp(), tmp_path / "m.onnx")
    assert compile_main([path, "--target", "ascend910b", "--emit", "vmfb", "-o", str(tmp_path / "x.vmfb"),
                         "-q"]) != 0
    assert not (tmp_path / "x.vmfb").exists()


def test_list_targets(capsys):
    assert compile_main(["--list-targets"]) == 0
    out = capsys.readouterr().out
    for name in all_targets():
        assert name in out


def test_dump_pipeline_names_every_stage(capsys):
    assert compile_main(["--target", "cpu", "--dump-pipeline", "--precision", "fp16"]) == 0
    out = capsys.readouterr().out
    for stage in ("onnx-to-torch", "torch-to-linalg", "inferx-annotate-precision{precision=f16",
                  "inferx-lower-to-linalg", "inferx-bind-parameters{scope=model}",
                  "--compile-to=executable-sources", "inferx-dispatch-report",
                  "--compile-from=executable-sources"):
        assert stage in out, stage


def test_vector_widths_are_data():
    assert get_target("x86-avx512").vector_width("f32") == 16
    assert get_target("x86-avx2").vector_width("f32") == 8
    assert get_target("orin-cpu").vector_width("f16") == 8
    assert get_target("ascend910b").vector_width("i16") == 256


def test_cuda_fp16_demotes_only_static_convolutions():
    """IREE 3.13 miscompiles its own f16 convolutions for CUDA (ResNet-50 rel err 0.25 on an H200):
    there only static convolutions, which inferx-conv-strategy turns into matmuls, are demoted;
    with the conv strategy off none is."""
    from inferx_compiler.build_plan import graph_decision_pipeline
    from inferx_compiler.options import CompileOptions

    assert "convolutions=static" in graph_decision_pipeline(CompileOptions(target="h200", precision="fp16"))
    assert "convolutions=none" in graph_decision_pipeline(
        CompileOptions(target="h200", precision="fp16", conv_algorithms="none"))
    assert "convolutions=all" in graph_decision_pipeline(CompileOptions(target="cpu", precision="fp16"))
    assert graph_decision_pipeline(CompileOptions(target="a100")) == "builtin.module()"


def test_cpu_targets_set_the_data_tiled_matmul_tile_budget():
    """Every llvm-cpu build sets IREE's process-wide matmul tile budget (so that one build's value
    never carries into the next one of the process): IREE's default unless the target record
    names one; a user's --iree-flag of the same option replaces the target's."""
    from inferx_compiler.build_plan import iree_flags
    from inferx_compiler.options import CompileOptions
    from inferx_compiler.targets import IREE_MATMUL_TILE_BYTES

    host = get_target("cpu")
    assert f"--iree-llvmcpu-matmul-tile-bytes={IREE_MATMUL_TILE_BYTES}" in host.iree_flags()
    assert f"--iree-llvmcpu-matmul-tile-bytes={IREE_MATMUL_TILE_BYTES}" in get_target("x86-avx512").iree_flags()
    assert not any("matmul-tile-bytes" in f for f in get_target("h200").iree_flags())
    user = "--iree-llvmcpu-matmul-tile-bytes=4096"
    flags = iree_flags(host, CompileOptions(target="cpu", extra_iree_flags=(user,)))
    assert [f for f in flags if "matmul-tile-bytes" in f] == [user]
