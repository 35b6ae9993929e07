"""inferx-dispatch-report: state, on each hal.executable, what its dispatch computes.

Runs at dispatch level (IREE context, on `executable-sources` IR, one hal.executable
per dispatch). For each executable it finds the root linalg op (the contraction if
there is one, else the last linalg op) and attaches

    inferx.dispatch = {root = "linalg.matmul", kind = "contraction",
                       element_type = "f32", loops = [?, 256, 784], flops = N}

(`loops` holds -1 for a dynamic extent; `flops` is -1 when any loop is dynamic).
Why: this is the per-dispatch inventory that later target-width and precision passes
read, and the build report shows it. The pass only adds attributes; it never changes
what a dispatch computes. Spelled `inferx-dispatch-report` (no options).
"""

from __future__ import annotations

import dataclasses
import math

from .base import ModulePass

REPORT_ATTR = "inferx.dispatch"
_CONTRACTION_PREFIXES = ("linalg.matmul", "linalg.batch_matmul", "linalg.conv", "linalg.depthwise",
                         "linalg.matvec", "linalg.vecmat", "linalg.batch_mat", "linalg.contract",
                         "linalg.mmt4d", "linalg.batch_mmt4d", "linalg.pooling")


@dataclasses.dataclass(frozen=True)
class DispatchReport(ModulePass):
    name = "inferx-dispatch-report"
    level = "iree"
    summary = "annotate each hal.executable with its root op, loop extents and FLOPs"

    def run(self, module) -> None:
        from iree.compiler import ir

        for executable in _executables(module):
            linalg_ops = _linalg_ops(executable)
            if not linalg_ops:
                continue
            root = _root_op(linalg_ops)
            info = describe_linalg_op(root)
            with module.context:
                executable.attributes[REPORT_ATTR] = ir.DictAttr.get({
                    "root": ir.StringAttr.get(root.name),
                    "kind": ir.StringAttr.get(info["kind"]),
                    "element_type": ir.StringAttr.get(info["element_type"]),
                    "loops": ir.DenseI64ArrayAttr.get(info["loops"]),
                    "flops": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), info["flops"]),
                    "linalg_ops": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(linalg_ops)),
                })


def _executables(module):
    found = []

    def visit(op):
        from iree.compiler import ir

        if op.name == "hal.executable":
            found.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found


def _linalg_ops(executable):
    from iree.compiler import ir

    ops = []

    def visit(op):
        if op.name.startswith("linalg.") and op.name not in ("linalg.yield", "linalg.index", "linalg.fill"):
            ops.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    executable.walk(visit)
    return ops


def _root_op(linalg_ops):
    for op in linalg_ops:
        if is_contraction(op):
            return op
    return linalg_ops[-1]


def is_contraction(op) -> bool:
    if op.name.startswith(_CONTRACTION_PREFIXES):
        return True
    return op.name == "linalg.generic" and _reduction_dims(op) and _has_mul_add(op)


def _has_mul_add(op) -> bool:
    names = {inner.name for inner in op.regions[0].blocks[0].operations}
    return bool(names & {"arith.mulf", "arith.muli"}) and bool(names & {"arith.addf", "arith.addi"})


def _maps(op):
    from iree.compiler import ir

    if "indexing_maps" not in op.attributes:
        return None
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _reduction_dims(op) -> list[int]:
    from iree.compiler import ir

    maps = _maps(op)
    if not maps:
        return []
    out_dims = {e.position for e in maps[-1].results if isinstance(e, ir.AffineDimExpr)}
    return [d for d in range(maps[-1].n_dims) if d not in out_dims]


def _loop_extents(op) -> list[int]:
    """Loop extents from operand shapes through the indexing maps (-1: unknown)."""
    from iree.compiler import ir

    maps = _maps(op)
    if not maps:
        out = op.results[0].type if len(op.results) else op.operands[-1].type
        return [d if d >= 0 else -1 for d in out.shape] if isinstance(out, ir.ShapedType) else []
    extents = [-1] * maps[0].n_dims
    for value, amap in zip(op.operands, maps):
        if not isinstance(value.type, ir.ShapedType):
            continue
        shape = value.type.shape
        for size, expr in zip(shape, amap.results):
            if isinstance(expr, ir.AffineDimExpr) and size >= 0:
                extents[expr.position] = size
    return extents


def _element_type(op) -> str:
    from iree.compiler import ir

    for value in op.operands:
        if isinstance(value.type, ir.ShapedType):
            return str(value.type.element_type)
    return "none"


def describe_linalg_op(op) -> dict:
    loops = _loop_extents(op)
    contraction = is_contraction(op)
    if contraction:
        kind = "contraction"
    elif _reduction_dims(op):
        kind = "reduction"
    else:
        kind = "elementwise" if op.name == "linalg.generic" else op.name.removeprefix("linalg.")
    if loops and all(x >= 0 for x in loops):
        body_ops = max(1, len(op.regions[0].blocks[0].operations) - 1) if op.regions and len(op.regions[0].blocks) else 1
        flops = 2 * math.prod(loops) if contraction else body_ops * math.prod(loops)
    else:
        flops = -1
    return {"kind": kind, "element_type": _element_type(op), "loops": loops, "flops": flops}
