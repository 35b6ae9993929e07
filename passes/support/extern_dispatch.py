"""Declaring a kernel compiled outside IREE and dispatching to it (IREE 3.13's HAL/Flow ops).

    hal.executable.source private @name <objects = <{#hal.executable.target<"cuda",
        "cuda-nvptx-fb"> = [#hal.executable.object<{data = dense<PTX bytes>}>]}>> {
      hal.executable.export public @entry ordinal(0) layout(...) count(%device) -> (x, y, z) {...}
          <workgroup_size = [threads, 1, 1], workgroup_local_memory = bytes>
    }
    %r:N = flow.dispatch @name::@entry(%args...) : (...) -> (...)

The PTX is embedded in the IR (the path is only a name), so the module stays self-contained
through bytecode, child-process builds and reproducers. The object is keyed by the generic CUDA target, which
IREE matches against whichever CUDA target the build uses. IREE's CUDA HAL passes the bindings,
in order (operands, then results), as the kernel's pointer parameters, and gives the kernel
`workgroup_local_memory` bytes of dynamic shared memory (above 48 KiB too: it raises the limit).
The custom assembly of these ops takes no attribute dictionary in 3.13 (strict properties), so
they are built with the Python op builders, never parsed from text.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ExternalKernel:
    name: str  # the executable's symbol (unique in the module)
    entry: str  # the kernel's entry point in the object
    ptx: bytes
    grid: tuple[int, int, int]
    threads: int
    shared_bytes: int
    read_only: int  # leading bindings the kernel only reads (the dispatch's operands)
    written: int  # bindings after those, which it writes (the dispatch's results)
    # attributes for the export (name -> {key: str | int | list[int] | list[str]}): the build
    # report's rows for this dispatch (dispatch_report copies them to the executable, since the
    # export is what survives IREE's outlining)
    annotations: tuple = ()
    # sizes of the written bindings after the kernel's own outputs (Triton's global and profile
    # scratch: TMA descriptors live in the global one), in bytes
    scratch_bytes: tuple = ()


def declare(module, kernel: ExternalKernel) -> None:
    """Add `kernel`'s hal.executable.source at the top of `module` (a builtin.module operation)."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, hal

    ctx = module.context
    _load_dialects(ctx)
    # The path only names the object: IREE reads `data` when it is there. (3.13 prints an object
    # without a path as `<{, data = ...}>`, which does not parse back.)
    data = f'dense<"0x{kernel.ptx.hex().upper()}"> : vector<{len(kernel.ptx)}xi8>'
    objects = ir.Attribute.parse(f'#hal.executable.objects<{{#hal.executable.target<"cuda", "cuda-nvptx-fb"> = '
                                 f'[#hal.executable.object<{{path = "{kernel.name}.ptx", data = {data}}}>]}}>', ctx)
    bindings = ", ".join(["#hal.pipeline.binding<storage_buffer, ReadOnly>"] * kernel.read_only
                         + ["#hal.pipeline.binding<storage_buffer>"] * kernel.written)
    layout = ir.Attribute.parse(f"#hal.pipeline.layout<bindings = [{bindings}]>", ctx)
    index = ir.IndexType.get(ctx)
    body = module.regions[0].blocks[0]
    with ir.Location.unknown(ctx):
        first = body.operations[0] if len(body.operations) else None
        ip = ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(body)
        source = hal.ExecutableSourceOp(kernel.name, sym_visibility="private", objects=objects, ip=ip)
        source_block = source.body.blocks.append()
        with ir.InsertionPoint(source_block):
            export = hal.ExecutableExportOp(
                kernel.entry, layout, sym_visibility="public", ordinal=ir.IntegerAttr.get(index, 0),
                workgroup_size=ir.ArrayAttr.get([ir.IntegerAttr.get(index, v) for v in (kernel.threads, 1, 1)]),
                workgroup_local_memory=ir.IntegerAttr.get(index, kernel.shared_bytes))
            for name, fields in kernel.annotations:
                export.attributes[name] = _dict_attr(fields)
            count = export.workgroup_count.blocks.append(ir.Type.parse("!hal.device", ctx))
            with ir.InsertionPoint(count):
                sizes = [arith.constant(index, v) for v in kernel.grid]
                hal.ReturnOp(sizes)
            hal.ExecutableSourceEndOp()


def is_declared(module, name: str) -> bool:
    """Whether `module` holds a top-level symbol `name` (a kernel declared before)."""
    from iree.compiler import ir

    for op in module.regions[0].blocks[0].operations:
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return True
    return False


def dispatch(kernel: ExternalKernel, arguments: list, result_types: list) -> list:
    """flow.dispatch to `kernel` at the current insertion point; returns its results."""
    from iree.compiler import ir
    from iree.compiler.dialects import flow

    if (len(arguments), len(result_types)) != (kernel.read_only, kernel.written):
        raise ValueError(f"{kernel.name}: {len(arguments)} operands and {len(result_types)} results for a "
                         f"layout of {kernel.read_only} read and {kernel.written} written bindings")
    _load_dialects(ir.Context.current)
    entry = ir.SymbolRefAttr.get([kernel.name, kernel.entry])
    op = flow.DispatchOp(result_types, [], ir.ArrayAttr.get([entry]), arguments, [], [])
    return list(op.results)


def replace_product(matmul, kernel: ExternalKernel, arguments: list, split: int, init, plan=None) -> None:
    """Replace `matmul` (an [M, N] product) by a flow.dispatch to `kernel` with `arguments`: with
    an epilogue plan (matmul_epilogue.EpiloguePlan) the dispatch, after the plan's last op, also
    reads plan.operands and yields the value the plan's ops computed, and those ops go; without
    one it yields [split, M, N] f32 slices, summed into `init` when split > 1 (a linalg
    reduction, which takes what follows). Triton's scratch results are left unused. Call within
    the matmul's location (the fused dispatch takes the last fused op's)."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    from inferx_compiler.passes.split_reduction import sum_slices

    if plan is not None:
        last = plan.ops[-1] if plan.ops else matmul
        with ir.InsertionPoint(last), last.location:
            result = dispatch(kernel, arguments + plan.operands, [plan.result.type] + scratch_types(kernel, 1))[0]
        plan.replace(matmul, result)
        return
    m, n = init.type.shape
    with ir.InsertionPoint(matmul):
        partial_t = ir.RankedTensorType.get([split, m, n], ir.F32Type.get())
        partial = dispatch(kernel, arguments, [partial_t] + scratch_types(kernel, 1))[0]
        if split == 1:
            out = tensor.CollapseShapeOp(init.type, partial, [[0, 1], [2]]).result
        else:
            out = sum_slices(partial, init)
    matmul.results[0].replace_all_uses_with(out)
    matmul.erase()


def scratch_types(kernel: ExternalKernel, outputs: int) -> list:
    """The types of the kernel's written bindings after its `outputs` results: byte tensors as
    large as Triton's launch would allocate (16 bytes when unused)."""
    from iree.compiler import ir

    sizes = list(kernel.scratch_bytes) or [16] * (kernel.written - outputs)
    return [ir.RankedTensorType.get([size], ir.IntegerType.get_signless(8)) for size in sizes]


def _dict_attr(fields: dict):
    from iree.compiler import ir

    def attr(v):
        if isinstance(v, str):
            return ir.StringAttr.get(v)
        if isinstance(v, int):
            return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)
        if v and all(isinstance(x, int) for x in v):
            return ir.DenseI64ArrayAttr.get(list(v))
        return ir.ArrayAttr.get([attr(x) for x in v])

    return ir.DictAttr.get({k: attr(v) for k, v in fields.items()})


def _load_dialects(ctx) -> None:
    """Load hal and flow into the context before building their ops: an op built while its
    dialect is not loaded keeps its inherent attributes as plain attributes (not properties),
    prints the same, and then fails IREE's passes in process ("'flow.dispatch.region' op
    expected 2 regions")."""
    for name in ("hal", "flow"):
        ctx.dialects[name]
