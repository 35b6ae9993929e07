"""What every inferx pass is: a frozen dataclass with a `name`, typed options and `run`.

A pass is spelled like an MLIR pass in textual pipelines: `inferx-foo{opt=1 other=x}`.
Options are the dataclass fields; their annotations (`int`, `float`, `bool`, `str`)
give the parser their types. `level` says which MLIR world the pass runs in
(see `inferx_compiler.mlir_contexts`).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import ClassVar

from inferx_compiler.errors import PassOptionError


# a pass that runs in either MLIR world (it only reads or writes module attributes)
ANY_LEVEL = "any"


class PassFailure(Exception):
    """Raised inside `run` to fail the pass; `op` (if given) locates the diagnostic."""

    def __init__(self, message: str, op=None):
        super().__init__(message)
        self.op = op


@dataclasses.dataclass(frozen=True)
class ModulePass:
    name: ClassVar[str] = ""
    level: ClassVar[str] = "graph"
    summary: ClassVar[str] = ""
    # A pass that only makes a build faster may be left out (--disable-pass NAME), to measure
    # it; the others carry the model's meaning (import, precision, parameters, the output entry).
    optional: ClassVar[bool] = False
    # Parts of the pass --disable-pass may name on their own: name -> the bool option it sets
    # false (inferx-hopper-epilogue -> epilogue=false).
    parts: ClassVar[dict] = {}

    def run(self, module) -> None:  # module: ir.Operation (builtin.module)
        raise NotImplementedError

    @classmethod
    def for_build(cls, build) -> "ModulePass | None":
        """The instance a build runs (options from the build: inferx_compiler.build.Build), or
        None where the pass does not apply to it. The one place that says when a pass runs."""
        return None

    # -- spelling -------------------------------------------------------------------
    @classmethod
    def option_fields(cls) -> list[dataclasses.Field]:
        return list(dataclasses.fields(cls))

    @classmethod
    def from_options(cls, options: dict[str, str]) -> "ModulePass":
        hints = typing.get_type_hints(cls)
        known = {f.name.replace("_", "-"): f for f in cls.option_fields()}
        kwargs = {}
        for key, text in options.items():
            field = known.get(key) or known.get(key.replace("_", "-"))
            if field is None:
                valid = ", ".join(known) or "(none)"
                raise PassOptionError(
                    f"pass '{cls.name}' has no option '{key}'; valid options: {valid}"
                )
            kwargs[field.name] = _convert(cls.name, key, text, hints[field.name])
        try:
            instance = cls(**kwargs)
        except ValueError as e:
            raise PassOptionError(f"pass '{cls.name}': {e}") from None
        return instance

    def spelling(self) -> str:
        opts = []
        for f in self.option_fields():
            v = getattr(self, f.name)
            if isinstance(v, bool):
                v = "true" if v else "false"
            opts.append(f"{f.name.replace('_', '-')}={v}")
        return self.name + ("{" + " ".join(opts) + "}" if opts else "")


def _convert(pass_name: str, key: str, text: str, hint) -> object:
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        choices = typing.get_args(hint)
        if text not in choices:
            raise PassOptionError(
                f"pass '{pass_name}': option '{key}' got '{text}'; valid values: {', '.join(choices)}"
            )
        return text
    try:
        if hint is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if hint in (int, float, str):
            return hint(text)
    except ValueError:
        raise PassOptionError(
            f"pass '{pass_name}': option '{key}' expects {hint.__name__}, got '{text}'"
        ) from None
    return text


@dataclasses.dataclass(frozen=True)
class TargetedPass(ModulePass):
    """A pass that decides from the target: it reads the record the driver (or
    `inferx-set-target`) wrote on the module (`inferx.target`, see target_attr.py), never a
    name looked up again or the machine it happens to run on."""

    def target_of(self, module):
        from inferx_compiler.passes.infra.target_attr import has_target, read_target

        if not has_target(module):
            raise PassFailure(f"{self.name} decides from the target, and the module has no "
                              f"'inferx.target' attribute: compile with inferx-compile, or put "
                              f"inferx-set-target{{target=NAME}} first in the pipeline", module)
        return read_target(module)
