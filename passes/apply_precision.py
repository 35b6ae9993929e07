"""inferx-apply-precision: carry out `inferx.precision = "f16" | "bf16"` annotations.

For each annotated contraction whose operands are all f32, truncates every input with
an elementwise linalg.generic (`arith.truncf`; one per value, shared by the contractions that
read it) and makes the contraction read the
low-precision inputs while it still accumulates into its f32 output:
  - named ops (linalg.matmul, conv_2d_*, ...) are rebuilt with the new inputs; their
    bodies cast each input to the output type, so `extf` appears inside the body;
  - linalg.generic gets the new inputs and its block arguments become f16/bf16, each
    followed by an `arith.extf` back to f32 that the old body uses.
The annotation is removed from rewritten ops (the types now state the decision).
Declined, annotation left for the record: "f32" (stay as is), "i8" (needs a
quantization pass), non-contractions and contractions with non-f32 operands.
A malformed annotation (not a string, or not one of f32|f16|bf16|i8) fails the pass.
Constant weights are truncated by IREE at compile time (const-eval).

Spelled `inferx-apply-precision` (no options).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg

from inferx_compiler.dialects.inferx import PRECISION_ATTR, PRECISIONS
from inferx_compiler.passes.infra.base import ModulePass, PassFailure
from inferx_compiler.passes.analysis.linalg_analysis import collect, inputs_and_init, is_contraction
from inferx_compiler.passes.support.linalg_util import empty_like, parallel_generic

_LOW = {"f16": ir.F16Type, "bf16": ir.BF16Type}
_MEMOIZED = "linalg.memoized_indexing_maps"  # cached by get_indexing_maps; not copied


def truncate(value: ir.Value, element_type: ir.Type, loc) -> ir.Value:
    """An elementwise linalg.generic `arith.truncf` of a float tensor."""
    identity = ir.AffineMap.get_identity(value.type.rank)
    return parallel_generic([value], [identity], empty_like(value, element_type, loc),
                            lambda x: arith.truncf(element_type, x), loc)


class Truncations:
    """One truncation per (value, type, block): contractions that read the same f32 value (an
    attention's query, key and value projections of one input) read the same low-precision
    copy, made in front of the first of them. Otherwise each gets a copy of its own, and later
    passes can no longer see that they share an input (inferx-hopper-matmul's sibling groups)."""

    def __init__(self):
        self._made = {}

    def of(self, value: ir.Value, element_type: ir.Type, user: ir.Operation) -> ir.Value:
        key = (value, str(element_type), user.operation.block)
        if key not in self._made:
            with ir.InsertionPoint(user), user.location:
                self._made[key] = truncate(value, element_type, user.location)
        return self._made[key]


def read_precision(op: ir.Operation) -> str:
    attr = op.attributes[PRECISION_ATTR]
    if not isinstance(attr, ir.StringAttr) or attr.value not in PRECISIONS:
        raise PassFailure(
            f"{PRECISION_ATTR} must be one of " + " | ".join(f'"{p}"' for p in PRECISIONS)
            + f", got {attr}", op=op)
    return attr.value


def _demotable(op: ir.Operation) -> bool:
    return is_contraction(op) and all(
        isinstance(v.type.element_type, ir.F32Type) for v in op.operands)


def demote_named(op: ir.Operation, low: ir.Type, truncations: Truncations) -> bool:
    """Rebuild a named contraction on truncated inputs; declines linalg.generic."""
    if op.name == "linalg.generic":
        return False
    inputs, init = inputs_and_init(op)
    new_inputs = [truncations.of(v, low, op) for v in inputs]
    with ir.InsertionPoint(op), op.location:
        attributes = {k: op.attributes[k] for k in op.attributes
                      if k not in (PRECISION_ATTR, _MEMOIZED)}
        new = ir.Operation.create(op.name, results=[r.type for r in op.results],
                                  operands=new_inputs + [init], attributes=attributes,
                                  regions=1, loc=op.location)
    linalg.fill_builtin_region(new)
    op.results[0].replace_all_uses_with(new.results[0])
    op.erase()
    return True


def demote_generic(op: ir.Operation, low: ir.Type, truncations: Truncations) -> bool:
    """Feed a linalg.generic truncated inputs; extend them back inside the body."""
    if op.name != "linalg.generic":
        return False
    inputs, _ = inputs_and_init(op)
    block = op.regions[0].blocks[0]
    f32 = ir.F32Type.get()
    for i, value in enumerate(inputs):
        op.operands[i] = truncations.of(value, low, op)
    at_begin = ir.InsertionPoint.at_block_begin(block)
    for i in range(len(inputs)):
        arg = block.arguments[i]
        arg.set_type(low)
        with at_begin, op.location:
            extended = arith.extf(f32, arg)
        arg.replace_all_uses_except(extended, extended.owner.operation)
    del op.attributes[PRECISION_ATTR]
    return True


PATTERNS = (demote_named, demote_generic)


@dataclass(frozen=True)
class ApplyPrecision(ModulePass):
    """Truncates the inputs of f16/bf16-annotated f32 contractions; f32 accumulation."""

    name: ClassVar[str] = "inferx-apply-precision"
    level: ClassVar[str] = "graph"
    summary: ClassVar[str] = "apply inferx.precision: f16/bf16 inputs, f32 accumulation"

    @classmethod
    def for_build(cls, build) -> "Optional[ApplyPrecision]":
        return cls() if build.applies("inferx-annotate-precision") else None

    def run(self, module) -> None:
        truncations = Truncations()
        for op in collect(module, lambda o: PRECISION_ATTR in o.attributes):
            precision = read_precision(op)
            if precision not in _LOW or not _demotable(op):
                continue
            low = _LOW[precision].get()
            any(pattern(op, low, truncations) for pattern in PATTERNS)
