"""A weight-only int8/int4 matrix-times-few-rows kernel for CUDA GPUs, written in Triton and
compiled ahead of time (no GPU needed), for the weight-only layers inferx-quantize-contractions
makes on CUDA targets.

IREE 3.13 compiles such a layer (f16 activations, the weight dequantized in the matmul's
dispatch) into a matrix-vector loop that reads the packed weight far below the memory's rate
(the 8x4096^2 MLP at batch 1 in int4: about 80x the time its weights and scales take at the
GPU's copy rate; docs/levers/gpu-int4-matvec.md). A layer with few rows is a pass over its
weight, so this kernel is built to stream it: each program takes BN weight rows (the weight is stored reduction-innermost,
[N, K], so a row is K contiguous values: 16-byte loads) and one slice of K, and computes

    out[s, m, n] = sum_{k in slice s} x[m, k] * w[n, k] * scale          (+ init[m, n] when S = 1)

    int8: w [N, K] s8, scale[n] f16, applied to the f32 sum once
    int4: w [N, K/G, G] s4 packed two a byte (element 2i in the low nibble, IREE's i4 layout),
          scale[n, g] f16, applied to each group's f32 sum (one group a loop step)

with x [M, K] f16 (M small: the rows ride a 16-row dot, zero-padded), the integers widened to
f16 exactly, f32 accumulation. One int4 row has a dot-free form (`dot=False`): the products
and sums of eight in f16 on the CUDA cores (relative error about 5e-4, the order of the
tensor-core form's f16-scaled weights), f32 sums a group; with `programs` set, x stays in
registers and each program takes whole weight rows in turn (`_RESIDENT_LOADS`); builds take its
word form there (`words`: the weight as 32-bit words, x as the f16 pairs of each word,
INT4_WORDS_DOT: four words a call, 14.75 instructions a word, no relayout), each next tile
loaded ahead, under a register budget (`max_registers`): together about as fast as a kernel
that only reads the weights, a launch a layer (docs/levers/gpu-int4-matvec.md). Slices (S > 1,
the grid's second dimension) put more loads in flight for a narrow output and are summed by the
caller.

With one slice the kernel can also finish the elementwise ops after the product (an `Epilogue`,
as passes/analysis/matmul_epilogue.py finds it for the Hopper matmuls: bias, activation, the f16 cast
for the next layer), so that no second kernel reads the product back. The source is the fixed
main loop with a generated head and store (`kernel_source`); compilation and the PTX cache are
triton_matmul's (the one place that touches Triton's compiler API).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import textwrap
from typing import Optional

from inferx_compiler.kernels.triton_matmul import TileGrid

KINDS = ("int8", "int4", "f16")  # f16: the weight as stored, no scales (a float decode step)

# Integers to f16 without the conversion unit (I2F runs at a quarter of the FP32 rate: at 8 us a
# 4096x4096 int4 layer on an H200 it, not memory, was the limit): a value v placed in the low
# mantissa bits of 1024.0 (0x6400) reads as 1024 + v, exact; the sign is handled by flipping the
# top bit (v ^ 8 = v + 8 for a signed nibble, v ^ 128 = v + 128 for a byte) and subtracting the
# offset with f16x2 arithmetic, two values an instruction. Four bytes in a register each call.
# int4: the low nibbles of bytes 0..3 (elements 2i) and the high nibbles (2i + 1), the high ones
# read at 16x their value (mantissa bits 4-7) and scaled back by an fma: 1152 + 16 v -> v.
INT4_TO_F16 = """{
.reg .b32 z, t0, t1, c, h, o;
mov.b32 z, 0;
prmt.b32 t0, $4, z, 0x4140;
prmt.b32 t1, $4, z, 0x4342;
lop3.b32 $0, t0, 0x000F000F, 0x64086408, 0x6A;
lop3.b32 $1, t1, 0x000F000F, 0x64086408, 0x6A;
lop3.b32 $2, t0, 0x00F000F0, 0x64806480, 0x6A;
lop3.b32 $3, t1, 0x00F000F0, 0x64806480, 0x6A;
mov.b32 c, 0x64086408;
sub.f16x2 $0, $0, c;
sub.f16x2 $1, $1, c;
mov.b32 h, 0x2C002C00;
mov.b32 o, 0xD480D480;
fma.rn.f16x2 $2, $2, h, o;
fma.rn.f16x2 $3, $3, h, o;
}"""
# int8: each byte (top bit flipped) below the high byte 0x64: 1152 + v -> v.
INT8_TO_F16 = """{
.reg .b32 q, t, c;
xor.b32 q, $2, 0x80808080;
mov.b32 t, 0x64646464;
prmt.b32 $0, q, t, 0x4140;
prmt.b32 $1, q, t, 0x4342;
mov.b32 c, 0x64806480;
sub.f16x2 $0, $0, c;
sub.f16x2 $1, $1, c;
}"""


def _word_products(word: str, pairs: tuple, first: bool) -> str:
    """PTX: the packed word `word` widened (elements (0, 4), (2, 6) in a, b; (1, 5), (3, 7) read at
    16x their value in c, d and scaled back by the fma) and its products with `pairs` added to the
    f16 pair sums s (started here when `first`)."""
    start = f"mul.rn.f16x2 s, a, {pairs[0]};" if first else f"fma.rn.f16x2 s, a, {pairs[0]}, s;"
    return f"""shr.b32 t, {word}, 8;
lop3.b32 a, {word}, 0x000F000F, 0x64086408, 0x6A;
lop3.b32 b, t, 0x000F000F, 0x64086408, 0x6A;
lop3.b32 c, {word}, 0x00F000F0, 0x64806480, 0x6A;
lop3.b32 d, t, 0x00F000F0, 0x64806480, 0x6A;
sub.f16x2 a, a, k;
sub.f16x2 b, b, k;
fma.rn.f16x2 c, c, h, o;
fma.rn.f16x2 d, d, h, o;
{start}
fma.rn.f16x2 s, b, {pairs[1]}, s;
fma.rn.f16x2 s, c, {pairs[2]}, s;
fma.rn.f16x2 s, d, {pairs[3]}, s;
"""


def _pair_sum_to_f32(dst: str) -> str:
    """PTX: the two f16 halves of the pair sums s, each to f32, added into `dst`."""
    return f"mov.b32 {{s0, s1}}, s;\ncvt.f32.f16 f0, s0;\ncvt.f32.f16 f1, s1;\nadd.f32 {dst}, f0, f1;\n"


# int4, four 32-bit words of packed weights ($4..$7, elements 0..7 each, element e in bits 4e..4e+3)
# times x held as f16 pairs in the order the widening yields them ($8.. = (x0, x4), $12.. = (x2, x6),
# $16.. = (x1, x5), $20.. = (x3, x7), one a word): each word's nibbles widened in place (its low
# nibbles of each half at bits 0 and 16, then shifted by 8: no byte permutes), the products of two
# words summed as f16 sums of eight, those two sums taken to f32 and added, returned in $0 ($1..$3
# are zero, for the pack of four: the caller keeps every fourth value). 14.75 instructions a word.
INT4_WORDS_DOT = ("{\n.reg .b32 t, a, b, c, d, k, h, o, s;\n.reg .b16 s0, s1;\n.reg .f32 f0, f1, g;\n"
                  "mov.b32 k, 0x64086408;\nmov.b32 h, 0x2C002C00;\nmov.b32 o, 0xD480D480;\n"
                  + "".join(_word_products(f"${4 + i}", tuple(f"${8 + 4 * p + i}" for p in range(4)), i % 2 == 0)
                            + (_pair_sum_to_f32("g" if i == 1 else "f0") if i % 2 else "") for i in range(4))
                  + "add.f32 $0, g, f0;\nmov.b32 $1, 0;\nmov.b32 $2, 0;\nmov.b32 $3, 0;\n}")

_CONSTANTS = ("M", "N", "K", "K_SLICE", "GROUP", "INT4", "FLOAT", "HAS_INIT", "BM", "BN", "BK", "FAST", "W_LEFT", "DOT", "PROGRAMS",
              "AHEAD", "WORDS", "WARP_ROWS")

# Packed int4 bytes -> (elements 2j, elements 2j + 1) as f16, by INT4_TO_F16 or Triton's casts.
_WIDEN_INT4 = '''\
@triton.jit
def _widen_int4(packed, FAST: tl.constexpr):
    if FAST:
        lo, hi = tl.inline_asm_elementwise(INT4_TO_F16, "=r,=r,=r,=r,r", [packed], dtype=(tl.float16, tl.float16),
                                           is_pure=True, pack=4)
    else:
        wide = packed.to(tl.int32)
        lo = ((wide << 28) >> 28).to(tl.float16)
        hi = ((wide << 24) >> 28).to(tl.float16)
    return lo, hi


@triton.jit
def _row_tile(w_ptr, s_ptr, rn, ro, rg, N: tl.constexpr, K: tl.constexpr, GROUP: tl.constexpr, WORDS: tl.constexpr,
              WARP_ROWS: tl.constexpr):
    """Whole weight rows `rn` (at offsets `ro` a row: packed bytes, or 32-bit words with WORDS)
    and their scales (groups `rg`); rows past N read as zeros. WARP_ROWS: the rows on the middle
    axis, [K / 1024, rows, 128] words and [K / 1024, rows, 32] scales (one a four-word quad)."""
    ok = rn < N
    if WARP_ROWS:
        weights = tl.load(w_ptr.to(tl.pointer_type(tl.int32)) + rn[None, :, None] * (K // 8) + ro,
                          mask=ok[None, :, None], other=0)
        scale = tl.load(s_ptr + rn[None, :, None] * (K // GROUP) + rg, mask=ok[None, :, None], other=0.0)
    else:
        if WORDS:
            weights = tl.load(w_ptr.to(tl.pointer_type(tl.int32)) + rn[:, None, None] * (K // 8) + ro,
                              mask=ok[:, None, None], other=0)
        else:
            weights = tl.load(w_ptr + rn[:, None, None] * (K // 2) + ro, mask=ok[:, None, None], other=0)
        scale = tl.load(s_ptr + rn[:, None] * (K // GROUP) + rg[None, :], mask=ok[:, None], other=0.0)
    return weights, scale


@triton.jit
def _group_sums(packed, x, scale, FAST: tl.constexpr):
    """Packed int4 bytes [rows, groups, group / 2] times x [1, groups, group] (f16): products and
    sums of eight in f16 (no conversion a value), then f32 sums a group, times its scale."""
    lo, hi = _widen_int4(packed, FAST)
    rows: tl.constexpr = packed.shape[0]
    groups: tl.constexpr = packed.shape[1]
    half: tl.constexpr = packed.shape[2]
    prod = tl.reshape(tl.join(lo, hi), (rows, groups, 2 * half)) * x
    part = tl.sum(tl.reshape(prod, (rows, groups, half // 4, 8)), axis=3).to(tl.float32)
    return tl.sum(part, axis=2) * scale.to(tl.float32)


@triton.jit
def _x_pair(x_ptr, first, A: tl.constexpr, B: tl.constexpr, CACHE: tl.constexpr):
    """x[first + A] and x[first + B] as f16 in one 32-bit word, A in the low half (loads with
    cache modifier CACHE: "" or, for values other programs of the launch wrote, ".cg")."""
    lo = tl.load(x_ptr + first + A, cache_modifier=CACHE).to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32)
    hi = tl.load(x_ptr + first + B, cache_modifier=CACHE).to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32)
    return (lo & 0xFFFF) | (hi << 16)


@triton.jit
def _half(pair, HIGH: tl.constexpr):
    return ((pair >> (16 * HIGH)) & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def _nibble(words, E: tl.constexpr):
    """Element E of each packed int4 word (bits 4E..4E+3, signed) as f16."""
    return ((words << (28 - 4 * E)) >> 28).to(tl.float16)


@triton.jit
def _x_pairs(x_ptr, first, CACHE: tl.constexpr):
    """x as the f16 pairs of the packed words whose first elements are at offsets `first`, in
    INT4_WORDS_DOT's order: (x0, x4), (x2, x6), (x1, x5), (x3, x7) of each word."""
    return (_x_pair(x_ptr, first, 0, 4, CACHE), _x_pair(x_ptr, first, 2, 6, CACHE),
            _x_pair(x_ptr, first, 1, 5, CACHE), _x_pair(x_ptr, first, 3, 7, CACHE))


@triton.jit
def _word_dots(words, pairs, FAST: tl.constexpr):
    """Packed int4 words [rows, groups, words a group] times their x pairs (`_x_pairs`, broadcast
    over the rows): the f32 sums of each four consecutive words' products [rows, groups, words a
    group / 4], by INT4_WORDS_DOT (a thread holds a 16-byte load's four words in a row), or the
    same sums with Triton's casts (the interpreter runs no PTX)."""
    rows: tl.constexpr = words.shape[0]
    groups: tl.constexpr = words.shape[1]
    quads: tl.constexpr = words.shape[2] // 4
    xa, xb, xc, xd = pairs
    if FAST:
        dots = tl.inline_asm_elementwise(INT4_WORDS_DOT, "=r,=r,=r,=r" + ",r" * 20, [words, xa, xb, xc, xd],
                                         dtype=tl.float32, is_pure=True, pack=4)
        first, _ = tl.split(tl.reshape(dots, (rows, groups, quads, 2, 2)))  # each quad's first value
        sums, _ = tl.split(first)
    else:
        low = (_nibble(words, 0) * _half(xa, 0) + _nibble(words, 2) * _half(xb, 0) + _nibble(words, 1) * _half(xc, 0)
               + _nibble(words, 3) * _half(xd, 0))
        high = (_nibble(words, 4) * _half(xa, 1) + _nibble(words, 6) * _half(xb, 1) + _nibble(words, 5) * _half(xc, 1)
                + _nibble(words, 7) * _half(xd, 1))
        dots = low.to(tl.float32) + high.to(tl.float32)
        sums = tl.sum(tl.reshape(dots, (rows, groups, quads, 4)), axis=3)
    return sums


'''

# The main loop (after the head, which names the pointers) and the scaled f32 sums, in `acc`
# over the tile's rows `rm` and columns `rn`; `inside` masks the tile's edges.
_BODY = '''\
    pid = tl.program_id(0)
    s = tl.program_id(1)
    tiles_n = tl.cdiv(N, BN)
    rm = (pid // tiles_n) * BM + tl.arange(0, BM)
    rn = (pid % tiles_n) * BN + tl.arange(0, BN)
    row_ok = rm < M
    col_ok = rn < N
    if not DOT:  # f32 sums per weight row and group of the step, reduced across the step after the loop
        sums = tl.zeros((BN, BK // GROUP), dtype=tl.float32)
    if W_LEFT:
        acc = tl.zeros((BN, BM), dtype=tl.float32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    for i in range(0, K_SLICE, BK):
        k0 = s * K_SLICE + i
        if INT4 and not DOT:  # one row: the step as [BN rows, its groups, a group]; groups summed after the loop
            rg = k0 // GROUP + tl.arange(0, BK // GROUP)
            rb = (rg * (GROUP // 2))[None, :, None] + tl.arange(0, GROUP // 2)[None, None, :]
            packed = tl.load(w_ptr + rn[:, None, None] * (K // 2) + rb, mask=col_ok[:, None, None], other=0)
            xk = k0 + tl.arange(0, BK // GROUP)[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
            scale = tl.load(s_ptr + rn[:, None] * (K // GROUP) + rg[None, :], mask=col_ok[:, None], other=0.0)
            sums += _group_sums(packed, tl.load(x_ptr + (pid // tiles_n) * K + xk)[None], scale, FAST)
        elif INT4:
            # elements 2j (low nibbles) and 2j + 1 (high) of the step, each against its x
            rb = k0 // 2 + tl.arange(0, BK // 2)
            packed = tl.load(w_ptr + rn[:, None] * (K // 2) + rb[None, :], mask=col_ok[:, None], other=0)
            lo, hi = _widen_int4(packed, FAST)
            rk = k0 + tl.arange(0, BK)
            xv = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=row_ok[:, None], other=0.0)
            x_even, x_odd = tl.split(tl.reshape(xv, (BM, BK // 2, 2)))
            if BK == GROUP:  # one group: its scale applied to the f32 sums
                scale = tl.load(s_ptr + rn * (K // GROUP) + k0 // GROUP, mask=col_ok, other=0.0).to(tl.float32)
                if W_LEFT:
                    part = tl.dot(hi, tl.trans(x_odd), tl.dot(lo, tl.trans(x_even)))
                    acc += part * scale[:, None]
                else:
                    part = tl.dot(x_odd, tl.trans(hi), tl.dot(x_even, tl.trans(lo)))
                    acc += part * scale[None, :]
            else:  # several groups a step: the weights scaled in f16 (as IREE's own form does)
                rg = k0 // GROUP + tl.arange(0, BK // GROUP)
                scale = tl.load(s_ptr + rn[:, None] * (K // GROUP) + rg[None, :], mask=col_ok[:, None], other=0.0)
                scale = scale[:, :, None]
                lo = tl.reshape(tl.reshape(lo, (BN, BK // GROUP, GROUP // 2)) * scale, (BN, BK // 2))
                hi = tl.reshape(tl.reshape(hi, (BN, BK // GROUP, GROUP // 2)) * scale, (BN, BK // 2))
                if W_LEFT:
                    acc = tl.dot(hi, tl.trans(x_odd), tl.dot(lo, tl.trans(x_even), acc))
                else:
                    acc = tl.dot(x_odd, tl.trans(hi), tl.dot(x_even, tl.trans(lo), acc))
        else:
            rk = k0 + tl.arange(0, BK)
            xv = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=row_ok[:, None], other=0.0)
            wv = tl.load(w_ptr + rn[:, None] * K + rk[None, :], mask=col_ok[:, None], other=0)
            if FLOAT:  # f16 as stored
                pass
            elif FAST:
                wv = tl.inline_asm_elementwise(INT8_TO_F16, "=r,=r,r", [wv], dtype=tl.float16, is_pure=True,
                                               pack=4)
            else:
                wv = wv.to(tl.float16)
            if W_LEFT:
                acc = tl.dot(wv, tl.trans(xv), acc)
            else:
                acc = tl.dot(xv, tl.trans(wv), acc)
    if not DOT:
        acc = tl.sum(sums, axis=1)[None, :]
    if W_LEFT:
        acc = tl.trans(acc)
    if not INT4 and not FLOAT:
        acc = acc * tl.load(s_ptr + rn, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    inside = row_ok[:, None] & col_ok[None, :]
    if HAS_INIT:
        acc += tl.load(init_ptr + rm[:, None] * N + rn[None, :], mask=inside, other=0.0)
'''
_PLAIN_STORE = "    tl.store(out_ptr + s * M * N + rm[:, None] * N + rn[None, :], acc, mask=inside)\n"

# The one-row form with x resident (int4, M = 1, no tensor cores): each of PROGRAMS programs loads
# x once, in the layout of the weight tile it multiplies (Triton converts a load's layout through
# shared memory, with barriers: once a program here, not once a step), then takes every
# PROGRAMS-th tile of BN weight rows, whole rows at a time (K / GROUP a power of two): products
# and sums of eight in f16, per-group f32 sums, each group's scale on its sum. Every load of a
# tile (its weights, scales, init or epilogue inputs: `_RESIDENT_LOADS` and the epilogue's loads)
# is issued before its products (`_RESIDENT_PRODUCTS`), so that a tile waits for memory once; the
# store (or the rest of the epilogue) runs once a tile, inside the loop. WORDS: x held as the f16
# pairs of each packed 32-bit word in INT4_WORDS_DOT's order, the weights loaded as words and
# multiplied there (no relayout between widened weights and x).
_RESIDENT_LOADS = '''\
    pid = tl.program_id(0)
    s = tl.program_id(1)
    rm = tl.arange(0, 1)
    row_ok = rm < M
    rg = tl.arange(0, K // GROUP)
    if WARP_ROWS:  # [chunks of 128 words, 1, 128]: a warp's lanes along a row, 4 words each; each quad's group
        rc = tl.arange(0, K // 1024)
        ro = (rc * 128)[:, None, None] + tl.arange(0, 128)[None, None, :]
        rg = (rc[:, None, None] * 1024 + tl.arange(0, 32)[None, None, :] * 32) // GROUP
    elif WORDS:  # the offsets of a row's 32-bit words of packed weights
        ro = (rg * (GROUP // 8))[None, :, None] + tl.arange(0, GROUP // 8)[None, None, :]
    else:  # of its bytes
        ro = (rg * (GROUP // 2))[None, :, None] + tl.arange(0, GROUP // 2)[None, None, :]
    if AHEAD:  # the first tile's weights loaded before x, each next one's before this one's products
        wq, scale = _row_tile(w_ptr, s_ptr, pid * BN + tl.arange(0, BN), ro, rg, N, K, GROUP, WORDS, WARP_ROWS)
    if WORDS:  # x as the f16 pairs of each packed word, in INT4_WORDS_DOT's order
        pairs = _x_pairs(x_ptr, ro * 8, "")
    else:
        xw = tl.load(x_ptr + rg[:, None] * GROUP + tl.arange(0, GROUP)[None, :])[None]
    for tile in range(pid, tl.cdiv(N, BN), PROGRAMS):
        rn = tile * BN + tl.arange(0, BN)
        col_ok = rn < N
        inside = row_ok[:, None] & col_ok[None, :]
        if AHEAD:
            wq_next, scale_next = _row_tile(w_ptr, s_ptr, rn + PROGRAMS * BN, ro, rg, N, K, GROUP, WORDS, WARP_ROWS)
        else:
            wq, scale = _row_tile(w_ptr, s_ptr, rn, ro, rg, N, K, GROUP, WORDS, WARP_ROWS)
        if HAS_INIT:
            init = tl.load(init_ptr + rn[None, :], mask=inside, other=0.0)
'''
_RESIDENT_PRODUCTS = '''\
        if WARP_ROWS:  # a row's sums within its warp: no barrier
            acc = tl.sum(tl.sum(_word_dots(wq, pairs, FAST) * scale.to(tl.float32), axis=2), axis=0)[None, :]
        elif WORDS:
            dots = tl.sum(_word_dots(wq, pairs, FAST), axis=2)
            acc = tl.sum(dots * scale.to(tl.float32), axis=1)[None, :]
        else:
            acc = tl.sum(_group_sums(wq, xw, scale, FAST), axis=1)[None, :]
        if AHEAD:
            wq, scale = wq_next, scale_next
        if HAS_INIT:
            acc += init
'''
ENTRY = "inferx_dequant_matvec"


def words_fit(block_n: int, k: int, group: int, warps: int) -> bool:
    """Whether the word products (INT4_WORDS_DOT, four words a call) can take a tile of `block_n`
    whole rows of K: groups of at least four words, and at least four words a thread (a 16-byte
    load: the four values a call that Triton's layout keeps in one thread)."""
    return group >= 32 and block_n * k // 8 >= 4 * 32 * warps


@dataclasses.dataclass(frozen=True)
class DequantSpec(TileGrid):
    """One compiled variant: the problem (static) and the tile configuration."""

    m: int
    n: int
    k: int
    kind: str  # "int8", "int4" or "f16" (a float weight as stored)
    group: int = 0  # int4: values per scale along K
    has_init: bool = False
    split: int = 1
    block_m: int = 16
    block_n: int = 64
    block_k: int = 128  # the step along K (int4: a multiple of the group)
    warps: int = 4
    stages: int = 4
    arch: int = 90
    fast: bool = True  # the integers widened by INT4_TO_F16 / INT8_TO_F16 (False: Triton's casts, for the
    # interpreter, which runs no PTX)
    w_left: bool = False  # the weight tile as the dot's left operand (out^T = w x^T)
    dot: bool = True  # False (int4, one row): no tensor cores, f16 products and sums of eight, f32 group sums
    programs: int = 0  # > 0: the resident-x form (int4, one row, whole rows a tile) on this many programs
    # resident form: the next tile's weights loaded before this tile's products (twice the bytes in
    # flight a program; the first tile's before x's relayout)
    ahead: bool = False
    # resident form: x as f16 pairs of the packed words, products by INT4_WORDS_DOT (four words a call)
    words: bool = False
    # word products: the tile as [K / 1024, rows, 128 words], so that Triton's layout gives each warp
    # whole rows (its lanes along K) and a row's sums need no shared memory or barrier (the loop's
    # barriers 4 -> 2 in the sm_90a code). Not yet measured on a GPU, so builds leave it off:
    # docs/bench/2026-12-06-int4-words4/ says how to measure it
    warp_rows: bool = False
    # registers a thread may use (PTX .maxnreg; 0: ptxas's choice). A budget also changes ptxas's
    # schedule: without one it issued a tile's weight loads two at a time, each pair after the
    # previous one's products, and its scale and init loads after them (one wait for memory each)
    max_registers: int = 0
    # the elementwise ops after the product (triton_matmul.Epilogue: bias, activation, the f16
    # cast for the next layer), finished in the kernel; None: the f32 slices are stored [S, M, N]
    epilogue: Optional[object] = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"weight kind {self.kind}: the kernel takes {', '.join(KINDS)}")
        if self.kind == "int4" and (self.group < 16 or self.group & (self.group - 1) or self.k % self.group):
            raise ValueError(f"int4 groups of {self.group} along K={self.k}: the kernel takes a power-of-two "
                             "group of at least 16 that divides K")
        if self.kind == "int4" and self.block_k % self.group and self.group % self.block_k:
            raise ValueError(f"int4 step {self.block_k} is not a multiple of the group {self.group}")
        if self.split < 1 or self.k % self.split or (self.k // self.split) % self.step:
            raise ValueError(f"split {self.split} does not cut K={self.k} into multiples of {self.step}")
        if (self.has_init or self.epilogue is not None) and self.split != 1:
            raise ValueError("the init and an epilogue are applied by the kernel only with one slice")
        if self.dot and self.block_m < 16:
            raise ValueError("block_m below 16: the rows ride a 16-row dot")
        groups = self.k // max(self.group, 1)
        if self.programs and (self.dot or self.m != 1 or self.split != 1 or groups & (groups - 1)):
            raise ValueError("the resident-x form takes the dot-free form, one row, one slice and K / group a "
                             "power of two")
        if (self.ahead or self.words) and not self.programs:
            raise ValueError("loading ahead and the word products are choices of the resident-x form")
        if self.words and not words_fit(self.block_n, self.k, self.group, self.warps):
            raise ValueError(f"the word products take groups of at least 32 values and four words a thread in a "
                             f"tile: {self.block_n} rows of K={self.k} in groups of {self.group} on {self.warps} warps")
        chunks = self.k // 1024
        if self.warp_rows and (not self.words or self.k % 1024 or chunks & (chunks - 1) or self.block_n % self.warps):
            raise ValueError(f"a warp a row takes the word products, K a power-of-two multiple of 1024 (not {self.k}) "
                             f"and rows a multiple of the warps ({self.block_n} on {self.warps})")
        if not self.dot and (self.kind != "int4" or self.block_m != 1 or self.w_left):
            raise ValueError("the dot-free form takes int4 and one row a program")

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.programs, 1, 1) if self.programs else super().grid

    @property
    def step(self) -> int:
        return max(self.block_k, self.group) if self.kind == "int4" else self.block_k

    @property
    def input_bindings(self) -> int:
        return (2 if self.kind == "f16" else 3) + self.has_init + (len(self.epilogue.inputs) if self.epilogue else 0)

    @property
    def weight_bytes(self) -> int:
        """The bytes of the packed weight and its scales, which the kernel reads once."""
        if self.kind == "f16":
            return 2 * self.n * self.k
        if self.kind == "int8":
            return self.n * self.k + 2 * self.n
        return self.n * self.k // 2 + 2 * self.n * (self.k // self.group)

    def key(self) -> str:
        text = (json.dumps(dataclasses.asdict(self), sort_keys=True) + kernel_source(self) + INT4_TO_F16 + INT8_TO_F16
                + INT4_WORDS_DOT)
        from inferx_compiler.kernels.triton_matmul import TRITON_VERSION

        return hashlib.sha256((text + TRITON_VERSION).encode()).hexdigest()[:16]


def constants(spec: DequantSpec) -> dict:
    return dict(M=spec.m, N=spec.n, K=spec.k, K_SLICE=spec.k // spec.split, GROUP=spec.group or 1,
                INT4=spec.kind == "int4", FLOAT=spec.kind == "f16", HAS_INIT=spec.has_init, BM=spec.block_m, BN=spec.block_n, BK=spec.step,
                FAST=spec.fast, W_LEFT=spec.w_left, DOT=spec.dot, PROGRAMS=spec.programs, AHEAD=spec.ahead,
                WORDS=spec.words, WARP_ROWS=spec.warp_rows)


def pointers(spec: DequantSpec) -> list[str]:
    """The kernel's pointer parameters: x, the weight, its scales, the init, the epilogue's
    inputs (x0_ptr, ...), the output."""
    inputs = [f"x{i}_ptr" for i in range(len(spec.epilogue.inputs))] if spec.epilogue else []
    return ["x_ptr", "w_ptr", "s_ptr", "init_ptr", *inputs, "out_ptr"]


def kernel_source(spec: DequantSpec) -> str:
    """The @triton.jit function's source: the main loop, then the plain f32 store of the slice or
    the epilogue's loads, expressions and store (triton_matmul's epilogue code)."""
    from inferx_compiler.kernels.triton_matmul import epilogue_code, epilogue_loads

    head = (f"def {ENTRY}({', '.join(pointers(spec))}, "
            + ", ".join(f"{c}: tl.constexpr" for c in _CONSTANTS) + "):\n")
    if spec.programs:  # the epilogue's inputs loaded with the tile's weights, before its products
        loads = epilogue_loads(spec) if spec.epilogue else ""
        tail = epilogue_code(spec, inputs_loaded=True) if spec.epilogue else _PLAIN_STORE
        return (_WIDEN_INT4 + head + _RESIDENT_LOADS + textwrap.indent(loads, "    ") + _RESIDENT_PRODUCTS
                + textwrap.indent(tail, "    "))
    tail = epilogue_code(spec) if spec.epilogue else _PLAIN_STORE
    return _WIDEN_INT4 + head + _BODY + tail


def signature(spec: DequantSpec) -> tuple[dict, dict]:
    """(Triton signature, constexprs) for compiling `spec`: the init pointer is a constexpr None
    (no parameter) when the kernel does not read it."""
    from inferx_compiler.kernels.triton_matmul import POINTER_TYPES

    inputs = spec.epilogue.inputs if spec.epilogue else ()
    out = POINTER_TYPES[spec.epilogue.element_type] if spec.epilogue else "fp32"
    types = ["*fp16", "*fp16" if spec.kind == "f16" else "*i8", "*fp16", "*fp32", *(f"*{POINTER_TYPES[x.element_type]}" for x in inputs), f"*{out}"]
    sig = dict(zip(pointers(spec), types))
    consts = constants(spec)
    sig.update({name: "constexpr" for name in consts})
    if not spec.has_init:
        sig["init_ptr"] = "constexpr"
        consts["init_ptr"] = None
    if spec.kind == "f16":  # no scales
        sig["s_ptr"] = "constexpr"
        consts["s_ptr"] = None
    return sig, consts


@functools.lru_cache(maxsize=64)
def kernel_function(spec: DequantSpec):
    """The @triton.jit function for `spec` (for the interpreter in tests, JIT sweeps on a GPU
    host, and the ahead-of-time compile)."""
    import triton.language as tl

    from inferx_compiler.kernels.triton_matmul import jit_from_source

    return jit_from_source(kernel_source(spec), ENTRY, f"inferx-dequant-matvec-{spec.key()}",
                           {"INT4_TO_F16": tl.constexpr(INT4_TO_F16), "INT8_TO_F16": tl.constexpr(INT8_TO_F16),
                            "INT4_WORDS_DOT": tl.constexpr(INT4_WORDS_DOT)})


def compile_kernel(spec: DequantSpec, cache_dir: Optional[str] = None):
    """PTX for `spec` (triton_matmul.CompiledKernel), cached like the matmul kernels."""
    from inferx_compiler.kernels import triton_matmul

    sig, consts = signature(spec)
    return triton_matmul.compile_cached(spec, lambda: kernel_function(spec), sig, consts, cache_dir)
