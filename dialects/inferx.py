"""The `inferx` dialect: decisions our passes state in the IR before lowering them.

Defined with torch-mlir's `dialects.ext` (IRDL underneath), so it exists only in the
torch-mlir ("graph") context; `inferx-lower-to-linalg` removes it before IREE.
IRDL ops have no custom assembly: they print and parse in the generic form.

    %q = "inferx.quantize"(%x) {scale = dense<0.05> : tensor<f32>, storage = "i8",
                                zero_point = dense<3> : tensor<i32>}
         : (tensor<4x64xf32>) -> tensor<4x64xi8>
    %w = "inferx.dequantize"(%q) {scale = dense<...> : tensor<4x2xf32>, storage = "u4",
                                  group_size = 32 : i64}
         : (tensor<4x64xi4>) -> tensor<4x64xf32>

Attributes (`scale` and `storage` required, the rest optional):
  storage     "i8" | "u8" | "i4" | "u4"; the integer side's element type is the signless
              integer of that width (i8 or i4): signedness lives in `storage` only.
  scale       f32 dense elements, all > 0. Its shape picks the scheme:
                per-tensor   (no axis, no group_size): one element, shape [] or [1];
                per-channel  `axis = k : i64`: shape [dim k of the float tensor];
                grouped      `group_size = g : i64`, along the last axis: shape
                             dims[:-1] + [dims[-1] / g].
  zero_point  integer dense elements of the scale's shape, within the storage range;
              absent means 0 (symmetric).
  q = clamp(round_half_even(x / scale) + zero_point, qmin, qmax);  x = (q - zero_point) * scale

Precision annotation: contractions (linalg ops) carry the discardable attribute
`inferx.precision = "f16"` (PRECISION_ATTR; values in PRECISIONS) written by
`inferx-annotate-precision` and applied by `inferx-apply-precision`.
"""

# No `from __future__ import annotations`: ext reads op field annotations as live types.
from dataclasses import dataclass
from typing import Any, Optional

from torch_mlir import ir
from torch_mlir.dialects import ext

PRECISION_ATTR = "inferx.precision"
# On an entry function argument: the argument is a weight, served as the named parameter.
PARAMETER_ATTR = "inferx.parameter"
PRECISIONS = ("f32", "f16", "bf16", "i8", "i4")
# Decisions carried out in IREE's context (inferx-quantize-contractions): the annotation
# crosses to IREE on the op; the others are applied and dropped at graph level.
IREE_LEVEL_PRECISIONS = ("i8", "i4")
# On the module: the precision plan, layer (ONNX node name) -> precision, read by
# inferx-annotate-precision{from-plan=true}.
PLAN_ATTR = "inferx.precision_plan"

# storage name -> (bits, signed)
STORAGE_TYPES = {"i8": (8, True), "u8": (8, False), "i4": (4, True), "u4": (4, False)}
FLOAT_TYPES = (ir.F32Type, ir.F16Type, ir.BF16Type)


class InferX(ext.Dialect, name="inferx"):
    """Loaded per context by `inferx_compiler.dialects.load_inferx_dialect()`."""


@dataclass(frozen=True)
class QuantScheme:
    """The quantization attributes of one quantize/dequantize op, read and typed."""

    storage: str
    scale: ir.DenseFPElementsAttr
    zero_point: Optional[ir.DenseIntElementsAttr]
    axis: Optional[int]
    group_size: Optional[int]

    @property
    def bits(self) -> int:
        return STORAGE_TYPES[self.storage][0]

    @property
    def signed(self) -> bool:
        return STORAGE_TYPES[self.storage][1]

    @property
    def qmin(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def qmax(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1


class VerifyError(Exception):
    """A broken op invariant; the message follows "'inferx.<op>' op "."""


def _int_attr(op, name) -> Optional[int]:
    if name not in op.attributes:
        return None
    attr = op.attributes[name]
    if not isinstance(attr, ir.IntegerAttr):
        raise VerifyError(f"attribute '{name}' must be an integer, got {attr}")
    return attr.value


def _values(attr) -> list:
    if attr.is_splat:
        return [attr.get_splat_value().value]
    return [attr[i] for i in range(len(attr))]


def read_scheme(op) -> QuantScheme:
    """Typed view of `op`'s quantization attributes; raises VerifyError when malformed."""
    for required in ("scale", "storage"):
        if required not in op.attributes:
            raise VerifyError(f"requires attribute '{required}'")
    storage = op.attributes["storage"]
    if not isinstance(storage, ir.StringAttr):
        raise VerifyError(f"storage must be a string, got {storage}")
    storage = storage.value
    if storage not in STORAGE_TYPES:
        raise VerifyError(
            f'storage "{storage}" is not one of ' + " | ".join(f'"{k}"' for k in STORAGE_TYPES)
        )
    scale = op.attributes["scale"]
    if not (isinstance(scale, ir.DenseFPElementsAttr)
            and isinstance(scale.type.element_type, ir.F32Type)):
        raise VerifyError(f"scale must be f32 dense elements, got {scale}")
    zero_point = op.attributes["zero_point"] if "zero_point" in op.attributes else None
    if zero_point is not None:
        if not isinstance(zero_point, ir.DenseIntElementsAttr):
            raise VerifyError(f"zero_point must be integer dense elements, got {zero_point}")
    return QuantScheme(storage, scale, zero_point, _int_attr(op, "axis"),
                       _int_attr(op, "group_size"))


def expected_scale_shape(s: QuantScheme, shape: list[int]) -> Optional[list[int]]:
    """The scale shape the scheme needs for a float tensor of `shape`; None: per-tensor."""
    dynamic = ir.ShapedType.get_dynamic_size()
    rank = len(shape)
    if s.axis is not None and s.group_size is not None:
        raise VerifyError("axis (per-channel) and group_size (grouped) are exclusive")
    if s.axis is not None:
        if not 0 <= s.axis < rank:
            raise VerifyError(f"axis {s.axis} is out of range for a rank-{rank} tensor")
        if shape[s.axis] == dynamic:
            raise VerifyError(f"per-channel axis {s.axis} must have a static size")
        return [shape[s.axis]]
    if s.group_size is not None:
        if s.group_size <= 0:
            raise VerifyError(f"group_size must be positive, got {s.group_size}")
        if rank == 0 or dynamic in shape:
            raise VerifyError("grouped quantization needs a static shape of rank >= 1")
        if shape[-1] % s.group_size:
            raise VerifyError(
                f"last dimension {shape[-1]} is not divisible by group_size {s.group_size}"
            )
        return shape[:-1] + [shape[-1] // s.group_size]
    return None


def _check_scheme(s: QuantScheme, shape: list[int]) -> None:
    want = expected_scale_shape(s, shape)
    got = list(s.scale.type.shape)
    if want is None and got not in ([], [1]):
        raise VerifyError(f"per-tensor scale must have shape [] or [1], got {got}")
    if want is not None and got != want:
        scheme = "per-channel" if s.axis is not None else "grouped"
        raise VerifyError(f"{scheme} scale must have shape {want}, got {got}")
    if any(not v > 0 for v in _values(s.scale)):
        raise VerifyError("scale values must be positive")
    if s.zero_point is not None:
        if list(s.zero_point.type.shape) != got:
            raise VerifyError(
                f"zero_point shape {list(s.zero_point.type.shape)} differs from scale shape {got}"
            )
        bad = [v for v in _values(s.zero_point) if not s.qmin <= v <= s.qmax]
        if bad:
            raise VerifyError(
                f'zero_point {bad[0]} is outside the "{s.storage}" range [{s.qmin}, {s.qmax}]'
            )


def _check_types(s: QuantScheme, float_value, int_value, int_role: str) -> None:
    ft, it = float_value.type, int_value.type
    for t, what in ((ft, "float"), (it, "integer")):
        if not isinstance(t, ir.RankedTensorType):
            raise VerifyError(f"expected a ranked tensor on the {what} side, got {t}")
    if not isinstance(ft.element_type, FLOAT_TYPES):
        raise VerifyError(f"float side must have f32, f16 or bf16 elements, got {ft}")
    et = it.element_type
    if not (isinstance(et, ir.IntegerType) and et.is_signless and et.width == s.bits):
        raise VerifyError(
            f'{int_role} element type {et} does not match storage "{s.storage}": '
            f"expected i{s.bits}"
        )
    if list(ft.shape) != list(it.shape):
        raise VerifyError(f"shapes differ: {ft} vs {it}")


def _verify(op, float_value, int_value, int_role: str) -> bool:
    try:
        s = read_scheme(op)
        _check_types(s, float_value, int_value, int_role)
        _check_scheme(s, list(float_value.type.shape))
    except VerifyError as e:
        op.location.emit_error(f"'{op.operation.name}' op {e}")
        return False
    return True


class QuantizeOp(InferX.Operation, name="quantize", traits=[ext.Pure]):
    """Float tensor -> integer storage tensor (see the module docstring)."""

    input: ext.Operand[ir.RankedTensorType]
    scale: Any  # f32 DenseElementsAttr: IRDL cannot name it, verify_invariants checks it
    storage: ir.StringAttr
    output: ext.Result[ir.RankedTensorType]

    @staticmethod
    def verify_invariants(op) -> bool:
        return _verify(op, op.operands[0], op.results[0], "result")


class DequantizeOp(InferX.Operation, name="dequantize", traits=[ext.Pure]):
    """Integer storage tensor -> float tensor, the inverse of QuantizeOp."""

    input: ext.Operand[ir.RankedTensorType]
    scale: Any
    storage: ir.StringAttr
    output: ext.Result[ir.RankedTensorType]

    @staticmethod
    def verify_invariants(op) -> bool:
        return _verify(op, op.results[0], op.operands[0], "operand")
