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

`from-plan=true` annotates from the module's `inferx.precision_plan` instead (a dictionary
layer -> precision that the driver attaches from the precision plan; a layer is the ONNX node
an op was imported from, its name location): each contraction of a listed layer gets that
layer's precision (f32 entries are left unannotated), whatever `precision` says; contractions of
no listed layer (attention's batch matmuls: no stored weight) get `others` (f32: none), with the
`convolutions` rule as above (GPU plans give them f16: f32 attention there runs without tensor
cores, measured 32x slower in an H200 int8 BERT b8); integer
precisions (i8, i4) are carried out later by inferx-quantize-contractions. A lowered entry that
matches no contraction fails the pass, naming it (a plan for another model).

`stored-weights=true` (generation models built at int8/int4: weight-only quantization of a
decoder's projections) annotates every `linalg.matmul` whose right-hand operand is a stored weight
(an entry argument tagged `inferx.parameter`, or its 2-D `linalg.transpose`), whatever its float
type (the decoder may be f16 already), and nothing else: attention's products, whose operands are
activations and the KV cache, keep the model's dtype.

Spelled `inferx-annotate-precision{precision=f16 min-flops=0 convolutions=all from-plan=false others=f32
stored-weights=false}`; precision is f16, bf16, i8 or i4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, Optional

from torch_mlir import ir

from inferx_compiler.dialects.inferx import PARAMETER_ATTR, PLAN_ATTR, PRECISION_ATTR, PRECISIONS
from inferx_compiler.passes.infra.base import ModulePass, PassFailure
from inferx_compiler.passes.analysis.linalg_analysis import collect, estimate_flops, is_contraction


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

    precision: Literal["f16", "bf16", "i8", "i4"] = "f16"
    min_flops: int = 0
    convolutions: Literal["all", "static", "none"] = "all"
    from_plan: bool = False
    others: Literal["f32", "f16", "bf16"] = "f32"
    stored_weights: bool = False

    @classmethod
    def for_build(cls, build) -> "Optional[AnnotatePrecision]":
        target = build.target
        gpu = target.backend == "cuda"
        # CUDA: IREE's own f16 convolutions are wrong there; static ones become matmuls through
        # the conv strategy, dynamic ones stay f32
        convolutions = ("static" if build.applies("inferx-conv-strategy") else "none") if gpu else "all"
        if build.source == "llm":  # a generation model: weight-only int8/int4 on its projections
            integer = {"int8": "i8", "int4": "i4"}.get(build.precision)
            return cls(precision=integer, stored_weights=True) if integer else None
        if build.uses_plan:
            # the driver attaches the plan to the module (inferx.precision_plan); on GPUs the
            # contractions without a stored weight (attention) compute in f16
            return cls(from_plan=True, others="f16", convolutions=convolutions) if gpu else cls(from_plan=True)
        if build.precision in ("fp16", "bf16"):
            return cls(precision={"fp16": "f16", "bf16": "bf16"}[build.precision], convolutions=convolutions)
        return None

    def __post_init__(self):
        if self.min_flops < 0:
            raise ValueError(f"min-flops must be >= 0, got {self.min_flops}")

    def run(self, module) -> None:
        if self.from_plan:
            annotate_from_plan(module, read_plan(module), self.others, self.convolutions)
            return
        if self.stored_weights:
            annotate_stored_weight_matmuls(module, self.precision)
            return
        for op in collect(module, lambda o: o.name.startswith("linalg.")):
            annotate_contraction(op, self.precision, self.min_flops, self.convolutions)


def _parameter_argument(value) -> bool:
    """Whether `value` is an entry argument tagged `inferx.parameter`."""
    if not isinstance(value, ir.BlockArgument):
        return False
    func_op = value.owner.owner
    func_op = func_op.operation if func_op is not None else None
    if func_op is None or func_op.name != "func.func" or "arg_attrs" not in func_op.attributes:
        return False
    attrs = ir.ArrayAttr(func_op.attributes["arg_attrs"])
    return value.arg_number < len(attrs) and PARAMETER_ATTR in ir.DictAttr(attrs[value.arg_number])


def reads_stored_weight(op: ir.Operation) -> bool:
    """A linalg.matmul whose right-hand operand is a stored weight or its 2-D transpose."""
    rhs = op.operands[1]
    if _parameter_argument(rhs):
        return True
    if not isinstance(rhs, ir.OpResult) or rhs.owner.operation.name != "linalg.transpose":
        return False
    transpose = rhs.owner.operation
    return (list(ir.DenseI64ArrayAttr(transpose.attributes["permutation"])) == [1, 0]
            and _parameter_argument(transpose.operands[0]))


def annotate_stored_weight_matmuls(module: ir.Operation, precision: str) -> None:
    """`precision` on every float linalg.matmul that reads a stored weight (stored-weights=true)."""
    for op in collect(module, lambda o: o.name == "linalg.matmul"):
        if PRECISION_ATTR in op.attributes or not reads_stored_weight(op):
            continue
        if all(isinstance(v.type, ir.RankedTensorType) and isinstance(v.type.element_type, ir.FloatType)
               for v in op.operands):
            op.attributes[PRECISION_ATTR] = ir.StringAttr.get(precision)


def layer_name(op: ir.Operation) -> str:
    """The ONNX node an op was imported from: the first name in its location ("" if none)."""
    loc = op.location
    for _ in range(8):
        if hasattr(loc, "name_str"):
            try:
                return loc.name_str
            except (ValueError, TypeError):
                pass
        try:
            loc = loc.child_loc
        except (ValueError, TypeError, AttributeError):
            break
    return ""


def read_plan(module: ir.Operation) -> dict[str, str]:
    if PLAN_ATTR not in module.attributes:
        raise PassFailure(f"from-plan=true needs the module attribute {PLAN_ATTR}", op=module)
    plan = {}
    for entry in ir.DictAttr(module.attributes[PLAN_ATTR]):
        value = entry.attr
        if not isinstance(value, ir.StringAttr) or value.value not in PRECISIONS:
            raise PassFailure(f"{PLAN_ATTR}: layer '{entry.name}' has precision {value}; valid: "
                              + ", ".join(PRECISIONS), op=module)
        plan[entry.name] = value.value
    return plan


def annotate_from_plan(module: ir.Operation, plan: dict[str, str], others: str = "f32",
                       convolutions: str = "all") -> None:
    seen = set()
    for op in collect(module, lambda o: o.name.startswith("linalg.") and is_contraction(o)):
        layer = layer_name(op)
        if layer not in plan:
            if others != "f32":
                annotate_contraction(op, others, 0, convolutions)
            continue
        seen.add(layer)
        if plan[layer] != "f32" and PRECISION_ATTR not in op.attributes and _all_f32(op):
            op.attributes[PRECISION_ATTR] = ir.StringAttr.get(plan[layer])
    missing = sorted(layer for layer in set(plan) - seen if plan[layer] != "f32")
    if missing:
        raise PassFailure(f"{PLAN_ATTR} names layers that have no contraction in this module: "
                          + ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else ""), op=module)
