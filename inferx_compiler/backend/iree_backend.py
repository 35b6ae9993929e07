"""IREE's half, in process through `iree.compiler.api` (no shelling out).

    bytecode ─► input passes (inferx-bind-parameters) ─► IREE up to executable-sources
             ─► dispatch passes (inferx-dispatch-report, ...) ─► IREE from there to vm

A failing IREE phase saves its input and prints the `iree-compile` command that
reproduces it. Files a build hands IREE (transform specs, tuning specs) are "build files":
flags name them as `{build}/NAME` (so the manifest's flags hold no temporary paths); they
are written to a temporary folder for the compile, and into the reproducer's folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field

from inferx_compiler.errors import PipelineError
from inferx_compiler.log import BuildLog
from inferx_compiler.passes.bind_parameters import bound_keys
from inferx_compiler.backend.stream_report import function_report
from inferx_compiler.passes.infra.attributes import IREE_CONFIG_ATTR
from inferx_compiler.passes.infra.build_files import BUILD_DIR  # flags name build files as {build}/NAME
from inferx_compiler.passes.infra.pipeline import run_pipeline, save_reproducer, shorten_targets

DISPATCH_PHASE = "executable-sources"


@dataclass
class IreeResult:
    vmfb: bytes
    dispatches: list[dict] = field(default_factory=list)
    decisions: list[dict] = field(default_factory=list)  # what the passes decided, op by op
    parameter_keys: list[str] | None = None  # what the module reads from the archive (None: unknown)
    functions: dict = field(default_factory=dict)  # per public function: dispatches, copies, in place (stream_report)


class _Compiler:
    """One IREE session with its flags and a diagnostics collector."""

    def __init__(self, flags: list[str], build_files: dict[str, str] | None = None):
        from iree.compiler.api import Session

        from inferx_compiler.backend import iree_global_options

        self.build_files = dict(build_files or {})
        self.build_dir = tempfile.mkdtemp(prefix="inferx-build-")
        _write_files(self.build_dir, self.build_files)
        self.flags = [f.replace(BUILD_DIR, self.build_dir) for f in flags]
        session_flags, global_flags = iree_global_options.split(self.flags)
        iree_global_options.apply(global_flags)
        self.session = Session()
        try:
            self.session.set_flags(*session_flags)
        except ValueError as e:
            raise PipelineError(f"IREE rejected the compiler flags: {e}") from None
        self.diagnostics: list[str] = []
        self.error_locations: list[str] = []  # names in the error diagnostics' locations
        self.error_messages: list[str] = []
        self.decisions: list[dict] = []
        self.parameter_keys: list[str] | None = None
        self.session.context.attach_diagnostic_handler(self._on_diagnostic)

    def close(self) -> None:
        shutil.rmtree(self.build_dir, ignore_errors=True)

    def _on_diagnostic(self, d) -> bool:
        from inferx_compiler.passes.infra.locations import location_names

        self.diagnostics.append(f"{d.severity.name.lower()}: {d.location}: {shorten_targets(d.message)}")
        if d.severity.name == "ERROR":
            self.error_locations.extend(location_names(d.location))
            self.error_messages.append(shorten_targets(d.message))
        return True

    def parse(self, bytecode: bytes):
        from iree.compiler import ir

        with self.session.context:
            return ir.Module.parse(bytecode).operation

    def run_phases(self, module_op, *, compile_from: str | None, compile_to: str | None, stage: str):
        from inferx_compiler.mlir_contexts import module_to_bytecode

        from inferx_compiler.internals import set_compile_phases

        saved = module_to_bytecode(module_op)
        inv = self.session.invocation()
        inv.import_module(module_op)
        set_compile_phases(inv, compile_to, compile_from)
        self.diagnostics.clear()
        self.error_locations.clear()
        self.error_messages.clear()
        if not inv.execute():
            extra = []
            if compile_from:
                extra.append(f"--compile-from={compile_from}")
            if compile_to:
                extra.append(f"--compile-to={compile_to}")
            raise self._failure(stage, saved, extra)
        return inv

    def _failure(self, stage: str, saved: bytes, extra: list[str]) -> PipelineError:
        def command(path: str) -> str:
            repro_dir = os.path.dirname(path)
            _write_files(repro_dir, self.build_files)
            flags = " ".join(f"'{f}'" if "(" in f else f
                             for f in (f.replace(self.build_dir, repro_dir) for f in self.flags + extra))
            return f"iree-compile {flags} {path} -o out.vmfb"

        repro = save_reproducer(saved, stage, command)
        detail = "\n".join(self.diagnostics[-12:]) or "(IREE printed no diagnostics)"
        return PipelineError(f"IREE {stage} failed:\n{detail}", repro,
                             location_names=self.error_locations, stage=f"IREE {stage}",
                             messages=self.error_messages)


def _compile_to_sources(compiler: _Compiler, bytecode: bytes, input_pipeline: str,
                        dispatch_pipeline: str, log: BuildLog):
    from inferx_compiler.passes.analysis.remarks import collecting

    module_op = compiler.parse(bytecode)
    with compiler.session.context, collecting() as remarks:
        run_pipeline(module_op, input_pipeline.replace(BUILD_DIR, compiler.build_dir), "iree", stage="iree-input")
        compiler.parameter_keys = bound_keys(module_op)
    compiler.decisions = [{"pass": r.pass_name, "function": r.function, "node": r.node,
                           "decision": r.message} for r in remarks]
    inv = compiler.run_phases(module_op, compile_from=None, compile_to=DISPATCH_PHASE,
                              stage="compile to executable-sources")
    sources = inv.export_module()
    log.step("IREE: compiled to executable-sources")
    annotate_iree_configurations(compiler, sources)
    with compiler.session.context:
        run_pipeline(sources, dispatch_pipeline.replace(BUILD_DIR, compiler.build_dir), "iree", stage="dispatch")
    return sources




def annotate_iree_configurations(compiler: _Compiler, sources) -> None:
    """Write on each hal.executable the configuration IREE would choose for it
    (`inferx.iree_config = {translation_info, lowering_config}`): IREE runs to
    executable-configurations on a copy; the dispatch passes read what it chose."""
    from iree.compiler import ir

    from inferx_compiler.mlir_contexts import module_to_bytecode

    copy = compiler.parse(module_to_bytecode(sources))
    try:
        inv = compiler.run_phases(copy, compile_from=DISPATCH_PHASE, compile_to="executable-configurations",
                                  stage="IREE's configurations")
    except PipelineError:
        return  # the real compile reports it; the configurations only inform the passes
    chosen = {}
    for op in inv.export_module().regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "hal.executable":
            chosen[ir.StringAttr(op.attributes["sym_name"]).value] = _configuration_of(op)
    for op in sources.regions[0].blocks[0].operations:
        op = op.operation
        name = ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else None
        if op.name == "hal.executable" and chosen.get(name):
            with sources.context:
                op.attributes[IREE_CONFIG_ATTR] = ir.DictAttr.get(
                    {k: ir.Attribute.parse(str(v)) for k, v in chosen[name].items()})


def _configuration_of(executable) -> dict:
    """The translation_info of the executable's function and the lowering_config of its root."""
    from iree.compiler import ir

    found = {}

    def visit(op):
        if op.name == "func.func" and "translation_info" in op.attributes:
            found["translation_info"] = op.attributes["translation_info"]
        if "lowering_config" in op.attributes and "lowering_config" not in found:
            found["lowering_config"] = op.attributes["lowering_config"]
        return ir.WalkResult.ADVANCE

    executable.walk(visit)
    return found


def _write_files(folder: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)


def _in_fresh_process_if_needed(fn):
    """Run `fn` in a fresh interpreter when this process's IREE global options (set once per
    process by an earlier build) differ from this build's; the child's log lines and result (or
    its InferXError) come back as if run here."""
    import functools

    @functools.wraps(fn)
    def wrapper(bytecode, flags, *, log: BuildLog, **kwargs):
        from inferx_compiler.backend import iree_global_options

        clash = iree_global_options.conflicts(flags)
        if not clash:
            return fn(bytecode, flags, log=log, **kwargs)
        log.step(f"IREE in a fresh process: this process has IREE's process-wide "
                 f"{', '.join('--' + c for c in clash)} set otherwise")
        ok, value, lines, warnings = _call_in_fresh_interpreter(fn.__name__, bytecode, flags, kwargs)
        for line in lines:
            if not line.startswith("warning: "):  # (warnings are passed on as warnings below)
                log.step(f"  (child) {line.split('] ', 1)[-1]}")
        for w in warnings:
            log.warn(w)
        if not ok:
            raise value
        return value

    return wrapper


def _call_in_fresh_interpreter(name: str, bytecode: bytes, flags: list[str], kwargs: dict):
    """(ok, result or InferXError, log lines, warnings) of `name` run in a child interpreter,
    arguments and answer pickled through its stdin and stdout (nothing of the caller's __main__
    is imported again)."""
    import pickle
    import subprocess
    import sys

    from inferx_compiler.errors import PipelineError

    # The child sees the caller's sys.path: `python -c` would otherwise put the working directory
    # first, and a source checkout there (whose passes/ is not inferx_compiler/passes/) would
    # shadow the installed package.
    bootstrap = (f"import sys; sys.path[:] = {sys.path!r}; "
                 f"from {__name__} import _child_main; _child_main()")
    proc = subprocess.run([sys.executable, "-c", bootstrap],
                          input=pickle.dumps((name, bytecode, flags, kwargs)), capture_output=True)
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-12:]
        raise PipelineError(f"IREE in a fresh process exited with status {proc.returncode}:\n" + "\n".join(tail))
    return pickle.loads(proc.stdout)


def _child_main() -> None:
    import pickle
    import sys

    from inferx_compiler.errors import InferXError

    name, bytecode, flags, kwargs = pickle.loads(sys.stdin.buffer.read())
    log = BuildLog(quiet=True)
    try:
        answer = True, globals()[name].__wrapped__(bytecode, flags, log=log, **kwargs), log.lines, log.warnings
    except InferXError as e:
        answer = False, e, log.lines, log.warnings
    sys.stdout.buffer.write(pickle.dumps(answer))


@_in_fresh_process_if_needed
def compile_module(bytecode: bytes, flags: list[str], *, input_pipeline: str,
                   dispatch_pipeline: str, log: BuildLog,
                   build_files: dict[str, str] | None = None) -> IreeResult:
    compiler = _Compiler(flags, build_files)
    try:
        sources = _compile_to_sources(compiler, bytecode, input_pipeline, dispatch_pipeline, log)
        dispatches = read_dispatch_report(sources)
        functions = function_report(sources)
        log.step(f"dispatch passes ran on {len(dispatches)} dispatches")
        inv = compiler.run_phases(sources, compile_from=DISPATCH_PHASE, compile_to=None,
                                  stage="compile executable-sources to vm")
        vmfb = _vm_bytes(inv)
    finally:
        compiler.close()
    log.step(f"IREE: wrote the VM module ({len(vmfb) / 2**10:.0f} KiB)")
    return IreeResult(vmfb, dispatches, compiler.decisions, compiler.parameter_keys, functions)


@_in_fresh_process_if_needed
def compile_to_sources_text(bytecode: bytes, flags: list[str], *, input_pipeline: str,
                            dispatch_pipeline: str, log: BuildLog,
                            build_files: dict[str, str] | None = None) -> bytes:
    """Stop after the dispatch passes; return executable-sources IR as text (--emit)."""
    compiler = _Compiler(flags, build_files)
    try:
        sources = _compile_to_sources(compiler, bytecode, input_pipeline, dispatch_pipeline, log)
        return sources.get_asm().encode()
    finally:
        compiler.close()


def _vm_bytes(inv) -> bytes:
    from iree.compiler.api import Output

    out = Output.open_membuffer()
    inv.output_vm_bytecode(out)
    return bytes(out.map_memory())


def read_dispatch_report(module_op) -> list[dict]:
    from iree.compiler import ir

    from inferx_compiler.passes.infra.attributes import CONFIG_ATTR, REPORT_ATTR

    rows = []
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "hal.executable" or REPORT_ATTR not in op.attributes:
            continue
        d = ir.DictAttr(op.attributes[REPORT_ATTR])
        rows.append({
            "dispatch": ir.StringAttr(op.attributes["sym_name"]).value,
            "root": ir.StringAttr(d["root"]).value,
            "kind": ir.StringAttr(d["kind"]).value,
            "element_type": ir.StringAttr(d["element_type"]).value,
            "loops": list(ir.DenseI64ArrayAttr(d["loops"])),
            "flops": ir.IntegerAttr(d["flops"]).value,
            "fused": [ir.StringAttr(a).value for a in ir.ArrayAttr(d["fused"])] if "fused" in d else [],
        })
        if "object_sha256" in d:  # a generated C kernel variant (cpu_extern.py)
            rows[-1]["object_sha256"] = ir.StringAttr(d["object_sha256"]).value
        if IREE_CONFIG_ATTR in op.attributes:
            iree = ir.DictAttr(op.attributes[IREE_CONFIG_ATTR])
            rows[-1]["iree_config"] = {k: str(iree[k]) for k in ("translation_info", "lowering_config")
                                       if k in iree}
        if CONFIG_ATTR in op.attributes:
            c = ir.DictAttr(op.attributes[CONFIG_ATTR])
            rows[-1].update({"config_source": ir.StringAttr(c["source"]).value,
                             "signature": ir.StringAttr(c["signature"]).value,
                             "config": ir.StringAttr(c["config"]).value,
                             "candidates": ir.IntegerAttr(c["candidates"]).value})
    return rows
