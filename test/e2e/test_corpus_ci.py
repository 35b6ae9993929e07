"""The corpus command on the third-party models CI can run without downloading: those shipped in
the installed `onnx` wheel (tools/corpus/models.json, "ci": true)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_corpus_ci_models_compile_as_shipped_and_match_onnxruntime(tmp_path):
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "corpus", "run.py"), "--ci",
                           "--wheels", str(tmp_path / "wheels"), "--json", str(out)],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())
    assert len(results) >= 3
    assert [r["stage"] for r in results] == ["match"] * len(results), proc.stdout
    assert all(r["max_error"] <= 1e-3 for r in results)
    assert "| onnx-light-resnet50 |" in proc.stdout  # the table is printed
