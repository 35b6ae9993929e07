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
    from inferx_compiler.build import resolve_build
    from inferx_compiler.build_plan import graph_decision_pipeline
    from inferx_compiler.options import CompileOptions

    def pipeline(**request):
        return graph_decision_pipeline(resolve_build(CompileOptions(**request)))

    assert "convolutions=static" in pipeline(target="h200", precision="fp16")
    assert "convolutions=none" in pipeline(target="h200", precision="fp16", conv_algorithms="none")
    assert "convolutions=none" in pipeline(target="h200", precision="fp16",
                                           disabled_passes=("inferx-conv-strategy",))
    assert "convolutions=all" in pipeline(target="cpu", precision="fp16")
    assert pipeline(target="a100") == "builtin.module()"


def test_cpu_targets_set_the_data_tiled_matmul_tile_budget():
    """Every llvm-cpu build sets IREE's process-wide matmul tile budget (so that one build's value
    never carries into the next one of the process): half the record's per-core L2, at least
    IREE's default, unless the record names one; a user's --iree-flag of the same option replaces
    the target's."""
    from inferx_compiler.build import resolve_build
    from inferx_compiler.build_plan import iree_flags
    from inferx_compiler.options import CompileOptions
    from inferx_compiler.targets import IREE_MATMUL_TILE_BYTES, matmul_tile_bytes_for

    assert matmul_tile_bytes_for(256 * 1024) == IREE_MATMUL_TILE_BYTES
    assert matmul_tile_bytes_for(512 * 1024) == IREE_MATMUL_TILE_BYTES  # Zen 3: 1 MiB measured slower
    assert matmul_tile_bytes_for(None) == IREE_MATMUL_TILE_BYTES
    assert matmul_tile_bytes_for(2**20) == matmul_tile_bytes_for(2 * 2**20) == 2**20
    host = get_target("cpu")
    assert f"--iree-llvmcpu-matmul-tile-bytes={matmul_tile_bytes_for(host.l2_bytes)}" in host.iree_flags()
    assert "--iree-llvmcpu-matmul-tile-bytes=1048576" in get_target("x86-avx512").iree_flags()  # 1 MiB L2
    assert f"--iree-llvmcpu-matmul-tile-bytes={IREE_MATMUL_TILE_BYTES}" in get_target("x86-avx2").iree_flags()
    assert not any("matmul-tile-bytes" in f for f in get_target("h200").iree_flags())
    for name in ("cpu", "x86-avx2", "x86-avx512"):  # f32 reductions in vector lanes (Target.iree_flags says why)
        assert "--iree-llvmcpu-reassociate-fp-reductions=true" in get_target(name).iree_flags()
    user = "--iree-llvmcpu-matmul-tile-bytes=4096"
    flags = iree_flags(resolve_build(CompileOptions(target="cpu", extra_iree_flags=(user,))))
    assert [f for f in flags if "matmul-tile-bytes" in f] == [user]


def test_cpu_targets_name_every_data_tiled_op_family():
    """IREE's data-tiling op list is a process-wide list option: every CPU target names the same
    three families (naming only `convolution` would drop matmul data tiling), and only targets
    with the NCHWc conv microkernel (AVX-512) enable it."""
    listed = [f"--iree-dispatch-creation-experimental-set-data-tiling-ops={op}"
              for op in ("matmul", "scaled_matmul", "convolution")]
    for name in ("cpu", "x86-avx2", "x86-avx512", "aarch64", "orin-cpu"):
        t = get_target(name)
        flags = t.iree_flags()
        assert [f for f in flags if "set-data-tiling-ops" in f] == listed
        assert ("--iree-llvmcpu-enable-ukernels=mmt4d,conv_nchwc" in flags) == t.conv_microkernel
    assert get_target("x86-avx512").conv_microkernel and not get_target("x86-avx2").conv_microkernel
    assert not get_target("aarch64").conv_microkernel


def test_builds_with_other_process_wide_iree_options_run_in_a_fresh_process(tmp_path, monkeypatch):
    """IREE takes its process-wide options once per process; a later in-process build that needs
    other values (another CPU target's matmul tile budget: x86-avx2 after this CPU, or forced
    with an extra IREE flag) runs IREE in a child interpreter and gives the same answers; a
    failure in the child comes back as the same error. The child imports what the caller
    imported, even from a working directory holding another `inferx_compiler` (a source
    checkout, whose passes/ is not where the installed package has it)."""
    decoy = tmp_path / "cwd" / "inferx_compiler"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise ImportError('the decoy in the working directory was imported')\n")
    monkeypatch.chdir(decoy.parent)
    import numpy as np

    import inferx_compiler
    from helpers import onnxruntime_outputs
    from inferx_compiler.backend import iree_global_options
    from inferx_compiler.driver import CompileOptions, compile_onnx_file, write_result
    from inferx_compiler.errors import PipelineError
    from inferx_compiler.log import BuildLog

    path = save(mlp(), tmp_path / "m.onnx")
    inferx_compiler.compile_onnx(path, target="cpu", output=str(tmp_path / "first.ixa"))
    applied = iree_global_options.applied()["iree-llvmcpu-matmul-tile-bytes"]
    other = "--iree-llvmcpu-matmul-tile-bytes=" + str(int(applied[0]) * 2)
    log = BuildLog(quiet=True)
    result = compile_onnx_file(path, CompileOptions(target="cpu", extra_iree_flags=(other,)), log)
    write_result(result, str(tmp_path / "second.ixa"))
    assert any("IREE in a fresh process" in line for line in log.lines)
    assert any("(child) IREE: wrote the VM module" in line for line in log.lines)
    assert iree_global_options.applied()["iree-llvmcpu-matmul-tile-bytes"] == applied  # untouched here
    assert other in result.manifest.iree_flags and result.dispatches
    feeds = {"x": np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)}
    expected = onnxruntime_outputs(path, feeds)["y"]
    got = inferx_compiler.load(str(tmp_path / "second.ixa")).run(feeds)["y"]
    assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()
    with pytest.raises(PipelineError, match="IREE rejected the compiler flags"):
        compile_onnx_file(path, CompileOptions(target="cpu", extra_iree_flags=(other, "--iree-no-such-flag=1")),
                          BuildLog(quiet=True))


def test_cuda_opt_level_only_for_half_precision_builds():
    """CUDA targets build f16/bf16 models at IREE -O2 (measured faster on the H200); fp32 and
    integer builds stay at IREE's default (O2 was slower there, and wrong for weight-only int8);
    CPU targets have none; a user's --iree-flag replaces it."""
    from inferx_compiler.build import resolve_build
    from inferx_compiler.build_plan import iree_flags
    from inferx_compiler.options import CompileOptions

    def levels(target, precision, *extra):
        flags = iree_flags(resolve_build(CompileOptions(target=target, precision=precision,
                                                        extra_iree_flags=extra)))
        return [f for f in flags if f.startswith("--iree-opt-level")]

    for target in ("a100", "h100", "h200", "orin"):
        assert levels(target, "fp16") == levels(target, "bf16") == ["--iree-opt-level=O2"]
        assert levels(target, "fp32") == levels(target, "int8") == levels(target, "int4") == []
    assert levels("cpu", "fp16") == levels("x86-avx2", "bf16") == []
    assert levels("h200", "fp16", "--iree-opt-level=O0") == ["--iree-opt-level=O0"]
