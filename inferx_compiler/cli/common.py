"""What every inferx CLI shares: error reporting and exit codes."""

from __future__ import annotations

import sys
import traceback
from typing import Callable

from inferx_compiler.errors import InferXError


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
