"""Decode-step attention over the paged KV cache, written in Triton and compiled ahead of time.

A decode step attends one query row a head to every cached position of its sequence. IREE 3.13
compiled our decoder's form of that (scores over the whole table width, a softmax over each
2561-wide row, then P.V) as serial reductions: 48 of a Llama-3-8B decode step's 56 ms on an H100
(docs/bench/2026-12-07-h100-llama8b-decode-profile). This kernel reads the cache where it lies,
through the block table, and only the positions a sequence has:

    program (b, kv head h, split s), positions [s * P, (s + 1) * P) below start[b] (and, with a
    sliding window W, above start[b] - W), P = ceil(start[b] / splits) rounded up to BN; split 0
    also takes the step's own new key and value (k_new, v_new [B, KVH, 1, D]):
        k, v = cache[layer, 0 | 1, table[b, p // BS], h, p % BS, :]     BN positions a step
        scores = q[b, h*G:(h+1)*G, :] . k^T                              (the G query heads of h)
        online softmax: m (running max), l (running sum), acc (running p . v)
    -> acc[b, head, s, :] (f32, not normalized), stats[b, head, s, :] = (m, l)
    then `combine_kernel`, program (b, head):
        out[b, head, :] = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s    (M = max_s m_s)

The splits (flash-decoding) give a short batch enough programs to fill the GPU, and divide the
positions a sequence has (not the table's width). A split with no visible position stores
m = -1e30, l = 0, acc = 0, which the combine weighs to nothing. Two launches a layer: a decode
step at batch 1 is bound by launches (docs/bench/2026-12-08-h100-paged-attention). The G query heads that share a KV head are
the rows of one tensor-core tile (padded to GP >= 16 rows), so each key and value is read once
a group. Offsets are 64-bit: a server's cache passes 2^31 elements.

The layer index is read from a one-element buffer (IREE binds only buffers to an external
kernel), so one compiled kernel serves every layer of a batch size.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from typing import Optional

NEG = -1.0e30  # the finite "minus infinity" of masked scores (frontend/llm/attention.py NEG)
ELEMENT_TYPES = {"f16": "fp16", "bf16": "bf16"}
tl = None  # triton.language, set by kernel_function (the kernel body reads it as a global)
MIN_ROWS = 16  # tl.dot's smallest tile side
BLOCK_N = 64  # cached positions a loop step


def spec_key(prefix: str, spec) -> str:
    """A spec's cache key: its fields and the kernels' sources (source_digest)."""
    text = json.dumps(dataclasses.asdict(spec), sort_keys=True) + source_digest()
    return prefix + hashlib.sha256(text.encode()).hexdigest()[:16]


class CacheReader:
    """What the decode and prefill specs share: the checks on the cache's element type and head
    size, and the query heads (fields kv_heads, group, head_dim, element_type)."""

    def __post_init__(self):
        why = unsupported(self.head_dim, self.element_type, getattr(self, "splits", 1))
        if why:
            raise ValueError(why)

    @property
    def heads(self) -> int:
        return self.kv_heads * self.group


@dataclasses.dataclass(frozen=True)
class PagedAttentionSpec(CacheReader):
    """One compiled kernel: a decode batch over a cache of `layers` x 2 x `blocks` x `kv_heads` x
    `block_size` x `head_dim` elements of `element_type`, read through a [batch, table_width]
    table, in `splits` slices of the table's positions."""

    batch: int
    kv_heads: int
    group: int  # query heads a KV head
    head_dim: int
    block_size: int
    table_width: int
    blocks: int
    layers: int
    splits: int
    window: int = 0  # sliding window (0: none)
    element_type: str = "f16"
    arch: int = 90
    block_n: int = BLOCK_N
    warps: int = 4
    stages: int = 2

    @property
    def rows(self) -> int:
        """Query rows a program: the group padded to a power of two of at least MIN_ROWS."""
        return max(MIN_ROWS, 1 << (self.group - 1).bit_length())

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.batch * self.kv_heads, self.splits, 1)

    def key(self) -> str:
        return spec_key("paged-attention-", self)

    def constants(self) -> dict:
        return dict(KVH=self.kv_heads, G=self.group, GP=self.rows, D=self.head_dim, BS=self.block_size,
                    TW=self.table_width, PLANE=self.blocks * self.kv_heads * self.block_size,
                    SPLITS=self.splits, BN=self.block_n, WINDOW=self.window)


@functools.lru_cache(maxsize=None)
def source_digest() -> str:
    """A digest of the kernels' sources (this module and the prefill kernel's): part of every
    spec's key, so an edited kernel is never served from the PTX cache."""
    import os

    here = os.path.dirname(__file__)
    digest = hashlib.sha256()
    for name in ("triton_paged_attention.py", "triton_prefill_attention.py"):
        with open(os.path.join(here, name), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


def unsupported(head_dim: int, element_type: str, splits: int) -> Optional[str]:
    """Why the kernel does not take these, or None."""
    if element_type not in ELEMENT_TYPES:
        return f"a {element_type} cache (the kernel reads f16 or bf16)"
    if head_dim < 16 or head_dim & (head_dim - 1):
        return f"head_dim {head_dim} (the kernel takes powers of two from 16)"
    if splits < 1:
        return f"{splits} splits"
    return None


POINTERS = ("q_ptr", "k_ptr", "v_ptr", "cache_ptr", "table_ptr", "start_ptr", "layer_ptr", "acc_ptr", "stats_ptr")
INPUTS = 7  # q, k_new, v_new, cache, table, start, layer: read; acc, stats: written


def paged_attention_kernel(q_ptr, k_ptr, v_ptr, cache_ptr, table_ptr, start_ptr, layer_ptr, acc_ptr, stats_ptr,
                           KVH: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr,
                           BS: tl.constexpr, TW: tl.constexpr, PLANE: tl.constexpr, SPLITS: tl.constexpr,
                           BN: tl.constexpr, WINDOW: tl.constexpr):
    """The kernel's Python body (made a @triton.jit function by `kernel_function`, with every
    argument after the pointers a constexpr: the annotations stay strings, as this module
    postpones them). q [B, KVH*G, D]; k_new, v_new [B, KVH, 1, D]; cache [L, 2, blocks, KVH, BS, D];
    table [B, TW] i64; start [B] i64; layer [1] i32; acc [B, KVH*G, SPLITS, D] f32;
    stats [B, KVH*G, SPLITS, 2] f32. PLANE = blocks * KVH * BS rows of one layer's keys. (`tl`
    is this module's global, set by `kernel_function`: importing Triton is left to builds that
    use it.)"""
    pid = tl.program_id(0)
    b = pid // KVH
    h = pid % KVH
    s = tl.program_id(1)
    rows = tl.arange(0, GP)
    d = tl.arange(0, D)
    head = h * G + rows
    real = rows < G
    q = tl.load(q_ptr + (b * KVH * G + head)[:, None] * D + d[None, :], mask=real[:, None], other=0.0)
    start = tl.load(start_ptr + b).to(tl.int32)
    layer = tl.load(layer_ptr).to(tl.int64)
    per = tl.maximum(tl.cdiv(tl.cdiv(start, SPLITS), BN) * BN, BN)  # positions a split (paged_attention.split_size)
    lo = s * per
    hi = tl.minimum(lo + per, start)
    if WINDOW > 0:
        lo = tl.maximum(lo, start - WINDOW + 1)
    keys = layer * 2 * PLANE  # this layer's first key row
    m_i = tl.full([GP], -1.0e30, tl.float32)
    l_i = tl.zeros([GP], tl.float32)
    acc = tl.zeros([GP, D], tl.float32)
    if s == 0:  # the step's own key and value, always visible (row 0 of a 16-row tile)
        j = tl.arange(0, 16)
        own = j == 0
        new_row = (b * KVH + h) * D + d[None, :] + 0 * j[:, None]
        k = tl.load(k_ptr + new_row, mask=own[:, None], other=0.0)
        scores = tl.where(own[None, :], tl.dot(q, tl.trans(k)), -1.0e30)
        m_i = tl.max(scores, 1)
        p = tl.where(own[None, :], tl.exp(scores - m_i[:, None]), 0.0)
        l_i = tl.sum(p, 1)
        v = tl.load(v_ptr + new_row, mask=own[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v)
    for p0 in range(lo, hi, BN):
        pos = p0 + tl.arange(0, BN)
        valid = pos < hi
        block = tl.load(table_ptr + b * TW + pos // BS, mask=valid, other=0)
        row = keys + (block * KVH + h) * BS + pos % BS
        k = tl.load(cache_ptr + row[:, None] * D + d[None, :], mask=valid[:, None], other=0.0)
        scores = tl.dot(q, tl.trans(k))
        scores = tl.where(valid[None, :], scores, -1.0e30)
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(cache_ptr + (row + PLANE)[:, None] * D + d[None, :], mask=valid[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = (b * KVH * G + head) * SPLITS + s
    tl.store(acc_ptr + out[:, None] * D + d[None, :], acc, mask=real[:, None])
    tl.store(stats_ptr + out * 2, m_i, mask=real)
    tl.store(stats_ptr + out * 2 + 1, l_i, mask=real)


COMBINE_POINTERS = ("acc_ptr", "stats_ptr", "out_ptr")
COMBINE_INPUTS = 2  # acc, stats: read; out: written


def combine_kernel(acc_ptr, stats_ptr, out_ptr, SPLITS: tl.constexpr, SP: tl.constexpr, D: tl.constexpr):
    """out [B*H, D] (the element type) from acc [B*H, SPLITS, D] and stats [B*H, SPLITS, 2]; SP:
    SPLITS rounded up to a power of two."""
    row = tl.program_id(0)
    s = tl.arange(0, SP)
    d = tl.arange(0, D)
    valid = s < SPLITS
    m = tl.load(stats_ptr + (row * SPLITS + s) * 2, mask=valid, other=-1.0e30)
    l = tl.load(stats_ptr + (row * SPLITS + s) * 2 + 1, mask=valid, other=0.0)
    w = tl.exp(m - tl.max(m, 0))
    a = tl.load(acc_ptr + (row * SPLITS + s)[:, None] * D + d[None, :], mask=valid[:, None], other=0.0)
    out = tl.sum(w[:, None] * a, 0) / tl.sum(w * l, 0)
    tl.store(out_ptr + row * D + d, out.to(out_ptr.dtype.element_ty))


@dataclasses.dataclass(frozen=True)
class CombineSpec:
    """The splits' combine of a PagedAttentionSpec: one program a (sequence, head)."""

    rows: int  # batch x heads
    splits: int
    head_dim: int
    element_type: str = "f16"
    arch: int = 90
    warps: int = 1
    stages: int = 1

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.rows, 1, 1)

    def key(self) -> str:
        return spec_key("paged-attention-combine-", self)

    def constants(self) -> dict:
        return dict(SPLITS=self.splits, SP=max(2, 1 << (self.splits - 1).bit_length()), D=self.head_dim)

    @classmethod
    def of(cls, spec: PagedAttentionSpec) -> "CombineSpec":
        return cls(spec.batch * spec.heads, spec.splits, spec.head_dim, spec.element_type, spec.arch)


def kernel_function(body=None):
    """The @triton.jit function of `body` (default: the partials kernel), made per call, so
    TRITON_INTERPRET set before it is honoured."""
    import triton
    import triton.language as tl

    globals()["tl"] = tl
    return triton.jit(body or paged_attention_kernel)


def signature(spec) -> tuple[dict, dict]:
    """(Triton signature, constexprs) for a PagedAttentionSpec or its CombineSpec."""
    element = ELEMENT_TYPES[spec.element_type]
    if isinstance(spec, CombineSpec):
        pointers, types = COMBINE_POINTERS, ["*fp32", "*fp32", f"*{element}"]
    else:
        pointers, types = POINTERS, [f"*{element}"] * 4 + ["*i64", "*i64", "*i32", "*fp32", "*fp32"]
    constants = spec.constants()
    sig = dict(zip(pointers, types))
    sig.update({name: "constexpr" for name in constants})
    return sig, constants


def compile_kernel(spec, cache_dir: Optional[str] = None):
    """PTX and launch parameters (triton_matmul.CompiledKernel) for a PagedAttentionSpec or its
    CombineSpec."""
    from inferx_compiler.kernels.triton_matmul import compile_cached

    body = combine_kernel if isinstance(spec, CombineSpec) else paged_attention_kernel
    return compile_cached(spec, lambda: kernel_function(body), *signature(spec), cache_dir)


def launch_interpreted(spec: PagedAttentionSpec, q, k_new, v_new, cache, table, start, layer):
    """Run both kernels in Triton's interpreter on CPU tensors (tests): (acc, stats, out). The
    caller sets TRITON_INTERPRET=1 before the first Triton import of the process."""
    import torch

    B, H = spec.batch, spec.heads
    acc = torch.full((B, H, spec.splits, spec.head_dim), float("nan"), dtype=torch.float32)
    stats = torch.full((B, H, spec.splits, 2), float("nan"), dtype=torch.float32)
    kernel_function()[spec.grid[:2]](q, k_new, v_new, cache, table, start, layer, acc, stats, **spec.constants())
    out = torch.full((B, H, spec.head_dim), float("nan"), dtype=q.dtype)
    combine = CombineSpec.of(spec)
    kernel_function(combine_kernel)[combine.grid[:1]](acc, stats, out, **combine.constants())
    return acc, stats, out
