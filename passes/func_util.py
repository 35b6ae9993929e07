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
