"""inferx-run ARTIFACT --inputs in.npz --outputs out.npz [--device cpu|cpu:sync|cuda|cuda:N]."""

from __future__ import annotations

import sys

import click
import numpy as np

from inferx_compiler.errors import InputValidationError

from .common import CONTEXT_SETTINGS, click_main, completion_epilog, existing_file, options_namespace, run_cli

EXAMPLES = """\b
Examples:
  inferx-run model.ixa --inputs in.npz --outputs out.npz
  inferx-run model.ixa --inputs in.npz --outputs out.npz --device cuda:1
"""


@click.command("inferx-run", context_settings=CONTEXT_SETTINGS,
               epilog=EXAMPLES + "\n" + completion_epilog("inferx-run"))
@click.argument("artifact", callback=existing_file)
@click.option("--inputs", required=True, callback=existing_file, metavar="IN.npz",
              help="npz whose keys are the model's input names")
@click.option("--outputs", required=True, metavar="OUT.npz", help="npz to write, keyed by output names")
@click.option("--device", default=None, help="cpu, cpu:sync, cuda or cuda:N (default: the artifact's target kind)")
@click.option("--debug", is_flag=True, help="show tracebacks")
def command(**params) -> int:
    """Run an .ixa artifact on the inputs in an npz file and write its outputs to another."""
    args = options_namespace(params)
    return run_cli(lambda: _work(args), args.debug)


def main(argv: list[str] | None = None) -> int:
    return click_main(command, argv)


def _work(args) -> int:
    from inferx_compiler.runtime.session import load

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
