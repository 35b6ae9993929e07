"""inferx-tune DIR --tuning-db DB [--device cuda]

Measures, on the GPU host, the kernel configurations `inferx-compile M --target h200
--tune-prepare DIR` prepared on the build machine, and merges the winners into the tuning
database that `inferx-compile --tuning-db DB` builds read. Needs only iree-base-runtime here.
"""

from __future__ import annotations

import click

from inferx_compiler.cli.common import CONTEXT_SETTINGS, click_main, completion_epilog, run_with_options

HELP = """Measure the prepared candidates of DIR on this machine's GPU and write the winners into
the tuning database (--tuning-db, created or updated). DIR comes from `inferx-compile MODEL
--target h200 --tune-prepare DIR` on the build machine (one DIR may hold several models' forms);
this side needs iree-base-runtime, not the compiler."""

EXAMPLES = """\b
Examples:
  inferx-compile bert.onnx --target h200 --precision fp16 --tune-prepare tune/   (build machine)
  inferx-tune tune/ --tuning-db h200.tuning.json                                  (GPU host)
  inferx-compile bert.onnx --target h200 --precision fp16 --tuning-db h200.tuning.json -o bert.ixa
"""


@click.command("inferx-tune", context_settings=CONTEXT_SETTINGS, help=HELP,
               epilog=EXAMPLES + "\n" + completion_epilog("inferx-tune"))
@click.argument("directory", metavar="DIR", type=click.Path(exists=True, file_okay=False))
@click.option("--tuning-db", required=True, metavar="FILE", help="tuning database to create or update")
@click.option("--device", default="cuda", show_default=True, metavar="URI",
              help="IREE device to measure on (cuda, cuda://1, ...)")
@click.option("-q", "--quiet", is_flag=True, help="no progress lines")
@click.option("--debug", is_flag=True, help="show tracebacks")
def command(**params) -> int:
    return run_with_options(params, _work)


def main(argv: list[str] | None = None) -> int:
    return click_main(command, argv)


def _work(args) -> int:
    from inferx_compiler.tuning.cuda_tuning import measure_into
    from inferx_compiler.log import BuildLog

    measure_into(args.directory, args.tuning_db, BuildLog(quiet=args.quiet), args.device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
