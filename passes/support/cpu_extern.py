"""Dispatching to our own C kernels on CPU targets (IREE 3.13's llvm-cpu backend).

A kernel object (inferx_compiler/kernels/cpu_objects.py) is linked into the executable of a
`stream.executable` that names it in `hal.executable.objects`; the executable's function reads
its bindings as memrefs, takes their base pointers (`llvm.bareptr`) and calls the kernel's C
function once per workgroup with its tile:

    stream.executable private @inferx_u8s8_128x3072x768 attributes {hal.executable.objects = ...} {
      stream.executable.export public @inferx_u8s8_128x3072x768 workgroups() -> (...) { N/nt, ceil(M/mt), 1 }
      builtin.module {
        func.func private @inferx_u8s8_tile(memref<i8>, index, memref<i8>, index, memref<i32>, index,
                                            i64...) attributes {hal.import.static, llvm.bareptr = true}
        func.func @inferx_u8s8_128x3072x768(%a, %b, %c: !stream.binding) { ... call ... }
      }
    }
    %acc = flow.dispatch @inferx_u8s8_128x3072x768::@inferx_u8s8_128x3072x768(%a_u8, %b_packed)

Every kernel is a product A[M, K] x B -> C[M, N] whose C function takes (pointer, offset) per
binding, then M, N, K, its extra sizes, and the tile (m0, mt, n0, nt). One executable per distinct
product, shared by every product of that shape (dynamic rows: the row count is the dispatch's
workload and an operand, `inferx_u8s8_Dx3072x768`); its entry carries the shape in its name
too (IREE links the executables of a model into one, whose entry points must differ).
The executable is written as text and parsed (its ops are IREE's stream/codegen ops, whose
Python builders 3.13 does not expose) into a scratch module, then moved into the model.
"""

from __future__ import annotations

import dataclasses
import math

from typing import Optional

from inferx_compiler.kernels.c_epilogue import CEpilogue
from inferx_compiler.kernels.cpu_objects import F32_HELD_FLOATS, f32_k_block

# Objects are keyed by the generic llvm-cpu x86-64 target: IREE picks them for whichever x86-64
# CPU target the build uses (as for the generic CUDA target of the Hopper kernels).
X86_64_OBJECT_TARGET = '#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">'
DYNAMIC = -1  # rows known only at run time
AMX_KINDS = ("bf16_amx", "u8s8_amx")  # kernels on AMX tiles (32x32 blocks)
S32_KINDS = ("u8s8", "u8s8_amx")  # u8 x s8 kernels: s32 sums (the others give f32)
F32_KINDS = ("f32", "f32l", "f32c")  # f32_gemm.c: the weight on the right, on the left, or a convolution's
F32_LEFT_ROWS = 14  # f32_gemm.c's register tile rows (MR): the left weight's packed row blocks
SOURCE_OF_KIND = {"u8s8": "u8s8_gemm.c", "u8s4": "u8s4_gemm.c", "bf16_amx": "bf16_amx_gemm.c",
                  "u8s8_amx": "u8s8_amx_gemm.c", "f32": "f32_gemm.c", "f32l": "f32_gemm.c", "f32c": "f32_gemm.c"}


@dataclasses.dataclass(frozen=True)
class ConvGeometry:
    """A convolution on f32_gemm.c's convolution entry (`inferx_f32c_tile`): y[images, F, OH,
    OW] = w[F, C, KH, KW] * x[images, C, H, W] with strides, dilations and zero padding (top,
    left; the bottom and right follow from the output size)."""

    images: int
    c: int
    h: int
    w: int
    oh: int
    ow: int
    kh: int
    kw: int
    strides: tuple
    dilations: tuple
    pads: tuple  # (top, left)
    pixel_rows: bool = False  # the pixel-rows layout (pixel_rows_fit): the weight packed as W^T

    @property
    def input_shape(self) -> tuple:
        return (self.images, self.c, self.h, self.w)

    @property
    def tag(self) -> str:
        """The convolution in a symbol: images x C x H x W, filter, strides, dilations, pads."""
        pair = lambda p: f"{p[0]}x{p[1]}"  # noqa: E731
        return (f"{self.images}x{self.c}x{self.h}x{self.w}_k{self.kh}x{self.kw}_s{pair(self.strides)}"
                f"_d{pair(self.dilations)}_p{pair(self.pads)}{'_r' if self.pixel_rows else ''}")

    @property
    def joined(self) -> bool:
        """Whether the entry tiles the images' output pixels side by side (f32_gemm.c's joined
        images): several images whose pixels leave the last 32-column panel part empty, at
        least 32 of them (a panel then spans at most two images), positions within int32. Two
        threads on a Xeon (tools/bench/conv_kernel_bench.c, 8 images, residual epilogue):
        ResNet-50's 7x7 layers 3.1 -> 2.5 (1x1) and 7.5 -> 6.1 ms (3x3), its 14x14 1x1 ones
        3.0-3.2 -> 2.8-2.9."""
        pixels = self.oh * self.ow
        return (not self.pixel_rows and self.images > 1 and pixels >= 32 and pixels % 32 != 0
                and self.images * self.c * self.h * self.w < 2 ** 31)

    @property
    def layout(self) -> int:
        """f32_gemm.c's `layout`: CONV_PER_IMAGE 0, CONV_JOINED 1, CONV_PIXEL_ROWS 2."""
        return 2 if self.pixel_rows else int(self.joined)

    def sizes(self) -> list[int]:
        """The C entry's convolution arguments (after M, N, K, kc)."""
        return [self.images, self.h, self.w, self.ow, self.kh, self.kw, *self.strides, *self.dilations, *self.pads,
                self.layout]


PIXEL_ROWS_MAX_PIXELS = 196  # an image's output pixels up to which pixel_rows_fit takes a convolution


def pixel_rows_fit(conv: ConvGeometry, filters: int) -> bool:
    """Whether the convolution entry runs `conv` with its output pixels as the product's rows
    (f32_gemm.c's pixel_rows_tile): a filter of several taps (a 1x1 one measured level) over an
    image of at most PIXEL_ROWS_MAX_PIXELS output pixels, whose 32-pixel panels would leave lanes
    empty, when the images are not joined (one image, or pixels a multiple of 32), and filters in
    whole 32-lane panels. ResNet-50's 3x3 layers at batch 1 alone, caches cold, 2 threads
    (tools/bench/conv_kernel_bench.c COLD=1, the tiles of KernelProduct._pixel_rows_tile): 7x7
    512 filters 1.48 -> 1.30 ms, 14x14 256 filters 1.25-1.30 -> 1.03."""
    pixels = conv.oh * conv.ow
    return (conv.kh * conv.kw > 1 and pixels <= PIXEL_ROWS_MAX_PIXELS and pixels % 32 != 0 and not conv.joined
            and filters % 32 == 0)


STREAMING_ROWS = 16  # up to this many rows a product's time is its weight's read (KernelProduct._streaming)


@dataclasses.dataclass(frozen=True)
class KernelProduct:
    """One kernel product: C[M, N] = A[M, K] x the packed weight (and its other inputs)."""

    kind: str  # "u8s8", "u8s8_amx" (s32 sums) | "u8s4" (f32, group-scaled sums) | "bf16_amx", "f32" (f32 sums)
    #            | "f32l": the weight on the left, C[M, N] = W[M, K] x B[K, N] (activations B, static)
    #            | "f32c": a convolution, C[img, M, N] = W[M, K] x columns of image img (see `conv`)
    m: int  # rows, or DYNAMIC
    n: int
    k: int
    group: int = 0  # u8s4: the group size along K
    epilogue: Optional[CEpilogue] = None  # f32l: the elementwise work after it, in its generated variant
    epilogue_shapes: tuple = ()  # the epilogue's input tensors' shapes
    out_shape: tuple = ()  # the result's shape with an epilogue (the [M, N] product reshaped)
    fused: tuple = ()  # the names of the ops the epilogue replaced (for the report)
    object_sha256: str = ""  # the generated variant's object (for the manifest)
    conv: Optional["ConvGeometry"] = None  # f32c: the convolution (M filters, N = OH OW, K = C KH KW)
    workers: int = 4  # the target's cores (f32c: one weight slice a worker at most; a few rows: one column tile each)
    l2_bytes: int = 1 << 20  # a core's L2 (f32c: a weight slice over half of it is split; f32: tile widths)
    out_n: int = 0  # f32: the result's own columns where the weight is padded to n (0: n)

    @property
    def symbol(self) -> str:
        rows = "D" if self.m == DYNAMIC else str(self.m)
        suffix = f"g{self.group}" if self.kind == "u8s4" else f"_e{self.epilogue.tag}" if self.epilogue else ""
        if self.conv is not None:
            return f"inferx_{self.kind}_{self.conv.tag}{suffix}"
        return f"inferx_{self.kind}_{rows}x{self.result_columns}x{self.k}{suffix}"

    @property
    def result_columns(self) -> int:
        """The result's columns: n, or out_n where the right entry stores fewer than its padded
        weight has (the last panel's padded lanes not stored: no copy cutting them after)."""
        return self.out_n or self.n

    @property
    def columns(self) -> int:
        """The columns the workgroups tile: N, or every image's N side by side (joined images)."""
        return self.n * self.conv.images if self.conv is not None and self.conv.joined else self.n

    @property
    def entry(self) -> str:
        """The C function (kernels/<kind>_gemm.c, or the generated variant)."""
        return self.epilogue.entry if self.epilogue else f"inferx_{self.kind}_tile"

    @property
    def result_shape(self) -> list:
        """The result's shape ("?" or -1 rows: dynamic)."""
        return list(self.out_shape) if self.out_shape else [self.m, self.result_columns]

    @property
    def source(self) -> str:
        return SOURCE_OF_KIND[self.kind]

    def tile(self) -> tuple[int, int]:
        """(rows, columns) a workgroup computes. VNNI kernels: 64 columns where N allows (else 32),
        up to 32 rows (in steps of their 8-row register tile). AMX: 128 or 64 columns where N
        allows (else 32), up to 128 rows in steps of 32 (its 32x32 accumulator block; a larger
        tile reads each operand tile for more products)."""
        if self.kind == "f32":
            return self._streaming() or self._f32_tile()
        if self.kind == "f32l":
            return self._f32l_tile()
        if self.kind == "f32c":
            return self._f32c_tile()
        streaming = self._streaming()
        if streaming:
            return streaming
        if self.kind in AMX_KINDS:
            columns = 128 if self.n % 128 == 0 else 64 if self.n % 64 == 0 else 32
            rows = 128 if self.m == DYNAMIC else min(128, -(-self.m // 32) * 32)
            return rows, columns
        columns = 64 if self.n % 64 == 0 else 32
        rows = 32 if self.m == DYNAMIC else min(32, -(-self.m // 8) * 8)
        return rows, columns

    def _streaming(self) -> Optional[tuple[int, int]]:
        """A product of at most STREAMING_ROWS static rows streams its weight from memory: one
        column tile a worker (all rows), each worker reading one long run of the packed weight.
        8x4096^2 f32 MLP at batch 1, 2 threads (tools/bench/dispatch_profile.py): 256-column
        tiles 21.1-23.0 ms a call, 128 24.8-25.2, one tile a worker (2048) 19.6-20.6."""
        if self.m == DYNAMIC or self.m > STREAMING_ROWS or self.workers <= 0:
            return None
        return self.m, kernel_columns(-(-self.n // self.workers))

    def _f32_tile(self) -> tuple[int, int]:
        """f32_gemm.c: up to 128 rows (the first row block of a tile reads the weight from
        memory, the others from L2: 128x4096x4096 on one Xeon core, 64-row tiles 120-126 GFLOP/s,
        128 rows 128-138); where the kernel packs the rows, the widest tiles `_packed_columns`
        allows; else 256 columns where N >= 1024, else 128 (a 128x768 product: 6 workgroups for
        the worker threads)."""
        rows = 128 if self.m == DYNAMIC else min(128, self.m)
        wide = self._packed_columns(rows) if _rows_packed(self.k) and self.m != DYNAMIC else None
        if wide:
            return rows, wide
        return rows, min(128, self.n) if self.n < 1024 else 256

    def _packed_columns(self, rows: int) -> Optional[int]:
        """Columns of a tile whose rows the kernel packs (their stride K puts them in few L1 sets):
        each packed row block serves every panel of its tile, so the widest tile (at most 24
        panels, and one K block of its panels in a quarter of an L2: the kernel fetches the next
        one beside it) that divides N evenly and leaves the workgroups a multiple of the workers
        or at least 4 a worker; None if no width from 160 columns up does. BERT-base's
        128x768x3072 product, 2 threads, weights cold (tools/bench/f32_kernel_bench.c): 128-column
        tiles 2.40 ms, 384 (one a worker) 2.18; at batch 8 18.2 / 16.6; the 8x4096^2 MLP at
        batch 64: 256 columns 76.3 ms, 512 73.2, 1024 75.2."""
        workers = max(1, self.workers)
        row_tiles, panels = -(-self.m // rows), -(-self.n // 32)
        fits = self.l2_bytes // 4 // (128 * f32_k_block(self.k))
        for per_tile in range(min(24, panels, fits), 4, -1):
            tiles = row_tiles * (panels // per_tile)
            if panels % per_tile == 0 and (tiles % workers == 0 or tiles >= 4 * workers):
                return 32 * per_tile
        return None

    def _f32l_tile(self) -> tuple[int, int]:
        """f32_gemm.c with the weight on the left: up to 126 weight rows (whole 14-row blocks of
        the packed weight, spread evenly over the row tiles: 128 rows as 70 + 58, not 126 + 2,
        whose second tile would copy every column panel for two rows); 256 columns (pixels)
        where N >= 1024, else N rounded up to the 32-column panel, at most 128 (the last panel
        masked)."""
        columns = 256 if self.n >= 1024 else min(128, kernel_columns(self.n))
        blocks = -(-self.m // F32_LEFT_ROWS)
        tiles = -(-blocks // 9)
        return F32_LEFT_ROWS * -(-blocks // tiles), columns

    def _f32c_tile(self) -> tuple[int, int]:
        """The convolution entry gathers each 32-column panel from the image once per row tile,
        which costs about one 14-row block's product: so as few row tiles as the weight allows.
        Rows: all of them, unless the packed weight is over half an L2 (then one slice a
        worker, at most `workers`, each slice's K blocks staying in its core's L2), at most 37
        blocks (518 rows) a tile. Columns (of all images where they are joined): all of them up
        to 8 panels, else as many as the kernel's held-panel buffer takes (F32_HELD_FLOATS: a
        row block's products run over all of them, writing its output rows along the row) where
        that still spreads the workgroups evenly over the workers, else 4 a tile. Tall tiles and
        wide held-panel tiles measured fastest on ResNet-50's layers (docs/levers/f32-kernel.md)."""
        if self.conv.pixel_rows:
            return self._pixel_rows_tile()
        blocks = -(-self.m // F32_LEFT_ROWS)
        weight = 4 * blocks * F32_LEFT_ROWS * self.k
        row_tiles = max(-(-blocks // 37), min(self.workers, -(-weight // (self.l2_bytes // 2))))
        panels = -(-self.columns // 32)
        per_tile = panels if panels <= 8 else self._held_panels(panels, row_tiles)
        return F32_LEFT_ROWS * -(-blocks // row_tiles), 32 * per_tile

    def _pixel_rows_tile(self) -> tuple[int, int]:
        """(filters, pixels) of a pixel-rows tile: all of the image's pixels (at batch 1 the weight
        comes from memory: each tile reads its filters' rows once), the filters split evenly over
        the workers in whole 32-filter panels, at most 256, the tile's sums within a held buffer
        (F32_HELD_FLOATS). ResNet-50's 3x3 layers alone with cold caches, 2 threads
        (tools/bench/conv_kernel_bench.c COLD=1): 7x7 512 filters, 256x49 tiles 1.30 ms, 256x25
        1.57-1.64, 128x49 1.40 (the column entry: 1.48); 14x14 256 filters, 128x196 1.03,
        256x49 1.09, 256x28 1.17-1.20 (the column entry: 1.25-1.30)."""
        filters = min(256, kernel_columns(-(-self.m // max(1, self.workers))))
        while filters > 32 and self.n * filters > F32_HELD_FLOATS:
            filters -= 32
        return filters, self.n

    def _held_panels(self, panels: int, row_tiles: int) -> int:
        """Panels a column tile takes: the most the held-panel buffer holds (at least 4) whose
        workgroups keep the workers at least 90% busy (rounds of `workers` tiles), else 4."""
        capacity = F32_HELD_FLOATS // (32 * f32_k_block(self.k))
        workers = max(1, self.workers)
        for per_tile in range(capacity, 4, -1):
            tiles = row_tiles * -(-panels // per_tile)
            if row_tiles * panels >= 0.9 * -(-tiles // workers) * workers * per_tile:
                return per_tile
        return 4

    def bindings(self) -> list[tuple[list, str]]:
        """(shape, element type) of the kernel's buffers in order: inputs, then the result; a
        shape entry "?" is the dynamic row count."""
        rows = "?" if self.m == DYNAMIC else self.m
        if self.kind in S32_KINDS:
            return [([rows, self.k], "i8"), ([self.n * self.k], "i8"), ([rows, self.n], "i32")]
        if self.kind == "bf16_amx":
            return [([rows, self.k], "bf16"), ([self.n * self.k], "bf16"), ([rows, self.n], "f32")]
        if self.kind == "f32":
            return [([rows, self.k], "f32"), ([self.n * self.k], "f32"), ([rows, self.result_columns], "f32")]
        if self.kind in ("f32l", "f32c"):
            packed = (self.m * self.k if self.conv is not None and self.conv.pixel_rows
                      else -(-self.m // F32_LEFT_ROWS) * F32_LEFT_ROWS * self.k)
            activations = list(self.conv.input_shape) if self.conv is not None else [self.k, self.n]
            return ([([packed], "f32"), (activations, "f32")] + [(list(s), "f32") for s in self.epilogue_shapes]
                    + [(self.result_shape, "f32")])
        return [([rows, self.k], "i8"), ([self.n * self.k // 2], "i8"), ([self.k // self.group, self.n], "f32"),
                ([rows, self.n], "f32")]

    def sizes(self) -> list[int]:
        """The C function's size arguments after M (then the tile follows)."""
        if self.kind == "f32":
            return [self.n, self.k, f32_k_block(self.k), self.result_columns]  # the last: ldc
        if self.kind in F32_KINDS:
            return [self.n, self.k, f32_k_block(self.k)] + (self.conv.sizes() if self.conv is not None else [])
        return [self.n, self.k] + ([self.group] if self.kind == "u8s4" else [])

    def flops(self) -> int:
        images = self.conv.images if self.conv is not None else 1
        return -1 if self.m == DYNAMIC else 2 * images * self.m * self.n * self.k


def _memref(shape: list, element: str) -> str:
    return "memref<" + "x".join(str(d) for d in shape) + f"x{element}>"


def _bound_pointers(bindings) -> tuple[list[str], list[str]]:
    """(lines, call arguments): each binding's subspan as a memref and its (base pointer, offset)."""
    body, call_args = [], []
    for i, (shape, element) in enumerate(bindings):
        memref = _memref(shape, element)
        dims = "{%rows}" if "?" in shape else ""
        results = ", ".join([f"%base{i}", f"%off{i}"] + [f"%size{i}_{d}" for d in range(len(shape))]
                            + [f"%stride{i}_{d}" for d in range(len(shape))])
        kinds = ", ".join([f"memref<{element}>"] + ["index"] * (1 + 2 * len(shape)))
        body.append(f"%mem{i} = stream.binding.subspan %b{i}[%c0] : !stream.binding -> {memref}{dims}")
        body.append(f"{results} = iree_codegen.extract_strided_metadata %mem{i} : {memref} -> {kinds}")
        call_args += [f"%base{i}", f"%off{i}"]
    return body, call_args


def _executable(p: KernelProduct, object_path: str) -> str:
    """The executable's text. Static rows: constants; dynamic rows: the row count is the
    dispatch's workload and its last operand (an index), and the row dims are `?`."""
    mt, nt = p.tile()
    dynamic = p.m == DYNAMIC
    bindings = p.bindings()
    pointer_args = ", ".join(f"memref<{e}>, index" for _, e in bindings)
    i64s = ", ".join(["i64"] * (1 + len(p.sizes()) + 4))
    args = ", ".join(f"%b{i}: !stream.binding" for i in range(len(bindings))) + (", %rows: index" if dynamic else "")
    body, call_args = _bound_pointers(bindings)
    if dynamic:
        workload = "%rows: index"
        y_count = [f"%cmt = arith.constant {mt} : index", "%y = arith.ceildivui %rows, %cmt : index"]
        body.append("%m = arith.index_cast %rows : index to i64")
    else:
        workload = ""
        y_count = [f"%y = arith.constant {-(-p.m // mt)} : index"]
        body.append(f"%m = arith.constant {p.m} : i64")
    for i, size in enumerate(p.sizes()):
        body.append(f"%size_arg{i} = arith.constant {size} : i64")
    body += [f"%mt = arith.constant {mt} : i64", f"%nt = arith.constant {nt} : i64",
             "%wxi = arith.index_cast %wx : index to i64", "%wyi = arith.index_cast %wy : index to i64",
             "%n0 = arith.muli %wxi, %nt : i64", "%m0 = arith.muli %wyi, %mt : i64"]
    call_args += ["%m"] + [f"%size_arg{i}" for i in range(len(p.sizes()))] + ["%m0", "%mt", "%n0", "%nt"]
    body.append(f"func.call @{p.entry}({', '.join(call_args)}) : ({pointer_args}, {i64s}) -> ()")
    indent = "\n      "
    counts = "\n    ".join(y_count)
    return f'''
stream.executable private @{p.symbol} attributes {{
  hal.executable.objects = #hal.executable.objects<{{
    {X86_64_OBJECT_TARGET} = [#hal.executable.object<{{path = "{object_path}"}}>]}}>
}} {{
  stream.executable.export public @{p.symbol} workgroups({workload}) -> (index, index, index) {{
    %x = arith.constant {-(-p.columns // nt)} : index
    {counts}
    %one = arith.constant 1 : index
    stream.return %x, %y, %one : index, index, index
  }}
  builtin.module {{
    func.func private @{p.entry}({pointer_args}, {i64s}) attributes {{hal.import.static, llvm.bareptr = true}}
    func.func @{p.symbol}({args}) {{
      %c0 = arith.constant 0 : index
      %wx = stream.dispatch.workgroup.id[0] : index
      %wy = stream.dispatch.workgroup.id[1] : index
      {indent.join(body)}
      return
    }}
  }}
}}
'''


def declare(module, product: KernelProduct, object_path: str) -> None:
    """Add the executable for `product` at the top of `module` (once per product)."""
    _declare_text(module, product.symbol, lambda: _executable(product, object_path),
                  lambda executable: _annotate_entry(executable, product))


def _declare_text(module, symbol: str, text, annotate) -> None:
    """Parse the executable `text()` and put it at the top of `module`, unless `symbol` is there;
    `annotate(executable)` first."""
    from iree.compiler import ir

    body = module.regions[0].blocks[0]
    if any(_symbol(op) == symbol for op in body.operations):
        return
    ctx = module.context
    for name in ("stream", "flow", "hal", "iree_codegen"):
        ctx.dialects[name]
    scratch = ir.Module.parse(text(), ctx)
    executable = scratch.body.operations[0]
    annotate(executable)
    first = body.operations[0] if len(body.operations) else None
    if first is not None:
        executable.move_before(first)
    else:
        body.append(executable)


def dispatch(product: KernelProduct, inputs: list, rows=None):
    """flow.dispatch of `product` at the current insertion point; returns C [M, N].
    `rows`: the row count as an index value (dynamic rows: the workload and last operand)."""
    from iree.compiler import ir
    from iree.compiler.dialects import flow

    ctx = ir.Context.current
    for name in ("hal", "flow"):
        ctx.dialects[name]
    element = ir.IntegerType.get_signless(32) if product.kind in S32_KINDS else ir.F32Type.get()
    dyn = ir.ShapedType.get_dynamic_size()
    result = ir.RankedTensorType.get([dyn if d == DYNAMIC else d for d in product.result_shape], element)
    entry = ir.ArrayAttr.get([ir.SymbolRefAttr.get([product.symbol, product.symbol])])
    if product.m == DYNAMIC:
        op = flow.DispatchOp([result], [rows], entry, list(inputs) + [rows], [rows], [rows])
    else:
        op = flow.DispatchOp([result], [], entry, list(inputs), [], [])
    return op.results[0]


def kernel_columns(n: int) -> int:
    """The kernels' column count for N output columns: a multiple of their 32-column tile (the
    weights are zero-padded at load, the extra columns cut from the result)."""
    return -(-n // 32) * 32


def _rows_packed(k: int) -> bool:
    """Whether f32_gemm.c's right entry packs its left rows (`rows_share_l1_sets`: K a multiple of
    16 whose rows repeat an L1 set within 4 rows, e.g. K = 3072 or 4096)."""
    if k % 16:
        return False
    return 64 // math.gcd(k // 16, 64) < 4


def kernel_product(module, kind: str, a, k: int, n: int, group: int, weight_operands, kernel_object: str,
                   workers: int = 0, l2_bytes: int = 0):
    """C[M, N] of our `kind` kernel for the left operand a [M, K] (u8 activations, or bf16 for
    AMX): declares its executable, dispatches it on `weight_operands(padded)` (the weights at the
    kernel's padded column count); the f32 kernel stores only the result's own n columns, the
    others' padded columns are cut after. Static or dynamic rows; `workers` the target's cores
    (0: unknown), `l2_bytes` a core's L2 (0: unknown)."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    padded = kernel_columns(n)
    static = a.type.has_static_shape
    extra = {"workers": workers} if workers else {}
    if l2_bytes:
        extra["l2_bytes"] = l2_bytes
    if kind == "f32" and padded != n:
        extra["out_n"] = n  # f32_gemm.c stores the result's own columns
    product = KernelProduct(kind, a.type.shape[0] if static else DYNAMIC, padded, k, group, **extra)
    declare(module, product, kernel_object)
    rows = None if static else tensor.dim(a, arith.constant(ir.IndexType.get(), 0))
    return _first_columns(dispatch(product, [a, *weight_operands(padded)], rows), n, rows)


def left_weight_product(module, w, packed, x, kernel_object, epilogue=None, plan=None, conv=None, target=None):
    """C[M, N] = w[M, K] x x[K, N] (f32, static shapes) on f32_gemm.c's left-weight entry
    (`inferx_f32l_tile`: w given `packed` in its row blocks, x's column panels copied per tile,
    any N; `kernel_object` the object's path); with a CEpilogue `epilogue` (`kernel_object` its
    variant's cpu_objects.KernelObject) for the matmul_epilogue `plan`, the value plan.result
    instead (computed from the plan's operands in the kernel). With a ConvGeometry `conv`, x is
    the convolution's input [images, C, H, W] and the result [images, M, OH, OW] (the
    convolution entry, `inferx_f32c_tile`: the columns gathered from x per tile; `target` the
    record whose cores and L2 size its tiles follow)."""
    m, k = w.type.shape
    extra = {}
    if conv is not None:
        extra = dict(conv=conv, out_shape=(conv.images, m, conv.oh, conv.ow))
        if target is not None:
            extra.update(workers=target.cores, l2_bytes=target.l2_bytes)
    if epilogue is not None:
        extra.update(epilogue=epilogue, epilogue_shapes=tuple(tuple(v.type.shape) for v in plan.operands),
                     out_shape=tuple(plan.result.type.shape), fused=tuple(plan.fused),
                     object_sha256=kernel_object.sha256)
        kernel_object = kernel_object.path
    n = conv.oh * conv.ow if conv is not None else x.type.shape[1]
    product = KernelProduct("f32c" if conv is not None else "f32l", m, n, k, **extra)
    declare(module, product, kernel_object)
    return dispatch(product, [packed, x] + (list(plan.operands) if epilogue is not None else []))


def _first_columns(value, n: int, rows):
    """value[:, :n] (rows: the row count, an index value, for dynamic rows)."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    if value.type.shape[1] == n:
        return value
    dyn = ir.ShapedType.get_dynamic_size()
    m = value.type.shape[0]
    result = ir.RankedTensorType.get([m, n], value.type.element_type)
    return tensor.ExtractSliceOp(result, value, [], [rows] if m == dyn else [], [], [0, 0], [m, n], [1, 1]).result


def _symbol(op) -> str:
    from iree.compiler import ir

    return ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else ""


DESCRIPTIONS = {"u8s8": ("inferx_u8s8 (C, AVX-512 VNNI)", "i8", "8x32 register tile, vpdpbusd"),
                "u8s4": ("inferx_u8s4 (C, AVX-512 VNNI)", "i4", "8x32 register tile, s4 widened in registers, "
                                                                   "vpdpbusd, f32 group scales"),
                "u8s8_amx": ("inferx_u8s8_amx (C, AMX)", "i8", "32x32 blocks in four AMX tiles, tdpbusd"),
                "bf16_amx": ("inferx_bf16_amx (C, AMX)", "bf16", "32x32 blocks in four AMX tiles, tdpbf16ps, "
                                                                  "f32 sums"),
                "f32": ("inferx_f32 (C, AVX-512)", "f32", "14x32 register tile, weight in 32-column panels "
                                                          "per K block, rows packed only where they share L1 sets"),
                "f32l": ("inferx_f32l (C, AVX-512)", "f32", "14x32 register tile, weight in 14-row blocks, "
                                                            "activation panels copied per tile"),
                "f32c": ("inferx_f32c (C, AVX-512)", "f32", "14x32 register tile, weight in 14-row blocks, "
                                                            "column panels gathered from the image per tile "
                                                            "(implicit im2col)"),
                "f32c_pixel_rows": ("inferx_f32c (C, AVX-512)", "f32", "pixel rows: 14 pixels x 32 filters a "
                                                                       "register tile, weight as W^T in 32-filter "
                                                                       "panels, pixels gathered from the image per "
                                                                       "row block, sums transposed at the end")}
# the pass that places each kind (else inferx-quantize-contractions)
PASS_OF_KIND = {"bf16_amx": "inferx-amx-matmul", "f32": "inferx-f32-matmul", "f32l": "inferx-f32-matmul",
                "f32c": "inferx-f32-matmul"}


def _annotate_entry(executable, p: KernelProduct) -> None:
    """The build report's rows for the kernel's dispatch, on its entry function
    (inferx-dispatch-report copies them: the executable has no linalg op to read; IREE 3.13 drops
    a stream.executable.export's attributes when it makes the hal.executable, and keeps a
    function's)."""
    from iree.compiler import ir

    from inferx_compiler.passes.infra.attributes import CONFIG_ATTR, REPORT_ATTR

    i64 = ir.IntegerType.get_signless(64)
    mt, nt = p.tile()
    root, element, how = DESCRIPTIONS["f32c_pixel_rows" if p.conv is not None and p.conv.pixel_rows else p.kind]
    report = ir.DictAttr.get({
        "root": ir.StringAttr.get(root), "kind": ir.StringAttr.get("contraction"),
        "element_type": ir.StringAttr.get(element), "loops": ir.DenseI64ArrayAttr.get([p.m, p.n, p.k]),
        "flops": ir.IntegerAttr.get(i64, p.flops()),
        "linalg_ops": ir.IntegerAttr.get(i64, 0),
        "fused": ir.ArrayAttr.get([ir.StringAttr.get(name) for name in p.fused]),
        **({"object_sha256": ir.StringAttr.get(p.object_sha256)} if p.object_sha256 else {})})
    config = ir.DictAttr.get({
        "source": ir.StringAttr.get(f"rule ({PASS_OF_KIND.get(p.kind, 'inferx-quantize-contractions')})"),
        "signature": ir.StringAttr.get(f"{p.kind} {'conv' if p.conv else 'matmul'} "
                                       f"{p.symbol[len('inferx_' + p.kind) + 1:]}"),
        "config": ir.StringAttr.get(f"workgroup tile {mt}x{nt}, {how}"),
        "candidates": ir.IntegerAttr.get(i64, 0)})
    entry = _entry_function(executable, p.symbol)
    entry.attributes[REPORT_ATTR] = report
    entry.attributes[CONFIG_ATTR] = config


# ----------------------------------------------------------------------------- row kernels
ROW_TILE_BYTES = 32 * 1024  # the rows a workgroup takes: about this many bytes of input
ROW_SOURCES = {"softmax": "softmax_rows.c", "maxpool": "maxpool_planes.c"}  # row kernel -> its C source


@dataclasses.dataclass(frozen=True)
class RowKernel:
    """A kernel over the rows of a static f32 [R, N] tensor, Y[r, :] = f(X[r, :]) with Y
    [R, out_n] (out_n 0: N): its C function `inferx_<name>_rows(x, x_offset, y, y_offset, R, N,
    r0, rt, *params)` computes rows [r0, r0 + rt). `variant` names what `params` set in the
    executable's symbol (one executable per distinct kernel)."""

    name: str  # "softmax": kernels/softmax_rows.c
    rows: int
    n: int
    root: str  # the report's root: what runs, on which unit
    how: str  # the report's configuration text
    out_n: int = 0
    params: tuple[int, ...] = ()  # trailing i64 arguments of the C function
    variant: str = ""
    flops: int = 0  # the report's operation count (0: not a product)

    @property
    def symbol(self) -> str:
        return f"inferx_{self.name}_{self.rows}x{self.n}" + (f"_{self.variant}" if self.variant else "")

    @property
    def entry(self) -> str:
        return f"inferx_{self.name}_rows"

    @property
    def columns_out(self) -> int:
        return self.out_n or self.n

    def tile_rows(self) -> int:
        return max(1, min(self.rows, ROW_TILE_BYTES // (4 * self.n)))


def _rows_executable(k: RowKernel, object_path: str) -> str:
    rt = k.tile_rows()
    body, call_args = _bound_pointers([([k.rows, k.n], "f32"), ([k.rows, k.columns_out], "f32")])
    body += [f"%rows = arith.constant {k.rows} : i64", f"%n = arith.constant {k.n} : i64",
             f"%rt = arith.constant {rt} : i64", "%wxi = arith.index_cast %wx : index to i64",
             "%r0 = arith.muli %wxi, %rt : i64"]
    body += [f"%param{i} = arith.constant {v} : i64" for i, v in enumerate(k.params)]
    params = [f"%param{i}" for i in range(len(k.params))]
    signature = ", ".join(["memref<f32>", "index", "memref<f32>", "index"] + ["i64"] * (4 + len(k.params)))
    body.append(f"func.call @{k.entry}({', '.join(call_args + ['%rows', '%n', '%r0', '%rt'] + params)}) : "
                f"({signature}) -> ()")
    indent = "\n      "
    return f'''
stream.executable private @{k.symbol} attributes {{
  hal.executable.objects = #hal.executable.objects<{{
    {X86_64_OBJECT_TARGET} = [#hal.executable.object<{{path = "{object_path}"}}>]}}>
}} {{
  stream.executable.export public @{k.symbol} workgroups() -> (index, index, index) {{
    %x = arith.constant {-(-k.rows // rt)} : index
    %one = arith.constant 1 : index
    stream.return %x, %one, %one : index, index, index
  }}
  builtin.module {{
    func.func private @{k.entry}({signature}) attributes {{hal.import.static, llvm.bareptr = true}}
    func.func @{k.symbol}(%b0: !stream.binding, %b1: !stream.binding) {{
      %c0 = arith.constant 0 : index
      %wx = stream.dispatch.workgroup.id[0] : index
      {indent.join(body)}
      return
    }}
  }}
}}
'''


def row_kernel_object(pass_name: str, name: str, ops: list, what: str) -> Optional[str]:
    """The path of row kernel `name`'s object (ROW_SOURCES), built on first use; None when the
    build machine cannot build it, after a remark on each of `ops` ("`what` left to IREE: why")."""
    from inferx_compiler.kernels import cpu_objects
    from inferx_compiler.passes.analysis.remarks import remark

    try:
        return cpu_objects.build(ROW_SOURCES[name]).path
    except cpu_objects.KernelBuildError as e:
        for op in ops:
            remark(pass_name, op, f"{what} left to IREE: {e}")
        return None


def row_kernel(module, kernel: RowKernel, x, object_path: str, pass_name: str):
    """Y = kernel(x) for x f32 [kernel.rows, kernel.n] at the current insertion point: declares
    the kernel's executable in `module` (once per shape) and dispatches it."""
    from iree.compiler import ir
    from iree.compiler.dialects import flow

    _declare_text(module, kernel.symbol, lambda: _rows_executable(kernel, object_path),
                  lambda executable: _annotate_rows(executable, kernel, pass_name))
    entry = ir.ArrayAttr.get([ir.SymbolRefAttr.get([kernel.symbol, kernel.symbol])])
    result = ir.RankedTensorType.get([kernel.rows, kernel.columns_out], x.type.element_type)
    return flow.DispatchOp([result], [], entry, [x], [], []).results[0]


def _annotate_rows(executable, k: RowKernel, pass_name: str) -> None:
    from iree.compiler import ir

    from inferx_compiler.passes.infra.attributes import CONFIG_ATTR, REPORT_ATTR

    i64 = ir.IntegerType.get_signless(64)
    entry = _entry_function(executable, k.symbol)
    entry.attributes[REPORT_ATTR] = ir.DictAttr.get({
        "root": ir.StringAttr.get(k.root), "kind": ir.StringAttr.get(k.name),
        "element_type": ir.StringAttr.get("f32"), "loops": ir.DenseI64ArrayAttr.get([k.rows, k.n]),
        "flops": ir.IntegerAttr.get(i64, k.flops), "linalg_ops": ir.IntegerAttr.get(i64, 0),
        "fused": ir.ArrayAttr.get([])})
    entry.attributes[CONFIG_ATTR] = ir.DictAttr.get({
        "source": ir.StringAttr.get(f"rule ({pass_name})"), "signature": ir.StringAttr.get(f"{k.name} rows {k.rows}x{k.n}"
                                                                       + (f" {k.variant}" if k.variant else "")),
        "config": ir.StringAttr.get(f"{k.tile_rows()} rows a workgroup, {k.how}"),
        "candidates": ir.IntegerAttr.get(i64, 0)})


def _entry_function(executable, symbol: str):
    inner = [op for op in executable.regions[0].blocks[0].operations if op.name == "builtin.module"][0]
    return [op for op in inner.regions[0].blocks[0].operations if _symbol(op) == symbol][0]
