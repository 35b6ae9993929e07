"""The build log: progress lines on stderr as work goes, kept for the artifact's report."""

from __future__ import annotations

import sys
import time


class BuildLog:
    def __init__(self, quiet: bool = False, stream=None):
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.lines: list[str] = []
        self.warnings: list[str] = []
        self._t0 = time.monotonic()

    def step(self, message: str) -> None:
        self._emit(f"[{time.monotonic() - self._t0:7.2f}s] {message}")

    def warn(self, message: str) -> None:
        """A warning: printed even when quiet (quiet drops progress lines, not what went wrong)."""
        self.warnings.append(message)
        self._emit(f"warning: {message}", always=True)

    def _emit(self, line: str, always: bool = False) -> None:
        self.lines.append(line)
        if always or not self.quiet:
            print(line, file=self.stream, flush=True)


def progress_bar(done: float, total: int, width: int = 20) -> str:
    """"[#####...............]": `done` of `total` steps (fractions allowed)."""
    filled = int(width * done / max(total, 1))
    return "[" + "#" * filled + "." * (width - filled) + "]"
