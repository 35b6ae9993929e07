"""inferx-compile: MODEL.onnx --target T -o OUT (artifact, or one stage with --emit)."""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import sys
import time

import click

from inferx_compiler.build_plan import describe_pipeline, format_pipeline
from inferx_compiler.driver import compile_onnx_file, write_result
from inferx_compiler.options import ATTENTION_CHOICES, EMIT_CHOICES, PRECISIONS, CompileOptions
from inferx_compiler.passes.infra.registry import disableable
from inferx_compiler.errors import InferXError, TargetError
from inferx_compiler.log import BuildLog
from inferx_compiler.build import resolve_build
from inferx_compiler.frontend.llm.source import is_llm_source
from inferx_compiler.targets import all_targets, format_target_table, get_target
from inferx_compiler.cli.common import (CONTEXT_SETTINGS, click_main, command_argv, completion_epilog, existing_file,
                     existing_path, options_namespace, run_cli, run_isolated)


EXAMPLES = """\b
Examples:
  inferx-compile model.onnx --target a100 -o model.ixa
  inferx-compile model.onnx --target x86-avx2 --precision int8 --calibration samples.npz -o model.ixa
  inferx-compile model.onnx --target x86-avx2 --batch-sizes 1,4,16 -o model.ixa
  inferx-compile model.onnx --target h200 --check           will it compile? (no code generation)
  inferx-compile model.onnx --target x86-avx2 --cache-dir ~/.cache/inferx -o model.ixa
  inferx-compile --list-targets
"""


DEFAULT_CHECK_TARGET = "cpu"  # --check without --target: will it build for this machine?


def _model_path(ctx, param, value):
    """An ONNX file, or a generation model: a Hugging Face folder (config.json) or a .gguf file."""
    if value is not None and os.path.isdir(value) and not is_llm_source(value):
        raise click.BadParameter(f"{value}: a folder without config.json (a Hugging Face model folder has one); "
                                 f"give an .onnx or .gguf file or a model folder", ctx=ctx, param=param)
    if value is not None and not os.path.isdir(value):
        return existing_file(ctx, param, value)
    return value


def _target_name(ctx, param, value):
    if value is not None:
        try:
            get_target(value)
        except TargetError as e:
            raise click.BadParameter(str(e), ctx=ctx, param=param) from None
    return value


def _batch_sizes(ctx, param, value):
    if value is None:
        return ()
    from inferx_compiler.artifact.buckets import parse_batch_sizes

    try:
        return tuple(parse_batch_sizes(value))
    except InferXError as e:
        raise click.BadParameter(str(e), ctx=ctx, param=param) from None


def _named_lists(ctx, param, values, convert, what: str, valid=lambda xs: True) -> tuple:
    """NAME=X0,X1,... options (repeatable, one per name) -> ((name, (x0, x1, ...)), ...)."""
    parsed = {}
    for text in values:
        name, _, items = text.partition("=")
        try:
            xs = tuple(convert(x) for x in items.split(","))
        except ValueError:
            xs = ()
        if not name or not xs or not valid(xs):
            raise click.BadParameter(f"expected NAME={what}, got '{text}'", ctx=ctx, param=param)
        if name in parsed:
            raise click.BadParameter(f"input '{name}' given twice", ctx=ctx, param=param)
        parsed[name] = xs
    return tuple(parsed.items())


def _input_shapes(ctx, param, values) -> tuple:
    return _named_lists(ctx, param, values, int, "D0,D1,... (whole numbers)", lambda dims: min(dims) >= 0)


def _input_values(ctx, param, values) -> tuple:
    return _named_lists(ctx, param, values, float, "V0,V1,... (numbers)")


def _optional_passes(ctx, param, value):
    valid = sorted(disableable())
    unknown = [p for p in value if p not in valid]
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: not a pass that can be left out; valid: "
                                 f"{', '.join(valid)}", ctx=ctx, param=param)
    return value


def _conv_algorithms_option(ctx, param, value):
    try:
        return _conv_algorithms(value)
    except TargetError as e:
        raise click.BadParameter(str(e), ctx=ctx, param=param) from None


@click.command("inferx-compile", context_settings=CONTEXT_SETTINGS,
               epilog=EXAMPLES + "\n" + completion_epilog("inferx-compile"))
@click.argument("model", required=False, callback=_model_path)
@click.option("--target", callback=_target_name, help="target name (see --list-targets)",
              shell_complete=lambda ctx, param, incomplete: [t for t in all_targets() if t.startswith(incomplete)])
@click.option("-o", "--output", help="output path (artifact .ixa, or the --emit stage)")
@click.option("--emit", default="artifact", show_default=True, type=click.Choice(EMIT_CHOICES),
              help="stop at a stage: torch, linalg, inferx, executable-sources (text MLIR), "
                   "vmfb (IREE module alone, weights inlined), artifact")
@click.option("--check", is_flag=True,
              help="pre-flight: import and lower up to IREE's dispatch formation, without code "
                   "generation, and report every problem with the ONNX node it comes from; exit 0 "
                   "when the model will compile (for --target, default cpu: this machine)")
@click.option("--json", "as_json", is_flag=True, help="with --check: print the report as JSON")
@click.option("--precision", default="fp32", show_default=True, type=click.Choice(PRECISIONS),
              help="contraction precision: fp32, fp16/bf16 (f32 accumulation), int8/int4 (CPU: "
                   "integer weights, int8 activations quantized per row at run time), auto (per "
                   "layer, the cheapest within --accuracy-budget), fp8 (refused: IREE 3.13 cannot "
                   "lower it)")
@click.option("--calibration", metavar="DATA.npz|DIR", callback=existing_path,
              help="calibration samples: an .npz keyed by input name (samples along the first dim) "
                   "or a directory of them; measures each layer's sensitivity")
@click.option("--accuracy-budget", type=click.FloatRange(min=0, min_open=True), metavar="ERR",
              help="largest model error allowed (relative L2 against fp32; auto's default 0.01)")
@click.option("--group-size", type=click.IntRange(min=1), default=128, show_default=True, metavar="G",
              help="int4: weights per scale along the reduction")
@click.option("--precision-plan", metavar="PLAN.json", callback=existing_file,
              help="build with this precision plan (from --emit-plan): the same plan gives the same artifact")
@click.option("--emit-plan", metavar="FILE",
              help="write the precision plan used as JSON (alone, without building, when -o is not given)")
@click.option("--plan-chart", metavar="FILE.png",
              help="draw precision and measured sensitivity per layer (needs matplotlib)")
@click.option("--iree-flag", multiple=True, metavar="FLAG",
              help="extra flag passed to IREE (repeatable; recorded in the manifest)")
@click.option("--batch-sizes", metavar="1,2,4,8", callback=_batch_sizes,
              help="batch buckets to record (latency measured on the build machine when it has "
                   "the target's device, estimated otherwise); the batch dim stays dynamic")
@click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=D0,D1,...",
              callback=lambda ctx, param, value: _input_shapes(ctx, param, value),
              help="compile with this input's shape fixed (repeatable, one per input): dynamic dims "
                   "IREE cannot keep dynamic (convolutions over dynamic image sizes) become static")
@click.option("--input-value", "input_values", multiple=True, metavar="NAME=V0,V1,...",
              callback=lambda ctx, param, value: _input_values(ctx, param, value),
              help="compile with this input fixed to these values (repeatable): control flow and "
                   "shapes that depend on it (a sample-rate input choosing a branch) are resolved at "
                   "compile time; the artifact no longer takes the input, and refuses other values")
@click.option("--dynamic-only", is_flag=True,
              help="compile only the dynamic-shape function (by default a static-shape function "
                   "is added per batch size: batch 1, or each of --batch-sizes)")
@click.option("--conv-algorithms", default="auto", show_default=True, metavar="auto|none|LIST",
              callback=_conv_algorithms_option,
              help="convolution algorithms inferx-conv-strategy may choose on CPU targets: auto "
                   "(the target's rule table), none (IREE's default lowering), or a comma-separated "
                   "subset of matmul,kernel,nchwc,winograd,im2col,s2d")
@click.option("--fuse-attention", default="auto", show_default=True, type=click.Choice(ATTENTION_CHOICES),
              help="scaled dot-product attention chains into IREE's fused attention op: auto (GPU "
                   "targets), on (any target), off")
@click.option("--disable-pass", multiple=True, metavar="NAME", callback=_optional_passes,
              shell_complete=lambda ctx, param, incomplete: [p for p in sorted(disableable()) if p.startswith(incomplete)],
              help="leave one of the optimizing passes (or inferx-hopper-epilogue / inferx-hopper-group, "
                   "the epilogue fusion and sibling grouping of inferx-hopper-matmul) out of the build "
                   "(repeatable), to measure what it is worth")
@click.option("--tune", is_flag=True,
              help="measure configurations on this machine and keep the winners in the tuning "
                   "database (--tuning-db, default OUTPUT.tuning.json), then build with them: "
                   "dispatch configurations for --target cpu, the Hopper matmul kernels' tiles "
                   "for h100/h200 (this machine must have that GPU; else see --tune-prepare)")
@click.option("--tune-prepare", metavar="DIR",
              help="Hopper targets: compile the kernel candidates --tune would measure into DIR "
                   "and stop; measure them on the GPU host with `inferx-tune DIR --tuning-db DB`")
@click.option("--tuning-db", metavar="FILE",
              help="build with the measured configurations in this tuning database")
@click.option("--cache-dir", metavar="DIR", envvar="INFERX_CACHE_DIR", show_envvar=True,
              help="build cache: an artifact built before from the same model, flags, target, "
                   "tuning database and compiler stack is copied from here instead of rebuilt "
                   "(byte-identical); new builds are stored")
@click.option("--no-cache", is_flag=True,
              help="build afresh even when --cache-dir or INFERX_CACHE_DIR names a cache (e.g. to check "
                   "that a build reproduces the cached bytes)")
@click.option("--explain", is_flag=True,
              help="print, per dispatch, the root op, shapes, fused ops and the chosen configuration "
                   "with its source (tuned / IREE), and each pass decision per ONNX node")
@click.option("--no-measure", is_flag=True,
              help="with --batch-sizes: record estimates only (keeps the artifact reproducible)")
@click.option("--prefill-lengths", metavar="32,128", callback=_batch_sizes,
              help="generation models: the prompt chunk lengths prefill entry points take (default 32,128)")
@click.option("--prefill-batch-sizes", metavar="1,8", callback=_batch_sizes,
              help="generation models: the batches prefill entry points take (default: --batch-sizes; a "
                   "server's large decode batches need no prefill of that size)")
@click.option("--max-seq", type=click.IntRange(min=2), default=512, show_default=True, metavar="N",
              help="generation models: the most positions a sequence holds (prompt + new tokens)")
@click.option("--kv-block-size", type=click.IntRange(min=1), default=16, show_default=True, metavar="N",
              help="generation models: positions per block of the paged KV cache")
@click.option("--kv-blocks", type=click.IntRange(min=2), default=None, metavar="N",
              help="generation models: blocks in the KV cache, the scratch block included (default: every "
                   "sequence of the largest batch at --max-seq; more lets a server keep more prefixes)")
@click.option("--kv-cache-dtype", default="model", show_default=True,
              type=click.Choice(("model", "fp32", "fp16", "bf16", "int8", "fp8")),
              help="generation models: the KV cache's element type (model: the --precision of the weights)")
@click.option("--weights", "weights_mode", default="copy", show_default=True, type=click.Choice(("copy", "reference")),
              help="generation models: copy the weights into the artifact, or reference the model folder's "
                   "safetensors files (read in place at load time: inferx-generate --weights DIR)")
@click.option("--greedy-only", is_flag=True,
              help="generation models: greedy entry points only (no sampler compiled: faster builds; "
                   "sampling with a temperature is then refused)")
@click.option("--with-logits", is_flag=True,
              help="generation models: also entry points that return logits instead of sampled ids "
                   "(for comparisons against a reference)")
@click.option("--list-targets", is_flag=True, help="print the target table and exit")
@click.option("--dump-pipeline", is_flag=True,
              help="print every stage of the pipeline this build runs and exit")
@click.option("--report", metavar="FILE",
              help="write build statistics (time, peak RSS) and, per dispatch, its root op, loops, "
                   "FLOPs, fused ops and configuration with its source, and the passes' decisions, as JSON")
@click.option("-q", "--quiet", is_flag=True, help="no progress lines")
@click.option("--debug", is_flag=True, help="show tracebacks")
def command(**params) -> int:
    """Compile an ONNX model ahead of time for one target into an .ixa artifact."""
    args = options_namespace(params)
    _check_usage(args)
    if args.model and not args.list_targets and not args.dump_pipeline:
        return run_isolated("inferx_compiler.cli.compile", command_argv(), lambda: run_cli(lambda: _work(args), args.debug))
    return run_cli(lambda: _work(args), args.debug)


def main(argv: list[str] | None = None) -> int:
    return click_main(command, argv)


def _check_usage(args) -> None:
    """Option combinations that cannot work, refused before any work starts."""
    if args.list_targets:
        return
    if not args.model and not args.dump_pipeline:
        raise click.UsageError("Missing argument 'MODEL' (the .onnx model to compile).")
    if not args.target and args.check:
        args.target = DEFAULT_CHECK_TARGET
    if not args.target:
        raise click.UsageError(f"Missing option '--target'. Valid targets: {', '.join(all_targets())} "
                               "(inferx-compile --list-targets describes them).")
    if args.as_json and not args.check:
        raise click.UsageError("--json goes with --check.")
    if args.check and (args.tune or args.tune_prepare or args.emit_plan or args.plan_chart):
        raise click.UsageError("--check builds nothing: drop --tune, --tune-prepare, --emit-plan and --plan-chart.")
    if args.tune and args.tune_prepare:
        raise click.UsageError("--tune measures here; --tune-prepare prepares the measurements for another "
                               "machine: give one of them.")
    if args.tuning_db and not args.tune and not os.path.exists(args.tuning_db):
        raise click.BadParameter(f"{args.tuning_db}: no such file (write one with --tune)",
                                 param_hint="'--tuning-db'")
    if (args.input_shapes or args.input_values) and args.model:
        _check_input_shapes(args.model, dict(args.input_shapes), dict(args.input_values))
    if args.batch_sizes and args.model and not args.input_shapes and not is_llm_source(args.model):
        _check_batch_dim(args.model)


def _check_input_shapes(model: str, shapes: dict, values: dict) -> None:
    """--input-shape and --input-value name real inputs with their rank and size: checked on the
    ONNX graph before any work."""
    import onnx

    from inferx_compiler.errors import ModelLoadError
    from inferx_compiler.frontend.onnx_import import fix_input_shapes, fix_input_values

    try:
        proto = onnx.load(model, load_external_data=False)
    except Exception:
        return  # the compile itself reports an unreadable model
    for flag, fix, given in (("--input-shape", fix_input_shapes, shapes), ("--input-value", fix_input_values, values)):
        try:
            fix(proto, given, os.path.basename(model))
        except ModelLoadError as e:
            raise click.BadParameter(str(e).removeprefix(flag + " "), param_hint=f"'{flag}'") from None


def _check_batch_dim(model: str) -> None:
    """--batch-sizes needs one dynamic batch dim leading every input: say so now, not after
    the whole compile."""
    from inferx_compiler.artifact.buckets import check_batchable
    from inferx_compiler.frontend.onnx_import import declared_inputs

    try:
        inputs = declared_inputs(model)
    except InferXError:
        return  # the compile itself reports an unreadable model
    try:
        check_batchable(inputs)
    except InferXError as e:
        raise click.BadParameter(f"{model}: {e}; re-export the model with a dynamic batch axis or "
                                 f"drop --batch-sizes", param_hint="'--batch-sizes'") from None


def _work(args) -> int:
    if args.list_targets:
        print(format_target_table())
        return 0
    options = CompileOptions(target=args.target, emit=args.emit, precision=args.precision,
                             extra_iree_flags=tuple(args.iree_flag),
                             batch_sizes=args.batch_sizes, input_shapes=args.input_shapes,
                             input_values=args.input_values,
                             measure_buckets=not args.no_measure, dynamic_only=args.dynamic_only,
                             conv_algorithms=args.conv_algorithms,
                             tuning_db=args.tuning_db, fuse_attention=args.fuse_attention,
                             disabled_passes=tuple(args.disable_pass), group_size=args.group_size,
                             calibration=args.calibration, accuracy_budget=args.accuracy_budget,
                             precision_plan_file=args.precision_plan)
    build = resolve_build(options)  # the request checked and its target resolved, before any work
    if args.dump_pipeline:
        print(format_pipeline(describe_pipeline(build)))
        return 0
    if not args.model:
        raise InferXError("no model given: inferx-compile MODEL.onnx --target T -o OUT")
    log = BuildLog(quiet=args.quiet)
    if is_llm_source(args.model):
        return _work_llm(args, options, log)
    if args.check:
        return _check(args, options, log)
    if (args.emit_plan or args.plan_chart) and not args.output:
        return _plan_only(args, options, log)
    if args.tune_prepare:
        return _tune_prepare(args, options, log)
    out = args.output or _default_output(args.model, args.emit)
    t0 = time.monotonic()
    cached = _cached_build(args, options, log)
    if cached is not None and cached.fetch(out):
        return _finish(args, out, t0, log, cached.report(), source=f"build cache {cached.key[:16]}")
    if args.tune:
        db = args.tuning_db or os.path.splitext(out)[0] + ".tuning.json"
        _tune(args, build, log, db)
        options = dataclasses.replace(options, tuning_db=db)
    result = compile_onnx_file(args.model, options, log)
    if result.plan is not None:
        _write_plan_files(result.plan, args, log)
    if args.explain:
        from inferx_compiler.explain import format_explanation

        print(format_explanation(result))
    if args.emit == "artifact":
        write_result(result, out, options, log)
    else:
        _write_bytes(out, result.output)
    if cached is not None:
        cached.store(out)
    return _finish(args, out, t0, log, {"dispatches": result.dispatches, "decisions": result.decisions})


def _work_llm(args, options: CompileOptions, log: BuildLog) -> int:
    """A generation model (a Hugging Face folder or a GGUF file): prefill and decode entry points."""
    from inferx_compiler.driver import compile_llm
    from inferx_compiler.frontend.llm.frontend import GenerationShapes

    refused = [flag for flag, given in (("--check", args.check), ("--tune", args.tune),
                                        ("--tune-prepare", args.tune_prepare), ("--emit-plan", args.emit_plan),
                                        ("--input-shape", args.input_shapes), ("--input-value", args.input_values),
                                        ("--calibration", args.calibration)) if given]
    if refused:
        raise InferXError(f"{', '.join(refused)}: not for generation models ({args.model})")
    _check_kv_cache_dtype(args.kv_cache_dtype, args.precision)
    shapes = GenerationShapes(prefill_lengths=tuple(args.prefill_lengths or (32, 128)),
                              batch_sizes=tuple(args.batch_sizes or (1,)), max_seq=args.max_seq,
                              logits=args.with_logits, sampling=not args.greedy_only,
                              kv_block_size=args.kv_block_size, kv_blocks=args.kv_blocks,
                              prefill_batch_sizes=args.prefill_batch_sizes, kv_int8=args.kv_cache_dtype == "int8")
    out = args.output or _default_output(args.model.rstrip("/"), args.emit)
    t0 = time.monotonic()
    result = compile_llm(args.model, options, shapes, log, weights=args.weights_mode)
    if args.emit == "artifact":
        write_result(result, out, options, log)
    else:
        _write_bytes(out, result.output)
    return _finish(args, out, t0, log, {"dispatches": result.dispatches, "decisions": result.decisions})


def _check_kv_cache_dtype(kv: str, precision: str) -> None:
    """The cache is in the model's float dtype (`model`, or naming it) or int8; others are refused."""
    if kv == "fp8":
        raise InferXError("--kv-cache-dtype fp8: not built: IREE 3.13 does not lower float8 (f8E4M3FN) to NVPTX or "
                          "to CPU code (iree-org/iree#24625); int8 halves an fp16 cache as well")
    model = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16"}.get(precision, "model")
    if kv not in ("model", "int8", model):
        raise InferXError(f"--kv-cache-dtype {kv}: the cache is in the model's dtype (--precision {precision}: "
                          f"--kv-cache-dtype model) or int8; a float cache of another type is not built")


def _tune(args, build, log: BuildLog, db: str) -> None:
    """--tune: the CPU dispatch configurations (tuning.py) or the Hopper kernels' (cuda_tuning.py)."""
    options = build.request
    if build.target.backend == "cuda":
        import tempfile

        from inferx_compiler.tuning import cuda_tuning

        with tempfile.TemporaryDirectory(prefix="inferx-tune-") as work:
            cuda_tuning.tune(args.model, options, log, db, work)
        return
    from inferx_compiler.tuning.cpu_tuning import tune

    tune(args.model, options, log, db)


def _tune_prepare(args, options: CompileOptions, log: BuildLog) -> int:
    from inferx_compiler.tuning import cuda_tuning

    forms = cuda_tuning.prepare(args.model, options, log, args.tune_prepare)
    print(f"prepared {len(forms)} matmul form(s) in {args.tune_prepare}; on the GPU host: "
          f"inferx-tune {args.tune_prepare} --tuning-db DB, then build with --tuning-db DB", file=sys.stderr)
    return 0


def _finish(args, out: str, t0: float, log: BuildLog, report: dict, source: str = "") -> int:
    seconds = time.monotonic() - t0
    stats = _stats(args.model, out, seconds)
    log.step(f"wrote {out} ({stats['output_bytes'] / 2**20:.2f} MiB){' from the ' + source if source else ''} "
             f"in {seconds:.1f}s, peak RSS {_format_rss(stats)}")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(dict(stats, dispatches=report.get("dispatches", []), decisions=report.get("decisions", []),
                           cache=source or None), f, indent=1, sort_keys=True)
    return 0


class _CachedBuild:
    """This build's entry in the build cache (build_cache.py)."""

    def __init__(self, cache, key: str, inputs: dict, log: BuildLog):
        self.cache, self.key, self.inputs, self.log = cache, key, inputs, log

    def fetch(self, out: str) -> bool:
        if self.cache.fetch(self.key, out):
            return True
        self.log.step(f"build cache: miss ({self.key[:16]})")
        return False

    def report(self) -> dict:
        from inferx_compiler.artifact.archive import Artifact

        return Artifact(str(self.cache.entry(self.key))).report

    def store(self, out: str) -> None:
        path = self.cache.store(self.key, out, self.inputs)
        self.log.step(f"build cache: stored as {path}")


def _cached_build(args, options: CompileOptions, log: BuildLog):
    """The cache entry this build reads and writes, or None (no --cache-dir, or a build whose
    bytes are not reproducible or that must run for what it prints)."""
    if not args.cache_dir or args.no_cache:
        return None
    reason = _not_cacheable(args, options)
    if reason:
        log.step(f"build cache: not used ({reason})")
        return None
    from inferx_compiler.artifact.build_cache import BuildCache, cache_key, key_inputs

    inputs = key_inputs(args.model, options)
    return _CachedBuild(BuildCache(args.cache_dir), cache_key(inputs), inputs, log)


def _not_cacheable(args, options: CompileOptions) -> str:
    if args.emit != "artifact":
        return f"--emit {args.emit}"
    if args.tune:
        return "--tune measures on this machine"
    if args.explain or args.emit_plan or args.plan_chart:
        return "--explain, --emit-plan and --plan-chart print what the build decides"
    if options.batch_sizes and options.measure_buckets:
        from inferx_compiler.artifact.buckets import present_device

        if present_device(resolve_build(options).target):
            return "bucket latencies are measured on this machine; add --no-measure to cache"
    return ""


def _check(args, options: CompileOptions, log: BuildLog) -> int:
    """--check: every problem, with its stage and ONNX node; exit 0 only when it will compile."""
    from inferx_compiler.preflight import check_onnx_file

    report = check_onnx_file(args.model, options, log)
    print(json.dumps(report.to_json(), indent=1, sort_keys=True) if args.as_json else report.format())
    return 0 if report.ok else 1


def _plan_only(args, options: CompileOptions, log: BuildLog) -> int:
    """--emit-plan / --plan-chart without -o: decide the plan, write it, build nothing."""
    from inferx_compiler.driver import plan_onnx_file

    _write_plan_files(plan_onnx_file(args.model, options, log), args, log)
    return 0


def _write_plan_files(plan, args, log: BuildLog) -> None:
    if args.emit_plan:
        with open(args.emit_plan, "w") as f:
            json.dump(plan.to_json(), f, indent=1, sort_keys=True)
            f.write("\n")
        log.step(f"wrote the precision plan to {args.emit_plan}")
    if args.plan_chart:
        from inferx_compiler.precision.precision_plan import write_chart

        write_chart(plan, args.plan_chart)
        log.step(f"wrote the precision chart to {args.plan_chart}")


def _conv_algorithms(text: str) -> str:
    from inferx_compiler.passes.conv_strategy import ALGORITHMS

    if text in ("auto", "none"):
        return text
    unknown = [a for a in text.split(",") if a not in ALGORITHMS]
    if unknown or not text:
        raise TargetError(f"--conv-algorithms: unknown algorithm(s) {', '.join(unknown) or repr(text)}; "
                          f"valid: auto, none, or a comma-separated subset of {','.join(ALGORITHMS)}")
    return text


def _default_output(model: str, emit: str) -> str:
    stem = os.path.splitext(os.path.basename(model))[0]
    ext = {"artifact": ".ixa", "vmfb": ".vmfb"}.get(emit, f".{emit}.mlir")
    return stem + ext


def _write_bytes(path: str, data: bytes) -> None:
    if path == "-":
        sys.stdout.buffer.write(data)
        return
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


# Below this model size the compiler's own footprint (~300 MiB) dominates peak RSS and a
# ratio to the model would say nothing.
RSS_RATIO_MIN_MODEL_BYTES = 64 * 2**20


def _format_rss(stats: dict) -> str:
    text = f"{stats['peak_rss_mib']:.0f} MiB"
    if stats["model_bytes"] >= RSS_RATIO_MIN_MODEL_BYTES:
        text += f" ({stats['peak_rss_over_model']:.1f}x the model and its weights)"
    return text


def _model_bytes(model: str) -> int:
    """The model file plus the external weight files beside it that it names (a model folder:
    every file in it)."""
    from inferx_compiler.frontend.onnx_import import external_data_files

    if os.path.isdir(model):
        return sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model)
                   if os.path.isfile(os.path.join(model, f)))
    if model.endswith(".gguf"):
        return os.path.getsize(model)
    return os.path.getsize(model) + sum(os.path.getsize(p) for p in external_data_files(model))


def _stats(model: str, out: str, seconds: float) -> dict:
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model_bytes = _model_bytes(model)
    return {
        "compile_seconds": round(seconds, 3),
        "peak_rss_mib": peak_kib / 1024,
        "model_bytes": model_bytes,
        "peak_rss_over_model": (peak_kib * 1024) / max(model_bytes, 1),
        "output_bytes": os.path.getsize(out) if out != "-" and os.path.exists(out) else 0,
    }


if __name__ == "__main__":
    sys.exit(main())
