"""What counts as a contraction, and how much work it is: read by the precision passes.

A contraction is a linalg op on tensors that structurally is a contraction
(matmul, batch_matmul, matvec, generic with reduction loops ...) or a convolution, and
whose body multiplies and accumulates: yield(add(out, mul(a, b))), casts allowed.
Pooling ops pass linalg's convolution test but fail the mul-add test.
"""

from __future__ import annotations

import math
from typing import Optional

from torch_mlir import ir
from torch_mlir.dialects import linalg

_CASTS = {"arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp",
          "arith.extsi", "arith.extui", "arith.trunci"}


def _producer(value: ir.Value) -> Optional[ir.Operation]:
    """The op defining `value`, looking through casts; None for block arguments."""
    while isinstance(value, ir.OpResult):
        op = value.owner.operation
        if op.name not in _CASTS:
            return op
        value = op.operands[0]
    return None


def _through_casts(value: ir.Value) -> ir.Value:
    while isinstance(value, ir.OpResult) and value.owner.operation.name in _CASTS:
        value = value.owner.operation.operands[0]
    return value


def has_mul_add_body(op: ir.Operation) -> bool:
    """yield(add(acc, mul(x, y))) with acc the output block argument."""
    if len(op.regions) != 1 or len(op.results) != 1:
        return False
    block = op.regions[0].blocks[0]
    terminator = list(block.operations)[-1].operation
    add = _producer(terminator.operands[0])
    if add is None or add.name not in ("arith.addf", "arith.addi"):
        return False
    acc = block.arguments[len(block.arguments) - 1]
    lhs, rhs = (_through_casts(v) for v in add.operands)
    other = rhs if lhs == acc else lhs if rhs == acc else None
    mul = _producer(other) if other is not None else None
    return mul is not None and mul.name in ("arith.mulf", "arith.muli")


def is_contraction(op: ir.Operation) -> bool:
    """A tensor-semantics linalg contraction or convolution with a mul-add body."""
    if not op.name.startswith("linalg.") or len(op.results) != 1:
        return False
    structural = linalg.isa_contraction_op(op) or linalg.isa_convolution_op(op)
    return structural and has_mul_add_body(op)


def inputs_and_init(op: ir.Operation) -> tuple[list[ir.Value], ir.Value]:
    """DPS operands of a one-result structured op: (inputs, output init)."""
    operands = list(op.operands)
    return operands[:-1], operands[-1]


def estimate_flops(op: ir.Operation) -> Optional[int]:
    """2 x (product of loop ranges): one multiply and one add per iteration.

    Loop ranges are read where a loop appears alone in some operand's indexing map;
    None when any of them is dynamic.
    """
    maps = [m.value for m in linalg.get_indexing_maps(op)]
    ranges: dict[int, int] = {}
    for amap, operand in zip(maps, op.operands):
        shape = operand.type.shape
        for expr, size in zip(amap.results, shape):
            if isinstance(expr, ir.AffineDimExpr):
                ranges.setdefault(expr.position, size)
    n_loops = maps[0].n_dims
    if len(ranges) != n_loops or any(ir.ShapedType.is_dynamic_size(s) for s in ranges.values()):
        return None
    return 2 * math.prod(ranges.values())
