"""The compile driver: model in, artifact (or one intermediate stage) out.

Stages, each reproducible on its own (`inferx-compile --dump-pipeline` prints them):

  1 import          torch-mlir ONNX importer (or FX importer), in process
  2 onnx-to-torch   graph context
  3 torch-to-linalg graph context
  4 graph           inferx decision passes (precision...), graph context   --emit inferx stops here
  5 graph-lowering  inferx ops -> linalg/arith, canonicalize, cse           --emit linalg stops here
  6 iree-input      inferx-conv-strategy, kernels, inferx-bind-parameters... (IREE context)
  7 iree            IREE phases up to executable-sources (flags in the manifest)
  8 dispatch        inferx-dispatch-report, inferx-dispatch-config          --emit executable-sources
  9 iree            IREE from executable-sources to the VM module            --emit vmfb

The request (CompileOptions) is resolved once into a Build (build.py): the target record, which
is also written on the module (`inferx.target`) for every pass to read, the precision plan and
the measured knobs. Which passes and flags each stage runs is the build plan (build_plan.py);
this module runs it: asks a frontend (frontend/) for the model, adds the static-shape functions
(specialization.py), hands the module to IREE (backend/) and writes the artifact.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Optional

from inferx_compiler.artifact.archive import MODULE_MLIR, MODULE_VMFB, Manifest, sha256_file, write_artifact
from inferx_compiler.build import Build, resolve_build
from inferx_compiler.build_plan import (GRAPH_LOWERING, build_files, describe_pipeline, dispatch_pipeline,
                                        graph_decision_pipeline, iree_flags, iree_input_pipeline)
from inferx_compiler.errors import ModelLoadError, PipelineError
from inferx_compiler.frontend import graph_lowering, onnx_import
from inferx_compiler.frontend.imported import Frontend, ImportedModel
from inferx_compiler.frontend.onnx_model import OnnxFrontend
from inferx_compiler.frontend.onnx_nodes import attribute_failure
from inferx_compiler.frontend.specialization import DEFAULT_STATIC_BATCHES, Specialization, batch_specializations
from inferx_compiler.log import BuildLog
from inferx_compiler.mlir_contexts import module_to_bytecode, new_graph_context
from inferx_compiler.options import CompileOptions
from inferx_compiler.passes.infra.target_attr import write_target
from inferx_compiler.passes.output_entry import SUFFIX as OUTPUT_ENTRY_SUFFIX
from inferx_compiler.targets import AGGRESSIVE_FUSION_FLAG, Target
from inferx_compiler.versions import stack_versions


@dataclass
class CompileResult:
    output: bytes = b""  # for --emit stages other than artifact
    manifest: Optional[Manifest] = None
    dispatches: list = field(default_factory=list)
    weights: dict = field(default_factory=dict)
    decisions: list = field(default_factory=list)
    plan: object = None  # the PrecisionPlan the build used
    build: Optional[Build] = None  # what the build derived from its request
    members: dict = field(default_factory=dict)  # further artifact members (a tokenizer)
    functions: dict = field(default_factory=dict)  # per public function: dispatches, copies, in place


def plan_onnx_file(model_path: str, options: CompileOptions, log: BuildLog):
    """Only the precision plan of a build (--emit-plan without -o)."""
    build = resolve_build(options)
    model, digest = onnx_import.load_model(model_path)
    name = os.path.splitext(os.path.basename(model_path))[0]
    prepared = onnx_import.prepare(model, name=name, sha256=digest, log=log,
                                   input_shapes=dict(options.input_shapes),
                                   input_values=dict(options.input_values))
    return precision_plan_for(build, prepared, log)


def compile_onnx_file(model_path: str, options: CompileOptions, log: BuildLog) -> CompileResult:
    build = resolve_build(options)  # a bad request fails before the model is read
    log.step(f"loading {os.path.basename(model_path)}")
    model, digest = onnx_import.load_model(model_path)
    name = os.path.splitext(os.path.basename(model_path))[0]
    return _compile_onnx(model, name, digest, build, log)


def compile_onnx_model(model, name: str, digest: str, options: CompileOptions, log: BuildLog) -> CompileResult:
    """compile_onnx_file on a loaded ModelProto (`digest`: the file's sha256)."""
    return _compile_onnx(model, name, digest, resolve_build(options), log)


def _compile_onnx(model, name: str, digest: str, build: Build, log: BuildLog) -> CompileResult:
    options = build.request
    prepared = onnx_import.prepare(model, name=name, sha256=digest, log=log,
                                   externalize_weights=(options.emit != "vmfb"),
                                   input_shapes=dict(options.input_shapes),
                                   input_values=dict(options.input_values))
    dynamic_images = onnx_import.dynamic_spatial_nodes(prepared) if build.target.executable else []
    if dynamic_images:
        log.warn(f"{len(dynamic_images)} convolution/pool node(s) see dynamic image sizes "
                 f"({', '.join(dynamic_images[:3])}{', ...' if len(dynamic_images) > 3 else ''}); IREE 3.13 fails "
                 f"on some such forms: if the build fails there, fix the size with --input-shape")
    try:
        return compile_model(OnnxFrontend(prepared), build, log)
    except PipelineError as e:  # name the ONNX nodes, whichever stage failed
        raise _with_shape_hint(attribute_failure(e, prepared.nodes), dynamic_images, prepared) from None


def compile_torch_module(module, example_inputs, *, target: str, output: str, precision: str = "fp32",
                         dynamic_shapes=None, quiet: bool = True):
    """A torch.nn.Module through torch.export and torch-mlir's FX importer, into an artifact."""
    from inferx_compiler.frontend.torch_import import TorchFrontend, require_torch
    from inferx_compiler.precision.precision_plan import PrecisionError

    require_torch()
    log = BuildLog(quiet=quiet)
    build = resolve_build(CompileOptions(target=target, precision=precision), source="torch")
    if build.uses_plan:
        raise PrecisionError(f"precision '{precision}' is planned per ONNX layer: export the module to "
                             f"ONNX and use inferx-compile (PyTorch modules take fp32, fp16 or bf16)")
    result = compile_model(TorchFrontend(module, tuple(example_inputs), dynamic_shapes), build, log)
    write_result(result, output)
    return result.manifest


def compile_llm(path: str, options: CompileOptions, shapes, log: BuildLog, weights: str = "copy") -> CompileResult:
    """A generation model (a Hugging Face folder or a GGUF file, frontend/llm/) into prefill and
    decode entry points over a KV cache that the device keeps and every call writes in place.
    `shapes`: frontend.llm.frontend.GenerationShapes (chunk lengths, batch sizes, cache rows);
    --precision fp32/fp16/bf16 is the model's dtype (weights, activations, cache); int8/int4 are
    weight-only on the projections (inferx-annotate-precision{stored-weights=true}, then
    inferx-quantize-contractions) over an fp16 model on GPUs, an fp32 one on CPUs; `weights`: copy
    (into the artifact) or reference (the folder's safetensors files, read at load time)."""
    from inferx_compiler.frontend.llm import paged_attention
    from inferx_compiler.frontend.llm.frontend import WEIGHT_MODES, LlmFrontend, model_dtype
    from inferx_compiler.frontend.llm.source import open_source

    build = resolve_build(options, source="llm")
    dtype = model_dtype(options.precision, build.target)
    if weights not in WEIGHT_MODES:
        raise ModelLoadError(f"--weights {weights}: valid: {', '.join(WEIGHT_MODES)}")
    log.step(f"reading {path}")
    model = open_source(path)
    quantization = None
    if options.precision in ("int8", "int4"):
        import numpy as np

        from inferx_compiler.frontend.llm.weights import expected_shapes

        quantization = {"kind": options.precision, "group_size": options.group_size if options.precision == "int4" else 0}
        # every 2-D weight may be a projection (the embedding too, when the output head is tied to it)
        build = build.with_(integer_weights=tuple((options.precision, int(np.prod(shape)))
                                                  for shape in expected_shapes(model.config).values() if len(shape) == 2))
    kernel_attention, why = paged_attention.for_build(build, model.config, dtype, shapes.kv_int8)
    if build.target.backend == "cuda":
        log.step("attention: our paged-attention kernels (decode and prefill)" if kernel_attention
                 else f"attention compiled by IREE: {why}")
    return compile_model(LlmFrontend(model, shapes, dtype, weights, quantization=quantization,
                                     kernel_attention=kernel_attention), build, log)


def _with_shape_hint(error: PipelineError, dynamic_images: list[str], prepared) -> PipelineError:
    """A failure at nodes over dynamic image sizes says how to route around it."""
    failing = {n["name"] for n in error.nodes}
    if not failing & set(dynamic_images):
        return error
    example = ", ".join(f"--input-shape {s.name}={','.join(str(d) if isinstance(d, int) else 'N' for d in s.shape)}"
                        for s in prepared.inputs)
    return error.with_detail(f"{error.detail}\nhint: the failing node(s) work on dynamic image sizes, which IREE "
                             f"3.13 cannot always compile; build with the sizes fixed: {example} (N: your size)")


def compile_model(frontend: Frontend, build: Build, log: BuildLog) -> CompileResult:
    """The one build loop every frontend goes through: import, the target record on the module,
    the precision plan and measured knobs, lowering, the static-shape functions, then IREE."""
    emit = build.request.emit
    _warn_without_kernels(build, log)
    ctx = new_graph_context()
    with ctx:
        model = frontend.import_module(ctx, log)
        write_target(model.module_op, build.target)
        build = build.with_(source=frontend.source, keep_f64=model.uses_float64,
                            plan=precision_plan_for(build, model.onnx, log) if model.onnx is not None else None,
                            **_measured_build_knobs(build, model.model_info["sha256"], log))
        if emit == "torch":
            return CompileResult(output=_asm(model.module_op), build=build)
        frontend.lower(model, log)
        specs = _add_static_functions(frontend, model, build, log)
    return compile_linalg(model, ctx, build, log, specs)


def _warn_without_kernels(build: Build, log: BuildLog) -> None:
    """Say on the console, not only in the report's remarks, when a build for a Hopper target
    cannot compile its sm_90a kernels (no `hopper` extra): its matmuls get IREE's sm_80 code."""
    if not build.applies("inferx-hopper-matmul"):
        return
    from inferx_compiler.kernels import triton_matmul

    why = triton_matmul.available()
    if why:
        log.warn(f"--target {build.target.name}: {why}; the f16/bf16 matmuls fall back to IREE's sm_80 code "
                 f"(slower on Hopper)")


def _add_static_functions(frontend: Frontend, model: ImportedModel, build: Build,
                          log: BuildLog) -> list[Specialization]:
    """Each static-shape function the build wants, imported again at its dims and moved into the
    model's module (a failure leaves that batch to the dynamic function, with a warning)."""
    wanted = static_specializations(build, model.inputs)
    if wanted and _static_convs_unsafe(build, model.module_op):
        log.warn("CUDA at fp32: no static-shape functions for a model with convolutions (IREE 3.13's "
                 "static-shape f32 convolutions on CUDA were measured wrong on an H200, and their "
                 "im2col form does not compile there); the dynamic function serves every batch. "
                 "--precision fp16 gets static functions with tensor-core convolutions")
        wanted = []
    specs = []
    for spec in wanted:
        try:
            other = frontend.import_static(model, spec, log)
            graph_lowering.move_entry_function(other, model.module_op, spec.function)
        except (PipelineError, ModelLoadError) as e:
            log.warn(f"no static-shape function @{spec.function}: {str(e).splitlines()[0]}; "
                     f"the dynamic function serves that batch")
            continue
        log.step(f"added the static-shape function @{spec.function} "
                 f"({', '.join(f'{k}={v}' for k, v in spec.dims)})")
        specs.append(spec)
    return specs


def precision_plan_for(build: Build, prepared, log: BuildLog):
    """The build's precision plan (precision_plan.py): replayed from --precision-plan, uniform,
    calibrated (auto or a fixed mode with --calibration), or the rule without calibration data."""
    from inferx_compiler.precision import precision_plan as pp

    options, target = build.request, build.target
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


def _measured_build_knobs(build: Build, model_sha256: str, log: BuildLog) -> dict:
    """The whole-build knobs the tuning database measured for this model (data tiling, the
    matmul tile budget), as Build fields; a knob the request forces stays as it is."""
    options = build.request
    if not options.tuning_db:
        return {}
    from inferx_compiler.tuning import tuning_db

    entry = tuning_db.lookup_model(tuning_db.load(options.tuning_db), tuning_db.target_key(build.target),
                                   model_sha256)
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


def _static_convs_unsafe(build: Build, module_op) -> bool:
    return (build.target.backend == "cuda" and build.precision == "fp32"
            and graph_lowering.has_convolutions(module_op))


def static_specializations(build: Build, inputs) -> list[Specialization]:
    """The static-shape functions this build adds beside the dynamic one (specialization.py)."""
    if build.request.dynamic_only or not build.target.executable:
        return []
    sizes = build.request.batch_sizes or DEFAULT_STATIC_BATCHES
    return batch_specializations(graph_lowering.ENTRY_FUNCTION, inputs, sizes)


def compile_linalg(model: ImportedModel, ctx, build: Build, log: BuildLog,
                   specs: list[Specialization] = ()) -> CompileResult:
    from inferx_compiler.backend import iree_backend
    from inferx_compiler.passes.infra.pipeline import run_pipeline

    options, target, module_op = build.request, build.target, model.module_op
    with ctx:
        if build.uses_plan:
            graph_lowering.attach_precision_plan(module_op, build.plan.ir_plan())
        run_pipeline(module_op, graph_decision_pipeline(build), "graph", stage="graph")
        if options.emit == "inferx":
            return CompileResult(output=_asm(module_op), build=build)
        run_pipeline(module_op, GRAPH_LOWERING, "graph", stage="graph-lowering")
        log.step("graph-level inferx passes done")
        if options.emit == "linalg":
            return CompileResult(output=_asm(module_op), build=build)
        flops = graph_lowering.functions_flops(module_op)
        bytecode = module_to_bytecode(module_op)
    flags = iree_flags(build) if target.executable else []
    pipeline = {s.name: s.spec for s in describe_pipeline(build)}
    manifest = Manifest(model=model.model_info, target=target.to_json(), compiler=stack_versions(),
                        iree_flags=flags, pipeline=pipeline,
                        inputs=model.inputs, outputs=model.outputs, executable=target.executable,
                        precision_plan=(build.plan.to_json() if build.plan is not None
                                        else {"mode": options.precision, "layers": []}))
    weights = model.weights
    if model.generation is not None:  # a generation model: its entry points are in the record
        manifest.generation, manifest.entry_function = model.generation, ""
    if not target.executable:
        manifest.module = MODULE_MLIR
        manifest.notes.append(f"no executable: {target.route_note}")
        log.warn(f"target '{target.name}': {target.route_note}")
        return CompileResult(output=bytecode_to_text(bytecode), manifest=manifest, weights=weights, build=build)
    if options.emit == "executable-sources":
        text = iree_backend.compile_to_sources_text(
            bytecode, flags, input_pipeline=iree_input_pipeline(build),
            dispatch_pipeline=dispatch_pipeline(build), log=log, build_files=build_files(build))
        return CompileResult(output=text, build=build)
    result, build, flags, fallback = _compile_with_fallback(bytecode, build, flags, log)
    manifest.iree_flags = flags
    if fallback:
        manifest.notes.append(fallback)
    if "iree-input" in manifest.pipeline:
        manifest.pipeline["iree-input"] = iree_input_pipeline(build)
    referenced = model.generation is not None and model.generation["weights"]["mode"] == "reference"
    if result.parameter_keys is not None:  # what the module reads; quantized weights derived
        from inferx_compiler.precision import quantization

        if referenced:  # derived at load time from the folder's tensors (runtime/parameters.py)
            model.generation["weights"]["derived"] = sorted(k for k in result.parameter_keys
                                                            if quantization.parse_key(k) is not None)
        else:
            weights = quantization.materialize(result.parameter_keys, weights)
    manifest.module = MODULE_VMFB
    if manifest.entry_function:
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
                         decisions=result.decisions, weights=weights, plan=build.plan, build=build,
                         members=model.members, functions=result.functions)


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


def _compile_with_fallback(bytecode: bytes, build: Build, flags: list[str], log: BuildLog):
    """IREE with the target's flags. If IREE fails with the target's aggressive dispatch fusion
    (Target.iree_flags: some layer norms then exceed IREE's CPU stack limit), build again without
    it; then without the transient storage passed into the output entries (CPU). If IREE's data
    tiling fails on this model, build again with inferx-isolate-casts (IREE 3.13 cannot data-tile
    a BERT-size layer norm that feeds bf16 matmuls), and if that fails too, without data tiling
    (IREE 3.13 also rejects some bool-masked attention graphs in linalg.pack; not when the build
    forces a data-tiling choice: then the failure stands). Returns (result, the Build and flags
    that stood) and, when the build differs from the one asked for (casts isolated, data tiling
    dropped), a note saying so for the manifest (else None)."""
    from inferx_compiler.backend import iree_backend

    def build_with(b: Build, flags: list[str], note: Optional[str] = None):
        result = iree_backend.compile_module(bytecode, flags, input_pipeline=iree_input_pipeline(b),
                                             dispatch_pipeline=dispatch_pipeline(b), log=log,
                                             build_files=build_files(b))
        return result, b, flags, note

    try:
        return build_with(build, flags)
    except PipelineError as e:
        failure = e
    if AGGRESSIVE_FUSION_FLAG in flags:
        log.step(f"IREE failed with aggressive dispatch fusion ({_first_error(failure)}); building again without it")
        flags = [f for f in flags if f != AGGRESSIVE_FUSION_FLAG]
        try:
            return build_with(build, flags)
        except PipelineError as e:
            failure = e
    plain_entry = build.with_(transients=False)
    if iree_input_pipeline(plain_entry) != iree_input_pipeline(build):
        log.step(f"IREE failed with the transient storage passed in ({_first_error(failure)}); "
                 f"building again without it")
        build = plain_entry
        try:
            return build_with(build, flags)
        except PipelineError as e:
            failure = e
    if DATA_TILING_ON not in flags:
        raise failure
    isolated = build.with_(isolate_casts=True)
    if iree_input_pipeline(isolated) != iree_input_pipeline(build):
        log.warn(f"IREE failed with data tiling ({_first_error(failure)}); building again with inferx-isolate-casts")
        note = (f"inferx-isolate-casts added: IREE failed to data-tile without it ({_first_error(failure)})")
        try:
            return build_with(isolated, flags, note)
        except PipelineError as e:
            failure = e
    if build.data_tiling is not None:
        raise failure
    log.warn(f"IREE failed with data tiling ({_first_error(failure)}); building again without data tiling")
    note = (f"built without data tiling: IREE failed with it ({_first_error(failure)}); matmuls and convolutions "
            f"run IREE's untiled code, which is slower")
    return build_with(build, [f for f in flags if f != DATA_TILING_ON] + ["--iree-opt-data-tiling=false"], note)


def _first_error(e: Exception) -> str:
    lines = str(e).splitlines()
    return lines[1][:160] if len(lines) > 1 else str(e)


def write_result(result: CompileResult, out_path: str, options: CompileOptions = None,
                 log: BuildLog = None) -> None:
    """Write the artifact; with batch sizes, record each bucket's latency (see buckets.py)."""
    from inferx_compiler.artifact import buckets

    # (a generation model's --batch-sizes are its decode batches, compiled already: no buckets)
    sizes = list(options.batch_sizes) if options and not result.manifest.generation else []
    target = result.build.target if result.build else Target.from_json(result.manifest.target)
    if sizes:
        buckets.check_batchable(result.manifest.inputs)
        weight_bytes = int(sum(w.nbytes for w in result.weights.values()))
        result.manifest.batch_buckets = buckets.estimate(target, result.dispatches, weight_bytes, sizes)
    write_artifact(out_path, result.manifest, result.output, result.weights,
                   _report(result), result.members)
    device = buckets.present_device(target) if sizes and options.measure_buckets else None
    if device:
        result.manifest.batch_buckets = buckets.measure(out_path, device, sizes)
        write_artifact(out_path, result.manifest, result.output, result.weights,
                       _report(result), result.members)
        if log:
            table = ", ".join(f"b{b['size']}={b['latency_ms']:.2f}ms" for b in result.manifest.batch_buckets)
            log.step(f"measured bucket latency on {device}: {table}")


def _report(result: CompileResult) -> dict:
    report = {"dispatches": result.dispatches, "decisions": result.decisions, "functions": result.functions}
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
