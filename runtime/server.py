"""HTTP front end over a `Service`: the KServe v2 / Triton inference protocol (JSON) and
Prometheus metrics.

    GET  /v2/health/live | /v2/health/ready          200 when live / loaded
    GET  /v2                                          server metadata
    GET  /v2/models/NAME  | /v2/models/NAME/ready     model metadata (dynamic dims are -1)
    POST /v2/models/NAME/infer                        {"inputs": [{"name", "shape", "datatype", "data"}],
                                                       "outputs": [{"name"}] (optional), "id" (optional)}
    GET  /metrics                                     Prometheus text format

Each connection has a thread (`ThreadingHTTPServer`); a request's thread submits to the
scheduler and waits, so concurrent requests share batches. Errors answer with
{"error": "..."} naming what is wrong: 400 bad request (input name, dtype, shape), 404
unknown model or path, 413 body too large, 503 queue full, 504 timed out in the queue,
500 anything else.
"""

from __future__ import annotations

import json
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

import numpy as np

from inferx_compiler.errors import InferXError, InputValidationError

from .batch_queue import QueueFullError, RequestTimeoutError
from .metrics import CONTENT_TYPE, LATENCY_BUCKETS, Registry, histogram_samples

# KServe v2 datatype <-> numpy dtype
DATATYPES = {"BOOL": "bool", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64",
             "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
             "FP16": "float16", "FP32": "float32", "FP64": "float64"}
DTYPE_TO_DATATYPE = {v: k for k, v in DATATYPES.items()}
MAX_BODY_BYTES = 256 << 20


class RequestError(InferXError):
    """A request the server refuses, with the HTTP status to answer."""

    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST):
        super().__init__(message)
        self.status = status


class InferenceServer:
    """Serves one model (a `Service`) over HTTP; `start()` runs it in a background thread."""

    def __init__(self, service, name: str, host: str = "127.0.0.1", port: int = 8000):
        self.service, self.name = service, name
        self.metrics = ServerMetrics(name, service)
        self._http = ThreadingHTTPServer((host, port), _handler_class(self))
        self._http.daemon_threads = True
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
        self.service.close()

    # -- protocol -------------------------------------------------------------------------
    def metadata(self) -> dict:
        return {"name": self.name, "platform": "inferx", "versions": ["1"],
                "inputs": [_tensor_metadata(s) for s in self.service.inputs],
                "outputs": [_tensor_metadata(s) for s in self.service.outputs]}

    def infer(self, body: dict) -> dict:
        feeds = decode_inputs(body, self.service.inputs)
        wanted = _requested_outputs(body, [s.name for s in self.service.outputs])
        outputs = self.service.run(feeds)
        response = {"model_name": self.name, "model_version": "1",
                    "outputs": [encode_tensor(n, outputs[n]) for n in wanted]}
        if "id" in body:
            response["id"] = body["id"]
        return response


def decode_inputs(body: dict, specs) -> dict[str, np.ndarray]:
    """The request's "inputs" as numpy arrays; names, datatypes and element counts checked
    here (shapes against the model by the batcher)."""
    if not isinstance(body, dict) or not isinstance(body.get("inputs"), list):
        raise RequestError('request body must be a JSON object with an "inputs" list')
    by_name = {s.name: s for s in specs}
    feeds = {}
    for i, t in enumerate(body["inputs"]):
        if not isinstance(t, dict) or not {"name", "shape", "datatype", "data"} <= set(t):
            raise RequestError(f'inputs[{i}] needs "name", "shape", "datatype" and "data"')
        name = t["name"]
        if name not in by_name:
            raise RequestError(f"unknown input '{name}' (the model takes: {', '.join(by_name)})")
        dtype = DATATYPES.get(t["datatype"])
        if dtype is None:
            raise RequestError(f"input '{name}': unsupported datatype '{t['datatype']}' "
                               f"(supported: {', '.join(DATATYPES)})")
        if dtype != by_name[name].dtype:
            raise RequestError(f"input '{name}': datatype {t['datatype']} but the model takes "
                               f"{DTYPE_TO_DATATYPE.get(by_name[name].dtype, by_name[name].dtype)}")
        shape = t["shape"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise RequestError(f"input '{name}': shape must be a list of non-negative integers, got {shape!r}")
        try:
            array = np.asarray(t["data"], dtype=dtype)
        except (TypeError, ValueError) as e:
            raise RequestError(f"input '{name}': data is not a list of {t['datatype']} values ({e})") from None
        if array.size != int(np.prod(shape, dtype=np.int64)):
            raise RequestError(f"input '{name}': shape {shape} holds {int(np.prod(shape))} elements, "
                               f"data has {array.size}")
        feeds[name] = np.ascontiguousarray(array.reshape(shape))
    return feeds


def encode_tensor(name: str, array: np.ndarray) -> dict:
    datatype = DTYPE_TO_DATATYPE.get(array.dtype.name)
    if datatype is None:
        raise InferXError(f"output '{name}' has dtype {array.dtype.name}, which the JSON protocol cannot carry")
    return {"name": name, "datatype": datatype, "shape": list(array.shape), "data": array.ravel().tolist()}


def _requested_outputs(body: dict, names: list[str]) -> list[str]:
    requested = body.get("outputs")
    if not requested:
        return names
    wanted = [o.get("name") if isinstance(o, dict) else None for o in requested]
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise RequestError(f"unknown output {unknown[0]!r} (the model gives: {', '.join(names)})")
    return wanted


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

    def observe(self, code: int, seconds: float) -> None:
        self.requests.inc(model=self.model, code=str(code))
        self.latency.observe(seconds, model=self.model)

    def _batching_families(self):
        from .batching import EXEC_BUCKETS

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
            hist = dict(b.stats.batch_histogram)
            counts = [0] * (len(sizes) + 1)
            for rows, n in hist.items():
                counts[next((i for i, s in enumerate(sizes) if rows <= s), len(sizes))] += n
            size_samples += histogram_samples("inferx_batch_size", self._labels(lane), tuple(sizes), counts,
                                              float(sum(r * n for r, n in hist.items())))
            exec_samples += histogram_samples("inferx_batch_exec_seconds", self._labels(lane), EXEC_BUCKETS,
                                              list(b.stats.exec_counts), b.stats.exec_total_s)
        yield "inferx_batch_size", "histogram", "Request rows per batch run.", size_samples
        yield ("inferx_batch_exec_seconds", "histogram",
               "Time to write a batch into the device buffers, run it and read the results.", exec_samples)

    def _labels(self, lane: str) -> dict:
        return {"model": self.model, "lane": lane}


def _handler_class(server: InferenceServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "inferx"

        def log_message(self, format, *args):  # quiet: metrics say what happened
            pass

        def do_GET(self):
            path = self.path.split("?", 1)[0].rstrip("/")
            model_path = f"/v2/models/{server.name}"
            if path == "/metrics":
                return self._send(200, server.metrics.registry.render().encode(), CONTENT_TYPE)
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
                status, payload = 200, server.infer(self._read_json())
            except RequestError as e:
                status, payload = int(e.status), {"error": str(e)}
            except InputValidationError as e:
                status, payload = 400, {"error": str(e)}
            except QueueFullError as e:
                status, payload = 503, {"error": str(e)}
            except RequestTimeoutError as e:
                status, payload = 504, {"error": str(e)}
            except Exception as e:  # the model failed: say what, keep serving
                status, payload = 500, {"error": f"{type(e).__name__}: {e}"}
            self._json(status, payload)
            if path.endswith("/infer"):
                server.metrics.observe(status, time.perf_counter() - started)

        def _read_json(self) -> dict:
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                raise RequestError("a Content-Length header is required", HTTPStatus.LENGTH_REQUIRED)
            if int(length) > MAX_BODY_BYTES:
                self.close_connection = True
                raise RequestError(f"request body of {int(length)} bytes is over the limit of {MAX_BODY_BYTES}",
                                   HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
            try:
                return json.loads(self.rfile.read(int(length)))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise RequestError(f"request body is not valid JSON ({e})") from None

        def _json(self, status: int, payload: dict) -> None:
            self._send(status, json.dumps(payload).encode(), "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
