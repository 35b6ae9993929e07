"""Lowering configurations for CUDA window copies (im2col) and large elementwise dispatches,
sized from the loop nest.

IREE 3.13 configures an all-parallel `linalg.generic` whose input is read through a window map
(`x[n, c, oh*s + kh, ow*s + kw]`, what inferx-conv-strategy's im2col writes) with TileAndFuse
workgroups of 32 threads over a 4x8 output tile, one element per thread: those copies ran far
below the GPU's copy rate and took about half of ResNet-50's kernel time at
batch 8 (docs/levers/gpu-dispatch-config.md).

The rule: the workgroup covers whole output rows (the innermost loop entirely) and as many of the
next loop's iterations as fit 256 threads; each thread writes `vector` consecutive elements of a
row (8, 4, 2 or 1: the largest that divides the row); every other loop is tiled by 1. Tile sizes
divide their loops, so there are no partial tiles. Roots the rule does not model get None (IREE's
own configuration stays).

Elementwise dispatches (every op in the dispatch all-parallel, every map a projected permutation,
the root's innermost loop the output's innermost dimension: bias, activation and truncation
epilogues, transposes of outer dimensions) get the same shape of configuration with
4 elements per thread and rows cut into tiles of up to 1024 elements: IREE gives them 32-thread
workgroups over 128 elements, under which a matmul's bias epilogue took longer than the matmul.
A root whose innermost loop is not the output's innermost dimension (BERT's keys transposed for
attention) was slower with the rule, since the loop strides the output: those keep IREE's
configuration, as do dispatches under ELEMENTWISE_MIN elements. Figures:
docs/levers/gpu-dispatch-config.md.
"""

from __future__ import annotations

import math
from typing import Optional

PIPELINE = "TileAndFuse"
MAX_THREADS = 256
SUBGROUP = 32
ELEMENTWISE_MIN = 1 << 16
ELEMENTWISE_VECTOR = 4


def is_window_copy(root) -> bool:
    """An all-parallel linalg.generic with static loops reading one input through a map that is
    not a projected permutation (a sliding window), its body a copy or a cast."""
    from inferx_compiler.passes.analysis.linalg_analysis import indexing_maps, loop_extents, reduction_loops

    if root.name != "linalg.generic" or len(root.operands) != 2 or reduction_loops(root):
        return False
    extents = loop_extents(root)
    if not extents or any(x <= 0 for x in extents):
        return False
    maps = indexing_maps(root)
    return not maps[0].is_projected_permutation and maps[1].is_permutation


def config_for(extents: list[int]) -> Optional[str]:
    """The compilation_info text for a window copy with these loop extents."""
    row = extents[-1]
    vector = next(v for v in (8, 4, 2, 1) if row % v == 0)
    threads_per_row = row // vector
    if threads_per_row > MAX_THREADS:
        return None
    return _compilation_info(extents, row, vector)


def _compilation_info(extents: list[int], tile: int, vector: int) -> Optional[str]:
    """Workgroups of `tile` elements of the innermost loop (`vector` a thread) times as many
    iterations of the next loop as fit MAX_THREADS threads (a divisor of it); other loops 1."""
    rank = len(extents)
    threads_per_row = tile // vector
    rows = 1
    if rank > 1:
        outer = extents[-2]
        rows = max(d for d in range(1, outer + 1) if outer % d == 0 and d * threads_per_row <= MAX_THREADS)
    workgroup = [1] * rank
    workgroup[-1] = tile
    thread = [1] * rank
    thread[-1] = vector
    if rank > 1:
        workgroup[-2] = rows
    threads = threads_per_row * rows
    if threads < SUBGROUP and math.prod(extents) >= SUBGROUP * 64:
        return None  # rows too short to fill a subgroup: IREE's 4x8 tiles do no worse
    return ("#iree_codegen.compilation_info<lowering_config = #iree_gpu.lowering_config<{"
            f"thread = {thread}, workgroup = {workgroup}}}>, translation_info = "
            f"#iree_codegen.translation_info<pipeline = #iree_gpu.pipeline<{PIPELINE}> "
            f"workgroup_size = [{threads}, 1, 1] subgroup_size = {SUBGROUP}>>")


def is_large_elementwise(root, ops) -> bool:
    """Every op of the dispatch all-parallel with projected-permutation maps (no window, no
    reduction; an op without indexing maps, such as linalg.softmax, may reduce: not elementwise),
    the root's innermost loop its output's innermost dimension, its static loops covering at least
    ELEMENTWISE_MIN points."""
    from iree.compiler import ir

    from inferx_compiler.passes.analysis.linalg_analysis import indexing_maps, loop_extents, reduction_loops

    if root.name != "linalg.generic":
        return False
    out_map = indexing_maps(root)[-1]
    if not out_map.results or out_map.results[-1] != ir.AffineDimExpr.get(out_map.n_dims - 1):
        return False  # the innermost loop would stride the output: IREE's choice stays
    for op in ops:
        maps = indexing_maps(op)
        if not maps or reduction_loops(op) or not all(m.is_projected_permutation for m in maps):
            return False
    extents = loop_extents(root)
    return bool(extents) and all(x > 0 for x in extents) and math.prod(extents) >= ELEMENTWISE_MIN


def elementwise_config_for(extents: list[int]) -> Optional[str]:
    """Rows cut into tiles of up to MAX_THREADS x ELEMENTWISE_VECTOR elements (a divisor of the
    row), ELEMENTWISE_VECTOR (or 2, 1) elements per thread, rows stacked up to MAX_THREADS threads."""
    row = extents[-1]
    vector = next(v for v in (ELEMENTWISE_VECTOR, 2, 1) if row % v == 0)
    tile = max(t for t in range(vector, min(row, MAX_THREADS * vector) + 1, vector) if row % t == 0)
    return _compilation_info(extents, tile, vector)


def _has_linalg_ext_ops(executable) -> bool:
    """Whether the dispatch computes with an iree_linalg_ext op (attention, sort, scan...), which
    the linalg ops' analysis does not see."""
    from iree.compiler import ir

    found = []

    def visit(op):
        if op.name.startswith("iree_linalg_ext.") and op.name != "iree_linalg_ext.yield":
            found.append(op.name)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    executable.walk(visit)  # (walk returns nothing in these bindings: the hit is recorded)
    return bool(found)


def rule(root, ops, executable) -> tuple[Optional[str], str]:
    """(the rule's configuration for a CUDA dispatch root, which rule), or (None, "") where IREE's
    stays. The elementwise rule needs the executable, to see that nothing else computes in it
    (an attention whose output is transposed in the same dispatch failed IREE's TileAndFuse
    with it: "failed to apply fusion + hoisting patterns")."""
    from inferx_compiler.passes.analysis.linalg_analysis import loop_extents

    if is_window_copy(root):
        return config_for(loop_extents(root)), "window copy, whole rows per workgroup"
    if is_large_elementwise(root, ops) and not _has_linalg_ext_ops(executable):
        return elementwise_config_for(loop_extents(root)), "elementwise, 4 elements a thread, up to 256 threads"
    return None, ""
