"""The KServe v2 (Triton) inference protocol's request and response bodies, with its binary
tensor data extension.

JSON only:   {"inputs": [{"name", "shape", "datatype", "data": [...]}], "outputs": [{"name"}], "id"}
Binary:      the body is a JSON header of `Inference-Header-Content-Length` bytes, then the raw
             (little-endian, row-major) bytes of each input whose entry carries
             "parameters": {"binary_data_size": N} instead of "data", in order. Outputs come back
             the same way when the request asks ("parameters": {"binary_data_output": true}, or
             "binary_data": true on an output).
JSON lists of thousands of numbers cost milliseconds to parse; binary tensors cost a copy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Optional

import numpy as np

from inferx_compiler.errors import InferXError

HEADER_LENGTH = "Inference-Header-Content-Length"
DATATYPES = {"BOOL": "bool", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64",
             "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
             "FP16": "float16", "FP32": "float32", "FP64": "float64"}
DTYPE_TO_DATATYPE = {v: k for k, v in DATATYPES.items()}


class RequestError(InferXError):
    """A request the server refuses, with the HTTP status to answer."""

    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST):
        super().__init__(message)
        self.status = status


@dataclass
class InferRequest:
    feeds: dict[str, np.ndarray]
    outputs: list[str]  # in the order to answer
    binary_outputs: set[str] = field(default_factory=set)
    id: Optional[object] = None


def parse_request(body: bytes, header_length: Optional[str], specs, output_names: list[str]) -> InferRequest:
    """Decode an infer request body; names, datatypes and element counts are checked here,
    shapes against the model by the batcher."""
    header, binary = _split_body(body, header_length)
    try:
        doc = json.loads(header)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RequestError(f"request body is not valid JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("inputs"), list):
        raise RequestError('request body must be a JSON object with an "inputs" list')
    feeds, offset = {}, 0
    by_name = {s.name: s for s in specs}
    for i, entry in enumerate(doc["inputs"]):
        array, used = _decode_input(i, entry, by_name, binary, offset)
        feeds[entry["name"]] = array
        offset += used
    if offset != len(binary):
        raise RequestError(f"the request carries {len(binary)} bytes of binary data, its inputs describe {offset}")
    outputs, binary_outputs = _requested_outputs(doc, output_names)
    return InferRequest(feeds, outputs, binary_outputs, doc.get("id"))


def encode_response(model: str, request: InferRequest, outputs: dict[str, np.ndarray]) -> tuple[bytes, Optional[int]]:
    """The response body, and the JSON header's length when binary outputs follow it."""
    entries, chunks = [], []
    for name in request.outputs:
        array = np.ascontiguousarray(outputs[name])
        datatype = DTYPE_TO_DATATYPE.get(array.dtype.name)
        if datatype is None:
            raise InferXError(f"output '{name}' has dtype {array.dtype.name}, which the protocol cannot carry")
        entry = {"name": name, "datatype": datatype, "shape": list(array.shape)}
        if name in request.binary_outputs:
            raw = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            entry["data"] = array.ravel().tolist()
        entries.append(entry)
    doc = {"model_name": model, "model_version": "1", "outputs": entries}
    if request.id is not None:
        doc["id"] = request.id
    header = json.dumps(doc).encode()
    return (header + b"".join(chunks), len(header)) if chunks else (header, None)


def _split_body(body: bytes, header_length: Optional[str]) -> tuple[bytes, bytes]:
    if header_length is None:
        return body, b""
    if not header_length.strip().isdigit() or int(header_length) > len(body):
        raise RequestError(f"{HEADER_LENGTH} is {header_length!r}, but the body has {len(body)} bytes")
    n = int(header_length)
    return body[:n], body[n:]


def _decode_input(i: int, entry, by_name: dict, binary: bytes, offset: int) -> tuple[np.ndarray, int]:
    """One input as an array, and the binary bytes it used."""
    if not isinstance(entry, dict) or not {"name", "shape", "datatype"} <= set(entry):
        raise RequestError(f'inputs[{i}] needs "name", "shape" and "datatype", and "data" or binary data')
    name = entry["name"]
    if name not in by_name:
        raise RequestError(f"unknown input '{name}' (the model takes: {', '.join(by_name)})")
    dtype = DATATYPES.get(entry["datatype"])
    if dtype is None:
        raise RequestError(f"input '{name}': unsupported datatype '{entry['datatype']}' "
                           f"(supported: {', '.join(DATATYPES)})")
    want = by_name[name].dtype
    if dtype != want:
        raise RequestError(f"input '{name}': datatype {entry['datatype']} but the model takes "
                           f"{DTYPE_TO_DATATYPE.get(want, want)}")
    shape = entry["shape"]
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise RequestError(f"input '{name}': shape must be a list of non-negative integers, got {shape!r}")
    count = int(np.prod(shape, dtype=np.int64))
    size = (entry.get("parameters") or {}).get("binary_data_size")
    if size is not None:
        expected = count * np.dtype(dtype).itemsize
        if size != expected or offset + size > len(binary):
            raise RequestError(f"input '{name}': binary_data_size {size}, but shape {shape} of {entry['datatype']} "
                               f"needs {expected} bytes ({len(binary) - offset} left in the body)")
        array = np.frombuffer(binary, dtype=np.dtype(dtype).newbyteorder("<"), count=count, offset=offset)
        return np.ascontiguousarray(array.astype(dtype, copy=False).reshape(shape)), size
    if "data" not in entry:
        raise RequestError(f"input '{name}' has neither \"data\" nor parameters.binary_data_size")
    try:
        array = np.asarray(entry["data"], dtype=dtype)
    except (TypeError, ValueError) as e:
        raise RequestError(f"input '{name}': data is not a list of {entry['datatype']} values ({e})") from None
    if array.size != count:
        raise RequestError(f"input '{name}': shape {shape} holds {count} elements, data has {array.size}")
    return np.ascontiguousarray(array.reshape(shape)), 0


def _requested_outputs(doc: dict, names: list[str]) -> tuple[list[str], set[str]]:
    all_binary = bool((doc.get("parameters") or {}).get("binary_data_output", False))
    requested = doc.get("outputs")
    if not requested:
        return list(names), set(names) if all_binary else set()
    wanted, binary = [], set()
    for o in requested:
        name = o.get("name") if isinstance(o, dict) else None
        if name not in names:
            raise RequestError(f"unknown output {name!r} (the model gives: {', '.join(names)})")
        wanted.append(name)
        if (o.get("parameters") or {}).get("binary_data", all_binary):
            binary.add(name)
    return wanted, binary
