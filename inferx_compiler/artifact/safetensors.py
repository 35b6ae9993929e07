"""The safetensors file format, read without the safetensors package: the header (an 8-byte
little-endian length, then JSON naming each tensor's dtype, shape and byte range) and tensors
mapped in place. Shared by the LLM frontend (checking a referenced folder at build time) and the
runtime (checking it again at load, and quantizing a referenced int8/int4 build's weights)."""

from __future__ import annotations

import json
from typing import Iterator

import numpy as np

DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def headers(files: list) -> Iterator[tuple[str, int, dict]]:
    """(path, offset of the data section, {tensor name: entry}) of each file (no tensor data read)."""
    for path in files:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
        header.pop("__metadata__", None)
        yield path, 8 + size, header


def tensors(files: list) -> dict[str, tuple[str, tuple[int, ...]]]:
    """{tensor name: (dtype, shape)} over the files."""
    return {name: (DTYPES.get(e["dtype"], e["dtype"]), tuple(e["shape"]))
            for _, _, header in headers(files) for name, e in header.items()}


def mapped(files: list, names: set) -> dict[str, np.ndarray]:
    """{name: read-only array mapped from its file} for those of `names` the files hold."""
    out = {}
    for path, data, header in headers(files):
        for name, entry in header.items():
            if name in names:
                begin, _ = entry["data_offsets"]
                out[name] = np.memmap(path, dtype=_numpy_dtype(entry["dtype"]), mode="r", offset=data + begin,
                                      shape=tuple(entry["shape"]))
    return out


def _numpy_dtype(code: str):
    if code == "BF16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(DTYPES[code])
