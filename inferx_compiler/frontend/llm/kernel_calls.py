"""Our kernels' ops from torch-mlir's FX import to IREE's context, as calls.

torch.export keeps `inferx::paged_decode_attention` and `inferx::paged_prefill_attention`
(frontend/llm/paged_attention.py) as one node each, and torch-mlir's FX importer writes them as

    %r = torch.operator "torch.inferx.paged_decode_attention"(%q, %k, %v, %cache, %table, %start,
                                                              %layer, %splits, %window)

which torch-mlir's linalg pipeline cannot lower. `to_calls`, run before that pipeline, replaces
each by a call of a private declaration on builtin tensors:

    func.func private @inferx_paged_decode_attention_0(tensor<..>, ...) -> tensor<BxHxDxf16>
        attributes {inferx.kernel = "paged_decode_attention", inferx.splits = S, inferx.window = W}
    %r = call @inferx_paged_decode_attention_0(...)

(one declaration a signature; the integer operands become the declaration's attributes; the
prefill op's kernel is "paged_prefill_attention", with a window only), bridged with torch_c's
conversions, which the pipeline folds away. passes/paged_attention.py replaces each call by the kernel's dispatch in
IREE's context. `lower` runs the pipeline without its backend-contract check, which rejects
calls, and checks instead that no torch op is left.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferx_compiler.errors import ModelLoadError
from inferx_compiler.frontend.llm.paged_attention import PREFILL_TORCH_OPERATOR, TORCH_OPERATOR

KERNEL_ATTR = "inferx.kernel"
WINDOW_ATTR = "inferx.window"
SPLITS_ATTR = "inferx.splits"


@dataclass(frozen=True)
class KernelOp:
    kernel: str  # the declaration's inferx.kernel (passes/paged_attention.py reads it)
    tensors: int  # leading tensor operands (q, k_new, v_new, cache, table, start, layer)
    integers: tuple  # the attributes the trailing !torch.int operands become, in order


KERNEL_OPS = {TORCH_OPERATOR: KernelOp("paged_decode_attention", 7, (SPLITS_ATTR, WINDOW_ATTR)),
              PREFILL_TORCH_OPERATOR: KernelOp("paged_prefill_attention", 7, (WINDOW_ATTR,))}


def operators(module_op) -> list:
    """The module's torch.operator ops of our kernels."""
    from torch_mlir import ir

    found = []

    def visit(op):
        if op.name == "torch.operator" and ir.StringAttr(op.attributes["name"]).value in KERNEL_OPS:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    return found


def to_calls(module_op) -> int:
    """Each kernel op -> a call of its declaration; returns how many."""
    from torch_mlir import ir

    from inferx_compiler.internals import load_torch_conversion

    ops = operators(module_op)
    if not ops:
        return 0
    load_torch_conversion(module_op.context)
    declared: dict[tuple, str] = {}
    with module_op.context:
        for op in ops:
            _replace(module_op, op, declared)
    return len(ops)


def _replace(module_op, op, declared: dict) -> None:
    from torch_mlir import ir
    from torch_mlir.dialects import func

    from inferx_compiler.internals import builtin_tensor_type

    kind = KERNEL_OPS[ir.StringAttr(op.attributes["name"]).value]
    operands = list(op.operands)
    integers = tuple((name, _int_constant(v, op)) for name, v in zip(kind.integers, operands[kind.tensors:]))
    with ir.InsertionPoint(op), op.location:
        inputs = [ir.Operation.create("torch_c.to_builtin_tensor", results=[builtin_tensor_type(v.type)],
                                      operands=[v]).result for v in operands[:kind.tensors]]
        results = [builtin_tensor_type(r.type) for r in op.results]
        function_type = ir.FunctionType.get([v.type for v in inputs], results)
        key = (kind.kernel, str(function_type), integers)
        if key not in declared:
            declared[key] = _declare(module_op, f"inferx_{kind.kernel}_{len(declared)}", function_type, kind.kernel,
                                     integers)
        call = func.CallOp(results, ir.FlatSymbolRefAttr.get(declared[key]), inputs)
        for old, new in zip(list(op.results), list(call.results)):
            back = ir.Operation.create("torch_c.from_builtin_tensor", results=[old.type], operands=[new]).result
            old.replace_all_uses_with(back)
    op.erase()


def _declare(module_op, name: str, function_type, kernel: str, integers: tuple) -> str:
    from torch_mlir import ir
    from torch_mlir.dialects import func

    body = module_op.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(body), ir.Location.unknown():
        decl = func.FuncOp(name, function_type, visibility="private")
        decl.attributes[KERNEL_ATTR] = ir.StringAttr.get(kernel)
        for attr, value in integers:
            decl.attributes[attr] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    return name


def _int_constant(value, op) -> int:
    from torch_mlir import ir

    owner = getattr(value.owner, "operation", None)  # (a block argument's owner is its block)
    if owner is None or owner.name != "torch.constant.int":
        raise ModelLoadError(f"{op.attributes['name']} at {op.location}: its integer operands must be constants")
    return ir.IntegerAttr(owner.attributes["value"]).value


def lower(module_op, pipeline: str, log) -> None:
    """torch-mlir's `pipeline` without its backend-contract check (our calls would fail it), then
    the check that matters here: no torch op left."""
    from torch_mlir import ir

    from inferx_compiler.internals import without_backend_contract
    from inferx_compiler.passes.infra.pipeline import run_pipeline

    run_pipeline(module_op, without_backend_contract(pipeline, module_op.context), "graph", stage="torch-to-linalg")
    left = []

    def visit(op):
        if op.name.startswith(("torch.", "torch_c.")):
            left.append(f"{op.name} at {op.location}")
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    if left:
        raise ModelLoadError(f"torch ops left after lowering to linalg: {', '.join(left[:5])}")
    log.step("lowered the torch dialect to linalg on tensors (our kernels' ops as calls)")
