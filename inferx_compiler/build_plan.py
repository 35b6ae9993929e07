"""The build plan: every pipeline and IREE flag one build runs, from its options and target.

    graph stage      graph_decision_pipeline (precision), GRAPH_LOWERING
    IREE input       iree_input_pipeline (conv strategy, parameters, output entry)
    IREE flags       iree_flags (the target's, semantics, decision preprocessing, forced knobs)
    dispatch stage   dispatch_pipeline (report, per-dispatch configurations)
    build files      build_files (what flags and pipelines name as {build}/NAME)

`describe_pipeline` lists the stages as `inferx-compile --dump-pipeline` prints them, each
reproducible with `inferx-opt` or `iree-compile`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inferx_compiler.frontend import graph_lowering
from inferx_compiler.artifact.archive import PARAMETER_SCOPE
from inferx_compiler.backend.iree_backend import BUILD_DIR
from inferx_compiler.options import CompileOptions
from inferx_compiler.targets import HOPPER_ARCHS, MATMUL_TILE_BYTES_OPTION, Target, get_target

# IREE demotes f64 to f32 by default; a model that computes in float64 keeps it.
# (Only then: lowerings introduce f64 scalars of their own that IREE's constant
# evaluator cannot handle unless they are demoted.)
KEEP_F64_FLAGS = ("--iree-input-demote-f64-to-f32=false",)


@dataclass
class Stage:
    name: str
    level: str  # graph | iree | importer
    spec: str  # textual pipeline, or IREE flags


def graph_decision_pipeline(options: CompileOptions) -> str:
    passes = []
    target = get_target(options.target)
    # CUDA: IREE's own f16 convolutions are wrong there (see inferx-annotate-precision);
    # static ones become matmuls through the conv strategy, dynamic ones stay f32.
    convs = "all"
    if target.backend == "cuda":
        convs = "static" if uses_conv_strategy(target, options) else "none"
    if options.uses_plan:
        # the driver attaches the plan to the module (inferx.precision_plan); on GPUs the
        # contractions without a stored weight (attention) compute in f16
        others = " others=f16 convolutions=" + convs if target.backend == "cuda" else ""
        passes += [f"inferx-annotate-precision{{from-plan=true{others}}}", "inferx-apply-precision"]
    elif options.precision != "fp32":
        dtype = {"fp16": "f16", "bf16": "bf16"}[options.precision]
        passes += [f"inferx-annotate-precision{{precision={dtype} convolutions={convs}}}",
                   "inferx-apply-precision"]
    return "builtin.module(" + ",".join(passes) + ")"


GRAPH_LOWERING = "builtin.module(inferx-lower-to-linalg,canonicalize,cse)"
TUNING_DB_FILE = "tuning_db.json"


def dispatch_pipeline(target: Target, options: CompileOptions) -> str:
    """The dispatch-level passes: the report, then the per-dispatch configurations."""
    config = f"target={target.name}"
    if options.tuning_db:
        config += f" tuning-db={BUILD_DIR}/{TUNING_DB_FILE}"
    if options.tuning_candidate:
        config += f" candidate={options.tuning_candidate}"
    if not options.runs("inferx-dispatch-config"):
        return "builtin.module(inferx-dispatch-report)"
    return f"builtin.module(inferx-dispatch-report,inferx-dispatch-config{{{config}}})"


def uses_conv_strategy(target: Target, options: CompileOptions) -> bool:
    return (options.conv_algorithms != "none" and target.executable
            and options.runs("inferx-conv-strategy"))


OUTPUT_ENTRY = "inferx-add-output-entry"
# CPU: the entry also takes the call's transient storage (allocated once by the session)
OUTPUT_ENTRY_WITH_TRANSIENTS = "inferx-add-output-entry{transients=true}"


def without_transients(pipeline: str) -> str:
    """The input pipeline with the plain output entry (the fallback where IREE fails with the
    transient storage passed in)."""
    return pipeline.replace(OUTPUT_ENTRY_WITH_TRANSIENTS, OUTPUT_ENTRY)


def iree_input_pipeline(target: Target, options: CompileOptions, isolate_casts: bool = False) -> str:
    """The inferx passes run in IREE's context before IREE's own pipeline. `isolate_casts`: with
    inferx-isolate-casts, which the driver adds only when IREE has failed to data-tile the model
    without it (it costs small models a dispatch per normalization: bert_lite b1 bf16 0.5 -> 0.8 ms)."""
    passes = []
    if target.executable and options.runs("inferx-unbroadcast-matmul"):
        passes.append("inferx-unbroadcast-matmul")
    if uses_conv_strategy(target, options) and target.backend == "llvm-cpu" and options.runs("inferx-conv-image-loop"):
        passes.append(f"inferx-conv-image-loop{{target={target.name}}}")
    if uses_conv_strategy(target, options):
        allowed = "" if options.conv_algorithms == "auto" else f" algorithms={options.conv_algorithms}"
        if not options.runs("inferx-f32-matmul"):
            allowed += " kernel=false"  # the pass that carries out the `kernel` choice does not run
        passes.append(f"inferx-conv-strategy{{target={target.name}{allowed}}}")
    if options.fuse_attention != "off" and target.executable and options.runs("inferx-fuse-attention"):
        force = " force=true" if options.fuse_attention == "on" else ""
        passes.append(f"inferx-fuse-attention{{target={target.name}{force}}}")
    if integer_layers(options) or (options.plan is None and options.precision in ("int8", "int4", "auto")):
        # (without a resolved plan, e.g. --dump-pipeline: the pass a plan of this mode may need)
        matvec = "" if options.runs("inferx-dequant-matvec") else " matvec-kernel=false"
        passes.append(f"inferx-quantize-contractions{{target={target.name} group-size={options.group_size}{matvec}}}")
    if target.backend == "cuda" and target.arch in HOPPER_ARCHS and options.runs("inferx-hopper-matmul"):
        epilogue = "" if options.runs("inferx-hopper-epilogue") else " epilogue=false"
        group = "" if options.runs("inferx-hopper-group") else " group=false"
        tuned = f" tuning-db={BUILD_DIR}/{TUNING_DB_FILE}" if options.tuning_db else ""
        passes.append(f"inferx-hopper-matmul{{target={target.name}{epilogue}{group}{tuned}}}")
    if target.backend == "llvm-cpu" and "amx_bf16" in target.features and options.runs("inferx-amx-matmul"):
        passes.append(f"inferx-amx-matmul{{target={target.name}}}")
    if target.backend == "llvm-cpu" and "avx512f" in target.features and options.runs("inferx-f32-matmul"):
        passes.append(f"inferx-f32-matmul{{target={target.name}}}")
    if target.backend == "llvm-cpu" and "avx512f" in target.features and options.runs("inferx-softmax-kernel"):
        passes.append(f"inferx-softmax-kernel{{target={target.name}}}")
    if target.backend == "llvm-cpu" and "avx512f" in target.features and options.runs("inferx-pool-kernel"):
        passes.append(f"inferx-pool-kernel{{target={target.name}}}")
    if target.backend == "llvm-cpu" and options.runs("inferx-cpu-math"):
        passes.append(f"inferx-cpu-math{{target={target.name}}}")
    if target.backend == "cuda" and options.runs("inferx-split-reduction"):
        passes.append(f"inferx-split-reduction{{target={target.name}}}")
    if isolate_casts and target.backend == "llvm-cpu" and options.runs("inferx-isolate-casts"):
        passes.append(f"inferx-isolate-casts{{target={target.name}}}")
    if options.runs("inferx-narrow-parameters"):
        passes.append("inferx-narrow-parameters")
    entry = OUTPUT_ENTRY_WITH_TRANSIENTS if target.backend == "llvm-cpu" else OUTPUT_ENTRY
    passes += [f"inferx-bind-parameters{{scope={PARAMETER_SCOPE}}}", entry]
    return "builtin.module(" + ",".join(passes) + ")"


def integer_layers(options: CompileOptions) -> list:
    """The plan's int8/int4 layers (empty without a plan, or before the driver resolved it)."""
    plan = options.plan
    return [l for l in plan.layers if l.precision in ("int8", "int4")] if plan is not None else []


def integer_flags(options: CompileOptions) -> list[str]:
    """IREE flags the integer layers need on CPU: the s8 mmt4d microkernel, and hoisting int4
    weights' widening to i8 out of the call (IREE hoists a constant expression only while it
    grows by at most 1 MiB by default; measured on this CPU, 4096x4096 int4 at batch 1:
    13.5 ms widened per call, 0.59 ms hoisted)."""
    layers = integer_layers(options)
    target = get_target(options.target)
    if not layers or target.backend != "llvm-cpu":
        return []
    # (a target that enables microkernels itself names mmt4d among them)
    ukernels = any(f.startswith("--iree-llvmcpu-enable-ukernels=") for f in target.iree_flags())
    flags = [] if ukernels else ["--iree-llvmcpu-enable-ukernels=mmt4d"]
    int4 = [l for l in layers if l.precision == "int4"]
    if int4:
        growth = 2 * max(int(np.prod(l.shape)) for l in int4)
        flags.append(f"--iree-opt-const-expr-max-size-increase-threshold={max(growth, 1 << 20)}")
    return flags


def iree_flags(target: Target, options: CompileOptions) -> list[str]:
    """IREE's flags for this build: the target's, what the model's semantics need, the
    preprocessing that carries out the pass decisions, forced whole-build knobs (data tiling,
    the matmul tile budget: --tune's, or the tuning database's for this model), then the user's
    extra flags. A user flag of the same option as a target flag replaces it (process-wide
    options take one value)."""
    from inferx_compiler.backend.iree_global_options import option_name
    from inferx_compiler.passes.conv_strategy import PREPROCESSING_PIPELINE

    semantic = list(KEEP_F64_FLAGS) if options.keep_f64 else []
    decisions = []
    winograd = target.winograd if options.conv_algorithms == "auto" else "winograd" in options.conv_algorithms
    if uses_conv_strategy(target, options) and winograd:
        decisions.append(f"--iree-preprocessing-pass-pipeline={PREPROCESSING_PIPELINE}")
    overridden = {option_name(f) for f in options.extra_iree_flags}
    flags = [f for f in target.iree_flags() + opt_level_flags(target, options) if option_name(f) not in overridden]
    if options.data_tiling is not None:
        flags = _with_flag(flags, "--iree-opt-data-tiling", "true" if options.data_tiling else "false")
    forced_tiles = options.matmul_tile_bytes is not None and target.backend == "llvm-cpu"
    if forced_tiles and MATMUL_TILE_BYTES_OPTION not in overridden:
        flags = _with_flag(flags, "--" + MATMUL_TILE_BYTES_OPTION, str(options.matmul_tile_bytes))
    return flags + semantic + decisions + integer_flags(options) + list(options.extra_iree_flags)


def opt_level_flags(target: Target, options: CompileOptions) -> list[str]:
    """IREE's optimization level: the target's for builds whose contractions are all f16/bf16
    (Target.half_precision_opt_level says why), else IREE's default."""
    half = options.precision in ("fp16", "bf16") and not integer_layers(options)
    if half and target.half_precision_opt_level:
        return [f"--iree-opt-level={target.half_precision_opt_level}"]
    return []


def _with_flag(flags: list[str], option: str, value: str) -> list[str]:
    """`flags` with `option` set to `value` (any earlier value of it dropped)."""
    return [f for f in flags if not f.startswith(option + "=")] + [f"{option}={value}"]


def build_files(target: Target, options: CompileOptions) -> dict[str, str]:
    """Files the flags and pipelines name as {build}/NAME (written next to the compile, kept in
    reproducers): the tuning database."""
    if not options.tuning_db:
        return {}
    with open(options.tuning_db) as f:
        return {TUNING_DB_FILE: f.read()}


def describe_pipeline(options: CompileOptions, source: str = "onnx") -> list[Stage]:
    target = get_target(options.target)
    to_linalg = graph_lowering.TORCH_TO_LINALG if source == "onnx" else graph_lowering.FX_TORCH_TO_LINALG
    stages = [Stage("import", "importer", "torch-mlir onnx_importer (in process)" if source == "onnx"
                    else "torch-mlir fx importer (in process)")]
    if source == "onnx":
        stages.append(Stage("onnx-to-torch", "graph", graph_lowering.ONNX_TO_TORCH))
    stages += [Stage("torch-to-linalg", "graph", to_linalg),
               Stage("graph", "graph", graph_decision_pipeline(options)),
               Stage("graph-lowering", "graph", GRAPH_LOWERING)]
    if target.executable:
        flags = " ".join(iree_flags(target, options))
        stages += [Stage("iree-input", "iree", iree_input_pipeline(target, options)),
                   Stage("iree-to-executable-sources", "iree", f"{flags} --compile-to=executable-sources"),
                   Stage("dispatch", "iree", dispatch_pipeline(target, options)),
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
