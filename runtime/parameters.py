"""Where a loaded artifact's weights come from: its own weights.irpa member (mapped from the
archive), or, for a generation model built with `--weights reference`, the safetensors files of
the model folder it was built from (checked tensor by tensor against the manifest first)."""

from __future__ import annotations

import json
import os

from inferx_compiler.errors import InputValidationError

_SAFETENSORS_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def parameters_module(rt, instance, artifact, owner):
    """The IREE io-parameters module serving the artifact's weights from its memory map (the
    index is kept alive on `owner`, with the mapping)."""
    m = artifact.manifest
    index = rt.ParameterIndex()
    index.load_from_file_handle(rt.FileHandle.wrap_memory(artifact.member_view(m.weights["member"])), "irpa")
    owner._parameter_index = index
    return rt.create_io_parameters_module(instance, index.create_provider(scope=m.weights["scope"]))


def referenced_parameters_module(rt, instance, artifact_path: str, record: dict, folder: str | None, owner):
    """The io-parameters module over a model folder's safetensors files, mapped in place.
    `record` is the manifest's weights record ({mode, files, tensors: {key: {dtype, shape}}}):
    every tensor the module reads must be in the folder with the dtype and shape it was built for."""
    if folder is None:
        named = ", ".join(f["name"] for f in record.get("files", [])) or "named at load"
        raise InputValidationError(f"{artifact_path} reads its weights from the model folder's safetensors files "
                                   f"({named}): give the folder (load(..., weights=DIR), inferx-generate --weights DIR)")
    if not os.path.isdir(folder):
        raise InputValidationError(f"--weights {folder}: not a folder")
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".safetensors"))
    found = safetensors_tensors(files)
    for key, want in record["tensors"].items():
        got = found.get(key)
        if got is None or got != (want["dtype"], tuple(want["shape"])):
            raise InputValidationError(f"{folder}: tensor {key} is {got or 'missing'}; {artifact_path} reads "
                                       f"{want['dtype']} {want['shape']}")
    index = rt.ParameterIndex()
    for path in files:
        index.load(path)
    owner._parameter_index = index
    return rt.create_io_parameters_module(instance, index.create_provider(scope="model"))


def safetensors_tensors(files: list) -> dict:
    """{name: (dtype, shape)} from safetensors headers (no tensor data read)."""
    out = {}
    for path in files:
        with open(path, "rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        out.update({name: (_SAFETENSORS_DTYPES.get(e["dtype"], e["dtype"]), tuple(e["shape"]))
                    for name, e in header.items() if name != "__metadata__"})
    return out
