"""inferx-bind-parameters: entry arguments tagged `inferx.parameter` become IREE parameters.

Rewrites (IREE context, before IREE's own pipeline)

    func.func @main(%x, %w {inferx.parameter = "W"}) { body }

into

    util.global private @__inferx_param_0 = #stream.parameter.named<"SCOPE"::"W"> : T
    func.func private @_inferx_impl_main(%x, %w) { body }
    func.func @main(%x) { %w = util.global.load @__inferx_param_0; call @_inferx_impl_main(%x, %w) }

Why: weights then never enter the IR; the runtime maps them from the artifact's
parameter archive, and IREE inlines the call and hoists work on the constant weights.
Entry functions that name the same parameter key (a model's static-shape functions beside its
dynamic one) load the same global: the weights exist once.
The keys bound are listed on the module as `inferx.parameter_keys` (an array of strings, in
binding order): what the artifact's parameter archive must hold (the driver reads it; keys
derived by inferx-quantize-contractions are computed from their source weights then).
Spelled `inferx-bind-parameters{scope=model}`.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from inferx_compiler.dialects.inferx import PARAMETER_ATTR
from inferx_compiler.passes.infra.base import ModulePass, PassFailure
from inferx_compiler.passes.analysis.func_util import arg_attrs, public_functions

IMPL_PREFIX = "_inferx_impl_"
KEYS_ATTR = "inferx.parameter_keys"


def bound_keys(module) -> list[str] | None:
    """The parameter keys a bound module reads (None when the pass did not record any)."""
    from iree.compiler import ir

    if KEYS_ATTR not in module.attributes:
        return None
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(module.attributes[KEYS_ATTR])]


@dataclasses.dataclass(frozen=True)
class BindParameters(ModulePass):
    """Entry arguments tagged `inferx.parameter` become named IREE parameters (weights stay out of the module)."""

    name: ClassVar[str] = "inferx-bind-parameters"
    level: ClassVar[str] = "iree"
    summary: ClassVar[str] = "turn entry arguments tagged inferx.parameter into named IREE parameters"
    scope: str = "model"

    @classmethod
    def for_build(cls, build) -> "Optional[BindParameters]":
        from inferx_compiler.artifact.archive import PARAMETER_SCOPE

        return cls(scope=PARAMETER_SCOPE)

    def run(self, module) -> None:
        globals_by_key: dict = {}  # parameter key -> (global symbol, type), shared by all entries
        for func_op in public_functions(module):
            keys = _parameter_keys(func_op)
            if any(k is not None for k in keys):
                _bind(module, func_op, keys, self.scope, globals_by_key)
        if globals_by_key:
            from iree.compiler import ir

            with module.context:
                module.attributes[KEYS_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(k) for k in globals_by_key])


def _parameter_keys(func_op) -> list:
    from iree.compiler import ir

    return [ir.StringAttr(d[PARAMETER_ATTR]).value if PARAMETER_ATTR in d else None for d in arg_attrs(func_op)]


def _bind(module, func_op, keys: list, scope: str, globals_by_key: dict) -> None:
    from iree.compiler import ir
    from iree.compiler.dialects import func, util

    name = ir.StringAttr(func_op.attributes["sym_name"]).value
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    inputs, results = list(ftype.inputs), list(ftype.results)
    impl_name = IMPL_PREFIX + name
    loc = func_op.location
    with module.context, loc:
        original = arg_attrs(func_op)  # the user arguments keep theirs (iree.abi.output: a tied cache)
        func_op.attributes["sym_name"] = ir.StringAttr.get(impl_name)
        func_op.attributes["sym_visibility"] = ir.StringAttr.get("private")
        del func_op.attributes["arg_attrs"]
        user_types = [t for t, k in zip(inputs, keys) if k is None]
        body = module.regions[0].blocks[0]
        with ir.InsertionPoint(body):
            globals_ = {}
            for i, (t, k) in enumerate(zip(inputs, keys)):
                if k is None:
                    continue
                if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
                    raise PassFailure(f"parameter '{k}' must be a statically shaped tensor, got {t}",
                                      func_op)
                if k not in globals_by_key:
                    sym = f"__inferx_param_{len(globals_by_key)}"
                    init = ir.Attribute.parse(f'#stream.parameter.named<"{_escape(scope)}"::"{_escape(k)}"> : {t}')
                    util.GlobalOp(sym, ir.TypeAttr.get(t), sym_visibility="private", initial_value=init)
                    globals_by_key[k] = (sym, t)
                sym, known = globals_by_key[k]
                if known != t:
                    raise PassFailure(f"parameter '{k}' is {known} in one entry function and {t} in "
                                      f"@{name}", func_op)
                globals_[i] = (sym, t)
            wrapper = func.FuncOp(name, ir.FunctionType.get(user_types, results))
            kept = [ir.DictAttr.get({a.name: a.attr for a in d}) for d, k in zip(original, keys) if k is None]
            if any(len(d) for d in kept):
                wrapper.attributes["arg_attrs"] = ir.ArrayAttr.get(kept)
            entry = wrapper.add_entry_block()
        with ir.InsertionPoint(entry):
            user_args = iter(entry.arguments)
            operands = []
            for i, k in enumerate(keys + [None] * (len(inputs) - len(keys))):
                if i in globals_:
                    sym, t = globals_[i]
                    operands.append(util.GlobalLoadOp(t, sym, is_immutable=True).result)
                else:
                    operands.append(next(user_args))
            call = func.CallOp(results, impl_name, operands)
            func.ReturnOp(call.results)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
