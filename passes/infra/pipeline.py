"""Textual pipelines that mix inferx passes with upstream MLIR passes.

`builtin.module(canonicalize,inferx-annotate-precision{precision=f16},cse)` is split
at top level; `inferx-*` elements become Python passes from the registry, everything
else is handed to MLIR's own pipeline parser unchanged. One pipeline runs in one
MLIR world (graph or iree); inferx passes of both levels in one pipeline is an error.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Optional

from inferx_compiler.errors import PassOptionError, PipelineError
from inferx_compiler.mlir_contexts import Bindings, bindings
from inferx_compiler.passes.infra.base import ANY_LEVEL, ModulePass, PassFailure
from inferx_compiler.passes.infra.registry import get_pass_class


@dataclass(frozen=True)
class PipelineElement:
    text: str
    inferx_pass: Optional[ModulePass] = None


def split_top_level(text: str, sep: str = ",") -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
            if depth < 0:
                raise PassOptionError(f"unbalanced ')' or '}}' in pipeline '{text}'")
        if ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise PassOptionError(f"unbalanced '(' or '{{' in pipeline '{text}'")
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return [p for p in parts if p]


def _strip_module_anchor(text: str) -> str:
    text = text.strip()
    for anchor in ("builtin.module(", "module("):
        if text.startswith(anchor) and text.endswith(")"):
            return text[len(anchor):-1]
    return text


def parse_inferx_element(text: str) -> ModulePass:
    name, _, rest = text.partition("{")
    name = name.strip()
    options = {}
    if rest:
        if not rest.endswith("}"):
            raise PassOptionError(f"pass '{name}': options must end with '}}' in '{text}'")
        for item in rest[:-1].split():
            key, eq, value = item.partition("=")
            if not eq:
                raise PassOptionError(
                    f"pass '{name}': option '{item}' must be spelled key=value"
                )
            options[key] = value
    return get_pass_class(name).from_options(options)


def parse_pipeline(text: str) -> list[PipelineElement]:
    elements = []
    for part in split_top_level(_strip_module_anchor(text)):
        if part.startswith("inferx-"):
            elements.append(PipelineElement(part, parse_inferx_element(part)))
        else:
            elements.append(PipelineElement(part))
    return elements


def pipeline_level(elements: list[PipelineElement], default: str) -> str:
    placed = [e.inferx_pass for e in elements if e.inferx_pass and e.inferx_pass.level != ANY_LEVEL]
    levels = {p.level for p in placed}
    if len(levels) > 1:
        names = ", ".join(f"{p.name} ({p.level})" for p in placed)
        raise PassOptionError(
            f"one pipeline cannot mix graph-level and iree-level inferx passes: {names}"
        )
    return levels.pop() if levels else default


def format_pipeline(elements: list[PipelineElement]) -> str:
    body = ",".join(e.inferx_pass.spelling() if e.inferx_pass else e.text for e in elements)
    return f"builtin.module({body})"


def _python_pass(inferx_pass: ModulePass):
    def run(op, pass_handle):
        try:
            inferx_pass.run(op)
        except PassFailure as failure:
            where = failure.op if failure.op is not None else op
            where.location.emit_error(f"{inferx_pass.name}: {failure}")
            pass_handle.signal_pass_failure()

    return run


def build_pass_manager(elements: list[PipelineElement], b: Bindings, context,
                       print_ir_after_all: bool = False):
    pm = b.PassManager("builtin.module", context=context)
    for e in elements:
        if e.inferx_pass:
            pm.add(_python_pass(e.inferx_pass), name=e.inferx_pass.name,
                   argument=e.inferx_pass.name)
        else:
            try:
                pm.add(e.text)
            except ValueError as err:
                raise PassOptionError(f"cannot parse pipeline element '{e.text}': {err}") from None
    if print_ir_after_all:
        pm.enable_ir_printing(print_after_all=True, large_elements_limit=16,
                              large_resource_limit=64)
    return pm


def run_pipeline(module_op, text: str, level: str, stage: str = "pipeline",
                 save_repro: bool = True) -> None:
    """Run `text` on `module_op` (a builtin.module Operation) in-place.

    On failure, saves the input IR as bytecode and raises PipelineError whose
    message holds the diagnostics and the `inferx-opt` command that reproduces it;
    its `location_names` are the names in its error diagnostics' locations, first one first.
    """
    elements = parse_pipeline(text)
    if not elements:
        return
    b = bindings(pipeline_level(elements, level))
    pm = build_pass_manager(elements, b, module_op.context)
    saved_input = _bytecode(module_op) if save_repro else b""
    try:
        pm.run(module_op)
    except b.ir.MLIRError as err:
        repro = (save_reproducer(saved_input, stage, inferx_opt_command(format_pipeline(elements)))
                 if save_repro else None)
        from inferx_compiler.passes.infra.locations import location_names

        diags = getattr(err, "error_diagnostics", None) or []
        names = [n for d in diags for n in location_names(d.location)]
        failure = PipelineError(f"{stage} failed: {_format_mlir_error(err)}", repro,
                                location_names=names, stage=stage, messages=[d.message for d in diags])
        raise failure from None


def _bytecode(module_op) -> bytes:
    from inferx_compiler.mlir_contexts import module_to_bytecode

    return module_to_bytecode(module_op)


def _format_mlir_error(err) -> str:
    lines = []
    for d in getattr(err, "error_diagnostics", []) or []:
        lines.append(shorten_targets(f"{d.location}: {d.message}"))
        for n in d.notes[:3]:
            lines.append(shorten_targets(f"  note: {n.location}: {n.message}"))
    return "\n".join(lines) if lines else shorten_targets(str(err))


def save_reproducer(module_bytes: bytes, stage: str, command) -> str:
    """Write the failing input IR to a fresh directory (under $INFERX_REPRO_DIR, else the temp
    dir) with a reproduce.sh; `command(path)` spells the command. Returns the hint to print."""
    base = os.environ.get("INFERX_REPRO_DIR") or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    repro_dir = tempfile.mkdtemp(prefix=f"inferx-repro-{stage.replace(' ', '-')}-", dir=base)
    path = os.path.join(repro_dir, "input.mlirbc")
    with open(path, "wb") as f:
        f.write(module_bytes)
    cmd = command(path)
    with open(os.path.join(repro_dir, "reproduce.sh"), "w") as f:
        f.write("#!/bin/sh\n" + cmd + "\n")
    return f"input IR saved to {path}\nreproduce with:\n  {cmd}"


def inferx_opt_command(pipeline_text: str):
    return lambda path: f"inferx-opt {path} --pass-pipeline='{pipeline_text}'"


def shorten_targets(message: str) -> str:
    """A diagnostic with IREE's executable target attribute spelled out (thousands of characters
    of CPU features) keeps only its backend and format: `#hal.executable.target<"llvm-cpu",
    "embedded-elf-x86_64", ...>`."""
    marker = "#hal.executable.target<"
    out, i = [], 0
    while True:
        j = message.find(marker, i)
        if j < 0:
            return "".join(out) + message[i:]
        depth, k = 0, j + len(marker) - 1
        while k < len(message):
            depth += {"<": 1, ">": -1}.get(message[k], 0)
            if depth == 0:
                break
            k += 1
        head = message[j + len(marker):k].split(",")[:2]
        out.append(message[i:j] + marker + ",".join(head) + ", ...>")
        i = k + 1
