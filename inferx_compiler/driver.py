"""The compile driver: model in, artifact (or one intermediate stage) out.

Stages, each reproducible on its own (`inferx-compile --dump-pipeline` prints them):

  1 import          torch-mlir ONNX importer (or FX importer), in process
  2 onnx-to-torch   graph context
  3 torch-to-linalg graph context
  4 graph           inferx decision passes (precision...), graph context   --emit inferx stops here
  5 graph-lowering  inferx ops -> linalg/arith, canonicalize, cse           --emit linalg stops here
  6 iree-input      inferx-conv-strategy, inferx-bind-parameters, inferx-add-output-entry (IREE context)
  7 iree            IREE phases up to executable-sources (flags in the manifest)
  8 dispatch        inferx-dispatch-report, inferx-dispatch-config          --emit executable-sources
  9 iree            IREE from executable-sources to the VM module            --emit vmfb

Which passes and flags each stage runs is the build plan (build_plan.py); this module runs it:
imports the model (once per static-shape function, specialization.py), lowers it, hands it to
IREE (iree_backend.py) and writes the artifact.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Optional

from inferx_compiler.frontend import graph_lowering
from inferx_compiler.frontend import onnx_import
from inferx_compiler.artifact.archive import Manifest, MODULE_MLIR, MODULE_VMFB, sha256_file, write_artifact
from inferx_compiler.errors import ModelLoadError, PipelineError, TargetError
from inferx_compiler.build_plan import (GRAPH_LOWERING, build_files, describe_pipeline, dispatch_pipeline,
                         graph_decision_pipeline, iree_flags, iree_input_pipeline, without_transients)
from inferx_compiler.log import BuildLog
from inferx_compiler.frontend.onnx_nodes import attribute_failure
from inferx_compiler.options import EMIT_CHOICES, PRECISIONS, CompileOptions
from inferx_compiler.mlir_contexts import module_to_bytecode, new_graph_context
from inferx_compiler.targets import AGGRESSIVE_FUSION_FLAG, Target, get_target
from inferx_compiler.passes.output_entry import SUFFIX as OUTPUT_ENTRY_SUFFIX
from inferx_compiler.frontend.specialization import DEFAULT_STATIC_BATCHES, Specialization, batch_specializations
from inferx_compiler.versions import stack_versions

@dataclass
class CompileResult:
    output: bytes = b""  # for --emit stages other than artifact
    manifest: Optional[Manifest] = None
    dispatches: list = field(default_factory=list)
    weights: dict = field(default_factory=dict)
    decisions: list = field(default_factory=list)
    plan: object = None  # the PrecisionPlan the build used


def plan_onnx_file(model_path: str, options: CompileOptions, log: BuildLog):
    """Only the precision plan of a build (--emit-plan without -o)."""
    target = check_request(options)
    model, digest = onnx_import.load_model(model_path)
    name = os.path.splitext(os.path.basename(model_path))[0]
    prepared = onnx_import.prepare(model, name=name, sha256=digest, log=log,
                                     input_shapes=dict(options.input_shapes),
                                     input_values=dict(options.input_values))
    return precision_plan_for(options, target, prepared, log)


def compile_onnx_file(model_path: str, options: CompileOptions, log: BuildLog) -> CompileResult:
    check_request(options)
    log.step(f"loading {os.path.basename(model_path)}")
    model, digest = onnx_import.load_model(model_path)
    name = os.path.splitext(os.path.basename(model_path))[0]
    return compile_onnx_model(model, name, digest, options, log)


def compile_onnx_model(model, name: str, digest: str, options: CompileOptions, log: BuildLog) -> CompileResult:
    """compile_onnx_file on a loaded ModelProto (`digest`: the file's sha256)."""
    target = check_request(options)
    prepared = onnx_import.prepare(model, name=name, sha256=digest, log=log,
                                     externalize_weights=(options.emit != "vmfb"),
                                     input_shapes=dict(options.input_shapes),
                                     input_values=dict(options.input_values))
    dynamic_images = onnx_import.dynamic_spatial_nodes(prepared) if target.executable else []
    if dynamic_images:
        log.warn(f"{len(dynamic_images)} convolution/pool node(s) see dynamic image sizes "
                 f"({', '.join(dynamic_images[:3])}{', ...' if len(dynamic_images) > 3 else ''}); IREE 3.13 fails "
                 f"on some such forms: if the build fails there, fix the size with --input-shape")
    try:
        return _compile_prepared(prepared, options, target, log)
    except PipelineError as e:  # name the ONNX nodes, whichever stage failed
        raise _with_shape_hint(attribute_failure(e, prepared.nodes), dynamic_images, prepared) from None


def _with_shape_hint(error: PipelineError, dynamic_images: list[str], prepared) -> PipelineError:
    """A failure at nodes over dynamic image sizes says how to route around it."""
    failing = {n["name"] for n in error.nodes}
    if not failing & set(dynamic_images):
        return error
    example = ", ".join(f"--input-shape {s.name}={','.join(str(d) if isinstance(d, int) else 'N' for d in s.shape)}"
                        for s in prepared.inputs)
    return error.with_detail(f"{error.detail}\nhint: the failing node(s) work on dynamic image sizes, which IREE "
                             f"3.13 cannot always compile; build with the sizes fixed: {example} (N: your size)")


def _compile_prepared(prepared, options: CompileOptions, target: Target, log: BuildLog) -> CompileResult:
    name, digest = prepared.name, prepared.sha256
    options = dataclasses.replace(options, keep_f64=onnx_import.uses_float64(prepared),
                                  **_measured_build_knobs(options, target, digest, log),
                                  plan=precision_plan_for(options, target, prepared, log))
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
    if prepared.fixed_inputs:  # --input-value: the runtime accepts these inputs only at these values
        model_info["fixed_inputs"] = prepared.fixed_inputs
    return compile_linalg(module_op, ctx, target, options, log, model_info,
                           prepared.inputs, prepared.outputs, prepared.weights, specs)


def precision_plan_for(options: CompileOptions, target: Target, prepared, log: BuildLog):
    """The build's precision plan (precision_plan.py): replayed from --precision-plan, uniform,
    calibrated (auto or a fixed mode with --calibration), or the rule without calibration data."""
    from inferx_compiler.precision import precision_plan as pp

    if options.precision_plan_file:
        plan = pp.load_plan(options.precision_plan_file, target, pp.model_layers(prepared.proto, prepared.weights))
        log.step(f"precision plan {os.path.basename(options.precision_plan_file)}: "
                 f"{len(plan.layers)} layers ({plan.mode})")
    else:
        layers = pp.model_layers(prepared.proto, prepared.weights)
        if options.precision == "auto":
            plan = pp.rule_plan(target, layers, options.group_size)
        else:
            plan = pp.uniform_plan(options.precision, target, layers, options.group_size)
        if options.calibration and options.uses_plan:
            from inferx_compiler.precision import calibration

            data = calibration.load_calibration(options.calibration, prepared.inputs)
            budget = options.accuracy_budget if options.accuracy_budget is not None else (
                0.01 if options.precision == "auto" else None)
            plan.notes = [n for n in plan.notes if not n.startswith("no calibration data")]
            plan = calibration.calibrated_plan(plan, prepared, prepared.weights, target, data, budget, log,
                                               fixed=None if options.precision == "auto" else options.precision)
        elif options.precision == "auto":
            log.warn(plan.notes[0])
        elif options.accuracy_budget is not None:
            raise pp.PrecisionError("--accuracy-budget needs --calibration data to measure the error against")
    if options.uses_plan:
        for line in plan.table().splitlines():
            log.step(line)
    return plan


def _measured_build_knobs(options: CompileOptions, target: Target, model_sha256: str, log: BuildLog) -> dict:
    """The whole-build knobs the tuning database measured for this model (data tiling, the
    matmul tile budget), as CompileOptions fields; a knob the options force stays as it is."""
    if not options.tuning_db:
        return {}
    from inferx_compiler.tuning import tuning_db

    entry = tuning_db.lookup_model(tuning_db.load(options.tuning_db), tuning_db.target_key(target), model_sha256)
    if entry is None:
        return {}
    knobs = {}
    if options.data_tiling is None:
        knobs["data_tiling"] = entry["data_tiling"]
        log.step(f"tuning database: data tiling {'on' if entry['data_tiling'] else 'off'} for this model "
                 f"(measured {entry['ms']['on']:.3f} ms on, {entry['ms']['off']:.3f} ms off)")
    budget = entry.get("matmul_tile_bytes")
    if options.matmul_tile_bytes is None and budget is not None:
        knobs["matmul_tile_bytes"] = budget
        measured = ", ".join(f"{int(b) // 1024} KiB {ms:.3f} ms" for b, ms in sorted(
            entry.get("tile_bytes_ms", {}).items(), key=lambda kv: int(kv[0])))
        log.step(f"tuning database: matmul tile budget {budget // 1024} KiB for this model ({measured})")
    return knobs


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
    proto = onnx_import.specialize(prepared, dict(spec.dims))
    static = dataclasses.replace(prepared, proto=proto)
    other = graph_lowering.import_onnx(static, module_op.context)
    graph_lowering.convert_onnx_ops(other, static, log)
    graph_lowering.lower_to_linalg(other, graph_lowering.TORCH_TO_LINALG, log, static)
    graph_lowering.mark_parameter_args(other, parameter_keys)
    graph_lowering.move_entry_function(other, module_op, spec.function)
    log.step(f"added the static-shape function @{spec.function} "
             f"({', '.join(f'{k}={v}' for k, v in spec.dims)})")


def check_request(options: CompileOptions) -> Target:
    from inferx_compiler.precision.precision_plan import check_precision

    target = get_target(options.target)
    if options.emit not in EMIT_CHOICES:
        raise TargetError(f"unknown --emit '{options.emit}'; valid: {', '.join(EMIT_CHOICES)}")
    if not target.executable and options.emit in ("vmfb", "executable-sources"):
        raise TargetError(
            f"target '{target.name}' cannot produce --emit {options.emit}: {target.route_note}. "
            f"Use --emit linalg, or the default artifact (which holds the optimized MLIR)")
    if options.precision not in PRECISIONS:
        raise TargetError(f"unknown --precision '{options.precision}'; valid: {', '.join(PRECISIONS)}")
    check_precision(options.precision, target)
    if options.precision_plan_file and options.precision not in ("fp32", "auto"):
        raise TargetError(f"--precision-plan replays a plan: drop --precision {options.precision}")
    return target


def compile_linalg(module_op, ctx, target: Target, options: CompileOptions, log: BuildLog,
                    model_info: dict, inputs, outputs, weights,
                    specs: list[Specialization] = ()) -> CompileResult:
    from inferx_compiler.passes.infra.pipeline import run_pipeline
    from inferx_compiler.backend import iree_backend

    with ctx:
        if options.uses_plan:
            graph_lowering.attach_precision_plan(module_op, options.plan.ir_plan())
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
                        precision_plan=(options.plan.to_json() if options.plan is not None
                                        else {"mode": options.precision, "layers": []}))
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
    result, flags, used, fallback = _compile_with_fallback(
        bytecode, flags, log, iree_input_pipeline(target, options), dispatch_pipeline(target, options),
        build_files(target, options), forced_data_tiling=options.data_tiling is not None,
        isolated_pipeline=iree_input_pipeline(target, options, isolate_casts=True))
    manifest.iree_flags = flags
    if fallback:
        manifest.notes.append(fallback)
    if "iree-input" in manifest.pipeline:
        manifest.pipeline["iree-input"] = used
    if result.parameter_keys is not None:  # exactly what the module reads; quantized weights derived
        from inferx_compiler.precision import quantization

        weights = quantization.materialize(result.parameter_keys, weights)
    manifest.module = MODULE_VMFB
    manifest.output_entry_function = manifest.entry_function + OUTPUT_ENTRY_SUFFIX
    manifest.functions = [spec.to_json(spec.function + OUTPUT_ENTRY_SUFFIX, flops.get(spec.function, -1))
                          for spec in specs]
    kernels = _c_kernels_used(result.dispatches)
    if kernels:
        manifest.compiler = {**manifest.compiler, "c_kernels": kernels}
    if options.tuning_db:
        manifest.tuning_db = {"sha256": sha256_file(options.tuning_db),
                              "entries_used": sum(d.get("config_source", "").startswith("tuned") for d in result.dispatches)}
    return CompileResult(output=result.vmfb, manifest=manifest, dispatches=result.dispatches,
                         decisions=result.decisions, weights=weights, plan=options.plan)


DATA_TILING_ON = "--iree-opt-data-tiling=true"


def _c_kernels_used(dispatches: list) -> dict:
    """{source: {"object_sha256", "c_compiler"}} of our C kernels linked into the module (CPU
    targets: the VNNI, AMX, f32 and softmax kernels, and each generated epilogue variant of the f32 kernel
    as "f32_gemm_<tag>.c (generated)"), for the manifest: a rebuild with another C compiler can
    differ."""
    from inferx_compiler.passes.support.cpu_extern import ROW_SOURCES, SOURCE_OF_KIND
    from inferx_compiler.kernels import cpu_objects

    used = {}
    for kind, source in {**SOURCE_OF_KIND, **ROW_SOURCES}.items():
        if source not in used and any(re.match(rf"inferx_{kind}_[0-9D]", d.get("dispatch", "")) for d in dispatches):
            built = cpu_objects.build(source)  # cached: the object the build linked
            used[source] = {"object_sha256": built.sha256, "c_compiler": built.compiler}
    for d in dispatches:
        match = re.match(r"inferx_f32[lc]_\w+_e([0-9a-f]+)$", d.get("dispatch", ""))
        if match and d.get("object_sha256"):
            compiler = used.get("f32_gemm.c", {}).get("c_compiler", "")
            used[f"f32_gemm_{match.group(1)}.c (generated)"] = {"object_sha256": d["object_sha256"],
                                                                "c_compiler": compiler}
    return used


def _compile_with_fallback(bytecode: bytes, flags: list[str], log: BuildLog, input_pipeline: str,
                           dispatch: str, files: dict[str, str], forced_data_tiling: bool = False,
                           isolated_pipeline: Optional[str] = None):
    """IREE with the target's flags. If IREE fails with the target's aggressive dispatch fusion
    (Target.iree_flags: some layer norms then exceed IREE's CPU stack limit), build again without
    it; then without the transient storage passed into the output entries (CPU). If IREE's data
    tiling fails on this model, build again with
    `isolated_pipeline` (inferx-isolate-casts added: IREE 3.13 cannot data-tile a BERT-size layer
    norm that feeds bf16 matmuls), and if that fails too, without data tiling (IREE 3.13 also
    rejects some bool-masked attention graphs in linalg.pack; not when the build forces a
    data-tiling choice: then the failure stands). Returns (result, flags, input pipeline) used
    and, when data tiling was dropped, a note saying so for the manifest (else None)."""
    from inferx_compiler.backend import iree_backend
    from inferx_compiler.errors import PipelineError

    def build(pipeline: str, flags: list[str], note: Optional[str] = None):
        return iree_backend.compile_module(bytecode, flags, input_pipeline=pipeline, dispatch_pipeline=dispatch,
                                           log=log, build_files=files), flags, pipeline, note

    try:
        return build(input_pipeline, flags)
    except PipelineError as e:
        failure = e
    if AGGRESSIVE_FUSION_FLAG in flags:
        log.step(f"IREE failed with aggressive dispatch fusion ({_first_error(failure)}); building again without it")
        flags = [f for f in flags if f != AGGRESSIVE_FUSION_FLAG]
        try:
            return build(input_pipeline, flags)
        except PipelineError as e:
            failure = e
    if without_transients(input_pipeline) != input_pipeline:
        log.step(f"IREE failed with the transient storage passed in ({_first_error(failure)}); "
                 f"building again without it")
        input_pipeline = without_transients(input_pipeline)
        isolated_pipeline = isolated_pipeline and without_transients(isolated_pipeline)
        try:
            return build(input_pipeline, flags)
        except PipelineError as e:
            failure = e
    if DATA_TILING_ON not in flags:
        raise failure
    if isolated_pipeline and isolated_pipeline != input_pipeline:
        log.warn(f"IREE failed with data tiling ({_first_error(failure)}); building again with inferx-isolate-casts")
        try:
            return build(isolated_pipeline, flags)
        except PipelineError as e:
            failure = e
    if forced_data_tiling:
        raise failure
    log.warn(f"IREE failed with data tiling ({_first_error(failure)}); building again without data tiling")
    note = (f"built without data tiling: IREE failed with it ({_first_error(failure)}); matmuls and convolutions "
            f"run IREE's untiled code, which is slower")
    return build(input_pipeline, [f for f in flags if f != DATA_TILING_ON] + ["--iree-opt-data-tiling=false"], note)


def _first_error(e: Exception) -> str:
    lines = str(e).splitlines()
    return lines[1][:160] if len(lines) > 1 else str(e)


def write_result(result: CompileResult, out_path: str, options: CompileOptions = None,
                 log: BuildLog = None) -> None:
    """Write the artifact; with batch sizes, record each bucket's latency (see buckets.py)."""
    from inferx_compiler.artifact import buckets

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
    report = {"dispatches": result.dispatches, "decisions": result.decisions}
    if result.plan is not None:  # the per-layer table as printed (the plan itself is in the manifest)
        report["precision_table"] = result.plan.table().splitlines()
    return report


def _asm(module_op) -> bytes:
    """Complete textual IR: weights were lifted out, so what is left is small."""
    return module_op.get_asm().encode()


def bytecode_to_text(bytecode: bytes) -> bytes:
    from torch_mlir import ir

    with new_graph_context():
        return ir.Module.parse(bytecode).operation.get_asm().encode()
