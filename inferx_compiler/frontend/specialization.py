"""Static-shape functions beside the dynamic one: what each is, how it is named and chosen.

A model with a dynamic batch dim compiles to one dynamic-shape function `@main` plus one
static-shape function per batch bucket, `@main$b8` for batch 8, all in one module sharing
the same weights (the same named parameters). Why: IREE 3.13 generates far better code for
static shapes on every backend. Measured on this 2-core CPU (single thread, against
onnxruntime): an 8 x 1024^2 MLP at batch 1 went from 2.2x slower than onnxruntime (dynamic
batch: the data-tiled matmul pads M to its tile) to 1.05x; on CUDA a dynamic M leaves
matmuls off the tensor cores (DESIGN.md). A call whose batch is a bucket runs the bucket's
function; any other batch runs `@main`.

Without `--batch-sizes`, executable targets get a batch-1 function (the latency case);
`--batch-sizes 1,8` compiles 1 and 8; `--dynamic-only` compiles `@main` alone.
The manifest lists the functions (`Manifest.functions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from inferx_compiler.tensor_spec import TensorSpec

DEFAULT_STATIC_BATCHES = (1,)


@dataclass(frozen=True)
class Specialization:
    """Fixed sizes for some named dynamic dims, and the function that computes with them."""

    function: str
    dims: tuple[tuple[str, int], ...]  # (dim name, size), sorted

    def to_json(self, output_entry: Optional[str], flops: int = -1) -> dict:
        return {"name": self.function, "output_entry": output_entry, "dims": dict(self.dims),
                "flops": flops}


def batch_dim(inputs: list[TensorSpec]) -> Optional[str]:
    """The dynamic dim every input leads with (None when there is no such shared dim)."""
    leads = {s.shape[0] if s.shape else None for s in inputs}
    if len(leads) != 1:
        return None
    lead = next(iter(leads))
    return lead if isinstance(lead, str) else None


def batch_specializations(entry: str, inputs: list[TensorSpec], sizes: tuple[int, ...]) -> list[Specialization]:
    """One specialization per batch size (none when the model has no shared batch dim)."""
    dim = batch_dim(inputs)
    if dim is None:
        return []
    return [Specialization(f"{entry}$b{b}", ((dim, b),)) for b in sorted(set(sizes))]


def specialized_specs(specs: list[TensorSpec], dims: dict[str, int]) -> list[tuple]:
    """The shapes of `specs` with the named dims fixed (other dynamic dims stay names)."""
    return [tuple(dims.get(d, d) if isinstance(d, str) else d for d in s.shape) for s in specs]


def choose(functions: list[dict], dim_values: dict[str, int]) -> Optional[dict]:
    """The manifest's function entry whose fixed dims all match these dim values, if any."""
    for f in functions:
        if all(dim_values.get(name) == size for name, size in f["dims"].items()):
            return f
    return None
