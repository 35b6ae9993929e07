"""inferx-narrow-parameters: store a weight in the precision the code reads it at.

After `--precision fp16/bf16` (inferx-apply-precision), a contraction reads its f32 weight
through an elementwise truncation. IREE evaluates that truncation once, at load time, but the
artifact still stores the f32 weight: an f16 or bf16 artifact was as large as the fp32 one, and
loading it held both copies. This pass (IREE context, before inferx-bind-parameters) replaces

    %w {inferx.parameter = "W"} : tensor<KxNxf32>
    %t = linalg.generic {truncf} ins(%w) -> tensor<KxNxbf16>       (every use of %w, or of
                                                                   its linalg.transpose: Gemm transB=1)

by a parameter of the narrow type, `%t {inferx.parameter = "W#cast:bf16"}`, which the driver
computes from the f32 weight with the same rounding (inferx_compiler/precision/weight_casts.py): the
outputs are bit for bit those of the truncating build, the stored weight half the size.

The decision is per parameter key over all entry functions (a model's static-shape functions and
its dynamic one bind the same key): declined, the f32 parameter staying, when any of them reads
the weight at f32 (the artifact would store both: on CUDA the dynamic function keeps f32
convolutions) or at two narrow types. A remark per parameter says which.
Spelled `inferx-narrow-parameters` (no options).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from inferx_compiler.dialects.inferx import PARAMETER_ATTR
from inferx_compiler.passes.infra.base import ModulePass
from inferx_compiler.passes.analysis.func_util import add_parameter_argument, arg_attrs, erase_unused_parameter_arguments, public_functions
from inferx_compiler.passes.support.iree_ir import narrowing_cast_input
from inferx_compiler.passes.analysis.remarks import remark


@dataclasses.dataclass(frozen=True)
class NarrowParameters(ModulePass):
    """Stores an f32 weight the code reads only at f16/bf16 as an f16/bf16 parameter."""

    name: ClassVar[str] = "inferx-narrow-parameters"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "f32 weights read only at f16/bf16 become f16/bf16 parameters"

    @classmethod
    def for_build(cls, build) -> "Optional[NarrowParameters]":
        return cls() if build.runs(cls.name) else None

    def run(self, module) -> None:
        functions = public_functions(module)
        reads = _parameter_arguments(functions)  # key -> [(func_op, argument)]
        for key, args in reads.items():
            casts, why = _only_narrowing_casts([arg for _, arg in args])
            if not casts:
                if why:
                    remark(self.name, args[0][0], f"'{key}' stays f32: {why}")
                continue
            element = casts[0].results[0].type.element_type
            for func_op, arg in args:
                self._narrow(func_op, arg, key, element)
            remark(self.name, args[0][0], f"'{key}' stored as {element} ({len(casts)} truncation(s) removed"
                                          f"{f' in {len(args)} functions' if len(args) > 1 else ''})")
        for func_op in functions:
            erase_unused_parameter_arguments(func_op)

    @staticmethod
    def _narrow(func_op, arg, key: str, element) -> None:
        """Every truncation of `arg` (directly, or of its transpose) reads the narrow parameter
        (a transpose is rebuilt on it) instead."""
        from iree.compiler import ir
        from iree.compiler.dialects import linalg, tensor

        from inferx_compiler.precision.weight_casts import cast_key

        with func_op.context, func_op.location:
            narrow = add_parameter_argument(func_op, ir.RankedTensorType.get(arg.type.shape, element),
                                            cast_key(key, str(element)))
        for user in [use.owner for use in arg.uses]:
            transpose = user.name == "linalg.transpose"
            if transpose:
                result_type = user.results[0].type
                with ir.InsertionPoint(user), user.location:
                    init = tensor.EmptyOp(list(result_type.shape), element).result
                    replacement = linalg.transpose(narrow, outs=[init], permutation=ir.DenseI64ArrayAttr(
                        user.attributes["permutation"])).results[0]
                casts = [use.owner for use in user.results[0].uses]
            else:
                replacement, casts = narrow, [user]
            for cast in casts:
                cast.results[0].replace_all_uses_with(replacement)
                cast.erase()
            if transpose:
                user.erase()


def _parameter_arguments(functions: list) -> dict:
    """Parameter key -> the (function, entry argument) pairs that bind it, in function order:
    a key is stored once for all of them (a model's static-shape functions and its dynamic one)."""
    from iree.compiler import ir

    reads: dict = {}
    for func_op in functions:
        block = func_op.regions[0].blocks[0]
        for arg, d in zip(list(block.arguments), arg_attrs(func_op)):
            if PARAMETER_ATTR in d:
                reads.setdefault(ir.StringAttr(d[PARAMETER_ATTR]).value, []).append((func_op, arg))
    return reads


def _only_narrowing_casts(args: list) -> tuple[list, str]:
    """(the truncations that are all the uses of `args` (one key's arguments), directly or
    through a transpose, "") or ([], why not; "" when they are not truncated at all)."""
    casts, others = [], []
    for user in [use.owner for arg in args for use in arg.uses]:
        readers = [u.owner for u in user.results[0].uses] if user.name == "linalg.transpose" else [user]
        for reader in readers:
            (casts if narrowing_cast_input(reader) is not None else others).append(reader)
        if not readers:
            others.append(user)
    if not casts:
        return [], ""
    if others:
        return [], f"also read at f32 (by {others[0].name})"
    types = {str(c.results[0].type.element_type) for c in casts}
    if len(types) > 1:
        return [], f"read at {len(types)} narrow types ({', '.join(sorted(types))})"
    return casts, ""
