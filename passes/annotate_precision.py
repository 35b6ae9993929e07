"""inferx-annotate-precision: mark f32 contractions worth running in lower precision.

Writes the discardable attribute `inferx.precision = "<precision>"` on every linalg
contraction (matmul, batch_matmul, matvec, conv*, depthwise conv*, or a linalg.generic
with reduction loops and a mul-add body) whose operands are all f32 and whose
estimated FLOPs (2 x product of loop ranges) reach `min-flops`. It only states the
decision; `inferx-apply-precision` carries it out, so both steps can be inspected and
tested apart. Declined: non-contractions (elementwise ops, pooling), contractions with
any non-f32 operand (integer or already low precision), ops already annotated, and,
when min-flops > 0, ops with dynamic loop ranges (their size is unknown).

`convolutions=none` leaves convolutions in f32; `convolutions=static` demotes only those with
static shapes (the driver sets it for CUDA targets: IREE 3.13's CUDA code for its own f16-input
convolutions gave ResNet-50 a relative error of 0.25 on an H200, while static convolutions are
rewritten into matmuls by inferx-conv-strategy, whose f16 code is right there); `all` (the
default) demotes every one.

Spelled `inferx-annotate-precision{precision=f16 min-flops=0 convolutions=all}`;
precision is f16 or bf16.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from torch_mlir import ir

from inferx_compiler.dialects.inferx import PRECISION_ATTR

from .base import ModulePass
from .linalg_analysis import collect, estimate_flops, is_contraction


def _all_f32(op: ir.Operation) -> bool:
    return all(isinstance(v.type, ir.RankedTensorType)
               and isinstance(v.type.element_type, ir.F32Type) for v in op.operands)


def _is_convolution(op: ir.Operation) -> bool:
    return op.name.startswith(("linalg.conv", "linalg.depthwise_conv"))


def _static(op: ir.Operation) -> bool:
    return all(not isinstance(v.type, ir.ShapedType) or v.type.has_static_shape for v in op.operands)


def annotate_contraction(op: ir.Operation, precision: str, min_flops: int,
                         convolutions: str = "all") -> bool:
    """Annotate one f32 contraction with `precision`; returns False when declining."""
    if PRECISION_ATTR in op.attributes:
        return False  # an earlier decision stands
    if not is_contraction(op) or not _all_f32(op):
        return False
    if _is_convolution(op) and (convolutions == "none" or (convolutions == "static" and not _static(op))):
        return False
    flops = estimate_flops(op)
    if min_flops > 0 and (flops is None or flops < min_flops):
        return False
    op.attributes[PRECISION_ATTR] = ir.StringAttr.get(precision)
    return True


@dataclass(frozen=True)
class AnnotatePrecision(ModulePass):
    """Marks f32 linalg contractions of at least `min-flops` with `inferx.precision`."""

    name: ClassVar[str] = "inferx-annotate-precision"
    level: ClassVar[str] = "graph"
    summary: ClassVar[str] = "mark f32 contractions for f16/bf16 inputs"

    precision: Literal["f16", "bf16"] = "f16"
    min_flops: int = 0
    convolutions: Literal["all", "static", "none"] = "all"

    def __post_init__(self):
        if self.min_flops < 0:
            raise ValueError(f"min-flops must be >= 0, got {self.min_flops}")

    def run(self, module) -> None:
        for op in collect(module, lambda o: o.name.startswith("linalg.")):
            annotate_contraction(op, self.precision, self.min_flops, self.convolutions)
