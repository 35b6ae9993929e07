"""inferx-serve ARTIFACT: serve an artifact over HTTP (KServe v2 JSON protocol) with dynamic
batching and Prometheus metrics.

    inferx-serve model.ixa --port 8000                         batching from the bucket table
    inferx-serve model.ixa --device cuda:0 --device cuda:1     one scheduler, a lane per device
    inferx-serve model.ixa --workers 4                         4 server processes on one port
    curl localhost:8000/v2/models/model                        metadata
    curl -d '{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}' \\
         localhost:8000/v2/models/model/infer
    curl localhost:8000/metrics                                Prometheus text format

Prints one line, `serving NAME on http://HOST:PORT` (plus ` (N workers)`), once the model is
loaded (with the real port when --port 0 asks for any free one); SIGINT/SIGTERM stop it cleanly.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import SimpleNamespace

import click

from .common import CONTEXT_SETTINGS, click_main, completion_epilog, existing_file, options_namespace, run_cli
from .serving_options import service_options, serving_options

HELP = """Serve an .ixa artifact over HTTP (KServe v2 JSON protocol) with dynamic batching and
Prometheus metrics (/metrics).

Prints one line, `serving NAME on http://HOST:PORT` (plus ` (N workers)`), once the model is
loaded (with the real port when --port 0 asks for any free one); SIGINT/SIGTERM stop it cleanly.
"""

EXAMPLES = """\b
Examples:
  inferx-serve model.ixa --port 8000                         batching from the bucket table
  inferx-serve model.ixa --device cuda:0 --device cuda:1     one scheduler, a lane per device
  inferx-serve model.ixa --workers 4                         4 server processes on one port
  curl localhost:8000/v2/models/model                        metadata
  curl -d '{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}' \\
       localhost:8000/v2/models/model/infer
  curl localhost:8000/metrics                                Prometheus text format
"""


@click.command("inferx-serve", context_settings=CONTEXT_SETTINGS, help=HELP,
               epilog=EXAMPLES + "\n" + completion_epilog("inferx-serve"))
@click.argument("artifact", callback=existing_file)
@click.option("--name", metavar="NAME", help="model name in the URLs (default: the file name without .ixa)")
@click.option("--host", default="127.0.0.1", metavar="ADDR", help="address to listen on (default 127.0.0.1)")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, metavar="PORT",
              help="port (default 8000; 0: any free port)")
@click.option("--workers", type=click.IntRange(min=1), default=1, metavar="N",
              help="server processes sharing the port, each with its own session and batcher (default 1)")
@serving_options
@click.option("--debug", is_flag=True, help="show tracebacks")
def command(**params) -> int:
    args = options_namespace(params)
    return run_cli(lambda: _work(args), args.debug)


def main(argv: list[str] | None = None) -> int:
    return click_main(command, argv)


def _work(args) -> int:
    name = args.name or os.path.splitext(os.path.basename(args.artifact))[0]
    if args.workers > 1:
        return _serve_workers(args, name)
    server = _server(args, name, args.port)
    signal.signal(signal.SIGTERM, _stop)
    print(f"serving {name} on {server.url}", flush=True)
    _serve_until_stopped(server)
    return 0


def _serve_until_stopped(server) -> None:
    """Serve until SIGINT/SIGTERM (raised here as KeyboardInterrupt), then shut down cleanly."""
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()


def _server(args, name: str, port: int, **shared):
    from inferx_compiler.errors import InputValidationError
    from inferx_compiler.runtime.server import InferenceServer
    from inferx_compiler.runtime.service import Service

    service = Service(args.artifact, service_options(args))
    try:
        return InferenceServer(service, name, args.host, port, **shared)
    except OSError as e:
        service.close()
        raise InputValidationError(f"cannot listen on {args.host}:{port} ({e.strerror or e})") from None


def _serve_workers(args, name: str) -> int:
    """--workers N: N server processes on one port (SO_REUSEPORT), each with its own session,
    batcher and interpreter; /metrics on any of them sums them all."""
    import multiprocessing
    import shutil
    import socket
    import tempfile

    from inferx_compiler.errors import InferXError

    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # holds the port while workers start
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        probe.bind((args.host, args.port))
    except OSError as e:
        raise InferXError(f"cannot listen on {args.host}:{args.port} ({e.strerror or e})") from None
    port = probe.getsockname()[1]
    metrics_dir = tempfile.mkdtemp(prefix="inferx-metrics-")
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(vars(args), name, port, metrics_dir, i, ready), daemon=True)
               for i in range(args.workers)]
    signal.signal(signal.SIGTERM, _stop)
    try:
        for w in workers:
            w.start()
        failed = [msg for kind, msg in (ready.get() for _ in workers) if kind == "error"]
        probe.close()
        if failed:
            raise InferXError(f"{len(failed)} of {args.workers} server processes failed: {failed[0]}")
        print(f"serving {name} on http://{args.host}:{port} ({args.workers} workers)", flush=True)
        while all(w.is_alive() for w in workers):
            time.sleep(0.2)
        raise InferXError("a server process ended unexpectedly; stopping the others")
    except KeyboardInterrupt:
        return 0
    finally:
        probe.close()
        for w in workers:
            if w.is_alive():
                w.terminate()  # SIGTERM: each shuts down cleanly
        for w in workers:
            w.join(timeout=30)
        shutil.rmtree(metrics_dir, ignore_errors=True)


def _worker(options: dict, name: str, port: int, metrics_dir: str, index: int, ready) -> None:
    args = SimpleNamespace(**options)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the workers (SIGTERM)
    signal.signal(signal.SIGTERM, _stop)
    try:
        server = _server(args, name, port, reuse_port=True, metrics_dir=metrics_dir, worker_index=index)
    except BaseException as e:
        ready.put(("error", f"{type(e).__name__}: {e}"))
        return
    ready.put(("ok", server.url))
    _serve_until_stopped(server)


def _stop(signum, frame):
    raise KeyboardInterrupt  # leaves serve_forever(); the finally block shuts down cleanly


if __name__ == "__main__":
    sys.exit(main())
