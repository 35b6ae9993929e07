"""Versions of the compiler stack, recorded in every manifest; the runtime refuses a module
from another IREE release than its own (artifact.Artifact.check_iree_version)."""

from __future__ import annotations

from functools import lru_cache
from importlib import metadata

# this package's own version (pyproject.toml reads it from here)
__version__ = "0.1.0"

# triton: the compiler of the sm_90a kernels inferx-hopper-matmul embeds (h100/h200 builds)
_PACKAGES = ("inferx-compiler", "iree-base-compiler", "iree-base-runtime", "torch-mlir", "onnx", "triton")


def stack_versions() -> dict[str, str]:
    out = {}
    for p in _PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


@lru_cache(maxsize=None)
def installed_iree_runtime() -> str:
    """The installed IREE runtime's version, spelled as manifests record IREE versions (the
    pip distribution's); for a runtime not installed by pip, the version iree.runtime reports."""
    try:
        return metadata.version("iree-base-runtime")
    except metadata.PackageNotFoundError:
        pass
    try:
        from iree.runtime.version import VERSION
    except ImportError:
        return "not installed"
    return VERSION
