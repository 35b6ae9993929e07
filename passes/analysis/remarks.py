"""Decisions passes state about single ops: what they did, or why they declined.

A pass calls `remark(pass_name, op, message)` for each decision. While a pipeline runs inside
`collecting()`, the remarks are gathered (the driver puts them in the build report and
`--explain`; `inferx-opt` prints them as `remark:` diagnostics, which `--verify-diagnostics`
checks against `expected-remark` annotations). Outside `collecting()` they are dropped.
(MLIR remarks would be the upstream way; torch-mlir's Python bindings cannot emit them.)
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from dataclasses import dataclass

_sink: contextvars.ContextVar = contextvars.ContextVar("inferx_remarks", default=None)


@dataclass(frozen=True)
class Remark:
    pass_name: str
    location: str
    line: int  # 0 when the location has no file line
    message: str
    function: str = ""  # the enclosing function's name

    @property
    def node(self) -> str:
        """The first name in the location: the ONNX node an op was imported from."""
        m = re.search(r'"([^"]+)"', self.location)
        return m.group(1) if m else ""

    def format(self) -> str:
        return f"{self.location}: remark: {self.pass_name}: {self.message}"


def line_of(loc) -> int:
    """The file line of a location, looking through name/callsite wrappers (0 when none)."""
    for _ in range(8):
        line = getattr(loc, "start_line", None)
        if isinstance(line, int):
            return line
        child = getattr(loc, "child_loc", None)
        if child is None:
            break
        loc = child
    m = re.search(r":(\d+):\d+", str(loc))
    return int(m.group(1)) if m else 0


def _enclosing_function(op) -> str:
    parent = op.parent
    while parent is not None:
        if parent.name in ("func.func", "util.func") and "sym_name" in parent.attributes:
            return str(parent.attributes["sym_name"]).strip('"')
        parent = parent.parent
    return ""


def remark(pass_name: str, op, message: str) -> None:
    sink = _sink.get()
    if sink is not None:
        sink.append(Remark(pass_name, str(op.location), line_of(op.location), message,
                           _enclosing_function(op)))


@contextlib.contextmanager
def collecting():
    """Gather the remarks of the passes run inside; yields the list they land in."""
    found: list[Remark] = []
    token = _sink.set(found)
    try:
        yield found
    finally:
        _sink.reset(token)


def op_counts(names: list) -> str:
    """"2 linalg.generic, tensor.expand_shape": op names by count, in order of appearance (for
    remarks that list the ops a rewrite absorbed)."""
    import collections

    return ", ".join(f"{n} {name}" if n > 1 else name for name, n in collections.Counter(names).items())
