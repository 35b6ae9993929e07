"""One build's derived state, kept apart from what the user asked for.

`CompileOptions` is the request, as given (a target *name*, flags). `Build` is what the driver
derives from it once: the resolved target record (for `--target cpu`, the host's features
probed here and nowhere else), the precision plan, the whole-build knobs measured by `--tune`,
what the model itself needs (float64), and the fallbacks the driver takes after an IREE
failure. The build plan (build_plan.py) and the passes' `for_build` read a `Build`; the request
is never rewritten.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from inferx_compiler.errors import InferXError, TargetError
from inferx_compiler.options import EMIT_CHOICES, PLAN_MODES, PRECISIONS, CompileOptions
from inferx_compiler.targets import Target, get_target


@dataclass(frozen=True)
class Build:
    request: CompileOptions
    target: Target
    plan: Any = None  # the resolved precision.precision_plan.PrecisionPlan (None: uniform or not yet)
    keep_f64: bool = False  # the model computes in float64 (IREE must not demote it)
    data_tiling: Optional[bool] = None  # None: the target's default; else forced or measured
    matmul_tile_bytes: Optional[int] = None  # None: the target's budget; else forced or measured
    source: str = "onnx"  # the frontend the model came through (onnx, torch)
    # a generation model's weight-only int8/int4 (no plan): (precision, elements) of each quantized weight
    integer_weights: tuple = ()
    # fallbacks the driver takes when IREE fails (driver._compile_with_fallback)
    isolate_casts: bool = False  # inferx-isolate-casts joins the input pipeline
    transients: bool = True  # CPU: the output entry takes the call's transient storage

    # -- what the request says, read through the build -------------------------------------
    @property
    def precision(self) -> str:
        return self.request.precision

    @property
    def uses_plan(self) -> bool:
        # a generation model's int8/int4 are weight-only on every stored projection (no plan)
        return self.source != "llm" and self.request.uses_plan

    def runs(self, name: str) -> bool:
        """Whether an optional pass (or a part of one, e.g. inferx-hopper-epilogue) is not
        left out with --disable-pass."""
        return name not in self.request.disabled_passes

    def applies(self, pass_name: str) -> bool:
        """Whether the pass `pass_name` is part of this build (the pass decides: `for_build`)."""
        from inferx_compiler.passes.infra.registry import get_pass_class

        return get_pass_class(pass_name).for_build(self) is not None

    def integer_layers(self) -> list:
        """The plan's int8/int4 layers (empty without a resolved plan)."""
        if self.plan is None:
            return []
        return [layer for layer in self.plan.layers if layer.precision in ("int8", "int4")]

    def expects_integer_layers(self) -> bool:
        """Integer layers, or (before the plan is resolved, e.g. --dump-pipeline) a mode whose
        plan may have them."""
        return bool(self.integer_layers()) or (self.plan is None and self.precision in PLAN_MODES)

    def with_(self, **changes) -> "Build":
        return dataclasses.replace(self, **changes)


def resolve_build(request: CompileOptions, source: str = "onnx") -> Build:
    """Check the request and resolve its target, once: every later stage reads the record."""
    from inferx_compiler.precision.precision_plan import check_precision

    target = get_target(request.target)
    if request.emit not in EMIT_CHOICES:
        raise TargetError(f"unknown --emit '{request.emit}'; valid: {', '.join(EMIT_CHOICES)}")
    if not target.executable and request.emit in ("vmfb", "executable-sources"):
        raise TargetError(
            f"target '{target.name}' cannot produce --emit {request.emit}: {target.route_note}. "
            f"Use --emit linalg, or the default artifact (which holds the optimized MLIR)")
    if request.precision not in PRECISIONS:
        raise TargetError(f"unknown --precision '{request.precision}'; valid: {', '.join(PRECISIONS)}")
    check_precision(request.precision, target)
    if request.precision_plan_file and request.precision not in ("fp32", "auto"):
        raise TargetError(f"--precision-plan replays a plan: drop --precision {request.precision}")
    check_disabled_passes(request)
    return Build(request=request, target=target, data_tiling=request.data_tiling,
                 matmul_tile_bytes=request.matmul_tile_bytes, source=source)


def check_disabled_passes(request: CompileOptions) -> None:
    """--disable-pass names what the passes declare they can leave out (registry.disableable)."""
    from inferx_compiler.passes.infra.registry import disableable

    valid = disableable()
    unknown = [p for p in request.disabled_passes if p not in valid]
    if unknown:
        raise InferXError(f"--disable-pass {', '.join(unknown)}: not a pass that can be left out; "
                          f"valid: {', '.join(sorted(valid))}")
    if request.tuning_db and "inferx-dispatch-config" in request.disabled_passes:
        raise InferXError("--tuning-db/--tune apply configurations through inferx-dispatch-config, "
                          "which --disable-pass leaves out; drop one of them")
