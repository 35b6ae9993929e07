"""torch-mlir's half: ONNX proto -> torch dialect -> linalg on tensors (graph context).

Ops that the ONNX->torch conversion leaves behind are collected all at once and
reported by ONNX node (name, op type, domain, opset) before anything else runs.
"""

from __future__ import annotations

from inferx_compiler.errors import ModelLoadError, PipelineError, UnsupportedOpsError
from inferx_compiler.frontend.onnx_nodes import attribute_failure, nodes_named
from inferx_compiler.passes.infra.locations import location_names
from inferx_compiler.dialects.inferx import PARAMETER_ATTR
from inferx_compiler.log import BuildLog
from inferx_compiler.frontend.onnx_import import PreparedModel
from inferx_compiler.passes.infra.pipeline import run_pipeline

ENTRY_FUNCTION = "main"

ONNX_TO_TORCH = "builtin.module(func.func(convert-torch-onnx-to-torch))"
TORCH_TO_LINALG = ("builtin.module(torch-onnx-to-torch-backend-pipeline,"
                   "torch-backend-to-linalg-on-tensors-backend-pipeline)")
FX_TORCH_TO_LINALG = ("builtin.module(torchdynamo-export-to-torch-backend-pipeline,"
                      "torch-backend-to-linalg-on-tensors-backend-pipeline)")


def import_onnx(prepared: PreparedModel, context):
    """The torch-mlir ONNX importer, in process; returns the module's Operation."""
    from torch_mlir.extras import onnx_importer

    config = onnx_importer.Config()
    try:
        model_info = onnx_importer.ModelInfo(prepared.proto, config=config)
        module_op = model_info.create_module(context=context).operation
        importer = onnx_importer.NodeImporter.define_function(model_info.main_graph, module_op)
        importer.import_all()
    except Exception as e:  # the importer raises OnnxImportError, ValueError, KeyError...
        raise ModelLoadError(f"model '{prepared.name}': the torch-mlir ONNX importer cannot take it: "
                             f"{_describe_import_error(e)}") from None
    rename_entry(module_op)
    return module_op


def _describe_import_error(e: Exception) -> str:
    import onnx

    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    tail = text.rsplit(":", 1)[-1].strip()
    if "element type" in text and tail.isdigit() and int(tail) in onnx.TensorProto.DataType.values():
        text += f" ({onnx.TensorProto.DataType.Name(int(tail))} tensors are not supported)"
    return text


def rename_entry(module_op) -> None:
    from torch_mlir import ir

    funcs = [op for op in module_op.regions[0].blocks[0].operations if op.operation.name == "func.func"]
    with module_op.context:
        funcs[0].attributes["sym_name"] = ir.StringAttr.get(ENTRY_FUNCTION)


MAX_UNSUPPORTED_PROBES = 64
UNCONVERTED_PREFIX = "inferx.unconverted."


def convert_onnx_ops(module_op, prepared: PreparedModel, log: BuildLog) -> None:
    """ONNX ops -> torch ops; every node that does not convert is reported at once.

    torch-mlir's conversion stops at the first op it cannot legalize. To name them all,
    each failing node is renamed out of the `onnx.` namespace (which the conversion then
    leaves alone) and the conversion is retried on a fresh copy until it goes through.
    """
    from torch_mlir import ir

    from inferx_compiler.mlir_contexts import module_to_bytecode

    pristine = module_to_bytecode(module_op)
    failing: dict[str, dict] = {}
    for _ in range(MAX_UNSUPPORTED_PROBES):
        trial = ir.Module.parse(pristine).operation if failing else module_op
        _rename_nodes(trial, set(failing))
        error = _try_conversion(trial)
        if error is None:
            break
        node = _failing_node(error, prepared)
        if node is None or node["name"] in failing:
            raise error
        failing[node["name"]] = node
    else:
        log.warn(f"stopped after {MAX_UNSUPPORTED_PROBES} unsupported nodes; there may be more")
    if failing:
        raise UnsupportedOpsError(list(failing.values()))
    log.step("converted ONNX ops to the torch dialect")


def _try_conversion(module_op):
    try:
        run_pipeline(module_op, ONNX_TO_TORCH, "graph", stage="onnx-to-torch", save_repro=False)
        return None
    except PipelineError as e:
        return e


def _failing_node(error: PipelineError, prepared: PreparedModel):
    """The ONNX node the failure's first diagnostic points at, or None."""
    nodes = nodes_named(error.location_names, prepared.nodes)
    return nodes[0] if nodes else None


def _rename_nodes(module_op, names: set[str]) -> None:
    if not names:
        return
    from torch_mlir import ir

    def visit(op):
        if op.name == "torch.operator" and names.intersection(location_names(op.location)[:1]):
            old = ir.StringAttr(op.attributes["name"]).value
            op.attributes["name"] = ir.StringAttr.get(UNCONVERTED_PREFIX + old.removeprefix("onnx."))
        return ir.WalkResult.ADVANCE

    with module_op.context:
        module_op.walk(visit)


def lower_to_linalg(module_op, pipeline: str, log: BuildLog, prepared: PreparedModel = None) -> None:
    try:
        run_pipeline(module_op, pipeline, "graph", stage="torch-to-linalg")
    except PipelineError as e:
        if prepared is None:
            raise
        if any("failed to legalize" in m for m in e.messages):  # a legality failure: list every op left
            e.unlowered = unlowered_ops(module_op)
            e.location_names += list(e.unlowered)
        raise attribute_failure(e, prepared.nodes, "could not be lowered to linalg") from None
    log.step("lowered the torch dialect to linalg on tensors")


_TORCH_VALUE_PREFIXES = ("torch.constant.", "torch.vtensor.literal")  # values, not computations


def unlowered_ops(module_op) -> dict[str, str]:
    """After a failed torch-to-linalg: {location name: op name} of the torch compute ops left
    unconverted, which name the nodes torch-to-linalg cannot lower. Empty when the failure
    came before the conversion ran (no linalg op yet): then every op is still torch."""
    from torch_mlir import ir

    left: dict[str, str] = {}
    converted = False

    def visit(op):
        nonlocal converted
        if op.name.startswith("linalg."):
            converted = True
        elif op.name.startswith("torch.") and not op.name.startswith(_TORCH_VALUE_PREFIXES):
            for name in location_names(op.location):
                if name not in left or left[name].startswith("torch.prim."):  # the node's own op first
                    left[name] = op.name
        return ir.WalkResult.ADVANCE

    with module_op.context:
        module_op.walk(visit)
    return left if converted else {}


def mark_parameter_args(module_op, parameter_keys: dict[int, str]) -> None:
    """Tag entry arguments that hold weights (index -> parameter key) with `inferx.parameter`."""
    if not parameter_keys:
        return
    from torch_mlir import ir

    entry = _entry_function(module_op)
    n_args = len(ir.FunctionType(ir.TypeAttr(entry.attributes["function_type"]).value).inputs)
    with module_op.context:
        attrs = [ir.DictAttr.get({}) for _ in range(n_args)]
        if "arg_attrs" in entry.attributes:
            attrs = list(ir.ArrayAttr(entry.attributes["arg_attrs"]))
        for index, key in parameter_keys.items():
            attrs[index] = ir.DictAttr.get({PARAMETER_ATTR: ir.StringAttr.get(key)})
        entry.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def attach_precision_plan(module_op, plan: dict[str, str]) -> None:
    """Attach the precision plan (layer -> IR precision) as `inferx.precision_plan` on the module,
    where inferx-annotate-precision{from-plan=true} reads it."""
    from torch_mlir import ir

    from inferx_compiler.dialects.inferx import PLAN_ATTR

    with module_op.context:
        module_op.attributes[PLAN_ATTR] = ir.DictAttr.get(
            {layer: ir.StringAttr.get(p) for layer, p in sorted(plan.items())})


def trailing_parameter_keys(n_user_inputs: int, keys: list[str]) -> dict[int, str]:
    """Lifted ONNX weights follow the user inputs, in order."""
    return {n_user_inputs + i: k for i, k in enumerate(keys)}


def has_convolutions(module_op) -> bool:
    from inferx_compiler.passes.analysis.linalg_analysis import collect, is_convolution_op

    return bool(collect(module_op, is_convolution_op))


def functions_flops(module_op) -> dict[str, int]:
    """Function name -> FLOPs of one call (-1 when a dim is dynamic), from the linalg ops."""
    from inferx_compiler.passes.analysis.linalg_analysis import function_flops

    return {op.attributes["sym_name"].value: function_flops(op.operation)
            for op in module_op.regions[0].blocks[0].operations if op.operation.name == "func.func"}


def move_entry_function(source_module, dest_module, new_name: str) -> None:
    """Move `source_module`'s entry function into `dest_module` under `new_name` (both modules
    in one context). torch-mlir's linalg output holds the entry function alone; a module with
    other symbols (which would need renaming apart) is refused."""
    from torch_mlir import ir

    entry = _entry_function(source_module)
    helpers = [op.operation for op in source_module.regions[0].blocks[0].operations
               if op.operation != entry]
    if helpers:
        raise PipelineError(f"the lowered module holds {len(helpers)} symbols beside @{ENTRY_FUNCTION}; "
                            f"a static-shape copy cannot be merged yet")
    with dest_module.context:
        entry.attributes["sym_name"] = ir.StringAttr.get(new_name)
        dest_module.regions[0].blocks[0].append(entry)


def _entry_function(module_op):
    for op in module_op.regions[0].blocks[0].operations:
        if op.operation.name == "func.func" and op.attributes["sym_name"].value == ENTRY_FUNCTION:
            return op.operation
    raise PipelineError(f"the module has no @{ENTRY_FUNCTION} function")
