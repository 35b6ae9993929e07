"""inferx-fuse-attention end to end: fused attention against onnxruntime, with and without a mask.

CPU targets decline the rewrite by default (see the pass); `--fuse-attention on` applies it on
the CPU so its numbers can be checked here (CUDA targets apply it by default; the H200 figures
are in docs/bench/2026-12-01-h200/)."""

from __future__ import annotations

import json
import zipfile

import onnx
import pytest

import inferx_compiler
from e2e_models import random_inputs, transformer_block
from helpers import onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.compile import main as compile_main


def _fused(artifact: str) -> list[str]:
    with zipfile.ZipFile(artifact) as z:
        report = json.loads(z.read("report.json"))
    return [d["decision"] for d in report["decisions"] if d["pass"] == "inferx-fuse-attention"]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("precision, tolerance", [("fp32", 1e-4), ("fp16", 5e-3)])
def test_fused_attention_matches_onnxruntime(tmp_path, causal, precision, tolerance):
    onnx_path = save(transformer_block(causal=causal), tmp_path / "block.onnx")
    artifact = str(tmp_path / "block.ixa")
    assert compile_main([onnx_path, "--target", "cpu", "--fuse-attention", "on", "--precision", precision,
                         "--batch-sizes", "1,2", "--no-measure", "-o", artifact, "-q"]) == 0
    decisions = _fused(artifact)
    assert len(decisions) == 3  # main, main$b1, main$b2
    assert all(d.startswith("fused: attention" + (" with a mask" if causal else "")) for d in decisions)
    sess = inferx_compiler.load(artifact)
    for batch in (1, 2, 3):
        feeds = random_inputs(onnx.load(onnx_path), batch, seed=batch)
        err = rel_l2(sess.run(feeds)["y"], onnxruntime_outputs(onnx_path, feeds)["y"])
        assert err <= tolerance, f"b{batch}: relative L2 {err:.2e}"


def test_cpu_declines_by_default_and_off_means_off(tmp_path):
    onnx_path = save(transformer_block(), tmp_path / "block.onnx")
    auto, off = str(tmp_path / "auto.ixa"), str(tmp_path / "off.ixa")
    assert compile_main([onnx_path, "--target", "cpu", "-o", auto, "-q"]) == 0
    assert compile_main([onnx_path, "--target", "cpu", "--fuse-attention", "off", "-o", off, "-q"]) == 0
    assert _fused(auto) and all(d.startswith("declined: target 'cpu'") for d in _fused(auto))
    assert _fused(off) == []
