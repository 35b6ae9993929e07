"""Prefill-chunk attention over the paged KV cache and the chunk's own keys, in Triton, compiled
ahead of time (the decode step's kernel is triton_paged_attention.py).

A prefill chunk of T tokens at positions start[b] + t attends to the sequence's cached positions
(below start[b]) and, causally, to its own new keys. IREE 3.13 compiled our decoder's written-out
form of that (scores against the whole table width, a transpose of them, softmax reductions over
rows of table width + T, P.V) in 54 of the 70 ms a 512-token chunk of a Llama-3-8B-shaped
model took on an H100 (docs/bench/2026-12-07-h100-llama8b-decode-profile, profile_iree.json).
This kernel is flash attention over two sources:

    program (b, kv head h, tile of BM query rows; row r = i * T + t is head h*G + i, token t):
        cached keys s < start[b] (with a window W: s > start[b] + t - W), read through the table
        new keys j <= t of the chunk (with a window: t - j < W)
        online softmax over both, p cast to the element type before p.v (as the decoder does)
    -> out[b, h*G + i, t, :] = acc / l, in the element type

The new keys and values are the chunk's own (k_new, v_new [B, KVH, T, D]): the step writes them
into the cache after every layer has attended. The layer index is read from a one-element buffer.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from inferx_compiler.kernels.triton_paged_attention import ELEMENT_TYPES, CacheReader, spec_key

tl = None  # triton.language, set by kernel_function (the kernel body reads it as a global)
BLOCK_M = 64  # query rows a program
BLOCK_N = 64  # keys a loop step


@dataclasses.dataclass(frozen=True)
class PrefillAttentionSpec(CacheReader):
    """One compiled kernel: chunks of `length` tokens at batch `batch` over a cache of `layers` x 2
    x `blocks` x `kv_heads` x `block_size` x `head_dim` elements, read through a [batch,
    table_width] table."""

    batch: int
    length: int
    kv_heads: int
    group: int
    head_dim: int
    block_size: int
    table_width: int
    blocks: int
    layers: int
    window: int = 0
    element_type: str = "f16"
    arch: int = 90
    block_m: int = BLOCK_M
    block_n: int = BLOCK_N
    warps: int = 4
    stages: int = 2

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.batch * self.kv_heads, -(-self.group * self.length // self.block_m), 1)

    def key(self) -> str:
        return spec_key("prefill-attention-", self)

    def constants(self) -> dict:
        return dict(KVH=self.kv_heads, G=self.group, T=self.length, D=self.head_dim, BS=self.block_size,
                    TW=self.table_width, PLANE=self.blocks * self.kv_heads * self.block_size, BM=self.block_m,
                    BN=self.block_n, WINDOW=self.window)


POINTERS = ("q_ptr", "k_ptr", "v_ptr", "cache_ptr", "table_ptr", "start_ptr", "layer_ptr", "out_ptr")
INPUTS = 7  # q, k_new, v_new, cache, table, start, layer: read; out: written


def prefill_attention_kernel(q_ptr, k_ptr, v_ptr, cache_ptr, table_ptr, start_ptr, layer_ptr, out_ptr,
                             KVH: tl.constexpr, G: tl.constexpr, T: tl.constexpr, D: tl.constexpr,
                             BS: tl.constexpr, TW: tl.constexpr, PLANE: tl.constexpr, BM: tl.constexpr,
                             BN: tl.constexpr, WINDOW: tl.constexpr):
    """The kernel's body (a @triton.jit function through `kernel_function`). q [B, KVH*G, T, D]
    (scaled); k_new, v_new [B, KVH, T, D]; cache [L, 2, blocks, KVH, BS, D]; table [B, TW] i64;
    start [B] i64; layer [1] i32; out [B, KVH*G, T, D]."""
    pid = tl.program_id(0)
    b = pid // KVH
    h = pid % KVH
    rows = tl.program_id(1) * BM + tl.arange(0, BM)
    real = rows < G * T
    i = rows // T
    t = rows % T
    d = tl.arange(0, D)
    q_rows = ((b * KVH + h) * G + i) * T + t  # [B, H, T] row of each query (head h*G + i)
    q = tl.load(q_ptr + q_rows[:, None] * D + d[None, :], mask=real[:, None], other=0.0)
    start = tl.load(start_ptr + b).to(tl.int32)
    layer = tl.load(layer_ptr).to(tl.int64)
    keys = layer * 2 * PLANE  # this layer's first key row
    m_i = tl.full([BM], -1.0e30, tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    lo = 0
    if WINDOW > 0:
        lo = tl.maximum(0, start - WINDOW + 1)  # (the first token's bound; later tokens' masked per row)
    for p0 in range(lo, start, BN):  # the cached positions
        pos = p0 + tl.arange(0, BN)
        valid = pos < start
        block = tl.load(table_ptr + b * TW + pos // BS, mask=valid, other=0)
        row = keys + (block * KVH + h) * BS + pos % BS
        k = tl.load(cache_ptr + row[:, None] * D + d[None, :], mask=valid[:, None], other=0.0)
        visible = valid[None, :]
        if WINDOW > 0:
            visible = visible & (start + t[:, None] - pos[None, :] < WINDOW)
        scores = tl.where(visible, tl.dot(q, tl.trans(k)), -1.0e30)
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.where(visible, tl.exp(scores - m_new[:, None]), 0.0)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(cache_ptr + (row + PLANE)[:, None] * D + d[None, :], mask=valid[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    last = T
    if T % BM == 0:  # a tile holds one head's tokens t0 .. t0 + BM - 1: no key after its last token
        last = (tl.program_id(1) * BM) % T + BM
    for j0 in range(0, last, BN):  # the chunk's own keys, causally
        j = j0 + tl.arange(0, BN)
        valid = j < T
        new_rows = (b * KVH + h) * T + j
        k = tl.load(k_ptr + new_rows[:, None] * D + d[None, :], mask=valid[:, None], other=0.0)
        visible = valid[None, :] & (j[None, :] <= t[:, None])
        if WINDOW > 0:
            visible = visible & (t[:, None] - j[None, :] < WINDOW)
        scores = tl.where(visible, tl.dot(q, tl.trans(k)), -1.0e30)
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.where(visible, tl.exp(scores - m_new[:, None]), 0.0)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + new_rows[:, None] * D + d[None, :], mask=valid[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(out_ptr + q_rows[:, None] * D + d[None, :], out.to(out_ptr.dtype.element_ty), mask=real[:, None])


def kernel_function():
    """The @triton.jit function (made per call, so TRITON_INTERPRET set before it is honoured)."""
    import triton
    import triton.language as tl

    globals()["tl"] = tl
    return triton.jit(prefill_attention_kernel)


def signature(spec: PrefillAttentionSpec) -> tuple[dict, dict]:
    """(Triton signature, constexprs) for `spec`."""
    element = ELEMENT_TYPES[spec.element_type]
    types = [f"*{element}"] * 4 + ["*i64", "*i64", "*i32", f"*{element}"]
    constants = spec.constants()
    sig = dict(zip(POINTERS, types))
    sig.update({name: "constexpr" for name in constants})
    return sig, constants


def compile_kernel(spec: PrefillAttentionSpec, cache_dir: Optional[str] = None):
    """PTX and launch parameters (triton_matmul.CompiledKernel) for `spec`."""
    from inferx_compiler.kernels.triton_matmul import compile_cached

    return compile_cached(spec, kernel_function, *signature(spec), cache_dir)


def launch_interpreted(spec: PrefillAttentionSpec, q, k_new, v_new, cache, table, start, layer):
    """Run the kernel in Triton's interpreter on CPU tensors (tests): out [B, H, T, D]. The caller
    sets TRITON_INTERPRET=1 before the first Triton import of the process."""
    import torch

    out = torch.full((spec.batch, spec.heads, spec.length, spec.head_dim), float("nan"), dtype=q.dtype)
    kernel_function()[spec.grid[:2]](q, k_new, v_new, cache, table, start, layer, out, **spec.constants())
    return out
