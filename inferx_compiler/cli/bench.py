"""inferx-bench ARTIFACT: load test of one artifact through the runtime (batcher, scheduler).

    inferx-bench model.ixa --concurrency 16 --duration 10           closed loop
    inferx-bench model.ixa --rate 500 --duration 10                 open loop, fixed rate
    inferx-bench model.ixa --no-batching --concurrency 16           every request runs alone
    inferx-bench model.ixa --device cpu --device cpu --json         two device lanes
    inferx-bench model.ixa --device cuda --processes 4 --concurrency 256   four server processes

Prints throughput and p50/p95/p99 latency, mean batch and padding waste; --json prints
{"throughput_rps", "p50_ms", "p95_ms", "p99_ms", "mean_batch", "padding_waste", ...}.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import time
from concurrent.futures import Future
from types import SimpleNamespace

import click
import numpy as np

from inferx_compiler.cli.common import (CONTEXT_SETTINGS, click_main, completion_epilog, dim_sizes, existing_file, options_namespace,
                     run_cli)
from inferx_compiler.cli.serving_options import service_options, serving_options

HELP = """Load-test an .ixa artifact through the runtime (batcher, scheduler).

Prints throughput and p50/p95/p99 latency, mean batch and padding waste; --json prints one
JSON object with throughput_rps, p50_ms, p95_ms, p99_ms, mean_batch, padding_waste, ...
"""

EXAMPLES = """\b
Examples:
  inferx-bench model.ixa --concurrency 16 --duration 10           closed loop
  inferx-bench model.ixa --rate 500 --duration 10                 open loop, fixed rate
  inferx-bench model.ixa --no-batching --concurrency 16           every request runs alone
  inferx-bench model.ixa --device cpu --device cpu --json         two device lanes
  inferx-bench model.ixa --device cuda --processes 4 --concurrency 256   four server processes
"""


@click.command("inferx-bench", context_settings=CONTEXT_SETTINGS, help=HELP,
               epilog=EXAMPLES + "\n" + completion_epilog("inferx-bench"))
@click.argument("artifact", callback=existing_file)
@click.option("--concurrency", type=click.IntRange(min=1), metavar="N",
              help="closed loop: N clients (default 8; not with --rate)")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), metavar="RPS",
              help="open loop: requests per second (not with --concurrency)")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), default=5.0, metavar="S",
              help="seconds of load (default 5)")
@click.option("--warmup", type=click.FloatRange(min=0), default=1.0, metavar="S",
              help="seconds of load not measured (default 1)")
@click.option("--processes", type=click.IntRange(min=1), default=1, metavar="N",
              help="server processes sharing the device(s), each with its own session, batcher, "
                   "interpreter and share of the load (default 1)")
@click.option("--client-threads", is_flag=True,
              help="closed loop with one thread per client instead of completion callbacks")
@click.option("--rows", type=click.IntRange(min=1), default=1, metavar="N",
              help="batch rows per request (default 1)")
@click.option("--dim", multiple=True, metavar="NAME=SIZE", callback=functools.partial(dim_sizes, minimum=0),
              help="size for a dynamic non-batch dim (repeatable; default 1)")
@serving_options
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--debug", is_flag=True, help="show tracebacks")
def command(**params) -> int:
    args = options_namespace(params)
    if args.concurrency is not None and args.rate is not None:
        raise click.UsageError("--concurrency (closed loop) and --rate (open loop) are mutually "
                               "exclusive; give one.")
    return run_cli(lambda: _work(args), args.debug)


def main(argv: list[str] | None = None) -> int:
    return click_main(command, argv)


def _work(args) -> int:
    if args.processes > 1:
        result = _run_replicas(args)
    else:
        result, _ = _measure(args)
    if args.as_json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(_format(result))
    return 0


def _measure(args, ready=None) -> tuple[dict, list[float]]:
    """Load, then drive the load; `ready` (a barrier) lines replica processes up first."""
    from inferx_compiler.runtime.bench_inputs import random_feeds

    servers = _servers(args)
    dims = dict(args.dim)
    feeds = random_feeds(servers.inputs, args.rows, dims)
    if ready is not None:
        ready.wait()
    if args.rate is not None:
        result, latencies = _open_loop(servers, feeds, args.rate, args.duration, args.warmup)
    else:
        loop = _closed_loop_threads if args.client_threads else _closed_loop
        result, latencies = loop(servers, feeds, args.concurrency or 8, args.duration, args.warmup)
    result.update(servers.stats())
    result.update({"artifact": args.artifact, "devices": servers.devices, "batching": not args.no_batching,
                   "rows_per_request": args.rows, "max_batch_size": servers.config.max_batch_size,
                   "max_queue_delay_us": servers.config.max_queue_delay_us, "processes": 1})
    servers.close()
    return result, latencies


def _run_replicas(args) -> dict:
    """--processes N: N server processes on the same device(s), each with its own session,
    batcher and interpreter, and its share of the clients (or of the rate). Results merge:
    throughput adds up, latency percentiles come from all requests together."""
    import multiprocessing

    from inferx_compiler.errors import InferXError

    n = args.processes
    ctx = multiprocessing.get_context("spawn")  # no CUDA context or IREE threads inherited
    ready, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_replica, args=(vars(args), i, n, ready, results), daemon=True)
             for i in range(n)]
    for p in procs:
        p.start()
    parts = [results.get() for _ in procs]
    for p in procs:
        p.join()
    failed = [msg for kind, msg, _ in parts if kind == "error"]
    if failed:
        raise InferXError(f"{len(failed)} of {n} replica processes failed: {failed[0]}")
    return _merge([(r, lat) for _, r, lat in parts], n)


def _replica(options: dict, index: int, n: int, ready, results) -> None:
    args = SimpleNamespace(**options)
    if args.rate is not None:
        args.rate = args.rate / n
    else:
        total = args.concurrency or 8
        args.concurrency = total // n + (1 if index < total % n else 0)
    try:
        result, latencies = _measure(args, ready)
        results.put(("ok", result, latencies))
    except BaseException as e:  # reported by the parent
        ready.abort()
        results.put(("error", f"{type(e).__name__}: {e}", None))


def _merge(parts: list[tuple[dict, list[float]]], n: int) -> dict:
    from inferx_compiler.runtime.service import batch_figures

    results = [r for r, _ in parts]
    merged = dict(results[0])

    def total(key):
        return sum(r[key] for r in results)

    merged.update(_latency_figures([x for _, part in parts for x in part]))
    merged.update(batch_figures(total("rows"), total("batches"), total("padded_rows")))
    merged.update({
        "requests": total("requests"), "errors": total("errors"), "throughput_rps": total("throughput_rps"),
        "median_batch_exec_ms": float(np.median([r["median_batch_exec_ms"] for r in results])),
        "median_batch_service_ms": float(np.median([r["median_batch_service_ms"] for r in results])),
        "p99_batch_exec_ms": float(max(r["p99_batch_exec_ms"] for r in results)),
        "processes": n, "per_process_rps": [r["throughput_rps"] for r in results]})
    merged["concurrency" if merged["mode"] == "closed" else "rate_rps"] = total(
        "concurrency" if merged["mode"] == "closed" else "rate_rps")
    merged.pop("routed", None)
    return merged


def _servers(args):
    from inferx_compiler.runtime.service import Service

    return Service(args.artifact, service_options(args, rows_per_request=args.rows))


class _Recorder:
    """Latencies of requests sent inside the measured window; thread-safe appends."""

    def __init__(self, measure_from: float, stop_at: float):
        self.measure_from, self.stop_at = measure_from, stop_at
        self.latencies: list[float] = []
        self.errors = 0

    def done(self, future, sent: float) -> None:
        finished = time.perf_counter()
        if future.exception() is not None:
            self.errors += 1
        elif self.measure_from <= sent < self.stop_at:
            self.latencies.append((finished - sent) * 1e3)


def _closed_loop(servers, feeds: dict, concurrency: int, duration: float, warmup: float) -> dict:
    """N clients, each sending its next request as soon as its last one returns. A client is a
    completion callback (event-driven, like wrk's connections), so the load generator costs
    one submit and one callback per request, not a thread wake-up."""
    start = time.perf_counter()
    rec = _Recorder(start + warmup, start + warmup + duration)
    finished = threading.Semaphore(0)

    def send():
        while True:
            sent = time.perf_counter()
            if sent >= rec.stop_at:
                finished.release()
                return
            try:
                future = servers.submit(feeds)
            except Exception:
                rec.errors += 1
                continue
            if not future.done():
                future.add_done_callback(lambda f, sent=sent: (rec.done(f, sent), send()))
                return
            rec.done(future, sent)  # already resolved: loop instead of recursing

    for _ in range(concurrency):
        send()
    for _ in range(concurrency):
        finished.acquire()
    return _summary(rec, duration, {"mode": "closed", "concurrency": concurrency, "clients": "callbacks"}), rec.latencies


def _closed_loop_threads(servers, feeds: dict, concurrency: int, duration: float,
                         warmup: float) -> dict:
    """N client threads, each calling and waiting (`--client-threads`)."""
    start = time.perf_counter()
    rec = _Recorder(start + warmup, start + warmup + duration)

    def client():
        while (sent := time.perf_counter()) < rec.stop_at:
            future = Future()
            try:
                future.set_result(servers.run(feeds))
            except Exception as e:
                future.set_exception(e)
            rec.done(future, sent)

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return _summary(rec, duration, {"mode": "closed", "concurrency": concurrency, "clients": "threads"}), rec.latencies


def _open_loop(servers, feeds: dict, rate: float, duration: float, warmup: float) -> dict:
    """Requests sent on a fixed schedule, whatever the server does; each latency counts from
    the request's scheduled send time (late sends are the server's delay, not hidden)."""
    interval = 1.0 / rate
    start = time.perf_counter()
    rec = _Recorder(start + warmup, start + warmup + duration)
    pending, n = [], 0
    while (due := start + n * interval) < rec.stop_at:
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
            continue
        while due <= now and due < rec.stop_at:  # everything due by now, in one burst
            try:
                future = servers.submit(feeds)
                future.add_done_callback(lambda f, sent=due: rec.done(f, sent))
                pending.append(future)
            except Exception:
                rec.errors += 1
            n += 1
            due = start + n * interval
    for f in pending:
        try:
            f.result(timeout=60)
        except Exception:
            pass
    return _summary(rec, duration, {"mode": "open", "rate_rps": rate}), rec.latencies


def _summary(rec: _Recorder, duration: float, extra: dict) -> dict:
    return {"requests": len(rec.latencies), "errors": rec.errors, "duration_s": duration,
            "throughput_rps": len(rec.latencies) / duration, **_latency_figures(rec.latencies), **extra}


def _latency_figures(latencies: list[float]) -> dict:
    lat = np.asarray(latencies or [float("nan")])
    return {"p50_ms": float(np.percentile(lat, 50)), "p95_ms": float(np.percentile(lat, 95)),
            "p99_ms": float(np.percentile(lat, 99)), "mean_ms": float(np.mean(lat))}


def _format(r: dict) -> str:
    rows = [("artifact", r["artifact"]), ("devices", ", ".join(r["devices"])),
            ("processes", str(r["processes"])),
            ("mode", f"{r['mode']} " + (f"concurrency {r['concurrency']}" if r["mode"] == "closed"
                                        else f"{r['rate_rps']:.0f} req/s")),
            ("batching", "on" if r["batching"] else "off"),
            ("requests", f"{r['requests']} ({r['errors']} errors)"),
            ("throughput", f"{r['throughput_rps']:.1f} req/s"),
            ("latency p50/p95/p99", f"{r['p50_ms']:.2f} / {r['p95_ms']:.2f} / {r['p99_ms']:.2f} ms"),
            ("mean batch", f"{r['mean_batch']:.2f}"), ("padding waste", f"{100 * r['padding_waste']:.1f}%")]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:{width}s}  {v}" for k, v in rows)


if __name__ == "__main__":
    sys.exit(main())
