"""inferx-run ARTIFACT --inputs in.npz --outputs out.npz [--device cpu|cpu:sync|cuda|cuda:N]."""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from inferx_compiler.errors import InputValidationError

from .common import run_cli


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="inferx-run", description="Run an .ixa artifact on npz inputs.")
    p.add_argument("artifact")
    p.add_argument("--inputs", required=True, help="npz whose keys are the model's input names")
    p.add_argument("--outputs", required=True, help="npz to write, keyed by output names")
    p.add_argument("--device", default=None, help="cpu, cpu:sync, cuda or cuda:N (default: the artifact's target kind)")
    p.add_argument("--debug", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: _work(args), args.debug)


def _work(args) -> int:
    from inferx_compiler.runtime.session import load

    if not os.path.isfile(args.inputs):
        raise InputValidationError(f"{args.inputs}: no such inputs file")
    try:
        with np.load(args.inputs, allow_pickle=False) as npz:
            feeds = {k: npz[k] for k in npz.files}
    except Exception as e:
        raise InputValidationError(f"{args.inputs}: not a readable npz file ({e})") from None
    session = load(args.artifact, device=args.device)
    outputs = session.run(feeds)
    np.savez(args.outputs, **outputs)
    for name, arr in outputs.items():
        print(f"{name}: {arr.dtype} {list(arr.shape)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
