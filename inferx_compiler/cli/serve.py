"""inferx-serve ARTIFACT [ARTIFACT...] | --model-repository DIR: serve models over the Open
Inference Protocol (KServe v2 / Triton), HTTP and gRPC, with dynamic batching and Prometheus
metrics. See HELP below and runtime/server.py.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import SimpleNamespace
from typing import Optional

import click

from inferx_compiler.cli.common import (CONTEXT_SETTINGS, click_main, completion_epilog, existing_file, existing_path,
                     run_with_options)
from inferx_compiler.cli.serving_options import service_options, serving_options

HELP = """Serve .ixa artifacts over the Open Inference Protocol (KServe v2 / Triton): HTTP on
--port (default 8000) and gRPC on --grpc-port (default 8001), with dynamic batching and
Prometheus metrics (GET /metrics). Stock tritonclient.http and tritonclient.grpc clients work.

--model PATH serves a generation model (LLM) with continuous batching over a paged KV cache:
OpenAI's /v1/completions, /v1/chat/completions and /v1/models (streamed as Server-Sent Events
with "stream": true), and KServe's /v2/models/NAME/generate and generate_stream.

Each ARTIFACT is served as model NAME (its file name without .ixa; --name for one), version 1;
--model-repository DIR serves every DIR/NAME/VERSION/model.ixa (Triton's layout), several
models and versions at once. Listens on 127.0.0.1 unless --host says otherwise.

Prints one line once every model is loaded and both ports listen (the real ports when 0 asks
for any free one): `serving NAME[,NAME...] on http://HOST:PORT and grpc://HOST:PORT`, plus
` (N workers)`. SIGTERM/SIGINT stop it: not ready any more, listeners closed, requests already
received answered, batch queues drained; exit status 0.
"""

EXAMPLES = """\b
Examples:
  inferx-serve model.ixa                                     HTTP :8000, gRPC :8001
  inferx-serve a.ixa b.ixa --workers 4                       4 processes share both ports
  inferx-serve --model-repository models/                    models/NAME/VERSION/model.ixa
  inferx-serve model.ixa --device cuda:0 --device cuda:1     one scheduler, a lane per device
  inferx-serve --model smol.ixa --max-batch-size 32 --port 8080   OpenAI-compatible LLM server
  curl localhost:8000/v2/models/model                        metadata (-1: a dynamic dim)
  curl -d '{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}' \\
       localhost:8000/v2/models/model/versions/1/infer
  curl localhost:8000/metrics                                Prometheus text format
  curl localhost:8000/openapi.json                           every endpoint, with x-stability
"""


@click.command("inferx-serve", context_settings=CONTEXT_SETTINGS, help=HELP,
               epilog=EXAMPLES + "\n" + completion_epilog("inferx-serve"))
@click.argument("artifact", nargs=-1, callback=existing_file)
@click.option("--model-repository", "model_repository", metavar="DIR", callback=existing_path,
              help="serve every DIR/NAME/VERSION/model.ixa (Triton's layout; VERSION a positive integer)")
@click.option("--model", "generation_models", multiple=True, metavar="PATH",
              help="a generation model (LLM) to serve over the OpenAI-compatible API (/v1/completions, "
                   "/v1/chat/completions, /v1/models) and KServe's generate extension: a generation .ixa, "
                   "or a Hugging Face folder or GGUF file (compiled first, for --target); repeatable")
@click.option("--target", "generation_target", default="cpu", show_default=True, metavar="TARGET",
              help="--model folders and GGUF files are compiled for this target")
@click.option("--precision", "generation_precision", default=None,
              type=click.Choice(("fp32", "fp16", "bf16", "int8", "int4")),
              help="--model folders and GGUF files are compiled at this precision (default: fp16 on GPU "
                   "targets, fp32 on CPUs; int8/int4: weight-only)")
@click.option("--kv-cache-dtype", "kv_cache_dtype", default="model", show_default=True, type=click.Choice(("model", "int8")),
              help="--model folders and GGUF files: the KV cache's element type (int8: half an fp16 cache's "
                   "bytes, twice the sequences in the same memory)")
@click.option("--kv-blocks", "kv_blocks", type=click.IntRange(min=1), metavar="N",
              help="generation models: KV cache blocks the engine may use (default: all the artifact has)")
@click.option("--no-prefix-caching", is_flag=True,
              help="generation models: compute every prompt in full (default: reuse the KV blocks of a "
                   "shared prompt prefix)")
@click.option("--name", metavar="NAME", help="model name of a single ARTIFACT (default: its file name without .ixa)")
@click.option("--host", default="127.0.0.1", metavar="ADDR", help="address to listen on (default 127.0.0.1)")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, metavar="PORT",
              help="HTTP port (default 8000; 0: any free port)")
@click.option("--grpc-port", type=click.IntRange(0, 65535), default=8001, metavar="PORT",
              help="gRPC port (default 8001; 0: any free port)")
@click.option("--no-grpc", is_flag=True, help="serve HTTP only")
@click.option("--workers", type=click.IntRange(min=1), default=1, metavar="N",
              help="server processes sharing both ports (SO_REUSEPORT), each with its own sessions and "
                   "batchers; /metrics on any of them covers all (default 1)")
@click.option("--max-body-mb", type=click.FloatRange(min=0, min_open=True), default=256.0, metavar="MB",
              help="largest request body (HTTP) or message (gRPC); larger ones get 413 (default 256)")
@click.option("--read-timeout-s", type=click.FloatRange(min=0, min_open=True), default=30.0, metavar="S",
              help="a request body must arrive within this (else 408, connection closed; default 30)")
@click.option("--queue-timeout-ms", type=click.FloatRange(min=0, min_open=True), metavar="MS",
              help="a request still queued after this answers 504 (default: none; a request's own "
                   "parameters.timeout, in microseconds, comes first)")
@click.option("--graceful-timeout-s", type=click.FloatRange(min=0), default=30.0, metavar="S",
              help="at shutdown, how long in-flight requests may take (default 30)")
@serving_options
@click.option("--debug", is_flag=True, help="show tracebacks")
def command(**params) -> int:
    return run_with_options(params, _work)


def main(argv: list[str] | None = None) -> int:
    return click_main(command, argv)


def _work(args) -> int:
    from inferx_compiler.errors import InputValidationError

    if not args.artifact and not args.model_repository and not args.generation_models:
        raise InputValidationError("give one or more .ixa artifacts, --model-repository DIR or --model PATH")
    if args.workers > 1 and args.generation_models:
        raise InputValidationError("--model (generation models) is served by one process: leave out --workers")
    if args.workers > 1:
        return _serve_workers(args)
    server = _server(args, args.port, None if args.no_grpc else args.grpc_port)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # serve_forever handles SIGTERM/SIGINT in its loop
    server.serve_forever(on_ready=lambda s: print(_serving_line(s.name, s.url, s.grpc_address), flush=True))
    return 0


def _serving_line(names: str, url: str, grpc_address, workers: int = 1) -> str:
    line = f"serving {names} on {url}"
    if grpc_address:
        line += f" and grpc://{grpc_address}"
    return line + (f" ({workers} workers)" if workers > 1 else "")


def _server(args, port: int, grpc_port, **shared):
    from inferx_compiler.errors import InputValidationError
    from inferx_compiler.runtime.interpreter import SERVING_GC_THRESHOLD, SERVING_SWITCH_INTERVAL_US, tune_for_serving
    from inferx_compiler.runtime.repository import ModelRepository
    from inferx_compiler.runtime.server import InferenceServer

    from inferx_compiler.runtime.llm_models import GenerationModels, log_requests_to, model_name

    repository = ModelRepository.load(list(args.artifact), name=args.name, directory=args.model_repository,
                                      options=service_options(args))
    try:
        artifacts = [p if p.endswith(".ixa") else compile_for_serving(
            p, args.generation_target, args.max_batch_size or 8, None, sys.stderr,
            precision=args.generation_precision, kv_cache_dtype=args.kv_cache_dtype) for p in args.generation_models]
        names = [model_name(p) for p in args.generation_models]
        for name, _, path in repository.generation_entries:  # a repository's LLMs, by their folder's name
            artifacts.append(path)
            names.append(name)
        generation = GenerationModels.load(
            artifacts, names=names, device=(args.device or (None,))[0], max_batch=args.max_batch_size,
            kv_blocks=args.kv_blocks, prefix_caching=not args.no_prefix_caching) if artifacts else None
        if generation is not None:
            log_requests_to(sys.stderr)  # one JSON line a generation request
    except BaseException:
        repository.close()
        raise
    # the server's process is ours: a short thread switch interval and a collector that skips
    # what was loaded (runtime/interpreter.py; a library user's process is left alone)
    tune_for_serving(SERVING_SWITCH_INTERVAL_US, SERVING_GC_THRESHOLD)
    try:
        return InferenceServer(repository, host=args.host, port=port, grpc_port=grpc_port,
                               max_body_bytes=int(args.max_body_mb * (1 << 20)), read_timeout_s=args.read_timeout_s,
                               queue_timeout_s=args.queue_timeout_ms * 1e-3 if args.queue_timeout_ms else None,
                               graceful_timeout_s=args.graceful_timeout_s, generation=generation, **shared)
    except OSError as e:
        repository.close()
        if generation:
            generation.close()
        raise InputValidationError(f"cannot listen on {args.host}:{port} ({e.strerror or e})") from None


def _reserve(host: str, port: int):
    """A socket bound (not listening) with SO_REUSEPORT: holds the port, and tells it when 0
    asked for any free one, while the workers bind their own listening sockets beside it."""
    import socket

    from inferx_compiler.errors import InferXError

    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    probe = socket.socket(family, kind, proto)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        probe.bind(address)
    except OSError as e:
        probe.close()
        raise InferXError(f"cannot listen on {host}:{port} ({e.strerror or e})") from None
    return probe, probe.getsockname()[1]


def _serve_workers(args) -> int:
    """--workers N: N server processes on both ports (SO_REUSEPORT: the kernel spreads the
    connections), each with its own sessions, batchers and interpreter; their metrics meet in
    prometheus_client's multiprocess directory, so /metrics on any of them covers all."""
    import multiprocessing
    import queue
    import shutil
    import tempfile

    from inferx_compiler.errors import InferXError

    probes = []
    http_probe, http_port = _reserve(args.host, args.port)
    probes.append(http_probe)
    grpc_port = None
    if not args.no_grpc:
        grpc_probe, grpc_port = _reserve(args.host, args.grpc_port)
        probes.append(grpc_probe)
    metrics_dir = tempfile.mkdtemp(prefix="inferx-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir  # before any worker imports prometheus_client
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(vars(args), http_port, grpc_port, i, ready), daemon=True)
               for i in range(args.workers)]
    stop = {"requested": False}

    def on_signal(signum, frame):
        stop["requested"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        for w in workers:
            w.start()
        answers = []
        while len(answers) < len(workers):
            try:
                answers.append(ready.get(timeout=0.2))
            except queue.Empty:
                if stop["requested"]:
                    return 0
                if any(not w.is_alive() for w in workers):
                    raise InferXError("a server process ended while loading its models") from None
        failed = [msg for kind, msg in answers if kind == "error"]
        if failed:
            raise InferXError(f"{len(failed)} of {args.workers} server processes failed: {failed[0]}")
        names, url, grpc_address = answers[0][1]
        print(_serving_line(names, url, grpc_address, args.workers), flush=True)
        while not stop["requested"]:
            if not all(w.is_alive() for w in workers):
                raise InferXError("a server process ended unexpectedly; stopping the others")
            time.sleep(0.2)
        return 0
    finally:
        for p in probes:
            p.close()
        for w in workers:
            if w.is_alive():
                w.terminate()  # SIGTERM: each drains and shuts down cleanly
        for w in workers:
            w.join(timeout=args.graceful_timeout_s + 30)
            if w.is_alive():
                w.kill()
                w.join()
        from inferx_compiler.runtime.serving_metrics import mark_process_dead

        for w in workers:
            if w.pid is not None:
                mark_process_dead(w.pid)
        shutil.rmtree(metrics_dir, ignore_errors=True)


def _worker(options: dict, http_port: int, grpc_port, index: int, ready) -> None:
    args = SimpleNamespace(**options)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the workers (SIGTERM)
    try:
        server = _server(args, http_port, grpc_port, reuse_port=True, multiprocess_metrics=True)
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        ready.put(("error", f"{type(e).__name__}: {e}"))
        return
    started = []

    def on_ready(s):
        started.append(True)
        ready.put(("ok", (s.name, s.url, s.grpc_address)))

    try:
        server.serve_forever(on_ready=on_ready)
    except BaseException as e:  # noqa: BLE001
        if not started:
            ready.put(("error", f"{type(e).__name__}: {e}"))
        raise


if __name__ == "__main__":
    sys.exit(main())


def serving_batch_sizes(max_batch: int) -> tuple[int, ...]:
    """Decode batches compiled for a server: powers of two up to max_batch, and max_batch."""
    sizes, b = [], 1
    while b < max_batch:
        sizes.append(b)
        b *= 2
    return tuple(sizes + [max_batch])


def compile_for_serving(path: str, target: str, max_batch: int, build_dir: Optional[str], progress=None,
                        precision: Optional[str] = None, kv_cache_dtype: str = "model") -> str:
    """A Hugging Face folder or GGUF file -> a generation artifact for serving (prefill chunks of
    32 and 256, decode batches up to max_batch, at `precision`, the cache in the model's dtype or
    int8); built once per build_dir and build settings."""
    from inferx_compiler.driver import compile_llm, write_result
    from inferx_compiler.runtime.llm_models import model_name
    from inferx_compiler.frontend.llm.frontend import GenerationShapes
    from inferx_compiler.log import BuildLog
    from inferx_compiler.options import CompileOptions

    out_dir = build_dir or os.path.join(os.path.dirname(os.path.abspath(path)) or ".", ".inferx-serve")
    os.makedirs(out_dir, exist_ok=True)
    from inferx_compiler.targets import get_target

    precision = precision or ("fp16" if get_target(target).backend == "cuda" else "fp32")
    kv = "" if kv_cache_dtype == "model" else f"-kv{kv_cache_dtype}"
    out = os.path.join(out_dir, f"{model_name(path)}-{target}-{precision}{kv}-b{max_batch}.ixa")
    if os.path.exists(out) and os.path.getmtime(out) >= _newest_mtime(path):
        return out
    log = BuildLog(quiet=progress is None, stream=progress)
    shapes = GenerationShapes(prefill_lengths=(32, 256), batch_sizes=serving_batch_sizes(max_batch), max_seq=2048,
                              prefill_batch_sizes=tuple(sorted({1, min(4, max_batch)})),
                              kv_int8=kv_cache_dtype == "int8")
    options = CompileOptions(target=target, precision=precision)
    result = compile_llm(path, options, shapes, log)
    write_result(result, out + ".part", options, log)
    os.replace(out + ".part", out)
    return out


def _newest_mtime(path: str) -> float:
    if os.path.isdir(path):
        return max((os.path.getmtime(os.path.join(path, f)) for f in os.listdir(path)), default=0.0)
    return os.path.getmtime(path)
