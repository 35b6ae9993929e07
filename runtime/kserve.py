"""The KServe v2 / Open Inference Protocol (Triton) request and response bodies over HTTP, with
the binary tensor data extension; `decode_tensor` is shared with the gRPC front end, so both
refuse the same requests with the same words.

JSON only:   {"inputs": [{"name", "shape", "datatype", "data": [...]}], "outputs": [{"name"}], "id",
              "parameters": {"timeout": MICROSECONDS, "binary_data_output": BOOL}}
Binary:      the body is a JSON header of `Inference-Header-Content-Length` bytes, then the raw
             (little-endian, row-major) bytes of each input whose entry carries
             "parameters": {"binary_data_size": N} instead of "data", in order. Outputs come back
             the same way when the request asks ("parameters": {"binary_data_output": true}, or
             "binary_data": true on an output).
JSON lists of thousands of numbers cost milliseconds to parse; binary tensors cost a copy.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Optional

import numpy as np
import orjson

from inferx_compiler.errors import InferXError

HEADER_LENGTH = "Inference-Header-Content-Length"
DATATYPES = {"BOOL": "bool", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64",
             "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
             "FP16": "float16", "FP32": "float32", "FP64": "float64"}
DTYPE_TO_DATATYPE = {v: k for k, v in DATATYPES.items()}
# np.dtype objects as keys: `array.dtype.name` costs a microsecond or two in numpy 2, a hash does not
_NP_DTYPES = {k: np.dtype(v) for k, v in DATATYPES.items()}
_NP_LE_DTYPES = {k: np.dtype(v).newbyteorder("<") for k, v in DATATYPES.items()}
_DATATYPE_OF_NP = {np.dtype(v): k for k, v in DATATYPES.items()}


class RequestError(InferXError):
    """A request the server refuses, with the HTTP status to answer (gRPC maps it, see
    protocol.GRPC_CODES)."""

    def __init__(self, message: str, status: HTTPStatus | int = HTTPStatus.BAD_REQUEST):
        super().__init__(message)
        self.status = HTTPStatus(status)


@dataclass
class InferRequest:
    feeds: dict[str, np.ndarray]
    outputs: list[str]  # in the order to answer
    binary_outputs: set[str] = field(default_factory=set)
    id: Optional[object] = None
    timeout_s: Optional[float] = None  # parameters.timeout (microseconds, as Triton's)


def datatype_of(dtype: str) -> str:
    return DTYPE_TO_DATATYPE.get(dtype, dtype.upper())


def decode_tensor(name: str, datatype: str, shape, by_name: dict, *, data=None, raw: Optional[bytes] = None,
                  seen: Optional[set] = None) -> np.ndarray:
    """One input as an array of the model's dtype, from a list of values (`data`) or raw
    little-endian bytes (`raw`); checks the name (known, not given twice), the datatype, the
    shape's form and the element count. Shapes against the model: the batcher's check."""
    if not isinstance(name, str) or name not in by_name:
        raise RequestError(f"unknown input {name!r} (the model takes: {', '.join(by_name)})")
    if seen is not None:
        if name in seen:
            raise RequestError(f"input '{name}' is given more than once")
        seen.add(name)
    dtype = _NP_DTYPES.get(datatype) if isinstance(datatype, str) else None
    if dtype is None:
        raise RequestError(f"input '{name}': unsupported datatype {datatype!r} (supported: {', '.join(DATATYPES)})")
    want = by_name[name].dtype
    if DATATYPES[datatype] != want:
        raise RequestError(f"input '{name}': datatype {datatype} but the model takes {datatype_of(want)}")
    if type(shape) not in (list, tuple) or not all(type(d) is int and d >= 0 for d in shape):
        raise RequestError(f"input '{name}': shape must be a list of non-negative integers, got {shape!r}")
    count = math.prod(shape)
    if raw is not None:
        expected = count * dtype.itemsize
        if len(raw) != expected:
            raise RequestError(f"input '{name}': {len(raw)} bytes of binary data, but shape {list(shape)} of "
                               f"{datatype} needs {expected}")
        array = np.frombuffer(raw, dtype=_NP_LE_DTYPES[datatype], count=count)
        if array.dtype != dtype:  # a big-endian host
            array = array.astype(dtype)
        return array.reshape(shape)  # read-only view of the body: the batcher copies rows into its buffers
    try:
        array = np.asarray(data, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise RequestError(f"input '{name}': data is not a list of {datatype} values ({e})") from None
    if array.size != count:
        raise RequestError(f"input '{name}': shape {list(shape)} holds {count} elements, data has {array.size}")
    return np.ascontiguousarray(array.reshape(shape))


def parse_request(body: bytes, header_length: Optional[str], specs, output_names: list[str]) -> InferRequest:
    """Decode an infer request body; names (unknown or repeated), datatypes and element counts
    are checked here, shapes against the model by the batcher."""
    header, binary = _split_body(body, header_length)
    doc = loads(header)
    if not isinstance(doc, dict) or not isinstance(doc.get("inputs"), list):
        raise RequestError('request body must be a JSON object with an "inputs" list')
    feeds, offset, seen = {}, 0, set()
    by_name = {s.name: s for s in specs}
    for i, entry in enumerate(doc["inputs"]):
        if not isinstance(entry, dict) or not {"name", "shape", "datatype"} <= set(entry):
            raise RequestError(f'inputs[{i}] needs "name", "shape" and "datatype", and "data" or binary data')
        name = entry["name"]
        params = entry.get("parameters") or {}
        size = params.get("binary_data_size") if isinstance(params, dict) else None
        if size is not None:
            if not isinstance(size, int) or size < 0 or offset + size > len(binary):
                raise RequestError(f"input '{name}': binary_data_size {size!r}, but {len(binary) - offset} bytes "
                                   f"are left in the body")
            feeds[name] = decode_tensor(name, entry["datatype"], entry["shape"], by_name,
                                        raw=binary[offset:offset + size], seen=seen)
            offset += size
        elif "data" not in entry:
            raise RequestError(f"input '{name}' has neither \"data\" nor parameters.binary_data_size")
        else:
            feeds[name] = decode_tensor(name, entry["datatype"], entry["shape"], by_name, data=entry["data"],
                                        seen=seen)
    if offset != len(binary):
        raise RequestError(f"the request carries {len(binary)} bytes of binary data, its inputs describe {offset}")
    outputs, binary_outputs = _requested_outputs(doc, output_names)
    return InferRequest(feeds, outputs, binary_outputs, doc.get("id"), timeout_param(doc.get("parameters")))


def timeout_param(parameters) -> Optional[float]:
    """Triton's request parameter "timeout" (microseconds) in seconds; None when absent."""
    if not isinstance(parameters, dict) or parameters.get("timeout") in (None, 0):
        return None
    value = parameters["timeout"]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise RequestError(f"parameter 'timeout' must be a non-negative number of microseconds, got {value!r}")
    return value * 1e-6


def encode_response(model: str, version: str, request: InferRequest,
                    outputs: dict[str, np.ndarray]) -> tuple[bytes, Optional[int]]:
    """The response body, and the JSON header's length when binary outputs follow it."""
    entries, chunks = [], []
    for name in request.outputs:
        array = outputs[name]
        datatype = _DATATYPE_OF_NP.get(array.dtype)
        if datatype is None:
            raise InferXError(f"output '{name}' has dtype {array.dtype.name}, which the protocol cannot carry")
        entry = {"name": name, "datatype": datatype, "shape": list(array.shape)}
        if name in request.binary_outputs:
            raw = np.ascontiguousarray(array, dtype=_NP_LE_DTYPES[datatype]).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            entry["data"] = array.ravel().tolist()
        entries.append(entry)
    doc = {"model_name": model, "model_version": version, "outputs": entries}
    if request.id is not None:
        doc["id"] = request.id
    header = dumps(doc)
    return (header + b"".join(chunks), len(header)) if chunks else (header, None)


def loads(text: bytes):
    """A JSON document (orjson, several times faster than the standard library's json). Bodies
    orjson refuses are read again by the standard library, which also takes the NaN and
    Infinity literals Python's json clients write; RequestError when neither can."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RequestError(f"request body is not valid JSON ({e})") from None


def dumps(doc) -> bytes:
    """`doc` as JSON bytes. orjson writes NaN and infinities as null; a document holding them is
    written by the standard library instead (NaN, Infinity: what Python's json clients read), as
    is one orjson cannot write (an integer past 64 bits echoed in "id")."""
    try:
        text = orjson.dumps(doc)
    except TypeError:
        return json.dumps(doc).encode()
    if b"null" in text and _has_non_finite(doc):
        return json.dumps(doc).encode()
    return text


def _has_non_finite(value) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_non_finite(v) for v in value)
    return False


def _split_body(body: bytes, header_length: Optional[str]) -> tuple[bytes, bytes]:
    if header_length is None:
        return body, b""
    if not header_length.strip().isdigit() or int(header_length) > len(body):
        raise RequestError(f"{HEADER_LENGTH} is {header_length!r}, but the body has {len(body)} bytes")
    n = int(header_length)
    return body[:n], body[n:]


def _requested_outputs(doc: dict, names: list[str]) -> tuple[list[str], set[str]]:
    params = doc.get("parameters") or {}
    all_binary = bool(params.get("binary_data_output", False)) if isinstance(params, dict) else False
    requested = doc.get("outputs")
    if not requested:
        return list(names), set(names) if all_binary else set()
    if not isinstance(requested, list):
        raise RequestError('"outputs" must be a list of {"name": ...} objects')
    wanted, binary = [], set()
    for o in requested:
        name = o.get("name") if isinstance(o, dict) else None
        if name not in names:
            raise RequestError(f"unknown output {name!r} (the model gives: {', '.join(names)})")
        if name in wanted:
            raise RequestError(f"output '{name}' is requested more than once")
        wanted.append(name)
        if ((o.get("parameters") or {}).get("binary_data", all_binary)):
            binary.add(name)
    return wanted, binary
