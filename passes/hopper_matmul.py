"""inferx-hopper-matmul: run f16/bf16 matmuls on Hopper (sm_90) through wgmma kernels compiled
ahead of time by Triton, dispatched from IREE as external executables.

IREE 3.13 has no Hopper code generation: on an H100/H200 its f16 matmuls are Ampere mma.sync
kernels at 60-125 TFLOP/s, a third of what the chip does. This pass replaces each static
`linalg.matmul` with f16 or bf16 operands and an f32 accumulator by a `flow.dispatch` to an
sm_90a kernel (inferx_compiler/kernels/triton_matmul.py, PTX embedded in the module):

    y[M, N] = init + a[M, K] b[K, N]        ->   p[S, M, N] = extern(a, b[, init])
                                                 y = p (S = 1) or init + sum_s p[s] (split-K)

Operands may be stored transposed (the matmul's indexing maps say so); the init is read by the
kernel unless it is a zero fill. With one slice, the kernel also finishes the elementwise ops
that follow the product (passes/analysis/matmul_epilogue.py: bias, activation, residual, the f16 cast,
and the reshapes and transposes into attention heads or back to NCHW), so the dispatch yields
their result and no IREE kernel reads the f32 product back; `epilogue=false` (or
`--disable-pass inferx-hopper-epilogue`) leaves them to IREE. Split-K products are summed by a
linalg reduction, into which IREE fuses the epilogue.

Sibling matmuls, the ones that read the same A with the same shape and layouts (an attention's
query, key and value projections), become one kernel (`triton_matmul.GroupSpec`): its grid is
the members' tiles one after the other, one main loop reads the B of the member owning the tile,
and each member's epilogue is a branch after it. One launch instead of three, and 3x the tiles
for the SMs (BERT b1: 24 tiles of 64x64 each, 72 together). The tile rule sees the group as one
matmul of the summed width; siblings stay apart when that would split K, when a member's result
is read before the last member's chain ends (one of them feeds another), or with `group=false`
(`--disable-pass inferx-hopper-group`).

The kernels are faster than IREE's on every projection shape but the smallest outputs (where
IREE's split-K code wins), with outputs within 3e-5 (relative L2) of IREE's; the fused epilogues
and groups remove kernels a call. Figures: docs/levers/hopper-matmul.md.

The tile rule, from the target's SM count (fitted on an isolated H200 sweep): 128x128 tiles (8
warps, 3 stages) when they alone give every SM a tile (128x256 when those fit one wave and 128x128
would take a second); else 64x128 (or 128x64 for wide-M outputs, 4 warps, 4 stages) when those
fill half the SMs; else 64x64, and for a long reduction (K >= 2048)
split-K with the largest power of two S that keeps tiles x S within two per SM and slices of
at least 256. A short reduction whose 64x64 tiles fill less than half the SMs takes 64x32 or
64x16 tiles, or is left to IREE's split-K code when
even those fill less than a quarter. Declined, with a remark: other targets, f32 or integer inputs, dynamic shapes,
matrix-vector shapes (M or N below 16: IREE's warp reduction), reductions that are not a
multiple of 16, weight-only int8/int4 layers (an operand dequantized from integers: IREE fuses
the dequantization into its matmul dispatch), and builds without Triton (`pip install 'inferx-compiler[hopper]'`).

`tile=BMxBN` and `split=S` force a configuration (measurement and tests); `tma=true` loads the
operand tiles through TMA descriptors the kernel makes on the device (in Triton's global
scratch, which the dispatch then sizes for the grid): right, but no faster than the cp.async
loop, so off by default.
Measured configurations: `tuning-db=FILE` (written by `inferx-compile --tune` / `inferx-tune`,
inferx_compiler/tuning/cuda_tuning.py) holds, per target and form_signature (shape, element type,
operand layouts), the fastest of tuning_candidates measured on the GPU ("iree": leave the matmul
to IREE); an entry replaces the rule for its form. A tuning build forces a candidate per matmul
with the op attribute `inferx.hopper_config = "BMxBN[:S]" | "iree"`. Order: the tile=/split=
options, the op attribute, the database, the rule.
Spelled `inferx-hopper-matmul{tile= split=0 epilogue=true group=true tma=false tuning-db=}` (the
target is the module's `inferx.target`: inferx-set-target{target=h200} before it on a bare module).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
from typing import ClassVar, Optional

from inferx_compiler.targets import HOPPER_ARCHS
from inferx_compiler.passes.infra.base import PassFailure, TargetedPass
from inferx_compiler.passes.infra.build_files import TUNING_DB_FILE, build_file
from inferx_compiler.passes.support.extern_dispatch import ExternalKernel, declare, dispatch, replace_product, scratch_types
from inferx_compiler.passes.support.iree_ir import before_reshapes, defining_op, is_zero_fill
from inferx_compiler.passes.analysis.linalg_analysis import collect, indexing_maps
from inferx_compiler.passes.analysis.matmul_epilogue import fusible_epilogue
from inferx_compiler.passes.analysis.remarks import op_counts, remark
from inferx_compiler.passes.split_reduction import MIN_PARALLEL

INPUT_TYPES = ("f16", "bf16")
LONG_REDUCTION = 2048  # split-K is considered from this K on
MIN_SLICE = 256
# (block_m, block_n, warps, stages)
LARGE, WIDE_N, WIDE_M, SMALL = (128, 128, 8, 3), (64, 128, 4, 4), (128, 64, 4, 4), (64, 64, 4, 4)
# other tiles: 128x256 where it makes one wave of what 128x128 makes in two; the rest for
# measuring them (`tile=`)
HUGE_N, HUGE_M, WIDEST_N = (128, 256, 8, 3), (256, 128, 8, 3), (64, 256, 4, 3)
NARROW_N, NARROWEST_N = (64, 32, 4, 4), (64, 16, 4, 4)
IREE_CONFIG = "iree"
# a matmul's configuration forced by the build (what `--tune` measures): parse_config's spelling
CONFIG_ATTR = "inferx.hopper_config"
_TILES = {f"{t[0]}x{t[1]}": t for t in (LARGE, WIDE_N, WIDE_M, SMALL, HUGE_N, HUGE_M, WIDEST_N, NARROW_N,
                                         NARROWEST_N)}


@dataclasses.dataclass(frozen=True)
class MatmulForm:
    m: int
    n: int
    k: int
    element_type: str
    a_transposed: bool
    b_transposed: bool


@dataclasses.dataclass(frozen=True)
class Config:
    tile: Optional[tuple[int, int, int, int]]  # None: leave the matmul to IREE
    split: int
    reason: str


def _tiles(m: int, n: int, tile) -> int:
    return math.ceil(m / tile[0]) * math.ceil(n / tile[1])


def parse_config(text: str) -> Config:
    """"iree" (leave the matmul to IREE), "BMxBN" or "BMxBN:S" (tile, split-K slices): how the
    tuning database and the tuning builds spell a configuration."""
    if text == IREE_CONFIG:
        return Config(None, 0, "IREE's own code")
    tile, _, split = text.partition(":")
    if tile not in _TILES or not (split or "1").isdigit() or int(split or 1) < 1:
        raise ValueError(f"hopper configuration '{text}': expected 'iree', BMxBN or BMxBN:S with BMxBN one of "
                         f"{', '.join(_TILES)}")
    return Config(_TILES[tile], int(split or 1), text)


def spell_config(config: Config) -> str:
    if config.tile is None:
        return IREE_CONFIG
    tile = f"{config.tile[0]}x{config.tile[1]}"
    return tile if config.split == 1 else f"{tile}:{config.split}"


def form_signature(form: MatmulForm) -> str:
    """What a tuning database entry is keyed by (with the target): the product's shape, element
    type and operand layouts (what the kernel's speed depends on; not the epilogue)."""
    layouts = ("AT" if form.a_transposed else "A") + ("BT" if form.b_transposed else "B")
    return f"{HopperMatmul.name}|{form.m}x{form.n}x{form.k}|{form.element_type}|{layouts}"


def tuning_candidates(form: MatmulForm, sms: int) -> list[str]:
    """The configurations `inferx-compile --tune` measures for `form`: IREE's own code, every tile
    that is not more than twice the output in either dimension, and split-K over 64x64 tiles for
    reductions of 1024 and more (slices of at least MIN_SLICE); the rule's pick among them."""
    block_k = reduction_block(form.k)
    out = [IREE_CONFIG]
    for name, tile in _TILES.items():
        if (tile[0] == 64 or tile[0] < 2 * form.m) and (tile[1] <= 32 or tile[1] < 2 * form.n):
            out.append(name)
    for split in (2, 4, 8):
        if form.k >= 1024 and form.k % split == 0 and (form.k // split) % block_k == 0 \
                and form.k // split >= MIN_SLICE:
            out.append(f"64x64:{split}")
    rule = spell_config(rule_config(form, sms))
    return out if rule in out else out + [rule]


def rule_config(form: MatmulForm, sms: int) -> Config:
    """The tile rule's configuration for `form` (choose() at the kernel's K step)."""
    return choose(form.m, form.n, form.k, sms, reduction_block(form.k))


def _parsed(text: str, op, where: str) -> Config:
    try:
        return parse_config(text)
    except ValueError as e:
        raise PassFailure(f"{where}: {e}", op) from None


def reduction_block(k: int) -> int:
    """The kernel's K step: the largest of 64, 32, 16 that divides the reduction."""
    return next(b for b in (64, 32, 16) if k % b == 0)


def choose(m: int, n: int, k: int, sms: int, block_k: int) -> Config:
    """The tile and split-K factor for an M x N x K matmul on `sms` SMs (see the module doc)."""
    large = _tiles(m, n, LARGE)
    if large >= sms:
        wide = _tiles(m, n, HUGE_N)
        if large < 2 * sms and wide <= sms:
            return Config(HUGE_N, 1, f"{wide} tiles of 128x256: one wave on the {sms} SMs, where {large} of "
                                     f"128x128 take two")
        return Config(LARGE, 1, f"{large} tiles of 128x128 fill the {sms} SMs")
    medium = WIDE_M if m > n else WIDE_N
    if 2 * _tiles(m, n, medium) >= sms:
        return Config(medium, 1, f"{_tiles(m, n, medium)} tiles of {medium[0]}x{medium[1]} for {sms} SMs")
    tiles = _tiles(m, n, SMALL)
    if k < LONG_REDUCTION and 2 * tiles < sms:
        return _narrow(m, n, sms, tiles)
    split = 1
    if k >= LONG_REDUCTION:
        while (tiles * split * 2 <= 2 * sms and k % (split * 2) == 0 and (k // (split * 2)) % block_k == 0
               and k // (split * 2) >= MIN_SLICE):
            split *= 2
    how = f", reduction {k} split {split} ways" if split > 1 else ""
    return Config(SMALL, split, f"{tiles} tiles of 64x64 for {sms} SMs{how}")


def _narrow(m: int, n: int, sms: int, tiles: int) -> Config:
    """A short reduction whose 64x64 tiles fill less than half the SMs: 64x32 or 64x16 tiles, the
    widest that fills half. When even 64x16 tiles fill less than a quarter, IREE's split-K code
    is faster: declined (the sweep's figures: docs/levers/hopper-matmul.md)."""
    for tile in (NARROW_N, NARROWEST_N):
        count = _tiles(m, n, tile)
        if 2 * count >= sms:
            return Config(tile, 1, f"{count} tiles of {tile[0]}x{tile[1]} for {sms} SMs ({tiles} of 64x64)")
    if 4 * count < sms:
        return Config(None, 0, f"{m}x{n} output: {count} tiles of 64x16 for {sms} SMs and a short reduction; "
                               "IREE's split-K kernel is faster there")
    return Config(NARROWEST_N, 1, f"{count} tiles of 64x16 for {sms} SMs ({tiles} of 64x64)")


def matmul_form(op) -> tuple[Optional[MatmulForm], str]:
    """(the matmul's static form, "") or (None, why it is declined)."""
    from iree.compiler import ir

    a, b, init = (v.type for v in op.operands[:3])
    if not all(isinstance(t, ir.RankedTensorType) and t.has_static_shape for t in (a, b, init)):
        return None, "dynamic shape"
    et = str(a.element_type)
    if et not in INPUT_TYPES or str(b.element_type) != et or str(init.element_type) != "f32":
        return None, f"{a.element_type} x {b.element_type} -> {init.element_type}: the kernel takes " \
                     f"f16 or bf16 inputs with an f32 accumulator"
    d0, d1, d2 = (ir.AffineDimExpr.get(i) for i in range(3))
    maps = indexing_maps(op)
    forms_a = {str(ir.AffineMap.get(3, 0, [d0, d2])): False, str(ir.AffineMap.get(3, 0, [d2, d0])): True}
    forms_b = {str(ir.AffineMap.get(3, 0, [d2, d1])): False, str(ir.AffineMap.get(3, 0, [d1, d2])): True}
    if (len(maps) != 3 or str(maps[0]) not in forms_a or str(maps[1]) not in forms_b
            or maps[2] != ir.AffineMap.get(3, 0, [d0, d1])):
        return None, "indexing maps other than a plain or transposed-operand matmul"
    a_t, b_t = forms_a[str(maps[0])], forms_b[str(maps[1])]
    m, k = (a.shape[1], a.shape[0]) if a_t else (a.shape[0], a.shape[1])
    n = b.shape[0] if b_t else b.shape[1]
    if min(m, n) < MIN_PARALLEL:
        return None, f"{m}x{n} output: a matrix-vector shape, IREE's warp reduction handles it"
    if k % 16:
        return None, f"reduction {k} is not a multiple of 16"
    if any(_dequantized(v) for v in op.operands[:2]):
        return None, ("an operand is dequantized from integers (weight-only int8/int4): IREE fuses that "
                      "into its own matmul dispatch, the kernel would need the f16 weight written out per call")
    return MatmulForm(m, n, k, et, a_t, b_t), ""


def _dequantized(value) -> bool:
    """Whether `value` (through reshapes) is computed by a linalg.generic from an integer tensor."""
    from iree.compiler import ir

    producer = defining_op(before_reshapes(value), ("linalg.generic",))
    return producer is not None and any(
        isinstance(v.type, ir.ShapedType) and isinstance(v.type.element_type, ir.IntegerType)
        for v in producer.operands)


@dataclasses.dataclass(frozen=True)
class HopperMatmul(TargetedPass):
    """f16/bf16 matmuls to sm_90a Triton kernels on Hopper targets."""

    name: ClassVar[str] = "inferx-hopper-matmul"
    level: ClassVar[str] = "iree"
    optional: ClassVar[bool] = True
    parts: ClassVar[dict] = {"inferx-hopper-epilogue": "epilogue", "inferx-hopper-group": "group"}
    summary: ClassVar[str] = "f16/bf16 matmuls to ahead-of-time sm_90a (wgmma) Triton kernels on Hopper GPUs"

    tile: str = ""
    split: int = 0
    epilogue: bool = True
    group: bool = True
    tma: bool = False
    tuning_db: str = ""

    @classmethod
    def for_build(cls, build) -> "Optional[HopperMatmul]":
        target = build.target
        if target.backend != "cuda" or target.arch not in HOPPER_ARCHS or not build.runs(cls.name):
            return None
        return cls(epilogue=build.runs("inferx-hopper-epilogue"), group=build.runs("inferx-hopper-group"),
                   tuning_db=build_file(TUNING_DB_FILE) if build.request.tuning_db else "")

    def __post_init__(self):
        if self.tile and self.tile not in _TILES:
            raise ValueError(f"tile must be one of {', '.join(_TILES)}, got '{self.tile}'")
        if self.split < 0:
            raise ValueError(f"split must be 0 (the rule) or >= 1, got {self.split}")

    def run(self, module) -> None:
        target = self.target_of(module)
        candidates = self._candidates(module, target)
        declared: dict[str, ExternalKernel] = {}
        apart, grouped = {}, set()  # by id() of the candidate's tuple (its ops get erased)
        for siblings in sibling_groups(candidates) if self.group else ():
            why = self._rewrite_siblings(module, declared, siblings, target)
            for c in siblings:
                if why:
                    apart[id(c)] = why
                else:
                    grouped.add(id(c))
        for candidate in candidates:
            if id(candidate) not in grouped:
                self._rewrite_one(module, declared, candidate, target, apart.get(id(candidate)))

    def tuning_forms(self, module) -> list[MatmulForm]:
        """The distinct forms this pass would look up in a tuning database for `module`: each
        matmul it takes, and each sibling group as the one matmul of their summed width."""
        candidates = self._candidates(module, self.target_of(module))
        forms = [form for _, form in candidates]
        for siblings in sibling_groups(candidates) if self.group else ():
            forms.append(dataclasses.replace(siblings[0][1], n=siblings[0][1].n * len(siblings)))
        return list(dict.fromkeys(forms))

    def _candidates(self, module, target) -> list:
        """(op, MatmulForm) for each linalg.matmul the kernel takes; a remark for the others."""
        from inferx_compiler.kernels import triton_matmul

        if target.backend != "cuda" or target.arch not in HOPPER_ARCHS:
            why_not = f"target '{target.name}' ({target.arch}) is not a Hopper GPU"
        else:
            why_not = triton_matmul.available()
        candidates = []
        for op in collect(module, lambda o: o.name == "linalg.matmul"):
            form, reason = (None, why_not) if why_not else matmul_form(op)
            if form is None:
                remark(self.name, op, f"declined: {reason}")
            else:
                candidates.append((op, form))
        return candidates

    def _rewrite_siblings(self, module, declared: dict, siblings: list, target) -> str:
        """One kernel for `siblings`; "" when done, else why they stay apart."""
        members, why = self.group_plan(siblings, target)
        if members is None:
            return why
        kernel = self._kernel(module, declared, members.spec, members.plans, members.how)
        for (op, form), note in zip(siblings, members.notes):
            remark(self.name, op, f"sm_90a kernel: {form.m}x{form.n}x{form.k} {form.element_type}, tile "
                                  f"{members.spec.block_m}x{members.spec.block_n}, one kernel with "
                                  f"{len(siblings) - 1} other matmul(s) reading the same A: {members.how}{note}")
        with module.context:
            _rewrite_group([op for op, _ in siblings], members.spec, kernel, members.plans, members.anchor)
        return ""

    def _rewrite_one(self, module, declared: dict, candidate: tuple, target, apart: Optional[str]) -> None:
        """A kernel for one matmul (and its epilogue), or a remark on why not."""
        op, form = candidate
        spec, how = self._spec(form, target, not is_zero_fill(op.operands[2]), op)
        if spec is None:
            remark(self.name, op, f"declined: {how}")
            return
        plan = None
        if self.epilogue and spec.split == 1:
            plan, why = fusible_epilogue(op, add_init=spec.has_init)
            how += _fused_note(plan, why)
            if plan is not None:  # (an init is now the epilogue's first input)
                spec = dataclasses.replace(spec, epilogue=plan.epilogue, has_init=False)
        if apart:
            how += f"; not grouped with its siblings: {apart}"
        kernel = self._kernel(module, declared, spec, [plan], how)
        remark(self.name, op, f"sm_90a kernel: {form.m}x{form.n}x{form.k} {form.element_type}, tile "
                              f"{spec.block_m}x{spec.block_n} ({spec.warps} warps, {spec.stages} stages): {how}")
        with op.context:
            _rewrite(op, spec, kernel, plan)

    def _kernel(self, module, declared: dict, spec, plans, how: str) -> ExternalKernel:
        """The module's executable for `spec`, compiled and declared once per distinct spec."""
        from inferx_compiler.kernels import triton_matmul

        kernel = declared.get(spec.key())
        if kernel is None:
            source = next((s for s in ("tuned", "forced") if how.startswith(s)), "rule")
            kernel = declared[spec.key()] = _external(triton_matmul.compile_kernel(spec), plans, source)
            declare(module, kernel)
        return kernel

    def group_plan(self, siblings: list, target):
        """(a _Group for matmuls reading the same A, or None and why they stay apart). The tile
        rule sees them as one matmul of their summed width; a split-K pick keeps them apart."""
        from inferx_compiler.kernels.triton_matmul import GroupSpec

        ops = [op for op, _ in siblings]
        form = siblings[0][1]
        together = dataclasses.replace(form, n=form.n * len(siblings))
        spec, how = self._spec(together, target, False)
        if spec is None or spec.split != 1:
            return None, how if spec is None else f"together their reduction would be split ({how})"
        members, plans, notes = [], [], []
        for op in ops:
            has_init = not is_zero_fill(op.operands[2])
            plan, why = fusible_epilogue(op, add_init=has_init) if self.epilogue else (None, "")
            notes.append(_fused_note(plan, why))
            member = dataclasses.replace(spec, n=form.n, has_init=has_init and plan is None,
                                         epilogue=plan.epilogue if plan else None)
            members.append(member)
            plans.append(plan)
        try:
            group = GroupSpec(tuple(members))
        except ValueError as e:
            return None, str(e)
        anchor, why = _anchor(ops, plans)
        if anchor is None:
            return None, why
        return _Group(group, plans, notes, anchor, how), ""

    def _spec(self, form: MatmulForm, target, has_init: bool, op=None):
        """(the KernelSpec, how it was chosen) or (None, why IREE keeps the matmul)."""
        from inferx_compiler.kernels.triton_matmul import KernelSpec

        block_k = reduction_block(form.k)
        config, how = self._config(form, target, op)
        tile, split = config.tile, config.split
        if tile is None:
            return None, how
        if form.k % split or (form.k // split) % block_k:
            return None, f"split={split} does not cut reduction {form.k} into multiples of {block_k}"
        spec = KernelSpec(form.m, form.n, form.k, form.element_type, form.a_transposed, form.b_transposed,
                          has_init=has_init and split == 1, split=split, block_m=tile[0], block_n=tile[1],
                          block_k=block_k, warps=tile[2], stages=tile[3], tma=self.tma and _tma_fits(form))
        return spec, how

    def _config(self, form: MatmulForm, target, op) -> tuple[Config, str]:
        """The configuration, first found of: the pass options (tile=, split=), the op's
        CONFIG_ATTR (a tuning build's candidate), the tuning database, the rule."""
        rule = rule_config(form, target.cores or 1)
        if self.tile or (self.split and rule.tile is not None):
            tile = _TILES[self.tile] if self.tile else rule.tile
            return (Config(tile, self.split or rule.split or 1, ""),
                    f"forced (tile={self.tile or 'rule'} split={self.split or 'rule'})")
        if op is not None and CONFIG_ATTR in op.attributes:
            from iree.compiler import ir

            text = ir.StringAttr(op.attributes[CONFIG_ATTR]).value
            config = _parsed(text, op, f"{CONFIG_ATTR} on the op")
            return config, f"forced by {CONFIG_ATTR} = \"{text}\"" + ("" if config.tile else ": IREE's own code")
        entry = self._tuning_entry(form, target)
        if entry is not None:
            config = _parsed(str(entry.get("config")), op, f"tuning database {self.tuning_db}, "
                                                         f"entry {form_signature(form)}")
            measured = f"{entry.get('us', 0):.1f} us, the rule's {entry.get('rule', '?')} {entry.get('rule_us', 0):.1f} us"
            if config.tile is None:
                return config, f"tuned: IREE's own code is fastest ({measured})"
            return config, f"tuned: {entry['config']} ({measured})"
        return rule, rule.reason

    def _tuning_entry(self, form: MatmulForm, target) -> Optional[dict]:
        """The tuning database's entry (`tuning-db=`) for `form` on this target, or None."""
        if not self.tuning_db:
            return None
        from inferx_compiler.tuning import tuning_db

        return tuning_db.lookup(self._tuning_db, tuning_db.target_key(target), form_signature(form))

    @functools.cached_property
    def _tuning_db(self) -> dict:
        from inferx_compiler.tuning import tuning_db

        return tuning_db.load(self.tuning_db)


@dataclasses.dataclass(frozen=True)
class _Group:
    spec: object  # triton_matmul.GroupSpec
    plans: list  # each member's EpiloguePlan, or None
    notes: list  # each member's remark on its epilogue
    anchor: object  # the dispatch goes in front of this op
    how: str


def sibling_groups(candidates: list) -> list[list]:
    """Lists of two or more (op, form) candidates in one block that read the same A with the
    same form (shape, element type, layouts): horizontal fusion candidates. Reshapes of one
    value to one type are one value (row-major data, reinterpreted the same way)."""
    by_key = collections.defaultdict(list)
    for candidate in candidates:
        op, form = candidate
        a = op.operands[0]
        by_key[(before_reshapes(a), str(a.type), form, op.operation.block)].append(candidate)
    return [group for group in by_key.values() if len(group) > 1]


def _anchor(ops: list, plans: list):
    """(the op before which one dispatch can replace every member's chain, "") or (None, why
    not): the op right after the last definition of anything the members read, provided no
    member reads another's chain and each chain's result is read only after that point."""
    from iree.compiler import ir

    block = ops[0].operation.block
    in_order = list(block.operations)
    position = {o: i for i, o in enumerate(in_order)}
    chains = set()
    for op, plan in zip(ops, plans):
        chains.update(o.operation for o in [op, *(plan.ops if plan is not None else [])])
    read = [v for op, plan in zip(ops, plans) for v in [*op.operands, *(plan.operands if plan is not None else [])]]
    latest = -1
    for value in read:
        if isinstance(value.owner, ir.Block):
            continue  # an argument: there from the start
        if value.owner.operation in chains:
            return None, f"one of them reads another's result (through {value.owner.operation.name})"
        where = _in_block(value.owner.operation, position)
        latest = latest if where is None else max(latest, where)  # (None: from an enclosing region)
    for op, plan in zip(ops, plans):
        for use in (plan.result if plan is not None else op.results[0]).uses:
            where = _in_block(use.owner.operation, position)
            if where is None or where <= latest:
                return None, f"a result is read (by {use.owner.operation.name}) before all their inputs exist"
    return in_order[latest + 1], ""


def _in_block(op, position: dict) -> Optional[int]:
    """The position of `op`, or of its ancestor, in the block `position` indexes."""
    while op is not None and op not in position:
        parent = op.parent
        op = parent.operation if parent is not None else None
    return position.get(op) if op is not None else None


def _fused_note(plan, why: str) -> str:
    """The remark's words on the epilogue: what was fused, or why nothing was."""
    if plan is None:
        return f"; epilogue not fused: {why}" if why else ""
    return f"; fused {len(plan.ops)} ops after it ({op_counts(plan.fused)})" if plan.ops else ""


def _tma_fits(form: MatmulForm) -> bool:
    """TMA descriptors need every operand row (K, or M / N when stored transposed) to be a
    multiple of 16 bytes: 8 f16/bf16 elements."""
    rows = [form.m if form.a_transposed else form.k, form.k if form.b_transposed else form.n]
    return all(r % 8 == 0 for r in rows)


def _external(compiled, plans, source: str) -> ExternalKernel:
    from inferx_compiler.passes.infra.attributes import CONFIG_ATTR, REPORT_ATTR

    spec = compiled.spec
    n = spec.total_n if spec.outputs > 1 else spec.n  # a group: its members side by side
    what = f"{spec.m}x{n}x{spec.k}" + (f" ({spec.outputs} matmuls)" if spec.outputs > 1 else "")
    name = f"inferx_matmul_{spec.m}x{n}x{spec.k}_{spec.key()[:8]}"
    fused = sorted({f for plan in plans if plan is not None for f in plan.fused})
    report = {"root": "inferx_matmul (Triton, sm_90a)", "kind": "contraction", "element_type": spec.element_type,
              "loops": [spec.m, n, spec.k], "flops": 2 * spec.m * n * spec.k, "linalg_ops": 0, "fused": fused}
    config = {"source": f"{source} (inferx-hopper-matmul)", "signature": f"matmul {what} {spec.element_type}",
              "config": f"tile {spec.block_m}x{spec.block_n}x{spec.block_k}, {spec.warps} warps, {spec.stages} stages, "
                        f"split {spec.split}", "candidates": 0}
    return ExternalKernel(name, compiled.name, compiled.ptx, spec.grid, compiled.threads, compiled.shared_bytes,
                          read_only=spec.input_bindings, written=compiled.parameters - spec.input_bindings,
                          annotations=((REPORT_ATTR, report), (CONFIG_ATTR, config)),
                          scratch_bytes=compiled.scratch_bytes)


def _rewrite_group(ops: list, group, kernel: ExternalKernel, plans: list, anchor) -> None:
    """Sibling matmuls (and their epilogues) -> one flow.dispatch in front of `anchor`, with A
    once, then each member's B, init and epilogue inputs; one result per member."""
    from iree.compiler import ir
    from iree.compiler.dialects import tensor

    with ir.InsertionPoint(anchor), anchor.location:
        arguments = [ops[0].operands[0]]
        result_types = []
        for op, member, plan in zip(ops, group.members, plans):
            arguments += [op.operands[1]] + ([op.operands[2]] if member.has_init else [])
            arguments += plan.operands if plan is not None else []
            result_types.append(plan.result.type if plan is not None else
                                ir.RankedTensorType.get([1, member.m, member.n], ir.F32Type.get()))
        results = dispatch(kernel, arguments, result_types + scratch_types(kernel, len(ops)))
        for op, plan, result in zip(ops, plans, results):
            if plan is None:
                result = tensor.CollapseShapeOp(op.operands[2].type, result, [[0, 1], [2]]).result
            (plan.result if plan is not None else op.results[0]).replace_all_uses_with(result)
    for op, plan in zip(ops, plans):
        for fused in reversed(plan.ops if plan is not None else []):
            fused.erase()
        op.erase()


def _rewrite(op, spec, kernel: ExternalKernel, plan=None) -> None:
    """matmul -> flow.dispatch to the kernel (+ the split-K sum); with an epilogue plan the
    dispatch replaces the fused ops too and yields their result."""
    a, b, init = op.operands[:3]
    with op.location:
        replace_product(op, kernel, [a, b, init] if spec.has_init else [a, b], spec.split, init, plan)
