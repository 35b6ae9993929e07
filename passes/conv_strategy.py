"""inferx-conv-strategy: choose each 2-D convolution's algorithm from its shape and the target.

Runs in IREE's context before IREE's own pipeline, on `linalg.conv_2d_nchw_fchw` (what the
ONNX and FX importers produce). Why: IREE 3.13's direct convolution code runs an order of
magnitude below its data-tiled matmuls, so each convolution becomes a matmul or goes to a faster
kernel. Per convolution, the first of these that applies:

  kernel    f32 filters larger than 1x1 (at most 64 taps, any stride, dilation, zero padding)
            and 1x1 ones whose pixels fill KERNEL_MIN_LANE_FILL of its panels, on targets with
            `Target.f32_kernel` and a C compiler, where `nchwc` does not apply or the output has
            at most KERNEL_NCHWC_MAX_PIXELS pixels: marked `inferx.conv_strategy = "kernel"`;
            inferx-f32-matmul runs it on f32_gemm.c's convolution entry (implicit im2col, with
            the bias, ReLU and residual in its epilogue);
  s2d       a 3x3-or-larger stride-2 filter over at most S2D_MAX_CHANNELS input channels,
            dilation 1, static, on CPU targets: space-to-depth (2x2 pixel blocks become 4
            channels, the filter likewise at load), a stride-1 convolution of half the filter
            size that gets its own decision (one copy instead of a 7x7 stem's 49 tap copies);
  matmul    1x1 filter: rewritten here into `w[f,c] x x[c,h*w]` (at batch 1 the input only
            reshaped; a strided filter subsampled by a copy first), which IREE data-tiles as a
            matmul instead of running a direct convolution;
  nchwc     3x3 and larger f32 filters, dilation 1, channel counts multiples of 16, on targets
            with IREE's NCHWc conv microkernel (`Target.conv_microkernel`: AVX-512): marked
            `inferx.conv_strategy = "nchwc"` and left to IREE's conv data tiling and
            `iree_uk_conv_nchwc` (slower for 1x1 filters and 3-channel stems: not chosen there);
  winograd  3x3, stride 1, dilation 1, >= `winograd-min-channels` input and output channels, on
            targets whose record enables it: marked `__winograd_conv` for IREE's F(6,3) rewrite
            in preprocessing (bias detached first: `PREPROCESSING_PIPELINE`);
  taps      a depthwise convolution (`linalg.depthwise_conv_2d_nchw_chw`), static channels and
            pixels (any batch: the dynamic function's too), on CPU targets: one elementwise generic summing filter[c, i, j] x the strided window of each
            tap (`_depthwise_as_taps`), which IREE vectorizes along the output rows;
  im2col    any other static convolution: column copies and a `linalg.matmul`
            `w[f, K] x col[K, n*oh*ow]` (at batch > 1 the images side by side, the result
            transposed back to NCHW). On CPU one strided window copy per filter tap, K ordered
            (kh, kw, c), the filter transposed to match at load (IREE vectorizes such copies and
            scalarizes one with windowed maps); on CUDA one im2col copy with affine maps (which
            IREE tiles, unlike upstream's semi-affine ones), set up by the CUDA window-copy rule.

Dilated filters take the CPU's tap copies (each tap's window starts at (i*dh, j*dw)) or the
kernel. Declined, with a remark: dynamic dims (the artifact's static-shape functions are where
the strategies apply), dilation on GPU targets, grouped convolutions, other layouts. On CUDA targets the rewrite puts f16/bf16 convolutions on IREE's
tensor-core matmul path (IREE's own convolution code there was far slower, and wrong for some
static shapes); f32 convolutions are declined there: IREE 3.13's CUDA code generator fails to
bufferize the f32 matmul dispatches they become, so the driver keeps such models' convolutions
in the dynamic function. The measurements behind each rule: docs/levers/conv-strategy.md.

`algorithms=auto` applies the target's rules; a comma-separated list limits the choice to
those algorithms (a convolution whose rule picks one not listed falls back to the next that
applies, and is declined when none is listed). Under `auto`, Winograd is chosen only on
targets whose record enables it (none does today: see `Target.winograd`); listing it asks for
it on any CPU target. Listing `nchwc` asks for it only where the target has the microkernel
(elsewhere IREE would pack the convolution without one).

Spelled `inferx-conv-strategy{winograd-min-channels=64 algorithms=auto kernel=true}` (the target
is the module's `inferx.target`: inferx-set-target{target=NAME} before it on a bare module).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from inferx_compiler.passes.infra.base import TargetedPass
from inferx_compiler.passes.support.iree_ir import generic, plain_matmul, resized, zeros
from inferx_compiler.passes.analysis.linalg_analysis import collect, is_convolution_op
from inferx_compiler.passes.analysis.remarks import remark

WINOGRAD_ATTR = "__winograd_conv"
STRATEGY_ATTR = "inferx.conv_strategy"
HANDLED = ("linalg.conv_2d_nchw_fchw",)

# IREE preprocessing that carries out the Winograd marks (after detaching each marked conv's
# bias from its init, which IREE's Winograd rewrite would otherwise drop).
PREPROCESSING_PIPELINE = ("builtin.module(util.func(iree-global-opt-detach-elementwise-from-named-ops,"
                          "iree-linalg-ext-convert-conv2d-to-winograd))")


@dataclass(frozen=True)
class ConvShape:
    n: int  # -1 when dynamic
    c: int
    h: int
    w: int
    f: int
    kh: int
    kw: int
    oh: int
    ow: int
    strides: tuple[int, int]
    dilations: tuple[int, int]
    element_type: str = "f32"  # of the input

    @property
    def static(self) -> bool:
        return min(self.c, self.h, self.w, self.f, self.kh, self.kw, self.oh, self.ow) > 0


def conv_shape(op) -> ConvShape:
    """Shape, strides and dilations of a `linalg.conv_2d_nchw_fchw`."""
    from iree.compiler import ir

    x, w = op.operands[0].type, op.operands[1].type
    out = op.results[0].type
    dyn = ir.ShapedType.get_dynamic_size()

    def dim(t, i):
        return -1 if t.shape[i] == dyn else t.shape[i]

    def pair(name):
        attr = op.attributes[name]
        values = [int(v) for v in ir.DenseIntElementsAttr(attr)]
        return (values[0], values[1])

    return ConvShape(dim(x, 0), dim(x, 1), dim(x, 2), dim(x, 3), dim(w, 0), dim(w, 2), dim(w, 3),
                     dim(out, 2), dim(out, 3), pair("strides"), pair("dilations"), str(x.element_type))


@dataclass(frozen=True)
class Decision:
    strategy: Optional[str]  # matmul | nchwc | winograd | im2col; None: declined
    reason: str


ALGORITHMS = ("matmul", "kernel", "nchwc", "winograd", "im2col", "s2d", "taps")
DEPTHWISE = "linalg.depthwise_conv_2d_nchw_chw"
DEPTHWISE_TAPS_MAX = 49  # up to 7x7 filters: one generic reads every tap's window
KERNEL_STRATEGY = "kernel"  # our f32 convolution entry (inferx-f32-matmul carries it out)
KERNEL_TAPS_MAX = 64  # f32_gemm.c's CONV_TAPS_MAX
# Where IREE's NCHWc microkernel applies too, our kernel only for outputs of at most this many
# pixels (ResNet-50's 14x14 and 7x7 layers): NCHWc scales better over threads and is faster on
# larger images (docs/levers/conv-strategy.md).
KERNEL_NCHWC_MAX_PIXELS = 196
# ... and only where an image's pixels fill at least this share of the kernel's 32-lane panels
# (the entry takes an image at a time: 9 pixels fill 28% of a panel). ResNet-50's 7x7 layers
# (49 of 64 lanes) gain; 3x3 and 6x6 outputs were slower on the entry than on NCHWc or as
# folded matmuls (docs/levers/conv-strategy.md).
KERNEL_MIN_LANE_FILL = 0.75
S2D_MAX_CHANNELS = 4  # space-to-depth for stride-2 stems over at most this many input channels
NCHWC_BLOCK = 16  # channels per block of IREE 3.13's conv_nchwc microkernel (f32, AVX-512)


def decide(shape: ConvShape, target, winograd_min_channels: int,
           algorithms: tuple[str, ...] | None = None) -> Decision:
    """The rule table: one strategy per convolution, or a reason to leave it to IREE.
    `algorithms` None is `auto` (the target's rules); a tuple limits the choice to those."""
    winograd_ok = target.winograd if algorithms is None else "winograd" in algorithms
    automatic = algorithms is None
    algorithms = ALGORITHMS if algorithms is None else algorithms
    if shape.static and shape.n > 0:
        small = shape.oh * shape.ow <= KERNEL_NCHWC_MAX_PIXELS and lane_fill(shape) >= KERNEL_MIN_LANE_FILL
        if kernel_applies(shape, target, algorithms) and not (nchwc_applies(shape, target, algorithms) and not small):
            return Decision(KERNEL_STRATEGY, f"{shape.kh}x{shape.kw} stride {shape.strides} dilation "
                                             f"{shape.dilations}, {shape.c}->{shape.f} channels, {shape.oh}x"
                                             f"{shape.ow} pixels: our f32 convolution kernel (implicit im2col)")
    if target.backend == "none":
        return Decision(None, f"target '{target.name}' has no code generator to choose for")
    if target.backend == "cuda" and shape.element_type == "f32":
        return Decision(None, "f32 on CUDA: IREE 3.13 cannot bufferize the f32 im2col matmul "
                              "dispatch there; left to IREE's convolution code")
    if not shape.static:
        return Decision(None, "dynamic channel or spatial dims: left to IREE's direct convolution")
    if shape.dilations != (1, 1) and target.backend != "llvm-cpu":
        return Decision(None, f"dilation {shape.dilations} on a GPU target: left to IREE's convolution code")
    if shape.n < 0:
        return Decision(None, "dynamic batch: left to IREE's direct convolution (the artifact's "
                              "static-shape functions get a strategy)")
    if s2d_applies(shape, target, algorithms, automatic):
        return Decision("s2d", f"{shape.kh}x{shape.kw} stride 2 over {shape.c} channels: space-to-depth into a "
                               f"{-(-shape.kh // 2)}x{-(-shape.kw // 2)} stride-1 convolution over {4 * shape.c}")
    if (shape.kh, shape.kw) == (1, 1) and "matmul" in algorithms:
        return Decision("matmul", f"1x1 filter, stride {shape.strides}: a matmul")
    if nchwc_applies(shape, target, algorithms):
        return Decision("nchwc", f"{shape.kh}x{shape.kw} stride {shape.strides}, {shape.c}->{shape.f} "
                                 f"channels: IREE's NCHWc data tiling + conv microkernel")
    if ((shape.kh, shape.kw) == (3, 3) and shape.strides == (1, 1) and shape.dilations == (1, 1) and winograd_ok
            and min(shape.c, shape.f) >= winograd_min_channels):
        return Decision("winograd", f"3x3 stride 1, {shape.c}->{shape.f} channels: Winograd F(6,3)")
    if "im2col" in algorithms:
        return Decision("im2col", f"{shape.kh}x{shape.kw} stride {shape.strides}: im2col + matmul")
    return Decision(None, f"no allowed algorithm applies (allowed: {', '.join(algorithms) or 'none'})")


def lane_fill(shape: ConvShape) -> float:
    """The share of the convolution entry's 32-lane column panels an image's output pixels fill."""
    pixels = shape.oh * shape.ow
    return pixels / (32 * -(-pixels // 32))


def marked_for_kernel(op) -> bool:
    """Whether this pass chose our f32 kernel's convolution entry for the convolution `op`
    (inferx-f32-matmul carries the mark out)."""
    from iree.compiler import ir

    return (op.name == "linalg.conv_2d_nchw_fchw" and STRATEGY_ATTR in op.attributes
            and ir.StringAttr(op.attributes[STRATEGY_ATTR]).value == KERNEL_STRATEGY)


def nchwc_applies(shape: ConvShape, target, algorithms: tuple[str, ...]) -> bool:
    """IREE's NCHWc data tiling and conv microkernel: listed, on a target that has it, f32, a
    filter larger than 1x1, channel counts in its 16-channel blocks."""
    blocks = shape.c % NCHWC_BLOCK == 0 and shape.f % NCHWC_BLOCK == 0
    return ("nchwc" in algorithms and target.conv_microkernel and shape.element_type == "f32" and blocks
            and (shape.kh, shape.kw) != (1, 1) and shape.dilations == (1, 1))


def kernel_applies(shape: ConvShape, target, algorithms: tuple[str, ...]) -> bool:
    """Our f32 convolution entry: listed, f32, a filter larger than 1x1 with at most
    KERNEL_TAPS_MAX taps, or a 1x1 one whose pixels fill its column panels
    (KERNEL_MIN_LANE_FILL; over several images as a matmul the images would be folded into its
    columns, two transposes a convolution, and a strided one subsampled by a copy first, while
    the entry reads and writes NCHW image by image; at batch 1, where the matmul reads the image
    as it is, the entry's tiles and its gathered strided columns still gain:
    docs/levers/conv-strategy.md), and the target's f32 kernel rule
    (f32_kernel_declined: AVX-512, an Intel record, a K block, a C compiler)."""
    from inferx_compiler.kernels.cpu_objects import f32_kernel_declined

    if KERNEL_STRATEGY not in algorithms or shape.element_type != "f32" or target.backend != "llvm-cpu":
        return False
    pointwise = (shape.kh, shape.kw) == (1, 1) and lane_fill(shape) >= KERNEL_MIN_LANE_FILL
    if ((shape.kh, shape.kw) == (1, 1) and not pointwise) or shape.kh * shape.kw > KERNEL_TAPS_MAX:
        return False
    return f32_kernel_declined(target, shape.c * shape.kh * shape.kw) is None


def s2d_applies(shape: ConvShape, target, algorithms: tuple[str, ...], automatic: bool) -> bool:
    """Space-to-depth for a stride-2 stem: 3x3 or larger, dilation 1, at most S2D_MAX_CHANNELS
    input channels, static, on CPU targets (under `auto`) or when listed."""
    if "s2d" not in algorithms or (automatic and target.backend != "llvm-cpu"):
        return False
    return (shape.strides == (2, 2) and shape.dilations == (1, 1) and min(shape.kh, shape.kw) >= 3
            and shape.c <= S2D_MAX_CHANNELS and shape.n > 0 and shape.static)


@dataclass(frozen=True)
class ConvStrategy(TargetedPass):
    """Chooses matmul / NCHWc / Winograd / im2col (after space-to-depth for strided stems) per
    convolution from shape and target."""

    name: ClassVar[str] = "inferx-conv-strategy"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "choose each convolution's algorithm (1x1 matmul, NCHWc, Winograd, im2col)"

    winograd_min_channels: int = 64
    algorithms: str = "auto"
    kernel: bool = True  # offer `kernel` (false where inferx-f32-matmul, which carries it out, does not run)

    @classmethod
    def for_build(cls, build) -> "Optional[ConvStrategy]":
        request = build.request
        if request.conv_algorithms == "none" or not build.target.executable or not build.runs(cls.name):
            return None
        # `kernel` is carried out by inferx-f32-matmul: not offered where that pass is left out
        return cls(algorithms=request.conv_algorithms, kernel=build.runs("inferx-f32-matmul"))

    def __post_init__(self):
        if self.winograd_min_channels < 1:
            raise ValueError(f"winograd-min-channels must be >= 1, got {self.winograd_min_channels}")
        unknown = [a for a in self.allowed() or () if a not in ALGORITHMS]
        if unknown:
            raise ValueError(f"unknown algorithm(s) {', '.join(unknown)}; valid: auto, or a "
                             f"comma-separated subset of {','.join(ALGORITHMS)}")

    def allowed(self) -> tuple[str, ...] | None:
        """None for `auto`, else the listed algorithms (without `kernel` when `kernel` is false)."""
        if self.algorithms == "auto":
            return None if self.kernel else tuple(a for a in ALGORITHMS if a != KERNEL_STRATEGY)
        return tuple(a for a in self.algorithms.split(",") if a and (self.kernel or a != KERNEL_STRATEGY))

    def run(self, module) -> None:
        target = self.target_of(module)
        for op in collect(module, is_convolution_op):
            if op.name == DEPTHWISE:
                self._depthwise(op, target)
                continue
            if op.name not in HANDLED:
                remark(self.name, op, f"declined: {op.name} (grouped or another layout) is left to IREE")
                continue
            decision = decide(conv_shape(op), target, self.winograd_min_channels, self.allowed())
            if decision.strategy is None:
                remark(self.name, op, f"declined: {decision.reason}")
                continue
            remark(self.name, op, f"{decision.strategy}: {decision.reason}")
            if decision.strategy == "s2d":
                rest = tuple(a for a in (self.allowed() or ALGORITHMS) if a != "s2d")
                blocks = -(-4 * conv_shape(op).c // NCHWC_BLOCK) * NCHWC_BLOCK
                padded = decide(_s2d_shape(conv_shape(op), blocks), target, self.winograd_min_channels, rest)
                op = _space_to_depth(op, pad_to_blocks=padded.strategy == "nchwc")
                decision = decide(conv_shape(op), target, self.winograd_min_channels, rest)
                if decision.strategy is None:
                    continue
                remark(self.name, op, f"{decision.strategy}: {decision.reason}")
            _apply(op, decision, target)  # may replace op


    def _depthwise(self, op, target) -> None:
        allowed = self.allowed() or ALGORITHMS
        shape = depthwise_shape(op)
        why = None
        if "taps" not in allowed:
            why = "taps not among the allowed algorithms"
        elif target.backend != "llvm-cpu":
            why = "a GPU target: left to IREE's convolution code"
        elif not shape.static:
            why = "dynamic dims: left to IREE's depthwise convolution (static-shape functions get the taps)"
        elif shape.kh * shape.kw > DEPTHWISE_TAPS_MAX:
            why = f"{shape.kh}x{shape.kw} filter: more than {DEPTHWISE_TAPS_MAX} taps"
        elif not _float_operands(op):
            why = "integer operands: left to IREE's depthwise convolution"
        if why:
            remark(self.name, op, f"declined: depthwise {why}")
            return
        remark(self.name, op, f"taps: depthwise {shape.kh}x{shape.kw} stride {shape.strides} dilation "
                              f"{shape.dilations} over {shape.c} channels: one elementwise sum of its "
                              f"{shape.kh * shape.kw} strided windows")
        with op.context, op.location:
            _depthwise_as_taps(op, shape)


def depthwise_shape(op) -> ConvShape:
    """Shape, strides and dilations of a `linalg.depthwise_conv_2d_nchw_chw` (f = c)."""
    from iree.compiler import ir

    x, w, out = op.operands[0].type, op.operands[1].type, op.results[0].type
    dyn = ir.ShapedType.get_dynamic_size()

    def dim(t, i):
        return -1 if t.shape[i] == dyn else t.shape[i]

    def pair(name):
        values = [int(v) for v in ir.DenseIntElementsAttr(op.attributes[name])]
        return (values[0], values[1])

    return ConvShape(dim(x, 0), dim(x, 1), dim(x, 2), dim(x, 3), dim(x, 1), dim(w, 1), dim(w, 2),
                     dim(out, 2), dim(out, 3), pair("strides"), pair("dilations"), str(x.element_type))


def _float_operands(op) -> bool:
    from iree.compiler import ir

    return all(isinstance(v.type.element_type, ir.FloatType) for v in op.operands)


def _depthwise_as_taps(op, s: ConvShape) -> None:
    """y[n, c, oh, ow] = init + sum_(i, j) w[c, i, j] * x[n, c, oh*sh + i*dh, ow*sw + j*dw] as one
    elementwise linalg.generic over the output, reading each tap's strided window of the (padded)
    input as an extract_slice and the filter at constant tap indices: IREE vectorizes it along
    the output row, where its depthwise convolution code ran 4-5x below onnxruntime."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    x, w, init = op.operands[0], op.operands[1], op.operands[2]
    et = x.type.element_type
    dynamic = ir.ShapedType.get_dynamic_size()
    window_t = ir.RankedTensorType.get([s.n if s.n > 0 else dynamic, s.c, s.oh, s.ow], et)
    d = [ir.AffineDimExpr.get(i) for i in range(4)]  # n, c, oh, ow
    identity = ir.AffineMap.get_identity(4)
    with ir.InsertionPoint(op), op.location:
        # a dynamic batch (the artifact's dynamic function): the windows take the input's batch
        batch = [] if s.n > 0 else [tensor.dim(x, arith.constant(ir.IndexType.get(), 0))]
        windows, filters, maps = [], [], []
        for i in range(s.kh):
            for j in range(s.kw):
                windows.append(tensor.ExtractSliceOp(
                    window_t, x, [], batch, [], [0, 0, i * s.dilations[0], j * s.dilations[1]],
                    [s.n if s.n > 0 else dynamic, s.c, s.oh, s.ow], [1, 1, *s.strides]).result)
                maps.append(identity)
        for i in range(s.kh):
            for j in range(s.kw):
                filters.append(ir.AffineMap.get(4, 0, [d[1], ir.AffineConstantExpr.get(i), ir.AffineConstantExpr.get(j)]))
        taps = len(windows)

        acc_t = init.type.element_type

        def widened(v):  # (f16 inputs into an f32 init: the products in the init's type)
            return v if v.type == acc_t else arith.extf(acc_t, v)

        def body(b):
            acc = b.arguments[2 * taps]
            for t in range(taps):
                acc = arith.addf(acc, arith.mulf(widened(b.arguments[t]), widened(b.arguments[taps + t])))
            return acc

        out = generic(windows + [w] * taps, init, maps + filters + [identity], ["parallel"] * 4, body)
    op.results[0].replace_all_uses_with(out)
    op.erase()


def _apply(op, decision: Decision, target) -> None:
    from iree.compiler import ir

    with op.context:
        if decision.strategy in ("matmul", "im2col"):
            _rewrite_as_matmul(op, taps=target.backend == "llvm-cpu")
            return
        op.attributes[STRATEGY_ATTR] = ir.StringAttr.get(decision.strategy)
        if decision.strategy == "winograd":
            op.attributes[WINOGRAD_ATTR] = ir.UnitAttr.get()


def _space_to_depth(op, pad_to_blocks: bool):
    """conv(x, w), stride 2, kh x kw -> conv(s2d(x), s2d(w)), stride 1, ceil(kh/2) x ceil(kw/2):
    each 2x2 block of input pixels becomes 4 channels (x[n, c, 2i + a, 2j + b] ->
    x2[n, 4c + 2a + b, i, j]) and the filter likewise after zero-padding it to even sizes, so that
    out[oh, ow] = sum over (c, a, b, p, q) of x2[c, a, b][oh + p, ow + q] w2[c, a, b][p, q]: the
    same sums. `pad_to_blocks`: channels zero-padded to the NCHWc microkernel's 16-channel blocks
    (targets that have it, where nchwc may be chosen next). Why: a 3-channel 7x7 stride-2 stem is 49 thin tap copies and a 147-deep matmul
    through im2col; after space-to-depth it is one copy and a 16-channel 4x4 convolution (about
    2x faster for ResNet-50's stem: docs/levers/conv-strategy.md). The filter
    is a weight: IREE computes its rearrangement once, at load. Returns the new convolution."""
    from iree.compiler import ir
    from iree.compiler.dialects import linalg

    x, w, init = op.operands[0], op.operands[1], op.operands[2]
    s = conv_shape(op)
    kh2, kw2 = -(-s.kh // 2), -(-s.kw // 2)
    h2, w2 = s.oh + kh2 - 1, s.ow + kw2 - 1
    channels = 4 * s.c
    if pad_to_blocks:
        channels = -(-channels // NCHWC_BLOCK) * NCHWC_BLOCK
    with ir.InsertionPoint(op), op.location:
        xs = resized(x, [s.n, s.c, 2 * h2, 2 * w2])
        xs = _blocks_to_channels(xs, [s.n, s.c, h2, w2], channels)
        ws = resized(w, [s.f, s.c, 2 * kh2, 2 * kw2])
        ws = _blocks_to_channels(ws, [s.f, s.c, kh2, kw2], channels)
        one = ir.DenseI64ArrayAttr.get([1, 1])
        conv = linalg.conv_2d_nchw_fchw(xs, ws, outs=[init], strides=one, dilations=one)
    conv_op = conv.owner if isinstance(conv, ir.Value) else conv
    op.results[0].replace_all_uses_with(conv_op.results[0])
    op.erase()
    return conv_op


def _s2d_shape(s: ConvShape, channels: int) -> ConvShape:
    """The stride-1 convolution space-to-depth makes of `s`, over `channels` channels."""
    kh2, kw2 = -(-s.kh // 2), -(-s.kw // 2)
    return ConvShape(s.n, channels, s.oh + kh2 - 1, s.ow + kw2 - 1, s.f, kh2, kw2, s.oh, s.ow, (1, 1), (1, 1),
                     s.element_type)


def _blocks_to_channels(value, shape: list, channels: int):
    """[a, c, 2h, 2w] -> [a, 4c, h, w], channel 4c' + 2i + j holding pixel (2y + i, 2x + j) of
    channel c', then zero-padded to `channels`."""
    from iree.compiler import ir
    from iree.compiler.dialects import linalg, tensor

    a, c, h, w = shape
    et = value.type.element_type
    six = tensor.ExpandShapeOp(ir.RankedTensorType.get([a, c, h, 2, w, 2], et), value,
                               [[0], [1], [2, 3], [4, 5]], [], [a, c, h, 2, w, 2]).result
    dest = tensor.EmptyOp([a, c, 2, 2, h, w], et).result
    moved = linalg.transpose(six, outs=[dest], permutation=[0, 1, 3, 5, 2, 4])
    moved = moved if isinstance(moved, ir.Value) else moved.results[0]
    flat = tensor.CollapseShapeOp(ir.RankedTensorType.get([a, 4 * c, h, w], et), moved,
                                  [[0], [1, 2, 3], [4], [5]]).result
    return resized(flat, [a, channels, h, w])


def _parallel_copy(source, dest, source_map, rank: int):
    """linalg.generic dest[d...] = source[source_map(d...)] (all loops parallel)."""
    from iree.compiler import ir

    return generic([source], dest, [source_map, ir.AffineMap.get_identity(rank)], ["parallel"] * rank,
                   lambda block: block.arguments[0])


def _rewrite_as_matmul(op, taps: bool) -> None:
    """conv(x, w) -> matmul(w[f, K], col[K, pixels]), accumulating into the conv's init. At
    batch 1 `col` is x itself, reshaped, for a 1x1 stride-1 filter; otherwise (`_columns`) with
    `taps` (CPU) one strided window copy per filter tap, K ordered (kh, kw, c) and the filter
    transposed to match (once, at load: it is a weight), else one im2col copy with windowed
    maps, K ordered (c, kh, kw). At batch n > 1 the images are folded into the matmul's columns
    (col is [K, n*oh*ow], one plain matmul rather than a batched contraction that broadcasts the
    filter: IREE 3.13's CUDA code for the latter was wrong, docs/levers/conv-strategy.md) and the
    result is transposed back to NCHW while the init is added."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    x, w, init = op.operands[0], op.operands[1], op.operands[2]
    s = conv_shape(op)
    acc_t = init.type.element_type
    k, p = s.c * s.kh * s.kw, s.oh * s.ow
    with ir.InsertionPoint(op), op.location:
        if taps and (s.kh, s.kw) != (1, 1):
            w = _filter_taps_last(w, s)
        w2 = tensor.CollapseShapeOp(ir.RankedTensorType.get([s.f, k], w.type.element_type), w,
                                    [[0], [1, 2, 3]]).result
        acc = tensor.CollapseShapeOp(ir.RankedTensorType.get([s.n, s.f, p], acc_t), init,
                                     [[0], [1], [2, 3]]).result
        col = _columns(x, s, taps)
        if s.n == 1:
            acc1 = tensor.CollapseShapeOp(ir.RankedTensorType.get([s.f, p], acc_t), acc, [[0, 1], [2]]).result
            product = plain_matmul(w2, col, acc1)
            out = tensor.ExpandShapeOp(ir.RankedTensorType.get([1, s.f, p], acc_t), product,
                                       [[0, 1], [2]], [], [1, s.f, p]).result
        else:
            zero = zeros([s.f, s.n * p], acc_t)
            product = plain_matmul(w2, col, zero)
            product = tensor.ExpandShapeOp(ir.RankedTensorType.get([s.f, s.n, p], acc_t), product,
                                           [[0], [1, 2]], [], [s.f, s.n, p]).result
            out = _to_nchw_plus(product, acc)
        out = tensor.ExpandShapeOp(init.type, out, [[0], [1], [2, 3]], [],
                                   [s.n, s.f, s.oh, s.ow]).result
    op.results[0].replace_all_uses_with(out)
    op.erase()


def _columns(x, s: "ConvShape", taps: bool):
    """The matmul's right operand [K, n*oh*ow]."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    et = x.type.element_type
    pointwise = (s.kh, s.kw, s.strides) == (1, 1, (1, 1)) and (s.h, s.w) == (s.oh, s.ow)
    if s.n == 1 and pointwise:
        return tensor.CollapseShapeOp(ir.RankedTensorType.get([s.c, s.oh * s.ow], et), x, [[0, 1], [2, 3]]).result
    if taps:
        return _tap_columns(_channels_first(x, s), s, pointwise)
    return _columns_batch1(x, s, et) if s.n == 1 else _columns_folded(x, s, et)


def _filter_taps_last(w, s: "ConvShape"):
    """w[f, c, kh, kw] -> [f, kh, kw, c] (the filter is a weight: IREE computes this at load)."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    d = [ir.AffineDimExpr.get(i) for i in range(4)]  # f, kh, kw, c
    dest = tensor.EmptyOp([s.f, s.kh, s.kw, s.c], w.type.element_type).result
    return _parallel_copy(w, dest, ir.AffineMap.get(4, 0, [d[0], d[3], d[1], d[2]]), 4)


def _channels_first(x, s: "ConvShape"):
    """x[n, c, h, w] -> [c, n, h, w]: one transpose of the input, so that each tap's window is
    a plain strided copy and a 1x1 stride-1 filter reads the input as it is (at batch 1 only
    a reshape)."""
    from iree.compiler import ir
    from iree.compiler.dialects import linalg, tensor

    et = x.type.element_type
    if s.n == 1:
        chw = tensor.CollapseShapeOp(ir.RankedTensorType.get([s.c, s.h, s.w], et), x, [[0, 1], [2], [3]]).result
        return tensor.ExpandShapeOp(ir.RankedTensorType.get([s.c, 1, s.h, s.w], et), chw,
                                    [[0, 1], [2], [3]], [], [s.c, 1, s.h, s.w]).result
    dest = tensor.EmptyOp([s.c, s.n, s.h, s.w], et).result
    op = linalg.transpose(x, outs=[dest], permutation=[1, 0, 2, 3])
    return op if isinstance(op, ir.Value) else op.results[0]


def _tap_columns(xt, s: "ConvShape", pointwise: bool):
    """col[(kh, kw, c), (n, oh, ow)] from the input in CNHW: for each filter tap (i, j) the
    strided window xt[:, :, i::sh, j::sw] (oh x ow of it) copied, the taps concatenated. Each
    copy has permutation maps, which IREE's CPU code vectorizes; one copy with windowed maps
    (oh*sh + kh) is scalarized there, about 3x slower (docs/levers/conv-strategy.md)."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    et = xt.type.element_type
    cols_t = ir.RankedTensorType.get([s.kh * s.kw * s.c, s.n * s.oh * s.ow], et)
    if pointwise:
        return tensor.CollapseShapeOp(cols_t, xt, [[0], [1, 2, 3]]).result
    window_t = ir.RankedTensorType.get([s.c, s.n, s.oh, s.ow], et)
    d = [ir.AffineDimExpr.get(i) for i in range(5)]  # tap, c, n, oh, ow
    from_window = ir.AffineMap.get(5, 0, [d[1], d[2], d[3], d[4]])
    parts = []
    for i in range(s.kh):
        for j in range(s.kw):
            window = tensor.ExtractSliceOp(window_t, xt, [], [], [], [0, 0, i * s.dilations[0], j * s.dilations[1]],
                                           [s.c, s.n, s.oh, s.ow], [1, 1, *s.strides]).result
            dest = tensor.EmptyOp([1, s.c, s.n, s.oh, s.ow], et).result
            parts.append(_parallel_copy(window, dest, from_window, 5))
    taps = s.kh * s.kw
    col = parts[0] if taps == 1 else tensor.ConcatOp(
        ir.RankedTensorType.get([taps, s.c, s.n, s.oh, s.ow], et), 0, parts).result
    return tensor.CollapseShapeOp(cols_t, col, [[0, 1], [2, 3, 4]]).result


def _window_map(s: "ConvShape", dims: list) -> "object":
    """x[n, c, oh*sh + kh*dh, ow*sw + kw*dw] for loop dims given as (n, c, kh, kw, oh, ow)."""
    from iree.compiler import ir

    n, c, kh, kw, oh, ow = dims
    row = ir.AffineExpr.get_add(ir.AffineExpr.get_mul(oh, ir.AffineConstantExpr.get(s.strides[0])),
                                ir.AffineExpr.get_mul(kh, ir.AffineConstantExpr.get(s.dilations[0])))
    col = ir.AffineExpr.get_add(ir.AffineExpr.get_mul(ow, ir.AffineConstantExpr.get(s.strides[1])),
                                ir.AffineExpr.get_mul(kw, ir.AffineConstantExpr.get(s.dilations[1])))
    return ir.AffineMap.get(6, 0, [n, c, row, col])


def _columns_batch1(x, s: "ConvShape", et):
    """[c*kh*kw, oh*ow] for one image: an im2col copy with windowed maps."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    d = [ir.AffineDimExpr.get(i) for i in range(6)]  # n, c, kh, kw, oh, ow
    copy = _parallel_copy(x, tensor.EmptyOp([1, s.c, s.kh, s.kw, s.oh, s.ow], et).result, _window_map(s, d), 6)
    return tensor.CollapseShapeOp(ir.RankedTensorType.get([s.c * s.kh * s.kw, s.oh * s.ow], et),
                                  copy, [[0, 1, 2, 3], [4, 5]]).result


def _columns_folded(x, s: "ConvShape", et):
    """[c*kh*kw, n*oh*ow]: the im2col copy with the images side by side (loops c, kh, kw, n, oh, ow)."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    d = [ir.AffineDimExpr.get(i) for i in range(6)]  # c, kh, kw, n, oh, ow
    window = _window_map(s, [d[3], d[0], d[1], d[2], d[4], d[5]])
    copy = _parallel_copy(x, tensor.EmptyOp([s.c, s.kh, s.kw, s.n, s.oh, s.ow], et).result, window, 6)
    return tensor.CollapseShapeOp(ir.RankedTensorType.get([s.c * s.kh * s.kw, s.n * s.oh * s.ow], et),
                                  copy, [[0, 1, 2], [3, 4, 5]]).result


def _to_nchw_plus(product, acc):
    """out[n, f, p] = product[f, n, p] + acc[n, f, p]."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    d = [ir.AffineDimExpr.get(i) for i in range(3)]  # n, f, p
    maps = [ir.AffineMap.get(3, 0, [d[1], d[0], d[2]]), ir.AffineMap.get_identity(3), ir.AffineMap.get_identity(3)]
    empty = tensor.EmptyOp(list(acc.type.shape), acc.type.element_type).result
    return generic([product, acc], empty, maps, ["parallel"] * 3,
                   lambda block: arith.addf(block.arguments[0], block.arguments[1]))
