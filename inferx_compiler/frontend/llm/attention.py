"""The decoder's attention written out in torch ops, and what both it and our kernels' torch
definitions read: the block-table read of the cache and the masks of a chunk.

`GatheredCache` is what CPU builds compile (and GPU builds with `--disable-pass
inferx-paged-attention` or an int8 cache); `paged_attention.py` holds the kernels' path.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

NEG = -1.0e30  # finite "minus infinity" for masked scores (avoids inf-inf NaNs anywhere)


def read_blocks(cache_kv: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """One layer's keys (or values) [blocks, kvh, bs, D] read through table [B, M] ->
    [B, kvh, M*bs, D], position-major as the attention reads them."""
    B, M = table.shape
    _, kvh, bs, D = cache_kv.shape
    return cache_kv[table].permute(0, 2, 1, 3, 4).reshape(B, kvh, M * bs, D)


def attention_masks(start: torch.Tensor, T: int, S: int, window) -> tuple[torch.Tensor, torch.Tensor]:
    """(cache_mask [B,1,1,T,S], self_mask [1,1,1,T,T]) of a chunk of T tokens at positions
    start[b] + t over a table of S positions: cached key s is visible iff s < start[b] (and, with
    a sliding window, start[b] + t - s < window); new key j iff j <= t (and t - j < window)."""
    B = start.shape[0]
    t_idx = torch.arange(T, dtype=torch.int64, device=start.device)
    s_idx = torch.arange(S, dtype=torch.int64, device=start.device)
    cache_mask = s_idx[None, None, :] < start[:, None, None]  # [B, 1, S] -> [B,T,S]
    if window:
        pos = start[:, None] + t_idx[None, :]
        cache_mask = cache_mask & (pos[:, :, None] - s_idx[None, None, :] < window)
    else:
        cache_mask = cache_mask.expand(B, T, S)
    self_mask = t_idx[None, :] <= t_idx[:, None]  # [T(query), T(key)]
    if window:
        self_mask = self_mask & (t_idx[:, None] - t_idx[None, :] < window)
    return cache_mask[:, None, None], self_mask[None, None, None]


@dataclass
class GatheredCache:
    """One layer's cached keys and values read through the table (`read_blocks`), attended with
    the step's own: k_cache/v_cache [B,kvh,S,D]; cache_mask [B,1,1,T,S] and self_mask
    [1|B,1,1,T,T] (bool, True = visible)."""

    k_cache: torch.Tensor
    v_cache: torch.Tensor
    cache_mask: torch.Tensor
    self_mask: torch.Tensor

    def attend(self, qg, k, v):
        """qg [B, kvh, g*T, D] (scaled), k/v [B, kvh, T, D] -> [B, kvh, g*T, D]."""
        B, kvh, rows, d = qg.shape
        T = k.shape[2]
        g = rows // T
        s_cache = torch.matmul(qg, self.k_cache.transpose(-1, -2)).view(B, kvh, g, T, -1)
        s_self = torch.matmul(qg, k.transpose(-1, -2)).view(B, kvh, g, T, T)
        s_cache = torch.where(self.cache_mask, s_cache, NEG)
        s_self = torch.where(self.self_mask, s_self, NEG)
        S = self.k_cache.shape[2]
        # softmax in float32 whatever the model's dtype (as transformers does)
        p = torch.softmax(torch.cat([s_cache, s_self], dim=-1), dim=-1, dtype=torch.float32).to(qg.dtype)
        p_cache = p[..., :S].reshape(B, kvh, g * T, S)
        p_self = p[..., S:].reshape(B, kvh, g * T, T)
        # V read through a transpose, as K is: IREE then reads the cache slice in the dispatch (with
        # p_cache @ v_cache it copied the slice out of the cache first)
        out = torch.matmul(self.v_cache.transpose(-1, -2), p_cache.transpose(-1, -2)).transpose(-1, -2)
        return out + torch.matmul(p_self, v)
