"""The one registry of inferx passes, read by `inferx-opt` and `inferx-compile` alike.

Factories are lazy (a pass module is imported only when used). A test asserts that
every key equals the `name` of the pass class it yields.
"""

from __future__ import annotations

import importlib
from typing import Callable

from inferx_compiler.errors import PassOptionError

# name -> "module:Class" inside inferx_compiler.passes
_PASSES = {
    "inferx-set-target": "set_target:SetTarget",
    "inferx-lower-to-linalg": "lower_inferx:LowerInferXToLinalg",
    "inferx-annotate-precision": "annotate_precision:AnnotatePrecision",
    "inferx-apply-precision": "apply_precision:ApplyPrecision",
    "inferx-bind-parameters": "bind_parameters:BindParameters",
    "inferx-add-output-entry": "output_entry:AddOutputEntry",
    "inferx-dispatch-report": "dispatch_report:DispatchReport",
    "inferx-conv-strategy": "conv_strategy:ConvStrategy",
    "inferx-conv-image-loop": "conv_image_loop:ConvImageLoop",
    "inferx-dispatch-config": "dispatch_config:DispatchConfig",
    "inferx-fuse-attention": "fuse_attention:FuseAttention",
    "inferx-unbroadcast-matmul": "unbroadcast_matmul:UnbroadcastMatmul",
    "inferx-split-reduction": "split_reduction:SplitReduction",
    "inferx-hopper-matmul": "hopper_matmul:HopperMatmul",
    "inferx-amx-matmul": "amx_matmul:AmxMatmul",
    "inferx-f32-matmul": "f32_matmul:F32Matmul",
    "inferx-softmax-kernel": "softmax_kernel:SoftmaxKernel",
    "inferx-pool-kernel": "pool_kernel:PoolKernel",
    "inferx-cpu-math": "cpu_math:CpuMath",
    "inferx-quantize-contractions": "quantize_contractions:QuantizeContractions",
    "inferx-f16-matvec": "f16_matvec:F16Matvec",
    "inferx-paged-attention": "paged_attention:PagedAttention",
    "inferx-isolate-casts": "isolate_casts:IsolateCasts",
    "inferx-narrow-parameters": "narrow_parameters:NarrowParameters",
}


def _factory(spec: str) -> Callable[[], type]:
    module_name, class_name = spec.split(":")

    def load() -> type:
        module = importlib.import_module(f"inferx_compiler.passes.{module_name}")
        return getattr(module, class_name)

    return load


def get_all_passes() -> dict[str, Callable[[], type]]:
    """Pass name -> zero-argument factory returning the pass class."""
    return {name: _factory(spec) for name, spec in _PASSES.items()}


def get_pass_class(name: str) -> type:
    passes = get_all_passes()
    if name not in passes:
        raise PassOptionError(
            f"unknown inferx pass '{name}'; registered passes: {', '.join(sorted(passes))}"
        )
    return passes[name]()


def disableable() -> set[str]:
    """What --disable-pass may name: every pass declared `optional`, and the parts of passes
    they declare (`parts`: a name for a bool option the build then sets false)."""
    names = set()
    for factory in get_all_passes().values():
        cls = factory()
        if cls.optional:
            names.add(cls.name)
        names.update(cls.parts)
    return names
