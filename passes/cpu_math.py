"""inferx-cpu-math: f32 math that IREE 3.13 compiles expensively on CPUs, rewritten cheaper.

An erf GELU (`x * 0.5 * (1 + erf(x / sqrt 2))`, BERT's and GPT-2's feed-forward activation) ran
at 2.7 cycles a value on a Xeon core: its AVX-512 loop has two `vdivps` a vector (the division by
the constant sqrt 2, and the one in IREE's rational approximation of erf), each ~16 cycles of
throughput, around some 40 other instructions; onnxruntime took half the time. This pass rewrites,
in every op body (linalg.generic, where the importers put them):

  erf       `math.erf` on f32 -> a division-free piecewise polynomial: for |x| < 1.5,
            x P(x^2) (P of degree 7: erf is odd, so relative accuracy holds near 0); for
            1.5 <= |x| < 4, Q(|x|) of degree 10 (at 4, erf rounds to 1 in f32), with the sign of
            x; NaN stays NaN, +-inf gives +-1. Both by Horner's rule in multiply-adds marked
            `contract` (one FMA each where the target has FMA). Chebyshev fits on the two
            intervals, coefficients rounded to f32: within 1.5e-7 of erf everywhere (checked
            in f32 on 200,000 points and a log sweep down to 1e-30; 1.5e-7 relative below 0.5;
            an absolute bound above: 1 - erf(x) in the tail is not held to a relative one).
  x / c     an f32 division by a constant (a scalar or a splat, finite and nonzero, fed to the
            body as an input or a captured value) -> x * (1 / c): at most an ulp from the
            division, never a divide instruction. Not where the quotient is rounded to an
            integer (a quantization's round(x / scale)) and 1 / c is inexact: at a half-way
            point the ulp moves the integer (69.49999 from the division, 69.5 from the
            product, then 69 or 70), which is a unit of the quantized tensor.

Both change results by rounding only (test/e2e/test_cpu_math.py: an erf GELU within 1e-6 of
onnxruntime's, relative L2). Targets:
every CPU target (their vector units divide slowly); CUDA targets keep their own code.
Spelled `inferx-cpu-math` (the target is the module's `inferx.target`: inferx-set-target
before it on a bare module).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar, Optional

from inferx_compiler.passes.infra.base import TargetedPass
from inferx_compiler.passes.support.iree_ir import constant_scalar
from inferx_compiler.passes.analysis.linalg_analysis import collect
from inferx_compiler.passes.analysis.remarks import remark

SPLIT = 1.5  # x P(x^2) below, Q(|x|) from here to ERF_ONE
ERF_ONE = 4.0  # erf(4) = 1 - 1.5e-8: 1.0 in f32
# erf(x) / x = P(t), t = 2 x^2 / SPLIT^2 - 1 (x^2 in [0, SPLIT^2] -> t in [-1, 1]); lowest power first
ODD = (0.8168361783027649, -0.22525253891944885, 0.06590919196605682, -0.01628759503364563,
       0.003383082104846835, -0.0006012978265061975, 9.6184216090478e-05, -1.3099487659928855e-05)
# erf(x) = Q(t), t = (2 x - (ERF_ONE + SPLIT)) / (ERF_ONE - SPLIT) (x in [SPLIT, ERF_ONE] -> [-1, 1])
TAIL = (0.9998993873596191, 0.000732310872990638, -0.0025212340988218784, 0.005403164308518171,
        -0.007930663414299488, 0.008334987796843052, -0.006420067977160215, 0.003287596395239234,
        -0.00035356037551537156, -0.0008106126915663481, 0.00037871519452892244)


class _Builder:
    """f32 arithmetic at the current insertion point, multiply-adds marked `contract`."""

    def __init__(self):
        from iree.compiler import ir

        self.f32 = ir.F32Type.get()
        self.contract = ir.Attribute.parse("#arith.fastmath<contract>")

    def const(self, value: float):
        from iree.compiler import ir
        from iree.compiler.dialects import arith

        return arith.ConstantOp(self.f32, ir.FloatAttr.get(self.f32, value)).result

    def mul_add(self, a, b, c):
        from iree.compiler.dialects import arith

        return arith.AddFOp(arith.MulFOp(a, b, fastmath=self.contract).result, c, fastmath=self.contract).result

    def horner(self, coefficients, t):
        acc = self.const(coefficients[-1])
        for c in reversed(coefficients[:-1]):
            acc = self.mul_add(acc, t, self.const(c))
        return acc


def polynomial_erf(x):
    """erf(x) (f32) by the module's piecewise polynomial, built at the current insertion point."""
    from iree.compiler.dialects import arith
    from iree.compiler.dialects import math as math_d

    b = _Builder()
    a = arith.MinimumFOp(math_d.AbsFOp(x).result, b.const(ERF_ONE)).result  # NaN stays NaN
    square = arith.MulFOp(a, a).result
    near = arith.MulFOp(a, b.horner(ODD, b.mul_add(square, b.const(2.0 / SPLIT ** 2), b.const(-1.0)))).result
    scale = 2.0 / (ERF_ONE - SPLIT)
    far = b.horner(TAIL, b.mul_add(a, b.const(scale), b.const(-(ERF_ONE + SPLIT) / (ERF_ONE - SPLIT))))
    below = arith.CmpFOp(arith.CmpFPredicate.OLT, a, b.const(SPLIT)).result
    return math_d.CopySignOp(arith.SelectOp(below, near, far).result, x).result


def _constant_divisor(div) -> Optional[float]:
    """c when `div` (an arith.divf in a generic's body, or anywhere) divides by a constant: an
    arith.constant in reach, or a body argument fed by a scalar/splat constant."""
    from iree.compiler import ir

    divisor = div.operands[1]
    value = constant_scalar(divisor)
    if value is None and isinstance(divisor, ir.BlockArgument):
        owner = divisor.owner.owner
        if owner.name == "linalg.generic" and divisor.arg_number < len(owner.operands) - len(owner.results):
            value = constant_scalar(owner.operands[divisor.arg_number])
    if value is None or value == 0.0 or not math.isfinite(value) or not math.isfinite(1.0 / value):
        return None
    return value


ROUNDING_OPS = frozenset({"math.roundeven", "math.round", "math.floor", "math.ceil", "math.trunc",
                          "arith.fptosi", "arith.fptoui"})


def _rounded_inexactly(div) -> bool:
    """Whether `div`'s quotient goes straight to a rounding to an integer while its divisor's
    reciprocal is not exact in f32 (a power of two's is: then the product equals the quotient)."""
    mantissa, _ = math.frexp(abs(_constant_divisor(div)))
    if mantissa == 0.5:
        return False
    return any(use.owner.name in ROUNDING_OPS for use in div.results[0].uses)


@dataclasses.dataclass(frozen=True)
class CpuMath(TargetedPass):
    """erf to a division-free polynomial, division by a constant to a multiplication (CPU)."""

    name: ClassVar[str] = "inferx-cpu-math"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "erf as a division-free polynomial, x / c as x * (1 / c), on CPU targets"

    @classmethod
    def for_build(cls, build) -> "Optional[CpuMath]":
        return cls() if build.target.backend == "llvm-cpu" and build.runs(cls.name) else None

    def run(self, module) -> None:
        from iree.compiler import ir
        from iree.compiler.dialects import arith

        if self.target_of(module).backend != "llvm-cpu":
            return
        f32 = ir.F32Type.get()
        erfs = collect(module, lambda o: o.name == "math.erf" and o.results[0].type == f32)
        for op in erfs:
            with ir.InsertionPoint(op), op.location:
                value = polynomial_erf(op.operands[0])
            remark(self.name, op, "erf as a division-free polynomial")
            op.results[0].replace_all_uses_with(value)
            op.erase()
        divisions = [op for op in collect(module, lambda o: o.name == "arith.divf" and o.results[0].type == f32)
                     if _constant_divisor(op) is not None and not _rounded_inexactly(op)]
        for op in divisions:
            divisor = _constant_divisor(op)
            with ir.InsertionPoint(op), op.location:
                reciprocal = arith.ConstantOp(f32, ir.FloatAttr.get(f32, 1.0 / divisor)).result
                value = arith.MulFOp(op.operands[0], reciprocal).result
            remark(self.name, op, f"division by {divisor:.9g} as a multiplication by its reciprocal")
            op.results[0].replace_all_uses_with(value)
            op.erase()
