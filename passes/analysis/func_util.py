"""What passes read off `func.func` ops in the IREE context: the module's entry points and
their argument attributes."""

from __future__ import annotations


def public_functions(module) -> list:
    """The module's public function definitions (its entry points), in order."""
    body = module.regions[0].blocks[0]
    return [op.operation for op in body.operations
            if op.operation.name == "func.func" and "sym_visibility" not in op.operation.attributes
            and len(op.operation.regions[0].blocks) > 0]


def arg_attrs(func_op) -> list:
    """One DictAttr per argument ([] when the function has no argument attributes)."""
    from iree.compiler import ir

    if "arg_attrs" not in func_op.attributes:
        return []
    return [ir.DictAttr(d) for d in ir.ArrayAttr(func_op.attributes["arg_attrs"])]


def _set_signature(func_op, block, attrs: list) -> None:
    from iree.compiler import ir

    old = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    inputs = [a.type for a in block.arguments]
    func_op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, list(old.results)))
    func_op.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def add_parameter_argument(func_op, value_type, key: str):
    """Append an entry argument tagged `inferx.parameter = key` (the same key twice: one argument)."""
    from iree.compiler import ir

    from inferx_compiler.dialects.inferx import PARAMETER_ATTR

    block = func_op.regions[0].blocks[0]
    attrs = arg_attrs(func_op) or [ir.DictAttr.get({}) for _ in block.arguments]
    for arg, d in zip(block.arguments, attrs):
        if PARAMETER_ATTR in d and ir.StringAttr(d[PARAMETER_ATTR]).value == key:
            return arg
    arg = block.add_argument(value_type, func_op.location)
    attrs.append(ir.DictAttr.get({PARAMETER_ATTR: ir.StringAttr.get(key)}))
    _set_signature(func_op, block, attrs)
    return arg


def erase_unused_parameter_arguments(func_op) -> list[str]:
    """Drop entry arguments tagged `inferx.parameter` that nothing reads; returns their keys."""
    from iree.compiler import ir

    from inferx_compiler.dialects.inferx import PARAMETER_ATTR

    block = func_op.regions[0].blocks[0]
    attrs = arg_attrs(func_op)
    if not attrs:
        return []
    erased = []
    for index in reversed(range(len(attrs))):
        d, arg = attrs[index], block.arguments[index]
        if PARAMETER_ATTR in d and not list(arg.uses):
            erased.append(ir.StringAttr(d[PARAMETER_ATTR]).value)
            block.erase_argument(index)
            del attrs[index]
    if erased:
        _set_signature(func_op, block, attrs)
    return erased
