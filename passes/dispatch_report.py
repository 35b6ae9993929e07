"""inferx-dispatch-report: state, on each hal.executable, what its dispatch computes.

Runs at dispatch level (IREE context, on `executable-sources` IR, one hal.executable
per dispatch). For each executable it finds the root linalg op (the contraction if
there is one, else the last linalg op) and attaches

    inferx.dispatch = {root = "linalg.matmul", kind = "contraction", element_type = "f32",
                       loops = [?, 256, 784], flops = N, linalg_ops = 2,
                       fused = ["generic:elementwise"]}

(`loops` holds -1 for a dynamic extent; `flops` is -1 when any loop is dynamic; `fused` names
the other linalg ops in the dispatch). An executable of an external kernel has no linalg op:
the rows its export carries (written by the pass that made it) are copied to it. What counts
as a contraction, the loops and FLOPs come from `linalg_analysis`, the one analysis every pass
uses.
Why: this is the per-dispatch inventory that later target-width and precision passes
read, and the build report shows it. The pass only adds attributes; it never changes
what a dispatch computes. Spelled `inferx-dispatch-report` (no options).
"""

from __future__ import annotations

from typing import ClassVar, Optional

import dataclasses

from inferx_compiler.passes.infra.base import ModulePass
from inferx_compiler.passes.analysis.linalg_analysis import is_contraction, is_structured, summarize

from inferx_compiler.passes.infra.attributes import CONFIG_ATTR, REPORT_ATTR


@dataclasses.dataclass(frozen=True)
class DispatchReport(ModulePass):
    """Writes on each hal.executable what its dispatch computes (root op, loops, FLOPs, fused ops)."""

    name: ClassVar[str] = "inferx-dispatch-report"
    level: ClassVar[str] = "iree"
    summary: ClassVar[str] = "annotate each hal.executable with its root op, loop extents and FLOPs"

    @classmethod
    def for_build(cls, build) -> "Optional[DispatchReport]":
        return cls() if build.target.executable else None

    def run(self, module) -> None:
        from iree.compiler import ir

        for executable in executables(module):
            ops = structured_ops(executable)
            if not ops:
                _copy_external_rows(executable)
                continue
            root = root_op(ops)
            info = summarize(root)
            with module.context:
                executable.attributes[REPORT_ATTR] = ir.DictAttr.get({
                    "root": ir.StringAttr.get(root.name),
                    "kind": ir.StringAttr.get(info.kind),
                    "element_type": ir.StringAttr.get(info.element_type),
                    "loops": ir.DenseI64ArrayAttr.get(info.loops),
                    "flops": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), info.flops),
                    "linalg_ops": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(ops)),
                    "fused": ir.ArrayAttr.get([ir.StringAttr.get(_short(o)) for o in ops if o != root]),
                })


def _copy_external_rows(executable) -> None:
    """An external kernel's executable has no linalg op to read: its export (a Hopper kernel's,
    inferx-hopper-matmul) or its entry function (a CPU kernel's, cpu_extern.py) carries the rows
    the pass that made it wrote (REPORT_ATTR and the config's)."""
    from iree.compiler import ir


    def visit(op):
        if op.name in ("hal.executable.export", "func.func") and REPORT_ATTR in op.attributes:
            for name in (REPORT_ATTR, CONFIG_ATTR):
                if name in op.attributes:
                    executable.attributes[name] = op.attributes[name]
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    executable.walk(visit)


def executables(module):
    """The module's hal.executable ops (one per dispatch at executable-sources)."""
    found = []

    def visit(op):
        from iree.compiler import ir

        if op.name == "hal.executable":
            found.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found


def structured_ops(executable):
    """The linalg ops that compute inside an executable, in order."""
    from iree.compiler import ir

    ops = []

    def visit(op):
        if is_structured(op):
            ops.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    executable.walk(visit)
    return ops


def root_op(ops):
    """The dispatch's root: its contraction if it has one, else its last op."""
    for op in ops:
        if is_contraction(op):
            return op
    return ops[-1]


def _short(op) -> str:
    """`linalg.generic` ops named by what they do (elementwise, reduction...), others by name."""
    return f"generic:{summarize(op).kind}" if op.name == "linalg.generic" else op.name
