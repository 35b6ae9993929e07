"""The compile driver: model in, artifact (or one intermediate stage) out.

Stages, each reproducible on its own (`inferx-compile --dump-pipeline` prints them):

  1 import          torch-mlir ONNX importer (or FX importer), in process
  2 onnx-to-torch   graph context
  3 torch-to-linalg graph context
  4 graph           inferx decision passes (precision...), graph context   --emit inferx stops here
  5 graph-lowering  inferx ops -> linalg/arith, canonicalize, cse           --emit linalg stops here
  6 iree-input      inferx-bind-parameters, inferx-add-output-entry, IREE context
  7 iree            IREE phases up to executable-sources (flags in the manifest)
  8 dispatch        inferx dispatch passes on each hal.executable            --emit executable-sources
  9 iree            IREE from executable-sources to the VM module            --emit vmfb
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Optional

from . import graph_lowering, onnx_frontend
from .artifact import Manifest, PARAMETER_SCOPE, MODULE_MLIR, MODULE_VMFB, write_artifact
from .errors import ModelLoadError, PipelineError, TargetError
from .iree_backend import BUILD_DIR
from .log import BuildLog
from .mlir_contexts import module_to_bytecode, new_graph_context
from .targets import Target, get_target
from .passes.output_entry import SUFFIX as OUTPUT_ENTRY_SUFFIX
from .specialization import DEFAULT_STATIC_BATCHES, Specialization, batch_specializations
from .versions import stack_versions

EMIT_CHOICES = ("artifact", "torch", "linalg", "inferx", "executable-sources", "vmfb")
PRECISIONS = ("fp32", "fp16", "bf16")
# IREE demotes f64 to f32 by default; a model that computes in float64 keeps it.
# (Only then: lowerings introduce f64 scalars of their own that IREE's constant
# evaluator cannot handle unless they are demoted.)
KEEP_F64_FLAGS = ("--iree-input-demote-f64-to-f32=false",)


@dataclass(frozen=True)
class CompileOptions:
    target: str
    emit: str = "artifact"
    precision: str = "fp32"
    extra_iree_flags: tuple[str, ...] = ()
    batch_sizes: tuple[int, ...] = ()
    measure_buckets: bool = True
    dynamic_only: bool = False  # no static-shape functions (see specialization.py)
    conv_algorithms: str = "auto"  # inferx-conv-strategy's choice: auto, none, or a list
    tuning_db: Optional[str] = None  # measured dispatch configurations to apply (--tuning-db)
    tuning_candidate: int = 0  # build with the K-th rule candidate everywhere (what --tune measures)
    data_tiling: Optional[bool] = None  # None: the target's default (with a fallback); else forced
    keep_f64: bool = False  # set by the driver when the model computes in float64


@dataclass
class Stage:
    name: str
    level: str  # graph | iree | importer
    spec: str  # textual pipeline, or IREE flags


@dataclass
class CompileResult:
    output: bytes = b""  # for --emit stages other than artifact
    manifest: Optional[Manifest] = None
    dispatches: list = field(default_factory=list)
    weights: dict = field(default_factory=dict)
    decisions: list = field(default_factory=list)


def graph_decision_pipeline(options: CompileOptions) -> str:
    passes = []
    if options.precision != "fp32":
        dtype = {"fp16": "f16", "bf16": "bf16"}[options.precision]
        # CUDA: IREE's own f16 convolutions are wrong there (see inferx-annotate-precision);
        # static ones become matmuls through the conv strategy, dynamic ones stay f32.
        target = get_target(options.target)
        convs = "all"
        if target.backend == "cuda":
            convs = "static" if uses_conv_strategy(target, options) else "none"
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
    return f"builtin.module(inferx-dispatch-report,inferx-dispatch-config{{{config}}})"


def uses_conv_strategy(target: Target, options: CompileOptions) -> bool:
    return options.conv_algorithms != "none" and target.executable


def iree_input_pipeline(target: Target, options: CompileOptions) -> str:
    passes = []
    if uses_conv_strategy(target, options):
        allowed = "" if options.conv_algorithms == "auto" else f" algorithms={options.conv_algorithms}"
        passes.append(f"inferx-conv-strategy{{target={target.name}{allowed}}}")
    passes += [f"inferx-bind-parameters{{scope={PARAMETER_SCOPE}}}", "inferx-add-output-entry"]
    return "builtin.module(" + ",".join(passes) + ")"


def iree_flags(target: Target, options: CompileOptions) -> list[str]:
    """IREE's flags for this build: the target's, what the model's semantics need, the
    preprocessing that carries out the pass decisions, a forced data-tiling choice (--tune's,
    or the tuning database's for this model), then the user's extra flags."""
    from .passes.conv_strategy import PREPROCESSING_PIPELINE

    semantic = list(KEEP_F64_FLAGS) if options.keep_f64 else []
    decisions = []
    winograd = target.winograd if options.conv_algorithms == "auto" else "winograd" in options.conv_algorithms
    if uses_conv_strategy(target, options) and winograd:
        decisions.append(f"--iree-preprocessing-pass-pipeline={PREPROCESSING_PIPELINE}")
    flags = target.iree_flags()
    if options.data_tiling is not None:
        flags = [f for f in flags if not f.startswith("--iree-opt-data-tiling=")]
        flags.append(f"--iree-opt-data-tiling={'true' if options.data_tiling else 'false'}")
    return flags + semantic + decisions + list(options.extra_iree_flags)


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


def compile_onnx_file(model_path: str, options: CompileOptions, log: BuildLog) -> CompileResult:
    target = check_request(options)
    log.step(f"loading {os.path.basename(model_path)}")
    model, digest = onnx_frontend.load_model(model_path)
    name = os.path.splitext(os.path.basename(model_path))[0]
    prepared = onnx_frontend.prepare(model, name=name, sha256=digest, log=log,
                                     externalize_weights=(options.emit != "vmfb"))
    options = dataclasses.replace(options, keep_f64=onnx_frontend.uses_float64(prepared),
                                  data_tiling=_data_tiling_choice(options, target, digest, log))
    parameter_keys = graph_lowering.trailing_parameter_keys(len(prepared.inputs), list(prepared.weights))
    ctx = new_graph_context()
    with ctx:
        module_op = graph_lowering.import_onnx(prepared, ctx)
        log.step(f"imported {len(prepared.nodes)} ONNX nodes (opset {prepared.opset})")
        graph_lowering.convert_onnx_ops(module_op, prepared, log)
        if options.emit == "torch":
            return CompileResult(output=_asm(module_op))
        graph_lowering.lower_to_linalg(module_op, graph_lowering.TORCH_TO_LINALG, log, prepared)
        graph_lowering.mark_parameter_args(module_op, parameter_keys)
        specs = []
        wanted = static_specializations(options, target, prepared.inputs)
        if wanted and _static_convs_unsafe(target, options, module_op):
            log.warn("CUDA at fp32: no static-shape functions for a model with convolutions (IREE 3.13's "
                     "static-shape f32 convolutions on CUDA were measured wrong on an H200, and their "
                     "im2col form does not compile there); the dynamic function serves every batch. "
                     "--precision fp16 gets static functions with tensor-core convolutions")
            wanted = []
        for spec in wanted:
            try:
                _add_specialized_function(module_op, prepared, spec, parameter_keys, log)
                specs.append(spec)
            except (PipelineError, ModelLoadError) as e:
                log.warn(f"no static-shape function @{spec.function}: {str(e).splitlines()[0]}; "
                         f"the dynamic function serves that batch")
    model_info = {"name": name, "source": "onnx", "sha256": digest, "opset": prepared.opset,
                  "upgraded_from_opset": prepared.upgraded_from}
    return compile_linalg(module_op, ctx, target, options, log, model_info,
                           prepared.inputs, prepared.outputs, prepared.weights, specs)


def _data_tiling_choice(options: CompileOptions, target: Target, model_sha256: str, log: BuildLog):
    """The forced data-tiling choice: the option's, else the tuning database's for this model."""
    if options.data_tiling is not None or not options.tuning_db:
        return options.data_tiling
    from . import tuning_db

    entry = tuning_db.lookup_model(tuning_db.load(options.tuning_db), tuning_db.target_key(target), model_sha256)
    if entry is None:
        return None
    log.step(f"tuning database: data tiling {'on' if entry['data_tiling'] else 'off'} for this model "
             f"(measured {entry['ms']['on']:.3f} ms on, {entry['ms']['off']:.3f} ms off)")
    return entry["data_tiling"]


def _static_convs_unsafe(target: Target, options: CompileOptions, module_op) -> bool:
    return target.backend == "cuda" and options.precision == "fp32" and graph_lowering.has_convolutions(module_op)


def static_specializations(options: CompileOptions, target: Target, inputs) -> list[Specialization]:
    """The static-shape functions this build adds beside the dynamic one (specialization.py)."""
    if options.dynamic_only or not target.executable:
        return []
    sizes = options.batch_sizes or DEFAULT_STATIC_BATCHES
    return batch_specializations(graph_lowering.ENTRY_FUNCTION, inputs, sizes)


def _add_specialized_function(module_op, prepared, spec: Specialization, parameter_keys, log) -> None:
    """Import the model again with `spec`'s dims fixed, lower it, and move its entry function
    into `module_op` as `spec.function` (its weight arguments carry the same parameter keys)."""
    proto = onnx_frontend.specialize(prepared, dict(spec.dims))
    static = dataclasses.replace(prepared, proto=proto)
    other = graph_lowering.import_onnx(static, module_op.context)
    graph_lowering.convert_onnx_ops(other, static, log)
    graph_lowering.lower_to_linalg(other, graph_lowering.TORCH_TO_LINALG, log, static)
    graph_lowering.mark_parameter_args(other, parameter_keys)
    graph_lowering.move_entry_function(other, module_op, spec.function)
    log.step(f"added the static-shape function @{spec.function} "
             f"({', '.join(f'{k}={v}' for k, v in spec.dims)})")


def check_request(options: CompileOptions) -> Target:
    target = get_target(options.target)
    if options.emit not in EMIT_CHOICES:
        raise TargetError(f"unknown --emit '{options.emit}'; valid: {', '.join(EMIT_CHOICES)}")
    if not target.executable and options.emit in ("vmfb", "executable-sources"):
        raise TargetError(
            f"target '{target.name}' cannot produce --emit {options.emit}: {target.route_note}. "
            f"Use --emit linalg, or the default artifact (which holds the optimized MLIR)")
    if options.precision not in PRECISIONS:
        raise TargetError(f"unknown --precision '{options.precision}'; valid: {', '.join(PRECISIONS)}")
    return target


def compile_linalg(module_op, ctx, target: Target, options: CompileOptions, log: BuildLog,
                    model_info: dict, inputs, outputs, weights,
                    specs: list[Specialization] = ()) -> CompileResult:
    from .passes.pipeline import run_pipeline
    from . import iree_backend

    with ctx:
        run_pipeline(module_op, graph_decision_pipeline(options), "graph", stage="graph")
        if options.emit == "inferx":
            return CompileResult(output=_asm(module_op))
        run_pipeline(module_op, GRAPH_LOWERING, "graph", stage="graph-lowering")
        log.step("graph-level inferx passes done")
        if options.emit == "linalg":
            return CompileResult(output=_asm(module_op))
        flops = graph_lowering.functions_flops(module_op)
        bytecode = module_to_bytecode(module_op)
    flags = iree_flags(target, options) if target.executable else []
    pipeline = {s.name: s.spec for s in describe_pipeline(options, model_info["source"])}
    manifest = Manifest(model=model_info, target=target.to_json(), compiler=stack_versions(),
                        iree_flags=flags, pipeline=pipeline,
                        inputs=inputs, outputs=outputs, executable=target.executable,
                        precision_plan={"mode": options.precision, "layers": []})
    if not target.executable:
        manifest.module = MODULE_MLIR
        manifest.notes.append(f"no executable: {target.route_note}")
        log.warn(f"target '{target.name}': {target.route_note}")
        return CompileResult(output=bytecode_to_text(bytecode), manifest=manifest, weights=weights)
    if options.emit == "executable-sources":
        text = iree_backend.compile_to_sources_text(
            bytecode, flags, input_pipeline=iree_input_pipeline(target, options),
            dispatch_pipeline=dispatch_pipeline(target, options), log=log,
            build_files=build_files(target, options))
        return CompileResult(output=text)
    result, flags = _compile_with_fallback(bytecode, flags, log, iree_input_pipeline(target, options),
                                           dispatch_pipeline(target, options), build_files(target, options),
                                           forced_data_tiling=options.data_tiling is not None)
    manifest.iree_flags = flags
    manifest.module = MODULE_VMFB
    manifest.output_entry_function = manifest.entry_function + OUTPUT_ENTRY_SUFFIX
    manifest.functions = [spec.to_json(spec.function + OUTPUT_ENTRY_SUFFIX, flops.get(spec.function, -1))
                          for spec in specs]
    if options.tuning_db:
        from . import tuning_db

        manifest.tuning_db = {"sha256": tuning_db.sha256(options.tuning_db),
                              "entries_used": sum(d.get("config_source") == "tuned" for d in result.dispatches)}
    return CompileResult(output=result.vmfb, manifest=manifest, dispatches=result.dispatches,
                         decisions=result.decisions,
                         weights=weights)


DATA_TILING_ON = "--iree-opt-data-tiling=true"


def _compile_with_fallback(bytecode: bytes, flags: list[str], log: BuildLog, input_pipeline: str,
                           dispatch: str, files: dict[str, str], forced_data_tiling: bool = False):
    """IREE with the target's flags; if IREE's data tiling fails on this model (IREE 3.13
    rejects some bool-masked attention graphs in linalg.pack), build again without it (not
    when the build forces a data-tiling choice: then the failure stands)."""
    from . import iree_backend
    from .errors import PipelineError

    try:
        return iree_backend.compile_module(bytecode, flags, input_pipeline=input_pipeline,
                                           dispatch_pipeline=dispatch, log=log, build_files=files), flags
    except PipelineError as e:
        if DATA_TILING_ON not in flags or forced_data_tiling:
            raise
        log.warn(f"IREE failed with data tiling ({str(e).splitlines()[1][:160] if len(str(e).splitlines()) > 1 else e}); "
                 f"building again without data tiling")
        flags = [f for f in flags if f != DATA_TILING_ON] + ["--iree-opt-data-tiling=false"]
        return iree_backend.compile_module(bytecode, flags, input_pipeline=input_pipeline,
                                           dispatch_pipeline=dispatch, log=log, build_files=files), flags


def write_result(result: CompileResult, out_path: str, options: CompileOptions = None,
                 log: BuildLog = None) -> None:
    """Write the artifact; with batch sizes, record each bucket's latency (see buckets.py)."""
    from . import buckets

    sizes = list(options.batch_sizes) if options else []
    target = get_target(result.manifest.target["name"]) if sizes else None
    if sizes:
        buckets.check_batchable(result.manifest.inputs)
        weight_bytes = int(sum(w.nbytes for w in result.weights.values()))
        result.manifest.batch_buckets = buckets.estimate(target, result.dispatches, weight_bytes, sizes)
    write_artifact(out_path, result.manifest, result.output, result.weights,
                   _report(result))
    device = buckets.present_device(target) if sizes and options.measure_buckets else None
    if device:
        result.manifest.batch_buckets = buckets.measure(out_path, device, sizes)
        write_artifact(out_path, result.manifest, result.output, result.weights,
                       _report(result))
        if log:
            table = ", ".join(f"b{b['size']}={b['latency_ms']:.2f}ms" for b in result.manifest.batch_buckets)
            log.step(f"measured bucket latency on {device}: {table}")


def _report(result: CompileResult) -> dict:
    return {"dispatches": result.dispatches, "decisions": result.decisions}


def _asm(module_op) -> bytes:
    """Complete textual IR: weights were lifted out, so what is left is small."""
    return module_op.get_asm().encode()


def bytecode_to_text(bytecode: bytes) -> bytes:
    from torch_mlir import ir

    with new_graph_context():
        return ir.Module.parse(bytecode).operation.get_asm().encode()
