"""inferx-run ARTIFACT --inputs in.npz --outputs out.npz [--device cpu|cpu:sync|cuda|cuda:N]

or, as a smoke test (CI): `inferx-run ARTIFACT --random-inputs [--batch N] [--dim NAME=SIZE]`
runs seeded random inputs that fit the manifest and fails when an output is not finite.
"""

from __future__ import annotations

import sys

import click
import numpy as np

from inferx_compiler.errors import InputValidationError
from inferx_compiler.cli.common import (CONTEXT_SETTINGS, click_main, completion_epilog, dim_sizes, existing_file, options_namespace,
                     run_cli)

EXAMPLES = """\b
Examples:
  inferx-run model.ixa --inputs in.npz --outputs out.npz
  inferx-run model.ixa --inputs in.npz --outputs out.npz --device cuda:1
  inferx-run model.ixa --random-inputs --batch 2          smoke test: runs, outputs finite
"""


@click.command("inferx-run", context_settings=CONTEXT_SETTINGS,
               epilog=EXAMPLES + "\n" + completion_epilog("inferx-run"))
@click.argument("artifact", callback=existing_file)
@click.option("--inputs", callback=existing_file, metavar="IN.npz",
              help="npz whose keys are the model's input names")
@click.option("--outputs", metavar="OUT.npz", help="npz to write, keyed by output names")
@click.option("--random-inputs", is_flag=True,
              help="instead of --inputs: seeded random inputs that fit the manifest; fails (exit 1) "
                   "when an output holds NaN or Inf")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True,
              help="with --random-inputs: size of the leading dynamic dim")
@click.option("--dim", multiple=True, metavar="NAME=SIZE", callback=dim_sizes,
              help="with --random-inputs: size of another dynamic dim (repeatable; default 1)")
@click.option("--device", default=None, help="cpu, cpu:sync, cuda or cuda:N (default: the artifact's target kind)")
@click.option("--debug", is_flag=True, help="show tracebacks")
def command(**params) -> int:
    """Run an .ixa artifact on the inputs in an npz file and write its outputs to another."""
    args = options_namespace(params)
    if args.random_inputs == bool(args.inputs):
        raise click.UsageError("give --inputs IN.npz or --random-inputs (one of them).")
    if args.inputs and not args.outputs:
        raise click.UsageError("--inputs needs --outputs OUT.npz.")
    return run_cli(lambda: _work(args), args.debug)


def main(argv: list[str] | None = None) -> int:
    return click_main(command, argv)


def _work(args) -> int:
    from inferx_compiler.runtime.session import load

    session = load(args.artifact, device=args.device)
    feeds = _random_feeds(session, args) if args.random_inputs else _read_feeds(args.inputs)
    outputs = session.run(feeds)
    if args.outputs:
        np.savez(args.outputs, **outputs)
    for name, arr in outputs.items():
        print(f"{name}: {arr.dtype} {list(arr.shape)}", file=sys.stderr)
    if args.random_inputs:
        _check_finite(outputs)
        print(f"smoke run OK: {len(outputs)} output(s), all finite", file=sys.stderr)
    return 0


def _read_feeds(path: str) -> dict:
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except Exception as e:
        raise InputValidationError(f"{path}: not a readable npz file ({e})") from None


def _random_feeds(session, args) -> dict:
    from inferx_compiler.runtime.bench_inputs import random_feeds

    return random_feeds(session.inputs, args.batch, dict(args.dim))


def _check_finite(outputs: dict) -> None:
    from inferx_compiler.errors import InferXError

    bad = [name for name, arr in outputs.items()
           if np.asarray(arr).dtype.kind in "fc" and not np.isfinite(arr).all()]
    if bad:
        raise InferXError(f"smoke run failed: output(s) {', '.join(bad)} hold NaN or Inf")


if __name__ == "__main__":
    sys.exit(main())
