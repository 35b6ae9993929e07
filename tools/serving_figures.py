"""Serving figures: batching vs. none at the same p99 budget, vs. the best static batch, and
the batcher's own overhead per request.

    python tools/serving_figures.py ART.ixa [ART2.ixa ...] [--device cpu:sync] [--out DIR]

For each artifact (with --batch-sizes buckets):
  * static: one caller, fixed batch b, rows/s for every bucket -> the best static batch; and
    fixed full batches through the same server path at each process count;
  * load sweep: closed loop, single-row requests, with k x max_batch_size x instances clients
    per server process for k in --load-steps (default 0.5,1,1.5,2), at each process count in
    --processes (each process has its own sessions, batcher and interpreter). Saturation is the
    knee of that curve: the step with the fewest clients in all whose throughput reaches 90% of
    the most any step reached (past it, more clients only queue: latency grows by Little's law,
    N / throughput, while throughput stays). At every step, p99 is checked against
    max_queue_delay + 2 x the batch execution time, that time taken two ways: the largest
    bucket's run alone (static) and the median batch run in that step (gather + run);
  * same p99 budget (--p99-budget-ms, default 10): open-loop rates swept up, with one server
    process and with the best count at saturation; the highest rate whose p99 stays within it,
    with and without batching;
  * overhead: a trivial model, per request, batcher (max batch 1, no delay) minus direct call.

Front ends (--front-ends): the trivial model through `inferx-serve` over HTTP (JSON; wrk) and
gRPC (h2load: unary ModelInfer calls, and ModelStreamInfer calls of --stream-requests
each), with one and several worker processes, beside the same artifact driven in
process (`inferx-bench`) and the previous server (runtime/server.py, kserve.py and metrics.py
as of --old-rev, loaded from git into a temporary package) and the front-end libraries alone
(uvicorn and grpc.aio answering a fixed response: the floor under any server built on them),
all measured in the same run with the same batching flags:

    python tools/serving_figures.py --front-ends [--trivial T.ixa] [--workers 1,2]
        [--concurrency 16,64,256] [--stream-requests 16] [--duration 5] [--old-rev 1016ad7] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np


def _static(session, sizes, rounds=15):
    """One caller running each bucket back to back: {size: {exec_ms, rows_per_s}}."""
    from inferx_compiler.runtime.bucket_table import measure_session

    return {r["size"]: {"exec_ms": r["latency_ms"], "rows_per_s": r["size"] / (r["latency_ms"] * 1e-3)}
            for r in measure_session(session, sizes, rounds, warmup=3)}


def _bench(artifact, device, extra):
    import contextlib
    import io

    from inferx_compiler.cli.bench import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main([artifact, "--device", device, "--json", "--warmup", "0.5", *extra])
    if rc != 0:
        raise SystemExit(f"inferx-bench failed on {artifact} ({rc})")
    return json.loads(buf.getvalue())


def _max_rate_within(artifact, device, budget_ms, start_rps, batching, duration, bench_args):
    best, rate = None, start_rps
    for _ in range(14):  # up to 0.3 x b1's rate x 1.6^13 (about 135x): until the budget breaks
        r = _bench(artifact, device, ["--rate", f"{rate:.1f}", "--duration", str(duration), *bench_args]
                   + ([] if batching else ["--no-batching"]))
        ok = r["p99_ms"] <= budget_ms and r["throughput_rps"] >= 0.9 * rate
        print(f"    rate {rate:8.1f} req/s batching={'on ' if batching else 'off'} -> "
              f"{r['throughput_rps']:8.1f} req/s p99 {r['p99_ms']:7.2f} ms {'ok' if ok else 'over'}", flush=True)
        if not ok:
            break
        best, rate = r, rate * 1.6
    return best


def build_trivial(target: str, out: str) -> str:
    """y = x + 1 on 4 floats: a model whose run time is all overhead."""
    import onnx
    from onnx import TensorProto, helper

    import inferx_compiler

    tmp = tempfile.mkdtemp()
    g = helper.make_graph([helper.make_node("Add", ["x", "one"], ["y"])], "trivial",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{tmp}/t.onnx")
    inferx_compiler.compile_onnx(f"{tmp}/t.onnx", target=target, output=out)
    return out


def overhead_us(trivial_artifact: str, device: str) -> dict:
    """Per-request cost of the batcher on a trivial model."""
    import inferx_compiler
    from inferx_compiler.runtime.batching import BatchingConfig, DynamicBatcher

    sess = inferx_compiler.load(trivial_artifact, device=device)
    feeds = {"x": np.ones((1, 4), np.float32)}
    batcher = DynamicBatcher.for_session(sess, BatchingConfig(max_batch_size=1, max_queue_delay_us=0))
    noop = DynamicBatcher(lambda f: {"y": f["x"]}, sess.inputs, BatchingConfig(max_batch_size=1, max_queue_delay_us=0))
    ways = {"direct": lambda: sess.run(feeds), "run": lambda: batcher.run(feeds),
            "future": lambda: batcher.submit(feeds).result(), "noop": lambda: noop.submit(feeds).result()}
    samples = {k: [] for k in ways}
    for _ in range(200):  # warm-up
        for fn in ways.values():
            fn()
    for _ in range(15):  # interleaved rounds: the same machine state for every way
        for k, fn in ways.items():
            t0 = time.perf_counter()
            for _ in range(200):
                fn()
            samples[k].append((time.perf_counter() - t0) / 200 * 1e6)
    batcher.close()
    noop.close()
    direct, batched, via_future, pure = (float(np.median(samples[k])) for k in ("direct", "run", "future", "noop"))
    return {"direct_run_us": direct, "through_batcher_us": batched, "overhead_us": batched - direct,
            "through_future_us": via_future, "future_overhead_us": via_future - direct,
            "batcher_alone_noop_model_us": pure}


KNEE = 0.9  # saturation: the fewest clients reaching this share of the sweep's best throughput


def _sweep(artifact, device, duration, bench_args, processes, clients_per_step, bound) -> list[dict]:
    """Closed-loop steps at one process count; each with its p99 bounds."""
    steps = []
    for clients in clients_per_step:
        r = _bench(artifact, device, ["--concurrency", str(clients * processes), "--duration", str(duration),
                                      "--processes", str(processes), *bench_args])
        step = {k: r[k] for k in ("throughput_rps", "p50_ms", "p95_ms", "p99_ms", "mean_batch", "padding_waste",
                                  "median_batch_exec_ms", "median_batch_service_ms", "p99_batch_exec_ms")}
        step.update(clients_per_process=clients, processes=processes, concurrency=clients * processes,
                    p99_bound_static_ms=bound(None), p99_bound_in_run_ms=bound(r["median_batch_exec_ms"]))
        step["within_static_bound"] = step["p99_ms"] <= step["p99_bound_static_ms"]
        step["within_in_run_bound"] = step["p99_ms"] <= step["p99_bound_in_run_ms"]
        steps.append(step)
        print(f"    {processes}p x {clients:4d} clients: {r['throughput_rps']:9.0f} req/s, mean batch "
              f"{r['mean_batch']:5.1f}, p50/p99 {r['p50_ms']:6.2f}/{r['p99_ms']:6.2f} ms, batch "
              f"{r['median_batch_exec_ms']:.2f} ms, bound static/in-run {step['p99_bound_static_ms']:.2f}/"
              f"{step['p99_bound_in_run_ms']:.2f} ms", flush=True)
    return steps


def knee(steps: list[dict]) -> dict:
    """Where the device saturates: of all steps (any process count), the one with the fewest
    clients in all whose throughput is within KNEE of the best any step reached (ties: fewer
    processes)."""
    best = max(s["throughput_rps"] for s in steps)
    return min((s for s in steps if s["throughput_rps"] >= KNEE * best),
               key=lambda s: (s["concurrency"], s["processes"]))


def figures(artifact: str, device: str, duration: float, budget_ms: float, bench_args: list,
            processes: list[int], load_steps: list[float], instances: int) -> dict:
    import inferx_compiler
    from inferx_compiler.runtime.bucket_table import default_batching, serving_buckets

    sess = inferx_compiler.load(artifact, device=device)
    buckets = serving_buckets(sess)
    if not buckets:
        raise SystemExit(f"{artifact}: compile it with --batch-sizes first")
    config, sizes = default_batching(buckets)
    static = _static(sess, sizes)
    best_b = max(static, key=lambda b: static[b]["rows_per_s"])
    print("  static: " + ", ".join(f"b{b} {v['rows_per_s']:.0f} rows/s ({v['exec_ms']:.2f} ms)"
                                    for b, v in static.items()), flush=True)
    delay_ms = config.max_queue_delay_us / 1e3
    largest_ms = static[max(sizes)]["exec_ms"]

    def bound(in_run_ms):
        return delay_ms + 2 * (largest_ms if in_run_ms is None else in_run_ms)

    clients_per_step = sorted({max(1, round(k * config.max_batch_size * instances)) for k in load_steps})
    sweeps, static_by_processes = {}, {}
    for n in processes:
        # fixed full batches through the same server path: the device's capacity at n processes
        fixed = _bench(artifact, device, ["--rows", str(best_b), "--no-batching", "--concurrency",
                                          str(2 * instances * n), "--duration", str(duration),
                                          "--processes", str(n), *bench_args])
        static_by_processes[n] = fixed["throughput_rps"] * best_b
        print(f"  {n} process(es): static b{best_b} {static_by_processes[n]:.0f} rows/s", flush=True)
        sweeps[n] = _sweep(artifact, device, duration, bench_args, n, clients_per_step, bound)
    sat = knee([step for steps in sweeps.values() for step in steps])
    best_n = sat["processes"]
    print(f"  saturation (knee at {best_n} process(es), {sat['concurrency']} clients): "
          f"{sat['throughput_rps']:.0f} req/s, mean batch {sat['mean_batch']:.1f}, p50/p99 "
          f"{sat['p50_ms']:.2f}/{sat['p99_ms']:.2f} ms (bound {sat['p99_bound_static_ms']:.2f} static, "
          f"{sat['p99_bound_in_run_ms']:.2f} in-run); best static b{best_b} "
          f"{static[best_b]['rows_per_s']:.0f} rows/s", flush=True)
    print(f"  p99 budget {budget_ms:.2f} ms: sweeping open-loop rates", flush=True)
    start = 0.3 * static[1]["rows_per_s"]
    rates = {}  # (batching, processes) -> best result; one process and the best count at saturation
    for n in sorted({1, best_n}):
        for batching in (True, False):
            rates[batching, n] = _max_rate_within(artifact, device, budget_ms, start, batching, duration,
                                                  [*bench_args, "--processes", str(n)])
    with_b, without = (max((r for (b, _), r in rates.items() if b == mode and r),
                           key=lambda r: r["throughput_rps"], default=None) for mode in (True, False))
    result = {"artifact": os.path.basename(artifact), "device": device, "instances": instances,
              "config": {"max_batch_size": config.max_batch_size, "max_queue_delay_us": config.max_queue_delay_us,
                         "preferred_batch_sizes": list(config.preferred_batch_sizes)},
              "static": static, "best_static_batch": best_b, "static_by_processes": static_by_processes,
              "load_sweep": sweeps, "p99_budget_ms": budget_ms,
              "max_rate_within_budget": {"batching": with_b and with_b["throughput_rps"],
                                         "no_batching": without and without["throughput_rps"],
                                         "batching_processes": with_b and with_b["processes"],
                                         "no_batching_processes": without and without["processes"]}}
    return with_saturation(result)


def with_saturation(result: dict) -> dict:
    """Add the saturation point (the knee of the load sweep) and its ratios to static batches;
    also applied to a saved JSON (--redo), whose integer keys came back as strings."""
    steps = [step for sweep in result["load_sweep"].values() for step in sweep]
    sat = knee(steps)
    n, best_b = sat["processes"], result["best_static_batch"]
    static_1 = _by_int(result["static"], best_b)["rows_per_s"]
    static_n = _static_at(result, n)
    result.update({"saturation": sat, "processes": n, "knee_share": KNEE,
                   "saturation_vs_best_static": sat["throughput_rps"] / static_1,
                   "static_same_processes_rows_per_s": static_n,
                   "saturation_vs_static_same_processes": sat["throughput_rps"] / static_n})
    return result


def _by_int(table: dict, key: int):
    return table[key] if key in table else table[str(key)]


def to_markdown(results: list[dict], overhead: dict) -> str:
    lines = ["| artifact | device (instances) | best static, 1 caller (rows/s) | processes × clients at the knee | static b, same processes (rows/s) | batcher at saturation (req/s) | ratio to static, same processes / 1 caller | p50 / p99 at sat. (ms) | p99 bound, delay + 2 × batch time: static / in-run (ms) | p99 within bound | max rate within p99 budget: batching / none (req/s) | budget (ms) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        b = r["best_static_batch"]
        mr = r["max_rate_within_budget"]
        sat = r["saturation"]
        best = _by_int(r["static"], b)
        rate = lambda v, n: f"{v:.0f} ({n}p)" if v else "—"
        within = "yes" if sat["within_in_run_bound"] else "no"
        within += " / yes" if sat["within_static_bound"] else " / no"
        lines.append(f"| {r['artifact']} | {r['device']} ({r['instances']}) | b{b}: {best['rows_per_s']:.0f} | "
                     f"{r['processes']} × {sat['clients_per_process']} | {r['static_same_processes_rows_per_s']:.0f} | "
                     f"{sat['throughput_rps']:.0f} (mean batch {sat['mean_batch']:.1f}) | "
                     f"{r['saturation_vs_static_same_processes']:.2f} / {r['saturation_vs_best_static']:.2f} | "
                     f"{sat['p50_ms']:.2f} / {sat['p99_ms']:.2f} | {sat['p99_bound_static_ms']:.2f} / "
                     f"{sat['p99_bound_in_run_ms']:.2f} | {within} (in-run / static) | "
                     f"{rate(mr['batching'], mr['batching_processes'])} / "
                     f"{rate(mr['no_batching'], mr['no_batching_processes'])} | {r['p99_budget_ms']:.1f} |")
    lines += ["", "Load sweep (closed loop, single-row requests; * = the knee):", "",
              "| artifact | processes × clients | req/s | ratio to static, same processes | mean batch | p50 / p99 (ms) | batch run, median (ms) | p99 bound static / in-run (ms) | p99 / in-run bound |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        sat = r["saturation"]
        for n, steps in sorted(((int(n), v) for n, v in r["load_sweep"].items())):
            static = _static_at(r, n)
            for st in steps:
                mark = " *" if n == r["processes"] and st["concurrency"] == sat["concurrency"] else ""
                lines.append(f"| {r['artifact']} | {n} × {st['clients_per_process']}{mark} | {st['throughput_rps']:.0f} | "
                             f"{st['throughput_rps'] / static:.2f} | {st['mean_batch']:.1f} | "
                             f"{st['p50_ms']:.2f} / {st['p99_ms']:.2f} | {st['median_batch_exec_ms']:.2f} | "
                             f"{st['p99_bound_static_ms']:.2f} / {st['p99_bound_in_run_ms']:.2f} | "
                             f"{st['p99_ms'] / st['p99_bound_in_run_ms']:.2f} |")
    lines.append("")
    if overhead.get("cpu_workers"):
        lines.append(f"IREE CPU workers: {overhead['cpu_workers']}.")
    lines.append(f"Batcher overhead per request (trivial model, {overhead['device']}): "
                 f"{overhead['overhead_us']:.1f} µs with run() (direct run {overhead['direct_run_us']:.1f} µs, through "
                 f"the batcher {overhead['through_batcher_us']:.1f} µs); {overhead['future_overhead_us']:.1f} µs "
                 f"with submit().result(); batcher alone with a no-op model "
                 f"{overhead['batcher_alone_noop_model_us']:.1f} µs round trip)")
    return "\n".join(lines)


def _static_at(result: dict, processes: int) -> float:
    """Fixed full batches through the server path at this process count."""
    return _by_int(result["static_by_processes"], processes)


def plot(results: list[dict], device: str, path: str) -> str:
    """Per model, process count and clients per process ("64c"): p99 over its bound (delay + 2 x
    the step's batch run; 1.0 or less meets it), labelled with the step's throughput over static
    full batches at the same process count ("0.87x")."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench.report import bar_chart

    bars = []
    for r in results:
        for n, steps in sorted(((int(n), v) for n, v in r["load_sweep"].items())):
            static = _static_at(r, n)
            for st in steps:
                bars.append((f"{r['artifact']} {n}p", f"inferx {st['clients_per_process']}c "
                             f"{st['throughput_rps'] / static:.2f}x",
                             st["p99_ms"] / st["p99_bound_in_run_ms"], "ok"))
    return bar_chart(bars, f"p99 / (delay + 2 x batch time), by load; label: clients per process, "
                           f"share of static ({device})", path)


def write(results: list[dict], overhead: dict, out: str, device: str) -> str:
    """serving_DEVICE.{json,md,png} in `out` (cpu:sync -> serving_cpu-sync.*)."""
    md = to_markdown(results, overhead)
    os.makedirs(out, exist_ok=True)
    stem = os.path.join(out, "serving_" + device.replace(":", "-"))
    with open(stem + ".json", "w") as f:
        json.dump({"results": results, "overhead": overhead}, f, indent=1, default=str)
    with open(stem + ".md", "w") as f:
        f.write(md + "\n")
    plot(results, device, stem + ".png")
    return md


def redo(path: str) -> int:
    with open(path) as f:
        doc = json.load(f)
    results = [with_saturation(r) for r in doc["results"]]
    device = results[0]["device"]
    print(write(results, doc["overhead"], os.path.dirname(os.path.abspath(path)), device))
    return 0


OLD_RUNNER = """
import signal, sys
sys.path.insert(0, {root!r})
from inferx_old_server.server import InferenceServer
from inferx_compiler.runtime.service import Service, ServiceOptions
srv = InferenceServer(Service({artifact!r}, ServiceOptions(instances={instances})), "trivial", port=0)
signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
print("serving trivial on " + srv.url, flush=True)
try:
    srv.serve_forever()
except KeyboardInterrupt:
    pass
"""


# The front-end libraries alone: a fixed answer to every infer request, no model, no checks,
# on the same event loop kind (uvloop) as inferx-serve: what uvicorn and grpc.aio cost a request.
FLOOR_RUNNER = """
import asyncio, socket, sys
import grpc, uvicorn, uvloop
from tritonclient.grpc import service_pb2 as pb, service_pb2_grpc as pbg

ANSWER = b'{"model_name":"trivial","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[1,4],"data":[1.0,1.0,1.0,1.0]}]}'


async def http_app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]})
    await send({"type": "http.response.body", "body": ANSWER})


def answer():
    response = pb.ModelInferResponse(model_name="trivial", model_version="1")
    response.outputs.add(name="y", datatype="FP32", shape=[1, 4])
    response.raw_output_contents.append(bytes(16))
    return response


class Servicer(pbg.GRPCInferenceServiceServicer):
    async def ModelInfer(self, request, context):
        return answer()

    async def ModelStreamInfer(self, request_iterator, context):
        async for request in request_iterator:
            yield pb.ModelStreamInferResponse(infer_response=answer())


async def main():
    server = grpc.aio.server()
    pbg.add_GRPCInferenceServiceServicer_to_server(Servicer(), server)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(http_app, loop="none", lifespan="off", access_log=False, log_config=None,
                            log_level="warning", http="httptools")
    http = uvicorn.Server(config)
    task = asyncio.create_task(http.serve(sockets=[sock]))
    while not http.started:
        await asyncio.sleep(0.01)
    print(f"serving trivial on http://127.0.0.1:{sock.getsockname()[1]} and grpc://127.0.0.1:{grpc_port}", flush=True)
    await task


uvloop.install()
asyncio.run(main())
"""


def _old_server_package(rev: str) -> str:
    """runtime/server.py, kserve.py and metrics.py as of `rev`, as package inferx_old_server in a
    temporary folder (its batch_queue import goes to the current runtime's)."""
    import subprocess

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    root = tempfile.mkdtemp(prefix="inferx-old-server-")
    pkg = os.path.join(root, "inferx_old_server")
    os.makedirs(pkg)
    for name in ("server.py", "kserve.py", "metrics.py"):
        text = subprocess.run(["git", "-C", repo, "show", f"{rev}:runtime/{name}"], capture_output=True, text=True,
                              check=True).stdout
        with open(os.path.join(pkg, name), "w") as f:
            f.write(text)
    with open(os.path.join(pkg, "batch_queue.py"), "w") as f:
        f.write("from inferx_compiler.runtime.batch_queue import *  # noqa: F401,F403\n")
    open(os.path.join(pkg, "__init__.py"), "w").close()
    return root


def _start(cmd: list, pattern: str):
    """Start a server process; wait for its `serving ...` line; (process, match)."""
    import re
    import subprocess

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = re.match(pattern, line.strip())
    if not match:
        proc.kill()
        raise SystemExit(f"server did not start: {line}{proc.stderr.read()}")
    return proc, match


def _stop(proc) -> None:
    import signal

    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except Exception:  # noqa: BLE001
        proc.kill()
        proc.wait()


def front_end_figures(trivial: str, workers: list[int], concurrency: list[int], duration: float, old_rev: str,
                      instances: int, per_stream: int = 16) -> dict:
    """Requests/s and p50/p99 on the trivial model: in process, the previous server (HTTP), and
    inferx-serve over HTTP (JSON) and gRPC (unary calls, and `per_stream` requests a
    ModelStreamInfer call) at each worker count; the same batching flags."""
    import json as _json
    import urllib.request

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import http_load

    sys.path.pop(0)
    rows = []

    def record(server, protocol, n_workers, result):
        row = {"server": server, "protocol": protocol, "workers": n_workers, **result}
        rows.append(row)
        print(f"  {server:28s} {protocol:12s} {n_workers}w c={row['concurrency']:4d}: "
              f"{row['throughput_rps']:9.0f} req/s  p50 {row['p50_ms']:7.2f} ms  p99 {row['p99_ms']:7.2f} ms  "
              f"errors {row.get('errors', 0)}", flush=True)

    def meta_of(url):
        return _json.loads(urllib.request.urlopen(url + "/v2/models/trivial", timeout=30).read())

    def meta_of_floor():  # the trivial model's interface, for the servers that have no model
        return {"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]}

    # in process: inferx-bench, closed loop, the same Service options
    for c in concurrency:
        r = _bench(trivial, "cpu", ["--instances", str(instances), "--concurrency", str(c), "--duration",
                                    str(duration)])
        record("in process (inferx-bench)", "Python call", 1, {k: r[k] for k in ("throughput_rps", "p50_ms", "p99_ms")}
               | {"concurrency": c, "errors": r["errors"], "client": f"{c} threads in the server process"})
    # the previous server, one process
    root = _old_server_package(old_rev)
    runner = OLD_RUNNER.format(root=root, artifact=trivial, instances=instances)
    proc, m = _start([sys.executable, "-c", runner], r"serving trivial on (http://\S+)$")
    try:
        url = m.group(1)
        body, headers = http_load._request(meta_of(url), 1, seed=0, binary=False)
        for c in concurrency:
            record(f"previous server ({old_rev})", "HTTP JSON", 1,
                   http_load.wrk(url, "/v2/models/trivial/infer", body, headers, c, duration))
    finally:
        _stop(proc)
    # the front-end libraries alone (a fixed answer, no model): the floor under inferx-serve's cost
    proc, m = _start([sys.executable, "-c", FLOOR_RUNNER], r"serving trivial on (http://\S+) and grpc://(\S+)$")
    try:
        url, address = m.group(1), m.group(2)
        body, headers = http_load._request(meta_of_floor(), 1, seed=0, binary=False)
        for c in concurrency:
            record("uvicorn alone (fixed answer)", "HTTP JSON", 1,
                   http_load.wrk(url, "/v2/models/trivial/infer", body, headers, c, duration))
        grpc_body = http_load.grpc_body(meta_of_floor(), "trivial", 1)
        for c in concurrency:
            record("grpc.aio alone (fixed answer)", "gRPC", 1, http_load.h2load_grpc(address, grpc_body, c, duration))
        for c in concurrency:
            record("grpc.aio alone (fixed answer)", f"gRPC stream x{per_stream}", 1,
                   http_load.h2load_grpc(address, grpc_body, c, duration, per_stream=per_stream))
    finally:
        _stop(proc)
    # inferx-serve, HTTP and gRPC, at each worker count
    for n in workers:
        cmd = [sys.executable, "-c", "import sys; sys.path.pop(0); from inferx_compiler.cli.serve import main; "
               "sys.exit(main())", trivial, "--name", "trivial", "--port", "0", "--grpc-port", "0",
               "--instances", str(instances), "--workers", str(n)]
        proc, m = _start(cmd, r"serving trivial on (http://\S+) and grpc://(\S+?)( \(\d+ workers\))?$")
        try:
            url, address = m.group(1), m.group(2)
            meta = meta_of(url)
            body, headers = http_load._request(meta, 1, seed=0, binary=False)
            for c in concurrency:
                record("inferx-serve", "HTTP JSON", n, http_load.wrk(url, "/v2/models/trivial/infer", body, headers,
                                                                     c, duration))
            body, headers = http_load._request(meta, 1, seed=0, binary=True)
            record("inferx-serve", "HTTP binary", n, http_load.wrk(url, "/v2/models/trivial/infer", body, headers,
                                                                   concurrency[len(concurrency) // 2], duration))
            grpc_body = http_load.grpc_body(meta, "trivial", 1)
            for protocol, k in (("gRPC", 1), (f"gRPC stream x{per_stream}", per_stream)):
                for c in concurrency:
                    before = http_load._batch_figures(url)
                    r = http_load.h2load_grpc(address, grpc_body, c, duration, per_stream=k)
                    after = http_load._batch_figures(url)
                    r["server_ok_requests"] = after["ok"] - before["ok"]  # gRPC failures show here, not in h2load
                    r["errors"] += max(0, r["requests"] - r["server_ok_requests"])
                    record("inferx-serve", protocol, n, r)
        finally:
            _stop(proc)
    return {"rows": rows, "duration_s": duration, "instances": instances, "old_rev": old_rev,
            "cpus": os.cpu_count(), "cpu_model": _cpu_model()}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


def front_ends_markdown(doc: dict) -> str:
    lines = ["| server | protocol | workers | concurrency | requests/s | p50 (ms) | p99 (ms) | errors | client |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc["rows"]:
        lines.append(f"| {r['server']} | {r['protocol']} | {r['workers']} | {r['concurrency']} | "
                     f"{r['throughput_rps']:,.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r.get('errors', 0)} | "
                     f"{r.get('client', '')} |")
    lines.append("")
    lines.append(f"{doc['cpus']} CPUs ({doc['cpu_model']}), clients on the same machine; {doc['duration_s']:g} s "
                 f"per point after a 1 s warm-up; trivial model (y = x + 1 on [batch, 4]), single-row requests, "
                 f"--instances {doc['instances']}, batching from the artifact's defaults.")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("artifacts", nargs="*")
    p.add_argument("--device", default="cpu")
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--out", default=None)
    p.add_argument("--p99-budget-ms", type=float, default=10.0,
                   help="latency budget both modes are held to in the open-loop sweep (default 10)")
    p.add_argument("--cpu-workers", type=int, default=None, help="IREE CPU worker threads (see inferx-bench)")
    p.add_argument("--pipeline-depth", type=int, default=None, help="batches in flight (see inferx-bench)")
    p.add_argument("--processes", default="1", help="server process counts to try at saturation, e.g. 1,2,4; "
                   "the open-loop sweeps use the best one")
    p.add_argument("--load-steps", default="0.5,1,1.5,2",
                   help="closed-loop clients per process, as multiples of max_batch_size x instances")
    p.add_argument("--instances", type=int, default=None, help="model instances per device (see inferx-bench)")
    p.add_argument("--trivial", default=None, help="prebuilt trivial-model artifact for the overhead "
                   "figure (built here for the cpu target when absent)")
    p.add_argument("--redo", default=None, metavar="JSON",
                   help="only recompute the saturation point and rewrite serving_DEVICE.md/.png beside an "
                        "existing serving_DEVICE.json (measurements untouched)")
    p.add_argument("--front-ends", action="store_true",
                   help="measure the HTTP and gRPC front ends, in process and the previous server instead")
    p.add_argument("--workers", default="1,2", help="--front-ends: inferx-serve worker counts")
    p.add_argument("--concurrency", default="16,64,256", help="--front-ends: requests in flight")
    p.add_argument("--stream-requests", type=int, default=16,
                   help="--front-ends: requests a gRPC ModelStreamInfer call sends at once (default 16)")
    p.add_argument("--old-rev", default="1016ad7", help="--front-ends: the git revision of the previous server")
    args = p.parse_args()
    if args.redo:
        return redo(args.redo)
    if args.front_ends:
        trivial = args.trivial or build_trivial("cpu", os.path.join(tempfile.mkdtemp(), "trivial.ixa"))
        doc = front_end_figures(trivial, [int(n) for n in args.workers.split(",")],
                                [int(c) for c in args.concurrency.split(",")], args.duration, args.old_rev,
                                args.instances or 1, args.stream_requests)
        md = front_ends_markdown(doc)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "front_ends.json"), "w") as f:
                json.dump(doc, f, indent=1)
            with open(os.path.join(args.out, "front_ends.md"), "w") as f:
                f.write(md + "\n")
        print(md)
        return 0
    if not args.artifacts:
        p.error("give the artifacts to measure (or --redo JSON)")
    if args.cpu_workers is not None:
        from inferx_compiler.runtime.devices import configure_cpu

        configure_cpu(args.cpu_workers)
    from inferx_compiler.runtime.devices import parse_device
    from inferx_compiler.runtime.service import instance_count

    results = []
    for a in args.artifacts:
        print(f"== {a} on {args.device}", flush=True)
        bench_args = ["--pipeline-depth", str(args.pipeline_depth)] if args.pipeline_depth else []
        if args.cpu_workers is not None:  # server processes configure their own executor
            bench_args += ["--cpu-workers", str(args.cpu_workers)]
        if args.instances is not None:
            bench_args += ["--instances", str(args.instances)]
        instances = instance_count(parse_device(args.device), args.instances)
        results.append(figures(a, args.device, args.duration, args.p99_budget_ms, bench_args,
                               [int(n) for n in args.processes.split(",")],
                               [float(k) for k in args.load_steps.split(",")], instances))
    trivial = args.trivial or build_trivial("cpu", os.path.join(tempfile.mkdtemp(), "trivial.ixa"))
    overhead = dict(overhead_us(trivial, args.device), device=args.device, cpu_workers=args.cpu_workers)
    if args.out:
        print(write(results, overhead, args.out, args.device))
    else:
        print(to_markdown(results, overhead))
    return 0


if __name__ == "__main__":
    sys.exit(main())
