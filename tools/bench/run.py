"""CPU benchmark: inferx against onnxruntime, plain IREE and PyTorch, in one run.

    PYTHONPATH=<inferx_compiler installed layout> python tools/bench/run.py --quick
    python tools/bench/run.py --full --models mlp,bert --batches 1 --out docs/bench/DATE

Method (issue 4):
  * models from tools/bench/models.py (seeded weights, ONNX cached under --cache);
  * every system is compiled/loaded, then its output on the same seeded input is checked against
    onnxruntime fp32 (relative L2, per-precision tolerance). A wrong answer is reported as wrong and
    not timed; an exception is reported as an error;
  * warm-up calls, then interleaved rounds: each round runs every system (`--iters` calls each),
    the order rotated by one system per round. Median and min-max over all samples;
  * one thread count for all: onnxruntime intra_op_num_threads (inter_op 1), torch.set_num_threads,
    IREE local-task `--task_topology_max_group_count` (iree.runtime.flags.parse_flags, before any
    device exists; the inferx runtime and plain IREE share that process-wide flag);
  * compiles run in a child process; wall time and the child's peak RSS (os.wait4: the child and
    every descendant it reaped) are recorded with the artifact size. torch.compile compiles in
    process at its first call: its compile time is that call minus an eager call; no RSS;
  * ratios to the best peer (the fastest correct non-inferx system for that model and batch).
Outputs in --out: results.json (every sample), results.md, chart.png.

Systems: inferx-fp32, inferx-bf16, inferx-fp16 (inferx-compile --target cpu --precision ...),
iree (iree-import-onnx --externalize-params + iree-compile, llvm-cpu host, run with
iree.runtime + the IRPA), ort (onnxruntime CPU defaults), ort-int8 (onnxruntime.quantization
.quantize_dynamic, QInt8 weights per channel, MatMul only; Gemm is first rewritten to MatMul+Add because the
dynamic quantizer leaves Gemm in float), torch (eager, native torch.nn modules with the same
weights, torch_native.py), torch-compile (torch.compile default mode, static shapes).
inferx systems get a static-shape function per benchmark batch (--batch-sizes); inferx-tuned is
inferx-fp32 built with --tune (data tiling and dispatch configurations measured on this machine).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np


LOADAVG_AT_START = os.getloadavg()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402

ALL_SYSTEMS = ["inferx-fp32", "inferx-tuned", "inferx-bf16", "inferx-fp16", "inferx-int8", "inferx-int4",
               "inferx-auto", "iree", "ort", "ort-int8", "torch",
               "torch-compile"]
PRECISION = {"inferx-fp32": "fp32", "inferx-tuned": "fp32", "inferx-bf16": "bf16", "inferx-fp16": "fp16",
             "inferx-int8": "int8", "inferx-int4": "int4", "inferx-auto": "auto",
             "iree": "fp32", "ort": "fp32",
             "ort-int8": "int8", "torch": "fp32", "torch-compile": "fp32"}
# int8/int4: a check against broken code only (these models have random weights: int4 loses 40%);
# the error is reported. auto: its own budget is 1% on its calibration data
DEFAULT_TOL = {"fp32": 1e-4, "fp16": 2e-2, "bf16": 2e-2, "int8": 0.1, "int4": 0.6, "auto": 5e-2}
CALIBRATION_SEED = 99  # inferx-auto calibrates on inputs of another seed than the measured ones
IREE_CPU_FLAGS = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                  "--iree-llvmcpu-target-cpu=host"]
MODES = {  # mode -> models, rounds, iters per round, warm-up calls
    "quick": (models.QUICK, 5, 3, 2),
    "full": (models.FULL, 7, 3, 2),
    "smoke": (["tiny"], 1, 1, 1),
}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _calibration_file(onnx_path: str, stem: str, samples: int = 8) -> str:
    """Seeded calibration samples (CALIBRATION_SEED, batch 1 each) for inferx-auto."""
    path = stem + ".calibration.npz"
    parts = [models.feeds(onnx_path, 1, seed=CALIBRATION_SEED + i) for i in range(samples)]
    np.savez(path, **{k: np.concatenate([p[k] for p in parts]) for k in parts[0]})
    return path


def rel_l2(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        return float("inf")
    d = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)
    return float(d) if np.isfinite(d) else float("inf")


# ----------------------------------------------------------------------------- compiles
_LAUNCHER = r"""
import json, os, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[2:])
_, st, ru = os.wait4(p.pid, 0)
json.dump({"wall": time.perf_counter() - t0, "maxrss_kib": ru.ru_maxrss}, open(sys.argv[1], "w"))
sys.exit(os.waitstatus_to_exitcode(st))
"""


def measured(cmd, logf, env=None):
    """Run cmd in a child; return (wall s, peak RSS MiB of it and its reaped descendants, rc).

    A small launcher interpreter starts the command and reads os.wait4's rusage: forked
    straight from this (large) process, the child's ru_maxrss would include the RSS it
    inherited from us at fork time (Linux records the pre-exec high-water mark).
    """
    fd, stats = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    t0 = time.perf_counter()
    rc = subprocess.call([sys.executable, "-c", _LAUNCHER, stats, *cmd], stdout=logf, stderr=subprocess.STDOUT, env=env)
    wall = time.perf_counter() - t0
    try:
        with open(stats) as f:
            st = json.load(f)
        wall, rss = st["wall"], st["maxrss_kib"] / 1024.0
    except (OSError, ValueError):
        rss = float("nan")
    os.remove(stats)
    return wall, rss, rc


def _tool(name):
    cand = os.path.join(os.path.dirname(sys.executable), name)
    return cand if os.path.exists(cand) else (shutil.which(name) or name)


def _tail(path, n=1500):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def compile_system(system, onnx_path, workdir, recompile=False, inferx_target="cpu", iree_flags=None,
                   batches=()):
    """Compile `onnx_path` for `system` into workdir; cached with a JSON sidecar of the stats.
    inferx builds get a static-shape function per benchmark batch (`--batch-sizes`, what a
    deployment that knows its batch sizes asks for); inferx-tuned adds `--tune`."""
    os.makedirs(workdir, exist_ok=True)
    stem = os.path.join(workdir, system + (f"-b{'-'.join(map(str, batches))}" if batches else ""))
    meta_path = stem + ".json"
    from inferx_compiler.artifact.build_cache import inferx_source_digest

    source = inferx_source_digest() if system.startswith("inferx-") else None
    if not recompile and os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        # an inferx build is reused only from the same compiler sources (a cached artifact of
        # older code would be measured under the new code's name)
        if meta.get("ok") and all(os.path.exists(p) for p in meta["files"]) and meta.get("inferx_source") == source:
            meta["cached"] = True
            return meta
    logf_path = stem + ".log"
    meta = {"system": system, "cached": False, "inferx_source": source}
    with open(logf_path, "w") as logf:
        if system.startswith("inferx-"):
            out = stem + ".ixa"
            from inferx_compiler.cli.common import python_entry  # (gpu.py imports this module before
            # it has put inferx_compiler on the path)

            cmd = python_entry("inferx_compiler.cli.compile") + [onnx_path, "--target", inferx_target,
                   "--precision", PRECISION[system], "-o", out, "-q"]
            if batches:
                cmd += ["--batch-sizes", ",".join(map(str, batches)), "--no-measure"]
            if system == "inferx-tuned":
                cmd += ["--tune", "--tuning-db", stem + ".tuning.json"]
            if system == "inferx-auto":
                cmd += ["--calibration", _calibration_file(onnx_path, stem)]
            wall, rss, rc = measured(cmd, logf)
            meta.update(compile_s=wall, peak_rss_mib=rss, files=[out], commands=[cmd])
        elif system == "iree":
            mlir, irpa, vmfb = stem + ".mlir", stem + ".irpa", stem + ".vmfb"
            c1 = [_tool("iree-import-onnx"), onnx_path, "-o", mlir, "--externalize-params",
                  "--num-elements-threshold", "1024", "--params-scope", "model", "--save-params-to", irpa]
            c2 = [_tool("iree-compile"), mlir, *(iree_flags or IREE_CPU_FLAGS), "-o", vmfb]
            w1, r1, rc = measured(c1, logf)
            w2, r2 = 0.0, 0.0
            if rc == 0:
                w2, r2, rc = measured(c2, logf)
            meta.update(compile_s=w1 + w2, import_s=w1, iree_compile_s=w2, peak_rss_mib=max(r1, r2),
                        import_peak_rss_mib=r1, iree_compile_peak_rss_mib=r2, files=[vmfb, irpa], commands=[c1, c2])
            if rc == 0 and os.path.exists(mlir):
                os.remove(mlir)  # keep the cache small; the command is recorded
        elif system == "ort-int8":
            out = stem + ".onnx"
            code = ("import sys; sys.path.insert(0, %r); import run; run.quantize_int8(%r, %r)"
                    % (HERE, onnx_path, out))
            cmd = [sys.executable, "-c", code]
            wall, rss, rc = measured(cmd, logf)
            meta.update(compile_s=wall, peak_rss_mib=rss, files=[out], commands=["quantize_int8"])
        else:
            raise ValueError(system)
    meta["ok"] = rc == 0
    meta["artifact_bytes"] = int(sum(os.path.getsize(p) for p in meta["files"] if os.path.exists(p)))
    if rc != 0:
        meta["error"] = f"compile failed (rc={rc}): " + _tail(logf_path)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def quantize_int8(src, dst):
    """onnxruntime dynamic int8 (QInt8 per-channel weights, MatMul). Gemm -> MatMul + Add first."""
    import onnx
    from onnx import helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    m = onnx.load(src)
    inits = {i.name: i for i in m.graph.initializer}
    nodes = []
    for n in m.graph.node:
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        if n.op_type == "Gemm" and not a.get("transA", 0) and a.get("alpha", 1.0) == 1.0 and n.input[1] in inits:
            w = numpy_helper.to_array(inits[n.input[1]])
            wname = n.input[1]
            if a.get("transB", 0):
                wname = n.input[1] + ".T"
                m.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(w.T), wname))
            mm = n.output[0] + ".mm"
            nodes.append(helper.make_node("MatMul", [n.input[0], wname], [mm], name=n.name + ".mm"))
            if len(n.input) > 2:
                nodes.append(helper.make_node("Add", [mm, n.input[2]], [n.output[0]], name=n.name + ".bias"))
            else:
                nodes[-1].output[0] = n.output[0]
        else:
            nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    used = {i for n in m.graph.node for i in n.input}
    keep = [i for i in m.graph.initializer if i.name in used]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    tmp = dst + ".fp32.onnx"
    onnx.save(m, tmp)
    quantize_dynamic(tmp, dst, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"], per_channel=True)
    os.remove(tmp)


# ----------------------------------------------------------------------------- runners
class Runners:
    """Callables feeds -> list of numpy outputs, one per system, for one model."""

    def __init__(self, threads):
        self.threads = threads
        self._iree_device = None

    def ort_session(self, path):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def ort(self, path):
        s = self.ort_session(path)
        return lambda feeds: s.run(None, feeds)

    def inferx(self, ixa):
        import inferx_compiler

        s = inferx_compiler.load(ixa, device="cpu")
        return lambda feeds: list(s.run(feeds).values())

    def iree(self, vmfb, irpa, device=None, input_names=None):
        import iree.runtime as rt

        if device is None:
            if self._iree_device is None:
                self._iree_device = rt.get_driver("local-task").create_default_device()
            device = self._iree_device
        inst = rt.VmInstance()
        mods = [rt.create_hal_module(inst, device)]
        if irpa and os.path.exists(irpa):
            idx = rt.ParameterIndex()
            idx.load(irpa)
            mods.append(rt.create_io_parameters_module(inst, idx.create_provider(scope="model")))
        with open(vmfb, "rb") as f:
            mod = rt.VmModule.copy_buffer(inst, f.read())
        mods.append(mod)
        ctx = rt.VmContext(inst, modules=mods)
        fn = None
        for name in mod.function_names:
            if not name.startswith("__") and not name.endswith("$async"):
                fn = mod.lookup_function(name)
                break
        inv = rt.FunctionInvoker(ctx, device, fn)
        keep = (idx if irpa else None, inst, ctx)

        def call(feeds):
            _ = keep
            r = inv(*[feeds[k] for k in (input_names or feeds)])
            r = r if isinstance(r, (tuple, list)) else (r,)
            return [x.to_host() if hasattr(x, "to_host") else np.asarray(x) for x in r]

        return call

    def torch(self, onnx_path, compiled=False):
        """Native torch.nn modules of the same architectures with the same weights
        (torch_native.py): the PyTorch users write, not an ONNX interpreter."""
        import onnx
        import torch

        import torch_native

        torch.set_num_threads(self.threads)
        model = onnx.load(onnx_path)
        mod = torch_native.build(model_name(model), model)
        f = torch.compile(mod, dynamic=False) if compiled else mod
        names = mod.input_names

        def call(feeds):
            with torch.inference_mode():
                out = f(*[torch.from_numpy(feeds[k]) for k in names])
            return [o.numpy() for o in out]

        return call


def model_name(model) -> str:
    """models.py's name of a built model (its graph name)."""
    return model.graph.name


# ----------------------------------------------------------------------------- the run
def bench_model(name, batches, systems, args, runners, tol):
    import onnx

    onnx_path = models.path(name, args.cache)
    stem = os.path.basename(onnx_path)[:-5]
    workdir = os.path.join(args.cache, "compiled", stem)
    compiled = {}
    for s in systems:
        if s.startswith("inferx-") or s in ("iree", "ort-int8"):
            log(f"{name}: compile {s}")
            compiled[s] = compile_system(s, onnx_path, workdir, recompile=args.recompile,
                                         batches=batches if s.startswith("inferx-") else ())
            c = compiled[s]
            log(f"{name}: {s} {'cached ' if c['cached'] else ''}{c['compile_s']:.1f} s, "
                f"peak RSS {c['peak_rss_mib']:.0f} MiB, {c['artifact_bytes'] / 1e6:.1f} MB"
                + ("" if c["ok"] else " FAILED"))
    if compiled and hasattr(os, "sync"):
        # the artifacts just written are still being written back to disk: the first timings
        # after a 537 MB build fell on 4 ms steps (the MLP b1 median 24.0 ms right after
        # --recompile, 20.0 from the cached artifact), so the writeback ends first
        os.sync()
    model = onnx.load(onnx_path, load_external_data=False)
    input_names = [vi.name for vi in model.graph.input if vi.name not in {i.name for i in model.graph.initializer}]
    del model
    rows = []
    for batch in batches:
        feeds = models.feeds(onnx_path, batch)
        ref = runners.ort(onnx_path)(feeds)
        fns, row_of = {}, {}
        for s in systems:
            row = {"model": name, "batch": batch, "system": s, "precision": PRECISION[s], "tol": tol[PRECISION[s]],
                   "onnx": os.path.basename(onnx_path), "samples_ms": []}
            c = compiled.get(s)
            if c:
                row.update({k: c.get(k) for k in ("compile_s", "peak_rss_mib", "artifact_bytes", "cached",
                                                  "import_s", "iree_compile_s", "import_peak_rss_mib",
                                                  "iree_compile_peak_rss_mib")})
            rows.append(row)
            row_of[s] = row
            if c and not c["ok"]:
                row.update(status="error", error=c["error"])
                continue
            try:
                if s == "ort":
                    fn = runners.ort(onnx_path)
                elif s == "ort-int8":
                    fn = runners.ort(c["files"][0])
                elif s.startswith("inferx-"):
                    fn = runners.inferx(c["files"][0])
                elif s == "iree":
                    fn = runners.iree(c["files"][0], c["files"][1], input_names=input_names)
                elif s in ("torch", "torch-compile"):
                    fn = runners.torch(onnx_path, compiled=s == "torch-compile")
                t0 = time.perf_counter()
                out = fn(feeds)
                first = time.perf_counter() - t0
                if s == "torch-compile":
                    t0 = time.perf_counter()
                    out = fn(feeds)
                    row["compile_s"] = max(first - (time.perf_counter() - t0), 0.0)
                row["first_call_s"] = first
                err = max(rel_l2(g, r) for g, r in zip(out, ref)) if len(out) == len(ref) else float("inf")
                row["rel_l2"] = err
                if err <= row["tol"]:
                    row["status"] = "ok"
                    fns[s] = fn
                else:
                    row["status"] = "wrong"
                log(f"{name} b{batch}: {s:14s} rel_l2={err:.2e} {row['status']}")
            except Exception as e:  # noqa: BLE001 - reported, never fatal
                row.update(status="error", error=f"{type(e).__name__}: {e}"[:2000])
                log(f"{name} b{batch}: {s} ERROR {row['error'][:300]}")
                if args.debug:
                    traceback.print_exc()
        order = list(fns)
        for s in order:
            for _ in range(args.warmup):
                fns[s](feeds)
        for r in range(args.rounds):
            k = r % max(len(order), 1)
            for s in order[k:] + order[:k]:
                for _ in range(args.iters):
                    t0 = time.perf_counter()
                    fns[s](feeds)
                    row_of[s]["samples_ms"].append((time.perf_counter() - t0) * 1e3)
                if args.gap_ms:
                    time.sleep(args.gap_ms / 1e3)  # let the last system's spinning workers go idle
        for s in order:
            smp = row_of[s]["samples_ms"]
            row_of[s].update(median_ms=float(np.median(smp)), min_ms=float(np.min(smp)), max_ms=float(np.max(smp)))
        peers = [row_of[s] for s in order if not s.startswith("inferx-")]
        if peers:
            best = min(peers, key=lambda r: r["median_ms"])
            for s in order:
                row_of[s]["best_peer"] = best["system"]
                row_of[s]["x_best_peer"] = row_of[s]["median_ms"] / best["median_ms"]
        summary = "  ".join(f"{s}={row_of[s]['median_ms']:.2f}" for s in order)
        log(f"{name} b{batch}: median ms  {summary}")
        del fns, feeds, ref
        gc.collect()
        try:
            import torch

            torch._dynamo.reset()
        except Exception:  # noqa: BLE001
            pass
    return rows


def machine_info(threads):
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    vers = {}
    for mod, dist in [("iree.runtime", "iree-base-runtime"), ("iree.compiler", "iree-base-compiler"),
                      ("onnxruntime", "onnxruntime"), ("onnx", "onnx"), ("torch", "torch"), ("numpy", "numpy")]:
        try:
            import importlib.metadata as md

            vers[dist] = md.version(dist)
        except Exception:  # noqa: BLE001
            vers[dist] = None
    try:
        rev = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip() or None
    except Exception:  # noqa: BLE001
        rev = None
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "threads": threads, "loadavg_at_end": os.getloadavg(), "python": platform.python_version(),
            "platform": platform.platform(), "versions": vers, "inferx_git": rev}


def torch_available():
    try:
        import torch  # noqa: F401

        return True
    except Exception:  # noqa: BLE001
        return False


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--zoo" in argv:  # the generality zoo (tools/bench/zoo.py): its own models, flags and report
        import zoo

        return zoo.main([a for a in argv if a != "--zoo"])
    p = argparse.ArgumentParser(description="inferx CPU benchmark against its peers (issue 4)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_const", dest="mode", const="quick", help="small models (default)")
    g.add_argument("--full", action="store_const", dest="mode", const="full", help="ResNet-50, BERT, GPT-2, MLP")
    g.add_argument("--smoke", action="store_const", dest="mode", const="smoke", help="tiny model, harness check")
    p.add_argument("--models", help=f"comma list from {', '.join(models.MODELS)} (default: the mode's set)")
    p.add_argument("--batches", help="comma list (default: each model's own)")
    p.add_argument("--systems", default=",".join(ALL_SYSTEMS), help="comma list from " + ", ".join(ALL_SYSTEMS))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int)
    p.add_argument("--iters", type=int, help="calls per system per round")
    p.add_argument("--warmup", type=int)
    p.add_argument("--gap-ms", type=float, default=20.0, help="pause after each system's calls in a round")
    p.add_argument("--tol", action="append", default=[], metavar="PREC=X", help="e.g. bf16=5e-2")
    p.add_argument("--cache", default=os.environ.get("INFERX_BENCH_CACHE", models.DEFAULT_CACHE))
    p.add_argument("--out", help="output folder (default docs/bench/<date>-<mode>)")
    p.add_argument("--recompile", action="store_true")
    p.add_argument("--no-chart", action="store_true")
    p.add_argument("--debug", action="store_true")
    args = p.parse_args(argv)
    args.mode = args.mode or "quick"
    mset, rounds, iters, warmup = MODES[args.mode]
    args.rounds = args.rounds or rounds
    args.iters = args.iters or iters
    args.warmup = warmup if args.warmup is None else args.warmup
    names = args.models.split(",") if args.models else mset
    tol = dict(DEFAULT_TOL)
    for t in args.tol:
        k, v = t.split("=")
        tol[k] = float(v)
    systems = [s for s in args.systems.split(",") if s]
    bad = [s for s in systems if s not in ALL_SYSTEMS]
    if bad:
        p.error(f"unknown systems {bad}; valid: {ALL_SYSTEMS}")
    # torch.compile's compile time must be a cold one: a fresh inductor cache for this run.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inferx-bench-inductor-")
    skipped = {}
    if not torch_available():
        for s in ("torch", "torch-compile"):
            if s in systems:
                systems.remove(s)
                skipped[s] = "torch is not installed"
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join(HERE, "..", "..", "docs", "bench", f"{date}-{args.mode}")
    os.makedirs(out, exist_ok=True)

    # One thread count for everyone; IREE's must be set before any HAL device exists.
    import iree.runtime as rt

    rt.flags.parse_flags(f"--task_topology_max_group_count={args.threads}")
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))

    t_start = time.time()
    runners = Runners(args.threads)
    rows = []
    for name in names:
        batches = [int(b) for b in args.batches.split(",")] if args.batches else list(models.MODELS[name][2])
        rows += bench_model(name, batches, systems, args, runners, tol)
        _write(out, args, rows, skipped, t_start, date, final=False)
    res = _write(out, args, rows, skipped, t_start, date, final=True)
    print(open(os.path.join(out, "results.md")).read())
    log(f"wrote {out} ({res})")
    return 0


def _write(out, args, rows, skipped, t_start, date, final):
    doc = {"date": date, "mode": args.mode, "command": " ".join(["python tools/bench/run.py"] + sys.argv[1:]),
           "machine": machine_info(args.threads), "rounds": args.rounds, "iters": args.iters, "warmup": args.warmup, "gap_ms": args.gap_ms,
           "tolerances": DEFAULT_TOL | {k.split("=")[0]: float(k.split("=")[1]) for k in args.tol},
           "loadavg_at_start": LOADAVG_AT_START, "skipped_systems": skipped, "elapsed_s": time.time() - t_start, "complete": final, "rows": rows}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    import report

    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(report.markdown(doc))
    if final and not args.no_chart:
        return report.chart(doc, os.path.join(out, "chart.png"))
    return "partial"


if __name__ == "__main__":
    sys.exit(main())
