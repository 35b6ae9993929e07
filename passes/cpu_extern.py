"""Dispatching to our own C kernels on CPU targets (IREE 3.13's llvm-cpu backend).

A kernel object (inferx_compiler/kernels/cpu_objects.py) is linked into the executable of a
`stream.executable` that names it in `hal.executable.objects`; the executable's function reads
its bindings as memrefs, takes their base pointers (`llvm.bareptr`) and calls the kernel's C
function once per workgroup with its tile:

    stream.executable private @inferx_u8s8_128x3072x768 attributes {hal.executable.objects = ...} {
      stream.executable.export public @{shape.symbol} workgroups() -> (index, index, index) { N/nt, ceil(M/mt), 1 }
      builtin.module {
        func.func private @inferx_u8s8_tile(memref<i8>, index, memref<i8>, index, memref<i32>, index,
                                            i64 x 7) attributes {hal.import.static, llvm.bareptr = true}
        func.func @{shape.symbol}(%a: !stream.binding, %b: !stream.binding, %c: !stream.binding) { ... call ... }
      }
    }
    %acc = flow.dispatch @inferx_u8s8_128x3072x768::@inferx_u8s8_128x3072x768(%a_u8, %b_packed) : (...) -> tensor<128x3072xi32>

One executable per distinct shape, shared by every product of that shape (dynamic rows: the row
count is the dispatch's workload and an operand, `inferx_u8s8_Dx3072x768`);
its entry carries the shape in its name too (IREE links the executables of a model into one,
whose entry points must differ).
The executable is written as text and parsed (its ops are IREE's stream/codegen ops, whose
Python builders 3.13 does not expose) into a scratch module, then moved into the model.
"""

from __future__ import annotations

import dataclasses

# Objects are keyed by the generic llvm-cpu x86-64 target: IREE picks them for whichever x86-64
# CPU target the build uses (as for the generic CUDA target of the Hopper kernels).
X86_64_OBJECT_TARGET = '#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">'
U8S8_ENTRY = "inferx_u8s8_tile"


DYNAMIC = -1  # U8S8Shape.m of a product whose rows are known only at run time


@dataclasses.dataclass(frozen=True)
class U8S8Shape:
    m: int  # rows, or DYNAMIC
    n: int
    k: int

    @property
    def symbol(self) -> str:
        rows = "D" if self.m == DYNAMIC else str(self.m)
        return f"inferx_u8s8_{rows}x{self.n}x{self.k}"

    def tile(self) -> tuple[int, int]:
        """(rows, columns) a workgroup computes: 64 columns where N allows (else 32), up to 32 rows."""
        columns = 64 if self.n % 64 == 0 else 32
        rows = 32 if self.m == DYNAMIC else min(32, -(-self.m // 8) * 8)
        return rows, columns


def _u8s8_executable(shape: U8S8Shape, object_path: str) -> str:
    """The executable's text. Static rows: constants; dynamic rows: the row count is the
    dispatch's workload and its last operand (an index), and the A and C memrefs are `?` rows."""
    n, k = shape.n, shape.k
    mt, nt = shape.tile()
    i64s = ", ".join(["i64"] * 7)
    dynamic = shape.m == DYNAMIC
    rows = "?" if dynamic else str(shape.m)
    dims = "{%rows}" if dynamic else ""
    if dynamic:
        workload, row_arg = "%rows: index", ", %rows: index"
        y_count = f"%cmt = arith.constant {mt} : index\n    %y = arith.ceildivui %rows, %cmt : index"
        m_value = "%m = arith.index_cast %rows : index to i64"
    else:
        workload, row_arg = "", ""
        y_count = f"%y = arith.constant {-(-shape.m // mt)} : index"
        m_value = f"%m = arith.constant {shape.m} : i64"
    return f'''
stream.executable private @{shape.symbol} attributes {{
  hal.executable.objects = #hal.executable.objects<{{
    {X86_64_OBJECT_TARGET} = [#hal.executable.object<{{path = "{object_path}"}}>]}}>
}} {{
  stream.executable.export public @{shape.symbol} workgroups({workload}) -> (index, index, index) {{
    %x = arith.constant {n // nt} : index
    {y_count}
    %one = arith.constant 1 : index
    stream.return %x, %y, %one : index, index, index
  }}
  builtin.module {{
    func.func private @{U8S8_ENTRY}(memref<i8>, index, memref<i8>, index, memref<i32>, index, {i64s})
        attributes {{hal.import.static, llvm.bareptr = true}}
    func.func @{shape.symbol}(%a: !stream.binding, %b: !stream.binding, %c: !stream.binding{row_arg}) {{
      %c0 = arith.constant 0 : index
      %wx = stream.dispatch.workgroup.id[0] : index
      %wy = stream.dispatch.workgroup.id[1] : index
      %am = stream.binding.subspan %a[%c0] : !stream.binding -> memref<{rows}x{k}xi8>{dims}
      %bm = stream.binding.subspan %b[%c0] : !stream.binding -> memref<{n * k}xi8>
      %cm = stream.binding.subspan %c[%c0] : !stream.binding -> memref<{rows}x{n}xi32>{dims}
      %ab, %ao, %as:2, %ast:2 = iree_codegen.extract_strided_metadata %am
          : memref<{rows}x{k}xi8> -> memref<i8>, index, index, index, index, index
      %bb, %bo, %bs, %bst = iree_codegen.extract_strided_metadata %bm
          : memref<{n * k}xi8> -> memref<i8>, index, index, index
      %cb, %co, %cs:2, %cst:2 = iree_codegen.extract_strided_metadata %cm
          : memref<{rows}x{n}xi32> -> memref<i32>, index, index, index, index, index
      {m_value}
      %n = arith.constant {n} : i64
      %k = arith.constant {k} : i64
      %mt = arith.constant {mt} : i64
      %nt = arith.constant {nt} : i64
      %wxi = arith.index_cast %wx : index to i64
      %wyi = arith.index_cast %wy : index to i64
      %n0 = arith.muli %wxi, %nt : i64
      %m0 = arith.muli %wyi, %mt : i64
      func.call @{U8S8_ENTRY}(%ab, %ao, %bb, %bo, %cb, %co, %m, %n, %k, %m0, %mt, %n0, %nt)
          : (memref<i8>, index, memref<i8>, index, memref<i32>, index, {i64s}) -> ()
      return
    }}
  }}
}}
'''


def declare_u8s8(module, shape: U8S8Shape, object_path: str) -> None:
    """Add the executable for `shape` at the top of `module` (once per shape)."""
    from iree.compiler import ir

    body = module.regions[0].blocks[0]
    if any(_symbol(op) == shape.symbol for op in body.operations):
        return
    ctx = module.context
    for name in ("stream", "flow", "hal", "iree_codegen"):
        ctx.dialects[name]
    scratch = ir.Module.parse(_u8s8_executable(shape, object_path), ctx)
    executable = scratch.body.operations[0]
    _annotate_export(executable, shape)
    first = body.operations[0] if len(body.operations) else None
    if first is not None:
        executable.move_before(first)
    else:
        body.append(executable)


def dispatch_u8s8(shape: U8S8Shape, a_u8, b_packed, rows=None):
    """flow.dispatch of the u8 x s8 product at the current insertion point: s32 [M, N].
    `rows`: the row count as an index value (dynamic rows: the workload and last operand)."""
    from iree.compiler import ir
    from iree.compiler.dialects import flow

    ctx = ir.Context.current
    for name in ("hal", "flow"):
        ctx.dialects[name]
    result = ir.RankedTensorType.get([shape.m if shape.m != DYNAMIC else ir.ShapedType.get_dynamic_size(),
                                      shape.n], ir.IntegerType.get_signless(32))
    entry = ir.ArrayAttr.get([ir.SymbolRefAttr.get([shape.symbol, shape.symbol])])
    if shape.m == DYNAMIC:
        op = flow.DispatchOp([result], [rows], entry, [a_u8, b_packed, rows], [rows], [rows])
    else:
        op = flow.DispatchOp([result], [], entry, [a_u8, b_packed], [], [])
    return op.results[0]


def _symbol(op) -> str:
    attr = op.attributes["sym_name"] if "sym_name" in op.attributes else None
    from iree.compiler import ir

    return ir.StringAttr(attr).value if attr is not None else ""


def _annotate_export(executable, shape: U8S8Shape) -> None:
    """The build report's rows for the kernel's dispatch (inferx-dispatch-report copies them from
    the entry function: the executable has no linalg op to read)."""
    from iree.compiler import ir

    from .dispatch_config import CONFIG_ATTR
    from .dispatch_report import REPORT_ATTR

    i64 = ir.IntegerType.get_signless(64)
    mt, nt = shape.tile()
    report = ir.DictAttr.get({
        "root": ir.StringAttr.get("inferx_u8s8 (C, AVX-512 VNNI)"), "kind": ir.StringAttr.get("contraction"),
        "element_type": ir.StringAttr.get("i8"), "loops": ir.DenseI64ArrayAttr.get([shape.m, shape.n, shape.k]),
        "flops": ir.IntegerAttr.get(i64, -1 if shape.m == DYNAMIC else 2 * shape.m * shape.n * shape.k),
        "linalg_ops": ir.IntegerAttr.get(i64, 0), "fused": ir.ArrayAttr.get([])})
    config = ir.DictAttr.get({
        "source": ir.StringAttr.get("rule (inferx-quantize-contractions)"),
        "signature": ir.StringAttr.get(f"u8s8 matmul {shape.symbol.rsplit('_', 1)[1]}"),
        "config": ir.StringAttr.get(f"workgroup tile {mt}x{nt}, 8x32 register tile, vpdpbusd"),
        "candidates": ir.IntegerAttr.get(i64, 0)})
    # on the entry function: IREE 3.13 drops a stream.executable.export's attributes when it
    # makes the hal.executable, and keeps a function's
    inner = [op for op in executable.regions[0].blocks[0].operations if op.name == "builtin.module"][0]
    entry = [op for op in inner.regions[0].blocks[0].operations if _symbol(op) == shape.symbol][0]
    entry.attributes[REPORT_ATTR] = report
    entry.attributes[CONFIG_ATTR] = config
