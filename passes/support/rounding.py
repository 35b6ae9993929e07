"""Round half to even inside a generic's body, in a form IREE 3.13 compiles to vector code.

`math.roundeven` is the op's natural spelling, but IREE 3.13's x86 code for it is slow: the
int8 activation quantization of BERT-base's FFN took about 3x as long with `math.roundeven` as
with this form, outputs bit for bit the same (docs/levers/cpu-precision-kernels.md). The form:

    m = copysign(2^23, v)
    r = |v| < 2^23 ? (v + m) - m : v

Adding 2^23 of the same sign puts |v| in [2^23, 2^24), where f32 holds integers only, so the
addition rounds v to an integer in the current rounding mode (round to nearest even, the only
one IREE's code runs in) and the subtraction is exact; |v| >= 2^23 is an integer already, and NaN
fails the comparison and stays NaN. No fast-math flags are set, so LLVM may not fold
`(v + m) - m` to `v`. (-0.5 rounds to +0.0 instead of -0.0: the same integer.)

Both binding sets call it (IREE's for the passes in its context, torch-mlir's at graph level):
the caller passes its `ir`, `arith` and `math` modules.
"""

from __future__ import annotations

TWO_POW_23 = 8388608.0


def round_half_even(value, ir, arith, math):
    """`value` (an f32 scalar inside a generic's body) rounded half to even."""
    f32 = ir.F32Type.get()
    big = arith.constant(f32, TWO_POW_23)
    magic = math.copysign(big, value)
    rounded = arith.subf(arith.addf(value, magic), magic)
    small = arith.cmpf(arith.CmpFPredicate.OLT, math.absf(value), big)
    return arith.select(small, rounded, value)
