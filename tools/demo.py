"""The main job on the bundled example: compile for the host CPU, run, compare with onnxruntime.

    python tools/demo.py [--model examples/encoder.onnx] [--target cpu] [--batch 4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODEL = os.path.join(HERE, "..", "examples", "encoder.onnx")


def _cli(name: str, *args: str) -> None:
    from inferx_compiler.cli.common import python_entry

    subprocess.run(python_entry(f"inferx_compiler.cli.{name}") + list(args), check=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--target", default="cpu")
    p.add_argument("--batch", type=int, default=4)
    args = p.parse_args()

    import onnxruntime as ort

    import inferx_compiler
    from inferx_compiler.runtime.bench_inputs import random_feeds
    from inferx_compiler.runtime.timing import median_ms

    work = tempfile.mkdtemp(prefix="inferx-demo-")
    artifact = os.path.join(work, "model.ixa")
    # A static-shape function for the batch the demo runs (what a deployment compiles for: the
    # batch sizes it serves); other batch sizes would run the dynamic-shape function.
    sizes = ",".join(str(b) for b in sorted({1, args.batch}))
    print(f"== inferx-compile {os.path.relpath(args.model)} --target {args.target} --batch-sizes {sizes} "
          f"--no-measure -o {artifact}")
    _cli("compile", args.model, "--target", args.target, "--batch-sizes", sizes, "--no-measure", "-o", artifact)

    feeds = random_feeds(inferx_compiler.load(artifact).inputs, args.batch)
    np.savez(os.path.join(work, "in.npz"), **feeds)
    print(f"== inferx-run {artifact} --inputs in.npz --outputs out.npz")
    _cli("run", artifact, "--inputs", os.path.join(work, "in.npz"), "--outputs", os.path.join(work, "out.npz"))
    got = dict(np.load(os.path.join(work, "out.npz")))

    ref_sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in ref_sess.get_outputs()], ref_sess.run(None, feeds)))
    sess = inferx_compiler.load(artifact)
    ours_ms = median_ms(lambda: sess.run(feeds), 20)
    ort_ms = median_ms(lambda: ref_sess.run(None, feeds), 20)

    print(f"\n{'output':12s} {'shape':16s} {'rel L2 vs onnxruntime':>22s} {'max |diff|':>12s}")
    worst = 0.0
    for name, ref in expected.items():
        diff = np.asarray(got[name], np.float64) - ref
        rel = float(np.linalg.norm(diff) / max(np.linalg.norm(ref), 1e-30))
        worst = max(worst, rel)
        print(f"{name:12s} {str(list(ref.shape)):16s} {rel:22.2e} {np.abs(diff).max():12.2e}")
    print(f"\nmedian latency, batch {args.batch} (informative, this machine): inferx {ours_ms:.2f} ms, "
          f"onnxruntime {ort_ms:.2f} ms")
    ok = worst <= 1e-4
    print("MATCH: inferx agrees with onnxruntime (relative L2 <= 1e-4)" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
