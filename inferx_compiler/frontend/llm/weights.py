"""Load decoder weights into numpy arrays under our canonical names (the LLM frontend).

Canonical names (independent of the file format):

    embed                 [vocab, hidden]
    norm                  [hidden]                  final RMSNorm
    lm_head               [vocab, hidden]           absent when embeddings are tied
    rope_freqs            [head_dim/2]              optional (GGUF llama3 frequency divisors)
    layers.{i}.attn_norm  [hidden]
    layers.{i}.q / k / v  [heads*head_dim | kv_heads*head_dim, hidden]   (nn.Linear layout: out, in)
    layers.{i}.q_bias / k_bias / v_bias                                  (Qwen2 / attention_bias)
    layers.{i}.o          [hidden, heads*head_dim]
    layers.{i}.mlp_norm   [hidden]
    layers.{i}.gate / up  [intermediate, hidden]
    layers.{i}.down       [hidden, intermediate]

Sources:
  * `load_safetensors(dir_or_files, cfg)`: Hugging Face names (`model.layers.0.self_attn.q_proj.weight`).
  * `load_gguf(path_or_reader, cfg)`: llama.cpp names (`blk.0.attn_q.weight`); tensors of type
    F32/F16/BF16/Q8_0/Q4_0/Q4_1 are dequantized with `gguf.quants.dequantize`, others refused.

GGUF q/k permutation: llama.cpp's `convert_hf_to_gguf.py` (LlamaModel.permute) reorders the rows
of Llama q_proj/k_proj from HF's "rotate_half" RoPE layout (first half / second half of each
head) into the interleaved (pairs) layout ggml's RoPE uses:
    w.reshape(n_head, 2, dim/2, in).swapaxes(1, 2).reshape(out, in)
transformers' GGUF loader (`LlamaTensorProcessor._reverse_permute_weights`) undoes it with
    w.reshape(n_head, dim/2, 2, in).swapaxes(1, 2).reshape(out, in)
using n_head = num_attention_heads for q and num_key_value_heads for k; we do the same (also on
q/k biases, as transformers does for any tensor named `.attn_q.`/`.attn_k.`). Only the "llama"
GGUF architecture is permuted (Qwen2 files are stored in HF order).
"""

from __future__ import annotations

import glob
import os
import re

import numpy as np

from inferx_compiler.frontend.llm.config import DecoderConfig, UnsupportedModelError, open_gguf

GGUF_DEQUANTIZABLE = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1")

_HF_LAYER = {
    "input_layernorm.weight": "attn_norm",
    "self_attn.q_proj.weight": "q",
    "self_attn.k_proj.weight": "k",
    "self_attn.v_proj.weight": "v",
    "self_attn.o_proj.weight": "o",
    "self_attn.q_proj.bias": "q_bias",
    "self_attn.k_proj.bias": "k_bias",
    "self_attn.v_proj.bias": "v_bias",
    "post_attention_layernorm.weight": "mlp_norm",
    "mlp.gate_proj.weight": "gate",
    "mlp.up_proj.weight": "up",
    "mlp.down_proj.weight": "down",
}
_HF_TOP = {"model.embed_tokens.weight": "embed", "model.norm.weight": "norm", "lm_head.weight": "lm_head"}

_GGUF_LAYER = {
    "attn_norm.weight": "attn_norm",
    "attn_q.weight": "q",
    "attn_k.weight": "k",
    "attn_v.weight": "v",
    "attn_output.weight": "o",
    "attn_q.bias": "q_bias",
    "attn_k.bias": "k_bias",
    "attn_v.bias": "v_bias",
    "ffn_norm.weight": "mlp_norm",
    "ffn_gate.weight": "gate",
    "ffn_up.weight": "up",
    "ffn_down.weight": "down",
}
_GGUF_TOP = {"token_embd.weight": "embed", "output_norm.weight": "norm", "output.weight": "lm_head",
             "rope_freqs.weight": "rope_freqs"}


def expected_names(cfg: DecoderConfig) -> list[str]:
    """The canonical names a complete state for `cfg` holds (rope_freqs excluded)."""
    names = ["embed", "norm"] + ([] if cfg.tie_embeddings else ["lm_head"])
    per = ["attn_norm", "q", "k", "v", "o", "mlp_norm", "gate", "up", "down"]
    if cfg.attention_bias:
        per += ["q_bias", "k_bias", "v_bias"]
    for i in range(cfg.layers):
        names += [f"layers.{i}.{p}" for p in per]
    return names


def expected_shapes(cfg: DecoderConfig) -> dict[str, tuple[int, ...]]:
    h, d = cfg.hidden, cfg.head_dim
    shapes = {"embed": (cfg.vocab, h), "norm": (h,), "lm_head": (cfg.vocab, h)}
    per = {"attn_norm": (h,), "q": (cfg.heads * d, h), "k": (cfg.kv_heads * d, h), "v": (cfg.kv_heads * d, h),
           "o": (h, cfg.heads * d), "mlp_norm": (h,), "gate": (cfg.intermediate, h),
           "up": (cfg.intermediate, h), "down": (h, cfg.intermediate),
           "q_bias": (cfg.heads * d,), "k_bias": (cfg.kv_heads * d,), "v_bias": (cfg.kv_heads * d,)}
    for i in range(cfg.layers):
        shapes.update({f"layers.{i}.{k}": v for k, v in per.items()})
    return shapes


def check_state(state: dict[str, np.ndarray], cfg: DecoderConfig, source: str) -> dict[str, np.ndarray]:
    """Refuse a state with missing, unexpected or mis-shaped tensors; return it as float32."""
    want = expected_names(cfg)
    missing = [n for n in want if n not in state]
    if missing:
        raise UnsupportedModelError(f"{source}: missing tensors {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    extra = sorted(set(state) - set(want) - {"rope_freqs"})
    if extra:
        raise UnsupportedModelError(f"{source}: unexpected tensors {extra[:5]} (e.g. o_proj bias is not supported)")
    shapes = expected_shapes(cfg)
    for n in want:
        if tuple(state[n].shape) != shapes[n]:
            raise UnsupportedModelError(f"{source}: tensor {n} has shape {tuple(state[n].shape)}, "
                                        f"expected {shapes[n]}")
    return {n: np.ascontiguousarray(a, dtype=np.float32) for n, a in state.items()}


# ----------------------------------------------------------------------------- safetensors


def hf_name(canonical: str) -> str:
    """Canonical name -> the Hugging Face tensor name (the key a referenced safetensors file serves)."""
    top = {v: k for k, v in _HF_TOP.items()}
    if canonical in top:
        return top[canonical]
    _, i, part = canonical.split(".", 2)
    return f"model.layers.{i}.{ {v: k for k, v in _HF_LAYER.items()}[part] }"


def canonical_hf_name(name: str) -> str | None:
    """HF parameter name -> canonical name (None for tensors the decoder does not use)."""
    if name in _HF_TOP:
        return _HF_TOP[name]
    m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", name)
    if m and m.group(2) in _HF_LAYER:
        return f"layers.{m.group(1)}.{_HF_LAYER[m.group(2)]}"
    if name.endswith("rotary_emb.inv_freq"):
        return None
    return "?" + name


def load_safetensors(path: str | os.PathLike | list, cfg: DecoderConfig) -> dict[str, np.ndarray]:
    """Read every `*.safetensors` file of a directory (or the given files) by canonical name."""
    from safetensors import safe_open

    if isinstance(path, (list, tuple)):
        files = [os.fspath(p) for p in path]
    elif os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    else:
        files = [os.fspath(path)]
    if not files:
        raise UnsupportedModelError(f"{path}: no .safetensors files")
    state = {}
    for f in files:
        with safe_open(f, framework="pt") as st:  # "pt" reads bf16 too; numpy has no bf16
            for name in st.keys():
                canon = canonical_hf_name(name)
                if canon is None:
                    continue
                if canon.startswith("?"):
                    raise UnsupportedModelError(f"{f}: tensor {name!r} has no place in the decoder")
                state[canon] = st.get_tensor(name).float().numpy()
    if cfg.tie_embeddings:
        state.pop("lm_head", None)
    return check_state(state, cfg, str(path))


# ----------------------------------------------------------------------------- GGUF


def canonical_gguf_name(name: str) -> str:
    if name in _GGUF_TOP:
        return _GGUF_TOP[name]
    m = re.fullmatch(r"blk\.(\d+)\.(.+)", name)
    if m and m.group(2) in _GGUF_LAYER:
        return f"layers.{m.group(1)}.{_GGUF_LAYER[m.group(2)]}"
    return "?" + name


def unpermute_rope_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's q/k row permutation (interleaved pairs -> HF rotate-half halves).

    Same as transformers' `LlamaTensorProcessor._reverse_permute_weights`."""
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def dequantize_gguf_tensor(t) -> np.ndarray:
    """A GGUF tensor as float32 in numpy (row-major: shape is GGUF's ne reversed)."""
    from gguf.quants import dequantize

    kind = t.tensor_type.name
    if kind not in GGUF_DEQUANTIZABLE:
        raise UnsupportedModelError(f"GGUF tensor {t.name!r} has type {kind}, which is not supported (supported: "
                                    f"{', '.join(GGUF_DEQUANTIZABLE)})")
    a = dequantize(t.data, t.tensor_type)
    shape = tuple(int(x) for x in reversed(t.shape.tolist()))
    return np.asarray(a, dtype=np.float32).reshape(shape)


def load_gguf(path_or_reader, cfg: DecoderConfig) -> dict[str, np.ndarray]:
    """Read and dequantize a GGUF file by canonical name (llama q/k un-permuted)."""
    src = os.fspath(path_or_reader) if isinstance(path_or_reader, (str, os.PathLike)) else "<gguf>"
    r = open_gguf(path_or_reader)
    arch = r.fields["general.architecture"].contents()
    state = {}
    for t in r.tensors:
        canon = canonical_gguf_name(t.name)
        if canon.startswith("?"):
            raise UnsupportedModelError(f"GGUF tensor {t.name!r} has no place in the decoder")
        a = dequantize_gguf_tensor(t)
        if arch == "llama":
            if canon.endswith(".q") or canon.endswith(".q_bias"):
                a = unpermute_rope_rows(a, cfg.heads)
            elif canon.endswith(".k") or canon.endswith(".k_bias"):
                a = unpermute_rope_rows(a, cfg.kv_heads)
        state[canon] = a
    return check_state(state, cfg, src)
