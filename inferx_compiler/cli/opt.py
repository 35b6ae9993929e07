"""inferx-opt: mlir-opt for inferx passes (and upstream ones), for lit tests and reproducers.

    inferx-opt in.mlir --pass-pipeline='builtin.module(inferx-dispatch-report)' --context=iree
    inferx-opt in.mlir --split-input-file --verify-diagnostics --pass-pipeline=...
"""

from __future__ import annotations

import sys

import click

from inferx_compiler.errors import InferXError
from inferx_compiler.mlir_contexts import GRAPH, IREE, bindings, new_context
from inferx_compiler.passes.analysis.remarks import collecting
from inferx_compiler.cli.common import CONTEXT_SETTINGS, click_main, completion_epilog, existing_file, run_with_options
from inferx_compiler.cli.diagnostics import DiagnosticCollector, check_expected_diagnostics

SPLIT_MARKER = "// -----"
EXAMPLES = """\b
Examples:
  inferx-opt in.mlir --pass-pipeline='builtin.module(inferx-dispatch-report)' --context=iree
  inferx-opt in.mlir --split-input-file --verify-diagnostics --pass-pipeline=...
  inferx-opt --list-passes
"""


@click.command("inferx-opt", context_settings=CONTEXT_SETTINGS,
               epilog=EXAMPLES + "\n" + completion_epilog("inferx-opt"))
@click.argument("input", default="-", required=False, callback=existing_file)
@click.option("--pass-pipeline", default="", help="textual pipeline, e.g. builtin.module(inferx-...)")
@click.option("--context", type=click.Choice(("auto", GRAPH, IREE)), default="auto", show_default=True,
              help="MLIR world to parse in: graph (torch-mlir + inferx dialect) or iree "
                   "(default: from the pipeline's inferx passes, else graph)")
@click.option("--split-input-file", is_flag=True, help=f"split input at '{SPLIT_MARKER}'")
@click.option("--verify-diagnostics", is_flag=True,
              help="check diagnostics against expected-error/warning/remark annotations")
@click.option("--print-ir-after-all", is_flag=True)
@click.option("--allow-unregistered-dialect", is_flag=True)
@click.option("--list-passes", is_flag=True, help="list registered inferx passes and exit")
@click.option("-o", "--output", default="-", show_default=True)
@click.option("--debug", is_flag=True, help="show tracebacks")
def command(**params) -> int:
    """Run inferx and MLIR passes on .mlir input (mlir-opt for inferx passes)."""
    return run_with_options(params, _work)


def main(argv: list[str] | None = None) -> int:
    return click_main(command, argv)


def list_passes() -> str:
    from inferx_compiler.passes.infra.registry import get_all_passes

    lines = []
    for name, factory in sorted(get_all_passes().items()):
        cls = factory()
        opts = " ".join(f"{f.name.replace('_', '-')}={f.default}" for f in cls.option_fields())
        lines.append(f"  {name:32s} [{cls.level}] {cls.summary}" + (f"  {{{opts}}}" if opts else ""))
    return "inferx passes:\n" + "\n".join(lines)


def _work(args) -> int:
    from inferx_compiler.passes.infra.pipeline import parse_pipeline, pipeline_level

    if args.list_passes:
        print(list_passes())
        return 0
    elements = parse_pipeline(args.pass_pipeline) if args.pass_pipeline else []
    level = args.context if args.context != "auto" else pipeline_level(elements, GRAPH)
    source = _read(args.input)
    if isinstance(source, bytes):  # bytecode (reproducers) is never split
        chunks = [source]
    else:
        chunks = source.split(SPLIT_MARKER + "\n") if args.split_input_file else [source]
    outputs, ok = [], True
    for chunk in chunks:
        text, chunk_ok = _process_chunk(chunk, elements, level, args)
        ok &= chunk_ok
        if text is not None:
            outputs.append(text)
    _write(args.output, ("\n" + SPLIT_MARKER + "\n").join(outputs))
    return 0 if ok else 1


def _process_chunk(chunk, elements, level: str, args) -> tuple[str | None, bool]:
    from inferx_compiler.passes.infra.pipeline import build_pass_manager

    b = bindings(level)
    ctx = new_context(level)
    ctx.allow_unregistered_dialects = args.allow_unregistered_dialect
    collector = DiagnosticCollector(ctx, echo=not args.verify_diagnostics)
    output, failed = None, False
    with ctx:
        try:
            module = b.ir.Module.parse(chunk)
            if elements:
                pm = build_pass_manager(elements, b, ctx, print_ir_after_all=args.print_ir_after_all)
                with collecting() as remarks:
                    try:
                        pm.run(module.operation)
                    finally:
                        collector.add_remarks(remarks)
            output = str(module)
        except b.ir.MLIRError as err:
            collector.add_mlir_error(err)
            failed = True
    if args.verify_diagnostics:
        if isinstance(chunk, bytes):
            raise InferXError("--verify-diagnostics needs textual input")
        problems = check_expected_diagnostics(chunk, collector.diagnostics)
        for p in problems:
            print(f"{args.input}: {p}", file=sys.stderr)
        return output, not problems
    if failed:
        collector.echo_all()
    return output, not failed


def _read(path: str):
    data = sys.stdin.buffer.read() if path == "-" else _read_file(path)
    if data.startswith(b"ML\xefR"):
        return data
    return data.decode()


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise InferXError(f"{path}: cannot read input ({e.strerror})") from None


def _write(path: str, text: str) -> None:
    if not text.endswith("\n"):
        text += "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)


if __name__ == "__main__":
    sys.exit(main())
