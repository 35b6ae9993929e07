"""inferx's own MLIR dialect, defined in Python (see `inferx.py`)."""

from __future__ import annotations


def load_inferx_dialect() -> None:
    """Load the `inferx` dialect into the current torch-mlir context; a no-op if loaded."""
    from torch_mlir import ir

    from inferx_compiler.dialects.inferx import InferX

    if not ir.Context.current.is_dialect_loaded(InferX.DIALECT_NAMESPACE):
        InferX.load()
