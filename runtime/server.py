"""HTTP front end over a `Service`: the KServe v2 / Triton inference protocol (JSON) and
Prometheus metrics.

    GET  /v2/health/live | /v2/health/ready          200 when live / loaded
    GET  /v2                                          server metadata
    GET  /v2/models/NAME  | /v2/models/NAME/ready     model metadata (dynamic dims are -1)
    POST /v2/models/NAME/infer                        {"inputs": [{"name", "shape", "datatype", "data"}],
                                                       "outputs": [{"name"}] (optional), "id" (optional)};
                                                      binary tensors as in kserve.py
    GET  /metrics                                     Prometheus text format

Each connection has a thread (`ThreadingHTTPServer`); a request's thread submits to the
scheduler and waits, so concurrent requests share batches. Errors answer with
{"error": "..."} naming what is wrong: 400 bad request (input name, dtype, shape), 404
unknown model or path, 413 body too large, 503 queue full, 504 timed out in the queue,
500 anything else.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional


from inferx_compiler.errors import InputValidationError

from .batch_queue import QueueFullError, RequestTimeoutError
from .kserve import DTYPE_TO_DATATYPE, HEADER_LENGTH, RequestError, encode_response, parse_request
from .metrics import CONTENT_TYPE, LATENCY_BUCKETS, BucketCounts, Registry, merge_families, render_families

MAX_BODY_BYTES = 256 << 20


class InferenceServer:
    """Serves one model (a `Service`) over HTTP; `start()` runs it in a background thread."""

    def __init__(self, service, name: str, host: str = "127.0.0.1", port: int = 8000, *,
                 reuse_port: bool = False, metrics_dir: Optional[str] = None, worker_index: int = 0):
        """`reuse_port`: several server processes listen on the same port (the kernel spreads
        connections over them); each then publishes its metrics in `metrics_dir`, and /metrics
        answers with the sum over all of them."""
        self.service, self.name = service, name
        self.metrics = ServerMetrics(name, service)
        if metrics_dir is not None:
            self.metrics.share(metrics_dir, worker_index)
        self._http = _bind(host, port, _handler_class(self), reuse_port)
        self._thread: Optional[threading.Thread] = None

    @property
    def address(self) -> tuple[str, int]:
        return self._http.server_address[:2]

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    def start(self) -> "InferenceServer":
        self._thread = threading.Thread(target=self._http.serve_forever, name="inferx-http", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._http.serve_forever()

    def shutdown(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self.metrics.stop_sharing()
        self.service.close()

    # -- protocol -------------------------------------------------------------------------
    def metadata(self) -> dict:
        return {"name": self.name, "platform": "inferx", "versions": ["1"],
                "inputs": [_tensor_metadata(s) for s in self.service.inputs],
                "outputs": [_tensor_metadata(s) for s in self.service.outputs]}

    def infer(self, body: bytes, header_length: Optional[str] = None) -> tuple[bytes, Optional[int]]:
        """One infer request body in, the response body (and its JSON header's length when
        binary outputs follow) out."""
        request = parse_request(body, header_length, self.service.inputs, [s.name for s in self.service.outputs])
        return encode_response(self.name, request, self.service.run(request.feeds))


def _tensor_metadata(spec) -> dict:
    return {"name": spec.name, "datatype": DTYPE_TO_DATATYPE.get(spec.dtype, spec.dtype.upper()),
            "shape": [d if isinstance(d, int) else -1 for d in spec.shape]}


class ServerMetrics:
    """Request metrics kept by the server; batching metrics read from the lanes at scrape time."""

    def __init__(self, model: str, service):
        self.model, self.service = model, service
        self.registry = Registry()
        self.requests = self.registry.counter("inferx_requests_total", "Inference requests answered, by HTTP status.",
                                              ("model", "code"))
        self.latency = self.registry.histogram("inferx_request_duration_seconds",
                                               "Time from receiving an inference request to answering it.",
                                               ("model",), LATENCY_BUCKETS)
        self.registry.collector(self._batching_families)
        self._shared: Optional[_SharedMetrics] = None

    def observe(self, code: int, seconds: float) -> None:
        self.requests.inc(model=self.model, code=str(code))
        self.latency.observe(seconds, model=self.model)

    def render(self) -> str:
        return self._shared.render() if self._shared else self.registry.render()

    def share(self, directory: str, index: int) -> None:
        self._shared = _SharedMetrics(self.registry, directory, index)

    def stop_sharing(self) -> None:
        if self._shared:
            self._shared.stop()

    def _batching_families(self):

        lanes = [(lane.name, lane.batcher) for lane in self.service.scheduler.lanes]
        counters = [("inferx_batches_total", "Batches run.", lambda s: s.batches),
                    ("inferx_batch_rows_total", "Request rows run in batches.", lambda s: s.rows),
                    ("inferx_batch_padding_rows_total", "Rows added to fill batch buckets.", lambda s: s.padded_rows),
                    ("inferx_batch_failures_total", "Batches that raised an error.", lambda s: s.failed_batches),
                    ("inferx_queue_rejected_total", "Requests refused because the queue was full.", lambda s: s.rejected),
                    ("inferx_queue_timeouts_total", "Requests that timed out in the queue.", lambda s: s.timed_out)]
        for name, help_text, get in counters:
            yield name, "counter", help_text, [(name, self._labels(lane), get(b.stats)) for lane, b in lanes]
        yield ("inferx_queue_requests", "gauge", "Requests waiting in the batch queue.",
               [("inferx_queue_requests", self._labels(lane), len(b.queue)) for lane, b in lanes])
        sizes = sorted({1, *[2 ** k for k in range(12)], *[lane[1].config.max_batch_size for lane in lanes]})
        size_samples, exec_samples = [], []
        for lane, b in lanes:
            batch_sizes = BucketCounts(sizes)
            for rows, n in dict(b.stats.batch_histogram).items():
                batch_sizes.observe(rows, n)
            size_samples += batch_sizes.samples("inferx_batch_size", self._labels(lane))
            exec_samples += b.stats.exec_buckets.samples("inferx_batch_exec_seconds", self._labels(lane))
        yield "inferx_batch_size", "histogram", "Request rows per batch run.", size_samples
        yield ("inferx_batch_exec_seconds", "histogram",
               "Time to write a batch into the device buffers, run it and read the results.", exec_samples)

    def _labels(self, lane: str) -> dict:
        return {"model": self.model, "lane": lane}


class _SharedMetrics:
    """One of several server processes on a port: its families go to DIR/worker-INDEX.json (every
    `interval` seconds and at each scrape); a scrape answers with the sum over every worker's file,
    so other workers' figures are at most `interval` old."""

    def __init__(self, registry: Registry, directory: str, index: int, interval: float = 0.5):
        self.registry, self.directory, self.interval = registry, directory, interval
        self.path = os.path.join(directory, f"worker-{index}.json")
        self._stop = threading.Event()
        self.publish()
        threading.Thread(target=self._loop, name="inferx-metrics", daemon=True).start()

    def publish(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.registry.families(), f)
        os.replace(tmp, self.path)

    def render(self) -> str:
        self.publish()
        snapshots = []
        for entry in sorted(os.listdir(self.directory)):
            if entry.startswith("worker-") and entry.endswith(".json"):
                try:
                    with open(os.path.join(self.directory, entry)) as f:
                        snapshots.append(json.load(f))
                except (OSError, ValueError):  # a worker gone or mid-write: skip it this time
                    continue
        return render_families(merge_families(snapshots))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.publish()

    def stop(self) -> None:
        self._stop.set()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # listen backlog: many clients connecting at once are not refused


def _bind(host: str, port: int, handler, reuse_port: bool) -> _HTTPServer:
    httpd = _HTTPServer((host, port), handler, bind_and_activate=False)
    try:
        if reuse_port:
            httpd.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        httpd.server_bind()
        httpd.server_activate()
    except BaseException:
        httpd.server_close()
        raise
    return httpd


def _handler_class(server: InferenceServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "inferx"

        def setup(self):
            super().setup()
            # headers and body go out in separate writes: without this, Nagle's algorithm holds
            # the body back until the client's delayed ACK (40 ms per keep-alive request)
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format, *args):  # quiet: metrics say what happened
            pass

        def do_GET(self):
            path = self.path.split("?", 1)[0].rstrip("/")
            model_path = f"/v2/models/{server.name}"
            if path == "/metrics":
                return self._send(200, server.metrics.render().encode(), CONTENT_TYPE)
            if path in ("/v2/health/live", "/v2/health/ready", model_path + "/ready"):
                return self._json(200, {"live": True} if path.endswith("live") else {"ready": True})
            if path == "/v2":
                from inferx_compiler import __version__

                return self._json(200, {"name": "inferx", "version": __version__, "extensions": []})
            if path == model_path:
                return self._json(200, server.metadata())
            if path.startswith("/v2/models/"):
                return self._json(404, {"error": f"unknown model '{path.split('/')[3]}' (this server has "
                                                 f"'{server.name}')"})
            return self._json(404, {"error": f"no such path: {path}"})

        def do_POST(self):
            started = time.perf_counter()
            path = self.path.split("?", 1)[0].rstrip("/")
            try:
                if path != f"/v2/models/{server.name}/infer":
                    model = path.split("/")[3] if path.startswith("/v2/models/") else None
                    raise RequestError(f"unknown model '{model}' (this server has '{server.name}')" if model
                                       else f"no such path: {path}", HTTPStatus.NOT_FOUND)
                body, header_length = server.infer(self._read_body(), self.headers.get(HEADER_LENGTH))
                status = 200
            except RequestError as e:
                status, error = int(e.status), str(e)
            except InputValidationError as e:
                status, error = 400, str(e)
            except QueueFullError as e:
                status, error = 503, str(e)
            except RequestTimeoutError as e:
                status, error = 504, str(e)
            except Exception as e:  # the model failed: say what, keep serving
                status, error = 500, f"{type(e).__name__}: {e}"
            if status != 200:
                self._json(status, {"error": error})
            elif header_length is None:
                self._send(200, body, "application/json")
            else:
                self._send(200, body, "application/octet-stream", {HEADER_LENGTH: str(header_length)})
            if path.endswith("/infer"):
                server.metrics.observe(status, time.perf_counter() - started)

        def _read_body(self) -> bytes:
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                raise RequestError("a Content-Length header is required", HTTPStatus.LENGTH_REQUIRED)
            if int(length) > MAX_BODY_BYTES:
                self.close_connection = True
                raise RequestError(f"request body of {int(length)} bytes is over the limit of {MAX_BODY_BYTES}",
                                   HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
            return self.rfile.read(int(length))

        def _json(self, status: int, payload: dict) -> None:
            self._send(status, json.dumps(payload).encode(), "application/json")

        def _send(self, status: int, body: bytes, content_type: str, headers: Optional[dict] = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

    return Handler
