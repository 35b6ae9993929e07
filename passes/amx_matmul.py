"""inferx-amx-matmul: bf16 matmuls against stored weights on CPUs with AMX, through our kernel.

IREE 3.13 has no AMX code: its bf16 matmuls on a Sapphire Rapids-class CPU run its AVX-512
`vdpbf16ps` microkernel (32 multiply-adds an instruction). This pass replaces each
`linalg.matmul` with bf16 operands and an f32 accumulator whose right-hand operand is computed
from stored parameters alone (a weight truncated to bf16 by inferx-apply-precision, directly or
through the transpose of a Gemm with transB=1) by a `flow.dispatch` to
inferx_compiler/kernels/bf16_amx_gemm.c (`tdpbf16ps`: a 16x32 by 32x16 bf16 tile product into
16x16 f32 sums, 8192 multiply-adds an instruction), linked through passes/support/cpu_extern.py:

    y[M, N] = init + a[M, K] b[K, N]    ->    c = amx(a, pack(pad(b)))[:, :N];  y = init + c
                                               (y = c when init is a zero fill)

`pack` lays the weight out in the kernel's 16-column, 32-deep tiles (bf16 pairs along K); it
depends on the parameters alone, so IREE computes it once, at load, as it does the truncation.
Numbers: the same bf16 inputs, f32 sums (in another order than IREE's).

Declined, with a remark: targets without AMX (amx_bf16), operands other than bf16 x bf16 ->
f32, a right-hand operand that is not computed from parameters alone (attention's products),
transposed or broadcast indexing maps, K not a multiple of 32, a build machine without a C
compiler. Spelled `inferx-amx-matmul` (the target is the module's `inferx.target`:
inferx-set-target{target=x86-amx} before it on a bare module).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from inferx_compiler.passes.infra.base import TargetedPass
from inferx_compiler.passes.support.iree_ir import generic
from inferx_compiler.passes.analysis.linalg_analysis import collect
from inferx_compiler.passes.analysis.weight_products import run_weight_kernel

def amx_packed(w):
    """w [K, N] bf16 in the kernel's layout (kernels/bf16_amx_gemm.c), flattened: element
    (nb, kb, r, c, p) = w[32 kb + 2 r + p, 16 nb + c]. Depends on the weight alone."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    k, n = w.type.shape
    bf16 = w.type.element_type
    d = [ir.AffineDimExpr.get(i) for i in range(5)]  # (nb, kb, r, c, p)
    maps = [ir.AffineMap.get(5, 0, [d[1] * 32 + d[2] * 2 + d[4], d[0] * 16 + d[3]]), ir.AffineMap.get_identity(5)]
    packed = generic([w], tensor.EmptyOp([n // 16, k // 32, 16, 16, 2], bf16).result, maps, ["parallel"] * 5,
                     lambda b: b.arguments[0])
    return tensor.CollapseShapeOp(ir.RankedTensorType.get([n * k], bf16), packed, [[0, 1, 2, 3, 4]]).result


@dataclasses.dataclass(frozen=True)
class AmxMatmul(TargetedPass):
    """bf16 matmuls against stored weights to our AMX kernel on CPUs with AMX."""

    name: ClassVar[str] = "inferx-amx-matmul"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "bf16 matmuls with stored weights on AMX tiles (our C kernel)"

    @classmethod
    def for_build(cls, build) -> "Optional[AmxMatmul]":
        target = build.target
        fits = target.backend == "llvm-cpu" and "amx_bf16" in target.features
        return cls() if fits and build.runs(cls.name) else None

    def run(self, module) -> None:
        from inferx_compiler.kernels import cpu_objects

        target = self.target_of(module)
        matmuls = collect(module, lambda o: o.name == "linalg.matmul")
        if not matmuls or target.backend != "llvm-cpu":
            return
        run_weight_kernel(self.name, module, matmuls, ("bf16", "bf16", "f32"),
                          lambda k: cpu_objects.bf16_amx_declined(target, k), "bf16_amx_gemm.c", "bf16_amx",
                          amx_packed, "AMX", target.cores or 0)
