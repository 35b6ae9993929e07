"""Weights stored in the precision the compiled code reads them at: f16 or bf16 copies of f32
weights, computed when the artifact is written.

`inferx-narrow-parameters` rewrites an f32 parameter that the module only ever truncates to
f16/bf16 into a parameter of the narrow type, named after the weight it derives from:

    "<weight key>#cast:f16"     the f16 values of the weight (IEEE round to nearest even)
    "<weight key>#cast:bf16"    its bf16 values (the top 16 bits, rounded to nearest even)

quantization.materialize computes these keys beside the integer schemes' when the driver (or a
benchmark rebuilding an artifact's weights) writes the parameter archive. The rounding is the
one `arith.truncf` performs, so the compiled code computes with the same values as a build that
truncates the f32 weight itself: the outputs are bit for bit the same, and the artifact is half
the size.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

SEPARATOR = "#cast:"
TYPES = ("f16", "bf16")


def cast_key(source: str, element_type: str) -> str:
    return f"{source}{SEPARATOR}{element_type}"


def parse_key(key: str) -> Optional[tuple[str, str]]:
    """(source key, "f16" | "bf16") for a cast key, None for any other key."""
    source, sep, element_type = key.rpartition(SEPARATOR)
    return (source, element_type) if sep and element_type in TYPES else None


def cast(w: np.ndarray, element_type: str) -> np.ndarray:
    """The stored copy: float16, or bf16 bits as uint16 (numpy has no bfloat16)."""
    w = np.ascontiguousarray(w, dtype=np.float32)
    if element_type == "f16":
        return w.astype(np.float16)
    bits = w.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    # NaN stays NaN (rounding could carry a NaN's payload into the infinity pattern)
    quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(np.isnan(w), quiet_nan, rounded).astype(np.uint16)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bf16 bits (uint16) -> float32 values (exact)."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
