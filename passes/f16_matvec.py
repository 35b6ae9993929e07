"""inferx-f16-matvec: the projections of a float decode step (f16 activations of fewer than 16
rows times a stored f16 weight) through our few-row Triton kernel on CUDA targets.

A decoder's decode step multiplies one row a sequence by every projection weight, read as
stored: x[M, K] . W^T with W[N, K] a parameter (the Hugging Face layout) and M < 16.
inferx-hopper-matmul declines those shapes (its wgmma tiles are 64 rows), so IREE compiles them
as its matrix-vector loop. This pass sends them to the kernel of the weight-only layers
(passes/support/dequant_matvec.py, kind f16: the weight loaded as stored, no scales): 64 weight
rows a program, the rows in a 16-row tensor-core tile, split-K by the same rule, the ops after
the product finished in the kernel when it takes one slice. The same kernel read the MLP's int8
weights at one row faster than IREE's loop (6.5 against 8.6 us a layer, H200,
docs/levers/gpu-int4-matvec.md); the Llama-3-8B-shaped fp16 build, on IREE's loop, took 58.9 ms
a decode step on an H100 (docs/bench/2026-12-07-h100-llama8b). This form is not measured on a GPU
yet.

    y[M, N] = y0 + x[M, K] . transpose(W[N, K])   ->   p[S, M, N] = extern(x, W[, y0])
                                                        y = p (S = 1) or y0 + sum_s p[s]

An f16 result (y0 f16) is computed in f32 and cast back (quantize_contractions.widen_f16_product),
as the weight-only layers do. Builds run it for generation models (an ONNX model's few-row
layers keep IREE's loop until this form has GPU figures). Declined, with a remark: other backends, operands that are not
f16, a weight that is not a parameter read through its transpose, dynamic rows, 16 rows or more
(inferx-hopper-matmul's on Hopper, IREE's elsewhere), layers an integer precision annotates
(inferx-quantize-contractions'), shapes the kernel does not take, builds without Triton.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from inferx_compiler.dialects.inferx import PRECISION_ATTR
from inferx_compiler.passes.analysis.linalg_analysis import collect
from inferx_compiler.passes.analysis.matmul_epilogue import fusible_epilogue
from inferx_compiler.passes.analysis.remarks import op_counts, remark
from inferx_compiler.passes.infra.base import TargetedPass
from inferx_compiler.passes.support import dequant_matvec
from inferx_compiler.passes.support.iree_ir import is_zero_fill

MAX_ROWS = 15  # 16 rows and more: a matrix-matrix product (inferx-hopper-matmul's tiles)


@dataclasses.dataclass(frozen=True)
class F16Matvec(TargetedPass):
    """f16 products of fewer than 16 rows against stored weights to our Triton kernel (CUDA)."""

    name: ClassVar[str] = "inferx-f16-matvec"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "f16 decode-step projections (< 16 rows, stored weights) to our few-row Triton kernel"

    @classmethod
    def for_build(cls, build) -> "Optional[F16Matvec]":
        # generation models only for now: an ONNX model's few-row layers (the MLP at batch 1) keep
        # IREE's loop, whose figures exist, until this form is measured on a GPU
        if build.target.backend != "cuda" or build.source != "llm" or not build.runs(cls.name):
            return None
        return cls()

    def run(self, module) -> None:
        target = self.target_of(module)
        unavailable = (f"target '{target.name}' is not a CUDA GPU" if target.backend != "cuda"
                       else dequant_matvec.declined(target))
        # last layer first: a layer's f16 input cast then exists when the layer before it is
        # rewritten, and the kernel can finish that cast in its epilogue
        for op in reversed(collect(module, lambda o: o.name == "linalg.matmul")):
            why = unavailable or self._why_not(op)
            if why is None:
                why = self._rewrite(module, op, target)
            if why:
                remark(self.name, op, f"declined: {why}")

    @staticmethod
    def _why_not(op) -> Optional[str]:
        from inferx_compiler.passes.quantize_contractions import f16_product, ir_dynamic, stored_weight

        if PRECISION_ATTR in op.attributes and _integer_annotation(op):
            return "an integer precision is inferx-quantize-contractions'"
        if not f16_product(op):
            return "not an f16 x f16 product"
        rows = op.operands[0].type.shape[0]
        if rows == ir_dynamic():
            return "dynamic rows"
        if rows > MAX_ROWS:
            return f"{rows} rows (a matrix-matrix product)"
        weight = stored_weight(op.operands[1])
        if weight is None or not weight.value.type.has_static_shape:
            return "the right-hand side is not a stored weight"
        if not weight.transposed:
            return "the weight is stored [K, N] (the kernel reads [N, K], reduction innermost)"
        return None

    def _rewrite(self, module, op, target) -> Optional[str]:
        """Replace the product by the kernel; None, or why the kernel declines its shape."""
        from iree.compiler import ir

        from inferx_compiler.passes.quantize_contractions import (erase_unused_transpose, stored_weight,
                                                                  to_f16, widen_f16_product)

        m, k = op.operands[0].type.shape
        n = op.operands[2].type.shape[1]
        arch = dequant_matvec.triton_arch(target.arch)
        why = dequant_matvec.matvec_spec(m, n, k, "f16", 0, target.cores or 1, arch)
        if isinstance(why, str):  # (before the IR changes)
            return why
        if isinstance(op.operands[2].type.element_type, ir.F16Type):
            with op.context:
                op = widen_f16_product(op)
        x, rhs, y0 = op.operands
        weight = stored_weight(rhs)
        plan, _ = fusible_epilogue(op, add_init=not is_zero_fill(y0))
        spec = dequant_matvec.matvec_spec(m, n, k, "f16", 0, target.cores or 1, arch,
                                          plan.epilogue if plan is not None else None)
        if isinstance(spec, str):
            return spec
        plan = plan if spec.epilogue is not None else None
        finished = "" if plan is None else f", {op_counts(plan.fused)} finished in it" if plan.ops else ""
        remark(self.name, op, f"f16: {m}x{n}x{k} against '{weight.key}' read as stored [N, K] by our kernel "
                              f"(Triton, split {spec.split}{finished}), f32 sums")
        with op.context, ir.InsertionPoint(op), op.location:
            dequant_matvec.rewrite(module, op, to_f16(x), weight.value, None, y0, spec, plan)
        erase_unused_transpose(rhs)
        return None


def _integer_annotation(op) -> bool:
    from iree.compiler import ir

    from inferx_compiler.passes.quantize_contractions import INTEGER_PRECISIONS

    return ir.StringAttr(op.attributes[PRECISION_ATTR]).value in INTEGER_PRECISIONS
