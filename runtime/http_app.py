"""The HTTP/REST side of the Open Inference Protocol as an ASGI app served by uvicorn: a
Starlette app for every endpoint, with the infer endpoints (the hot path) answered by a thin
ASGI handler in front of it: Starlette's request, routing and middleware objects cost about
80 µs a request on this 2-core VM (7 k requests/s against 16 k for a bare ASGI callable).
Every endpoint, with its stability, is in `ENDPOINTS`; the OpenAPI document at /openapi.json is
built from the same table, so the two cannot drift apart.

Errors answer {"error": "..."} with the status of protocol.py's table. A request the server
refuses never costs the connection: the rest of an unread body is skipped by the HTTP parser and
the next request on the connection is served; only a client too slow to send its body (408) is
disconnected.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from http import HTTPStatus
from typing import Optional

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from inferx_compiler.runtime.kserve import HEADER_LENGTH, RequestError, encode_response, parse_request
from inferx_compiler.runtime.protocol import EXTENSIONS, InferenceCore, error_message, status_of

MAX_BODY_BYTES = 256 << 20
READ_TIMEOUT_S = 30.0
JSON = "application/json"

# (method, path, handler, summary, stability). stable: the Open Inference Protocol and the
# extensions GET /v2 lists, kept compatible; preview: may change.
ENDPOINTS = [
    ("POST", "/v2/models/{name}/infer", "infer", "Inference on the model's latest version (JSON or binary tensors)",
     "stable"),
    ("POST", "/v2/models/{name}/versions/{version}/infer", "infer", "Inference on one version of the model",
     "stable"),
    ("GET", "/v2/health/live", "health_live", "Server liveness", "stable"),
    ("GET", "/v2/health/ready", "health_ready", "Server readiness (false while shutting down)", "stable"),
    ("GET", "/v2", "server_metadata", "Server metadata: name, version, extensions", "stable"),
    ("GET", "/v2/models/{name}", "model_metadata", "Model metadata (inputs and outputs; -1: a dynamic dim)",
     "stable"),
    ("GET", "/v2/models/{name}/versions/{version}", "model_metadata", "Metadata of one version of the model",
     "stable"),
    ("GET", "/v2/models/{name}/ready", "model_ready", "Model readiness", "stable"),
    ("GET", "/v2/models/{name}/versions/{version}/ready", "model_ready", "Readiness of one version of the model",
     "stable"),
    ("POST", "/v2/repository/index", "repository_index", "Repository index: every model version and its state",
     "stable"),
    ("GET", "/v2/models/{name}/config", "model_config", "Triton model configuration (the fields that apply)",
     "preview"),
    ("GET", "/v2/models/{name}/versions/{version}/config", "model_config",
     "Triton model configuration of one version", "preview"),
    ("POST", "/v2/repository/models/{name}/load", "repository_load",
     "Load a model: refused, models are fixed when the server starts", "preview"),
    ("POST", "/v2/repository/models/{name}/unload", "repository_unload",
     "Unload a model: refused, models are fixed when the server starts", "preview"),
    ("GET", "/metrics", "metrics", "Prometheus metrics (text format 0.0.4)", "stable"),
    ("GET", "/openapi.json", "openapi", "This document", "stable"),
]


_INFER_PATH = re.compile(r"^/v2/models/([^/]+)(?:/versions/([^/]+))?/infer/?$")
_HEADER_LENGTH_KEY = HEADER_LENGTH.lower().encode()


def _error_body(message: str) -> bytes:
    return json.dumps({"error": message}).encode()


def _error_headers(close: bool) -> list:
    headers = [(b"content-type", b"application/json")]
    return headers + [(b"connection", b"close")] if close else headers


def _json(status: int, payload, headers: Optional[dict] = None) -> Response:
    return Response(json.dumps(payload).encode(), status, headers, JSON)


def _error(status: int, message: str, close: bool = False) -> Response:
    return _json(status, {"error": message}, {"connection": "close"} if close else None)


class _ReadWatchdog:
    """Cancels body reads that run past their deadline: one timer task for all of them, so a
    request pays two dict operations instead of a timer of its own (asyncio.timeout costs
    about 5 µs a request)."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.reading: dict = {}  # task -> deadline (loop time)
        self.expired: set = set()
        self._task: Optional[asyncio.Task] = None

    def begin(self):
        task = asyncio.current_task()
        loop = task.get_loop()
        self.reading[task] = loop.time() + self.timeout_s
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._watch(loop))
        return task

    def end(self, task) -> None:
        self.reading.pop(task, None)

    def timed_out(self, task) -> bool:
        """Whether the watchdog cancelled `task` (then the cancellation is taken back)."""
        if task not in self.expired:
            return False
        self.expired.discard(task)
        uncancel = getattr(task, "uncancel", None)
        if uncancel is not None:
            uncancel()
        return True

    async def _watch(self, loop) -> None:
        period = min(1.0, max(0.01, self.timeout_s / 4))
        while True:
            await asyncio.sleep(period)
            now = loop.time()
            for task, deadline in list(self.reading.items()):
                if deadline <= now:
                    del self.reading[task]
                    self.expired.add(task)
                    task.cancel()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


class _Disconnected(Exception):
    pass


class HTTPFrontEnd:
    """The endpoints over one `InferenceCore`."""

    def __init__(self, core: InferenceCore, *, max_body_bytes: int = MAX_BODY_BYTES,
                 read_timeout_s: float = READ_TIMEOUT_S, extra_routes: tuple = ()):
        """`extra_routes`: more Starlette routes (the generation endpoints, openai_api.py)."""
        self.core = core
        self.extra_routes = list(extra_routes)
        self.max_body_bytes = max_body_bytes
        self.read_timeout_s = read_timeout_s
        self._openapi = json.dumps(openapi_document(core.version)).encode()
        self._watchdog = _ReadWatchdog(read_timeout_s)

    def close(self) -> None:
        self._watchdog.close()

    def app(self):
        """The ASGI app: infer requests straight to `infer_asgi`, the rest to Starlette."""
        routes = [Route(path, getattr(self, handler), methods=[method])
                  for method, path, handler, _, _ in ENDPOINTS] + self.extra_routes
        starlette = Starlette(routes=routes, exception_handlers={HTTPException: self._http_exception,
                                                                 Exception: self._internal_error})
        match = _INFER_PATH.match
        infer = self.infer_asgi

        async def app(scope, receive, send):
            if scope["type"] == "http" and scope["method"] == "POST":
                m = match(scope["path"])
                if m is not None:
                    return await infer(scope, receive, send, m.group(1), m.group(2))
            await starlette(scope, receive, send)

        return app

    # -- infer ----------------------------------------------------------------------------
    async def infer(self, request: Request) -> Response:
        """Starlette's route for infer (reached only if the fast path did not match)."""
        p = request.path_params
        status, headers, body = await self._infer(request.scope["headers"], request.receive, p["name"],
                                                  p.get("version"))
        return Response(body, status, {k.decode(): v.decode() for k, v in headers})

    async def infer_asgi(self, scope, receive, send, name: str, version: Optional[str]) -> None:
        status, headers, body = await self._infer(scope["headers"], receive, name, version)
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _infer(self, raw_headers, receive, name: str, version: Optional[str]) -> tuple[int, list, bytes]:
        """(status, headers, body) for one infer request."""
        started = time.perf_counter()
        core = self.core
        length = header_length = None
        for key, value in raw_headers:
            if key == b"content-length":
                length = value
            elif key == _HEADER_LENGTH_KEY:
                header_length = value.decode("latin-1")
        try:
            body = await self._read_body(receive, length)
        except RequestError as e:
            core.count_refused(name, version, int(e.status))
            close = e.status == HTTPStatus.REQUEST_TIMEOUT
            return int(e.status), _error_headers(close), _error_body(str(e))
        except _Disconnected:
            core.count_refused(name, version, 499)
            return 499, [], b""

        def decode(model):
            return parse_request(body, header_length, model.inputs, model.output_names)

        def encode(model, req, outputs):
            return encode_response(model.name, model.version, req, outputs)

        try:
            payload, json_length = await core.infer(name, version, decode, encode, started)
        except Exception as e:  # noqa: BLE001 - every refusal answers; CancelledError goes on up
            return status_of(e, core.draining), _error_headers(False), _error_body(error_message(e))
        if json_length is None:
            return 200, [(b"content-type", b"application/json")], payload
        return 200, [(b"content-type", b"application/octet-stream"),
                     (_HEADER_LENGTH_KEY, str(json_length).encode())], payload

    async def _read_body(self, receive, length: Optional[bytes]) -> bytes:
        """The whole body: 413 past `max_body_bytes` (from Content-Length before reading, or
        while reading a chunked body), 408 when the client takes longer than `read_timeout_s`."""
        limit = self.max_body_bytes
        if length is not None and length.isdigit() and int(length) > limit:
            raise RequestError(f"request body of {int(length)} bytes is over the limit of {limit}",
                               HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        chunks, size = [], 0
        watchdog = self._watchdog
        task = watchdog.begin()
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _Disconnected()
                chunk = message.get("body", b"")
                if chunk:
                    size += len(chunk)
                    if size > limit:
                        raise RequestError(f"request body of more than {limit} bytes is over the limit of {limit}",
                                           HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
                    chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        except asyncio.CancelledError:
            if watchdog.timed_out(task):
                raise RequestError(f"the request body did not arrive within {self.read_timeout_s:g} s",
                                   HTTPStatus.REQUEST_TIMEOUT) from None
            raise
        finally:
            watchdog.end(task)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    # -- health, metadata, repository ------------------------------------------------------
    async def health_live(self, request: Request) -> Response:
        return _json(200, {"live": True})

    async def health_ready(self, request: Request) -> Response:
        ready = self.core.ready()
        return _json(200 if ready else 503, {"ready": ready})

    async def server_metadata(self, request: Request) -> Response:
        return _json(200, self.core.server_metadata())

    async def model_metadata(self, request: Request) -> Response:
        p = request.path_params
        try:
            return _json(200, self.core.model_metadata(p["name"], p.get("version")))
        except RequestError as e:
            return _error(int(e.status), str(e))

    async def model_ready(self, request: Request) -> Response:
        p = request.path_params
        try:
            self.core.repository.get(p["name"], p.get("version"))
        except RequestError as e:
            return _error(int(e.status), str(e))
        ready = self.core.model_ready(p["name"], p.get("version"))
        return _json(200 if ready else 503, {"name": p["name"], "ready": ready})

    async def model_config(self, request: Request) -> Response:
        p = request.path_params
        try:
            return _json(200, self.core.model_config(p["name"], p.get("version")))
        except RequestError as e:
            return _error(int(e.status), str(e))

    async def repository_index(self, request: Request) -> Response:
        body = await request.body()
        ready_only = False
        if body.strip():
            try:
                doc = json.loads(body)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                return _error(400, f"request body is not valid JSON ({e})")
            ready_only = bool(doc.get("ready", False)) if isinstance(doc, dict) else False
        return _json(200, self.core.repository_index(ready_only))

    async def repository_load(self, request: Request) -> Response:
        await request.body()
        return _error(400, "this server does not load or unload models while it runs: the models are the ones "
                           "it started with (inferx-serve ARTIFACT... or --model-repository DIR)")

    repository_unload = repository_load

    async def metrics(self, request: Request) -> Response:
        body, content_type = self.core.metrics.render()
        return Response(body, 200, None, content_type)

    async def openapi(self, request: Request) -> Response:
        return Response(self._openapi, 200, None, JSON)

    # -- errors ---------------------------------------------------------------------------
    async def _http_exception(self, request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 404:
            message = f"no such path: {request.url.path}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        return _error(exc.status_code, message)

    async def _internal_error(self, request: Request, exc: Exception) -> Response:
        return _error(500, error_message(exc))


def openapi_document(version: str) -> dict:
    """OpenAPI 3.1 for ENDPOINTS; every operation carries `x-stability` (stable / preview)."""
    error = {"description": "Refused (see the status code)",
             "content": {JSON: {"schema": {"$ref": "#/components/schemas/Error"}}}}
    paths: dict = {}
    for method, path, handler, summary, stability in ENDPOINTS:
        params = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
                  for p in ("name", "version") if "{" + p + "}" in path]
        op = {"operationId": f"{handler}_{method.lower()}_{len(params)}", "summary": summary,
              "x-stability": stability, "parameters": params,
              "responses": {"200": _response_schema(handler)}}
        if handler == "infer":
            op["requestBody"] = {"required": True, "content": {
                JSON: {"schema": {"$ref": "#/components/schemas/InferRequest"}},
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"},
                                             "description": f"A JSON header of {HEADER_LENGTH} bytes, then "
                                                            f"the raw input tensors (binary tensor extension)"}}}
            op["parameters"] = params + [{"name": HEADER_LENGTH, "in": "header", "required": False,
                                          "schema": {"type": "integer"}}]
            for code in ("400", "404", "408", "413", "500", "503", "504"):
                op["responses"][code] = error
        elif "{name}" in path or handler.startswith("repository_"):
            op["responses"]["404"] = error
            if handler.startswith("repository_"):
                op["responses"]["400"] = error
        if handler == "repository_index":
            op["requestBody"] = {"required": False, "content": {JSON: {"schema": {
                "type": "object", "properties": {"ready": {"type": "boolean"}}}}}}
        paths.setdefault(path, {})[method.lower()] = op
    tensor = {"type": "object", "required": ["name", "shape", "datatype"], "properties": {
        "name": {"type": "string"}, "shape": {"type": "array", "items": {"type": "integer"}},
        "datatype": {"type": "string", "enum": ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
                                                "INT32", "INT64", "FP16", "FP32", "FP64"]},
        "parameters": {"type": "object"}, "data": {"type": "array"}}}
    schemas = {
        "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
        "Tensor": tensor,
        "InferRequest": {"type": "object", "required": ["inputs"], "properties": {
            "id": {"type": "string"}, "parameters": {"type": "object", "properties": {
                "timeout": {"type": "integer", "description": "queue timeout, microseconds"},
                "binary_data_output": {"type": "boolean"}}},
            "inputs": {"type": "array", "items": {"$ref": "#/components/schemas/Tensor"}},
            "outputs": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "parameters": {"type": "object"}}}}}},
        "InferResponse": {"type": "object", "required": ["model_name", "outputs"], "properties": {
            "model_name": {"type": "string"}, "model_version": {"type": "string"}, "id": {"type": "string"},
            "outputs": {"type": "array", "items": {"$ref": "#/components/schemas/Tensor"}}}},
        "TensorMetadata": {"type": "object", "properties": {
            "name": {"type": "string"}, "datatype": {"type": "string"},
            "shape": {"type": "array", "items": {"type": "integer"}}}},
        "ModelMetadata": {"type": "object", "properties": {
            "name": {"type": "string"}, "versions": {"type": "array", "items": {"type": "string"}},
            "platform": {"type": "string"},
            "inputs": {"type": "array", "items": {"$ref": "#/components/schemas/TensorMetadata"}},
            "outputs": {"type": "array", "items": {"$ref": "#/components/schemas/TensorMetadata"}}}},
        "ServerMetadata": {"type": "object", "properties": {
            "name": {"type": "string"}, "version": {"type": "string"},
            "extensions": {"type": "array", "items": {"type": "string", "enum": EXTENSIONS}}}},
    }
    return {"openapi": "3.1.0",
            "info": {"title": "inferx-serve: Open Inference Protocol (KServe v2)", "version": version,
                     "description": "HTTP/REST endpoints; the same service over gRPC is Triton's "
                                    "inference.GRPCInferenceService (port 8001 by default)."},
            "paths": paths, "components": {"schemas": schemas}}


def _response_schema(handler: str) -> dict:
    ref = {"infer": "InferResponse", "model_metadata": "ModelMetadata", "server_metadata": "ServerMetadata"}
    if handler in ref:
        content = {JSON: {"schema": {"$ref": f"#/components/schemas/{ref[handler]}"}}}
        if handler == "infer":
            content["application/octet-stream"] = {"schema": {"type": "string", "format": "binary"}}
        return {"description": "OK", "content": content}
    if handler == "metrics":
        return {"description": "OK", "content": {"text/plain": {"schema": {"type": "string"}}}}
    return {"description": "OK", "content": {JSON: {"schema": {"type": "object"}}}}
