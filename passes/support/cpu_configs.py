"""Lowering configurations for llvm-cpu dispatches, sized by the target's vector width and caches.

`candidates(root, target)` proposes a few `#iree_codegen.compilation_info` texts for a dispatch
root that IREE compiles with its DoubleTilingExpert pipeline: all-parallel `linalg.generic` ops
with static loops (elementwise ops, copies such as im2col's, transposes). Generics with
reduction loops are left to IREE (grouped and depthwise convolutions reach codegen as such
generics, and a DoubleTilingExpert configuration of ours fails IREE's pipeline for them).
Each candidate:
  - vectorizes the innermost parallel loop by a multiple of the target's vector width for the
    element type (1x, 2x, 4x: 8/16/32 f32 lanes on AVX2), using a size that divides the loop
    (a remainder would leave a scalar epilogue);
  - distributes the parallel loops in workgroup tiles whose data (every operand's tile) fits in
    half of the per-core L2 (or L1 for the cache-tight candidate), with at least two tiles per
    core so the worker pool stays balanced.
Candidates are measured by `inferx-compile --tune`; none is used without a measurement
(IREE's own choice stays where no candidate was measured faster).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

PIPELINE = "DoubleTilingExpert"
# (vector multiple, cache level) per candidate index 1, 2, ...
_VARIANTS = ((1, 2), (2, 2), (4, 2), (1, 1))


@dataclass(frozen=True)
class LoopNest:
    extents: list[int]  # every loop parallel
    element_bytes: int
    operands: int  # tensors read or written per iteration point (footprint estimate)
    element_type: str


def loop_nest(root) -> Optional[LoopNest]:
    """The root's loops when the rules model it: an all-parallel linalg.generic, static, not
    data-tiled."""
    from iree.compiler import ir

    from inferx_compiler.passes.analysis.linalg_analysis import element_type, loop_extents, reduction_loops

    if root.name != "linalg.generic":
        return None
    for value in list(root.operands) + list(root.results):
        t = value.type
        if not isinstance(t, ir.RankedTensorType) or t.encoding is not None:
            return None
    extents = loop_extents(root)
    if not extents or any(x <= 0 for x in extents) or reduction_loops(root):
        return None
    et = root.operands[0].type.element_type
    bits = getattr(et, "width", 32)
    return LoopNest(extents, max(1, bits // 8), len(root.operands), element_type(root))


def _divisor_tile(extent: int, want: int, lanes: int) -> int:
    """The largest multiple of `lanes` that divides `extent` and is at most `want` (the whole
    extent when it is smaller than one vector)."""
    if extent <= lanes:
        return extent
    best = 0
    for t in range(lanes, min(want, extent) + 1, lanes):
        if extent % t == 0:
            best = t
    return best or lanes


def config_for(nest: LoopNest, target, vector_multiple: int, cache_level: int) -> str:
    from inferx_compiler.targets import _DTYPE_BITS

    dtype = nest.element_type if nest.element_type in _DTYPE_BITS else "f32"
    lanes = target.vector_width(dtype)
    loops = list(range(len(nest.extents)))
    inner = ([i for i in loops if nest.extents[i] > 1] or loops)[-1]
    vector = [1] * len(loops)
    vector[inner] = _divisor_tile(nest.extents[inner], lanes * vector_multiple, lanes)
    dist = list(nest.extents)
    budget = (target.l1_bytes if cache_level == 1 else target.l2_bytes // 2) or 256 * 1024
    cores = target.cores or 1

    def footprint():
        return math.prod(dist) * nest.element_bytes * nest.operands

    def workgroups():
        return math.prod(-(-e // d) for e, d in zip(nest.extents, dist))

    for i in loops:  # outermost first: halve until the tile fits and there is work for all
        while (footprint() > budget or workgroups() < 2 * cores) and dist[i] > vector[i] \
                and dist[i] % 2 == 0 and (dist[i] // 2) % vector[i] == 0:
            dist[i] //= 2
    return ("#iree_codegen.compilation_info<lowering_config = #iree_cpu.lowering_config<"
            f"distribution = {dist}, vector_common_parallel = {vector}>, translation_info = "
            f"#iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<{PIPELINE}>>>")


def iree_pipeline_is(executable, pipeline: str) -> bool:
    """Whether IREE chose `pipeline` for this executable (from `inferx.iree_config`, written by
    the driver before the dispatch passes run; False when it is absent)."""
    from iree.compiler import ir
    from iree.compiler.dialects import iree_codegen

    from inferx_compiler.passes.infra.attributes import IREE_CONFIG_ATTR

    if IREE_CONFIG_ATTR not in executable.attributes:
        return False
    chosen = ir.DictAttr(executable.attributes[IREE_CONFIG_ATTR])
    if "translation_info" not in chosen:
        return False
    info = iree_codegen.TranslationInfoAttr(chosen["translation_info"])
    return info.pass_pipeline == ir.Attribute.parse(f"#iree_cpu.pipeline<{pipeline}>")


def candidates(root, target, executable=None) -> list[str]:
    """Distinct candidate configurations for a dispatch root (empty when the rules do not
    model it: the root is not a static, non-data-tiled linalg.generic that IREE itself lowers
    with DoubleTilingExpert)."""
    if executable is not None and not iree_pipeline_is(executable, PIPELINE):
        return []
    nest = loop_nest(root)
    if nest is None:
        return []
    found: list[str] = []
    for multiple, level in _VARIANTS:
        text = config_for(nest, target, multiple, level)
        if text and text not in found:
            found.append(text)
    return found
