"""inferx-narrow-parameters: store a weight in the precision the code reads it at.

After `--precision fp16/bf16` (inferx-apply-precision), a contraction reads its f32 weight
through an elementwise truncation. IREE evaluates that truncation once, at load time, but the
artifact still stores the f32 weight: an f16 or bf16 artifact was as large as the fp32 one, and
loading it held both copies. This pass (IREE context, before inferx-bind-parameters) replaces

    %w {inferx.parameter = "W"} : tensor<KxNxf32>
    %t = linalg.generic {truncf} ins(%w) -> tensor<KxNxbf16>       (every use of %w)

by a parameter of the narrow type, `%t {inferx.parameter = "W#cast:bf16"}`, which the driver
computes from the f32 weight with the same rounding (inferx_compiler/weight_casts.py): the
outputs are bit for bit those of the truncating build, the stored weight half the size.

Declined (the f32 parameter stays): a weight also read at f32 (the artifact would store both),
and one read at two narrow types. A remark per parameter says which.
Spelled `inferx-narrow-parameters` (no options).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from inferx_compiler.dialects.inferx import PARAMETER_ATTR

from .base import ModulePass
from .func_util import add_parameter_argument, arg_attrs, erase_unused_parameter_arguments, public_functions
from .iree_ir import narrowing_cast_input
from .remarks import remark


@dataclasses.dataclass(frozen=True)
class NarrowParameters(ModulePass):
    name: ClassVar[str] = "inferx-narrow-parameters"
    level: ClassVar[str] = "iree"
    summary: ClassVar[str] = "f32 weights read only at f16/bf16 become f16/bf16 parameters"

    def run(self, module) -> None:
        for func_op in public_functions(module):
            self._narrow_function(func_op)

    def _narrow_function(self, func_op) -> None:
        from iree.compiler import ir

        from inferx_compiler.weight_casts import cast_key

        block = func_op.regions[0].blocks[0]
        parameters = [(arg, ir.StringAttr(d[PARAMETER_ATTR]).value)
                      for arg, d in zip(list(block.arguments), arg_attrs(func_op)) if PARAMETER_ATTR in d]
        for arg, key in parameters:
            casts, why = _only_narrowing_casts(arg)
            if not casts:
                if why:
                    remark(self.name, func_op, f"'{key}' stays f32: {why}")
                continue
            result_type = casts[0].results[0].type
            element = str(result_type.element_type)
            with func_op.context:
                narrow = add_parameter_argument(func_op, result_type, cast_key(key, element))
            for cast in casts:
                cast.results[0].replace_all_uses_with(narrow)
                cast.erase()
            remark(self.name, func_op, f"'{key}' stored as {element} ({len(casts)} truncation(s) removed)")
        erase_unused_parameter_arguments(func_op)


def _only_narrowing_casts(arg) -> tuple[list, str]:
    """(the truncations that are all of `arg`'s uses, "") or ([], why not; "" when `arg` is
    not truncated at all)."""
    users = [use.owner for use in arg.uses]
    casts = [u for u in users if narrowing_cast_input(u) is not None]
    if not casts:
        return [], ""
    others = [u for u in users if narrowing_cast_input(u) is None]
    if others:
        return [], f"also read at f32 (by {others[0].name})"
    types = {str(c.results[0].type) for c in casts}
    if len(types) > 1:
        return [], f"read at {len(types)} narrow types ({', '.join(sorted(types))})"
    return casts, ""
