"""The gRPC side of the Open Inference Protocol: Triton's `inference.GRPCInferenceService`
(KServe v2 gRPC), on grpc.aio, over the same `InferenceCore` as the HTTP app. The protocol
modules are the ones tritonclient ships (tritonclient.grpc.service_pb2 / service_pb2_grpc /
model_config_pb2), so stock `tritonclient.grpc` clients work unchanged.

Implemented: ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelConfig,
ModelInfer (tensors in `raw_input_contents` or in typed `contents`; outputs always in
`raw_output_contents`), ModelStreamInfer (see `InferenceServicer.ModelStreamInfer`),
RepositoryIndex; RepositoryModelLoad/Unload are refused (INVALID_ARGUMENT); the rest
(statistics, shared memory, trace, logging) answer UNIMPLEMENTED. Errors carry the gRPC code
equivalent to the HTTP status (protocol.GRPC_CODES).
"""

from __future__ import annotations

import asyncio
import time
from typing import Optional

import grpc
import numpy as np
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pbg

from inferx_compiler.runtime.kserve import DTYPE_TO_DATATYPE, InferRequest, RequestError, decode_tensor
from inferx_compiler.runtime.protocol import GRPC_CODES, InferenceCore, error_message, status_of

# requests of one stream being served at once; past it the stream is read no further (HTTP/2 flow
# control then holds the client back)
STREAM_WINDOW = 256

# datatype -> InferTensorContents field holding its values
CONTENTS_FIELD = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
                  "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
                  "UINT16": "uint_contents", "UINT32": "uint_contents", "UINT64": "uint64_contents",
                  "FP32": "fp32_contents", "FP64": "fp64_contents"}


def grpc_code(status: int) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, GRPC_CODES.get(status, "UNKNOWN"))


def _param(value) -> pb.InferParameter:
    if isinstance(value, bool):
        return pb.InferParameter(bool_param=value)
    if isinstance(value, int):
        return pb.InferParameter(int64_param=value)
    return pb.InferParameter(string_param=str(value))


def _timeout(parameters) -> Optional[float]:
    p = parameters.get("timeout") if "timeout" in parameters else None
    if p is None:
        return None
    which = p.WhichOneof("parameter_choice")
    value = getattr(p, which) if which else 0
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise RequestError(f"parameter 'timeout' must be a non-negative number of microseconds, got {value!r}")
    return value * 1e-6 if value else None


def decode_infer(request: pb.ModelInferRequest, model) -> InferRequest:
    raw = request.raw_input_contents
    if raw and len(raw) != len(request.inputs):
        raise RequestError(f"the request has {len(request.inputs)} inputs but {len(raw)} raw_input_contents")
    feeds, seen = {}, set()
    for i, t in enumerate(request.inputs):
        shape = list(t.shape)
        if raw:
            array = decode_tensor(t.name, t.datatype, shape, model.by_name, raw=raw[i], seen=seen)
        else:
            field_name = CONTENTS_FIELD.get(t.datatype)
            if field_name is None:  # unsupported datatype: decode_tensor says so
                array = decode_tensor(t.name, t.datatype, shape, model.by_name, data=[], seen=seen)
            elif t.datatype == "FP16":
                raise RequestError(f"input '{t.name}': FP16 has no typed contents field; send it in "
                                   f"raw_input_contents")
            else:
                array = decode_tensor(t.name, t.datatype, shape, model.by_name,
                                      data=list(getattr(t.contents, field_name)), seen=seen)
        feeds[t.name] = array
    wanted = []
    for o in request.outputs:
        if o.name not in model.output_names:
            raise RequestError(f"unknown output {o.name!r} (the model gives: {', '.join(model.output_names)})")
        if o.name in wanted:
            raise RequestError(f"output '{o.name}' is requested more than once")
        wanted.append(o.name)
    return InferRequest(feeds, wanted or list(model.output_names), set(), request.id or None,
                        _timeout(request.parameters))


def encode_infer(model, request: InferRequest, outputs: dict) -> pb.ModelInferResponse:
    response = pb.ModelInferResponse(model_name=model.name, model_version=model.version, id=request.id or "")
    for name in request.outputs:
        array = np.ascontiguousarray(outputs[name])
        datatype = DTYPE_TO_DATATYPE.get(array.dtype.name)
        if datatype is None:
            raise RequestError(f"output '{name}' has dtype {array.dtype.name}, which the protocol cannot carry",
                               500)
        response.outputs.add(name=name, datatype=datatype, shape=array.shape)
        response.raw_output_contents.append(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
    return response


class InferenceServicer(pbg.GRPCInferenceServiceServicer):
    def __init__(self, core: InferenceCore):
        self.core = core

    async def _abort(self, context, status: int, message: str):
        await context.abort(grpc_code(status), message)

    async def ServerLive(self, request, context):
        return pb.ServerLiveResponse(live=self.core.live())

    async def ServerReady(self, request, context):
        return pb.ServerReadyResponse(ready=self.core.ready())

    async def ModelReady(self, request, context):
        return pb.ModelReadyResponse(ready=self.core.model_ready(request.name, request.version or None))

    async def ServerMetadata(self, request, context):
        meta = self.core.server_metadata()
        return pb.ServerMetadataResponse(name=meta["name"], version=meta["version"], extensions=meta["extensions"])

    async def ModelMetadata(self, request, context):
        try:
            meta = self.core.model_metadata(request.name, request.version or None)
        except RequestError as e:
            return await self._abort(context, int(e.status), str(e))
        tensors = lambda items: [pb.ModelMetadataResponse.TensorMetadata(  # noqa: E731
            name=t["name"], datatype=t["datatype"], shape=t["shape"]) for t in items]
        return pb.ModelMetadataResponse(name=meta["name"], versions=meta["versions"], platform=meta["platform"],
                                        inputs=tensors(meta["inputs"]), outputs=tensors(meta["outputs"]))

    async def ModelConfig(self, request, context):
        try:
            config = self.core.model_config(request.name, request.version or None)
        except RequestError as e:
            return await self._abort(context, int(e.status), str(e))

        def io(kind, t):
            return kind(name=t["name"], data_type=mc.DataType.Value(t["data_type"]), dims=t["dims"])

        cfg = mc.ModelConfig(name=config["name"], platform=config["platform"], backend=config["backend"],
                             max_batch_size=config["max_batch_size"],
                             input=[io(mc.ModelInput, t) for t in config["input"]],
                             output=[io(mc.ModelOutput, t) for t in config["output"]])
        if "dynamic_batching" in config:
            db = config["dynamic_batching"]
            cfg.dynamic_batching.preferred_batch_size.extend(db["preferred_batch_size"])
            cfg.dynamic_batching.max_queue_delay_microseconds = db["max_queue_delay_microseconds"]
        for group in config["instance_group"]:
            cfg.instance_group.add(count=group["count"], kind=mc.ModelInstanceGroup.Kind.Value(group["kind"]))
        return pb.ModelConfigResponse(config=cfg)

    async def RepositoryIndex(self, request, context):
        return pb.RepositoryIndexResponse(models=[pb.RepositoryIndexResponse.ModelIndex(**m)
                                                 for m in self.core.repository_index(request.ready)])

    async def RepositoryModelLoad(self, request, context):
        await self._abort(context, 400, "this server does not load or unload models while it runs: the models "
                                        "are the ones it started with")

    RepositoryModelUnload = RepositoryModelLoad

    async def ModelInfer(self, request, context):
        started = time.perf_counter()
        try:
            return await self.core.infer(request.model_name, request.model_version or None,
                                         lambda model: decode_infer(request, model), encode_infer, started)
        except Exception as e:  # noqa: BLE001 - every refusal answers with its code
            await context.abort(grpc_code(status_of(e, self.core.draining)), error_message(e))

    async def ModelStreamInfer(self, request_iterator, context):
        """Triton's bidirectional stream for models that answer each request once: requests are
        served concurrently as they arrive (they batch with each other and with other clients'),
        responses are written in request order. A refused request answers `error_message` (with
        its id in `infer_response`) and the stream goes on, as Triton's does; with
        `triton_enable_empty_final_response` the response carries `triton_final_response`."""
        pending: asyncio.Queue = asyncio.Queue(STREAM_WINDOW)

        async def read() -> None:
            try:
                async for request in request_iterator:
                    await pending.put(asyncio.ensure_future(self._stream_one(request)))
            finally:
                await pending.put(None)

        reader = asyncio.ensure_future(read())
        try:
            while (served := await pending.get()) is not None:
                yield await served
            await reader  # a broken request stream ends the call with its error
        finally:
            reader.cancel()
            while not pending.empty():
                left = pending.get_nowait()
                if left is not None:
                    left.cancel()

    async def _stream_one(self, request: pb.ModelInferRequest) -> pb.ModelStreamInferResponse:
        started = time.perf_counter()
        try:
            response = await self.core.infer(request.model_name, request.model_version or None,
                                             lambda model: decode_infer(request, model), encode_infer, started)
            out = pb.ModelStreamInferResponse(infer_response=response)
        except Exception as e:  # noqa: BLE001 - a refused request answers in the stream
            out = pb.ModelStreamInferResponse(error_message=error_message(e))
            out.infer_response.model_name = request.model_name
            out.infer_response.model_version = request.model_version
            out.infer_response.id = request.id
        final = request.parameters.get("triton_enable_empty_final_response")
        if final is not None and final.bool_param:
            out.infer_response.parameters["triton_final_response"].bool_param = True
        return out


def grpc_server(core: InferenceCore, host: str, port: int, *, reuse_port: bool = False,
                max_message_bytes: int = 256 << 20) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server with the servicer, bound (not started) on host:port; (server, port)."""
    options = [("grpc.so_reuseport", 1 if reuse_port else 0),
               ("grpc.max_receive_message_length", max_message_bytes),
               ("grpc.max_send_message_length", max_message_bytes)]
    server = grpc.aio.server(options=options)
    pbg.add_GRPCInferenceServiceServicer_to_server(InferenceServicer(core), server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound = server.add_insecure_port(address)
    if bound == 0:
        raise OSError(f"cannot listen on {address} for gRPC")
    return server, bound
