"""What every inferx CLI shares: click plumbing, error reporting and exit codes.

Every console script is a click command run through `click_main`, so `main(argv)` returns
an exit code (tests call it in-process) and the exit codes are the same everywhere:
0 done, 1 a user error found while working, 2 bad usage (click's), 3 a bug in inferx,
4 a crash in native code, 130 interrupted.
Shell completion comes from click: `eval "$(_INFERX_COMPILE_COMPLETE=bash_source inferx-compile)"`
(zsh_source, fish_source; the variable is the program name upper-cased, `-` as `_`).
"""

from __future__ import annotations

import os
import sys
import traceback
from types import SimpleNamespace
from typing import Callable

import click

from inferx_compiler.errors import InferXError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def completion_epilog(prog: str) -> str:
    var = "_" + prog.upper().replace("-", "_") + "_COMPLETE"
    return f'\b\nShell completion (bash; zsh_source, fish_source for the others):\n  eval "$({var}=bash_source {prog})"'


def click_main(command: click.Command, argv: list[str] | None) -> int:
    """Run a click command as an inferx CLI and return its exit code (usage errors print
    click's usage line and `Error: ...`, and exit 2, before any work starts)."""
    try:
        rv = command.main(args=argv, prog_name=command.name, standalone_mode=False,
                          obj={"argv": argv})
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.Abort:
        print("error: interrupted", file=sys.stderr)
        return 130
    return rv if isinstance(rv, int) else 0


def command_argv() -> list[str] | None:
    """The argv the running command was given (None: sys.argv), e.g. to re-run it in a child."""
    return click.get_current_context().find_root().obj["argv"]


def options_namespace(params: dict) -> SimpleNamespace:
    """The command's parameters as attributes (`args.target`); repeatable options as lists."""
    return SimpleNamespace(**{k: list(v) if isinstance(v, tuple) else v for k, v in params.items()})


def run_with_options(params: dict, work: Callable) -> int:
    """A command's usual body: its parameters as a namespace, handed to `work` under run_cli."""
    args = options_namespace(params)
    return run_cli(lambda: work(args), args.debug)


def dim_sizes(ctx, param, values, minimum: int = 1) -> tuple:
    """click callback for repeatable NAME=SIZE options (sizes of dynamic dims): ((name, size), ...)."""
    dims = []
    for text in values:
        name, eq, size = text.partition("=")
        if not name or not eq or not size.isdigit() or int(size) < minimum:
            raise click.BadParameter(f"expected NAME=SIZE (SIZE a whole number >= {minimum}), got '{text}'",
                                     ctx=ctx, param=param)
        dims.append((name, int(size)))
    return tuple(dims)


def existing_file(ctx, param, value):
    """click callback: the path names a readable file (error: 'PATH: no such file')."""
    for path in (value if isinstance(value, tuple) else (value,)):
        if path is not None and path != "-" and not os.path.isfile(path):
            what = "is a directory, not a file" if os.path.isdir(path) else "no such file"
            raise click.BadParameter(f"{path}: {what}", ctx=ctx, param=param)
    return value


def existing_path(ctx, param, value):
    """click callback: the path names an existing file or directory."""
    if value is not None and not os.path.exists(value):
        raise click.BadParameter(f"{value}: no such file or directory", ctx=ctx, param=param)
    return value


def run_cli(work: Callable[[], int], debug: bool) -> int:
    """Run `work`; a user error prints `error: ...` (no traceback) and exits non-zero."""
    try:
        return work()
    except InferXError as e:
        if debug:
            traceback.print_exc()
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as e:  # a bug in inferx: say so, keep the traceback for --debug
        if debug:
            traceback.print_exc()
        print(f"internal error: {type(e).__name__}: {e}\n"
              f"(this is a bug in inferx-compiler; rerun with --debug for the traceback)",
              file=sys.stderr)
        return 3


CHILD_ENV = "INFERX_CLI_CHILD"


def python_entry(module: str) -> list[str]:
    """argv that runs `module.main()` in a fresh interpreter, without putting the current
    directory on sys.path (a source checkout there must not shadow the installed package)."""
    code = f"import sys; sys.path.pop(0); from {module} import main; sys.exit(main())"
    return [sys.executable, "-c", code]


def run_isolated(module: str, argv: list[str] | None, run_here: Callable[[], int]) -> int:
    """Run this CLI again in a child process so that a crash inside MLIR/IREE native code
    becomes a clear error and an exit code instead of a dead process with no message.

    (A fresh interpreter, not fork: forking a process whose compiler threads already
    run can deadlock.) Set INFERX_CLI_CHILD=1 to run in-process.
    """
    import os
    import signal
    import subprocess

    if os.environ.get(CHILD_ENV) == "1":
        return run_here()
    argv = sys.argv[1:] if argv is None else argv
    env = dict(os.environ, **{CHILD_ENV: "1"})
    code = subprocess.call(python_entry(module) + list(argv), env=env)
    if code < 0:
        name = signal.Signals(-code).name
        print(f"error: {module.rsplit('.', 1)[-1]} crashed inside the native compiler stack ({name}) "
              f"after the last step shown above. This is a bug in torch-mlir or IREE triggered by "
              f"this model; please report it with the model attached.", file=sys.stderr)
        return 4
    return code
