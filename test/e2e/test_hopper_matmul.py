"""inferx-hopper-matmul: the sm_90a Triton matmul kernel and the builds that carry it.

No GPU here, so the kernel's arithmetic is checked through Triton's interpreter (the same
@triton.jit function the PTX is compiled from, run on the CPU) against numpy for every form the
pass emits: plain, transposed operands, reading the init, split-K slices, edge tiles. The PTX
itself is checked for what makes it a Hopper kernel (sm_90a, wgmma) and for reproducibility; an
H200 build of a model is checked for the rewritten matmuls and the kernels in its VM module.
Speed and the compiled kernels' numbers on the H200: tools/bench/gpu.py (every configuration
against onnxruntime before timing) and docs/bench/2026-12-02-h200-extern/.
"""

from __future__ import annotations

import json
import os
import zipfile

import pytest

from e2e_models import mlp
from helpers import save, triton_interpreter
from inferx_compiler.cli.compile import main as compile_main

pytest.importorskip("triton")

from inferx_compiler.kernels import triton_matmul  # noqa: E402
from inferx_compiler.passes.infra.target_attr import write_target  # noqa: E402
from inferx_compiler.targets import get_target  # noqa: E402

# (M, N, K, a_transposed, b_transposed, has_init, split, block, tma)
FORMS = [
    (96, 80, 128, False, False, False, 1, 64, False),  # edge tiles in M and N
    (64, 128, 256, True, False, True, 1, 64, False),  # a stored [K, M], init read
    (72, 40, 192, False, True, True, 1, 64, False),  # b stored [N, K] (a tied LM head), init read
    (128, 64, 512, True, True, False, 4, 64, False),  # split-K, both transposed
    (16, 16, 48, False, False, False, 1, 16, False),  # the smallest shape the pass takes, K in 16-blocks
    (96, 80, 128, False, False, True, 1, 64, True),  # TMA loads: edge tiles read as zeros, init read
    (128, 64, 512, True, True, False, 4, 64, True),  # TMA loads: split-K, both transposed
]

_INTERPRETER = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np, torch
from inferx_compiler.kernels.triton_matmul import KernelSpec, constants, kernel_function
m, n, k, a_t, b_t, has_init, split, block, tma = json.loads(sys.argv[1])
rng = np.random.default_rng(0)
a = rng.standard_normal((k, m) if a_t else (m, k)).astype(np.float16)
b = rng.standard_normal((n, k) if b_t else (k, n)).astype(np.float16)
init = rng.standard_normal((m, n)).astype(np.float32)
out = torch.full((split, m, n), float("nan"), dtype=torch.float32)
grid = (-(-m // block) * -(-n // block), split)
spec = KernelSpec(m, n, k, "f16", a_t, b_t, has_init, split, block_m=block, block_n=block, block_k=min(block, 64),
                  tma=tma)
kernel_function(spec)[grid](torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(init) if has_init else None, out,
                            **constants(spec))
a64 = (a.T if a_t else a).astype(np.float64)
b64 = (b.T if b_t else b).astype(np.float64)
ref = a64 @ b64 + (init if has_init else 0.0)
got = out.numpy().astype(np.float64).sum(axis=0)
print(json.dumps({"err": float(np.abs(got - ref).max() / np.abs(ref).max()), "finite": bool(np.isfinite(got).all())}))
"""


@pytest.mark.parametrize("form", FORMS, ids=lambda f: "x".join(map(str, f[:3])) + "".join(
    t for t, on in zip(("-aT", "-bT", "-init", f"-split{f[6]}", "-tma"), (f[3], f[4], f[5], f[6] > 1, f[8])) if on))
def test_kernel_matches_numpy_in_the_interpreter(form):
    """Every output element written once (NaN-filled output) and right to f32 accumulation."""
    pytest.importorskip("torch")
    result = triton_interpreter(_INTERPRETER, form)
    assert result["finite"], "some output elements were never written"
    assert result["err"] <= 1e-5, result


def test_ptx_is_hopper_code_and_reproducible(tmp_path):
    spec = triton_matmul.KernelSpec(1024, 768, 3072, "f16", split=4, block_m=64, block_n=64, warps=4, stages=4)
    first = triton_matmul.compile_kernel(spec, cache_dir=str(tmp_path / "a"))
    again = triton_matmul.compile_kernel(spec, cache_dir=str(tmp_path / "b"))  # compiled again, not cached
    cached = triton_matmul.compile_kernel(spec, cache_dir=str(tmp_path / "a"))
    ptx = first.ptx.decode()
    assert ".target sm_90a" in ptx and "wgmma.mma_async" in ptx
    assert first.ptx == again.ptx == cached.ptx
    assert "/" + os.path.basename(os.path.dirname(triton_matmul.__file__)) not in ptx  # no source paths
    # a, b, the output and Triton's two scratch pointers (no init: it is a zero fill)
    assert first.parameters == 5 and ptx.count(".param .u64") == 5
    assert first.threads == 128 and first.shared_bytes > 48 * 1024


def test_spec_rejects_a_split_that_does_not_cut_k():
    with pytest.raises(ValueError, match="split 5 does not cut K=768"):
        triton_matmul.KernelSpec(128, 128, 768, "f16", split=5)
    with pytest.raises(ValueError, match="split 4 does not cut K=768"):  # slices of 192: not 128-blocks
        triton_matmul.KernelSpec(128, 128, 768, "f16", split=4, block_k=128)
    with pytest.raises(ValueError, match="element type f32"):
        triton_matmul.KernelSpec(128, 128, 768, "f32")


def _artifact(tmp_path, name: str, *extra: str) -> str:
    onnx_path = save(mlp(d_in=256, hidden=1024, d_out=640), tmp_path / "mlp.onnx")
    out = str(tmp_path / f"{name}.ixa")
    assert compile_main([onnx_path, "--target", "h200", "--precision", "fp16", "--batch-sizes", "64",
                         "--no-measure", "-o", out, "-q", *extra]) == 0
    return out


def _member(artifact: str, name: str) -> bytes:
    with zipfile.ZipFile(artifact) as z:
        return z.read(name)


def test_h200_build_runs_its_static_matmuls_on_hopper_kernels(tmp_path):
    artifact = _artifact(tmp_path, "hopper")
    report = json.loads(_member(artifact, "report.json"))
    decisions = {(d["function"], d["decision"].split(":")[0]) for d in report["decisions"]
                 if d["pass"] == "inferx-hopper-matmul"}
    # the b64 function's two layers take the kernel; the dynamic function keeps IREE's matmuls
    assert decisions == {("main$b64", "sm_90a kernel"), ("main", "declined")}, decisions
    external = [d for d in report["dispatches"] if d["root"] == "inferx_matmul (Triton, sm_90a)"]
    assert sorted(tuple(d["loops"]) for d in external) == [(64, 640, 1024), (64, 1024, 256)], external
    assert all(d["config_source"] == "rule (inferx-hopper-matmul)" and d["config"].startswith("tile 64x")
               for d in external)
    assert json.loads(_member(artifact, "manifest.json"))["compiler"]["triton"] == triton_matmul.TRITON_VERSION
    vmfb = _member(artifact, "module.vmfb")
    assert vmfb.count(b".target sm_90a") == 2 and b"wgmma.mma_async" in vmfb
    assert _member(_artifact(tmp_path, "again"), "module.vmfb") == vmfb  # the same build, byte for byte
    without = _member(_artifact(tmp_path, "without", "--disable-pass", "inferx-hopper-matmul"), "module.vmfb")
    assert b"sm_90a" not in without


def test_h200_build_fuses_the_bias_and_activation_into_the_kernel(tmp_path):
    """The MLP's bias + ReLU run in the matmul kernel (one dispatch a layer); with
    --disable-pass inferx-hopper-epilogue the kernel stores the f32 product and IREE runs them."""
    for name, extra in (("fused", []), ("unfused", ["--disable-pass", "inferx-hopper-epilogue"])):
        report = json.loads(_member(_artifact(tmp_path, name, *extra), "report.json"))
        decisions = [d["decision"] for d in report["decisions"]
                     if d["pass"] == "inferx-hopper-matmul" and d["function"] == "main$b64"]
        external = [d for d in report["dispatches"] if d["root"] == "inferx_matmul (Triton, sm_90a)"]
        if name == "fused":
            assert len(decisions) == 2 and all("fused" in d for d in decisions), decisions
            assert all("linalg.generic" in d["fused"] for d in external), external
        else:
            assert not any("fused" in d for d in decisions), decisions
            assert not any(d["fused"] for d in external), external


def test_without_triton_the_pass_declines_with_a_remark(monkeypatch):
    from iree.compiler import ir

    from inferx_compiler.passes.hopper_matmul import HopperMatmul
    from inferx_compiler.passes.analysis.remarks import collecting

    monkeypatch.setattr(triton_matmul, "available", lambda: "Triton is not installed (test)")
    text = """func.func @f(%a: tensor<256x256xf16>, %b: tensor<256x256xf16>, %c: tensor<256x256xf32>) -> tensor<256x256xf32> {
      %y = linalg.matmul ins(%a, %b : tensor<256x256xf16>, tensor<256x256xf16>) outs(%c : tensor<256x256xf32>) -> tensor<256x256xf32>
      return %y : tensor<256x256xf32>
    }"""
    with ir.Context() as ctx, ir.Location.unknown():
        module = ir.Module.parse(text, ctx)
        write_target(module.operation, get_target("h200"))
        with collecting() as remarks:
            HopperMatmul().run(module.operation)
        assert "linalg.matmul" in str(module) and "flow.dispatch" not in str(module)
    assert [r.message for r in remarks] == ["declined: Triton is not installed (test)"]


def test_an_unwritable_cache_only_costs_a_compile(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    spec = triton_matmul.KernelSpec(128, 128, 256, "bf16", block_m=64, block_n=64, warps=4, stages=4)
    kernel = triton_matmul.compile_kernel(spec, cache_dir=str(blocked / "cache"))
    assert ".target sm_90a" in kernel.ptx.decode() and not (blocked / "cache").exists()


def test_weight_only_int8_layers_keep_irees_fused_dequantization(tmp_path):
    """--precision int8 on the H200 is weight-only: where our weight-only kernel does not take a
    layer (here: turned off; see test_dequant_kernel.py for the layers it takes), IREE fuses the
    dequantization into its matmul dispatch (one kernel reads the int8 weight) and this pass
    leaves those matmuls alone."""
    artifact = _artifact(tmp_path, "int8", "--precision", "int8", "--disable-pass", "inferx-dequant-matvec")
    report = json.loads(_member(artifact, "report.json"))
    static = [d["decision"] for d in report["decisions"]
              if d["pass"] == "inferx-hopper-matmul" and d["function"] == "main$b64"]
    assert static and all(d.startswith("declined: an operand is dequantized from integers") for d in static), static
    assert b"sm_90a" not in _member(artifact, "module.vmfb")


def test_without_triton_an_h200_build_says_so_on_the_console(tmp_path, monkeypatch, capfd):
    """The fallback to IREE's sm_80 code is printed, not only recorded among the remarks."""
    monkeypatch.setattr(triton_matmul, "available", lambda: "Triton is not installed (test)")
    monkeypatch.setenv("INFERX_CLI_CHILD", "1")  # build in this process, where the patch is
    path = save(mlp(), tmp_path / "mlp.onnx")
    assert compile_main([path, "--target", "h200", "--precision", "fp16", "--emit", "linalg",
                         "-o", str(tmp_path / "m.mlir")]) == 0
    err = capfd.readouterr().err
    assert "warning: --target h200: Triton is not installed (test); the f16/bf16 matmuls fall back" in err
