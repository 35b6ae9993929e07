"""Where a loaded artifact's weights come from: its own weights.irpa member (mapped from the
archive), or, for a generation model built with `--weights reference`, the safetensors files of
the model folder it was built from (checked tensor by tensor against the manifest first). A
referenced build at int8/int4 reads integer weights that the folder does not hold: the manifest
lists them (`derived`, keys of precision/quantization.py) and they are quantized here, at load,
from the folder's tensors (numpy, one thread a tensor), exactly as a copied build stores them."""

from __future__ import annotations

import os

import numpy as np

from inferx_compiler.artifact import safetensors
from inferx_compiler.errors import InputValidationError


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
    found = safetensors.tensors(files)
    for key, want in record["tensors"].items():
        got = found.get(key)
        if got is None or got != (want["dtype"], tuple(want["shape"])):
            raise InputValidationError(f"{folder}: tensor {key} is {got or 'missing'}; {artifact_path} reads "
                                       f"{want['dtype']} {want['shape']}")
    index = rt.ParameterIndex()
    for path in files:
        index.load(path)
    derived = derived_weights(record.get("derived", []), files)
    for key, array in derived.items():
        index.add_buffer(key, array)
    owner._parameter_index, owner._derived_weights = index, derived
    return rt.create_io_parameters_module(instance, index.create_provider(scope="model"))


def derived_weights(keys: list, files: list) -> dict:
    """{key: array} for the derived (quantized) parameter keys, from their source tensors."""
    if not keys:
        return {}
    from concurrent.futures import ThreadPoolExecutor

    from inferx_compiler.precision import quantization

    parsed = {key: quantization.parse_key(key) for key in keys}
    bad = [k for k, p in parsed.items() if p is None]
    if bad:
        raise InputValidationError(f"the manifest lists derived weights of no known scheme: {', '.join(bad[:4])}")
    # one source may be quantized in several schemes (schemes do not order: sort by key text)
    sources = sorted({(p[0], p[1]) for p in parsed.values()}, key=lambda item: (item[0], repr(item[1])))
    tensors = safetensors_arrays(files, {source for source, _ in sources})

    def quantize(item):
        source, scheme = item
        return item, quantization.stored_arrays(tensors[source], scheme)

    with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
        stored = dict(pool.map(quantize, sources))
    return {key: np.ascontiguousarray(stored[(p[0], p[1])][1 if p[2] else 0]) for key, p in parsed.items()}


def safetensors_arrays(files: list, names: set) -> dict:
    """{name: array} for `names`, mapped from the safetensors files (read only, no copy)."""
    out = safetensors.mapped(files, names)
    missing = sorted(names - set(out))
    if missing:
        raise InputValidationError(f"the model folder lacks tensors the integer weights derive from: {', '.join(missing[:4])}")
    return out
