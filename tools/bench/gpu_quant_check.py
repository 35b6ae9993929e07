"""Check int8/int4 CUDA builds on the GPU against the onnxruntime emulation of their plan.

    python tools/bench/gpu_quant_check.py prepare DIR      # here: models, feeds, expected, artifacts
    python tools/bench/gpu_quant_check.py run DIR          # on the GPU host (inferx layout on PYTHONPATH)

The emulation (inferx_compiler.precision.calibration, the same numpy quantizers and f16 activation rounding
the compiled weight-only layers use) is what `auto` measures sensitivity with; a compiled layer
that does not compute it is a miscompile, not quantization error. Cases: a MatMul MLP with a
sensitive layer and a Gemm (transB) MLP at 2 and 64 rows (weights stored [N, K]), the Gemm MLP
at one row (the kernel's dot-free form: x resident at width 256, 4 groups; tiles at width 384,
6 groups), and a small BERT at batch 2 and 1 (rows are tokens: weights stored [K, N]). `run` prints, per case, the
relative L2 against the emulation and against onnxruntime fp32.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# (name, model, rows, int4 group size)
CASES = [("smlp", "smlp", 2, 64), ("wmlp", "wmlp", 2, 64), ("wmlp64", "wmlp", 64, 64), ("wmlp1", "wmlp", 1, 64),
         ("wmlp384_1", "wmlp384", 1, 64), ("bert_lite", "bert_lite", 2, 128), ("bert_lite1", "bert_lite", 1, 128)]
PRECISIONS = ("int8", "int4")


def _models(out: str) -> dict:
    import onnx

    sys.path.insert(0, os.path.join(REPO, "test", "e2e"))
    sys.path.insert(0, HERE)
    import e2e_models
    import models

    paths = {name: os.path.join(out, f"{name}.onnx") for name in ("smlp", "wmlp", "wmlp384", "bert_lite")}
    onnx.save(e2e_models.sensitive_mlp(), paths["smlp"])
    onnx.save(e2e_models.wide_mlp(width=256, layers=2), paths["wmlp"])
    onnx.save(e2e_models.wide_mlp(width=384, layers=2), paths["wmlp384"])
    onnx.save(onnx.load(models.path("bert_lite")), paths["bert_lite"])
    return paths


def _feeds(name: str, path: str, rows: int) -> dict:
    import onnx

    import e2e_models
    import models

    if name.startswith("bert"):
        return models.feeds(path, rows, seed=5)
    return e2e_models.random_inputs(onnx.load(path), rows, seed=3)


def prepare(out: str) -> None:
    from inferx_compiler.precision import calibration
    from inferx_compiler.frontend import onnx_import
    from inferx_compiler.precision import precision_plan
    from inferx_compiler.cli.common import python_entry
    from inferx_compiler.log import BuildLog

    os.makedirs(out, exist_ok=True)
    paths = _models(out)
    for name, base, rows, group in CASES:
        path = paths[base]
        feeds = _feeds(name, path, rows)
        np.savez(os.path.join(out, f"{name}.feeds.npz"), **feeds)
        model, digest = onnx_import.load_model(path)
        prepared = onnx_import.prepare(model, name=base, sha256=digest, log=BuildLog(quiet=True))
        layers = precision_plan.model_layers(prepared.proto, prepared.weights)
        emulator = calibration.Emulator.build(prepared, layers, prepared.weights, {"fp16"}, group,
                                              feeds, feeds, gpu=True)
        fp32 = emulator.outputs({}, feeds)
        for precision in PRECISIONS:
            emulated = emulator.outputs({l.layer: precision for l in layers}, feeds)
            np.savez(os.path.join(out, f"{name}.{precision}.expected.npz"),
                     emulated=np.concatenate([c[0] for c in emulated]), fp32=np.concatenate([c[0] for c in fp32]))
            artifact = os.path.join(out, f"{name}.{precision}.ixa")
            subprocess.run(python_entry("inferx_compiler.cli.compile") + [
                path, "--target", "h200", "--precision", precision, "--group-size", str(group),
                "--batch-sizes", str(rows), "-o", artifact, "-q"], check=True)
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump([[name, p] for name, _, _, _ in CASES for p in PRECISIONS], f)


def run(out: str) -> int:
    import inferx_compiler

    def rel(a, b):
        b = np.asarray(b, np.float64)
        return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))

    worst = 0.0
    with open(os.path.join(out, "cases.json")) as f:
        cases = json.load(f)
    for name, precision in cases:
        feeds = dict(np.load(os.path.join(out, f"{name}.feeds.npz")))
        expected = np.load(os.path.join(out, f"{name}.{precision}.expected.npz"))
        session = inferx_compiler.load(os.path.join(out, f"{name}.{precision}.ixa"), device="cuda")
        got = list(session.run(feeds).values())[0]
        e = rel(got, expected["emulated"])
        worst = max(worst, e)
        print(f"{name:10s} {precision}: vs emulated {e:.2e}  vs fp32 {rel(got, expected['fp32']):.2e}  "
              f"(emulated vs fp32 {rel(expected['emulated'], expected['fp32']):.2e})")
    print(f"worst against the emulation: {worst:.2e}")
    return 0 if worst < 1e-2 else 1


if __name__ == "__main__":
    command, folder = sys.argv[1], sys.argv[2]
    sys.exit(run(folder) if command == "run" else prepare(folder) or 0)
