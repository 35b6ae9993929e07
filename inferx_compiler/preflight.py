"""`inferx-compile MODEL --check`: will this model compile for this target? Every problem at once.

The check runs the build's own stages (import, ONNX to torch, torch to linalg, the inferx
graph passes, IREE up to its dispatch formation and the dispatch passes; no code generation),
so what it accepts, a build accepts up to code generation. A pipeline stops at its first
failure; to report every problem, the check *cuts* the nodes a failure names out of the
ONNX graph (their outputs become graph inputs of the same type and shape, so everything
downstream is still checked) and runs again, until the model goes through, a failure names
no node, or a node cannot be cut (outputs of unknown type). Each problem names its stage and
the ONNX node (name, op type, domain, opset).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Optional

import onnx

from inferx_compiler.frontend import onnx_import
from inferx_compiler.errors import InferXError, ModelLoadError, PipelineError, UnsupportedOpsError
from inferx_compiler.log import BuildLog
from inferx_compiler.frontend.onnx_nodes import describe_node
from inferx_compiler.options import CompileOptions

MAX_ROUNDS = 12  # builds tried; each round cuts the nodes of one failure

_NON_NUMERIC = {onnx.TensorProto.STRING: "string", onnx.TensorProto.COMPLEX64: "complex64",
                onnx.TensorProto.COMPLEX128: "complex128"}


@dataclass
class Problem:
    stage: str
    message: str
    node: Optional[dict] = None  # {name, op_type, domain, opset}

    def to_json(self) -> dict:
        return {"stage": self.stage, "message": self.message, "node": self.node}

    def format(self) -> str:
        where = describe_node(self.node) if self.node else "(no ONNX node named)"
        return f"[{self.stage}] {where}: {self.message}"


@dataclass
class CheckReport:
    model: str
    target: str
    problems: list[Problem] = field(default_factory=list)
    rounds: int = 0
    complete: bool = True  # False: checking stopped before every node was seen
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.complete

    def to_json(self) -> dict:
        return {"model": self.model, "target": self.target, "ok": self.ok, "complete": self.complete,
                "rounds": self.rounds, "problems": [p.to_json() for p in self.problems], "notes": self.notes}

    def format(self) -> str:
        if self.ok:
            return (f"{self.model}: OK for target '{self.target}': import, lowering and IREE's dispatch "
                    f"formation went through ({self.rounds} build{'s' if self.rounds != 1 else ''} tried)")
        lines = [f"{self.model}: {len(self.problems)} problem(s) for target '{self.target}':"]
        lines += [f"  {p.format()}" for p in self.problems]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def check_onnx_file(path: str, options: CompileOptions, log: BuildLog) -> CheckReport:
    from inferx_compiler.build import resolve_build

    report = CheckReport(model=path, target=options.target)
    resolve_build(options)
    try:
        model, digest = onnx_import.load_model(path)
    except ModelLoadError as e:
        report.problems.append(Problem("load", str(e)))
        return report
    name = os.path.splitext(os.path.basename(path))[0]
    onnx_import.name_nodes(model)
    _check_tensor_types(model, report)
    if report.problems:
        report.complete = False
        report.notes.append("later stages were not checked: no lowering takes non-numeric tensors")
        return report
    _probe_builds(model, name, digest, _check_options(options), report, log)
    return report


def _check_options(options: CompileOptions) -> CompileOptions:
    """The build's options, stopped before code generation; no calibration runs."""
    return dataclasses.replace(options, emit="executable-sources", calibration=None,
                               accuracy_budget=None, measure_buckets=False)


def _check_tensor_types(model: onnx.ModelProto, report: CheckReport) -> None:
    """Tensors no lowering can hold (strings, complex): the nodes that make or take them."""
    inferred = _inferred(model)
    kinds = {vi.name: _NON_NUMERIC[vi.type.tensor_type.elem_type]
             for vi in _value_infos(inferred) if vi.type.tensor_type.elem_type in _NON_NUMERIC}
    for n in model.graph.node:
        bad = sorted({kinds[t] for t in list(n.input) + list(n.output) if t in kinds})
        if bad:
            report.problems.append(Problem("onnx", f"takes or makes {'/'.join(bad)} tensors, which no "
                                                   f"lowering supports", onnx_import.node_record(model, n)))
    for vi in list(model.graph.input) + list(model.graph.output):
        if vi.name in kinds and not any(vi.name in list(n.input) + list(n.output) for n in model.graph.node):
            report.problems.append(Problem("onnx", f"graph {'input' if vi in model.graph.input else 'output'} "
                                                   f"'{vi.name}' is a {kinds[vi.name]} tensor"))


def _probe_builds(model, name: str, digest: str, options: CompileOptions, report: CheckReport,
                  log: BuildLog) -> None:
    from inferx_compiler.driver import compile_onnx_model

    for round_ in range(1, MAX_ROUNDS + 1):
        report.rounds = round_
        log.step(f"check: build {round_} (up to IREE's dispatch formation)")
        trial = onnx.ModelProto()
        trial.CopyFrom(model)
        try:
            compile_onnx_model(trial, name, digest, options, BuildLog(quiet=True))
            return
        except InferXError as e:
            stage, nodes, message = _classify(e)
            unlowered = e.unlowered if isinstance(e, PipelineError) else {}
        if not nodes:
            report.problems.append(Problem(stage, message))
            if round_ > 1:
                report.notes.append("this failure may follow from cutting the nodes named above")
            return
        report.problems += [Problem(stage, f"left unconverted as {unlowered[n['name']]}" if n["name"] in unlowered
                                    else message, n) for n in nodes]
        log.step(f"check: {stage}: {', '.join(n['name'] for n in nodes)}; cutting and building again")
        uncut = cut_nodes(model, {n["name"] for n in nodes})
        if not model.graph.output or not model.graph.node:
            return  # nothing is left to check
        if uncut:
            report.complete = False
            report.notes.append(f"checking stopped at node(s) {', '.join(uncut)}: the types of their outputs "
                                f"are unknown, so the graph cannot be checked past them")
            return
    report.complete = False
    report.notes.append(f"checking stopped after {MAX_ROUNDS} builds; there may be more problems")


def _classify(error: InferXError) -> tuple[str, list[dict], str]:
    """(stage, ONNX nodes, one-line message) of a failed build."""
    if isinstance(error, UnsupportedOpsError):
        foreign = [n for n in error.nodes if n["domain"] not in onnx_import.LOWERABLE_DOMAINS]
        if foreign:
            return "onnx", foreign, "no lowering exists for ops of this operator domain"
        return "onnx-to-torch", error.nodes, "torch-mlir has no conversion of this op (at this opset)"
    if isinstance(error, PipelineError):
        return error.stage or "pipeline", error.nodes, _first_message(error)
    if isinstance(error, ModelLoadError):
        return "load", [], str(error)
    return "options", [], str(error)


def _first_message(error: PipelineError) -> str:
    """The first error diagnostic's text, without the operation it prints after ': %'."""
    if not error.messages:
        return error.detail.splitlines()[0][:400]
    return error.messages[0].splitlines()[0].split(": %", 1)[0][:400]


def cut_nodes(model: onnx.ModelProto, names: set[str]) -> list[str]:
    """Remove the named nodes from the graph so that the rest can still be checked: each
    output another node reads becomes a graph input of its inferred type, each input another
    node makes becomes a graph output (keeping its producers alive), graph outputs the nodes
    made are dropped. Returns the nodes that could not be cut (an output read downstream has
    no known type), leaving those in place."""
    graph = model.graph
    infos = {vi.name: vi for vi in _value_infos(_inferred(model))}
    known = {t for t in infos if infos[t].type.tensor_type.elem_type}
    produced = {t for n in graph.node if n.name not in names for t in n.output}
    read = {t for n in graph.node if n.name not in names for t in n.input}
    uncut = []
    for node in [n for n in graph.node if n.name in names]:
        needed = [t for t in node.output if t and t in read]
        if any(t not in known for t in needed):
            uncut.append(node.name)
            continue
        graph.input.extend(infos[t] for t in needed)
        present = {vi.name for vi in graph.output}
        graph.output.extend(infos[t] for t in dict.fromkeys(node.input)
                            if t in produced and t in known and t not in present)
        kept = [vi for vi in graph.output if vi.name not in node.output]
        del graph.output[:]
        graph.output.extend(kept)
        graph.node.remove(node)
    return uncut


def _inferred(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception:  # contrib ops and broken models: what the graph declares
        return model


def _value_infos(model: onnx.ModelProto):
    graph = model.graph
    return list(graph.value_info) + list(graph.input) + list(graph.output)
