"""inferx-isolate-casts: keep a narrowing cast out of the normalization that produces its input,
on CPU targets, so that IREE 3.13 can data-tile the bf16/f16 matmuls that read it.

With `--precision bf16` on an AVX-512 CPU, a transformer's layer norm feeds its matmuls through
a truncation to bf16. IREE fuses the two reductions, the normalization, the truncation and the
packing of both outputs for the data-tiled matmuls (the bf16 operand and the f32 residual that
becomes an accumulator) into one dispatch, whose vectorized pack of a 16x768 row block exceeds
its CPU code generation's limits ("exceeded stack allocation limit of 32768 bytes", "large
vector sizes" on BERT-base). The build then falls back to no data tiling for the whole
model, and its bf16 matmuls run as generic vector code at half the f32 microkernel's rate. This
pass puts a `util.optimization_barrier` between such a truncation and its input, so that the
truncation and its packing form a dispatch of their own:

    y = normalize(x, reductions of x)          y = normalize(x, reductions of x)
    t = truncf(y)                        ->    b = util.optimization_barrier y
                                               t = truncf(b)

The barrier costs a dispatch per normalization (docs/levers/isolate-casts.md), so the driver
adds the pass only when IREE has failed to data-tile the model without it
(`driver._compile_with_fallback`; the manifest's pipeline says which build stood).

A truncation is isolated when its input is computed from the result of a single-input reduction
(a layer norm, a softmax) by at most ten elementwise ops (torch-mlir spells a layer norm in eight). Other
truncations (of arguments, of a matmul's epilogue) are left where IREE fuses them. Applies on
CPU targets only (the GPU pipelines fuse these fine); every truncation it isolates gets a remark.

Spelled `inferx-isolate-casts` (no options; the target is the module's `inferx.target`:
inferx-set-target{target=cpu} before it on a bare module).
"""

from __future__ import annotations

import dataclasses

from typing import ClassVar, Optional

from inferx_compiler.passes.infra.base import TargetedPass
from inferx_compiler.passes.support.iree_ir import before_reshapes, defining_op, narrowing_cast_input
from inferx_compiler.passes.analysis.linalg_analysis import all_parallel, collect
from inferx_compiler.passes.analysis.remarks import remark

def _is_reduction(op) -> bool:
    """A linalg.generic with a reduction loop and one input (not a contraction)."""
    return (op is not None and op.name == "linalg.generic" and len(op.operands) - len(op.results) == 1
            and not all_parallel(op))


def _is_elementwise(op) -> bool:
    return op is not None and op.name == "linalg.generic" and all_parallel(op)


def _reads(op) -> list:
    """The tensors an elementwise generic reads: its operands, and those its body extracts from
    (torch-mlir broadcasts a layer norm's [N, 1] mean by `tensor.extract` inside the body)."""
    body = op.regions[0].blocks[0].operations
    return list(op.operands) + [o.operands[0] for o in body if o.operation.name == "tensor.extract"]


def after_normalization(value, depth: int = 10) -> bool:
    """Whether `value` is computed from a reduction's result by at most `depth` elementwise ops
    (and reshapes): a layer norm's `(x - mean) * rstd * gamma + beta`, a softmax's division.
    An elementwise op's init counts as an input (torch-mlir divides a sum in place), and so does
    a tensor its body extracts from."""
    frontier = [value]
    for _ in range(depth):
        producers = [defining_op(before_reshapes(v)) for v in frontier]
        if any(_is_reduction(p) for p in producers):
            return True
        frontier = [v for p in producers if _is_elementwise(p) for v in _reads(p)]
        if not frontier:
            return False
    return False


@dataclasses.dataclass(frozen=True)
class IsolateCasts(TargetedPass):
    """Optimization barrier between a normalization and the bf16/f16 truncation of its result."""

    name: ClassVar[str] = "inferx-isolate-casts"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = ("barrier between a normalization and its bf16/f16 truncation (CPU: keeps IREE's "
                              "data tiling)")

    @classmethod
    def for_build(cls, build) -> "Optional[IsolateCasts]":
        # only in the driver's retry after IREE failed to data-tile the model without it (it
        # costs small models a dispatch per normalization: bert_lite b1 bf16 0.5 -> 0.8 ms)
        cpu = build.target.backend == "llvm-cpu"
        return cls() if build.isolate_casts and cpu and build.runs(cls.name) else None

    def run(self, module) -> None:
        from iree.compiler import ir

        if self.target_of(module).backend != "llvm-cpu":
            return
        module.context.dialects["util"]  # loaded before building its op (see extern_dispatch)
        for op in collect(module, lambda o: narrowing_cast_input(o) is not None):
            value = narrowing_cast_input(op)
            if not value.type.has_static_shape or not after_normalization(value):
                continue  # (a barrier on a dynamic shape hides its dims from IREE's shape cleanup)
            with ir.InsertionPoint(op), op.location:
                barrier = ir.Operation.create("util.optimization_barrier", results=[value.type], operands=[value])
            op.operands[0] = barrier.results[0]
            remark(self.name, op, f"truncation to {op.results[0].type.element_type} kept out of the "
                                  f"normalization that produces its input")
