#!/usr/bin/env python3
"""ONNX backend-test conformance harness for inferx-compiler (and plain IREE as a peer).

Cases come from the `onnx` package itself:

  node               onnx.backend.test.case.node.collect_testcases(None): one-op models,
                     inputs and expected outputs in memory
  pytorch-converted  onnx/backend/test/data/<suite>/<case>/model.onnx + test_data_set_*/
  pytorch-operator   (input_*.pb, output_*.pb)
  simple
  real               the 9 "real" model tests: data.json points at the small models under
                     onnx/backend/test/data/light/ (light_<name>.onnx), fed with onnx's
                     deterministic dummy input (arange / n) and compared with
                     light_<name>_output_0.pb, as onnx's own backend runner does

Case ids are "<suite>/<test name>", e.g. "node/test_add", "simple/test_sign_model".

Each case is compiled for target cpu and run, then classified as

  pass | import-fail | compile-fail | run-fail | wrong-result

  import-fail   errors before linalg: ModelLoadError, UnsupportedOpsError, ONNX import,
                onnx-to-torch / torch-to-linalg (plain IREE: iree-import-onnx failed)
  compile-fail  inferx graph passes and the IREE stages (plain IREE: iree-compile failed)
  run-fail      loading the module, feeding inputs, running it
  wrong-result  ran, but an output differs (count, shape, dtype or values)

A timeout or a crashed worker is reported under the stage it happened in, with the reason
"timeout (Ns)" or "crash (signal N)". Every case runs in a worker process (a small pool
that restarts workers on crash/timeout and every --max-tasks cases), so one bad case never
takes the run down.

Comparison follows onnx's backend runner: same number of outputs, same shape, same dtype;
bool/int/string outputs must match exactly; floats use allclose(rtol, atol) with
rtol = max(case rtol, 1e-3), atol = max(case atol, 1e-5); NaNs must be at the same places.

    python test/e2e/conformance/harness.py --system both --jobs 2 --out summary.md
    python test/e2e/conformance/harness.py --filter 'node/test_(add|mul)' --system inferx
    python test/e2e/conformance/harness.py --sample 200 --jobs 2

Run it against the source tree with PYTHONPATH pointing at an installed-layout copy
(see /work/sync.sh) or against the installed package.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import math
import multiprocessing as mp
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import wait as mp_wait
from typing import Optional

STATUSES = ("pass", "import-fail", "compile-fail", "run-fail", "wrong-result")
FAIL_STATUSES = STATUSES[1:]
SYSTEMS = ("inferx", "plain-iree")
SUITES = ("node", "pytorch-converted", "pytorch-operator", "simple", "real")
DATA_SUITES = ("pytorch-converted", "pytorch-operator", "simple")
DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-5
HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED_FAILURES = os.path.join(HERE, "expected_failures.txt")

IREE_COMPILE_FLAGS = (
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host",
)


# --------------------------------------------------------------------------- cases


@dataclass
class Case:
    """One conformance case. Either `model_bytes` + in-memory `data_sets` (node cases) or a
    `model_path` whose data the worker loads (`data_dirs`, or `dummy_output` for "real")."""

    id: str
    suite: str
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    model_bytes: Optional[bytes] = None
    data_sets: Optional[list] = None  # [(inputs, outputs)]
    model_path: Optional[str] = None
    data_dirs: list = field(default_factory=list)
    dummy_output: Optional[str] = None  # "real": expected output .pb; inputs are generated


def _onnx_data_dir() -> str:
    import onnx.backend.test

    return os.path.join(os.path.dirname(onnx.backend.test.__file__), "data")


def _is_pointer_file(path: str) -> bool:
    """True for git-lfs / annex pointers and other stubs standing in for the real bytes."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return True
    return head.startswith(b"version https://git-lfs") or len(head) == 0


def _normalize(v):
    import onnx
    from onnx import numpy_helper

    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, (list, tuple)):
        return [_normalize(x) for x in v]
    return v


def _node_cases() -> list[Case]:
    import warnings

    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tcs = node.collect_testcases(None)
    cases = []
    for tc in tcs:
        data_sets = [([_normalize(x) for x in ins], [_normalize(x) for x in outs])
                     for ins, outs in (tc.data_sets or [])]
        cases.append(Case(id=f"node/{tc.name}", suite="node",
                          rtol=max(tc.rtol, DEFAULT_RTOL), atol=max(tc.atol, DEFAULT_ATOL),
                          model_bytes=tc.model.SerializeToString(), data_sets=data_sets))
    return cases


def _data_dir_cases(suite: str, skipped: list) -> list[Case]:
    root = os.path.join(_onnx_data_dir(), suite)
    cases = []
    if not os.path.isdir(root):
        return cases
    for name in sorted(os.listdir(root)):
        case_dir = os.path.join(root, name)
        if not os.path.isdir(case_dir):
            continue
        cid = f"{suite}/{name}"
        model = os.path.join(case_dir, "model.onnx")
        rtol, atol = DEFAULT_RTOL, DEFAULT_ATOL
        meta = os.path.join(case_dir, "data.json")
        if os.path.exists(meta):
            with open(meta) as f:
                d = json.load(f)
            rtol, atol = max(d.get("rtol", rtol), rtol), max(d.get("atol", atol), atol)
        if not os.path.exists(model) or _is_pointer_file(model):
            skipped.append((cid, "no model.onnx (URL/LFS only)"))
            continue
        dirs = sorted(d for d in glob.glob(os.path.join(case_dir, "test_data_set_*")) if os.path.isdir(d))
        dirs = [d for d in dirs if glob.glob(os.path.join(d, "output_*.pb"))
                and not any(_is_pointer_file(p) for p in glob.glob(os.path.join(d, "*.pb")))]
        if not dirs:
            skipped.append((cid, "no test data"))
            continue
        cases.append(Case(id=cid, suite=suite, rtol=rtol, atol=atol, model_path=model, data_dirs=dirs))
    return cases


def _real_cases(skipped: list) -> list[Case]:
    """The "real" suite: data.json -> url onnx/backend/test/data/light/light_<model>.onnx."""
    data = _onnx_data_dir()
    root = os.path.join(data, "real")
    cases = []
    if not os.path.isdir(root):
        return cases
    for name in sorted(os.listdir(root)):
        meta = os.path.join(root, name, "data.json")
        if not os.path.exists(meta):
            continue
        cid = f"real/{name}"
        with open(meta) as f:
            d = json.load(f)
        url = d.get("url", "")
        prefix = "onnx/backend/test/data/"
        if not url.startswith(prefix + "light/"):
            skipped.append((cid, f"remote model only ({url})"))
            continue
        model = os.path.join(data, url[len(prefix):])
        expected = os.path.splitext(model)[0] + "_output_0.pb"
        if not os.path.exists(model) or _is_pointer_file(model) or not os.path.exists(expected):
            skipped.append((cid, "light model or its output missing"))
            continue
        cases.append(Case(id=cid, suite="real", rtol=max(d.get("rtol", 0), DEFAULT_RTOL),
                          atol=max(d.get("atol", 0), DEFAULT_ATOL), model_path=model,
                          dummy_output=expected))
    return cases


def collect_cases(suites=SUITES, skipped: Optional[list] = None) -> list[Case]:
    """Every runnable case of `suites`, sorted by id. Cases that cannot run here (model or
    data missing, URL-only) are appended to `skipped` as (id, why)."""
    skipped = [] if skipped is None else skipped
    cases: list[Case] = []
    for suite in suites:
        if suite == "node":
            cases += _node_cases()
        elif suite == "real":
            cases += _real_cases(skipped)
        elif suite in DATA_SUITES:
            cases += _data_dir_cases(suite, skipped)
        else:
            raise ValueError(f"unknown suite '{suite}'; valid: {', '.join(SUITES)}")
    return sorted(cases, key=lambda c: c.id)


def select_cases(cases: list[Case], filter_re: Optional[str] = None,
                 sample: Optional[int] = None) -> list[Case]:
    """Filter by regex (searched in the id), then take a deterministic sample of about
    `sample` cases: every k-th case of each suite (sorted by id), at least one per suite."""
    if filter_re:
        rx = re.compile(filter_re)
        cases = [c for c in cases if rx.search(c.id)]
    if sample and sample < len(cases):
        k = max(1, math.ceil(len(cases) / sample))
        by_suite = collections.defaultdict(list)
        for c in cases:
            by_suite[c.suite].append(c)
        picked = []
        for suite in sorted(by_suite):
            group = by_suite[suite]
            picked += group[(k // 2) % len(group)::k] or group[:1]
        cases = sorted(picked, key=lambda c: c.id)
    return cases


# ------------------------------------------------------------------ loading data (worker)


def _load_pb(path: str, type_proto=None):
    import onnx
    from onnx import numpy_helper

    with open(path, "rb") as f:
        raw = f.read()
    kind = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    if kind == "sequence_type":
        p = onnx.SequenceProto()
        p.ParseFromString(raw)
        return numpy_helper.to_list(p)
    if kind == "optional_type":
        p = onnx.OptionalProto()
        p.ParseFromString(raw)
        return numpy_helper.to_optional(p)
    if kind == "map_type":
        p = onnx.MapProto()
        p.ParseFromString(raw)
        return numpy_helper.to_dict(p)
    t = onnx.TensorProto()
    t.ParseFromString(raw)
    return numpy_helper.to_array(t)


def _graph_inputs(model) -> list:
    inits = {i.name for i in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def load_case_data(case: Case, model) -> list:
    """[(inputs, outputs)], inputs in the order of the model's non-initializer inputs."""
    import numpy as np

    if case.data_sets is not None:
        return case.data_sets
    if case.dummy_output:
        inputs = []
        for vi in _graph_inputs(model):
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                          for d in vi.type.tensor_type.shape.dim)
            n = int(np.prod(shape))
            inputs.append((np.arange(n).reshape(shape) / n).astype(np.float32))
        return [(inputs, [_load_pb(case.dummy_output)])]
    sets = []
    all_inputs = list(model.graph.input)
    for d in case.data_dirs:
        n_in = len(glob.glob(os.path.join(d, "input_*.pb")))
        n_out = len(glob.glob(os.path.join(d, "output_*.pb")))
        ins = [_load_pb(os.path.join(d, f"input_{i}.pb"),
                        all_inputs[i].type if i < len(all_inputs) else None) for i in range(n_in)]
        outs = [_load_pb(os.path.join(d, f"output_{i}.pb"),
                         model.graph.output[i].type if i < len(model.graph.output) else None)
                for i in range(n_out)]
        sets.append((ins, outs))
    return sets


# ------------------------------------------------------------------------ comparison


def _short(x, n=160) -> str:
    s = " ".join(str(x).split())
    return s if len(s) <= n else s[: n - 3] + "..."


def compare_outputs(expected: list, actual: list, rtol: float, atol: float) -> Optional[str]:
    """None if `actual` matches `expected`, else a short reason."""
    if len(expected) != len(actual):
        return f"{len(actual)} outputs, expected {len(expected)}"
    for i, (e, a) in enumerate(zip(expected, actual)):
        why = _compare_one(e, a, rtol, atol)
        if why:
            return f"output {i}: {why}"
    return None


def _compare_one(e, a, rtol, atol) -> Optional[str]:
    import numpy as np

    if isinstance(e, (list, tuple)):
        if not isinstance(a, (list, tuple)):
            return f"got {type(a).__name__}, expected a sequence"
        return compare_outputs(list(e), list(a), rtol, atol)
    if e is None:
        return None if a is None else "expected an empty optional"
    if a is None:
        return "got None"
    e, a = np.asarray(e), np.asarray(a)
    if e.shape != a.shape:
        return f"shape {list(a.shape)} != expected {list(e.shape)}"
    if e.dtype == object or a.dtype == object:
        return None if np.array_equal(e, a) else "strings differ"
    if e.dtype != a.dtype:
        return f"dtype {a.dtype.name} != expected {e.dtype.name}"
    if e.size == 0:
        return None
    ml_float = e.dtype.kind == "V" and e.dtype.name.startswith(("bfloat16", "float"))
    if e.dtype.kind in "biuSUV" and not ml_float:  # bool, ints, ml_dtypes int4/uint4...
        bad = int(np.count_nonzero(e != a))
        return f"{bad}/{e.size} elements differ (exact dtype {e.dtype.name})" if bad else None
    if ml_float:  # ml_dtypes floats (bfloat16, float8...): compare in float32
        if e.dtype.name == "bfloat16":
            rtol = max(rtol, 2 ** -6)  # two bfloat16 ULPs, as onnx's runner
        e, a = e.astype(np.float32), a.astype(np.float32)
    e64, a64 = e.astype(np.complex128 if e.dtype.kind == "c" else np.float64), \
        a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    en, an = np.isnan(e64), np.isnan(a64)
    if not np.array_equal(en, an):
        return f"NaN positions differ ({int(np.count_nonzero(en != an))} elements)"
    ok = np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True)
    if not ok.all():
        bad = ~ok
        with np.errstate(invalid="ignore"):
            err = np.abs(a64 - e64)[bad]
        maxerr = float(np.nanmax(err)) if err.size and not np.all(np.isnan(err)) else float("nan")
        return (f"{int(np.count_nonzero(bad))}/{e.size} elements differ "
                f"(max abs err {maxerr:.3g}, rtol={rtol:g} atol={atol:g})")
    return None


# ------------------------------------------------------------------------ the systems


class CaseFailure(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def _first_error_line(text: str) -> str:
    """The most useful line of compiler output: the first 'error:' message, de-located."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        return lines[-1]  # a Python tool died: its exception line
    for ln in lines:
        m = re.search(r"error: (.*)", ln)
        if m:
            return m.group(1)
    for ln in lines:
        if not ln.startswith(("note:", "input IR saved", "reproduce with", "inferx-opt", "iree-compile")):
            return ln
    return lines[0] if lines else "(no message)"


def _strip_loc(msg: str) -> str:
    # 'loc("/tmp/x/model.onnx":3:4): message' / '"file":1:2: message' -> 'message'
    msg = re.sub(r'^(loc\(.*?\)|"[^"]*":\d+:\d+|\S+\.(mlir|onnx|mlirbc):\d+:\d+):?\s*', "", msg)
    msg = re.sub(r"^[)\]:\s]+", "", msg)
    # "failed to legalize operation 'torch.operator' ... name = "onnx.X"" -> the op that is missing
    m = re.search(r"failed to legalize operation '([\w.]+)'", msg)
    if m:
        op = m.group(1)
        if op == "torch.operator":
            n = re.search(r'name = "([\w.]+)"', msg)
            op = n.group(1) if n else op
        else:
            n = re.search(r'"(torch\.[\w.]+)"', msg)
            op = n.group(1) if n else op
        return f"failed to legalize {op}"
    return msg


def _is_torch_input_error(msg: str) -> bool:
    """iree-compile diagnostics from its torch input conversion (before linalg)."""
    return bool(re.search(r"failed to legalize (onnx\.|torch\.)|torch-to-|'torch\.", msg))


def _inferx_compile_failure(e: BaseException) -> CaseFailure:
    from inferx_compiler import errors as E

    tb_files = [f.filename for f in traceback.extract_tb(e.__traceback__)]
    if isinstance(e, E.UnsupportedOpsError):
        ops = sorted({n.get("op_type", "?") for n in e.nodes})
        return CaseFailure("import-fail", "unsupported op(s): " + ", ".join(ops))
    if isinstance(e, E.ModelLoadError):
        return CaseFailure("import-fail", "ModelLoadError: " + _short(_strip_model_name(str(e))))
    if isinstance(e, E.PipelineError):
        msg = str(e)
        head = msg.splitlines()[0] if msg else ""
        detail = _strip_loc(_first_error_line("\n".join(msg.splitlines()[1:]) or head))
        if head.startswith("IREE") or head.startswith(("iree-input", "dispatch")):
            stage = head.split(" failed")[0]
            return CaseFailure("compile-fail", _short(f"{stage}: {detail}"))
        if head.startswith(("graph failed", "graph-lowering failed")):
            return CaseFailure("compile-fail", _short(_strip_loc(head)))
        if "failed:" in head:
            stage, _, rest = head.partition(" failed:")
            return CaseFailure("import-fail", _short(f"{stage}: {_strip_loc(rest.strip()) or detail}"))
        return CaseFailure("import-fail", _short(_strip_model_name(head)))
    in_iree = any(os.path.basename(f) in ("iree_backend.py",) or "/passes/" in f for f in tb_files)
    status = "compile-fail" if in_iree else "import-fail"
    kind = "" if isinstance(e, E.InferXError) else "internal error: "
    return CaseFailure(status, _short(f"{kind}{type(e).__name__}: {_strip_model_name(str(e))}"))


def _strip_model_name(msg: str) -> str:
    msg = re.sub(r"model '[^']*': ", "", msg)
    return re.sub(r"/\S*/(model\.onnx)", r"\1", msg)


def _feeds_by_name(names: list, inputs: list) -> dict:
    return dict(zip(names, inputs))


def run_inferx(case: Case, model, data_sets, workdir: str, progress) -> None:
    import inferx_compiler
    from inferx_compiler.backend import iree_backend
    from inferx_compiler.errors import InferXError

    path = os.path.join(workdir, "model.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    art = os.path.join(workdir, "model.ixa")

    # Tell the parent when compilation reaches IREE, so a timeout/crash is classified right.
    if not getattr(iree_backend, "_conformance_wrapped", False):
        orig = iree_backend.compile_module

        def compile_module(*a, **kw):
            _PROGRESS[0]("compile")
            return orig(*a, **kw)

        iree_backend.compile_module = compile_module
        iree_backend._conformance_wrapped = True
    _PROGRESS[0] = progress
    progress("import")
    try:
        inferx_compiler.compile_onnx(path, target="cpu", output=art)
    except Exception as e:  # noqa: BLE001 - every failure is classified
        raise _inferx_compile_failure(e) from None
    progress("run")
    names = [vi.name for vi in _graph_inputs(model)]
    out_names = [vi.name for vi in model.graph.output]
    try:
        sess = inferx_compiler.load(art, device="cpu")
    except Exception as e:  # noqa: BLE001
        raise CaseFailure("run-fail", _short(f"load: {type(e).__name__}: {e}")) from None
    for ins, expected in data_sets:
        feeds = _feeds_by_name(names, ins)
        bad = [n for n, v in feeds.items() if v is None or isinstance(v, (list, dict))]
        if bad:
            raise CaseFailure("run-fail", "non-tensor input (sequence/optional/map) not supported by run()")
        try:
            out = sess.run(feeds)
        except InferXError as e:
            raise CaseFailure("run-fail", _short(f"{type(e).__name__}: {e}")) from None
        except Exception as e:  # noqa: BLE001
            raise CaseFailure("run-fail", _short(f"{type(e).__name__}: {e}")) from None
        actual = [out[n] for n in out_names] if all(n in out for n in out_names) else list(out.values())
        why = compare_outputs(expected, actual, case.rtol, case.atol)
        if why:
            raise CaseFailure("wrong-result", _short(why))


_PROGRESS = [lambda stage: None]


def _run_tool(cmd: list, status: str, timeout: float) -> None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CaseFailure(status, f"timeout ({timeout:.0f}s)") from None
    if p.returncode != 0:
        tool = os.path.basename(cmd[0])
        sig = f" (signal {-p.returncode})" if p.returncode < 0 else ""
        msg = _strip_loc(_first_error_line(p.stderr or p.stdout))
        if status == "compile-fail" and not sig and _is_torch_input_error(msg):
            status, tool = "import-fail", tool + " (torch input)"
        raise CaseFailure(status, _short(f"{tool}{sig}: {msg}"))


def _tool(name: str) -> str:
    cand = os.path.join(os.path.dirname(sys.executable), name)
    return cand if os.path.exists(cand) else (shutil.which(name) or name)


def run_plain_iree(case: Case, model, data_sets, workdir: str, progress, timeout: float) -> None:
    import numpy as np

    path = os.path.join(workdir, "model.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    mlir, vmfb = os.path.join(workdir, "model.mlir"), os.path.join(workdir, "model.vmfb")
    deadline = time.monotonic() + timeout
    progress("import")
    _run_tool([_tool("iree-import-onnx"), path, "-o", mlir], "import-fail", timeout)
    progress("compile")
    _run_tool([_tool("iree-compile"), mlir, *IREE_COMPILE_FLAGS, "-o", vmfb], "compile-fail",
              max(1.0, deadline - time.monotonic()))
    progress("run")
    try:
        import iree.runtime as rt

        config = rt.Config("local-task")
        ctx = rt.SystemContext(config=config)
        with open(vmfb, "rb") as f:
            vm_module = rt.VmModule.copy_buffer(ctx.instance, f.read())
        ctx.add_vm_module(vm_module)
        fn_name = _iree_entry_name(model, vm_module)
        fn = ctx.modules[vm_module.name][fn_name]
    except CaseFailure:
        raise
    except Exception as e:  # noqa: BLE001
        raise CaseFailure("run-fail", _short(f"load: {type(e).__name__}: {e}")) from None
    for ins, expected in data_sets:
        if any(v is None or isinstance(v, (list, dict)) for v in ins):
            raise CaseFailure("run-fail", "non-tensor input (sequence/optional/map) not supported by the runner")
        try:
            res = fn(*[np.asarray(x, order="C") for x in ins])  # keeps 0-d (ascontiguousarray makes 1-d)
        except Exception as e:  # noqa: BLE001
            raise CaseFailure("run-fail", _short(f"{type(e).__name__}: {e}")) from None
        if not isinstance(res, (tuple, list)):
            res = [res]
        actual = [r.to_host() if hasattr(r, "to_host") else np.asarray(r) for r in res]
        why = compare_outputs(expected, actual, case.rtol, case.atol)
        if why:
            raise CaseFailure("wrong-result", _short(why))


def _iree_entry_name(model, vm_module) -> str:
    """iree-import-onnx names the function after the ONNX graph (sanitized)."""
    names = [n for n in vm_module.function_names if not n.startswith("__")]
    want = model.graph.name
    if want in names:
        return want
    cleaned = re.sub(r"[^A-Za-z0-9_$.-]", "_", want)
    if cleaned in names:
        return cleaned
    if len(names) == 1:
        return names[0]
    raise CaseFailure("run-fail", f"cannot find entry function '{want}' among {names}")


def run_case(case: Case, system: str, timeout: float, progress=lambda stage: None) -> dict:
    """Run one case in this process; returns {'status', 'reason', 'seconds'}."""
    import warnings

    import onnx

    t0 = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="ixconf-")
    old_repro = os.environ.get("INFERX_REPRO_DIR")
    os.environ["INFERX_REPRO_DIR"] = os.path.join(workdir, "repro")
    try:
        progress("import")
        try:
            if case.model_bytes is not None:
                model = onnx.load_model_from_string(case.model_bytes)
            else:
                model = onnx.load(case.model_path)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                data_sets = load_case_data(case, model)
        except Exception as e:  # noqa: BLE001
            raise CaseFailure("import-fail", _short(f"harness could not load the case: {e}")) from None
        if system == "inferx":
            run_inferx(case, model, data_sets, workdir, progress)
        elif system == "plain-iree":
            run_plain_iree(case, model, data_sets, workdir, progress, timeout)
        else:
            raise ValueError(system)
        status, reason = "pass", ""
    except CaseFailure as f:
        status, reason = f.status, f.reason
    finally:
        if old_repro is None:
            os.environ.pop("INFERX_REPRO_DIR", None)
        else:
            os.environ["INFERX_REPRO_DIR"] = old_repro
        shutil.rmtree(workdir, ignore_errors=True)
    return {"status": status, "reason": reason, "seconds": round(time.monotonic() - t0, 2)}


# ------------------------------------------------------------------------ worker pool

_STAGE_STATUS = {"import": "import-fail", "compile": "compile-fail", "run": "run-fail"}


def _worker_main(conn, timeout: float) -> None:
    try:
        os.setpgrp()  # own process group: the parent can end it with its tools, by id
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import warnings

    warnings.simplefilter("ignore")
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        case, system = msg
        try:
            res = run_case(case, system, timeout, progress=lambda s: conn.send(("stage", s)))
        except Exception as e:  # noqa: BLE001 - a harness bug; report and keep going
            res = {"status": "run-fail", "reason": _short(f"harness error: {type(e).__name__}: {e}"),
                   "seconds": 0}
        conn.send(("result", res))


class _Worker:
    def __init__(self, ctx, timeout: float):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, timeout), daemon=True)
        self.proc.start()
        child.close()
        self.task = None
        self.stage = "import"
        self.started = 0.0
        self.done = 0

    def send(self, task):
        self.task, self.stage, self.started = task, "import", time.monotonic()
        self.conn.send(task)

    def kill(self):
        pid = self.proc.pid
        if pid:
            for fn in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    fn()
                except (ProcessLookupError, PermissionError, OSError):
                    pass
        self.proc.join(5)
        self.conn.close()

    def stop(self):
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(10)
        if self.proc.is_alive():
            self.kill()
        else:
            self.conn.close()


def run_cases(cases: list[Case], systems=("inferx",), jobs: int = 2, timeout: float = 180.0,
              max_tasks: int = 40, on_result=None, verbose: bool = False) -> dict:
    """Run every (case, system) in worker processes. Returns {system: {case_id: result}}.
    `on_result(system, case, result)` is called as each finishes (for progress logs)."""
    ctx = mp.get_context("spawn")
    tasks = collections.deque((c, s) for c in cases for s in systems)
    total = len(tasks)
    results: dict = {s: {} for s in systems}
    workers: list[_Worker] = []
    finished = 0
    t_start = time.monotonic()

    def record(worker, res):
        nonlocal finished
        case, system = worker.task
        res["suite"] = case.suite
        results[system][case.id] = res
        finished += 1
        worker.task = None
        if on_result:
            on_result(system, case, res)
        if verbose:
            el = time.monotonic() - t_start
            print(f"[{finished}/{total} {el:6.0f}s] {system:10s} {res['status']:12s} {case.id}"
                  + (f"  ({res['reason']})" if res["reason"] else ""), file=sys.stderr, flush=True)

    try:
        while tasks or any(w.task for w in workers):
            while len(workers) < jobs and tasks:
                workers.append(_Worker(ctx, timeout))
            for w in workers:
                if w.task is None and tasks:
                    w.send(tasks.popleft())
            busy = [w for w in workers if w.task]
            ready = mp_wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=1.0)
            now = time.monotonic()
            replace = []
            for w in busy:
                got_result = False
                try:
                    while w.conn.poll():
                        kind, payload = w.conn.recv()
                        if kind == "stage":
                            w.stage = payload
                        else:
                            record(w, payload)
                            w.done += 1
                            got_result = True
                            break
                except (EOFError, OSError):
                    pass
                if got_result:
                    if w.done >= max_tasks:
                        replace.append((w, False))
                    continue
                if not w.proc.is_alive():
                    code = w.proc.exitcode
                    why = f"crash (signal {-code})" if code and code < 0 else f"crash (exit {code})"
                    record(w, {"status": _STAGE_STATUS.get(w.stage, "run-fail"), "reason": why,
                               "seconds": round(now - w.started, 2)})
                    replace.append((w, True))
                elif now - w.started > timeout:
                    record(w, {"status": _STAGE_STATUS.get(w.stage, "run-fail"),
                               "reason": f"timeout ({timeout:.0f}s)", "seconds": round(now - w.started, 2)})
                    replace.append((w, True))
            del ready
            for w, dead in replace:
                workers.remove(w)
                w.kill() if dead else w.stop()
    finally:
        for w in workers:
            if w.task:
                w.kill()
            else:
                w.stop()
    return results


# ------------------------------------------------------------------------ reporting


def summarize(results: dict) -> dict:
    """{system: {suite: Counter(status)}} including an 'all' suite."""
    out = {}
    for system, per_case in results.items():
        counts = collections.defaultdict(collections.Counter)
        for cid, r in per_case.items():
            counts[r["suite"]][r["status"]] += 1
            counts["all"][r["status"]] += 1
        out[system] = counts
    return out


def _reason_key(status: str, reason: str) -> str:
    r = re.sub(r"'[^']*'", "'…'", reason)
    r = re.sub(r"\[[^\]]*\]", "[…]", r)
    r = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", r)
    r = re.sub(r"!torch\.vtensor<[^>]*>", "!torch.vtensor<…>", r)
    r = re.sub(r"tensor<[^>]*>", "tensor<…>", r)
    return f"{status}: {r[:110]}"


def top_reasons(per_case: dict, n: int = 15) -> list:
    """[(key, count, [example ids])] of failures grouped by normalized reason."""
    groups = collections.defaultdict(list)
    for cid, r in sorted(per_case.items()):
        if r["status"] != "pass":
            groups[_reason_key(r["status"], r["reason"])].append(cid)
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [(k, len(v), v[:3]) for k, v in ranked[:n]]


def markdown_summary(results: dict, top: int = 12) -> str:
    summ = summarize(results)
    lines = ["| system | suite | cases | pass | import-fail | compile-fail | run-fail | wrong-result | pass rate |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for system in results:
        suites = [s for s in SUITES if s in summ[system]] + ["all"]
        for suite in suites:
            c = summ[system][suite]
            n = sum(c.values())
            rate = f"{100.0 * c['pass'] / n:.1f}%" if n else "-"
            name = f"**{suite}**" if suite == "all" else suite
            lines.append(f"| {system} | {name} | {n} | " + " | ".join(str(c[s]) for s in STATUSES)
                         + f" | {rate} |")
    if top:
        for system, per_case in results.items():
            lines += ["", f"Top failure reasons, {system}:", "",
                      "| cases | status: reason (normalized) | examples |", "|---:|---|---|"]
            for key, count, ex in top_reasons(per_case, top):
                key = key.replace("|", "\\|")
                lines.append(f"| {count} | {key} | {', '.join(ex)} |")
    return "\n".join(lines)


def read_expected_failures(path: str = EXPECTED_FAILURES) -> dict:
    """{case id: 'status: reason'} from the expected-failure list."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            cid, _, comment = line.partition("#")
            out[cid.strip()] = comment.strip()
    return out


def write_expected_failures(per_case: dict, path: str, header: str = "") -> int:
    fails = sorted((cid, r) for cid, r in per_case.items() if r["status"] != "pass")
    width = max((len(c) for c, _ in fails), default=0)
    with open(path, "w") as f:
        f.write("# Expected failures of the inferx system in the ONNX conformance harness\n"
                "# (test/e2e/conformance/harness.py). One case id per line, then '# status: reason'.\n"
                "# Regenerate: python test/e2e/conformance/harness.py --system inferx --jobs 2 \\\n"
                "#   --write-expected test/e2e/conformance/expected_failures.txt\n"
                "# Remove a line when its case passes (test/e2e/test_conformance.py insists).\n")
        if header:
            f.write("".join(f"# {ln}\n" for ln in header.splitlines()))
        for cid, r in fails:
            f.write(f"{cid.ljust(width)}  # {r['status']}: {r['reason']}\n")
    return len(fails)


HOST_DEPENDENT = "host-dependent:"
NONDETERMINISTIC = "nondeterministic:"  # right or wrong from run to run (reads memory it should not)
UNDECIDED = (HOST_DEPENDENT, NONDETERMINISTIC)


def check_against_expected(per_case: dict, expected: dict) -> tuple[list, list]:
    """(unexpected failures [(id, status, reason)], now-passing listed ids). A listed case whose
    comment starts with 'host-dependent:' (its result depends on the CPU compiling it, e.g.
    undefined behaviour in the generated code) or 'nondeterministic:' (right on some runs,
    wrong on others) counts neither way."""
    unexpected = [(cid, r["status"], r["reason"]) for cid, r in sorted(per_case.items())
                  if r["status"] != "pass" and cid not in expected]
    fixed = [cid for cid, r in sorted(per_case.items()) if r["status"] == "pass" and cid in expected
             and not expected[cid].startswith(UNDECIDED)]
    return unexpected, fixed


# ------------------------------------------------------------------------ CLI


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="ONNX backend-test conformance for inferx-compiler (and plain IREE).",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--system", choices=("inferx", "plain-iree", "both"), default="inferx")
    ap.add_argument("--suite", action="append", choices=SUITES,
                    help="suite(s) to run (repeatable; default all)")
    ap.add_argument("--filter", metavar="REGEX", help="only case ids matching REGEX (re.search)")
    ap.add_argument("--sample", type=int, metavar="N",
                    help="deterministic sample of about N cases (every k-th per suite, by id)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per case and system (default 180)")
    ap.add_argument("--max-tasks", type=int, default=40, help="restart a worker after this many cases")
    ap.add_argument("--out", metavar="MD", help="write the markdown summary here")
    ap.add_argument("--json", metavar="JSON",
                    help="write every case's result here (default: --out with .json, else none)")
    ap.add_argument("--log", metavar="JSONL", help="append one JSON line per finished case (partial results)")
    ap.add_argument("--ids", metavar="FILE", help="only the case ids listed in FILE (one per line)")
    ap.add_argument("--from-log", metavar="JSONL", action="append",
                    help="no run: summarize --log file(s) (e.g. of a partial run); repeatable, "
                         "later files override earlier results of the same case")
    ap.add_argument("--write-expected", metavar="TXT",
                    help="write the inferx failures as an expected-failure list")
    ap.add_argument("--check-expected", nargs="?", const=EXPECTED_FAILURES, metavar="TXT",
                    help="exit 1 on failures not in the list or listed cases that pass")
    ap.add_argument("--list", action="store_true", help="list the selected case ids and exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per finished case on stderr")
    args = ap.parse_args(argv)

    systems = SYSTEMS if args.system == "both" else (args.system,)
    t0 = time.time()
    skipped: list = []
    if args.from_log:
        results: dict = {}
        for path in args.from_log:
            with open(path) as f:
                for line in f:
                    if line.strip():
                        d = json.loads(line)
                        results.setdefault(d["system"], {})[d["id"]] = {
                            k: d[k] for k in ("status", "reason", "seconds", "suite")}
        results = {s: dict(sorted(r.items())) for s, r in sorted(results.items())}
        cases = []
    else:
        cases = select_cases(collect_cases(tuple(args.suite or SUITES), skipped), args.filter, args.sample)
        if args.ids:
            with open(args.ids) as f:
                wanted = {ln.split("#")[0].strip() for ln in f} - {""}
            cases = [c for c in cases if c.id in wanted]
        if args.list:
            print("\n".join(c.id for c in cases))
            print(f"{len(cases)} cases; skipped: {len(skipped)}", file=sys.stderr)
            return 0
        print(f"{len(cases)} cases x {len(systems)} system(s), jobs={args.jobs}, timeout={args.timeout:g}s"
              + (f"; skipped {len(skipped)}: " + ", ".join(f"{c} ({w})" for c, w in skipped) if skipped else ""),
              file=sys.stderr, flush=True)
        log = open(args.log, "a") if args.log else None

        def on_result(system, case, res):
            if log:
                log.write(json.dumps({"system": system, "id": case.id, **res}) + "\n")
                log.flush()

        try:
            results = run_cases(cases, systems, jobs=args.jobs, timeout=args.timeout,
                                max_tasks=args.max_tasks, on_result=on_result, verbose=args.verbose)
        finally:
            if log:
                log.close()
    wall = time.time() - t0
    md = markdown_summary(results)
    header = (f"ONNX conformance ({time.strftime('%Y-%m-%d %H:%M')}), {len(cases) or '?'} cases, "
              f"systems: {', '.join(results)}, wall {wall:.0f}s\n\n")
    print(header + md)
    if args.out:
        with open(args.out, "w") as f:
            f.write(header + md + "\n")
    json_path = args.json or (os.path.splitext(args.out)[0] + ".json" if args.out else None)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv, "wall_s": round(wall, 1),
                       "skipped": skipped, "results": results,
                       "summary": {s: {k: dict(v) for k, v in c.items()} for s, c in summarize(results).items()}},
                      f, indent=1, sort_keys=True)
    if args.write_expected and "inferx" in results:
        n = write_expected_failures(results["inferx"], args.write_expected)
        print(f"wrote {n} expected failures to {args.write_expected}", file=sys.stderr)
    if args.check_expected and "inferx" in results:
        unexpected, fixed = check_against_expected(results["inferx"], read_expected_failures(args.check_expected))
        for cid, st, why in unexpected:
            print(f"UNEXPECTED {st}: {cid}: {why}", file=sys.stderr)
        for cid in fixed:
            print(f"NOW PASSES (remove from the list): {cid}", file=sys.stderr)
        return 1 if unexpected or fixed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
