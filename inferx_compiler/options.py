"""What one build is asked for: target, stage to stop at, precision and the knobs (CompileOptions).

The request as the user gave it; what the driver derives from it (the resolved target, the
precision plan, measured knobs) is a `Build` (build.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from inferx_compiler.errors import InferXError

EMIT_CHOICES = ("artifact", "torch", "linalg", "inferx", "executable-sources", "vmfb")
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "int8", "int4", "auto")
# Modes decided layer by layer through a precision plan (precision_plan.py); the others are uniform.
PLAN_MODES = ("int8", "int4", "auto")
ATTENTION_CHOICES = ("auto", "on", "off")


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
    disabled_passes: tuple[str, ...] = ()  # --disable-pass: optional passes (or parts) left out
    group_size: int = 128  # int4 weights: elements per scale along the reduction
    calibration: Optional[str] = None  # .npz file or directory (--calibration)
    accuracy_budget: Optional[float] = None  # relative L2 against fp32 (auto: default 0.01)
    precision_plan_file: Optional[str] = None  # replay this plan (--precision-plan)

    def __post_init__(self):
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
