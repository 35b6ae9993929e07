"""The build plan: every pipeline and IREE flag one build runs, from its Build (build.py).

    graph stage      graph_decision_pipeline (precision), GRAPH_LOWERING
    IREE input       iree_input_pipeline (conv strategy, kernels, parameters, output entry)
    IREE flags       iree_flags (the target's, semantics, decision preprocessing, forced knobs)
    dispatch stage   dispatch_pipeline (report, per-dispatch configurations)
    build files      build_files (what flags and pipelines name as {build}/NAME)

`describe_pipeline` lists the stages as `inferx-compile --dump-pipeline` prints them, each
reproducible with `inferx-opt` or `iree-compile`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inferx_compiler.build import Build
from inferx_compiler.frontend import graph_lowering
from inferx_compiler.passes.infra.build_files import TUNING_DB_FILE
from inferx_compiler.passes.infra.registry import get_pass_class
from inferx_compiler.targets import AGGRESSIVE_FUSION_FLAG, MATMUL_TILE_BYTES_OPTION

# IREE demotes f64 to f32 by default; a model that computes in float64 keeps it.
# (Only then: lowerings introduce f64 scalars of their own that IREE's constant
# evaluator cannot handle unless they are demoted.)
KEEP_F64_FLAGS = ("--iree-input-demote-f64-to-f32=false",)


@dataclass
class Stage:
    name: str
    level: str  # graph | iree | importer
    spec: str  # textual pipeline, or IREE flags


# The inferx passes of each stage, in pipeline order; each pass says whether it runs in a build
# and with which options (`for_build`), this list only says where.
GRAPH_DECISION_PASSES = ("inferx-annotate-precision", "inferx-apply-precision")
IREE_INPUT_PASSES = ("inferx-paged-attention", "inferx-unbroadcast-matmul", "inferx-conv-image-loop", "inferx-conv-strategy",
                     "inferx-fuse-attention", "inferx-quantize-contractions", "inferx-f16-matvec", "inferx-hopper-matmul",
                     "inferx-amx-matmul", "inferx-f32-matmul", "inferx-softmax-kernel", "inferx-pool-kernel",
                     "inferx-cpu-math", "inferx-split-reduction", "inferx-isolate-casts",
                     "inferx-narrow-parameters", "inferx-bind-parameters", "inferx-add-output-entry")
DISPATCH_PASSES = ("inferx-dispatch-report", "inferx-dispatch-config")


def stage_pipeline(build: Build, names: tuple[str, ...]) -> str:
    """The textual pipeline of the passes among `names` that apply to `build`."""
    passes = [get_pass_class(name).for_build(build) for name in names]
    return "builtin.module(" + ",".join(p.spelling() for p in passes if p is not None) + ")"


def graph_decision_pipeline(build: Build) -> str:
    return stage_pipeline(build, GRAPH_DECISION_PASSES)


GRAPH_LOWERING = "builtin.module(inferx-lower-to-linalg,canonicalize,cse)"


def dispatch_pipeline(build: Build) -> str:
    """The dispatch-level passes: the report, then the per-dispatch configurations."""
    return stage_pipeline(build, DISPATCH_PASSES)


def iree_input_pipeline(build: Build) -> str:
    """The inferx passes run in IREE's context before IREE's own pipeline."""
    return stage_pipeline(build, IREE_INPUT_PASSES)


def integer_flags(build: Build) -> list[str]:
    """IREE flags the integer layers (a plan's, or a generation model's quantized weights) need on
    CPU: the s8 mmt4d microkernel, and hoisting int4 weights' widening to i8 out of the call (IREE hoists a constant expression only while it
    grows by at most 1 MiB by default; measured on this CPU, 4096x4096 int4 at batch 1:
    13.5 ms widened per call, 0.59 ms hoisted)."""
    weights = [(l.precision, int(np.prod(l.shape))) for l in build.integer_layers()] or list(build.integer_weights)
    target = build.target
    if not weights or target.backend != "llvm-cpu":
        return []
    # (a target that enables microkernels itself names mmt4d among them)
    ukernels = any(f.startswith("--iree-llvmcpu-enable-ukernels=") for f in target.iree_flags())
    flags = [] if ukernels else ["--iree-llvmcpu-enable-ukernels=mmt4d"]
    int4 = [elements for precision, elements in weights if precision == "int4"]
    if int4:
        growth = 2 * max(int4)
        flags.append(f"--iree-opt-const-expr-max-size-increase-threshold={max(growth, 1 << 20)}")
    return flags


def iree_flags(build: Build) -> list[str]:
    """IREE's flags for this build: the target's, what the model's semantics need, the
    preprocessing that carries out the pass decisions, forced whole-build knobs (data tiling,
    the matmul tile budget: --tune's, or the tuning database's for this model), then the user's
    extra flags. A user flag of the same option as a target flag replaces it (process-wide
    options take one value)."""
    from inferx_compiler.backend.iree_global_options import option_name
    from inferx_compiler.passes.conv_strategy import PREPROCESSING_PIPELINE

    target, options = build.target, build.request
    semantic = list(KEEP_F64_FLAGS) if build.keep_f64 else []
    decisions = []
    winograd = target.winograd if options.conv_algorithms == "auto" else "winograd" in options.conv_algorithms
    if build.applies("inferx-conv-strategy") and winograd:
        decisions.append(f"--iree-preprocessing-pass-pipeline={PREPROCESSING_PIPELINE}")
    overridden = {option_name(f) for f in options.extra_iree_flags}
    flags = [f for f in target.iree_flags() + opt_level_flags(build) if option_name(f) not in overridden]
    if build.source == "llm":
        # IREE 3.13's dispatch creation with aggressive fusion does not finish on the device
        # sampler's chain of reductions (frontend/llm/decoder.py: > 60 s for a 320-token vocabulary,
        # 3 s without it)
        flags = [f for f in flags if f != AGGRESSIVE_FUSION_FLAG]
    if build.data_tiling is not None:
        flags = _with_flag(flags, "--iree-opt-data-tiling", "true" if build.data_tiling else "false")
    forced_tiles = build.matmul_tile_bytes is not None and target.backend == "llvm-cpu"
    if forced_tiles and MATMUL_TILE_BYTES_OPTION not in overridden:
        flags = _with_flag(flags, "--" + MATMUL_TILE_BYTES_OPTION, str(build.matmul_tile_bytes))
    return flags + semantic + decisions + integer_flags(build) + list(options.extra_iree_flags)


def opt_level_flags(build: Build) -> list[str]:
    """IREE's optimization level: the target's for builds whose contractions are all f16/bf16
    (Target.half_precision_opt_level says why), else IREE's default."""
    half = build.precision in ("fp16", "bf16") and not build.integer_layers()
    if half and build.target.half_precision_opt_level:
        return [f"--iree-opt-level={build.target.half_precision_opt_level}"]
    return []


def _with_flag(flags: list[str], option: str, value: str) -> list[str]:
    """`flags` with `option` set to `value` (any earlier value of it dropped)."""
    return [f for f in flags if not f.startswith(option + "=")] + [f"{option}={value}"]


def build_files(build: Build) -> dict[str, str]:
    """Files the flags and pipelines name as {build}/NAME (written next to the compile, kept in
    reproducers): the tuning database."""
    if not build.request.tuning_db:
        return {}
    with open(build.request.tuning_db) as f:
        return {TUNING_DB_FILE: f.read()}


def describe_pipeline(build: Build) -> list[Stage]:
    source, target = build.source, build.target
    to_linalg = graph_lowering.TORCH_TO_LINALG if source == "onnx" else graph_lowering.FX_TORCH_TO_LINALG
    stages = [Stage("import", "importer", "torch-mlir onnx_importer (in process)" if source == "onnx"
                    else "torch-mlir fx importer (in process)")]
    if source == "onnx":
        stages.append(Stage("onnx-to-torch", "graph", graph_lowering.ONNX_TO_TORCH))
    stages += [Stage("torch-to-linalg", "graph", to_linalg),
               Stage("graph", "graph", graph_decision_pipeline(build)),
               Stage("graph-lowering", "graph", GRAPH_LOWERING)]
    if target.executable:
        flags = " ".join(iree_flags(build))
        stages += [Stage("iree-input", "iree", iree_input_pipeline(build)),
                   Stage("iree-to-executable-sources", "iree", f"{flags} --compile-to=executable-sources"),
                   Stage("dispatch", "iree", dispatch_pipeline(build)),
                   Stage("iree-to-vm", "iree", f"{flags} --compile-from=executable-sources")]
    return stages


def format_pipeline(stages: list[Stage]) -> str:
    lines = []
    for i, s in enumerate(stages, 1):
        if s.level == "graph":
            how = f"inferx-opt --pass-pipeline='{s.spec}'"
        elif s.level == "iree" and s.spec.startswith("builtin.module"):
            how = f"inferx-opt --context=iree --pass-pipeline='{s.spec}'"
        elif s.level == "iree":
            how = f"iree-compile {s.spec}"
        else:
            how = s.spec
        lines.append(f"{i:2d}. {s.name:28s} {how}")
    return "\n".join(lines)
