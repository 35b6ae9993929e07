"""`inferx-compile --explain`: what the passes decided and what each dispatch became, as tables.

Two tables, both from the build's report (the same data `report.json` in the artifact holds):
  decisions   per function and ONNX node: each pass's decision or why it declined;
  dispatches  per dispatch: root op, loop extents, FLOPs, the ops fused with the root, and the
              lowering configuration with its source (tuned: from the tuning database; IREE:
              IREE's own choice; candidate K: a --tune trial build).
"""

from __future__ import annotations

import re


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _short_config(config: str) -> str:
    """`distribution = [..], vector_common_parallel = [..]` out of a compilation_info text (an
    external kernel's configuration is plain text already)."""
    if config and "lowering_config" not in config:
        return config
    m = re.search(r"lowering_config<(.*?)>", config or "")
    return m.group(1) if m else ""


def format_explanation(result) -> str:
    parts = []
    decisions = getattr(result, "decisions", []) or []
    if decisions:
        rows = [[d["function"], d["node"] or "?", d["pass"], d["decision"]] for d in decisions]
        parts.append("Pass decisions (per ONNX node):\n" + _table(["function", "node", "pass", "decision"], rows))
    dispatches = getattr(result, "dispatches", []) or []
    if dispatches:
        rows = []
        for d in dispatches:
            loops = "x".join("?" if x < 0 else str(x) for x in d.get("loops", []))
            flops = f"{d['flops'] / 1e6:.2f}M" if d.get("flops", -1) >= 0 else "?"
            rows.append([d["dispatch"], f"{d['root']} ({d['kind']})", loops, d.get("element_type", ""), flops,
                         ", ".join(d.get("fused", [])) or "-", d.get("config_source", "IREE"),
                         _short_config(d.get("config", "")) or "IREE's"])
        parts.append(f"Dispatches ({len(dispatches)}):\n" + _table(
            ["dispatch", "root", "loops", "type", "FLOPs", "fused", "config from", "config"], rows))
    return "\n\n".join(parts) if parts else "(nothing to explain: no dispatches were built)"
