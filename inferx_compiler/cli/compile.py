"""inferx-compile: MODEL.onnx --target T -o OUT (artifact, or one stage with --emit)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import sys
import time

from inferx_compiler.build_plan import describe_pipeline, format_pipeline
from inferx_compiler.driver import compile_onnx_file, write_result
from inferx_compiler.options import ATTENTION_CHOICES, EMIT_CHOICES, OPTIONAL_PASSES, PRECISIONS, CompileOptions
from inferx_compiler.errors import InferXError, TargetError
from inferx_compiler.log import BuildLog
from inferx_compiler.targets import all_targets, format_target_table, get_target

from .common import run_cli, run_isolated


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="inferx-compile",
        description="Compile an ONNX model ahead of time for one target into an .ixa artifact.")
    p.add_argument("model", nargs="?", help="path to the .onnx model")
    p.add_argument("--target", help="target name (see --list-targets)")
    p.add_argument("-o", "--output", help="output path (artifact .ixa, or the --emit stage)")
    p.add_argument("--emit", default="artifact", choices=EMIT_CHOICES,
                   help="stop at a stage: torch, linalg, inferx, executable-sources (text MLIR), "
                        "vmfb (IREE module alone, weights inlined), artifact (default)")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS,
                   help="contraction precision: fp32, fp16/bf16 (f32 accumulation), int8/int4 (CPU: "
                        "integer weights, int8 activations quantized per row at run time), auto (per "
                        "layer, the cheapest within --accuracy-budget), fp8 (refused: IREE 3.13 cannot "
                        "lower it)")
    p.add_argument("--calibration", metavar="DATA.npz|DIR",
                   help="calibration samples: an .npz keyed by input name (samples along the first dim) "
                        "or a directory of them; measures each layer's sensitivity")
    p.add_argument("--accuracy-budget", type=float, metavar="ERR",
                   help="largest model error allowed (relative L2 against fp32; auto's default 0.01)")
    p.add_argument("--group-size", type=int, default=128, metavar="G",
                   help="int4: weights per scale along the reduction (default 128)")
    p.add_argument("--precision-plan", metavar="PLAN.json",
                   help="build with this precision plan (from --emit-plan): the same plan gives the same artifact")
    p.add_argument("--emit-plan", metavar="FILE",
                   help="write the precision plan used as JSON (alone, without building, when -o is not given)")
    p.add_argument("--plan-chart", metavar="FILE.png",
                   help="draw precision and measured sensitivity per layer (needs matplotlib)")
    p.add_argument("--iree-flag", action="append", default=[], metavar="FLAG",
                   help="extra flag passed to IREE (repeatable; recorded in the manifest)")
    p.add_argument("--batch-sizes", metavar="1,2,4,8",
                   help="batch buckets to record (latency measured on the build machine when it has "
                        "the target's device, estimated otherwise); the batch dim stays dynamic")
    p.add_argument("--dynamic-only", action="store_true",
                   help="compile only the dynamic-shape function (by default a static-shape function "
                        "is added per batch size: batch 1, or each of --batch-sizes)")
    p.add_argument("--conv-algorithms", default="auto", metavar="auto|none|LIST",
                   help="convolution algorithms inferx-conv-strategy may choose on CPU targets: auto "
                        "(the target's rule table), none (IREE's default lowering), or a comma-separated "
                        "subset of matmul,winograd,im2col")
    p.add_argument("--fuse-attention", default="auto", choices=ATTENTION_CHOICES,
                   help="scaled dot-product attention chains into IREE's fused attention op: auto (GPU "
                        "targets), on (any target), off")
    p.add_argument("--disable-pass", action="append", default=[], metavar="NAME",
                   help="leave one of the optimizing passes out of the build (repeatable), to measure "
                        f"what it is worth: {', '.join(OPTIONAL_PASSES)}")
    p.add_argument("--tune", action="store_true",
                   help="measure dispatch configurations on this machine (cpu target) and keep the "
                        "winners in the tuning database (--tuning-db, default OUTPUT.tuning.json), "
                        "then build with them")
    p.add_argument("--tuning-db", metavar="FILE",
                   help="build with the measured configurations in this tuning database")
    p.add_argument("--explain", action="store_true",
                   help="print, per dispatch, the root op, shapes, fused ops and the chosen configuration "
                        "with its source (tuned / IREE), and each pass decision per ONNX node")
    p.add_argument("--no-measure", action="store_true",
                   help="with --batch-sizes: record estimates only (keeps the artifact reproducible)")
    p.add_argument("--list-targets", action="store_true", help="print the target table and exit")
    p.add_argument("--dump-pipeline", action="store_true",
                   help="print every stage of the pipeline this build runs and exit")
    p.add_argument("--report", metavar="FILE",
                   help="write build statistics (time, peak RSS) and, per dispatch, its root op, loops, "
                        "FLOPs, fused ops and configuration with its source, and the passes' decisions, as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.model and not args.list_targets and not args.dump_pipeline:
        return run_isolated("inferx_compiler.cli.compile", argv, lambda: run_cli(lambda: _work(args), args.debug))
    return run_cli(lambda: _work(args), args.debug)


def _work(args) -> int:
    if args.list_targets:
        print(format_target_table())
        return 0
    if not args.target:
        raise TargetError(f"--target is required; valid targets: {', '.join(all_targets())}")
    from inferx_compiler.buckets import parse_batch_sizes

    if args.tuning_db and not args.tune and not os.path.exists(args.tuning_db):
        raise InferXError(f"--tuning-db {args.tuning_db}: no such file (write one with --tune)")
    options = CompileOptions(target=args.target, emit=args.emit, precision=args.precision,
                             extra_iree_flags=tuple(args.iree_flag),
                             batch_sizes=tuple(parse_batch_sizes(args.batch_sizes)) if args.batch_sizes else (),
                             measure_buckets=not args.no_measure, dynamic_only=args.dynamic_only,
                             conv_algorithms=_conv_algorithms(args.conv_algorithms),
                             tuning_db=args.tuning_db, fuse_attention=args.fuse_attention,
                             disabled_passes=tuple(args.disable_pass), group_size=args.group_size,
                             calibration=args.calibration, accuracy_budget=args.accuracy_budget,
                             precision_plan_file=args.precision_plan)
    get_target(args.target)
    if args.dump_pipeline:
        print(format_pipeline(describe_pipeline(options)))
        return 0
    if not args.model:
        raise InferXError("no model given: inferx-compile MODEL.onnx --target T -o OUT")
    log = BuildLog(quiet=args.quiet)
    if (args.emit_plan or args.plan_chart) and not args.output:
        return _plan_only(args, options, log)
    out = args.output or _default_output(args.model, args.emit)
    t0 = time.monotonic()
    if args.tune:
        from inferx_compiler.tuning import tune

        db = args.tuning_db or os.path.splitext(out)[0] + ".tuning.json"
        tune(args.model, options, log, db)
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
    seconds = time.monotonic() - t0
    stats = _stats(args.model, out, seconds)
    log.step(f"wrote {out} ({stats['output_bytes'] / 2**20:.2f} MiB) in {seconds:.1f}s, "
             f"peak RSS {stats['peak_rss_mib']:.0f} MiB "
             f"({stats['peak_rss_over_model']:.1f}x the model file)")
    if args.report:
        report = dict(stats, dispatches=result.dispatches, decisions=result.decisions)
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    return 0


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
        from inferx_compiler.precision_plan import write_chart

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


def _stats(model: str, out: str, seconds: float) -> dict:
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model_bytes = os.path.getsize(model)
    return {
        "compile_seconds": round(seconds, 3),
        "peak_rss_mib": peak_kib / 1024,
        "model_bytes": model_bytes,
        "peak_rss_over_model": (peak_kib * 1024) / max(model_bytes, 1),
        "output_bytes": os.path.getsize(out) if out != "-" and os.path.exists(out) else 0,
    }


if __name__ == "__main__":
    sys.exit(main())
