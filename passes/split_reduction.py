"""inferx-split-reduction: split a matmul's reduction over more workgroups where its output is
too small to fill the GPU (split-K).

Runs in IREE's context before IREE's pipeline, on static `linalg.matmul` ops (the form the
transformer projections take after inferx-unbroadcast-matmul, and convolutions after
inferx-conv-strategy). IREE 3.13 gives each workgroup one output tile and runs the whole
reduction in it, so a matmul with a small output and a long reduction keeps a few of the GPU's
SMs busy for a long time (BERT-base's 128x768, K=3072, projection ran about 30x slower than
cuBLAS's split-K kernel; docs/levers/split-k.md).

For such a matmul `y[M, N] (+)= a[M, K] b[K, N]` the pass writes

    p[s, M, N] = sum_k a[M, s, k] b[s, k, N]          (a, b only reshaped: K = S x K/S)
    y[M, N]   (+)= sum_s p[s, M, N]

two dispatches: a batched contraction with S times the workgroups, and a small reduction that
takes the matmul's epilogue (bias, activation, truncation) as IREE fuses it there. Products are
accumulated in the matmul's accumulator type (f32 for f16/bf16 inputs), so the numbers only move
by the reassociation of the sum.

The rule, from the target record: with T = ceil(M/64) x ceil(N/64) output tiles (the MMA tile
IREE picks for these shapes), S is the largest power of two <= `max-split` with T x S <= 3 x the
target's SMs, K divisible by S and K/S >= `min-chunk` (>= 1024 when T alone fills the SMs).
It was fitted on an H200 sweep of eight projection and convolution shapes x S = 1..16
(tools/bench/gpu_split_sweep.py), where on each shape it picks the fastest S measured, checked
on the models with and without the pass, and checked on f32 inputs (IREE's SIMT path) with a
second sweep (`--dtype f32`): every pick faster than IREE's own kernel. Figures:
docs/levers/split-k.md. Declined, with a remark: CPU targets (their cores are few and IREE's CPU tiles split the
output fine), integer inputs (not measured), dynamic shapes, matrix-vector shapes (M or N
below 16, which IREE runs as a warp reduction), and outputs that already fill the GPU.

`split=N` forces S = N on every static matmul whose K it divides (measurement and tests).
Spelled `inferx-split-reduction{max-split=16 min-chunk=128 split=0}` (the target is the module's
`inferx.target`: inferx-set-target{target=h200} before it on a bare module).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar, Optional

from inferx_compiler.passes.infra.base import TargetedPass
from inferx_compiler.passes.support.iree_ir import generic, zeros
from inferx_compiler.passes.analysis.linalg_analysis import collect, indexing_maps
from inferx_compiler.passes.analysis.remarks import remark

TILE = 64  # the output tile IREE 3.13 picks for these shapes (workgroup = [64, 64] with mma.sync)
WAVES = 3  # tiles x S up to three per SM: the best split in the sweep for every shape measured
MIN_PARALLEL = 16
# Input types the sweeps measured: f16/bf16 (IREE's mma.sync path) and f32 (its SIMT path, which
# the rule's splits sped up on every shape; docs/levers/split-k.md).
MEASURED_INPUTS = ("f16", "bf16", "f32")
# An output of at least one tile per SM is split only into chunks this long: BERT b8's 1024x768
# K=768 projections split 2 ways took as long as unsplit, in 48 more kernels (docs/levers/split-k.md).
FULL_WAVE_MIN_CHUNK = 1024


@dataclasses.dataclass(frozen=True)
class Split:
    factor: Optional[int]  # None: declined
    reason: str


def decide(m: int, n: int, k: int, sms: int, max_split: int, min_chunk: int) -> Split:
    """The split-K factor for an M x N x K matmul on a GPU with `sms` SMs: the largest power of
    two S <= max_split with tiles x S <= WAVES x sms, K divisible by S and K/S >= min_chunk."""
    if min(m, n) < MIN_PARALLEL:
        return Split(None, f"{m}x{n} output: a matrix-vector shape, IREE's warp reduction handles it")
    tiles = math.ceil(m / TILE) * math.ceil(n / TILE)
    if tiles * 2 > WAVES * sms:
        return Split(None, f"{m}x{n} output is {tiles} tiles: it fills the {sms} SMs")
    if tiles >= sms:  # one full wave already: only a long reduction pays for the extra kernel
        min_chunk = max(min_chunk, FULL_WAVE_MIN_CHUNK)
    factor = 1
    while (factor * 2 <= max_split and k % (factor * 2) == 0 and k // (factor * 2) >= min_chunk
           and tiles * factor * 2 <= WAVES * sms):
        factor *= 2
    if factor == 1:
        return Split(None, f"reduction {k} has no power-of-two split with chunks >= {min_chunk}")
    return Split(factor, f"{m}x{n} output is {tiles} tiles for {sms} SMs: reduction {k} split {factor} ways")


def matmul_shape(op) -> Optional[tuple[int, int, int]]:
    """(M, N, K) of a static linalg.matmul with default indexing maps, else None."""
    from iree.compiler import ir

    a, b = op.operands[0].type, op.operands[1].type
    if not (a.has_static_shape and b.has_static_shape):
        return None
    d = [ir.AffineDimExpr.get(i) for i in range(3)]
    want = [ir.AffineMap.get(3, 0, e) for e in ([d[0], d[2]], [d[2], d[1]], [d[0], d[1]])]
    if indexing_maps(op) != want:
        return None
    return a.shape[0], b.shape[1], a.shape[1]


def _widen(value, to_type):
    from iree.compiler import ir
    from iree.compiler.dialects import arith

    if value.type == to_type:
        return value
    if isinstance(value.type, ir.FloatType):
        return arith.extf(to_type, value)
    return arith.extsi(to_type, value)


def rewrite(op, factor: int) -> None:
    """matmul(a, b) into y -> reduce_s(contract(a[M,S,K/S], b[S,K/S,N])) added into y."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    a, b, init = op.operands
    m, n, k = matmul_shape(op)
    chunk = k // factor
    acc_t = init.type.element_type
    is_float = isinstance(acc_t, ir.FloatType)
    with ir.InsertionPoint(op), op.location:
        a3 = tensor.ExpandShapeOp(ir.RankedTensorType.get([m, factor, chunk], a.type.element_type), a,
                                  [[0], [1, 2]], [], [m, factor, chunk]).result
        b3 = tensor.ExpandShapeOp(ir.RankedTensorType.get([factor, chunk, n], b.type.element_type), b,
                                  [[0, 1], [2]], [], [factor, chunk, n]).result
        partial0 = zeros([factor, m, n], acc_t)
        s, i, j, r = (ir.AffineDimExpr.get(x) for x in range(4))
        maps = [ir.AffineMap.get(4, 0, e) for e in ([i, s, r], [s, r, j], [s, i, j])]

        def multiply_add(block):
            x, y, acc = (_widen(v, acc_t) if v.type != acc_t else v for v in block.arguments)
            product = arith.mulf(x, y) if is_float else arith.muli(x, y)
            return arith.addf(acc, product) if is_float else arith.addi(acc, product)

        partial = generic([a3, b3], partial0, maps, ["parallel"] * 3 + ["reduction"], multiply_add)
        out = sum_slices(partial, init)
    op.results[0].replace_all_uses_with(out)
    op.erase()


def sum_slices(partial, init):
    """init[M, N] + sum_s partial[s, M, N] (a linalg.generic; IREE fuses the consumer's
    epilogue into it). Call inside an insertion point and location."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith

    is_float = isinstance(init.type.element_type, ir.FloatType)
    i, j, s = (ir.AffineDimExpr.get(x) for x in range(3))
    maps = [ir.AffineMap.get(3, 0, [s, i, j]), ir.AffineMap.get(3, 0, [i, j])]

    def add(block):
        p, acc = block.arguments
        return arith.addf(acc, p) if is_float else arith.addi(acc, p)

    return generic([partial], init, maps, ["parallel", "parallel", "reduction"], add)


@dataclasses.dataclass(frozen=True)
class SplitReduction(TargetedPass):
    """Split-K for GPU matmuls whose output is too small to occupy the SMs."""

    name: ClassVar[str] = "inferx-split-reduction"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "split-K for GPU matmuls with a small output and a long reduction"

    max_split: int = 16
    min_chunk: int = 128
    split: int = 0

    @classmethod
    def for_build(cls, build) -> "Optional[SplitReduction]":
        return cls() if build.target.backend == "cuda" and build.runs(cls.name) else None

    def __post_init__(self):
        if self.max_split < 2:
            raise ValueError(f"max-split must be >= 2, got {self.max_split}")
        if self.min_chunk < 16:
            raise ValueError(f"min-chunk must be >= 16, got {self.min_chunk}")
        if self.split < 0 or self.split == 1:
            raise ValueError(f"split must be 0 (the rule) or >= 2, got {self.split}")

    def run(self, module) -> None:
        target = self.target_of(module)
        for op in collect(module, lambda o: o.name == "linalg.matmul"):
            shape = matmul_shape(op)
            if shape is None:
                remark(self.name, op, "declined: dynamic shape or transposing indexing maps")
                continue
            decision = self._decide(target, str(op.operands[0].type.element_type), *shape)
            remark(self.name, op, ("split: " if decision.factor else "declined: ") + decision.reason)
            if decision.factor:
                with op.context:
                    rewrite(op, decision.factor)

    def _decide(self, target, element_type: str, m: int, n: int, k: int) -> Split:
        if self.split:
            if k % self.split:
                return Split(None, f"reduction {k} is not divisible by split={self.split}")
            return Split(self.split, f"split={self.split} forced")
        if target.backend != "cuda":
            return Split(None, f"target '{target.name}' ({target.backend}): split-K is for GPUs")
        if element_type not in MEASURED_INPUTS:
            return Split(None, f"{element_type} inputs: the rule was measured on f16, bf16 and f32 only")
        return decide(m, n, k, target.cores or 1, self.max_split, self.min_chunk)
