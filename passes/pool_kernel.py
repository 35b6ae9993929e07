"""inferx-pool-kernel: 2-D max pooling (NCHW, f32) on AVX-512 CPUs, through our kernel.

IREE 3.13 treats `linalg.pooling_nchw_max` as a convolution when it data-tiles: the pooling's
input gets an identity encoding, which costs a copy of the whole padded input in a dispatch of
its own, before the pooling's own dispatch reads it again. ResNet-50's stem pooling at batch 8
(3x3, stride 2, over 8x64x112x112) took that copy 3.7-10.7 ms and the pooling 1.9 ms at two
threads on a Xeon, against onnxruntime's 0.9 ms for the whole pooling.
inferx_compiler/kernels/maxpool_planes.c reads the unpadded input once, plane by plane (a
vertical max of the window's rows, then the horizontal max at the window's stride, 16 lanes at
a time).

This pass replaces what the importers make of a max pooling (torch-mlir: a `tensor.pad` by
-inf along H and W, a `linalg.pooling_nchw_max` into a -inf fill) by the kernel's dispatch, x
viewed as [N * C, H * W] planes:

    p = pad(x, -inf); y = pooling_nchw_max(p, window) into fill(-inf)
        ->    y = maxpool_rows(x) viewed as [N, C, OH, OW]

The -inf padding is folded (the kernel skips window positions outside the plane, which is what
-inf padding does); any other input is read as it is. Declined, with a remark: dynamic shapes
(the static-shape functions are where it applies), element types other than f32, dilation other
than 1, an init other than a -inf fill, planes wider than the kernel's row buffer, a build
machine without a C compiler. Targets without AVX-512 keep IREE's code silently.
Spelled `inferx-pool-kernel` (the target is the module's `inferx.target`:
inferx-set-target{target=x86-avx512} before it on a bare module).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar, Optional

from inferx_compiler.passes.infra.base import TargetedPass
from inferx_compiler.passes.support.cpu_extern import row_kernel_object
from inferx_compiler.passes.support.iree_ir import constant_scalar, defining_op, spatial_padding
from inferx_compiler.passes.analysis.linalg_analysis import collect
from inferx_compiler.passes.analysis.remarks import remark

POOLING = "linalg.pooling_nchw_max"
ROW_MAX = 4096  # floats in the kernel's row buffer (maxpool_planes.c: MAXPOOL_ROW_MAX)


def _pair(op, name: str) -> tuple[int, int]:
    from iree.compiler import ir

    values = [int(v) for v in ir.DenseIntElementsAttr(op.attributes[name])]
    return values[0], values[1]


def row_buffer_floats(width: int, pad_left: int, out_width: int, window: int, stride: int) -> int:
    """The kernel's row buffer for one output row (maxpool_planes.c: `len`)."""
    need = max(-(-out_width // 16) * 16 * stride + window + 16, pad_left + width)
    return -(-need // 16) * 16


def declined(op, source, pads) -> Optional[str]:
    """Why the kernel cannot take this pooling (reading `source` with `pads` folded), or None."""
    x, y = source.type, op.results[0].type
    if not (x.has_static_shape and y.has_static_shape):
        return "dynamic shape"
    if str(x.element_type) != "f32" or str(y.element_type) != "f32":
        return f"element type {x.element_type} (the kernel takes f32)"
    if _pair(op, "dilations") != (1, 1):
        return f"dilation {_pair(op, 'dilations')} (the kernel takes 1)"
    fill = defining_op(op.operands[2], ("linalg.fill",))
    if fill is None or constant_scalar(fill.operands[0]) != -math.inf:
        return "an init other than a -inf fill"
    _, stride_w = _pair(op, "strides")
    window_w = op.operands[1].type.shape[1]
    if row_buffer_floats(x.shape[3], pads[1], y.shape[3], window_w, stride_w) > ROW_MAX:
        return f"planes {x.shape[3]} wide need a row buffer over {ROW_MAX} floats"
    return None


@dataclasses.dataclass(frozen=True)
class PoolKernel(TargetedPass):
    """2-D max pooling to our AVX-512 kernel (inferx_compiler/kernels/maxpool_planes.c)."""

    name: ClassVar[str] = "inferx-pool-kernel"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "2-D max pooling on our AVX-512 C kernel (no padded copy, no relayout)"

    @classmethod
    def for_build(cls, build) -> "Optional[PoolKernel]":
        target = build.target
        fits = target.backend == "llvm-cpu" and "avx512f" in target.features
        return cls() if fits and build.runs(cls.name) else None

    def run(self, module) -> None:
        target = self.target_of(module)
        if target.backend != "llvm-cpu" or "avx512f" not in target.features:
            return  # nothing to decline: the target has no use for the kernel
        found = []
        for op in collect(module, lambda o: o.name == POOLING):
            source, pads = spatial_padding(op.operands[0], -math.inf)
            why = declined(op, source, pads)
            if why is not None:
                remark(self.name, op, f"max pooling left to IREE: {why}")
            else:
                found.append(op)
        path = row_kernel_object(self.name, "maxpool", found, "max pooling") if found else None
        if path is None:
            return
        for op in found:
            # the source read now: a pooling of a pooling reads the first one's kernel result
            source, pads = spatial_padding(op.operands[0], -math.inf)
            self._rewrite(module, op, source, pads, path)

    def _rewrite(self, module, op, x, pads, object_path: str) -> None:
        from iree.compiler import ir
        from iree.compiler.dialects import tensor

        from inferx_compiler.passes.support.cpu_extern import RowKernel, row_kernel

        n, c, h, w = x.type.shape
        out_type = op.results[0].type
        oh, ow = out_type.shape[2], out_type.shape[3]
        kh, kw = op.operands[1].type.shape
        (sh, sw), (ph, pw) = _pair(op, "strides"), pads
        kernel = RowKernel("maxpool", n * c, h * w, "inferx_maxpool_rows (C, AVX-512)",
                           f"{kh}x{kw} window, stride {sh}x{sw}, padding {ph}x{pw} skipped: rows' max, "
                           f"then columns' max, 16 lanes", out_n=oh * ow,
                           params=(h, w, oh, ow, kh, kw, sh, sw, ph, pw),
                           variant=f"{h}x{w}_k{kh}x{kw}_s{sh}x{sw}_p{ph}x{pw}_o{oh}x{ow}",
                           flops=n * c * oh * ow * kh * kw)
        groups = [[0, 1], [2, 3]]
        with ir.InsertionPoint(op), op.location:
            planes = ir.RankedTensorType.get([n * c, h * w], x.type.element_type)
            result = row_kernel(module, kernel, tensor.CollapseShapeOp(planes, x, groups).result,
                                object_path, self.name)
            y = tensor.ExpandShapeOp(out_type, result, groups, [], [n, c, oh, ow]).result
        remark(self.name, op, f"{kh}x{kw} max pooling, stride {sh}x{sw}, over {n * c} planes of {h}x{w} "
                              f"(padding {ph}x{pw} folded) on our AVX-512 kernel")
        op.results[0].replace_all_uses_with(y)
        pad = op.operands[0].owner if x != op.operands[0] else None
        op.erase()
        if pad is not None and not list(pad.results[0].uses):
            pad.erase()
