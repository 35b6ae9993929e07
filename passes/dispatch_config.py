"""inferx-dispatch-config: a lowering configuration per dispatch, measured or IREE's own.

Runs at dispatch level (IREE context, on `executable-sources`, after inferx-dispatch-report).
For each hal.executable it computes the dispatch signature of its root op (op name, loop
extents, iterator types, indexing maps, element types, and the ops fused with it) and chooses:

  tuned      the tuning database (`tuning-db=FILE`, written by `inferx-compile --tune`) holds a
             configuration measured faster than IREE's for this signature on this target: it
             is attached to the root op as `compilation_info`, which IREE's codegen honours;
  candidate  `candidate=K` (what --tune builds with) attaches the K-th configuration that the
             target-width rules (`cpu_configs.py`) propose for this root, if it has one;
  rule       CUDA targets: a rule whose configuration was measured faster than IREE's on the
             device for a whole class of roots (`cuda_configs.py`: window copies);
  IREE       otherwise IREE chooses, exactly as without this pass (also when the database
             measured IREE's own choice fastest).

Why: IREE's default CPU configurations are heuristics for one generic machine; the fastest tile
and vector sizes for a given shape depend on the target's vector width and caches, and only a
measurement says which wins. The choice and its source are written on the executable
(`inferx.config = {source, signature, config}`) for the build report and `--explain`.
Declined (IREE's choice): data-tiled ops (their inner tiles are the microkernel's), IREE's own
executables (initializers, encodings), dynamic loops, named ops and pipelines the rules do not
model. `rules=false` leaves the CUDA rules out (to measure them).

Spelled `inferx-dispatch-config{tuning-db= candidate=0 rules=true}` (the target is the module's
`inferx.target`).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from inferx_compiler.passes.infra.base import PassFailure, TargetedPass
from inferx_compiler.passes.infra.build_files import TUNING_DB_FILE, build_file
from inferx_compiler.passes.dispatch_report import executables, root_op, structured_ops
from inferx_compiler.passes.infra.attributes import CONFIG_ATTR
from inferx_compiler.passes.analysis.remarks import remark



def signature(root, ops) -> str:
    """A stable description of what a dispatch computes, for matching measurements."""
    from iree.compiler import ir

    from inferx_compiler.passes.analysis.linalg_analysis import loop_extents

    maps = str(root.attributes["indexing_maps"]) if "indexing_maps" in root.attributes else ""
    iterators = str(root.attributes["iterator_types"]) if "iterator_types" in root.attributes else ""
    types = ",".join(str(v.type.element_type) for v in root.operands if isinstance(v.type, ir.ShapedType))
    fused = ",".join(op.name for op in ops if op != root)
    return f"{root.name}|{loop_extents(root)}|{iterators}|{maps}|{types}|fused:{fused}"


def _internal(executable) -> bool:
    """IREE's own executables (`_initializer_*` run once at load, `_encoding_*` relayouts):
    not worth tuning, and their operands' layouts belong to data tiling."""
    from iree.compiler import ir

    return ir.StringAttr(executable.attributes["sym_name"]).value.startswith("_")


@dataclasses.dataclass(frozen=True)
class DispatchConfig(TargetedPass):
    """Attaches a lowering configuration to each dispatch root: measured (tuning database) or a rule's."""

    name: ClassVar[str] = "inferx-dispatch-config"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "attach lowering configurations to dispatch roots: measured (tuned) or a CUDA rule"

    tuning_db: str = ""
    candidate: int = 0
    rules: bool = True

    @classmethod
    def for_build(cls, build) -> "Optional[DispatchConfig]":
        if not build.target.executable or not build.runs(cls.name):
            return None
        request = build.request
        return cls(tuning_db=build_file(TUNING_DB_FILE) if request.tuning_db else "",
                   candidate=request.tuning_candidate)

    def __post_init__(self):
        if self.candidate < 0:
            raise ValueError(f"candidate must be >= 0, got {self.candidate}")

    def run(self, module) -> None:
        from iree.compiler import ir

        from inferx_compiler.tuning import tuning_db
        from inferx_compiler.passes.support import cpu_configs

        target = self.target_of(module)
        db = tuning_db.load(self.tuning_db) if self.tuning_db else tuning_db.empty()
        key = tuning_db.target_key(target)
        for executable in executables(module):
            ops = structured_ops(executable)
            if not ops or _internal(executable):
                continue
            root = root_op(ops)
            sig = signature(root, ops)
            offered = cpu_configs.candidates(root, target, executable) if target.backend == "llvm-cpu" else []
            source, config = self._choose(db, key, sig, offered, root)
            if config is None and self.rules and target.backend == "cuda":
                from inferx_compiler.passes.support import cuda_configs

                config, which = cuda_configs.rule(root, ops, executable)
                if config is not None:
                    source = "rule"
                    remark(self.name, root, f"rule: {which}")
            with module.context:
                if config is not None:
                    try:
                        root.attributes["compilation_info"] = ir.Attribute.parse(config)
                    except ir.MLIRError as e:
                        raise PassFailure(f"bad configuration for {root.name}: {config} ({e})", root)
                executable.attributes[CONFIG_ATTR] = ir.DictAttr.get({
                    "source": ir.StringAttr.get(source),
                    "signature": ir.StringAttr.get(sig),
                    "config": ir.StringAttr.get(config or ""),
                    "candidates": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(offered)),
                })

    def _choose(self, db, key, sig, offered, root):
        from inferx_compiler.tuning import tuning_db

        if self.candidate:
            if self.candidate <= len(offered):
                return f"candidate {self.candidate}", offered[self.candidate - 1]
            return "IREE", None
        entry = tuning_db.lookup(db, key, sig)
        if entry is not None and entry.get("config"):
            remark(self.name, root, f"tuned: {entry['us']:.1f} us vs IREE's {entry['iree_us']:.1f} us")
            return "tuned", entry["config"]
        if entry is not None:
            return "IREE (tuned: no candidate beat it)", None
        return "IREE", None
