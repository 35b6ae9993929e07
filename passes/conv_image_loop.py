"""inferx-conv-image-loop: a convolution over a dynamic batch as loops over its images, each
iteration a static-shape convolution of a few images.

A model with a dynamic batch dim compiles to a dynamic-batch function besides its static-shape
ones; a batch without a static function of its own runs it. IREE 3.13 gives a convolution whose
batch dim is dynamic no data tiling, and our strategies (inferx-conv-strategy's matmul, NCHWc
and kernel choices, the f32 convolution kernel) take static shapes only: in ResNet-50's
dynamic-batch function the 1x1 convolutions ran as generic reductions and a batch of 8 took
1915 ms against 268 ms in the static b8 function (2 threads, the AMX Xeon). This pass rewrites

    y = conv_2d_nchw_fchw(pad(x), w) into init                  x: ?xCxHxW, n = dim(x, 0)
      ->  y = scf.for i in [0, n - n % chunk) step chunk:        (chunk images an iteration)
                insert conv_2d_nchw_fchw(pad(x[i : i + chunk]), w) (+ init[i : i + chunk]) at i
          then scf.for i in [n - n % chunk, n) step 1:            (the images left, one at a time)
                insert conv_2d_nchw_fchw(pad(x[i]), w) (+ init[i]) at i

so the passes after it see static convolutions of `chunk` images and of one image (a constant
padding along H and W, as the importers make it, is applied per slice, where the f32 kernel
folds it; each product starts from a zero fill, what the kernel passes take, and a nonzero init,
a bias the importer broadcast into it, is added after it, where the f32 kernel fuses it). What
follows the convolution (activation, residual) stays IREE's dynamic-shape code. Declined, with
a remark: a static batch, dynamic channel or spatial dims, integer convolutions. Runs on CPU
targets (other targets: nothing to do). ResNet-50's dynamic-batch function at batch 8 on the
Xeon: 1915 -> 600 ms one image an iteration, 439 with chunks of 4 (chunks of 8 gave 388 at
batch 8 but leave batches 5-7 one image at a time).
Spelled `inferx-conv-image-loop{chunk=4}` (the target is the module's `inferx.target`:
inferx-set-target{target=x86-avx512} before it on a bare module).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from inferx_compiler.passes.infra.base import TargetedPass
from inferx_compiler.passes.support.iree_ir import constant_scalar, defining_op, generic, is_zero_fill
from inferx_compiler.passes.analysis.linalg_analysis import collect
from inferx_compiler.passes.analysis.remarks import remark

CONVOLUTION = "linalg.conv_2d_nchw_fchw"


def declined(op) -> str | None:
    """Why this convolution is not looped over its images (None: it is)."""
    from iree.compiler import ir

    dyn = ir.ShapedType.get_dynamic_size()
    x, w, y = (v.type for v in (op.operands[0], op.operands[1], op.results[0]))
    if x.shape[0] != dyn:
        return "static batch (already a static convolution)"
    if dyn in list(x.shape[1:]) + list(w.shape) + list(y.shape[1:]):
        return "dynamic channel or spatial dims (only the batch dim is looped over)"
    if not all(isinstance(t.element_type, ir.FloatType) for t in (x, w, y)):
        return f"{x.element_type} x {w.element_type} -> {y.element_type} (float convolutions only)"
    return None


def image_padding(value):
    """The tensor.pad op when `value` pads only dims 2 and 3 by static amounts (the batch may be
    dynamic), else None."""
    from iree.compiler import ir

    pad = defining_op(value, ("tensor.pad",))
    if pad is None:
        return None
    low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
    high = list(ir.DenseI64ArrayAttr(pad.attributes["static_high"]))
    if ir.ShapedType.get_dynamic_size() in low + high or low[:2] + high[:2] != [0, 0, 0, 0]:
        return None
    yielded = list(pad.regions[0].blocks[0].operations)[-1].operands[0]
    return pad if constant_scalar(yielded) is not None else None


def _images(value, index, count: int, shape):
    """value[index : index + count] as a static count x shape[1:] slice."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    dyn = ir.ShapedType.get_dynamic_size()
    sizes = [count] + list(shape[1:])
    t = ir.RankedTensorType.get(sizes, value.type.element_type)
    return tensor.ExtractSliceOp(t, value, [index], [], [], [dyn, 0, 0, 0], sizes, [1, 1, 1, 1]).result


def _padded_image(pad, image):
    """`pad` applied to one image (its low/high amounts, its constant)."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
    high = list(ir.DenseI64ArrayAttr(pad.attributes["static_high"]))
    shape = [d + lo + hi for d, lo, hi in zip(image.type.shape, low, high)]
    element = image.type.element_type
    padded = tensor.PadOp(ir.RankedTensorType.get(shape, element), image, [], [], low, high)
    fill = constant_scalar(list(pad.regions[0].blocks[0].operations)[-1].operands[0])
    with ir.InsertionPoint(padded.regions[0].blocks.append(*[ir.IndexType.get()] * len(shape))):
        tensor.YieldOp(arith.ConstantOp(element, ir.FloatAttr.get(element, fill)).result)
    return padded.result


def _value(built):
    """The result value of a linalg builder's return (a value, or the op)."""
    from iree.compiler import ir

    return built if isinstance(built, ir.Value) else built.results[0]


def loop_over_images(op, chunk: int) -> None:
    """Replace `op` (a convolution with a dynamic batch) by loops over its images: `chunk` images
    an iteration (static chunk-image convolutions) while whole chunks remain, then one image an
    iteration for the rest."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    x = op.operands[0]
    pad = image_padding(x)
    source = pad.operands[0] if pad is not None else x
    out_shape = list(op.results[0].type.shape)
    element = op.results[0].type.element_type
    for name in ("scf", "tensor", "arith", "linalg"):  # (ops of a dialect the context has not
        op.context.dialects[name]  # loaded would be built unregistered: the input has no scf op)
    with ir.InsertionPoint(op), op.location:
        index = ir.IndexType.get()
        constant = lambda v: arith.ConstantOp(index, ir.IntegerAttr.get(index, v)).result  # noqa: E731
        zero = constant(0)
        images = tensor.DimOp(source, zero).result
        # every image's slice of the result is written whole: the loops start from an empty tensor
        result = tensor.EmptyOp([images] + out_shape[1:], element).result
        whole = zero
        if chunk > 1:
            step = constant(chunk)
            whole = arith.MulIOp(arith.DivUIOp(images, step).result, step).result
            result = _image_loop(op, pad, source, zero, whole, chunk, result)
        result = _image_loop(op, pad, source, whole, images, 1, result)
    op.results[0].replace_all_uses_with(result)
    op.erase()  # (the batch's pad and init, now unused, are left to dead-code elimination)


def _image_loop(op, pad, source, lower, upper, count: int, acc_init):
    """scf.for i in [lower, upper) step count: images i .. i + count convolved as one static
    convolution (into a zero fill of their own: what the kernel passes take; a nonzero init, a
    bias the importer broadcast into it, added after the product and read from the init itself,
    never from the loop's tensor, which the product may be placed in) and inserted."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, linalg, scf, tensor

    w, init = op.operands[1], op.operands[2]
    out_shape = list(op.results[0].type.shape)
    element = op.results[0].type.element_type
    strides = ir.DenseI64ArrayAttr.get([int(v) for v in ir.DenseIntElementsAttr(op.attributes["strides"])])
    dilations = ir.DenseI64ArrayAttr.get([int(v) for v in ir.DenseIntElementsAttr(op.attributes["dilations"])])
    index = ir.IndexType.get()
    loop = scf.ForOp(lower, upper, arith.ConstantOp(index, ir.IntegerAttr.get(index, count)).result, [acc_init])
    with ir.InsertionPoint(loop.body):
        i, acc = loop.induction_variable, loop.inner_iter_args[0]
        images = _images(source, i, count, list(source.type.shape))
        if pad is not None:
            images = _padded_image(pad, images)
        shape = [count] + out_shape[1:]
        zeros = _value(linalg.fill(arith.ConstantOp(element, ir.FloatAttr.get(element, 0.0)).result,
                                   outs=[tensor.EmptyOp(shape, element).result]))
        y = _value(linalg.conv_2d_nchw_fchw(images, w, outs=[zeros], strides=strides, dilations=dilations))
        if not is_zero_fill(init, through_reshapes=False):
            identity = ir.AffineMap.get_identity(4)
            y = generic([y, _images(init, i, count, out_shape)], tensor.EmptyOp(shape, element).result,
                        [identity] * 3, ["parallel"] * 4, lambda b: arith.addf(b.arguments[0], b.arguments[1]))
        dyn = ir.ShapedType.get_dynamic_size()
        placed = tensor.InsertSliceOp(y, acc, [i], [], [], [dyn, 0, 0, 0], shape, [1, 1, 1, 1])
        scf.YieldOp([placed.result])
    return loop.results[0]


@dataclasses.dataclass(frozen=True)
class ConvImageLoop(TargetedPass):
    """Loops each dynamic-batch NCHW convolution over its images (static convolutions inside)."""

    name: ClassVar[str] = "inferx-conv-image-loop"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "a convolution over a dynamic batch as loops of static convolutions of a few images"

    chunk: int = 4  # images an iteration while whole chunks remain (1: one image an iteration)

    @classmethod
    def for_build(cls, build) -> "Optional[ConvImageLoop]":
        cpu = build.target.backend == "llvm-cpu"
        return cls() if cpu and build.runs(cls.name) and build.applies("inferx-conv-strategy") else None

    def __post_init__(self):
        if self.chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {self.chunk}")

    def run(self, module) -> None:
        target = self.target_of(module)
        if target.backend != "llvm-cpu":
            return
        for op in collect(module, lambda o: o.name == CONVOLUTION):
            why = declined(op)
            if why:
                remark(self.name, op, f"declined: {why}")
                continue
            remark(self.name, op, f"looped over the batch's images: static {self.chunk}-image convolutions "
                                  f"while whole chunks remain, then 1-image ones")
            loop_over_images(op, self.chunk)
