"""Diagnostics for inferx-opt: collect them, print them, check `expected-*` annotations.

Annotations follow mlir-opt's --verify-diagnostics:
    // expected-error @+1 {{text}}     the diagnostic is on the next line
    // expected-error {{text}}         ... on this line
    // expected-warning @-2, @above, @below work too
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from inferx_compiler.passes.analysis.remarks import line_of

_EXPECTED = re.compile(
    r"expected-(error|warning|remark|note)\s*(@(?:[+-]\d+|above|below))?\s*\{\{(.*?)\}\}")
_SEVERITIES = {"ERROR": "error", "WARNING": "warning", "REMARK": "remark", "NOTE": "note"}


@dataclass
class Diag:
    severity: str
    line: int  # 0 when unknown
    location: str
    message: str


def _severity(d) -> str:
    return _SEVERITIES.get(d.severity.name, d.severity.name.lower())


class DiagnosticCollector:
    def __init__(self, ctx, echo: bool):
        self.diagnostics: list[Diag] = []
        self.echo = echo
        self._handler = ctx.attach_diagnostic_handler(self._on_diagnostic)

    def _record(self, d) -> None:
        self.diagnostics.append(Diag(_severity(d), line_of(d.location), str(d.location), d.message))
        for n in d.notes:
            self.diagnostics.append(Diag("note", line_of(n.location), str(n.location), n.message))

    def _on_diagnostic(self, d) -> bool:
        self._record(d)
        return True

    def add_mlir_error(self, err) -> None:
        for d in getattr(err, "error_diagnostics", []) or []:
            self.diagnostics.append(Diag("error", line_of(d.location), str(d.location), d.message))
            for n in d.notes:
                self.diagnostics.append(Diag("note", line_of(n.location), str(n.location), n.message))
        if not getattr(err, "error_diagnostics", None) and not self.diagnostics:
            self.diagnostics.append(Diag("error", 0, "unknown", str(err)))

    def add_remarks(self, remarks) -> None:
        """Decisions passes stated (passes/analysis/remarks.py), as `remark` diagnostics."""
        for r in remarks:
            d = Diag("remark", r.line, r.location, f"{r.pass_name}: {r.message}")
            self.diagnostics.append(d)
            if self.echo:
                print(f"{d.location}: remark: {d.message}", file=sys.stderr)

    def echo_all(self) -> None:
        for d in self.diagnostics:
            print(f"{d.location}: {d.severity}: {d.message}", file=sys.stderr)


def parse_expectations(text: str) -> list[tuple[str, int, str]]:
    out = []
    lines = text.split("\n")
    for i, line in enumerate(lines, 1):
        for m in _EXPECTED.finditer(line):
            sev, where, msg = m.group(1), m.group(2), m.group(3)
            target = i
            if where in ("@above",):
                target = i - 1
            elif where in ("@below",):
                target = i + 1
            elif where:
                target = i + int(where[1:])
            out.append((sev, target, msg))
    return out


def check_expected_diagnostics(text: str, diags: list[Diag]) -> list[str]:
    remaining = list(diags)
    problems = []
    for sev, line, msg in parse_expectations(text):
        match = next((d for d in remaining
                      if d.severity == sev and d.line == line and msg in d.message), None)
        if match is None:
            problems.append(f"line {line}: expected {sev} \"{msg}\" was not produced")
        else:
            remaining.remove(match)
    for d in remaining:
        if d.severity in ("error", "warning"):
            problems.append(f"line {d.line}: unexpected {d.severity}: {d.message}")
    return problems
