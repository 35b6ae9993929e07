"""inferx-add-output-entry: a second entry point that writes results into caller buffers.

For each public function whose results are all ranked tensors, adds

    func.func @main$into(%x, %out0 {iree.abi.output = 0 : index}, ...) -> (results) {
      %r = call @main(%x) ; return %r
    }

Why: through `@main` the IREE module allocates fresh result buffers on every call (and on a
GPU the runtime then copies them to the host). Through `@main$into` IREE aliases result i
onto the buffer the caller passes as `%out_i`, so a serving session allocates its output
buffers once per batch bucket, host-visible, and reuses them. `@main` stays unchanged
(upstream `iree-run-module` keeps working). IREE inlines the call; identical dispatches are
deduplicated, so the code is compiled once.

With `transients=true` (CPU targets) the entry of a static-shape function also takes the storage for the call's
intermediate tensors as a last argument, `%transients: !hal.buffer`, and each result becomes
`hal.tensor.transients %r from %transients`: IREE then places every transient allocation of
the call in that buffer, whose size it reports per function (reflection
`iree.abi.transients.size[.constant]`), and the runtime allocates it once. Without it, IREE's
CPU device mallocs the transients on every call; past glibc's mmap threshold (32 MiB at
most) that is a fresh mapping, every page of it faulted in and zeroed again on each call
(ResNet-50 at batch 8: a 78 MB mapping, 19,000 page faults a call). Functions with dynamic
dims keep the plain entry: IREE 3.13 fails on GPT-2's and BERT's with their transients
emplaced ("explicit execution regions must only contain explicit ops").
"""

from __future__ import annotations

from typing import ClassVar, Optional

import dataclasses

from inferx_compiler.passes.infra.base import ModulePass, PassFailure
from inferx_compiler.passes.analysis.func_util import arg_attrs, public_functions

SUFFIX = "$into"
OUTPUT_ATTR = "iree.abi.output"
TRANSIENTS_ATTR = "inferx.transients"  # marks the entry's storage argument (the runtime passes a buffer)


@dataclasses.dataclass(frozen=True)
class AddOutputEntry(ModulePass):
    """Adds `@F$into` beside each public function: results written into caller-provided storage."""

    name: ClassVar[str] = "inferx-add-output-entry"
    level: ClassVar[str] = "iree"
    summary: ClassVar[str] = "add @F$into: @F with caller-provided result storage (iree.abi.output)"
    transients: bool = False  # the entry also takes the call's transient storage (a !hal.buffer)

    @classmethod
    def for_build(cls, build) -> "Optional[AddOutputEntry]":
        if build.source == "llm":  # generation entries write their one big result, the cache, in place already
            return None
        # CPU: the entry also takes the call's transient storage (allocated once by the session)
        return cls(transients=build.target.backend == "llvm-cpu" and build.transients)

    def run(self, module) -> None:
        from iree.compiler import ir

        body = module.regions[0].blocks[0]
        symbols = {ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
                   for op in body.operations if "sym_name" in op.operation.attributes}
        for func_op in public_functions(module):
            name = ir.StringAttr(func_op.attributes["sym_name"]).value
            if name.endswith(SUFFIX):
                continue
            ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
            if not ftype.results or not all(isinstance(t, ir.RankedTensorType) for t in ftype.results):
                continue  # nothing to store, or a result IREE cannot alias (not a tensor)
            existing = symbols.get(name + SUFFIX)
            if existing is not None:
                if _is_output_entry(existing):
                    continue  # added before
                raise PassFailure(f"cannot add '{name}{SUFFIX}': the module already has a symbol of "
                                  f"that name", func_op)
            static = all(ir.ShapedType(t).has_static_shape for t in list(ftype.inputs) + list(ftype.results)
                         if isinstance(t, ir.ShapedType))
            _add_entry(module, func_op, name, ftype, self.transients and static)


def _is_output_entry(op) -> bool:
    return op.name == "func.func" and any(OUTPUT_ATTR in d for d in arg_attrs(op))


def _add_entry(module, func_op, name: str, ftype, transients: bool) -> None:
    from iree.compiler import ir
    from iree.compiler.dialects import func

    inputs, results = list(ftype.inputs), list(ftype.results)
    index = ir.IndexType.get(module.context)
    with module.context, func_op.location:
        module.context.dialects["hal"]
        storage = [ir.Type.parse("!hal.buffer")] if transients else []
        body = module.regions[0].blocks[0]
        with ir.InsertionPoint(body):
            entry_fn = func.FuncOp(name + SUFFIX, ir.FunctionType.get(inputs + results + storage, results))
            attrs = arg_attrs(func_op) or [ir.DictAttr.get({}) for _ in inputs]  # inputs keep theirs
            attrs += [ir.DictAttr.get({OUTPUT_ATTR: ir.IntegerAttr.get(index, i)}) for i in range(len(results))]
            attrs += [ir.DictAttr.get({TRANSIENTS_ATTR: ir.UnitAttr.get()}) for _ in storage]
            entry_fn.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)
            block = entry_fn.add_entry_block()
        with ir.InsertionPoint(block):
            call = func.CallOp(results, name, list(block.arguments)[:len(inputs)])
            values = list(call.results)
            if transients:
                values = [_in_transients(v, block.arguments[len(block.arguments) - 1]) for v in values]
            func.ReturnOp(values)


def _in_transients(value, storage):
    """`hal.tensor.transients %value from %storage` (with the value's dynamic dims)."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, tensor

    shaped = ir.RankedTensorType(value.type)
    dims = [tensor.DimOp(value, arith.ConstantOp(ir.IndexType.get(), i).result).result
            for i in range(shaped.rank) if shaped.is_dynamic_dim(i)]
    return ir.Operation.create("hal.tensor.transients", results=[value.type],
                               operands=[value, *dims, storage]).result
