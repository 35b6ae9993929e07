"""Random inputs that fit an artifact's interface (load tests, speed probes)."""

from __future__ import annotations

import numpy as np

from inferx_compiler.tensor_spec import TensorSpec


def random_feeds(specs: list[TensorSpec], batch: int, dims: dict[str, int] = None, seed: int = 0) -> dict:
    """Dynamic leading dims take `batch`; other dynamic dims take `dims[name]` (default 1)."""
    rng = np.random.default_rng(seed)
    dims = dims or {}
    feeds = {}
    for spec in specs:
        shape = []
        for i, d in enumerate(spec.shape):
            if isinstance(d, int):
                shape.append(d)
            elif i == 0:
                shape.append(batch)
            else:
                shape.append(dims.get(d, 1))
        dtype = np.dtype(spec.dtype) if spec.dtype != "bfloat16" else np.float32
        if dtype.kind == "f":
            feeds[spec.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[spec.name] = rng.random(shape) > 0.5
        else:
            feeds[spec.name] = rng.integers(0, 2, size=shape).astype(dtype)
    return feeds
