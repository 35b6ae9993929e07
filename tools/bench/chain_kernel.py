"""An experiment, not part of builds: a chain of one-row int4 layers in one persistent Triton
kernel (an MLP at batch 1 read in one launch instead of a launch a layer), run by
tools/bench/gpu_chain_sweep.py. Measured on an H100 on 2026-12-06 (docs/bench/2026-12-06-h100-int4-chain/)
it was no faster than the launch-a-layer kernel builds use (8x4096^2, kernel time 58.9-61.3 us
against 53.7-54.2), because the layers' arithmetic, not their launches or the barriers, is
what the time goes to; and IREE 3.13's CUDA HAL takes at most 16 bindings an export, which an
8-layer chain (30 bindings) exceeds. The pass that built it into models (inferx-dequant-chain)
was taken out again (commit f22fcde holds it, with its lit tests).

Each layer of an int4 MLP at batch 1 is a pass over its packed weight (the one-row form of
triton_dequant.py). The hypothesis this kernel tested: run as one launch a layer, the launch
boundaries cost more than the reading (on an H200, eight read-only launches over the 8x4096^2
MLP's 69 MB took 33 us, the same bytes in one launch 19.5: tools/bench/gpu_read_floor.py,
docs/bench/2026-12-04-h200-int4-row/). So this kernel takes the whole chain:

    h0 = x                                      (f16, or f32 cast in the kernel)
    h[i+1] = epilogue_i(h[i] . dequantize(w_i, s_i))     for each layer i

on PROGRAMS programs that are all resident at once (a few a SM). Every program takes one tile of
BN_i weight rows of each layer (BN_i the smallest power of two that gives every program at most
one tile), so that it can issue the loads of its next tile's weights and scales before it waits
for the previous layer (the weights do not depend on it): the wait overlaps the reading. Between
layers the programs meet at a grid-wide barrier, a counter in global memory: after storing its
part of h[i+1] a program adds one (release, after a CTA barrier so that every thread's stores
are ordered before it) and, before reading h[i+1], waits until the counter reaches (i+1) x
PROGRAMS (thread 0 polls, the others wait at a CTA barrier: `_wait`). The counter must be zero at the start of a call
(the caller fills it); h[1..L-1] live in a scratch buffer of f16.

The products are triton_dequant's dot-free one-row form (f16 products, sums of eight, f32 group
sums times each group's scale); each layer's epilogue (bias, activation, the f16 cast for the
next layer) is triton_matmul's generated code. Deadlock-free only when every program is resident
at once: the caller picks PROGRAMS at most the SM count times the programs a SM can hold (a small
multiple of the SM count: the kernel uses little shared memory and few registers).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json

from inferx_compiler.kernels.triton_dequant import _WIDEN_INT4, INT4_TO_F16, INT4_WORDS_DOT, DequantSpec
from inferx_compiler.kernels.triton_matmul import epilogue_code

ENTRY = "inferx_dequant_chain"
X_TYPES = {"f16": "fp16", "f32": "fp32"}
# a program's tile of one layer stays in registers while it waits: at most this many packed bytes
MAX_TILE_BYTES = 64 << 10
SUB_ROWS = 4  # rows whose products are formed at once (the one-row form's best tile: its f16 products fit)
# the counter read with acquire semantics (its later loads see what the arriving programs stored)
ACQUIRE_LOAD = "ld.acquire.gpu.global.b32 $0, [$1];"
# the same by thread 0 alone; the program's other threads read `target` ($2) and stop at once
POLL_ONE = """{
.reg .pred p;
.reg .u32 t;
mov.u32 t, %tid.x;
setp.eq.u32 p, t, 0;
mov.b32 $0, $2;
@p ld.acquire.gpu.global.b32 $0, [$1];
}"""
# thread 0 polls with relaxed loads and makes the acquire one fence after the last (the PTX memory
# model's acquire pattern: a fence.acq_rel after a relaxed read that observed the release)
POLL_ONE_RELAXED = POLL_ONE.replace("ld.acquire.gpu", "ld.relaxed.gpu")
FENCE_ONE = """{
.reg .pred p;
.reg .u32 t;
mov.u32 t, %tid.x;
setp.eq.u32 p, t, 0;
@p fence.acq_rel.gpu;
mov.b32 $0, 0;
}"""
BARRIERS = ("one", "fence", "all", "none")


@dataclasses.dataclass(frozen=True)
class ChainLayer:
    """One layer: an N x K int4 weight in groups of `group` along K, and its epilogue (a
    triton_matmul.Epilogue: the ops after the product; all but the last layer's end in f16)."""

    n: int
    k: int
    group: int
    epilogue: object

    def spec(self, block_n: int, fast: bool) -> DequantSpec:
        """The one-row DequantSpec of this layer (its checks, and the names the epilogue code reads)."""
        return DequantSpec(1, self.n, self.k, "int4", self.group, False, 1, 1, block_n, self.k, dot=False,
                           epilogue=self.epilogue, fast=fast)


@dataclasses.dataclass(frozen=True)
class ChainSpec:
    layers: tuple  # ChainLayer, ...: layer i + 1 reads layer i's result (its K is layer i's N)
    programs: int  # resident programs (the grid); every one takes part in every barrier
    x_type: str = "f16"  # the first layer's input: f16, or f32 (cast in the kernel)
    warps: int = 4
    arch: int = 90
    fast: bool = True  # the PTX int4 widening (False: Triton's casts, for the interpreter)
    prefetch: bool = True  # a layer's weights loaded before the wait for its input
    # registers a thread may use (PTX .maxnreg): low enough that programs / SMs programs fit a SM
    # at once, which the barrier needs (0: the compiler's choice)
    max_registers: int = 0
    barrier: str = "one"  # who spins at the grid barrier (see _wait): one thread, all, or none (diagnostic)
    words: bool = False  # the weights as 32-bit words times x pairs (triton_dequant's INT4_WORDS_DOT)

    def __post_init__(self):
        if len(self.layers) < 2:
            raise ValueError("a chain takes at least two layers")
        if self.x_type not in X_TYPES:
            raise ValueError(f"input type {self.x_type}: the chain takes {', '.join(X_TYPES)}")
        if self.barrier not in BARRIERS:
            raise ValueError(f"barrier {self.barrier}: one of {', '.join(BARRIERS)}")
        if self.programs < 1:
            raise ValueError("a chain needs at least one program")
        for i, layer in enumerate(self.layers):
            groups = layer.k // layer.group if layer.group and layer.k % layer.group == 0 else 0
            if not groups or groups & (groups - 1):
                raise ValueError(f"layer {i}: K={layer.k} is not a power-of-two number of int4 groups of "
                                 f"{layer.group}")
            if layer.epilogue is None:
                raise ValueError(f"layer {i}: a chain layer finishes its epilogue in the kernel")
            if i and layer.k != self.layers[i - 1].n:
                raise ValueError(f"layer {i} reduces over K={layer.k}, layer {i - 1} gives N={self.layers[i - 1].n}")
            if i < len(self.layers) - 1 and layer.epilogue.element_type != "f16":
                raise ValueError(f"layer {i}: its result ({layer.epilogue.element_type}) is not the f16 the "
                                 f"next layer reads")
            if self.block_n(i) * layer.k // 2 > MAX_TILE_BYTES:
                raise ValueError(f"layer {i}: {self.block_n(i)} rows of {layer.k} int4 values a program exceed "
                                 f"{MAX_TILE_BYTES} bytes (more programs, or a layer of its own)")
            layer.spec(self.block_n(i), self.fast)  # the one-row form's own checks

    def block_n(self, i: int) -> int:
        """Weight rows a program takes of layer i: the smallest power of two with one tile a program."""
        rows = -(-self.layers[i].n // self.programs)
        return 1 << (rows - 1).bit_length()

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.programs, 1, 1)


    @property
    def scratch_elements(self) -> int:
        """f16 elements of the buffer that holds the results of every layer but the last."""
        return sum(layer.n for layer in self.layers[:-1])


    def key(self) -> str:
        from inferx_compiler.kernels.triton_matmul import TRITON_VERSION

        text = (json.dumps(dataclasses.asdict(self), sort_keys=True, default=str) + kernel_source(self)
                + INT4_TO_F16 + INT4_WORDS_DOT + ACQUIRE_LOAD + POLL_ONE + POLL_ONE_RELAXED + FENCE_ONE)
        return hashlib.sha256((text + TRITON_VERSION).encode()).hexdigest()[:16]


def registers_for(programs_per_sm: int, warps: int, sm_registers: int = 65536) -> int:
    """The most registers a thread may use for `programs_per_sm` programs of `warps` warps to be
    resident on one SM at once (the register file: 64 K 32-bit registers a SM from sm_80 to
    sm_90), in the allocation's steps of 8, at most 255."""
    return min(255, sm_registers // (programs_per_sm * warps * 32) // 8 * 8)


def pointers(spec: ChainSpec) -> list[str]:
    """The kernel's pointer parameters in the launch's argument order: x, each layer's weight,
    scales and epilogue inputs, the barrier counter (read and written), the result, the scratch."""
    names = ["x_ptr"]
    for i, layer in enumerate(spec.layers):
        names += [f"l{i}_w_ptr", f"l{i}_s_ptr"] + [f"l{i}_x{j}_ptr" for j in range(len(layer.epilogue.inputs))]
    return names + ["bar_ptr", "out_ptr", "act_ptr"]


def kernel_source(spec: ChainSpec) -> str:
    """The @triton.jit function's source: the layers one after another, unrolled (each has its own
    sizes and epilogue), with the grid barrier between them."""
    lines = [f"def {ENTRY}({', '.join(pointers(spec))}):",
             "    pid = tl.program_id(0)",
             "    rm = tl.arange(0, 1)",
             "    M = 1",
             "    row_ok = rm < M"]
    offset = 0
    for i, layer in enumerate(spec.layers):
        lines += _layer_lines(spec, i, offset)
        offset += layer.n
    return _WIDEN_INT4 + "\n".join(lines) + "\n"


def _layer_lines(spec: ChainSpec, i: int, offset: int) -> list[str]:
    """Layer i's code: its weight tile's loads (SUB_ROWS rows a part), the wait for its input
    (after the loads when prefetching), x loaded once, then a part at a time the products, the
    group sums and the epilogue; the arrival at the barrier after the last part's store."""
    layer, bn = spec.layers[i], spec.block_n(i)
    sub = min(bn, SUB_ROWS)
    groups, last = layer.k // layer.group, i == len(spec.layers) - 1
    source = "x_ptr" if i == 0 else f"act_ptr + {offset - layer.k}"
    unit = 8 if spec.words else 2  # int4 values a loaded element: a 32-bit word or a byte
    loads = [f"rg = tl.arange(0, {groups})",
             f"rb = (rg * {layer.group // unit})[None, :, None] + tl.arange(0, {layer.group // unit})[None, None, :]"]
    weights = f"l{i}_w_ptr.to(tl.pointer_type(tl.int32))" if spec.words else f"l{i}_w_ptr"
    for p in range(bn // sub):
        loads += [
            f"rn{p} = pid * {bn} + {p * sub} + tl.arange(0, {sub})",
            f"col_ok{p} = rn{p} < {layer.n}",
            f"packed{p} = tl.load({weights} + rn{p}[:, None, None] * {layer.k // unit} + rb, "
            f"mask=col_ok{p}[:, None, None], other=0)",
            f"scale{p} = tl.load(l{i}_s_ptr + rn{p}[:, None] * {groups} + rg[None, :], mask=col_ok{p}[:, None], "
            "other=0.0)"]
    body = [f"# layer {i}: {layer.n} x {layer.k}, int4 groups of {layer.group}, {bn} rows a program",
            f"N = {layer.n}"]
    wait = _wait(spec, i) if i else []
    body += loads + wait if spec.prefetch else wait + loads
    if spec.words:  # x pairs in INT4_WORDS_DOT's order, read past L1 (other SMs wrote them)
        body.append(f"pairs = _x_pairs({source}, rb * 8, '.cg')")
    else:
        body += [f"xw = tl.load({source} + rg[:, None] * {layer.group} + tl.arange(0, {layer.group})[None, :], "
                 "cache_modifier='.cg').to(tl.float16)[None]"]
    body.append(f"l{i}_out_ptr = " + ("out_ptr" if last else f"act_ptr + {offset}"))
    epilogue = [line.strip() for line in epilogue_code(layer.spec(sub, spec.fast), f"l{i}_").splitlines()]
    for p in range(bn // sub):
        body += [f"rn = rn{p}", f"col_ok = col_ok{p}",
                 (f"acc = tl.sum(tl.sum(_word_dots(packed{p}, pairs, {spec.fast}), axis=2) "
                  f"* scale{p}.to(tl.float32), axis=1)[None, :]" if spec.words else
                  f"acc = tl.sum(_group_sums(packed{p}, xw, scale{p}, {spec.fast}), axis=1)[None, :]"),
                 "inside = row_ok[:, None] & col_ok[None, :]"] + epilogue
    if not last:
        body += ["tl.debug_barrier()", "tl.atomic_add(bar_ptr, 1, sem='release', scope='gpu')"]
    return [f"    {line}" for line in body]


def _wait(spec: ChainSpec, i: int) -> list[str]:
    """Wait until every program has arrived after layer i - 1. "one": thread 0 of the program
    spins on acquire loads of the counter (PTX: Triton has no acquire load, and folds an atomic
    add of zero away) while the others wait at a CTA barrier, which orders their later loads
    after its acquire; "fence": thread 0 spins on relaxed loads, then one acquire fence; "all":
    every thread spins on acquire loads; the interpreter (fast=False) spins on volatile
    loads (it runs the programs one after another: there is nothing to order); "none" does not
    wait (a timing diagnostic: the layers race)."""
    target = i * spec.programs
    if spec.barrier == "none":
        return []
    if not spec.fast:
        return [f"while tl.load(bar_ptr, volatile=True) < {target}:", "    pass"]
    if spec.barrier == "all":
        return [f"while tl.inline_asm_elementwise(ACQUIRE_LOAD, '=r,l', [bar_ptr], dtype=tl.int32, is_pure=False, "
                f"pack=1) < {target}:", "    pass"]
    poll = "POLL_ONE" if spec.barrier == "one" else "POLL_ONE_RELAXED"
    lines = [f"target = tl.full([], {target}, tl.int32)",
             f"while tl.inline_asm_elementwise({poll}, '=r,l,r', [bar_ptr, target], dtype=tl.int32, is_pure=False, "
             "pack=1) < target:", "    pass"]
    if spec.barrier == "fence":
        lines.append("tl.inline_asm_elementwise(FENCE_ONE, '=r,l', [bar_ptr], dtype=tl.int32, is_pure=False, pack=1)")
    return lines + ["tl.debug_barrier()"]


@functools.lru_cache(maxsize=32)
def kernel_function(spec: ChainSpec):
    """The @triton.jit function for `spec` (JIT-compiled by the sweep; maxnreg is a launch option there)."""
    import triton.language as tl

    from inferx_compiler.kernels.triton_matmul import jit_from_source

    return jit_from_source(kernel_source(spec), ENTRY, f"inferx-dequant-chain-{spec.key()}",
                           {"INT4_TO_F16": tl.constexpr(INT4_TO_F16), "INT4_WORDS_DOT": tl.constexpr(INT4_WORDS_DOT),
                            "ACQUIRE_LOAD": tl.constexpr(ACQUIRE_LOAD), "POLL_ONE": tl.constexpr(POLL_ONE),
                            "POLL_ONE_RELAXED": tl.constexpr(POLL_ONE_RELAXED), "FENCE_ONE": tl.constexpr(FENCE_ONE)})
