"""Our own Llama-family decoder (Llama / Mistral / Qwen2 / SmolLM) in PyTorch, export-friendly.

Pieces: `RMSNorm`, RoPE (`rope_cos_sin`, `apply_rope`; scaling folded into the inverse
frequencies by `config.rope_inv_freq`), `Attention` (GQA without repeating KV heads; the
projections and RoPE here, the attention itself by a cache view: `attention.GatheredCache`, written
out in torch ops, or `paged_attention.KernelCache`, our kernels' ops on CUDA builds), `MLP`
(SwiGLU), `DecoderLayer`, `LlamaDecoder`.

KV cache: one tensor in the model's dtype, in fixed-size blocks, that the entry points MUTATE
in place,

    cache[layers, 2 (k, v), blocks, kv_heads, block_size, head_dim]

and a block table per call, `table[B, table_width]` (int64): position p of sequence b lives in
block table[b, p // block_size], row p % block_size. Every entry point of an artifact shares the
one cache, whatever its batch size, so sequences keep their blocks while the batch around them
changes (continuous batching), and sequences that share a prompt prefix can share its blocks
(prefix caching). Block 0 is the scratch block: padding tokens of a ragged prefill chunk and the
idle rows of a batch (a table row of zeros) write there, so they never clobber a real position.
Each step reads the cache for the old positions through the table, attends to its own new
keys/values directly, and writes all layers' new k/v with a single `index_copy_` at the end.

An int8 cache (`--kv-cache-dtype int8`, the cache tensor's dtype decides at export) holds each
row of head_dim values as int8 with one power-of-two scale per (position, head), whose exponent
is the row's extra last byte (`cache[..., head_dim + 1]`): the shared-exponent scheme of the OCP
microscaling formats, at a block of one row. `quantize_rows` writes it (the exponent is
ceil(log2(max|x| / 127)), so every value fits in -127..127), `dequantize_rows` reads it back in
the model's dtype before the attention products. Half the bytes of an fp16 cache (a quarter of
f32), one tensor still, so every signature and the runtime's cache handling stay as they are.

Entry points (separate modules, static shapes, suitable for torch.export):
  * `Prefill(model)(tokens[B,T], start[B], lens[B], table, cache, temperature, top_k, top_p, seed)`
    -> the next token id of each sequence, sampled on the device (`sample_tokens`). Token t of
    sequence b sits at position start[b] + t; tokens t >= lens[b] are padding.
  * `Decode(model, output)(tokens[B,1], positions[B], table, cache[, temperature, top_k, top_p,
    seed])` -> ids[B]: the argmax ("greedy", no sampling inputs) or sampled ("sample").
  Built with output="logits", either returns the logits [B, vocab] instead (references, tests).

Attention masks: key s of the cache is visible to query (b, t) iff s < start[b] (and, with a
sliding window, p - s < window); new keys j of the chunk iff j <= t. Sequences of different
lengths therefore share one batch (ragged batches).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from inferx_compiler.frontend.llm.attention import NEG, GatheredCache, attention_masks, read_blocks
from inferx_compiler.frontend.llm.config import DecoderConfig, rope_inv_freq
from inferx_compiler.frontend.llm.paged_attention import KernelCache



@dataclass(frozen=True)
class CacheGeometry:
    """The KV cache's blocks: `blocks` of `block_size` rows (block 0 the scratch block), and the
    block table's width (`table_width` blocks a sequence: max_seq positions rounded up)."""

    blocks: int
    block_size: int
    table_width: int
    int8: bool = False  # an int8 cache (rows of head_dim + 1: the values and their scale's exponent)

    @property
    def positions(self) -> int:
        return self.table_width * self.block_size


def cache_shape(cfg: DecoderConfig, blocks: int, block_size: int, int8: bool = False) -> tuple[int, ...]:
    """Shape of the KV cache tensor: `blocks` blocks (block 0 the scratch block) of `block_size`
    rows; an int8 cache's rows carry their scale's exponent as one more element."""
    return (cfg.layers, 2, blocks, cfg.kv_heads, block_size, cfg.head_dim + (1 if int8 else 0))


def new_cache(cfg: DecoderConfig, blocks: int, block_size: int, dtype=torch.float32) -> torch.Tensor:
    return torch.zeros(cache_shape(cfg, blocks, block_size, dtype == torch.int8), dtype=dtype)


INT8_LEVEL = 127.0
MIN_EXPONENT, MAX_EXPONENT = -127, 127


def quantize_rows(x: torch.Tensor) -> torch.Tensor:
    """[..., D] float -> [..., D + 1] int8: round(x / 2^e) and e, with e = ceil(log2(max|x| / 127))
    per row (clamped to an int8 exponent; an all-zero row stores zeros)."""
    x = x.float()
    amax = x.abs().amax(-1, keepdim=True)
    e = torch.ceil(torch.log2(torch.clamp(amax, min=1e-38) / INT8_LEVEL)).clamp(MIN_EXPONENT, MAX_EXPONENT)
    q = torch.round(x * torch.exp2(-e)).clamp(-INT8_LEVEL, INT8_LEVEL)
    return torch.cat([q, e], dim=-1).to(torch.int8)


def dequantize_rows(q: torch.Tensor, dtype) -> torch.Tensor:
    """[..., D + 1] int8 rows of `quantize_rows` -> [..., D] in `dtype`."""
    return (q[..., :-1].float() * torch.exp2(q[..., -1:].float())).to(dtype)


class RMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + eps) * weight, computed in float32 (as transformers does)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps)).to(dtype)


def rope_cos_sin(inv_freq: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape [B, T, head_dim] for integer positions [B, T] (HF 'rotate_half' layout)."""
    freqs = positions.to(torch.float32)[..., None] * inv_freq  # [B, T, D/2]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, H, T, D]; cos/sin [B, T, D]."""
    return x * cos[:, None] + rotate_half(x) * sin[:, None]


class Attention(nn.Module):
    """Grouped-query attention reading a cache slice; KV heads are never repeated.

    Queries are laid out [B, kv_heads, group*T, D] so each KV head is read once per group with a
    plain batched matmul against [B, kv_heads, S, D]."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        d, h, kvh = cfg.head_dim, cfg.heads, cfg.kv_heads
        self.cfg = cfg
        self.q = nn.Linear(cfg.hidden, h * d, bias=cfg.attention_bias)
        self.k = nn.Linear(cfg.hidden, kvh * d, bias=cfg.attention_bias)
        self.v = nn.Linear(cfg.hidden, kvh * d, bias=cfg.attention_bias)
        self.o = nn.Linear(h * d, cfg.hidden, bias=False)
        self.scale = 1.0 / math.sqrt(d)

    def forward(self, x, cos, sin, cache):
        """x [B,T,hidden]; `cache` (GatheredCache or KernelCache) attends. Returns (out [B,T,hidden],
        k, v [B,kvh,T,D])."""
        cfg = self.cfg
        B, T, _ = x.shape
        kvh, g, d = cfg.kv_heads, cfg.group, cfg.head_dim
        q = self.q(x).view(B, T, cfg.heads, d).transpose(1, 2)  # [B, H, T, D]
        k = self.k(x).view(B, T, kvh, d).transpose(1, 2)  # [B, kvh, T, D]
        v = self.v(x).view(B, T, kvh, d).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        qg = q.reshape(B, kvh, g * T, d) * self.scale  # head h = kv_head * g + i
        out = cache.attend(qg, k, v)  # [B, kvh, g*T, D]
        out = out.reshape(B, cfg.heads, T, d).transpose(1, 2).reshape(B, T, cfg.heads * d)
        return self.o(out), k, v


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.gate = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.up = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.down = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, cache):
        a, k, v = self.attn(self.attn_norm(x), cos, sin, cache)
        x = x + a
        return x + self.mlp(self.mlp_norm(x)), k, v


# canonical weight name (weights.py) -> parameter name in LlamaDecoder
def param_name(canonical: str) -> str:
    top = {"embed": "embed.weight", "norm": "norm.weight", "lm_head": "lm_head.weight"}
    if canonical in top:
        return top[canonical]
    _, i, part = canonical.split(".", 2)
    sub = {"attn_norm": "attn_norm.weight", "mlp_norm": "mlp_norm.weight",
           "q": "attn.q.weight", "k": "attn.k.weight", "v": "attn.v.weight", "o": "attn.o.weight",
           "q_bias": "attn.q.bias", "k_bias": "attn.k.bias", "v_bias": "attn.v.bias",
           "gate": "mlp.gate.weight", "up": "mlp.up.weight", "down": "mlp.down.weight"}[part]
    return f"layers.{i}.{sub}"


class LlamaDecoder(nn.Module):
    """The whole decoder; `step` runs T tokens per sequence against the cache and mutates it."""

    def __init__(self, cfg: DecoderConfig, rope_freqs=None, device=None, dtype=torch.float32, kernel_attention=None):
        super().__init__()
        self.cfg = cfg
        # paged_attention.KernelAttention: decode steps attend through our kernel (CUDA builds)
        self.kernel_attention = kernel_attention
        self.dtype = dtype  # of the weights, activations and cache (norms and softmax compute in float32)
        with torch.device(device or "cpu"):
            self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
            self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.layers))
            self.norm = RMSNorm(cfg.hidden, cfg.rms_eps)
            self.lm_head = None if cfg.tie_embeddings else nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        self.to(dtype)
        # a plain attribute (not a buffer): torch.export lifts it as a small constant
        self.inv_freq = torch.from_numpy(rope_inv_freq(cfg, rope_freqs))

    @classmethod
    def from_state(cls, cfg: DecoderConfig, state: dict[str, np.ndarray]) -> "LlamaDecoder":
        """Build with weights from a canonical-name state (weights.load_*)."""
        with torch.device("meta"):
            m = cls(cfg, state.get("rope_freqs"), device="meta")
        params = {param_name(k): torch.from_numpy(np.array(v, dtype=np.float32))
                  for k, v in state.items() if k != "rope_freqs"}
        m.load_state_dict(params, strict=True, assign=True)
        return m.eval()

    def canonical_names(self) -> list[str]:
        from inferx_compiler.frontend.llm.weights import expected_names

        return expected_names(self.cfg)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        w = self.embed.weight if self.lm_head is None else self.lm_head.weight
        return torch.matmul(self.norm(h), w.t())

    def step(self, tokens, start, lens, table, cache, all_logits: bool = False):
        """Run tokens [B,T] at positions start[b]+t (sequence b's blocks: table[b]); write their
        k/v into `cache` in place.

        Returns logits [B, vocab] at each sequence's last valid token (t = lens[b]-1), or
        [B, T, vocab] with all_logits."""
        cfg = self.cfg
        B, T = tokens.shape
        S = table.shape[1] * cache.shape[4]  # the positions a table row spans
        t_idx = torch.arange(T, dtype=torch.int64)
        pos = start[:, None] + t_idx[None, :]  # [B, T]
        cos, sin = rope_cos_sin(self.inv_freq, pos)
        cos, sin = cos.to(self.dtype), sin.to(self.dtype)
        cache_mask, self_mask = attention_masks(start, T, S, cfg.sliding_window)

        x = self.embed(tokens)
        new_k, new_v = [], []
        int8 = cache.dtype == torch.int8
        kernel = self.kernel_attention is not None and not int8
        splits = self.kernel_attention.splits(B, cfg.kv_heads, S) if kernel and T == 1 else 0
        for i, layer in enumerate(self.layers):
            if kernel:
                view = KernelCache(cache, table, start, i, splits, cfg.sliding_window or 0)
            else:
                k_cache, v_cache = read_blocks(cache[i, 0], table), read_blocks(cache[i, 1], table)
                if int8:
                    k_cache, v_cache = dequantize_rows(k_cache, self.dtype), dequantize_rows(v_cache, self.dtype)
                view = GatheredCache(k_cache, v_cache, cache_mask, self_mask)
            x, k, v = layer(x, cos, sin, view)
            new_k.append(k)
            new_v.append(v)
        kv = torch.stack([torch.stack(new_k), torch.stack(new_v)], dim=1)
        write_cache(cache, quantize_rows(kv) if int8 else kv, pos, lens, table)
        if all_logits:
            return self.logits(x)
        last = (lens - 1).clamp(min=0)
        h = torch.gather(x, 1, last[:, None, None].expand(B, 1, cfg.hidden))[:, 0]
        return self.logits(h)


def write_cache(cache: torch.Tensor, kv: torch.Tensor, pos: torch.Tensor, lens: torch.Tensor,
                table: torch.Tensor) -> None:
    """Scatter kv [L, 2, B, kvh, T, D] into cache [L, 2, blocks, kvh, bs, D]: token t of sequence b
    to block table[b, pos[b,t] // bs], row pos[b,t] % bs. Padding tokens (t >= lens[b]) go to the
    scratch block 0. One `index_copy_` on a flat [L*2*blocks*kvh*bs, D] view of the cache, i.e.
    one scatter of L*2*B*kvh*T rows."""
    L, two, blocks, kvh, bs, D = cache.shape
    T = kv.shape[4]
    valid = torch.arange(T, dtype=torch.int64)[None, :] < lens[:, None]  # [B, T]
    block = torch.gather(table, 1, (pos // bs).clamp(max=table.shape[1] - 1))
    block = torch.where(valid, block, 0)[None, None, :, None, :]  # [1, 1, B, 1, T]
    row = torch.where(valid, pos % bs, 0)[None, None, :, None, :]
    layer_kv = torch.arange(L * two, dtype=torch.int64).view(L, two, 1, 1, 1)
    head = torch.arange(kvh, dtype=torch.int64).view(1, 1, 1, kvh, 1)
    index = ((layer_kv * blocks + block) * kvh + head) * bs + row  # [L, 2, B, kvh, T]
    cache.view(-1, D).index_copy_(0, index.reshape(-1), kv.reshape(-1, D))


# ----------------------------------------------------------------------------- sampling on the device
#
# A decode step returns token ids, not logits: the sampler runs in the exported graph. It needs
# neither sort nor cumsum (which the linalg-on-tensors lowering lacks): the top-k and top-p
# thresholds are found by a search over the logit value, 16 thresholds a round for 6 rounds (the
# count, resp. the probability mass, above a value falls as the value grows), and the draw among the kept tokens is Gumbel-max with
# noise from a counter-based integer hash of (seed, position, token id): seeded, reproducible, the
# same in torch and in the compiled module, no RNG state on the device.

SEARCH_POINTS, SEARCH_ROUNDS = 16, 6  # thresholds to 16**-6 = 6e-8 of the logit range
_MASK32 = 0xFFFFFFFF


def hash32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer mix (Wellons' lowbias32) in int64 arithmetic, masked to 32 bits at each
    step (products wrap in int64, their low 32 bits are exact)."""
    x = x & _MASK32
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _MASK32
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & _MASK32
    return x ^ (x >> 16)


def uniform_noise(seed: torch.Tensor, position: torch.Tensor, vocab: int) -> torch.Tensor:
    """u in (0, 1) of shape [B, vocab] from (seed[B], position[B], token id)."""
    row = hash32(hash32(seed) ^ (position * 0x9E3779B1))
    ids = torch.arange(vocab, dtype=torch.int64)
    bits = hash32(row[:, None] ^ (ids[None, :] * 0x85EBCA6B))
    return (bits.to(torch.float32) + 0.5) * (1.0 / 4294967296.0)


def _search(lo: torch.Tensor, hi: torch.Tensor, enough) -> torch.Tensor:
    """The largest value v in [lo, hi] (per row) with enough(v) true, enough falling in v: each
    round tries SEARCH_POINTS thresholds at once (`enough` takes them as [B, points] and answers
    [B, points]) and keeps the interval where the answer turns false; SEARCH_ROUNDS rounds narrow
    the range by SEARCH_POINTS ** SEARCH_ROUNDS. (A bisection takes 4x the steps, each a reduction
    over the vocabulary that depends on the last: 24 steps in one dispatch made IREE 3.13's CUDA
    elementwise fusion run without end at batch > 1.)"""
    steps = torch.arange(1, SEARCH_POINTS + 1, dtype=lo.dtype, device=lo.device)
    for _ in range(SEARCH_ROUNDS):
        width = (hi - lo) / SEARCH_POINTS
        ok = enough(lo[:, None] + width[:, None] * steps)  # [B, points], true then false
        passed = ok.to(lo.dtype).sum(-1)
        lo, hi = lo + width * passed, lo + width * torch.clamp(passed + 1, max=SEARCH_POINTS)
    return lo


def sample_tokens(logits, temperature, top_k, top_p, seed, position) -> torch.Tensor:
    """Token ids [B] from logits [B, V]: argmax where temperature <= 0, else temperature, top-k
    (0: off) then top-p (1: off) over the renormalized rest, drawn with the seeded noise."""
    V = logits.shape[-1]
    greedy = temperature <= 0
    z = logits / torch.where(greedy, torch.ones_like(temperature), temperature)[:, None]
    lo, hi = z.min(-1).values, z.max(-1).values
    k = torch.where(top_k > 0, top_k.clamp(max=V), torch.full_like(top_k, V)).to(torch.float32)
    tau_k = _search(lo, hi, lambda v: (z[:, None, :] >= v[:, :, None]).to(torch.float32).sum(-1) >= k[:, None])
    kept_k = z >= tau_k[:, None]
    # softmax over the kept entries, shifted by the max of all (hi >= the kept max: the same
    # probabilities). Not torch.softmax, nor exp(x - max(x)): IREE 3.13 raises that back to one
    # softmax op, whose CUDA DecomposeSoftmax pass never finishes on this dispatch at batch > 1.
    e = torch.exp(torch.where(kept_k, z, NEG) - hi[:, None])
    p = e / e.sum(dim=-1, keepdim=True)
    mass_needed = torch.where(top_p < 1.0, top_p, torch.full_like(top_p, 2.0))
    tau_p = _search(lo, hi, lambda v: torch.where(z[:, None, :] >= v[:, :, None], p[:, None, :], 0.0).sum(-1)
                    >= mass_needed[:, None])
    tau_p = torch.where(top_p < 1.0, tau_p, lo)
    keep = kept_k & (z >= tau_p[:, None])
    gumbel = -torch.log(-torch.log(uniform_noise(seed, position, V)))
    sampled = argmax_rows(torch.where(keep, z + gumbel, NEG))
    return torch.where(greedy, argmax_rows(logits), sampled)


ARGMAX_BLOCK = 2048  # the longest row one reduction takes (see argmax_rows)


def argmax_rows(x: torch.Tensor) -> torch.Tensor:
    """torch.argmax(x, -1) of [B, V] (the first of equal maxima), in two steps over blocks of at
    most ARGMAX_BLOCK columns when V is larger: IREE 3.13's CUDA code for one reduction over a
    whole vocabulary row with the sampler's producers fused into it stages the row in shared
    memory (513 KB for Llama 3's 128256 entries, over the 167 KB an SM has) and fails."""
    B, V = x.shape
    if V <= 2 * ARGMAX_BLOCK:
        return torch.argmax(x, dim=-1)
    block = next((d for d in range(ARGMAX_BLOCK, 0, -1) if V % d == 0), 1)
    if block < ARGMAX_BLOCK // 4:  # no divisor near the block size: pad with the lowest value
        block = ARGMAX_BLOCK
        x = torch.nn.functional.pad(x, (0, -V % block), value=torch.finfo(x.dtype).min)
    best, where = x.reshape(B, -1, block).max(dim=-1)  # [B, groups]: per block its max, first index
    group = torch.argmax(best, dim=-1)
    return group * block + torch.gather(where, 1, group[:, None])[:, 0]


class Prefill(nn.Module):
    """Export entry: a chunk of each prompt, its k/v written into the cache in place.

    (tokens[B,T], start[B], lens[B], table[B,M], cache, temperature[B], top_k[B], top_p[B], seed[B])
    -> ids[B]:
    the token after each sequence's last valid one, sampled on the device. output="greedy": its
    argmax (no sampling inputs; --greedy-only builds); "logits": the logits [B, vocab] of that
    token instead (references, tests)."""

    def __init__(self, model: LlamaDecoder, output: str = "sample"):
        super().__init__()
        self.model = model
        self.output = output

    def forward(self, tokens, start, lens, table, cache, *sampling):
        logits = self.model.step(tokens, start, lens, table, cache)
        if self.output == "logits":
            return logits
        if self.output == "greedy":
            return argmax_rows(logits)
        temperature, top_k, top_p, seed = sampling
        return sample_tokens(logits, temperature, top_k, top_p, seed, start + lens)


class Decode(nn.Module):
    """Export entry: one token per sequence, (tokens[B,1], positions[B], table[B,M], cache, ...) -> by `output`:

      "greedy":  ids[B], the argmax (no sampling inputs: the lean step most calls take)
      "sample":  (..., temperature[B], top_k[B], top_p[B], seed[B]) -> ids[B] (sample_tokens)
      "logits":  logits [B, vocab] (references, tests)"""

    def __init__(self, model: LlamaDecoder, output: str = "greedy"):
        super().__init__()
        self.model = model
        self.output = output

    def forward(self, tokens, positions, table, cache, *sampling):
        lens = torch.ones_like(positions)
        logits = self.model.step(tokens, positions, lens, table, cache)
        if self.output == "logits":
            return logits
        if self.output == "greedy":
            return argmax_rows(logits)
        temperature, top_k, top_p, seed = sampling
        return sample_tokens(logits, temperature, top_k, top_p, seed, positions + 1)
