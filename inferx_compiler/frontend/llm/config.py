"""Decoder-only LLM configuration, read from a Hugging Face `config.json` or GGUF metadata.

Part of the LLM frontend (frontend/llm/): config -> weights -> our decoder module -> export.

One dataclass, `DecoderConfig`, describes every model the Llama-family decoder in
`decoder.py` can run: Llama (1/2/3, incl. Llama-3 "llama3" RoPE scaling), Mistral
(optionally with a sliding window) and Qwen2 (q/k/v projection bias). SmolLM/SmolLM2 are
plain Llama.

Two readers:
  * `from_hf_config(dict_or_path)`: transformers' `config.json` (both the 4.x layout with
    `rope_theta`/`rope_scaling` and the 5.x layout with `rope_parameters`).
  * `from_gguf(reader_or_path)`: llama.cpp GGUF key/values (`{arch}.block_count`, ...).

Anything the decoder cannot run raises `UnsupportedModelError` naming the field and value.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from inferx_compiler.errors import ModelLoadError


class UnsupportedModelError(ModelLoadError):
    """The model uses a feature the decoder does not implement (message names field and value)."""


HF_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
}
GGUF_ARCHITECTURES = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2"}
ROPE_TYPES = ("default", "linear", "llama3")


@dataclass
class DecoderConfig:
    """Hyper-parameters of a Llama-family decoder (names follow the math, not any one file)."""

    family: str  # "llama" | "mistral" | "qwen2"
    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    rms_eps: float = 1e-6
    rope_theta: float = 10000.0
    # None (plain RoPE) or {"rope_type": "linear"|"llama3", "factor": ..., llama3: "low_freq_factor",
    # "high_freq_factor", "original_max_position_embeddings"}
    rope_scaling: dict | None = None
    tie_embeddings: bool = False
    max_positions: int = 2048
    bos_id: int | None = None
    eos_ids: tuple[int, ...] = ()
    attention_bias: bool = False  # bias on q/k/v projections (Qwen2: always)
    sliding_window: int | None = None  # Mistral: keys older than this many positions are masked
    source: str = ""  # where it was read from (for messages)
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.heads % self.kv_heads:
            raise UnsupportedModelError(
                f"num_attention_heads={self.heads} is not a multiple of num_key_value_heads={self.kv_heads}")
        if self.head_dim % 2:
            raise UnsupportedModelError(f"head_dim={self.head_dim} must be even for RoPE")
        if self.rope_scaling is not None:
            kind = self.rope_scaling.get("rope_type")
            if kind not in ROPE_TYPES:
                raise UnsupportedModelError(
                    f"rope_scaling.rope_type={kind!r} is not supported (supported: {', '.join(ROPE_TYPES)})")
            if kind == "default":
                self.rope_scaling = None

    @property
    def group(self) -> int:
        """Query heads per KV head (GQA group size)."""
        return self.heads // self.kv_heads

    def to_dict(self) -> dict:
        return asdict(self)


# ----------------------------------------------------------------------------- HF config.json


def _load_json(config: dict | str | os.PathLike) -> tuple[dict, str]:
    if isinstance(config, dict):
        return config, "<dict>"
    path = os.fspath(config)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    with open(path) as f:
        return json.load(f), path


def _hf_family(cfg: dict, src: str) -> str:
    archs = cfg.get("architectures") or []
    for a in archs:
        if a in HF_ARCHITECTURES:
            return HF_ARCHITECTURES[a]
    if archs:
        raise UnsupportedModelError(
            f"{src}: architectures={archs!r} is not supported (supported: {', '.join(HF_ARCHITECTURES)})")
    mt = cfg.get("model_type")
    if mt in HF_ARCHITECTURES.values():
        return mt
    raise UnsupportedModelError(f"{src}: model_type={mt!r} is not supported and no architectures are given")


def _hf_rope(cfg: dict, src: str) -> tuple[float, dict | None]:
    """(theta, scaling) from either `rope_parameters` (transformers 5) or `rope_theta`/`rope_scaling`."""
    params = cfg.get("rope_parameters")
    if isinstance(params, dict) and "rope_theta" in params:
        theta = float(params["rope_theta"])
        scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    else:
        theta = float(cfg.get("rope_theta", 10000.0))
        scaling = dict(cfg.get("rope_scaling") or {})
    if "type" in scaling and "rope_type" not in scaling:
        scaling["rope_type"] = scaling.pop("type")
    kind = scaling.get("rope_type", "default")
    if kind == "default" and set(scaling) <= {"rope_type"}:
        return theta, None
    if kind not in ROPE_TYPES:
        raise UnsupportedModelError(f"{src}: rope_scaling.rope_type={kind!r} is not supported "
                                    f"(supported: {', '.join(ROPE_TYPES)})")
    if kind == "default":
        return theta, None
    return theta, scaling


def _eos(v) -> tuple[int, ...]:
    if v is None:
        return ()
    return tuple(v) if isinstance(v, (list, tuple)) else (int(v),)


def from_hf_config(config: dict | str | os.PathLike) -> DecoderConfig:
    """Read a transformers `config.json` (path, directory or dict)."""
    cfg, src = _load_json(config)
    family = _hf_family(cfg, src)
    act = cfg.get("hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise UnsupportedModelError(f"{src}: hidden_act={act!r} is not supported (SwiGLU needs silu)")
    if cfg.get("mlp_bias"):
        raise UnsupportedModelError(f"{src}: mlp_bias=True is not supported")
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    theta, scaling = _hf_rope(cfg, src)
    if family == "qwen2":
        bias = True
        window = cfg.get("sliding_window") if cfg.get("use_sliding_window") else None
        if window is not None:
            raise UnsupportedModelError(f"{src}: use_sliding_window=True (Qwen2 per-layer windows) is not supported")
    else:
        bias = bool(cfg.get("attention_bias", False))
        if bias:
            raise UnsupportedModelError(f"{src}: attention_bias=True on {family} (bias on q/k/v and o_proj) "
                                        f"is not supported; only Qwen2's q/k/v bias is")
        window = cfg.get("sliding_window") if family == "mistral" else None
    return DecoderConfig(
        family=family,
        vocab=int(cfg["vocab_size"]),
        hidden=hidden,
        intermediate=int(cfg["intermediate_size"]),
        layers=int(cfg["num_hidden_layers"]),
        heads=heads,
        kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or hidden // heads),
        rms_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope_theta=theta,
        rope_scaling=scaling,
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        max_positions=int(cfg.get("max_position_embeddings", 2048)),
        bos_id=cfg.get("bos_token_id"),
        eos_ids=_eos(cfg.get("eos_token_id")),
        attention_bias=bias,
        sliding_window=int(window) if window else None,
        source=src,
        extra={"dtype": cfg.get("dtype") or cfg.get("torch_dtype")},
    )


# ----------------------------------------------------------------------------- GGUF metadata


def gguf_field(reader, key: str, default: Any = KeyError) -> Any:
    """A GGUF key/value as a Python value (scalar, str or list)."""
    f = reader.fields.get(key)
    if f is None:
        if default is KeyError:
            raise UnsupportedModelError(f"GGUF metadata has no {key!r}")
        return default
    return f.contents()


def open_gguf(path_or_reader):
    """A gguf.GGUFReader; a file that is not a readable GGUF is refused naming it."""
    if hasattr(path_or_reader, "fields"):
        return path_or_reader
    try:
        from gguf import GGUFReader
    except ImportError:
        raise ModelLoadError("reading GGUF files needs the gguf package: pip install 'inferx-compiler[llm]'") from None
    path = os.fspath(path_or_reader)
    try:
        return GGUFReader(path)
    except Exception as e:  # gguf raises ValueError, struct errors, IndexError on corrupt files
        raise ModelLoadError(f"{path}: not a readable GGUF file ({type(e).__name__}: {e})") from None


def from_gguf(path_or_reader) -> DecoderConfig:
    """Read llama.cpp GGUF metadata (`general.architecture` and `{arch}.*` keys)."""
    src = os.fspath(path_or_reader) if isinstance(path_or_reader, (str, os.PathLike)) else "<gguf>"
    r = open_gguf(path_or_reader)
    arch = gguf_field(r, "general.architecture")
    if arch not in GGUF_ARCHITECTURES:
        raise UnsupportedModelError(f"{src}: general.architecture={arch!r} is not supported "
                                    f"(supported: {', '.join(GGUF_ARCHITECTURES)})")
    family = GGUF_ARCHITECTURES[arch]
    g = lambda k, d=KeyError: gguf_field(r, f"{arch}.{k}", d)  # noqa: E731
    hidden = int(g("embedding_length"))
    heads = int(g("attention.head_count"))
    kv_heads = int(g("attention.head_count_kv", heads))
    head_dim = int(g("attention.key_length", hidden // heads))
    rope_dim = g("rope.dimension_count", head_dim)
    if int(rope_dim) != head_dim:
        raise UnsupportedModelError(f"{src}: {arch}.rope.dimension_count={rope_dim} != head_dim={head_dim} "
                                    f"(partial RoPE is not supported)")
    vocab = g("vocab_size", None)
    if vocab is None:
        vocab = len(r.fields["tokenizer.ggml.tokens"].data)
    scaling = None
    stype = g("rope.scaling.type", None)
    if stype not in (None, "none"):
        if stype != "linear":
            raise UnsupportedModelError(f"{src}: {arch}.rope.scaling.type={stype!r} is not supported")
        scaling = {"rope_type": "linear", "factor": float(g("rope.scaling.factor"))}
    tensor_names = {t.name for t in r.tensors}
    if "rope_freqs.weight" in tensor_names:
        # llama.cpp's Llama-3.1 files carry the llama3 scaling as per-frequency divisors.
        scaling = {"rope_type": "freq_factors"}
    eos = gguf_field(r, "tokenizer.ggml.eos_token_id", None)
    bos = gguf_field(r, "tokenizer.ggml.bos_token_id", None)
    ctx_len = int(g("context_length", 2048))
    cfg = DecoderConfig(
        family=family,
        vocab=int(vocab),
        hidden=hidden,
        intermediate=int(g("feed_forward_length")),
        layers=int(g("block_count")),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        rms_eps=float(g("attention.layer_norm_rms_epsilon", 1e-6)),
        rope_theta=float(g("rope.freq_base", 10000.0)),
        rope_scaling=None,
        tie_embeddings="output.weight" not in tensor_names,
        max_positions=ctx_len,
        bos_id=None if bos is None else int(bos),
        eos_ids=() if eos is None else (int(eos),),
        attention_bias=family == "qwen2" or "blk.0.attn_q.bias" in tensor_names,
        sliding_window=None,
        source=src,
    )
    cfg.rope_scaling = scaling  # set after __post_init__: freq_factors is GGUF-only
    return cfg


# ----------------------------------------------------------------------------- RoPE frequencies


def rope_inv_freq(cfg: DecoderConfig, freq_factors=None):
    """Inverse frequencies [head_dim/2] as float64 numpy, with the configured scaling applied.

    Matches transformers' `_compute_default_rope_parameters`, `_compute_linear_scaling_rope_parameters`
    and `_compute_llama3_parameters` (computed in float64 here, rounded to float32 by the caller).
    """
    import numpy as np

    d = cfg.head_dim
    # transformers computes inv_freq in float32 from an int64 arange: keep that rounding
    inv = 1.0 / (cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.int64).astype(np.float32) / d))
    inv = inv.astype(np.float32)
    s = cfg.rope_scaling
    if s is None:
        return inv
    kind = s["rope_type"]
    if kind == "linear":
        return (inv / np.float32(s["factor"])).astype(np.float32)
    if kind == "freq_factors":
        if freq_factors is None:
            raise UnsupportedModelError("rope_scaling.rope_type='freq_factors' needs the rope_freqs tensor")
        return (inv / np.asarray(freq_factors, np.float32)).astype(np.float32)
    if kind == "llama3":
        factor = s["factor"]
        low, high = s["low_freq_factor"], s["high_freq_factor"]
        old_ctx = s["original_max_position_embeddings"]
        low_wavelen = old_ctx / low
        high_wavelen = old_ctx / high
        wavelen = 2 * math.pi / inv
        out = np.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old_ctx / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * out / factor + smooth * out
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return np.where(medium, smoothed, out).astype(np.float32)
    raise UnsupportedModelError(f"rope_scaling.rope_type={kind!r} is not supported")
