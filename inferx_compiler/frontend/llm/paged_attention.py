"""A decode step's attention through our paged-attention kernel: the op the decoder calls, its
eager definition, the rule that picks its splits, and the combine of its splits.

On CUDA targets the decoder's decode entries call `torch.ops.inferx.paged_attention_partials`
for the cached positions (kernels/triton_paged_attention.py computes it on the GPU, reading the
cache through the block table) and combine its per-split results with the step's own key and
value here, in plain torch ops that the compiler fuses:

    acc[b, h, s, :], (m, l)[b, h, s] = partials(q, cache, table, start, layer)   (the kernel)
    M   = max(max_s m, q . k_new)
    out = (sum_s e^(m_s - M) acc_s + e^(q.k_new - M) v_new) / (sum_s e^(m_s - M) l_s + e^(q.k_new - M))

torch.export keeps the op as one node; torch-mlir's FX importer writes it as a `torch.operator`,
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

from inferx_compiler.kernels.triton_paged_attention import BLOCK_N, NEG

OP_NAME = "inferx::paged_attention_partials"
PREFILL_OP_NAME = "inferx::paged_prefill_attention"
# how torch-mlir's FX importer names them
TORCH_OPERATOR = "torch.inferx.paged_attention_partials"
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


def partials_reference(q, cache, table, start, layer, splits: int, window: int):
    """What the kernel computes, in torch: q [B, H, D] (scaled), cache [L, 2, N, kvh, bs, D], table
    [B, TW] i64, start [B] i64, layer [1] i32 -> acc [B, H, splits, D] f32 (p.v, p not normalized,
    p cast to the cache's dtype before the product as the kernel does), stats [B, H, splits, 2]
    f32 (the split's max score m, or NEG where it has no visible position, and its sum l)."""
    from inferx_compiler.frontend.llm.decoder import read_blocks

    B, H, D = q.shape
    kvh = cache.shape[3]
    g = H // kvh
    i = layer.reshape(()).long()
    keys = read_blocks(cache[i, 0], table).float()  # [B, kvh, P, D]
    values = read_blocks(cache[i, 1], table)
    P = keys.shape[2]
    scores = torch.matmul(q.reshape(B, kvh, g, D).float(), keys.transpose(-1, -2))  # [B, kvh, g, P]
    pos = torch.arange(P, device=q.device)[None, :]
    visible = pos < start[:, None]
    if window:
        visible = visible & (pos > start[:, None] - window)
    split = torch.div(pos, split_size(start, splits)[:, None], rounding_mode="floor")  # [B, P]
    member = (split[:, :, None] == torch.arange(splits, device=q.device)[None, None, :]) & visible[:, :, None]
    member = member[:, None, None]  # [B, 1, 1, P, S]
    s = torch.where(member, scores[..., None], NEG)  # [B, kvh, g, P, S]
    m = s.amax(dim=3)  # [B, kvh, g, S]
    p = torch.where(member, torch.exp(s - m[:, :, :, None]), 0.0)
    l = p.sum(dim=3)
    acc = torch.einsum("bkgps,bkpd->bkgsd", p.to(values.dtype).float(), values.float())
    acc = acc.reshape(B, H, splits, D)
    stats = torch.stack([m, l], dim=-1).reshape(B, H, splits, 2)
    return acc.contiguous(), stats.contiguous()


@torch.library.custom_op(OP_NAME, mutates_args=())
def paged_attention_partials(q: torch.Tensor, cache: torch.Tensor, table: torch.Tensor, start: torch.Tensor,
                             layer: torch.Tensor, splits: int, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    return partials_reference(q, cache, table, start, layer, splits, window)


@paged_attention_partials.register_fake
def _(q, cache, table, start, layer, splits, window):
    B, H, D = q.shape
    return q.new_empty(B, H, splits, D, dtype=torch.float32), q.new_empty(B, H, splits, 2, dtype=torch.float32)


def combine(acc, stats, q, k_new, v_new):
    """The attention output [B, H, D] in q's dtype from the kernel's splits and the step's own key
    and value (k_new, v_new [B, kvh, 1, D]; q [B, H, D] scaled), softmax in float32."""
    B, H, D = q.shape
    kvh = k_new.shape[1]
    g = H // kvh
    s_self = (q.reshape(B, kvh, g, D).float() * k_new.float()).sum(-1).reshape(B, H)  # [B, H]
    v_self = v_new.float().expand(B, kvh, g, D).reshape(B, H, D)
    m, l = stats[..., 0], stats[..., 1]  # [B, H, S]
    top = torch.maximum(m.amax(-1), s_self)
    w = torch.exp(m - top[..., None])
    w_self = torch.exp(s_self - top)
    num = (w[..., None] * acc).sum(2) + w_self[..., None] * v_self
    den = (w * l).sum(-1) + w_self
    return (num / den[..., None]).to(q.dtype)


def attend(q, k_new, v_new, cache, table, start, layer: int, splits: int, window: int):
    """Decode attention through the op: q [B, H, D] scaled; -> [B, H, D]."""
    index = torch.full((1,), layer, dtype=torch.int32)
    acc, stats = torch.ops.inferx.paged_attention_partials(q, cache, table, start, index, splits, window)
    return combine(acc, stats, q, k_new, v_new)


def prefill_reference(q, k_new, v_new, cache, table, start, layer, window: int):
    """What the prefill kernel computes, in torch (the decoder's own attention): q [B, H, T, D]
    scaled, k_new/v_new [B, kvh, T, D], cache, table, start [B] (the chunk's first position), layer
    [1] i32 -> [B, H, T, D] in q's dtype."""
    from inferx_compiler.frontend.llm.decoder import GatheredCache, attention_masks, read_blocks

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
