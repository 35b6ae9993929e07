"""A decode step's attention through our paged-attention kernel: the op the decoder calls, its
eager definition, the rule that picks its splits, and the combine of its splits.

On CUDA targets the decoder's decode steps call `torch.ops.inferx.paged_decode_attention` and its
prefill chunks `torch.ops.inferx.paged_prefill_attention` (kernels/triton_paged_attention.py and
triton_prefill_attention.py compute them on the GPU, reading the cache through the block table).
A decode step is two launches:

    acc[b, h, s, :], (m, l)[b, h, s] = partials(q, k_new, v_new, cache, table, start, layer)
                                       (split 0 also holds the step's own key and value)
    out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s,  M = max_s m_s        (the combine)

torch.export keeps each op as one node; torch-mlir's FX importer writes it as a `torch.operator`,
which frontend/llm/kernel_calls.py turns into a call that passes/paged_attention.py replaces by
the kernel's dispatch. The eager definition below is the reference the kernel is tested
against and what the decoder runs in torch.

Split s of sequence b covers positions [s * P, (s + 1) * P) with P = ceil(ceil(start[b] / S) / 64)
* 64: the splits divide the positions a sequence has, not the table's width, so a short sequence
is not one busy split among idle ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from inferx_compiler.frontend.llm.attention import NEG, GatheredCache, attention_masks, read_blocks
from inferx_compiler.kernels.triton_paged_attention import BLOCK_N

OP_NAME = "inferx::paged_decode_attention"
PREFILL_OP_NAME = "inferx::paged_prefill_attention"
# how torch-mlir's FX importer names them
TORCH_OPERATOR = "torch.inferx.paged_decode_attention"
PREFILL_TORCH_OPERATOR = "torch.inferx.paged_prefill_attention"
PROGRAMS_PER_SM = 2


@dataclass(frozen=True)
class KernelAttention:
    """The decoder's decode steps use the kernel; `sms` (the target's multiprocessors) sets the
    splits: enough programs (batch x kv heads x splits) for PROGRAMS_PER_SM a multiprocessor, at
    most one split per BLOCK_N positions of the table."""

    sms: int

    def splits(self, batch: int, kv_heads: int, positions: int) -> int:
        wanted = math.ceil(PROGRAMS_PER_SM * self.sms / (batch * kv_heads))
        return max(1, min(wanted, positions // BLOCK_N))


PASS_NAME = "inferx-paged-attention"  # passes/paged_attention.py: --disable-pass names it
DTYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}


def for_build(build, cfg, dtype: str, int8_cache: bool):
    """(KernelAttention, "") where a build's decode steps attend through the kernel, else (None,
    why not): CUDA targets of sm_80 or later with Triton, f16/bf16 caches, head_dim a power of two."""
    from inferx_compiler.kernels.triton_paged_attention import unsupported
    from inferx_compiler.passes.support import dequant_matvec

    target = build.target
    if target.backend != "cuda":
        return None, f"target '{target.name}' is not a CUDA GPU"
    if not build.runs(PASS_NAME):
        return None, f"--disable-pass {PASS_NAME}"
    if int8_cache:
        return None, "an int8 cache (the kernel reads f16 or bf16)"
    why = dequant_matvec.declined(target) or unsupported(cfg.head_dim, DTYPES.get(dtype, dtype), 1)
    if why:
        return None, why
    return KernelAttention(target.cores or 1), ""


def split_size(start: torch.Tensor, splits: int) -> torch.Tensor:
    """Positions a split, per sequence: ceil(start / splits) rounded up to BLOCK_N (at least BLOCK_N)."""
    per = torch.div(start + splits - 1, splits, rounding_mode="floor")
    per = torch.div(per + BLOCK_N - 1, BLOCK_N, rounding_mode="floor") * BLOCK_N
    return per.clamp(min=BLOCK_N)


def partials_reference(q, k_new, v_new, cache, table, start, layer, splits: int, window: int):
    """What the decode kernel's first launch computes, in torch: q [B, H, D] (scaled), k_new/v_new
    [B, kvh, 1, D], cache [L, 2, N, kvh, bs, D], table [B, TW] i64, start [B] i64, layer [1] i32 ->
    acc [B, H, splits, D] f32 (p.v, p not normalized, p cast to the cache's dtype before the
    product as the kernel does), stats [B, H, splits, 2] f32 (the split's max score m, or NEG
    where it has no visible key, and its sum l). Split 0 also holds the step's own key."""
    B, H, D = q.shape
    kvh = cache.shape[3]
    g = H // kvh
    i = layer.reshape(()).long()
    keys = torch.cat([read_blocks(cache[i, 0], table), k_new], dim=2).float()  # [B, kvh, P + 1, D]
    values = torch.cat([read_blocks(cache[i, 1], table), v_new], dim=2)
    P = keys.shape[2] - 1
    scores = torch.matmul(q.reshape(B, kvh, g, D).float(), keys.transpose(-1, -2))  # [B, kvh, g, P + 1]
    pos = torch.arange(P, device=q.device)[None, :]
    visible = pos < start[:, None]
    if window:
        visible = visible & (pos > start[:, None] - window)
    split = torch.div(pos, split_size(start, splits)[:, None], rounding_mode="floor")  # [B, P]
    member = (split[:, :, None] == torch.arange(splits, device=q.device)[None, None, :]) & visible[:, :, None]
    own = (torch.arange(splits, device=q.device) == 0).expand(B, 1, splits)  # the new key: split 0
    member = torch.cat([member, own], dim=1)[:, None, None]  # [B, 1, 1, P + 1, S]
    s = torch.where(member, scores[..., None], NEG)  # [B, kvh, g, P + 1, S]
    m = s.amax(dim=3)  # [B, kvh, g, S]
    p = torch.where(member, torch.exp(s - m[:, :, :, None]), 0.0)
    l = p.sum(dim=3)
    acc = torch.einsum("bkgps,bkpd->bkgsd", p.to(values.dtype).float(), values.float())
    acc = acc.reshape(B, H, splits, D)
    stats = torch.stack([m, l], dim=-1).reshape(B, H, splits, 2)
    return acc.contiguous(), stats.contiguous()


def combine(acc, stats, dtype):
    """The attention output [B, H, D] in `dtype` from the splits' acc [B, H, S, D] and stats
    [B, H, S, 2] (what the decode kernel's second launch computes)."""
    m, l = stats[..., 0], stats[..., 1]
    w = torch.exp(m - m.amax(-1, keepdim=True))
    return ((w[..., None] * acc).sum(2) / (w * l).sum(-1)[..., None]).to(dtype)


def decode_reference(q, k_new, v_new, cache, table, start, layer, splits: int, window: int):
    """The decode attention [B, H, D] in q's dtype, as the two launches compute it."""
    acc, stats = partials_reference(q, k_new, v_new, cache, table, start, layer, splits, window)
    return combine(acc, stats, q.dtype)


@torch.library.custom_op(OP_NAME, mutates_args=())
def paged_decode_attention(q: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor, cache: torch.Tensor,
                           table: torch.Tensor, start: torch.Tensor, layer: torch.Tensor, splits: int,
                           window: int) -> torch.Tensor:
    return decode_reference(q, k_new, v_new, cache, table, start, layer, splits, window).contiguous()


@paged_decode_attention.register_fake
def _(q, k_new, v_new, cache, table, start, layer, splits, window):
    return torch.empty_like(q)


def attend(q, k_new, v_new, cache, table, start, layer: int, splits: int, window: int):
    """Decode attention through the op: q [B, H, D] scaled; -> [B, H, D]."""
    index = torch.full((1,), layer, dtype=torch.int32)
    return torch.ops.inferx.paged_decode_attention(q, k_new, v_new, cache, table, start, index, splits, window)


def prefill_reference(q, k_new, v_new, cache, table, start, layer, window: int):
    """What the prefill kernel computes, in torch (the decoder's own attention): q [B, H, T, D]
    scaled, k_new/v_new [B, kvh, T, D], cache, table, start [B] (the chunk's first position), layer
    [1] i32 -> [B, H, T, D] in q's dtype."""
    B, H, T, D = q.shape
    kvh = cache.shape[3]
    i = layer.reshape(()).long()
    k_cache, v_cache = read_blocks(cache[i, 0], table), read_blocks(cache[i, 1], table)
    cache_mask, self_mask = attention_masks(start, T, k_cache.shape[2], window)
    out = GatheredCache(k_cache, v_cache, cache_mask, self_mask).attend(q.reshape(B, kvh, H // kvh * T, D), k_new, v_new)
    return out.reshape(B, H, T, D)


@torch.library.custom_op(PREFILL_OP_NAME, mutates_args=())
def paged_prefill_attention(q: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor, cache: torch.Tensor,
                            table: torch.Tensor, start: torch.Tensor, layer: torch.Tensor, window: int) -> torch.Tensor:
    return prefill_reference(q, k_new, v_new, cache, table, start, layer, window).contiguous()


@paged_prefill_attention.register_fake
def _(q, k_new, v_new, cache, table, start, layer, window):
    return torch.empty_like(q)


def attend_chunk(q, k_new, v_new, cache, table, start, layer: int, window: int):
    """A prefill chunk's attention through the op: q [B, H, T, D] scaled -> [B, H, T, D]."""
    index = torch.full((1,), layer, dtype=torch.int32)
    return torch.ops.inferx.paged_prefill_attention(q, k_new, v_new, cache, table, start, index, window)


@dataclass
class KernelCache:
    """One layer's attention through our paged-attention kernels' ops: the whole cache, the
    table, the chunk's first positions and its own keys and values go to the kernel, which reads
    layer `layer`'s blocks where they lie; a decode step (T = 1) in `splits` splits, a prefill
    chunk causally."""

    cache: torch.Tensor
    table: torch.Tensor
    start: torch.Tensor
    layer: int
    splits: int
    window: int

    def attend(self, qg, k, v):
        B, kvh, rows, d = qg.shape
        T = k.shape[2]
        if T == 1:
            out = attend(qg.reshape(B, rows * kvh, d), k, v, self.cache, self.table, self.start, self.layer,
                         self.splits, self.window)
        else:
            out = attend_chunk(qg.reshape(B, kvh * rows // T, T, d), k, v, self.cache, self.table, self.start,
                               self.layer, self.window)
        return out.reshape(B, kvh, rows, d)
