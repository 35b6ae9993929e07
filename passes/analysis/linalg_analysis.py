"""One analysis of linalg ops for every pass and the build report, in either MLIR world.

A *contraction* is a tensor linalg op that is structurally a contraction or a convolution
(`isa_contraction_op` / `isa_convolution_op`: matmul, batch_matmul, matvec, conv_*,
depthwise_conv_*, or a generic of that shape) and whose body multiplies and accumulates:
yield(add(out, mul(a, b))), casts allowed. Pooling ops pass the convolution test and fail the
mul-add one. Loop extents come from the op's indexing maps (named ops included) and its
operand shapes; FLOPs are 2 per iteration for contractions, one per body op otherwise.

The functions take ops of torch-mlir's bindings (graph-level passes) or IREE's (input and
dispatch passes); `_linalg(op)` picks the matching `linalg` dialect module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

_CASTS = {"arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp",
          "arith.extsi", "arith.extui", "arith.trunci"}
_NOT_COMPUTE = ("linalg.yield", "linalg.index", "linalg.fill")


def _bindings(op):
    """(ir, linalg) modules of the MLIR bindings `op` belongs to."""
    if type(op).__module__.startswith("iree."):
        from iree.compiler import ir
        from iree.compiler.dialects import linalg
    else:
        from torch_mlir import ir
        from torch_mlir.dialects import linalg
    return ir, linalg


def _producer(ir, value) -> Optional[object]:
    """The op defining `value`, looking through casts; None for block arguments."""
    while isinstance(value, ir.OpResult):
        op = value.owner.operation
        if op.name not in _CASTS:
            return op
        value = op.operands[0]
    return None


def _through_casts(ir, value):
    while isinstance(value, ir.OpResult) and value.owner.operation.name in _CASTS:
        value = value.owner.operation.operands[0]
    return value


def has_mul_add_body(op) -> bool:
    """yield(add(acc, mul(x, y))) with acc the output block argument."""
    ir, _ = _bindings(op)
    if len(op.regions) != 1 or len(op.results) != 1 or not len(op.regions[0].blocks):
        return False
    block = op.regions[0].blocks[0]
    terminator = list(block.operations)[-1].operation
    if not len(terminator.operands):
        return False
    add = _producer(ir, terminator.operands[0])
    if add is None or add.name not in ("arith.addf", "arith.addi"):
        return False
    acc = block.arguments[len(block.arguments) - 1]
    lhs, rhs = (_through_casts(ir, v) for v in add.operands)
    other = rhs if lhs == acc else lhs if rhs == acc else None
    mul = _producer(ir, other) if other is not None else None
    return mul is not None and mul.name in ("arith.mulf", "arith.muli")


def is_contraction(op) -> bool:
    """A tensor-semantics linalg contraction or convolution with a mul-add body."""
    if not op.name.startswith("linalg.") or len(op.results) != 1:
        return False
    _, linalg = _bindings(op)
    try:
        structural = linalg.isa_contraction_op(op) or linalg.isa_convolution_op(op)
    except Exception:  # not a structured op
        return False
    return structural and has_mul_add_body(op)


def collect(root, predicate) -> list:
    """Every op under `root` (pre-order) for which `predicate` holds; rewrite after collecting."""
    ir, _ = _bindings(root)
    found = []

    def visit(op):
        if predicate(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def is_convolution_op(op) -> bool:
    """A linalg convolution by name (conv_*, depthwise_conv_*; not pooling)."""
    return op.name.startswith(("linalg.conv_", "linalg.depthwise_conv_"))


def inputs_and_init(op) -> tuple[list, object]:
    """DPS operands of a one-result structured op: (inputs, output init)."""
    operands = list(op.operands)
    return operands[:-1], operands[-1]


def is_structured(op) -> bool:
    return op.name.startswith("linalg.") and op.name not in _NOT_COMPUTE


def indexing_maps(op) -> list:
    """The op's indexing maps (affine maps, operands in order; a named op's implicit ones too),
    or [] for an op without them."""
    _, linalg = _bindings(op)
    try:
        return [m.value for m in linalg.get_indexing_maps(op)]
    except Exception:
        return []


def loop_extents(op) -> list[int]:
    """Each loop's extent, read where a loop appears alone in some operand's indexing map
    (-1 when no operand fixes it, or the size is dynamic)."""
    ir, _ = _bindings(op)
    maps = indexing_maps(op)
    if not maps:
        out = op.results[0].type if len(op.results) else op.operands[-1].type
        return [d if d >= 0 else -1 for d in out.shape] if isinstance(out, ir.ShapedType) else []
    extents = [-1] * maps[0].n_dims
    for value, amap in zip(op.operands, maps):
        if not isinstance(value.type, ir.ShapedType):
            continue
        for size, expr in zip(value.type.shape, amap.results):
            if isinstance(expr, ir.AffineDimExpr) and size >= 0 and extents[expr.position] < 0:
                extents[expr.position] = size
    return extents


def all_parallel(op) -> bool:
    """Whether every loop of a structured op (with `iterator_types`) is parallel."""
    return all("parallel" in str(it) for it in op.attributes["iterator_types"])


def reduction_loops(op) -> list[int]:
    """Loops that do not index the output."""
    ir, linalg = _bindings(op)
    try:
        maps = [m.value for m in linalg.get_indexing_maps(op)]
    except Exception:
        return []
    if not maps:
        return []
    out_dims = {e.position for e in maps[-1].results if isinstance(e, ir.AffineDimExpr)}
    return [d for d in range(maps[-1].n_dims) if d not in out_dims]


def element_type(op) -> str:
    ir, _ = _bindings(op)
    for value in op.operands:
        if isinstance(value.type, ir.ShapedType):
            return str(value.type.element_type)
    return "none"


def estimate_flops(op) -> Optional[int]:
    """2 x iterations for a contraction, body ops x iterations otherwise; None when any loop
    extent is unknown."""
    loops = loop_extents(op)
    if not loops or any(x < 0 for x in loops):
        return None
    if is_contraction(op):
        return 2 * math.prod(loops)
    body = 1
    if op.regions and len(op.regions[0].blocks):
        body = max(1, len(op.regions[0].blocks[0].operations) - 1)
    return body * math.prod(loops)


@dataclass(frozen=True)
class OpSummary:
    name: str
    kind: str  # contraction | reduction | elementwise | softmax | pooling | ...
    element_type: str
    loops: list
    flops: int  # -1 when unknown


def summarize(op) -> OpSummary:
    _, linalg = _bindings(op)
    if is_contraction(op):
        kind = "contraction"
    elif op.name.startswith("linalg.pooling"):
        kind = "pooling"
    elif reduction_loops(op):
        kind = "reduction"
    elif op.name == "linalg.generic":
        kind = "elementwise"
    else:
        kind = op.name.removeprefix("linalg.")
    flops = estimate_flops(op)
    return OpSummary(op.name, kind, element_type(op), loop_extents(op), -1 if flops is None else flops)


def function_flops(func_op) -> int:
    """Work of one call of a function: the FLOPs of every structured op in it (-1 when any
    extent is dynamic)."""
    ir, _ = _bindings(func_op)
    total = 0

    def visit(op):
        nonlocal total
        if total >= 0 and is_structured(op) and len(op.results) > 0:
            flops = estimate_flops(op)
            total = -1 if flops is None else total + flops
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    return total
