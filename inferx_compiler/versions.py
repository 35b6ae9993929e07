"""Versions of the compiler stack, recorded in every manifest."""

from __future__ import annotations

from importlib import metadata

_PACKAGES = ("inferx-compiler", "iree-base-compiler", "iree-base-runtime", "torch-mlir", "onnx")


def stack_versions() -> dict[str, str]:
    out = {}
    for p in _PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out
