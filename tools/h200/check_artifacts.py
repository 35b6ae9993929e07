"""Run CUDA artifacts on a GPU machine and check them against onnxruntime (CPU, fp32).

    python tools/h200/check_artifacts.py DIR [--out results.json]

DIR holds NAME.onnx beside one or more NAME*.ixa built for a CUDA target. Only the
runtime is needed here (iree-base-runtime and this package, no compiler).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

import numpy as np


def _feeds(model, batch: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        dims = [d.dim_value if d.dim_value > 0 else batch for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = rng.standard_normal(dims).astype(np.float32)
    return out


def _median_ms(fn, rounds: int) -> float:
    for _ in range(3):
        fn()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(samples))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--out", default=None)
    p.add_argument("--device", default="cuda")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--rounds", type=int, default=50)
    args = p.parse_args()

    import onnx
    import onnxruntime as ort

    import inferx_compiler

    rows = []
    for artifact in sorted(glob.glob(os.path.join(args.dir, "*.ixa"))):
        stem = os.path.basename(artifact)[:-4]
        model_name = stem.split("@")[0]
        onnx_path = os.path.join(args.dir, model_name + ".onnx")
        model = onnx.load(onnx_path)
        ref = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        sess = inferx_compiler.load(artifact, device=args.device)
        for batch in [int(b) for b in args.batches.split(",")]:
            feeds = _feeds(model, batch, seed=batch)
            expected = ref.run(None, feeds)
            got = sess.run(feeds)
            errs = [float(np.linalg.norm(np.asarray(g, np.float64) - e) / max(np.linalg.norm(e), 1e-30))
                    for g, e in zip(got.values(), expected)]
            ms = _median_ms(lambda: sess.run(feeds), args.rounds)
            rows.append({"artifact": stem, "target": sess.artifact.manifest.target["name"],
                         "precision": sess.artifact.manifest.precision_plan["mode"], "batch": batch,
                         "rel_l2": max(errs), "median_ms": ms, "device": sess.device})
            r = rows[-1]
            print(f"{stem:28s} {r['target']:6s} {r['precision']:5s} b{batch:<3d} rel_l2={r['rel_l2']:.2e} "
                  f"median={ms:.3f} ms (host-synchronous run(), incl. copies)", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
