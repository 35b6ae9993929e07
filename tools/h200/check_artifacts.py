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

import numpy as np


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--out", default=None)
    p.add_argument("--device", default="cuda")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--rounds", type=int, default=50)
    args = p.parse_args()

    import onnxruntime as ort

    import inferx_compiler
    from inferx_compiler.runtime.bench_inputs import random_feeds
    from inferx_compiler.runtime.timing import median_ms

    rows = []
    for artifact in sorted(glob.glob(os.path.join(args.dir, "*.ixa"))):
        stem = os.path.basename(artifact)[:-4]
        model_name = stem.split("@")[0]
        onnx_path = os.path.join(args.dir, model_name + ".onnx")
        ref = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        sess = inferx_compiler.load(artifact, device=args.device)
        for batch in [int(b) for b in args.batches.split(",")]:
            feeds = random_feeds(sess.inputs, batch, seed=batch)
            expected = ref.run(None, feeds)
            got = sess.run(feeds)
            errs = [float(np.linalg.norm(np.asarray(g, np.float64) - e) / max(np.linalg.norm(e), 1e-30))
                    for g, e in zip(got.values(), expected)]
            ms = median_ms(lambda: sess.run(feeds), args.rounds, warmup=3)
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
