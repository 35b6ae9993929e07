"""What one build is asked for: target, stage to stop at, precision and the knobs (CompileOptions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from inferx_compiler.errors import InferXError

EMIT_CHOICES = ("artifact", "torch", "linalg", "inferx", "executable-sources", "vmfb")
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "int8", "int4", "auto")
# Modes decided layer by layer through a precision plan (precision_plan.py); the others are uniform.
PLAN_MODES = ("int8", "int4", "auto")
ATTENTION_CHOICES = ("auto", "on", "off")
# The rewriting passes a build may leave out (--disable-pass), to measure what each one is worth.
# The others carry the model's meaning (import, precision, parameters, the output entry).
# inferx-hopper-epilogue and inferx-hopper-group name parts of inferx-hopper-matmul: the ops after
# a matmul that its kernel finishes (disabled: the kernel stores the f32 product and IREE runs the
# rest), and one kernel for sibling matmuls reading the same input (disabled: a kernel each).
# inferx-dequant-matvec names the CUDA weight-only kernel of inferx-quantize-contractions
# (disabled: IREE's dequantize-and-matmul).
OPTIONAL_PASSES = ("inferx-unbroadcast-matmul", "inferx-conv-image-loop", "inferx-conv-strategy", "inferx-fuse-attention",
                   "inferx-split-reduction", "inferx-hopper-matmul", "inferx-amx-matmul", "inferx-f32-matmul", "inferx-softmax-kernel", "inferx-pool-kernel", "inferx-cpu-math", "inferx-hopper-epilogue", "inferx-hopper-group",
                   "inferx-dequant-matvec", "inferx-dispatch-config", "inferx-isolate-casts", "inferx-narrow-parameters")


@dataclass(frozen=True)
class CompileOptions:
    target: str
    emit: str = "artifact"
    precision: str = "fp32"
    extra_iree_flags: tuple[str, ...] = ()
    batch_sizes: tuple[int, ...] = ()
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()  # --input-shape NAME=D0,D1,...
    input_values: tuple[tuple[str, tuple[float, ...]], ...] = ()  # --input-value NAME=V0,V1,...
    measure_buckets: bool = True
    dynamic_only: bool = False  # no static-shape functions (see specialization.py)
    conv_algorithms: str = "auto"  # inferx-conv-strategy's choice: auto, none, or a list
    fuse_attention: str = "auto"  # inferx-fuse-attention: auto (by target), on, off
    tuning_db: Optional[str] = None  # measured dispatch configurations to apply (--tuning-db)
    tuning_candidate: int = 0  # build with the K-th rule candidate everywhere (what --tune measures)
    data_tiling: Optional[bool] = None  # None: the target's default (with a fallback); else forced
    matmul_tile_bytes: Optional[int] = None  # None: the target's data-tiled matmul tile budget; else forced
    keep_f64: bool = False  # set by the driver when the model computes in float64
    disabled_passes: tuple[str, ...] = ()  # OPTIONAL_PASSES left out of this build
    group_size: int = 128  # int4 weights: elements per scale along the reduction
    calibration: Optional[str] = None  # .npz file or directory (--calibration)
    accuracy_budget: Optional[float] = None  # relative L2 against fp32 (auto: default 0.01)
    precision_plan_file: Optional[str] = None  # replay this plan (--precision-plan)
    plan: Any = field(default=None, compare=False)  # the resolved PrecisionPlan (set by the driver)

    def __post_init__(self):
        unknown = [p for p in self.disabled_passes if p not in OPTIONAL_PASSES]
        if unknown:
            raise InferXError(f"--disable-pass {', '.join(unknown)}: not a pass that can be left out; "
                              f"valid: {', '.join(OPTIONAL_PASSES)}")
        if self.tuning_db and not self.runs("inferx-dispatch-config"):
            raise InferXError("--tuning-db/--tune apply configurations through inferx-dispatch-config, "
                              "which --disable-pass leaves out; drop one of them")

        if self.matmul_tile_bytes is not None and self.matmul_tile_bytes <= 0:
            raise InferXError(f"matmul tile budget must be a positive byte count, got {self.matmul_tile_bytes}")
        if self.group_size <= 0 or self.group_size % 2:
            raise InferXError(f"--group-size must be a positive even number, got {self.group_size}")
        if self.accuracy_budget is not None and not self.accuracy_budget > 0:
            raise InferXError(f"--accuracy-budget must be > 0 (a relative L2 error), got {self.accuracy_budget}")

    @property
    def uses_plan(self) -> bool:
        """Whether precisions are decided per layer (a plan file, int8, int4 or auto)."""
        return self.precision in PLAN_MODES or self.precision_plan_file is not None

    def runs(self, pass_name: str) -> bool:
        """Whether an optional pass is part of this build (not disabled)."""
        return pass_name not in self.disabled_passes
