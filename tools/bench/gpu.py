"""H200 comparison: inferx CUDA against plain IREE CUDA and PyTorch (eager, torch.compile).

Runs on the GPU host with no IREE compiler: the modules come from tools/bench/prepare_gpu.py
(run on the CPU host) in DIR; the weights are rebuilt here from tools/bench/models.py's seeds and
checked by sha256 (see prepare_gpu.py). Needs torch (CUDA), onnx, onnxruntime, numpy and
iree-base-runtime 3.13.0 (carried as a wheel in DIR/whl).

    python3 tools/bench/gpu.py --dir build/bench-gpu --out $OUT [--models mlp,bert] [--rounds 10]
    python3 tools/bench/gpu.py --dir build/bench-gpu --out /tmp/x --dry-run   # no GPU: rebuild + verify weights only

Systems: torch-fp32 and torch-fp16 (eager; TF32 off for fp32), torch-compile-fp16 (default mode),
torch-ro-fp16 (mode="reduce-overhead", CUDA graphs), iree-fp32 / iree-f16 (plain IREE CUDA,
f16 = contraction demotion flags), inferx-fp32 / inferx-fp16 (.ixa --target h200).
The torch systems run native torch.nn modules (tools/bench/torch_native.py: nn.Conv2d/Linear/
LayerNorm, F.gelu, scaled_dot_product_attention) holding the same weights, .half() for fp16 --
the baseline a torch user has, not the ONNX graph interpreted op by op (torch_impl.py, which the
CPU harness run.py still uses). For torch-ro-fp16 each row records cuda_graphs true/false with the
evidence (cudagraph_check: CUDAGraph.replay calls during a warmed-up call, inductor's cudagraph_skips
counter, the cudagraph tree's state), checked before and again after the timed rounds.
Each output is checked against onnxruntime fp32 on the CPU first; wrong ones are reported, not timed.
Two timings per system, interleaved in the same rounds:
  dev  inputs already on the GPU, outputs left there; the call returns when the result is ready
       (torch: cuda.synchronize; IREE: the synchronous invocation). For inferx this calls the
       loaded session's module directly (its runtime API copies host<->device on every call).
  h2h  numpy in, numpy out (host->device copy, compute, device->host copy): what `session.run`
       does; for GPT-2 this includes copying 25.7 MB of logits per sample.
Also measured once: device-to-device copy bandwidth (bytes read + written) and the bf16 GEMM rate
(8192^3); every batch-1 MLP row gets its bandwidth floor = weight bytes / copy bandwidth.
After timing, each system's calls are profiled through CUPTI (gpu_kernels.py, --kernels N calls):
kernels per call, kernel busy time, the call's GPU span and the top kernels (IREE's by dispatch).
Writes OUT/results.json (every sample), OUT/results.md, OUT/chart.png; after each model, so a
run cut short still leaves what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import models  # noqa: E402
from run import log, rel_l2  # noqa: E402  (the CPU harness's helpers; run.py travels with this file)

TOL = {"fp32": 1e-4, "fp16": 2e-2, "bf16": 3e-2, "int8": 0.1, "int4": 0.6}  # int8/int4: against broken code only (random weights)
SYSTEMS = ["torch-fp32", "torch-fp16", "torch-compile-fp16", "torch-ro-fp16", "iree-fp32", "iree-f16",
           "inferx-fp32", "inferx-fp16", "inferx-fp16-before", "inferx-fp16-nosplit",
           "inferx-fp16-norule", "inferx-fp32-nosplit", "inferx-fp16-nohopper", "inferx-int8", "inferx-int4"]




# stored weight bytes against fp32's (int8/int4: the integer weights; their scales are < 1%)
WEIGHT_BYTES_FACTOR = {"fp16": 0.5, "bf16": 0.5, "int8": 0.25, "int4": 0.125}


def _precision_of(system: str) -> str:
    if "bf16" in system:
        return "bf16"
    return "int8" if "int8" in system else "int4" if "int4" in system else "fp16" if "16" in system else "fp32"


def inferx_layout() -> str:
    """The repo's folders in installed layout (inferx_compiler.{passes,dialects,runtime}) in a temp dir."""
    dst = os.path.join(tempfile.gettempdir(), "inferx-bench-layout")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(os.path.join(REPO, "inferx_compiler"), os.path.join(dst, "inferx_compiler"))
    for d in ("passes", "dialects", "runtime"):
        shutil.copytree(os.path.join(REPO, d), os.path.join(dst, "inferx_compiler", d))
    sys.path.insert(0, dst)
    return dst


def sha(b) -> str:
    return hashlib.sha256(b).hexdigest()


# ----------------------------------------------------------------------------- weights
def rebuild(name, entry, work, with_inferx=True):
    """Rebuild model + weights; return (onnx path, {system: artifact path / param index}, problems)."""
    import onnx
    from onnx import numpy_helper

    if entry["spec"] != json.loads(json.dumps(models.MODELS[name][1])):
        return None, {}, [f"{name}: models.py spec changed since prepare_gpu.py ran"]
    m = models.build(name)
    arrays = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    problems = [k for k, h in entry["weights_sha256"].items()
                if k not in arrays or sha(np.ascontiguousarray(arrays[k]).tobytes()) != h]
    if problems:
        return None, {}, [f"{name}: {len(problems)} weights differ from the CPU host's (numpy stream?), "
                          f"e.g. {problems[:3]}"]
    onnx_path = os.path.join(work, f"{name}.onnx")
    onnx.save(m, onnx_path)
    out, notes = {}, []
    # plain IREE: in-memory parameter index under the importer's keys
    import iree.runtime as rt

    idx = rt.ParameterIndex()
    for k in entry["iree_param_keys"]:
        idx.add_buffer(k, np.ascontiguousarray(arrays[k]))
    out["iree-params"] = (idx, [arrays[k] for k in entry["iree_param_keys"]])
    if with_inferx:
        from inferx_compiler.artifact.archive import Manifest, write_artifact, write_parameter_archive
        from inferx_compiler.precision.quantization import materialize

        lifted = {i.name: arrays[i.name] for i in m.graph.initializer
                  if i.data_type in (1, 10, 11, 16) and int(np.prod(i.dims or [1])) >= 1024}
        for sysname, rec in entry["systems"].items():
            if not sysname.startswith("inferx-") or not rec.get("ok"):
                continue
            import zipfile

            with zipfile.ZipFile(os.path.join(ARGS.dir, rec["file"])) as z:
                manifest = Manifest.from_json(json.loads(z.read("manifest.json")))
                module, report = z.read(manifest.module), json.loads(z.read("report.json"))
            # the archive holds what the module reads: the lifted weights, or (int8/int4 layers)
            # the quantized arrays derived from them, computed by the same numpy code
            keys = (manifest.weights or {}).get("keys")
            weights = materialize(keys, lifted) if keys else lifted
            irpa = os.path.join(work, f"{name}.{sysname}.weights.irpa")
            write_parameter_archive(weights, irpa)
            with open(irpa, "rb") as f:
                irpa_sha = sha(f.read())
            os.remove(irpa)
            if irpa_sha != rec["weights_member_sha256"]:
                notes.append(f"{name} {sysname}: rebuilt weights.irpa sha256 differs from the manifest's; not run")
                continue
            ixa = os.path.join(work, f"{name}.{sysname}.ixa")
            write_artifact(ixa, manifest, module, weights, report)
            with open(ixa, "rb") as f:
                same = sha(f.read()) == rec["ixa_sha256"]
            if not same:
                notes.append(f"{name} {sysname}: re-assembled .ixa is not byte-identical (members verified; run anyway)")
            out[sysname] = ixa
    return onnx_path, out, notes


# ----------------------------------------------------------------------------- systems
class Sys:
    """One system for one model: .check(feeds) -> outputs (h2h), .h2h(feeds), .dev() after .stage(feeds)."""


def torch_system(name, onnx_model, kind):
    """A native torch.nn module (tools/bench/torch_native.py) with the ONNX model's weights, on cuda:0.

    torch-fp32 / torch-fp16: eager (model.half() for fp16); torch-compile-fp16: torch.compile default
    mode; torch-ro-fp16: mode="reduce-overhead" (inductor's CUDA-graph trees). Inputs are cast to the
    model's float dtype and uploaded (h2h) or staged on the device once (dev). For reduce-overhead,
    every invocation starts with torch.compiler.cudagraph_mark_step_begin() and no output is held
    across invocations: a replay overwrites the previous replay's outputs (they live in the graph's
    memory pool), and without the mark step an inference-only tree ends the previous "generation"
    only once all its outputs are dead -- holding one would make it record a new graph per call
    instead of replaying. s.cudagraph_check() (see there) says whether graphs are really replayed.
    """
    import torch

    import torch_native

    half = kind.endswith("fp16")
    ro = kind.startswith("torch-ro")
    compiled = kind.startswith(("torch-compile", "torch-ro"))
    base = _cg_counters()  # process-wide counters before this system compiles anything
    watch = _CudagraphLog() if compiled else None
    mod = torch_native.build(name, onnx_model).cuda()
    if half:
        mod = mod.half()
    if ro:
        fn = torch.compile(mod, mode="reduce-overhead", dynamic=False)
    elif compiled:
        fn = torch.compile(mod, dynamic=False)
    else:
        fn = mod
    s = Sys()
    s._keep = (mod, fn)

    def up(feeds):
        ts = []
        for k in mod.input_names:
            t = torch.from_numpy(feeds[k]).cuda()
            ts.append(t.half() if half and t.is_floating_point() else t)
        return ts

    def call(ts):
        with torch.inference_mode():
            if ro:
                torch.compiler.cudagraph_mark_step_begin()
            return fn(*ts)

    def h2h(feeds):
        return [o.float().cpu().numpy() for o in call(up(feeds))]  # copied out before the next replay

    def stage(feeds):
        s.staged = up(feeds)

    def dev():
        call(s.staged)  # outputs dropped at once (see the docstring)
        torch.cuda.synchronize()

    def check(warmup=None):
        if not compiled:
            return {"cuda_graphs": False, "cuda_graphs_reason": "eager (no torch.compile)"}
        ev = cudagraph_check(dev, base, watch, warmup=(2 if ro else 0) if warmup is None else warmup)
        if not ro:
            ev["cuda_graphs_reason"] = "mode=default (CUDA graphs not expected): " + ev["cuda_graphs_reason"]
        return ev

    s.h2h, s.stage, s.dev, s.cudagraph_check = h2h, stage, dev, check
    return s


# ----------------------------------------------------------------------------- CUDA-graph evidence
# How torch-ro-fp16 proves its CUDA graphs are captured and replayed (torch 2.11 .. 2.13 code,
# torch/_inductor/cudagraph_trees.py): mode="reduce-overhead" wraps each compiled graph in
# CUDAGraphTreeManager.run. A call is either warm-up (run_eager), a recording (record_function,
# which captures and leaves path_state RECORDING), a replay (execute_node -> CUDAGraphNode.run ->
# run_graph -> self.graph.replay(), path_state EXECUTION), or a silent eager fallback
# (`return self.ids_to_funcs[function_id].model(new_inputs)`, after input mutation or too many
# re-recordings; it leaves path_state as it was). Compile-time refusals (CPU ops, several devices,
# mutated inputs, ...) go through log_cudagraph_skip_and_bump_counter / BoxedBool.disable and bump
# torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] (the graph then runs as plain
# inductor code). So, for one call of the warmed-up system:
#   replays   torch.cuda.CUDAGraph.replay is wrapped by a counter for that one call only: the number
#             of graph launches it made. This is the exact signal; >= 1 is required (one per
#             dynamo graph: 1 for these break-free modules).
#   skips     counters["inductor"]["cudagraph_skips"] since the system was built: must be 0.
#   tree      the thread's tree manager for the device (cudagraph_trees.get_manager(dev,
#             create_if_none_exists=False)): path_state must be EXECUTION after the call and the
#             number of recorded CUDAGraphNodes (roots + children) must not grow during it (no
#             re-recording).
# Also recorded: counters["inductor"]["cudagraph_recorded_non_static_inputs"] (inputs copied into the
# graph on every replay: should be the 1 model input per recorded graph, i.e. parameters are static,
# not copied), dynamo graph breaks, and any "skipping cudagraphs ..." warning text. Not used: the
# torch profiler's cudaGraphLaunch events -- CUPTI left initialised after profiling slows later
# kernel launches (pytorch#144455) and has crashed with CUDA graphs, which would taint the timings.
class _CudagraphLog:
    """torch's cudagraph warnings ("skipping cudagraphs due to ...") logged since this was made.

    One handler on the "torch" logger, installed on first use, collects them for the whole run."""

    seen: list = []
    _installed = False

    def __init__(self):
        import logging

        if not _CudagraphLog._installed:
            class H(logging.Handler):
                def emit(self, record):
                    try:
                        msg = record.getMessage()
                    except Exception:  # noqa: BLE001
                        return
                    if "cudagraph" in record.name or "cudagraph" in msg.lower():
                        _CudagraphLog.seen.append(msg[:500])

            logging.getLogger("torch").addHandler(H(level=logging.WARNING))
            _CudagraphLog._installed = True
        self.start = len(_CudagraphLog.seen)

    @property
    def messages(self):
        return _CudagraphLog.seen[self.start:]


def _cg_counters():
    """(cudagraph_skips, cudagraph_recorded_non_static_inputs, dynamo graph breaks), process-wide."""
    from torch._dynamo.utils import counters

    return (counters["inductor"]["cudagraph_skips"], counters["inductor"]["cudagraph_recorded_non_static_inputs"],
            sum(counters["graph_break"].values()))


def _cg_tree():
    """{path_state, current_node, graphs_recorded} of this thread's cudagraph tree on the current device."""
    import torch
    from torch._inductor import cudagraph_trees

    mgr = cudagraph_trees.get_manager(torch.cuda.current_device(), create_if_none_exists=False)
    if mgr is None:
        return {"path_state": None, "current_node": None, "graphs_recorded": 0}
    n, stack = 0, [node for nodes in mgr.roots.values() for node in nodes]
    while stack:
        node = stack.pop()
        n += 1
        stack.extend(c for cs in node.children.values() for c in cs)
    return {"path_state": mgr.path_state.name, "current_node": type(mgr.current_node).__name__,
            "graphs_recorded": n}


def cudagraph_check(call_once, base, watch=None, warmup=2):
    """Run `call_once` (after `warmup` more calls) and report whether it replayed CUDA graphs."""
    import torch

    for _ in range(warmup):  # cudagraph trees: 1st call warm-up (eager), 2nd records, 3rd+ replay
        call_once()
    try:
        tree0 = _cg_tree()
    except Exception as e:  # noqa: BLE001
        tree0 = {"error": f"{type(e).__name__}: {e}"}
    cls = torch.cuda.CUDAGraph
    own = cls.__dict__.get("replay")
    replays = [0]
    orig = cls.replay

    def counted(self, *a, **k):
        replays[0] += 1
        return orig(self, *a, **k)

    cls.replay = counted
    try:
        call_once()
    finally:
        if own is not None:
            cls.replay = own
        else:
            del cls.replay
    try:
        tree = _cg_tree()
    except Exception as e:  # noqa: BLE001
        tree = {"error": f"{type(e).__name__}: {e}"}
    now = _cg_counters()
    skips, non_static, breaks = (a - b for a, b in zip(now, base))
    new_graphs = (tree.get("graphs_recorded") or 0) - (tree0.get("graphs_recorded") or 0)
    why = []
    if replays[0] < 1:
        why.append("no CUDAGraph.replay() during the call")
    if skips:
        why.append(f"cudagraph_skips={skips}")
    if new_graphs:
        why.append(f"the call recorded {new_graphs} new graph(s) (re-recording)")
    if tree.get("path_state") != "EXECUTION":
        why.append(f"tree path_state={tree.get('path_state')} (not EXECUTION)")
    if tree.get("error"):
        why.append(f"tree state unreadable: {tree['error']}")
    msgs = list(watch.messages) if watch else []
    ok = not why
    reason = (f"replayed {replays[0]} CUDA graph(s) per call; tree {tree.get('graphs_recorded')} recorded, "
              f"state {tree.get('path_state')}; 0 skips" if ok else "; ".join(why + msgs[:3]))
    return {"cuda_graphs": ok, "cuda_graphs_reason": reason, "cudagraph_replays_per_call": replays[0],
            "cudagraphs_recorded": tree.get("graphs_recorded"), "cudagraph_skips": skips,
            "cudagraph_non_static_inputs": non_static, "graph_breaks": breaks, "cudagraph_log": msgs[:5]}


_IREE_DEVICE = []


def iree_system(vmfb_path, params, input_names):
    import iree.runtime as rt

    if not _IREE_DEVICE:  # one CUDA HAL device for every plain-IREE module of the run
        _IREE_DEVICE.append(rt.get_driver("cuda").create_default_device())
    device = _IREE_DEVICE[0]
    inst = rt.VmInstance()
    idx, keep = params
    mods = [rt.create_hal_module(inst, device), rt.create_io_parameters_module(inst, idx.create_provider(scope="model"))]
    with open(vmfb_path, "rb") as f:
        mod = rt.VmModule.copy_buffer(inst, f.read())
    mods.append(mod)
    ctx = rt.VmContext(inst, modules=mods)
    fname = next(n for n in mod.function_names if not n.startswith("__") and not n.endswith("$async"))
    inv = rt.FunctionInvoker(ctx, device, mod.lookup_function(fname))
    s = Sys()
    s._keep = (keep, idx, inst, ctx)

    def h2h(feeds):
        r = inv(*[feeds[k] for k in input_names])
        r = r if isinstance(r, (tuple, list)) else (r,)
        return [x.to_host() for x in r]

    def stage(feeds):
        s.staged = [rt.asdevicearray(device, feeds[k]) for k in input_names]

    def dev():
        return inv(*s.staged)

    s.h2h, s.stage, s.dev = h2h, stage, dev
    return s


def inferx_system(ixa):
    import iree.runtime as rt

    import inferx_compiler

    sess = inferx_compiler.load(ixa, device="cuda")
    names = [spec.name for spec in sess.inputs]
    s = Sys()

    def h2h(feeds):
        return list(sess.run(feeds).values())

    def stage(feeds):
        try:  # what run() does first on a CUDA device (context current on this thread)
            from inferx_compiler.runtime.devices import bind_thread_to_device

            bind_thread_to_device(sess.device_spec)
        except ImportError:
            pass
        s.staged = [rt.asdevicearray(sess._device, feeds[k]) for k in names]

    def dev():
        return sess.call_device(s.staged)  # the module function for these shapes; no validation, no copies

    s.h2h, s.stage, s.dev = h2h, stage, dev
    return s


# ----------------------------------------------------------------------------- measurements
def card_ceilings():
    import torch

    n = 1 << 30
    x = torch.empty(n, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(20):
        y.copy_(x)
    e1.record()
    torch.cuda.synchronize()
    bw = 2 * n * 20 / (e0.elapsed_time(e1) / 1e3)
    del x, y
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    e0.record()
    for _ in range(10):
        a @ b
    e1.record()
    torch.cuda.synchronize()
    flops = 2 * 8192**3 * 10 / (e0.elapsed_time(e1) / 1e3)
    del a, b
    torch.cuda.empty_cache()
    return {"copy_bytes_per_s": bw, "bf16_gemm_flops": flops,
            "note": "copy: 1 GiB device-to-device x20, bytes read + written; GEMM: 8192^3 bf16 x10, random data"}


def _record_cudagraphs(row, sysobj, name, batch, after_timing=False):
    """Put cudagraph_check()'s evidence into the row (before timing), or its re-check after timing."""
    try:
        ev = sysobj.cudagraph_check(warmup=0 if after_timing else None)
    except Exception as e:  # noqa: BLE001
        ev = {"cuda_graphs": None, "cuda_graphs_reason": f"check failed: {type(e).__name__}: {e}"[:500]}
        traceback.print_exc()
    if not after_timing:
        row.update(ev)
        log(f"{name} b{batch}: {row['system']:20s} cuda_graphs={ev['cuda_graphs']} ({ev['cuda_graphs_reason']})")
        return
    row["cuda_graphs_after_timing"] = ev["cuda_graphs"]
    row["cudagraphs_recorded_after_timing"] = ev.get("cudagraphs_recorded")
    if row.get("cuda_graphs") and not ev["cuda_graphs"]:
        row["cuda_graphs_reason"] += f"; AFTER TIMING: {ev['cuda_graphs_reason']}"
    if row.get("cuda_graphs") and ev.get("cudagraphs_recorded") != row.get("cudagraphs_recorded"):
        row["cuda_graphs_reason"] += (f"; graphs recorded grew {row.get('cudagraphs_recorded')} -> "
                                      f"{ev.get('cudagraphs_recorded')} during timing (re-recording)")
    if row["system"].startswith("torch-ro"):
        log(f"{name} b{batch}: {row['system']:20s} after timing cuda_graphs={ev['cuda_graphs']} "
            f"recorded={ev.get('cudagraphs_recorded')}")


def bench_model(name, entry, systems, work, rows, ceilings):
    import onnx
    import onnxruntime as ort
    import torch

    onnx_path, built, notes = rebuild(name, entry, work)
    for n in notes:
        log(n)
    if onnx_path is None:
        for b in entry["batches"]:
            for s in systems:
                rows.append({"model": name, "batch": b, "system": s, "status": "error", "error": notes[0]})
        return notes
    model = onnx.load(onnx_path)
    input_names = [vi.name for vi in model.graph.input if vi.name not in {i.name for i in model.graph.initializer}]
    ref_sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    batches = [int(b) for b in ARGS.batches.split(",")] if ARGS.batches else entry["batches"]
    for batch in batches:
        feeds = models.feeds(onnx_path, batch)
        ref = ref_sess.run(None, feeds)
        live, row_of = {}, {}
        for s in systems:
            if s.startswith("inferx") and s not in entry["systems"]:
                continue  # a variant built for other models only
            prec = _precision_of(s)
            rec = entry["systems"].get(s, {})
            row = {"model": name, "batch": batch, "system": s, "precision": prec, "tol": TOL[prec],
                   "samples_ms": [], "h2h_samples_ms": []}
            row.update({k: rec.get(k) for k in ("compile_s", "peak_rss_mib", "artifact_bytes") if rec.get(k) is not None})
            rows.append(row)
            row_of[s] = row
            try:
                t0 = time.perf_counter()
                if s.startswith("torch"):
                    torch.backends.cuda.matmul.allow_tf32 = False
                    torch.backends.cudnn.allow_tf32 = False
                    sysobj = torch_system(name, model, s)
                elif s.startswith("iree"):
                    if not rec.get("ok"):
                        raise RuntimeError(f"not compiled: {(rec.get('error') or '')[-300:]}")
                    sysobj = iree_system(os.path.join(ARGS.dir, rec["file"]), built["iree-params"], input_names)
                else:
                    if s not in built:
                        raise RuntimeError(rec.get("error") or "artifact not rebuilt (see notes)")
                    sysobj = inferx_system(built[s])
                out = sysobj.h2h(feeds)
                first = time.perf_counter() - t0
                if s.startswith("torch-compile") or s.startswith("torch-ro"):
                    t1 = time.perf_counter()
                    sysobj.h2h(feeds)
                    row["compile_s"] = max(first - (time.perf_counter() - t1), 0.0)  # first call minus the second
                row["first_call_s"] = first
                err = max(rel_l2(g, r) for g, r in zip(out, ref)) if len(out) == len(ref) else float("inf")
                row["rel_l2"] = err
                row["status"] = "ok" if err <= row["tol"] else "wrong"
                log(f"{name} b{batch}: {s:20s} rel_l2={err:.2e} {row['status']}")
                if row["status"] == "ok":
                    sysobj.stage(feeds)
                    if s.startswith("torch"):
                        _record_cudagraphs(row, sysobj, name, batch)
                    live[s] = sysobj
            except Exception as e:  # noqa: BLE001
                row.update(status="error", error=f"{type(e).__name__}: {e}"[:2000])
                log(f"{name} b{batch}: {s} ERROR {row['error'][:400]}")
                traceback.print_exc()
        order = list(live)
        for s in order:
            for _ in range(ARGS.warmup):
                live[s].dev()
                live[s].h2h(feeds)
        for r in range(ARGS.rounds):
            k = r % max(len(order), 1)
            for s in order[k:] + order[:k]:
                for _ in range(ARGS.iters):
                    t0 = time.perf_counter()
                    live[s].dev()
                    row_of[s]["samples_ms"].append((time.perf_counter() - t0) * 1e3)
                for _ in range(ARGS.iters):
                    t0 = time.perf_counter()
                    live[s].h2h(feeds)
                    row_of[s]["h2h_samples_ms"].append((time.perf_counter() - t0) * 1e3)
        for s in order:  # did the timed calls stay on the captured graphs (no re-recording)?
            if s.startswith(("torch-compile", "torch-ro")):
                _record_cudagraphs(row_of[s], live[s], name, batch, after_timing=True)
        for s in order:
            row = row_of[s]
            for key, smp in (("", row["samples_ms"]), ("h2h_", row["h2h_samples_ms"])):
                row.update({f"{key}median_ms": float(np.median(smp)), f"{key}min_ms": float(np.min(smp)),
                            f"{key}max_ms": float(np.max(smp))})
        for key in ("", "h2h_"):
            peers = [row_of[s] for s in order if not s.startswith("inferx")]
            if peers:
                best = min(peers, key=lambda r: r[f"{key}median_ms"])
                for s in order:
                    row_of[s][f"{key}best_peer"] = best["system"]
                    row_of[s][f"{key}x_best_peer"] = row_of[s][f"{key}median_ms"] / best[f"{key}median_ms"]
        if ARGS.kernels:
            from gpu_kernels import profile_kernels

            for s in order:
                try:
                    row_of[s]["kernel_profile"] = profile_kernels(live[s].dev, ARGS.kernels)
                except Exception as e:  # noqa: BLE001
                    row_of[s]["kernel_profile"] = {"error": f"{type(e).__name__}: {e}"[:300]}
                kp = row_of[s]["kernel_profile"]
                if kp.get("kernels"):
                    log(f"{name} b{batch}: {s:20s} {kp['kernels']:.0f} kernels/call, busy {kp['gpu_busy_ms']:.3f} ms, "
                        f"span {kp['span_ms'] if kp['span_ms'] is None else round(kp['span_ms'], 3)} ms")
        if name.startswith("mlp") and batch == 1 and ceilings:
            for s in order:
                wb = entry["weight_bytes"] * WEIGHT_BYTES_FACTOR.get(_precision_of(s), 1.0)
                floor = wb / ceilings["copy_bytes_per_s"] * 1e3
                row_of[s].update(bandwidth_floor_ms=floor, x_bandwidth_floor=row_of[s]["median_ms"] / floor)
        log(f"{name} b{batch}: dev median ms " + "  ".join(f"{s}={row_of[s]['median_ms']:.3f}" for s in order))
        log(f"{name} b{batch}: h2h median ms " + "  ".join(f"{s}={row_of[s]['h2h_median_ms']:.3f}" for s in order))
        del live
        if ON_BATCH_DONE:
            ON_BATCH_DONE()
        gc.collect()
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    return notes


def write(doc, out):
    import report

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    dev_doc = dict(doc, rows=doc["rows"])
    h2h_rows = []
    for r in doc["rows"]:
        h = dict(r)
        for k in ("median_ms", "min_ms", "max_ms", "best_peer", "x_best_peer"):
            h[k] = r.get("h2h_" + k)
        h2h_rows.append(h)
    md = report.markdown(dev_doc).replace("## Latency, ms", "## Latency, ms, device-resident (dev)")
    h2h_md = report.markdown(dict(doc, rows=h2h_rows))
    h2h_table = h2h_md.split("## Latency, ms: median (min–max)")[1].split("## Correctness")[0]
    md += "\n## Latency, ms, host-to-host (h2h: numpy in, numpy out): median (min–max)\n" + h2h_table
    c = doc.get("ceilings")
    if c:
        md += (f"\n## Card ceilings (measured once)\n\ncopy {c['copy_bytes_per_s'] / 1e12:.2f} TB/s (read + write), "
               f"bf16 GEMM {c['bf16_gemm_flops'] / 1e12:.0f} TFLOP/s ({c['note']})\n")
        floors = [r for r in doc["rows"] if r.get("bandwidth_floor_ms")]
        if floors:
            md += "\n| model b1 | system | dev median ms | bandwidth floor ms | × floor |\n| --- | --- | --- | --- | --- |\n"
            for r in floors:
                md += f"| {r['model']} | {r['system']} | {r['median_ms']:.3f} | {r['bandwidth_floor_ms']:.3f} | {r['x_bandwidth_floor']:.2f} |\n"
    cg = [r for r in doc["rows"] if "cuda_graphs" in r and r["system"].startswith(("torch-ro", "torch-compile"))]
    if cg:
        md += ("\n## torch.compile: CUDA graphs really replayed? (tools/bench/gpu.py cudagraph_check)\n\n"
               "| model | batch | system | CUDA graphs | after timing | replays/call | graphs recorded | dev median ms | evidence |\n"
               "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
        for r in cg:
            med = f"{r['median_ms']:.3f}" if r.get("median_ms") is not None else "-"
            md += (f"| {r['model']} | {r['batch']} | {r['system']} | {r['cuda_graphs']} | {r.get('cuda_graphs_after_timing', '-')} "
                   f"| {r.get('cudagraph_replays_per_call', '-')} | {r.get('cudagraphs_recorded', '-')} | {med} "
                   f"| {str(r.get('cuda_graphs_reason', '')).replace('|', '/')[:300]} |\n")
    import gpu_kernels

    md += gpu_kernels.markdown(doc["rows"])
    if doc.get("notes"):
        md += "\n## Notes\n\n" + "\n".join(f"- {n}" for n in doc["notes"]) + "\n"
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(md)
    if doc.get("complete"):
        try:
            report.chart(dev_doc, os.path.join(out, "chart.png"))
        except Exception as e:  # noqa: BLE001
            log(f"chart failed: {e}")


def main(argv=None) -> int:
    global ARGS, ON_BATCH_DONE
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", default=os.path.join(REPO, "build", "bench-gpu"))
    p.add_argument("--out", default=os.environ.get("OUT", "bench-gpu-out"))
    p.add_argument("--models", help="comma list (default: all in DIR/bench.json)")
    p.add_argument("--batches", help="override every model's batches")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--kernels", type=int, default=20,
                   help="calls profiled per system for the per-kernel table (CUPTI); 0: none")
    p.add_argument("--cuda-flags", default="",
                   help="IREE CUDA driver flags for the whole run, e.g. '--cuda_use_streams=false' (CUDA graphs)")
    p.add_argument("--dry-run", action="store_true", help="no GPU: rebuild and verify the weights/artifacts only")
    ARGS = p.parse_args(argv)
    if ARGS.cuda_flags:  # before any CUDA HAL driver exists: IREE reads them when it creates the driver
        import iree.runtime as rt

        rt.flags.parse_flags(*ARGS.cuda_flags.split())
    with open(os.path.join(ARGS.dir, "bench.json")) as f:
        bench = json.load(f)
    inferx_layout()
    names = ARGS.models.split(",") if ARGS.models else list(bench["models"])
    work = tempfile.mkdtemp(prefix="bench-gpu-")
    t_start = time.time()
    if ARGS.dry_run:
        ok = True
        for n in names:
            path, built, notes = rebuild(n, bench["models"][n], work)
            log(f"{n}: {'rebuilt ' + ', '.join(sorted(built)) if path else 'FAILED'}; {notes or 'all sha256 match'}")
            ok &= path is not None and not notes
        return 0 if ok else 1
    # torch.compile's compile time must be a cold one: a fresh inductor cache for this run.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inferx-bench-inductor-")
    import torch

    systems = [s for s in ARGS.systems.split(",") if s]
    dev_name = torch.cuda.get_device_name(0)
    log(f"device {dev_name}, torch {torch.__version__}")
    ceilings = card_ceilings()
    log(f"copy {ceilings['copy_bytes_per_s'] / 1e12:.2f} TB/s, bf16 GEMM {ceilings['bf16_gemm_flops'] / 1e12:.0f} TFLOP/s")
    vers = {}
    import importlib.metadata as md

    for d in ("torch", "onnxruntime", "onnx", "numpy", "iree-base-runtime"):
        try:
            vers[d] = md.version(d)
        except Exception:  # noqa: BLE001
            vers[d] = None
    doc = {"date": datetime.date.today().isoformat(), "mode": "gpu",
           "command": " ".join(["tools/bench/gpu.py"] + (argv if argv is not None else sys.argv[1:])),
           "machine": {"cpu": os.uname().nodename, "device": dev_name, "logical_cpus": os.cpu_count(), "threads": "-",
                       "versions": vers},
           "rounds": ARGS.rounds, "iters": ARGS.iters, "warmup": ARGS.warmup, "tolerances": TOL,
           "ceilings": ceilings, "iree_cuda_flags": ARGS.cuda_flags, "prepared": {k: bench[k] for k in ("target", "cuda_flags", "f16_flags")},
           "rows": [], "notes": [], "complete": False}
    def flush():
        doc["elapsed_s"] = time.time() - t_start
        write(doc, ARGS.out)

    ON_BATCH_DONE = flush
    for n in names:
        doc["notes"] += bench_model(n, bench["models"][n], systems, work, doc["rows"], ceilings)
        doc["elapsed_s"] = time.time() - t_start
        write(doc, ARGS.out)
    doc["complete"] = True
    write(doc, ARGS.out)
    print(open(os.path.join(ARGS.out, "results.md")).read())
    shutil.rmtree(work, ignore_errors=True)
    return 0


ARGS = None
ON_BATCH_DONE = None  # set by main: rewrite OUT after every (model, batch)

if __name__ == "__main__":
    sys.exit(main())
