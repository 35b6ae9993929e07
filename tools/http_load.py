"""Closed-loop load on an inferx-serve endpoint (KServe v2), from client processes.

    python tools/http_load.py http://127.0.0.1:8000 MODEL --concurrency 64 --duration 10 [--rows 1]
    python tools/http_load.py http://127.0.0.1:8000 MODEL --tool wrk --json --concurrency 64
    python tools/http_load.py http://127.0.0.1:8000 MODEL --grpc 127.0.0.1:8001 --concurrency 64

Python clients (the default): each keeps one HTTP/1.1 connection and sends its next request
when the last one is answered; clients are spread over --procs processes (default: one per 16
clients). Inputs are random, shaped from the model's metadata (dynamic dims: --rows for the
first, 1 for others), sent as binary tensors (--json: as lists).

`--tool wrk` drives HTTP with wrk (one client thread, --concurrency connections) and `--grpc
ADDRESS` drives the gRPC port with h2load (--concurrency streams over --grpc-connections
connections, the body a serialized ModelInferRequest; `--grpc-stream N`: N of them a
ModelStreamInfer call): C load generators cost a fraction of a
Python client's CPU, which matters when clients and server share a small machine (Debian:
apt-get install wrk nghttp2-client). Prints one JSON line: throughput_rps, p50_ms/p95_ms/p99_ms
(wrk: p50/p99 only), errors, and the server's mean batch read from /metrics.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import numpy as np


def _request(meta: dict, rows: int, seed: int, binary: bool) -> tuple[bytes, dict]:
    """A request body for the model (random inputs; dynamic dims: rows for the first, 1 for
    others) and its headers: raw tensors after a JSON header (binary extension) or all JSON."""
    rng = np.random.default_rng(seed)
    entries, chunks = [], []
    for t in meta["inputs"]:
        shape = [rows if i == 0 and d < 0 else (d if d >= 0 else 1) for i, d in enumerate(t["shape"])]
        dtype = {"FP32": "<f4", "FP16": "<f2", "FP64": "<f8", "INT64": "<i8", "INT32": "<i4"}[t["datatype"]]
        data = rng.standard_normal(shape).astype(dtype) if t["datatype"].startswith("FP") else np.zeros(shape, dtype)
        entry = {"name": t["name"], "shape": shape, "datatype": t["datatype"]}
        if binary:
            entry["parameters"] = {"binary_data_size": data.nbytes}
            chunks.append(data.tobytes())
        else:
            entry["data"] = data.ravel().tolist()
        entries.append(entry)
    doc = {"inputs": entries}
    if binary:
        doc["parameters"] = {"binary_data_output": True}
    head = json.dumps(doc).encode()
    headers = {"Content-Type": "application/octet-stream" if binary else "application/json"}
    if binary:
        headers["Inference-Header-Content-Length"] = str(len(head))
    return head + b"".join(chunks), headers


def _process(url: str, model: str, body: bytes, headers: dict, clients: int, start_at: float, duration: float,
             out) -> None:
    parsed = urllib.parse.urlparse(url)
    path = f"/v2/models/{model}/infer"
    latencies, errors = [], [0]

    def client():
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
        while (sent := time.perf_counter()) < start_at + duration:
            try:
                conn.request("POST", path, body, headers)
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
                conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
            if not ok:
                errors[0] += 1
            elif sent >= start_at:
                latencies.append((time.perf_counter() - sent) * 1e3)

    while time.perf_counter() < start_at - 1.0:  # ramp up: connect and warm up before the window
        time.sleep(0.01)
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((latencies, errors[0]))


def _batch_figures(url: str) -> dict:
    """Batches and rows run so far, from /metrics: inference_batch_size_count/_sum (this
    server), or inferx_batches_total / inferx_batch_rows_total (the server before it)."""
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))

    def ok(name: str, label: str) -> float:
        return sum(float(v) for v in re.findall(rf'^{name}{{[^}}]*{label}="200"[^}}]*}} (\S+)$', text, re.M))

    if "inference_batch_size_count" in text:
        return {"batches": total("inference_batch_size_count"), "rows": total("inference_batch_size_sum"),
                "ok": ok("inference_requests_total", "status")}
    return {"batches": total("inferx_batches_total"), "rows": total("inferx_batch_rows_total"),
            "ok": ok("inferx_requests_total", "code")}


def _mean_batch(before: dict, after: dict) -> float:
    batches = after["batches"] - before["batches"]
    return (after["rows"] - before["rows"]) / batches if batches else 0.0


WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = io.open(os.getenv("INFERX_WRK_BODY"), "rb"):read("*a")
wrk.headers["Content-Type"] = os.getenv("INFERX_WRK_TYPE")
if os.getenv("INFERX_WRK_HEADER_LENGTH") ~= "" then
  wrk.headers["Inference-Header-Content-Length"] = os.getenv("INFERX_WRK_HEADER_LENGTH")
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('RESULT {"requests": %d, "duration_us": %d, "non2xx": %d, "socket_errors": %d, '
    .. '"p50_us": %d, "p99_us": %d}\\n', summary.requests, summary.duration, e.status,
    e.connect + e.read + e.write + e.timeout, latency:percentile(50), latency:percentile(99)))
end
"""


def wrk(url: str, path: str, body: bytes, headers: dict, connections: int, duration: float,
        warmup: float = 1.0, threads: int = 1) -> dict:
    """Closed loop with wrk: `connections` connections, one request in flight on each."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    tmp = tempfile.mkdtemp(prefix="inferx-wrk-")
    with open(os.path.join(tmp, "body"), "wb") as f:
        f.write(body)
    with open(os.path.join(tmp, "post.lua"), "w") as f:
        f.write(WRK_SCRIPT)
    env = dict(os.environ, INFERX_WRK_BODY=os.path.join(tmp, "body"),
               INFERX_WRK_TYPE=headers.get("Content-Type", "application/json"),
               INFERX_WRK_HEADER_LENGTH=headers.get("Inference-Header-Content-Length", ""))
    results = []
    for seconds in ([warmup] if warmup else []) + [duration]:
        out = subprocess.run(["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds:g}s",
                              "--timeout", "30s", "-s", os.path.join(tmp, "post.lua"), url + path],
                             capture_output=True, text=True, env=env, timeout=seconds + 60)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        if out.returncode != 0 or not line:
            raise SystemExit(f"wrk failed: {out.stdout}{out.stderr}")
        results.append(json.loads(line[0][len("RESULT "):]))
    shutil.rmtree(tmp, ignore_errors=True)
    r = results[-1]
    ok = r["requests"] - r["non2xx"]
    return {"throughput_rps": ok / (r["duration_us"] * 1e-6), "p50_ms": r["p50_us"] / 1e3, "p99_ms": r["p99_us"] / 1e3,
            "errors": r["non2xx"] + r["socket_errors"], "requests": r["requests"], "concurrency": connections,
            "client": f"wrk, 1 process, {threads} thread(s), {connections} connections"}


def grpc_body(meta: dict, model: str, rows: int, seed: int = 0) -> bytes:
    """One length-prefixed gRPC message: a ModelInferRequest with random inputs in
    raw_input_contents (as tritonclient.grpc sends them)."""
    from tritonclient.grpc import service_pb2 as pb

    rng = np.random.default_rng(seed)
    request = pb.ModelInferRequest(model_name=model)
    for t in meta["inputs"]:
        shape = [rows if i == 0 and d < 0 else (d if d >= 0 else 1) for i, d in enumerate(t["shape"])]
        dtype = {"FP32": "<f4", "FP16": "<f2", "FP64": "<f8", "INT64": "<i8", "INT32": "<i4"}[t["datatype"]]
        data = rng.standard_normal(shape).astype(dtype) if t["datatype"].startswith("FP") else np.zeros(shape, dtype)
        request.inputs.add(name=t["name"], datatype=t["datatype"], shape=shape)
        request.raw_input_contents.append(data.tobytes())
    message = request.SerializeToString()
    return b"\x00" + struct.pack(">I", len(message)) + message


def h2load_grpc(address: str, body: bytes, concurrency: int, duration: float, connections: int = 0,
                warmup: float = 1.0, per_stream: int = 1) -> dict:
    """Closed loop on ModelInfer with h2load: `concurrency` streams in flight over
    `connections` HTTP/2 connections (0: one per 4 streams). h2load sees HTTP statuses only,
    not gRPC's; count failures from the server's metrics (`errors` here: transport failures).

    per_stream > 1: ModelStreamInfer calls instead, each sending `per_stream` requests at once
    and closing when all are answered (`concurrency` requests in flight = calls x per_stream);
    requests/s counts requests, the latencies are a whole call's."""
    if shutil.which("h2load") is None:
        raise SystemExit("h2load is not installed (Debian: apt-get install nghttp2-client)")
    calls = max(1, concurrency // per_stream)
    connections = connections or max(1, calls // 4)
    streams = max(1, calls // connections)
    tmp = tempfile.mkdtemp(prefix="inferx-h2load-")
    body_path, log_path = os.path.join(tmp, "body"), os.path.join(tmp, "log")
    with open(body_path, "wb") as f:
        f.write(body * per_stream)
    method = "ModelStreamInfer" if per_stream > 1 else "ModelInfer"
    cmd = ["h2load", "-c", str(connections), "-m", str(streams), "-t", "1", "-D", f"{duration:g}",
           "--warm-up-time", f"{warmup:g}", "-d", body_path, "-H", "content-type: application/grpc",
           "-H", "te: trailers", "--log-file", log_path,
           f"http://{address}/inference.GRPCInferenceService/{method}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + warmup + 60)
    if out.returncode != 0:
        raise SystemExit(f"h2load failed: {out.stdout}{out.stderr}")
    rows = [line.split("\t") for line in open(log_path) if line.strip()]
    shutil.rmtree(tmp, ignore_errors=True)
    ok = [int(r[2]) for r in rows if r[1].startswith("2")]
    failed = sum(1 for r in rows if r[1] != "0" and not r[1].startswith("2"))  # "0": cut off by the end
    m = re.search(r"(\d+) failed, (\d+) errored", out.stdout)
    lat = np.asarray(ok or [float("nan")], dtype=np.float64) / 1e3
    client = f"h2load, 1 process, 1 thread, {connections} connections x {streams} streams"
    if per_stream > 1:
        client += f" x {per_stream} requests (ModelStreamInfer; latency: the whole call's)"
    return {"throughput_rps": len(ok) * per_stream / duration, "p50_ms": float(np.percentile(lat, 50)),
            "p99_ms": float(np.percentile(lat, 99)), "errors": (failed + (int(m.group(2)) if m else 0)) * per_stream,
            "requests": len(ok) * per_stream, "concurrency": connections * streams * per_stream, "client": client}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("model")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--procs", type=int, default=None)
    p.add_argument("--json", action="store_true", help="send tensors as JSON lists (default: binary extension)")
    p.add_argument("--tool", choices=("python", "wrk"), default="python", help="HTTP load generator")
    p.add_argument("--grpc", metavar="HOST:PORT", help="drive the gRPC port with h2load instead of HTTP")
    p.add_argument("--grpc-connections", type=int, default=0, help="h2load connections (0: one per 4 streams)")
    p.add_argument("--grpc-stream", type=int, default=1, metavar="N",
                   help="send N requests per ModelStreamInfer call instead of one ModelInfer call each")
    args = p.parse_args()
    meta = json.loads(urllib.request.urlopen(f"{args.url}/v2/models/{args.model}", timeout=30).read())
    before = _batch_figures(args.url)
    if args.grpc:
        result = h2load_grpc(args.grpc, grpc_body(meta, args.model, args.rows), args.concurrency, args.duration,
                             args.grpc_connections, per_stream=args.grpc_stream)
    elif args.tool == "wrk":
        body, headers = _request(meta, args.rows, seed=0, binary=not args.json)
        result = wrk(args.url, f"/v2/models/{args.model}/infer", body, headers, args.concurrency, args.duration)
    else:
        result = python_clients(args, meta)
    after = _batch_figures(args.url)
    result.update(mean_batch=_mean_batch(before, after), binary=not args.json or bool(args.grpc),
                  server_ok_requests=after["ok"] - before["ok"])
    print(json.dumps(result))
    return 0


def python_clients(args, meta: dict) -> dict:
    body, headers = _request(meta, args.rows, seed=0, binary=not args.json)
    procs = args.procs or max(1, args.concurrency // 16)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start_at = time.perf_counter() + 3.0  # perf_counter is system-wide on Linux (CLOCK_MONOTONIC)
    workers = [ctx.Process(target=_process, args=(args.url, args.model, body, headers,
                                                   args.concurrency // procs + (i < args.concurrency % procs),
                                                   start_at, args.duration, out)) for i in range(procs)]
    for w in workers:
        w.start()
    parts = [out.get() for _ in workers]
    for w in workers:
        w.join()
    lat = np.asarray([x for part, _ in parts for x in part] or [float("nan")])
    return {"throughput_rps": len(lat) / args.duration, "p50_ms": float(np.percentile(lat, 50)),
            "p95_ms": float(np.percentile(lat, 95)), "p99_ms": float(np.percentile(lat, 99)),
            "errors": sum(e for _, e in parts), "concurrency": args.concurrency, "client_processes": procs,
            "client": f"Python http.client, {procs} process(es), {args.concurrency} threads"}


if __name__ == "__main__":
    sys.exit(main())
