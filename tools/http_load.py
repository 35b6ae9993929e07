"""Closed-loop HTTP load on an inferx-serve endpoint (KServe v2 JSON), from client processes.

    python tools/http_load.py http://127.0.0.1:8000 MODEL --concurrency 64 --duration 10 [--rows 1]

Each client keeps one HTTP/1.1 connection and sends its next request when the last one is
answered; clients are spread over --procs processes (default: one per 16 clients) so the load
generator is not what limits the figure. Inputs are random, shaped from the model's metadata
(dynamic dims: --rows for the first, 1 for others), sent as binary tensors (--json: as lists).
Prints one JSON line: throughput_rps, p50_ms/p95_ms/p99_ms, errors, and the server's mean batch
read from /metrics.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import re
import sys
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
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    total = {}
    for name in ("inferx_batches_total", "inferx_batch_rows_total", "inferx_batch_padding_rows_total"):
        total[name] = sum(float(v) for v in re.findall(rf"^{name}{{[^}}]*}} (\S+)$", text, re.M))
    return total


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("model")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--procs", type=int, default=None)
    p.add_argument("--json", action="store_true", help="send tensors as JSON lists (default: binary extension)")
    args = p.parse_args()
    meta = json.loads(urllib.request.urlopen(f"{args.url}/v2/models/{args.model}", timeout=30).read())
    body, headers = _request(meta, args.rows, seed=0, binary=not args.json)
    procs = args.procs or max(1, args.concurrency // 16)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start_at = time.perf_counter() + 3.0  # perf_counter is system-wide on Linux (CLOCK_MONOTONIC)
    before = _batch_figures(args.url)
    workers = [ctx.Process(target=_process, args=(args.url, args.model, body, headers,
                                                   args.concurrency // procs + (i < args.concurrency % procs),
                                                   start_at, args.duration, out)) for i in range(procs)]
    for w in workers:
        w.start()
    parts = [out.get() for _ in workers]
    for w in workers:
        w.join()
    after = _batch_figures(args.url)
    lat = np.asarray([x for part, _ in parts for x in part] or [float("nan")])
    batches = after["inferx_batches_total"] - before["inferx_batches_total"]
    rows = after["inferx_batch_rows_total"] - before["inferx_batch_rows_total"]
    print(json.dumps({"throughput_rps": len(lat) / args.duration, "p50_ms": float(np.percentile(lat, 50)),
                      "p95_ms": float(np.percentile(lat, 95)), "p99_ms": float(np.percentile(lat, 99)),
                      "errors": sum(e for _, e in parts), "concurrency": args.concurrency, "client_processes": procs,
                      "mean_batch": rows / batches if batches else 0.0, "binary": not args.json}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
