"""The transport-neutral core of the Open Inference Protocol (KServe v2 / Triton): server and
model metadata, readiness, the repository index, and inference with its checks, status codes
and metrics. The HTTP app (http_app.py) and the gRPC servicer (grpc_server.py) only decode and
encode; both call `InferenceCore.infer`, so they accept and refuse the same requests, with the
same words, and count them the same way.

Status codes (HTTP; gRPC answers the equivalent code, and its requests are counted in
`inference_requests_total{status}` under the HTTP code, so one series covers both):

    200 OK                      gRPC OK
    400 bad request             INVALID_ARGUMENT   (names, duplicates, datatypes, shapes, rows over the
                                                    model's max batch size, malformed JSON)
    404 unknown model/version   NOT_FOUND
    408 body read timed out     DEADLINE_EXCEEDED  (HTTP only: a client too slow to send its body)
    411 no Content-Length       INVALID_ARGUMENT
    413 body over the limit     RESOURCE_EXHAUSTED
    499 client went away        CANCELLED
    500 the model failed        INTERNAL           (a failing batch: its own requests only)
    503 queue full / stopping   UNAVAILABLE
    504 queue timeout           DEADLINE_EXCEEDED
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable, Optional

from inferx_compiler.errors import InferXError, InputValidationError
from inferx_compiler.runtime.heatmap import input_length_bin
from inferx_compiler.runtime.batch_queue import QueueFullError, RequestTimeoutError
from inferx_compiler.runtime.kserve import InferRequest, RequestError
from inferx_compiler.runtime.loop_batching import LoopBatcher
from inferx_compiler.runtime.repository import ModelRepository, ModelVersion
from inferx_compiler.runtime.serving_metrics import ServingMetrics

# What this server implements beyond the core protocol (listed by GET /v2 and ServerMetadata).
# model_repository: the index; load/unload are refused (models are fixed at start, as in
# Triton's default model control mode).
EXTENSIONS = ["binary_tensor_data", "model_repository", "model_configuration"]

GRPC_CODES = {200: "OK", 400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 408: "DEADLINE_EXCEEDED",
              411: "INVALID_ARGUMENT", 413: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL",
              501: "UNIMPLEMENTED", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
CLIENT_CLOSED = 499


def status_of(error: BaseException, draining: bool = False) -> int:
    """The HTTP status code an exception from the request path answers with."""
    if isinstance(error, RequestError):
        return int(error.status)
    if isinstance(error, InputValidationError):
        return 400
    if isinstance(error, QueueFullError):
        return 503
    if isinstance(error, RequestTimeoutError):
        return 504
    if isinstance(error, asyncio.CancelledError):
        return CLIENT_CLOSED
    if draining and isinstance(error, InferXError):  # the batcher closed under it
        return 503
    return 500


def error_message(error: BaseException) -> str:
    if isinstance(error, InferXError):
        return str(error)
    return f"{type(error).__name__}: {error}"


class InferenceCore:
    def __init__(self, repository: ModelRepository, metrics: Optional[ServingMetrics] = None, *,
                 queue_timeout_s: Optional[float] = None):
        from inferx_compiler.versions import __version__

        self.repository = repository
        self.metrics = metrics or ServingMetrics()
        self.queue_timeout_s = queue_timeout_s
        self.version = __version__
        # set at shutdown: readiness turns false; requests already received are still served
        self.draining = False
        self._loop_batchers: dict = {}  # (loop, lane) -> LoopBatcher
        for model in repository.all():
            for lane in model.service.scheduler.lanes:
                lane.batcher.batch_observer = self.metrics.batch_observer(model.name, model.version)

    # -- health and metadata ------------------------------------------------------------
    def live(self) -> bool:
        return True

    def ready(self) -> bool:
        return not self.draining

    def server_metadata(self) -> dict:
        return {"name": "inferx", "version": self.version, "extensions": list(EXTENSIONS)}

    def model_metadata(self, name: str, version: Optional[str] = None) -> dict:
        model = self.repository.get(name, version)
        return model.metadata([version] if version else self.repository.versions(name))

    def model_ready(self, name: str, version: Optional[str] = None) -> bool:
        return not self.draining and self.repository.find(name, version) is not None

    def model_config(self, name: str, version: Optional[str] = None) -> dict:
        return self.repository.get(name, version).config()

    def repository_index(self, ready_only: bool = False) -> list[dict]:
        return self.repository.index()  # every model is READY while served

    # -- inference ------------------------------------------------------------------------
    async def infer(self, name: str, version: Optional[str], decode: Callable[[ModelVersion], InferRequest],
                    encode: Callable, started: float):
        """Look the model up (404), decode the request against it (400), run it through the
        batcher, encode the answer; every outcome counted. Raises what the transport must
        answer with (see `status_of`)."""
        model = self.repository.find(name, version)
        if model is None:
            self.count_refused(name, version, 404)
            self.repository.get(name, version)  # raises the 404 with its message
        metrics = self.metrics
        metrics.request_started(model.name)
        status, length_bin = 500, None
        try:
            request = decode(model)
            outputs = await self._run(model, request)
            result = encode(model, request, outputs)
            length_bin = input_length_bin(max(1, model.request_length(request.feeds)))
            status = 200
            return result
        except BaseException as e:
            status = status_of(e, self.draining)
            raise
        finally:
            metrics.request_finished(model.name)
            metrics.observe_request(model.name, model.version, status, time.perf_counter() - started, length_bin)

    def count_refused(self, name: str, version: Optional[str], status: int) -> None:
        """Count an infer request answered before it reached a model (unknown model, body too
        large, too slow); unknown names count under "" (the label set stays bounded)."""
        model = self.repository.find(name, version)
        if model is not None:
            self.metrics.observe_request(model.name, model.version, status, None, None)
        else:
            known = name in self.repository.names()
            self.metrics.observe_request(name if known else "", "", status, None, None)

    async def _run(self, model: ModelVersion, request: InferRequest) -> dict:
        feeds = request.feeds
        if model.batchable and feeds:
            first = next(iter(feeds.values()))
            rows = int(first.shape[0]) if first.ndim else None
            if rows == 0:
                raise RequestError("the request has no rows (its batch dim is 0)")
            if rows is not None and rows > model.max_batch_size:
                raise RequestError(f"the request has {rows} rows, more than the model's max batch size "
                                   f"{model.max_batch_size}: split it into requests of at most "
                                   f"{model.max_batch_size} rows")
        timeout_s = request.timeout_s if request.timeout_s is not None else self.queue_timeout_s
        scheduler = model.service.scheduler
        lane = scheduler.route(feeds)
        scheduler.routed[lane.name] += 1
        return await self._loop_batcher(lane).infer(feeds, timeout_s=timeout_s)

    def _loop_batcher(self, lane) -> LoopBatcher:
        """The lane's batcher in the running loop (made on first use)."""
        loop = asyncio.get_running_loop()
        key = (loop, lane.name, id(lane))
        batcher = self._loop_batchers.get(key)
        if batcher is None:
            full_batch_s = lane.batcher.config.max_batch_size * lane.batcher.instances / max(lane.speed, 1e-12)
            batcher = self._loop_batchers[key] = LoopBatcher(lane.batcher, loop, full_batch_run_s=full_batch_s,
                                                             name=lane.name)
            lane.loop_queues.append(batcher.queue)
        return batcher

    async def aclose(self) -> None:
        """Run what the running loop's batchers hold, then stop their threads (at shutdown,
        once the front ends stopped taking requests)."""
        loop = asyncio.get_running_loop()
        mine = {key: b for key, b in self._loop_batchers.items() if key[0] is loop}
        await asyncio.gather(*(b.aclose() for b in mine.values()))
        for key, batcher in mine.items():
            del self._loop_batchers[key]
            for model in self.repository.all():
                for lane in model.service.scheduler.lanes:
                    if batcher.queue in lane.loop_queues:
                        lane.loop_queues.remove(batcher.queue)
