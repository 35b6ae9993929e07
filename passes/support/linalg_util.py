"""Small IR helpers shared by the graph-level passes: build tensor.empty and linalg.generic.
(Finding ops: linalg_analysis.collect, for both MLIR worlds; the IREE-context passes'
counterparts are in iree_ir.py.)"""

from __future__ import annotations

from typing import Callable, Sequence

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor


def empty_like(value: ir.Value, element_type: ir.Type, loc) -> ir.Value:
    """`tensor.empty` with `value`'s shape (dynamic sizes read with tensor.dim)."""
    t = value.type
    sizes = [
        tensor.dim(value, _index(i, loc), loc=loc) if t.is_dynamic_dim(i) else t.shape[i]
        for i in range(t.rank)
    ]
    return tensor.EmptyOp(sizes, element_type, loc=loc).result


def _index(i: int, loc) -> ir.Value:
    from torch_mlir.dialects import arith

    return arith.constant(ir.IndexType.get(), i, loc=loc)


def parallel_generic(inputs: Sequence[ir.Value], input_maps: Sequence[ir.AffineMap],
                     init: ir.Value, body: Callable[..., ir.Value], loc) -> ir.Value:
    """An all-parallel linalg.generic writing `init` (identity map) from `inputs`.

    `body(*input_scalars)` is called inside the region and returns the value to yield.
    """
    rank = init.type.rank
    maps = list(input_maps) + [ir.AffineMap.get_identity(rank)]
    op = linalg.GenericOp_(list(inputs), [init], maps,
                           [linalg.IteratorType.parallel] * rank, loc=loc)
    block = op.regions[0].blocks[0]
    with ir.InsertionPoint(block), loc:
        linalg.YieldOp([body(*block.arguments[: len(inputs)])])
    return op.result
