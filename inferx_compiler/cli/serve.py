"""inferx-serve ARTIFACT: serve an artifact over HTTP (KServe v2 JSON protocol) with dynamic
batching and Prometheus metrics.

    inferx-serve model.ixa --port 8000                         batching from the bucket table
    inferx-serve model.ixa --device cuda:0 --device cuda:1     one scheduler, a lane per device
    curl localhost:8000/v2/models/model                        metadata
    curl -d '{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}' \\
         localhost:8000/v2/models/model/infer
    curl localhost:8000/metrics                                Prometheus text format

Prints one line, `serving NAME on http://HOST:PORT`, once the model is loaded (with the
real port when --port 0 asks for any free one); SIGINT/SIGTERM stop it cleanly.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from .common import run_cli


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="inferx-serve", description="Serve an .ixa artifact over HTTP.")
    p.add_argument("artifact")
    p.add_argument("--name", default=None, help="model name in the URLs (default: the file name without .ixa)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port)")
    p.add_argument("--device", action="append", default=None,
                   help="device to serve on (repeat for several lanes under one scheduler)")
    p.add_argument("--no-batching", action="store_true", help="run every request alone")
    p.add_argument("--max-batch-size", type=int, default=None)
    p.add_argument("--max-queue-delay-us", type=int, default=None)
    p.add_argument("--pipeline-depth", type=int, default=None,
                   help="batches in flight per device (default 2 on GPUs, 1 on CPUs)")
    p.add_argument("--cpu-workers", type=int, default=None, help="IREE CPU worker threads (default one per core)")
    p.add_argument("--debug", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: _work(args), args.debug)


def _work(args) -> int:
    from inferx_compiler.errors import InputValidationError
    from inferx_compiler.runtime.server import InferenceServer
    from inferx_compiler.runtime.service import Service, ServiceOptions

    if not 0 <= args.port <= 65535:
        raise InputValidationError(f"--port must be in 0..65535, got {args.port}")
    name = args.name or os.path.splitext(os.path.basename(args.artifact))[0]
    service = Service(args.artifact, ServiceOptions(
        devices=args.device or (None,), batching=not args.no_batching, max_batch_size=args.max_batch_size,
        max_queue_delay_us=args.max_queue_delay_us, pipeline_depth=args.pipeline_depth,
        cpu_workers=args.cpu_workers))
    try:
        server = InferenceServer(service, name, args.host, args.port)
    except OSError as e:
        service.close()
        raise InputValidationError(f"cannot listen on {args.host}:{args.port} ({e.strerror or e})") from None
    signal.signal(signal.SIGTERM, _stop)
    print(f"serving {name} on {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0


def _stop(signum, frame):
    raise KeyboardInterrupt  # leaves serve_forever(); the finally block shuts down cleanly


if __name__ == "__main__":
    sys.exit(main())
