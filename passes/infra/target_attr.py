"""The resolved target on the module: `inferx.target = {name = "x86-avx512", vector_bits = 512 : i64, ...}`.

The driver resolves the target once (the host's CPU features included, for `--target cpu`) and
writes the whole record on the builtin.module, as IREE writes `#hal.device.target`; every pass
reads it from there. A dumped module therefore decides the same on any machine: the record
travels with the IR, it is not looked up or probed again. The attribute is a plain dictionary,
so both MLIR worlds (torch-mlir's and IREE's) parse it.
"""

from __future__ import annotations

import dataclasses
import json
import typing

from inferx_compiler.mlir_contexts import bindings_of
from inferx_compiler.passes.infra.attributes import TARGET_ATTR
from inferx_compiler.targets import Target


def target_attribute_text(target: Target) -> str:
    """The record as an MLIR dictionary attribute (fields that are None left out)."""
    entries = []
    for field in dataclasses.fields(Target):
        value = getattr(target, field.name)
        if value is None:
            continue
        entries.append(f"{field.name} = {_attribute_text(value)}")
    return "{" + ", ".join(entries) + "}"


def _attribute_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value} : i64"
    if isinstance(value, float):
        return f"{value!r} : f64"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid MLIR string literal
    if isinstance(value, tuple):
        return "[" + ", ".join(_attribute_text(v) for v in value) + "]"
    raise TypeError(f"no attribute spelling for {type(value).__name__} {value!r}")


def write_target(module_op, target: Target) -> None:
    """Set the module's `inferx.target` to `target` (replacing any earlier one)."""
    ir = bindings_of(module_op).ir
    with module_op.context:
        module_op.attributes[TARGET_ATTR] = ir.Attribute.parse(target_attribute_text(target))


def has_target(module_op) -> bool:
    return TARGET_ATTR in module_op.attributes


def read_target(module_op) -> Target:
    """The record written by `write_target` (KeyError where the module has none)."""
    ir = bindings_of(module_op).ir
    attrs = ir.DictAttr(module_op.attributes[TARGET_ATTR])
    hints = typing.get_type_hints(Target)
    values = {}
    for field in dataclasses.fields(Target):
        if field.name in attrs:
            values[field.name] = _value(ir, attrs[field.name], hints[field.name])
    return Target(**values)


def _value(ir, attr, hint):
    hint = _without_optional(hint)
    if hint is bool:
        return ir.BoolAttr(attr).value
    if hint is int:
        return ir.IntegerAttr(attr).value
    if hint is float:
        return ir.FloatAttr(attr).value
    if hint is str:
        return ir.StringAttr(attr).value
    if typing.get_origin(hint) is tuple:
        return tuple(ir.StringAttr(a).value for a in ir.ArrayAttr(attr))
    raise TypeError(f"inferx.target: no reader for a field of type {hint}")


def _without_optional(hint):
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if typing.get_origin(hint) is typing.Union and len(args) == 1 else hint
