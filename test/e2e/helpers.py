"""Shared helpers for the end-to-end tests."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import onnx


def rel_l2(got: np.ndarray, ref: np.ndarray) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def onnxruntime_outputs(model_path: str, feeds: dict) -> dict:
    import onnxruntime as ort

    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)


def artifact_json(path) -> tuple[dict, dict]:
    """(manifest.json, report.json) of the artifact at `path`."""
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("manifest.json")), json.loads(z.read("report.json"))


def run_clients(client, n: int) -> None:
    """Run client(0) ... client(n - 1), each in its own thread, and wait for all of them."""
    import threading

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def emulated_output(model_path: str, precision: str, feeds: dict, group_size: int, target: str = "cpu"):
    """The model's first output with every layer at `precision`, as calibration.py emulates it
    (what `auto` decides with) for `target`."""
    from inferx_compiler.precision import calibration
    from inferx_compiler.frontend import onnx_import
    from inferx_compiler.precision import precision_plan
    from inferx_compiler.log import BuildLog
    from inferx_compiler.targets import get_target

    model, digest = onnx_import.load_model(model_path)
    prepared = onnx_import.prepare(model, name="m", sha256=digest, log=BuildLog(quiet=True))
    layers = precision_plan.model_layers(prepared.proto, prepared.weights)
    emulator = calibration.Emulator.build(prepared, layers, prepared.weights, {"int8"}, group_size, feeds, feeds,
                                          target=get_target(target))
    return emulator.outputs({l.layer: precision for l in layers}, feeds)[0][0]


def triton_interpreter(script: str, argument) -> dict:
    """Run `script` (which prints a JSON line last) in a child Python under Triton's interpreter
    (TRITON_INTERPRET=1: @triton.jit functions run on the CPU) with json(argument) as argv[1];
    returns that JSON."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(argument)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
