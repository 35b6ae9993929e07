"""inferx-set-target: resolve a target name once and write its record on the module.

What the driver does at the start of every build, as a pass, so that a pipeline on a bare
module (a lit test, a hand-written reproducer) can name the target its passes decide for:
`inferx-set-target{target=x86-avx512},inferx-f32-matmul`. The record (vector width, features,
caches, SM count...) goes into the module's `inferx.target` attribute; the targeted passes read
it from there. `target=cpu` probes the machine running the pass: name a fixed target (x86-avx2,
x86-avx512, x86-amx, h200, ...) where the result must not depend on the host.

Spelled `inferx-set-target{target=NAME}`.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from inferx_compiler.errors import TargetError
from inferx_compiler.passes.infra.base import ANY_LEVEL, ModulePass
from inferx_compiler.passes.infra.target_attr import write_target
from inferx_compiler.targets import get_target


@dataclasses.dataclass(frozen=True)
class SetTarget(ModulePass):
    """Writes the resolved record of `target` on the module (`inferx.target`)."""

    name: ClassVar[str] = "inferx-set-target"
    level: ClassVar[str] = ANY_LEVEL
    summary: ClassVar[str] = "write a target's resolved record on the module (what the targeted passes read)"

    target: str = "cpu"

    @classmethod
    def for_build(cls, build) -> "Optional[SetTarget]":
        return None  # the driver writes the resolved record itself

    def __post_init__(self):
        try:
            get_target(self.target)
        except TargetError as e:
            raise ValueError(str(e)) from None

    def run(self, module) -> None:
        write_target(module, get_target(self.target))
