"""inferx-unbroadcast-matmul and inferx-split-reduction end to end.

unbroadcast: a transformer block against onnxruntime at fp32 and fp16 (where the f16 truncation
between the weight's broadcast and the batch matmul is what keeps IREE from folding it itself),
and the dispatch count of an H200 build with and without the pass.
split-reduction: the rewritten matmul compiled by IREE for this CPU against numpy (the pass is
for GPUs; `split=N` forces it anywhere, so its numbers are checked here), and the decisions of
an H200 build. The H200 runs themselves are in docs/bench (tools/bench/gpu.py checks every
configuration against onnxruntime before timing it).
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile

import numpy as np
import onnx
import pytest

import inferx_compiler
from e2e_models import random_inputs, transformer_block
from helpers import onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.common import python_entry
from inferx_compiler.cli.compile import main as compile_main


def _report(artifact: str) -> dict:
    with zipfile.ZipFile(artifact) as z:
        return json.loads(z.read("report.json"))


def _decisions(artifact: str, pass_name: str, function: str | None = None) -> list[str]:
    return [d["decision"] for d in _report(artifact)["decisions"]
            if d["pass"] == pass_name and (function is None or d["function"] == function)]


@pytest.mark.parametrize("precision, tolerance", [("fp32", 1e-5), ("fp16", 5e-3)])
def test_unbroadcast_matches_onnxruntime(tmp_path, precision, tolerance):
    onnx_path = save(transformer_block(), tmp_path / "block.onnx")
    artifact = str(tmp_path / "block.ixa")
    assert compile_main([onnx_path, "--target", "cpu", "--precision", precision, "--batch-sizes", "2",
                         "--no-measure", "-o", artifact, "-q"]) == 0
    folded = _decisions(artifact, "inferx-unbroadcast-matmul", "main$b2")
    assert len(folded) == 6, folded  # q, k, v, output projection, two FFN layers
    assert all(d.startswith("one matmul over 32 rows") for d in folded)
    assert all(d.startswith("one matmul over B*M rows")
               for d in _decisions(artifact, "inferx-unbroadcast-matmul", "main"))
    sess = inferx_compiler.load(artifact)
    for batch in (2, 3):  # the static-shape function, then the dynamic one
        feeds = random_inputs(onnx.load(onnx_path), batch, seed=batch)
        err = rel_l2(sess.run(feeds)["y"], onnxruntime_outputs(onnx_path, feeds)["y"])
        assert err <= tolerance, f"{precision} b{batch}: relative L2 {err:.2e}"


def _dispatch_count(report: dict, function: str) -> int:
    return sum(1 for d in report["dispatches"] if d["dispatch"].startswith(function + "_dispatch"))


def test_unbroadcast_removes_the_weight_copies_from_an_h200_build(tmp_path):
    """At fp16 on CUDA IREE leaves the broadcast f16 weight copies as dispatches of their own
    (one per projection, on every call) when it truncates f32 weights; with the pass they are
    gone. Both builds keep f32 weights (--disable-pass inferx-narrow-parameters): with the weights
    stored at f16 IREE hoists the copies out of the call by itself (but then leaves this small
    block's input truncation, read by three projections, in a dispatch of its own)."""
    onnx_path = save(transformer_block(), tmp_path / "block.onnx")
    counts = {}
    f32_weights = ["--disable-pass", "inferx-narrow-parameters"]
    for name, extra in (("on", f32_weights), ("off", f32_weights + ["--disable-pass", "inferx-unbroadcast-matmul"])):
        artifact = str(tmp_path / f"{name}.ixa")
        report_path = str(tmp_path / f"{name}.json")
        assert compile_main([onnx_path, "--target", "h200", "--precision", "fp16", "--batch-sizes", "4",
                             "--no-measure", "--report", report_path, "-o", artifact, "-q", *extra]) == 0
        with open(report_path) as f:
            counts[name] = _dispatch_count(json.load(f), "main$b4")
    assert counts["on"] < counts["off"], counts


def test_disable_pass_rejects_a_pass_that_cannot_be_left_out(tmp_path, capfd):
    onnx_path = save(transformer_block(), tmp_path / "block.onnx")
    rc = compile_main([onnx_path, "--target", "cpu", "--disable-pass", "inferx-bind-parameters",
                       "-o", str(tmp_path / "x.ixa"), "-q"])
    err = capfd.readouterr().err
    assert rc == 2  # refused as bad usage, before any work
    assert "'--disable-pass': inferx-bind-parameters: not a pass that can be left out" in err
    assert "inferx-split-reduction" in err  # the valid ones are listed


MATMUL = """
func.func @main(%a: tensor<{m}x{k}x{t}>, %b: tensor<{k}x{n}x{t}>, %bias: tensor<{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %p = linalg.matmul ins(%a, %b : tensor<{m}x{k}x{t}>, tensor<{k}x{n}x{t}>) outs(%f : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
       ins(%p, %bias : tensor<{m}x{n}xf32>, tensor<{n}xf32>) outs(%e : tensor<{m}x{n}xf32>) {{
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }} -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}
"""


def _run_on_cpu(mlir_path: str, inputs: list) -> np.ndarray:
    import iree.compiler as ireec
    import iree.runtime as rt

    vmfb = ireec.compile_file(mlir_path, target_backends=["llvm-cpu"], extra_args=["--iree-llvmcpu-target-cpu=host"])
    config = rt.Config("local-sync")
    ctx = rt.SystemContext(config=config)
    ctx.add_vm_module(rt.VmModule.copy_buffer(config.vm_instance, vmfb))
    return np.asarray(ctx.modules.module["main"](*inputs).to_host())


@pytest.mark.parametrize("m, n, k, split, dtype", [(64, 48, 1024, 8, "f16"), (8, 32, 768, 4, "f16"),
                                                   (64, 48, 1024, 16, "f32")])
def test_split_reduction_numbers(tmp_path, m, n, k, split, dtype):
    """The split matmul (+ bias epilogue) against float64 numpy, next to the unsplit one."""
    src = tmp_path / "mm.mlir"
    src.write_text(MATMUL.format(m=m, n=n, k=k, t=dtype))
    split_path = tmp_path / "mm_split.mlir"
    subprocess.run(python_entry("inferx_compiler.cli.opt") + [
        str(src), f"--pass-pipeline=builtin.module(inferx-set-target{{target=h200}},inferx-split-reduction{{split={split}}})", "-o", str(split_path)],
        check=True, capture_output=True)
    text = split_path.read_text()
    assert "linalg.matmul" not in text and f"tensor<{split}x{m}x{n}xf32>" in text
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(dtype.replace("f", "float"))
    b = rng.standard_normal((k, n)).astype(dtype.replace("f", "float"))
    bias = rng.standard_normal(n).astype(np.float32)
    expected = a.astype(np.float64) @ b.astype(np.float64) + bias
    plain, split_out = _run_on_cpu(str(src), [a, b, bias]), _run_on_cpu(str(split_path), [a, b, bias])
    assert rel_l2(plain, expected) <= 1e-6
    assert rel_l2(split_out, expected) <= 1e-6
    assert not np.array_equal(split_out, np.zeros_like(split_out))


def test_split_reduction_decisions_in_an_h200_build(tmp_path):
    """A wider block (FFN 256 -> 1024 -> 256 at 64 tokens): at batch 1 the FFN down projection's
    64x256 output is 4 tiles, so its 1024-long reduction is split; the dynamic function's are
    declined (dynamic rows), and --disable-pass leaves the pass out. (inferx-hopper-matmul, which
    takes static f16 matmuls on Hopper before this pass sees them, is left out.)"""
    onnx_path = save(transformer_block(d=256, heads=4, seq=64, ffn=1024), tmp_path / "wide.onnx")
    on, off = str(tmp_path / "on.ixa"), str(tmp_path / "off.ixa")
    common = [onnx_path, "--target", "h200", "--precision", "fp16", "--batch-sizes", "1", "--no-measure", "-q",
              "--disable-pass", "inferx-hopper-matmul"]
    assert compile_main(common + ["-o", on]) == 0
    assert compile_main(common + ["-o", off, "--disable-pass", "inferx-split-reduction"]) == 0
    static = _decisions(on, "inferx-split-reduction", "main$b1")
    assert any(d.startswith("split: 64x256 output is 4 tiles for 132 SMs: reduction 1024 split 8 ways")
               for d in static), static
    assert all(d.startswith("declined: dynamic shape") for d in _decisions(on, "inferx-split-reduction", "main"))
    assert _decisions(off, "inferx-split-reduction") == []
    assert os.path.getsize(on) > 0
