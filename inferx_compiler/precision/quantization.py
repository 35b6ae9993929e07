"""Integer weight schemes: what an int8/int4 layer stores, computed from its f32 weight.

The IR pass `inferx-quantize-contractions` rewrites a contraction to read its weight through
one of these schemes and names the stored tensors after the weight they derive from:

    "<weight key>#q:int8"            int8 [K, N], symmetric, one scale per output column
    "<weight key>#q:int8:scale"      f32 [N]
    "<weight key>#q:int4g<G>"        int4 [K/G, G, N], symmetric (-7..7), packed two per byte
    "<weight key>#q:int4g<G>:scale"  f32 [K/G, N]

(an "h" after the scheme, "#q:int8h", is the weight-only GPU form: the same layouts with f16
scales; "hn" stores the reduction dim innermost, "int8hn" [N, K] with scales [N], "int4g<G>hn"
[N, K/G, G] with scales [N, K/G], the layout a GPU matrix-vector product reads contiguously;
a trailing "t", "#q:int8t", means the layer reads the weight transposed, as ONNX Gemm transB=1
does: the scheme is applied to W^T.) The driver then materializes every
parameter key the compiled module names (`materialize`), so the artifact stores the integer
weights and not the f32 ones. The same functions give the sensitivity analysis its
fake-quantized weights (`fake_quantize`), so what is measured is what is compiled.

Rounding is round-half-to-even (numpy's `rint`), as IREE's `math.roundeven` does for the
activations. int4 values are stored as IREE packs `i4` tensors: element 2i in the low nibble
of byte i, element 2i+1 in the high nibble.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

SEPARATOR = "#q:"
INT8_MAX = 127
INT4_MAX = 7
_SCHEME = re.compile(r"^(int8|int4g(\d+))(h?)(n?)(t?)(:scale)?$")


@dataclass(frozen=True)
class WeightScheme:
    """How one layer's weight is stored: int8 per column, or int4 in groups along K."""

    kind: str  # "int8" | "int4"
    group_size: int = 0  # int4 only
    transposed: bool = False  # the layer reads W^T (Gemm transB=1)
    f16_scales: bool = False  # scales stored (and multiplied) in f16: the GPU weight-only form
    k_inner: bool = False  # GPU form stored [N, K] (reduction innermost), for matrix-vector layers

    @property
    def tag(self) -> str:
        name = "int8" if self.kind == "int8" else f"int4g{self.group_size}"
        return (name + ("h" if self.f16_scales else "") + ("n" if self.k_inner else "")
                + ("t" if self.transposed else ""))

    def weight_key(self, source: str) -> str:
        return f"{source}{SEPARATOR}{self.tag}"

    def scale_key(self, source: str) -> str:
        return f"{source}{SEPARATOR}{self.tag}:scale"


def parse_key(key: str):
    """(source key, scheme, is_scale) for a derived key, None for an ordinary weight key."""
    source, sep, tag = key.rpartition(SEPARATOR)
    m = _SCHEME.match(tag) if sep else None
    if not m:
        return None
    kind = "int8" if m.group(1) == "int8" else "int4"
    scheme = WeightScheme(kind, int(m.group(2) or 0), bool(m.group(5)), bool(m.group(3)), bool(m.group(4)))
    return source, scheme, bool(m.group(6))


def _oriented(w: np.ndarray, scheme: WeightScheme) -> np.ndarray:
    if w.ndim != 2:
        raise ValueError(f"integer weight schemes take 2-D weights, got shape {list(w.shape)}")
    w = np.asarray(w, np.float32)
    return np.ascontiguousarray(w.T) if scheme.transposed else w


def _safe(scale: np.ndarray) -> np.ndarray:
    """A zero column/group quantizes to zeros with scale 1 (never a division by zero)."""
    return np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)


def quantize_int8(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[K, N] f32 -> (q int8 [K, N], scale f32 [N]): one symmetric scale per output column."""
    scale = _safe(np.abs(w).max(axis=0) / INT8_MAX)
    q = np.clip(np.rint(w / scale), -INT8_MAX, INT8_MAX).astype(np.int8)
    return q, scale


def quantize_int4(w: np.ndarray, group_size: int) -> tuple[np.ndarray, np.ndarray]:
    """[K, N] f32 -> (q int8 values in -7..7, shape [K/G, G, N]; scale f32 [K/G, N])."""
    k, n = w.shape
    if group_size <= 0 or k % group_size:
        raise ValueError(f"int4 groups of {group_size} do not divide the reduction size {k}")
    groups = w.reshape(k // group_size, group_size, n)
    scale = _safe(np.abs(groups).max(axis=1) / INT4_MAX)
    q = np.clip(np.rint(groups / scale[:, None, :]), -INT4_MAX, INT4_MAX).astype(np.int8)
    return q, scale


def pack_int4(q: np.ndarray) -> np.ndarray:
    """int4 values (int8 array, -8..7) -> bytes, two per byte, low nibble first (IREE's i4)."""
    flat = q.reshape(-1).astype(np.uint8) & 0x0F
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)


def unpack_int4(packed: np.ndarray, shape) -> np.ndarray:
    """The inverse of pack_int4: int8 values of `shape`."""
    low = (packed & 0x0F).astype(np.int8)
    high = (packed >> 4).astype(np.int8)
    flat = np.empty(packed.size * 2, np.int8)
    flat[0::2], flat[1::2] = low, high
    flat = np.where(flat > 7, flat - 16, flat).astype(np.int8)
    return flat[:int(np.prod(shape))].reshape(shape)


def stored_arrays(w: np.ndarray, scheme: WeightScheme) -> tuple[np.ndarray, np.ndarray]:
    """(stored weight, scale) as the artifact holds them for this scheme."""
    w = _oriented(w, scheme)
    if scheme.kind == "int8":
        q, scale = quantize_int8(w)
    else:
        q, scale = quantize_int4(w, scheme.group_size)
    if scheme.k_inner:  # reduction innermost: [N, K] / [N, K/G, G], scales [N] / [N, K/G]
        q = np.ascontiguousarray(q.T if q.ndim == 2 else q.transpose(2, 0, 1))
        scale = np.ascontiguousarray(scale.T)
    if scheme.f16_scales:
        scale = scale.astype(np.float16)
    return (pack_int4(q) if scheme.kind == "int4" else q), scale


def requantize_int4_to_int8(q: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int4 groups (q [K/G, G, N], scale [K/G, N]) -> int8 per column ([K, N], [N]), as the CPU
    form computes it at load: s8 = max_g scale * 7/127, w8 = clip(rint(q * scale / s8), +-127)."""
    s8 = (scale.max(axis=0) * np.float32(INT4_MAX / INT8_MAX)).astype(np.float32)
    value = (q.astype(np.float32) * scale[:, None, :]) / s8
    w8 = np.clip(np.rint(value), -INT8_MAX, INT8_MAX).astype(np.int8)
    return w8.reshape(-1, w8.shape[-1]), s8


def fake_quantize(w: np.ndarray, scheme: WeightScheme, int4_groups: bool = False) -> np.ndarray:
    """The f32 weight the compiled layer computes with (same orientation as `w`). CPU int4:
    `int4_groups` when our u8s4 kernel computes it (each group scaled by its own scale), else
    requantized to int8 per column at load."""
    ww = _oriented(w, scheme)
    if scheme.kind == "int8":
        q, scale = quantize_int8(ww)
    elif not scheme.f16_scales and not int4_groups:  # CPU: int4 groups requantized to int8 per column
        q, scale = requantize_int4_to_int8(*quantize_int4(ww, scheme.group_size))
    else:
        q, scale = quantize_int4(ww, scheme.group_size)
        scale = scale[:, None, :]
    if scheme.f16_scales:  # the product is rounded to f16 as the GPU dequantization computes it
        out = (q.astype(np.float16) * scale.astype(np.float16)).astype(np.float32)
    else:
        out = q.astype(np.float32) * scale
    out = out.reshape(ww.shape)
    return np.ascontiguousarray(out.T) if scheme.transposed else out


def materialize(keys, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The parameter arrays the compiled module names: ordinary keys as they are, derived
    keys computed from their source weight (each source quantized once; f16/bf16 copies of
    weight_casts.py)."""
    from inferx_compiler.precision import weight_casts

    out: dict[str, np.ndarray] = {}
    cache: dict[tuple, tuple] = {}
    for key in keys:
        if key in weights:
            out[key] = weights[key]
            continue
        narrowed = weight_casts.parse_key(key)
        if narrowed is not None and narrowed[0] in weights:
            out[key] = weight_casts.cast(weights[narrowed[0]], narrowed[1])
            continue
        parsed = parse_key(key)
        if parsed is None or parsed[0] not in weights:
            raise KeyError(f"the compiled module names parameter '{key}', which neither the model "
                           f"nor a quantization scheme provides")
        source, scheme, is_scale = parsed
        if (source, scheme) not in cache:
            cache[(source, scheme)] = stored_arrays(weights[source], scheme)
        stored, scale = cache[(source, scheme)]
        out[key] = scale if is_scale else stored
    return out
