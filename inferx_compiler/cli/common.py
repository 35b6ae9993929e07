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
