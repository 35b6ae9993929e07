"""The CUDA weight-only int8/int4 kernel (inferx_compiler/kernels/triton_dequant.py) and the
builds that carry it (passes/support/dequant_matvec.py, through inferx-quantize-contractions).

No GPU here. The kernel's indexing and arithmetic are checked through Triton's interpreter (the
same @triton.jit function the PTX is compiled from, with Triton's own integer casts) against
numpy in float64 for every form the rule can emit; the PTX widening (the integers turned into
f16 by lop3/prmt and f16x2 arithmetic, which the interpreter cannot run) is checked by
executing its PTX text, instruction by instruction, on every byte value. The compiled kernel's
numbers on a GPU: tools/bench/gpu_quant_check.py (against the onnxruntime emulation of the plan)
and tools/bench/gpu_dequant_sweep.py (against float64).
"""

from __future__ import annotations

import dataclasses

import itertools

import numpy as np
import pytest

from e2e_models import wide_mlp
from helpers import artifact_json, save, triton_interpreter
from inferx_compiler.cli.compile import main as compile_main

pytest.importorskip("triton")

from inferx_compiler.kernels import triton_dequant  # noqa: E402

# (M, N, K, kind, group, has_init, split, block_n, block_k, w_left)
FORMS = [
    (1, 96, 256, "int4", 64, True, 1, 64, 64, False),  # a row, N not a multiple of the tile, init read
    (20, 64, 512, "int4", 128, False, 2, 32, 128, False),  # two row tiles (20 rows), split-K
    (3, 80, 512, "int4", 64, False, 4, 64, 128, True),  # two groups a step (scaled in f16), weight on the left
    (2, 64, 256, "int8", 0, True, 1, 32, 128, False),  # int8, init read
    (5, 48, 512, "int8", 0, False, 2, 64, 256, True),  # int8, split-K, weight on the left, edge tile in N
    (1, 96, 256, "f16", 0, True, 1, 64, 128, False),  # f16 as stored (a float decode step), init read
    (3, 80, 512, "f16", 0, False, 2, 64, 128, True),  # f16, split-K, weight on the left, edge tile in N
]

_INTERPRETER = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np, torch
from inferx_compiler.kernels.triton_dequant import DequantSpec, constants, kernel_function
from inferx_compiler.precision.quantization import pack_int4
m, n, k, kind, group, has_init, split, bn, bk, w_left = json.loads(sys.argv[1])
rng = np.random.default_rng(1)
x = rng.standard_normal((m, k)).astype(np.float16)
if kind == "int4":
    q = rng.integers(-8, 8, (n, k)).astype(np.int8)
    w = pack_int4(q).view(np.int8).reshape(n, k // 2)
    s = (rng.random((n, k // group)) + 0.5).astype(np.float16)
    deq = q.astype(np.float64) * np.repeat(s.astype(np.float64), group, axis=1)
elif kind == "f16":
    w = rng.standard_normal((n, k)).astype(np.float16)
    s = None
    deq = w.astype(np.float64)
else:
    q = w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    s = (rng.random(n) + 0.5).astype(np.float16)
    deq = q.astype(np.float64) * s.astype(np.float64)[:, None]
init = rng.standard_normal((m, n)).astype(np.float32)
spec = DequantSpec(m, n, k, kind, group, has_init, split, 16, bn, bk, fast=False, w_left=w_left)
out = torch.full((split, m, n), float("nan"), dtype=torch.float32)
kernel_function(spec)[spec.grid[:2]](torch.from_numpy(x), torch.from_numpy(w), None if s is None else torch.from_numpy(s),
                                 torch.from_numpy(init) if has_init else None, out, **constants(spec))
ref = x.astype(np.float64) @ deq.T + (init if has_init else 0.0)
got = out.numpy().astype(np.float64).sum(axis=0)
print(json.dumps({"err": float(np.linalg.norm(got - ref) / np.linalg.norm(ref)),
                  "finite": bool(np.isfinite(got).all())}))
"""


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f"{f[3]}-{f[0]}x{f[1]}x{f[2]}-split{f[6]}"
                         + ("-init" if f[5] else "") + ("-wleft" if f[9] else ""))
def test_kernel_matches_numpy_in_the_interpreter(form):
    """Every output element written (NaN-filled output) and right: f32 sums of exact integer
    products (1e-6), except where a step spans several int4 groups and the weights are scaled in
    f16 first (IREE's own weight-only form rounds the same way: 1e-3)."""
    result = triton_interpreter(_INTERPRETER, form)
    assert result["finite"], "some output elements were never written"
    scaled_in_f16 = form[3] == "int4" and form[8] > form[4]
    assert result["err"] <= (1e-3 if scaled_in_f16 else 1e-6), result


_EPILOGUE = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np, torch
from inferx_compiler.kernels.triton_dequant import DequantSpec, constants, kernel_function
from inferx_compiler.kernels.triton_matmul import Epilogue, EpilogueInput, Offsets
from inferx_compiler.precision.quantization import pack_int4
m, n, k, group, kind = json.loads(sys.argv[1])
rng = np.random.default_rng(2)
x = rng.standard_normal((m, k)).astype(np.float16)
if kind == "int4":
    q = rng.integers(-8, 8, (n, k)).astype(np.int8)
    w = pack_int4(q).view(np.int8).reshape(n, k // 2)
    s = (rng.random((n, k // group)) * 0.1).astype(np.float16)
    deq = q.astype(np.float64) * np.repeat(s.astype(np.float64), group, axis=1)
else:  # f16 as stored
    w = (rng.standard_normal((n, k)) * 0.1).astype(np.float16)
    s, deq = None, w.astype(np.float64)
bias = rng.standard_normal(n).astype(np.float32)
# relu(acc + bias) stored as f16 at [m, n] (one row: no row term, as the planner leaves it)
rows = ((1, m, n),) if m > 1 else ()
epilogue = Epilogue((EpilogueInput("f32", Offsets((), ((1, n, 1),))),),
                    (("v0", "add", ("acc", "x0")), ("z", "const", ("0.0", "f32")), ("v1", "max", ("v0", "z")),
                     ("v2", "cast:f16", ("v1",))), "v2", "f16", Offsets(rows, ((1, n, 1),)))
spec = DequantSpec(m, n, k, kind, group if kind == "int4" else 0, False, 1, 16, 32, 2 * group, stages=4, fast=False,
                   epilogue=epilogue)
out = torch.full((m, n), float("nan"), dtype=torch.float16)
kernel_function(spec)[spec.grid[:2]](torch.from_numpy(x), torch.from_numpy(w), None if s is None else torch.from_numpy(s),
                                     None, torch.from_numpy(bias), out, **constants(spec))
ref = np.maximum(x.astype(np.float64) @ deq.T + bias, 0.0)
got = out.numpy().astype(np.float64)
print(json.dumps({"err": float(np.linalg.norm(got - ref) / np.linalg.norm(ref)),
                  "finite": bool(np.isfinite(got).all())}))
"""


@pytest.mark.parametrize("rows,kind", [(1, "int4"), (3, "int4"), (3, "f16")])
def test_fused_epilogue_in_the_interpreter(rows, kind):
    """One slice with the ops after the product finished in the kernel (bias, ReLU, the f16 cast):
    right to f16 rounding; one row has no row term in the output's offsets. f16: the float decode
    step's form (inferx-f16-matvec), the weight read as stored."""
    result = triton_interpreter(_EPILOGUE, [rows, 96, 512, 64 if kind == "int4" else 128, kind])
    assert result["finite"], "some output elements were never written"
    assert result["err"] <= 2e-3, result


_ONE_ROW = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np, torch
from inferx_compiler.kernels.triton_dequant import DequantSpec, constants, kernel_function
from inferx_compiler.kernels.triton_matmul import Epilogue, EpilogueInput, Offsets
from inferx_compiler.precision.quantization import pack_int4
n, k, group, bn, step, programs, fused, choice = json.loads(sys.argv[1])
rng = np.random.default_rng(3)
x = rng.standard_normal((1, k)).astype(np.float16)
q = rng.integers(-8, 8, (n, k)).astype(np.int8)
w = pack_int4(q).view(np.int8).reshape(n, k // 2)
s = (rng.random((n, k // group)) * 0.1 + 0.01).astype(np.float16)
y0 = rng.standard_normal((1, n)).astype(np.float32)
deq = q.astype(np.float64) * np.repeat(s.astype(np.float64), group, axis=1)
ref = x.astype(np.float64) @ deq.T + y0
epilogue = None
if fused:  # relu(acc + y0) as f16: y0 the epilogue's input, not the kernel's init
    epilogue = Epilogue((EpilogueInput("f32", Offsets((), ((1, n, 1),))),),
                        (("v0", "add", ("acc", "x0")), ("z", "const", ("0.0", "f32")), ("v1", "max", ("v0", "z")),
                         ("v2", "cast:f16", ("v1",))), "v2", "f16", Offsets((), ((1, n, 1),)))
    ref = np.maximum(ref, 0.0)
spec = DequantSpec(1, n, k, "int4", group, not fused, 1, 1, bn, step, fast=False, dot=False, programs=programs,
                   epilogue=epilogue, ahead="ahead" in choice, words="words" in choice, warp_rows="warprows" in choice)
out = torch.full((1, n) if fused else (1, 1, n), float("nan"), dtype=torch.float16 if fused else torch.float32)
args = [torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(s)]
args += [None, torch.from_numpy(y0)] if fused else [torch.from_numpy(y0)]
kernel_function(spec)[spec.grid[:2]](*args, out, **constants(spec))
got = out.numpy().astype(np.float64).reshape(1, n)
print(json.dumps({"err": float(np.linalg.norm(got - ref) / np.linalg.norm(ref)),
                  "finite": bool(np.isfinite(got).all())}))
"""

# (N, K, group, block_n, step, programs, epilogue, resident choices: "ahead", "words", "warprows")
ONE_ROW_FORMS = [
    (100, 1024, 64, 8, 512, 0, False, ""),  # tiles of 8 rows in steps of 8 groups, the edge tile masked, init read
    (100, 1024, 64, 4, 1024, 3, False, ""),  # x resident on 3 programs: every program takes several tiles
    (96, 512, 128, 4, 512, 5, True, ""),  # x resident, the epilogue finished once a tile
    (100, 1024, 64, 4, 1024, 3, True, "ahead"),  # x resident, each next tile loaded ahead (the last one masked off)
    (100, 1024, 64, 4, 1024, 3, False, "words"),  # x as pairs of each packed word, several tiles a program, init
    (100, 1024, 64, 4, 1024, 3, True, "words-ahead"),  # the word products, each next tile loaded ahead
    (96, 512, 32, 8, 512, 12, True, "words"),  # the word products, one tile a program, the epilogue
    (100, 1024, 128, 8, 1024, 4, True, "words-ahead"),  # 8 rows, four quads of words a group
    (100, 2048, 64, 8, 2048, 4, True, "words-ahead-warprows"),  # a warp a row: [K / 1024, rows, 128 words] tiles
    (60, 1024, 32, 4, 1024, 2, False, "words-warprows"),  # one chunk of 128 words, groups of one quad, init
]


@pytest.mark.parametrize("form", ONE_ROW_FORMS, ids=lambda f: ("resident" if f[5] else "tiled")
                         + ("-epilogue" if f[6] else "-init") + (f"-{f[7]}" if f[7] else ""))
def test_one_row_forms_match_numpy_in_the_interpreter(form):
    """The dot-free forms for one int4 row: every element written and right to the f16 rounding
    of their products and sums of eight (a wrong group, scale or row gives errors of order 1)."""
    result = triton_interpreter(_ONE_ROW, form)
    assert result["finite"], "some output elements were never written"
    assert result["err"] <= 1.5e-3, result


# ----------------------------------------------------------------------------- the PTX widening
def _f16x2(word: int) -> tuple:
    halves = np.array([word & 0xFFFF, word >> 16], dtype=np.uint16)
    return tuple(halves.view(np.float16))


def _word(a, b) -> int:
    halves = np.array([a, b], dtype=np.float16).view(np.uint16)
    return int(halves[0]) | int(halves[1]) << 16


def _lop3(a: int, b: int, c: int, lut: int) -> int:
    out = 0
    for bit in range(32):
        index = ((a >> bit & 1) << 2) | ((b >> bit & 1) << 1) | (c >> bit & 1)
        out |= (lut >> index & 1) << bit
    return out


def _prmt(a: int, b: int, selector: int) -> int:
    pool = (a | b << 32).to_bytes(8, "little")
    return int.from_bytes(bytes(pool[(selector >> 4 * i) & 7] for i in range(4)), "little")


def run_ptx(asm: str, operands: dict) -> dict:
    """Execute the inline PTX block `asm` (the instructions triton_dequant uses) on 32-bit values;
    `operands` maps "$i" to inputs; returns every register."""
    regs = dict(operands)

    def val(token: str) -> int:
        token = token.strip()
        return regs[token] if token in regs else int(token, 0) & 0xFFFFFFFF

    for line in asm.strip().strip("{}").strip().splitlines():
        line = line.strip().rstrip(";")
        if not line or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        if op == "mov.b32" and args.startswith("{"):  # {low, high} of a 32-bit register, as f16 values
            halves, source = args[1:].split("}")
            low, high = (h.strip() for h in halves.split(","))
            regs[low], regs[high] = _f16x2(val(source.strip(" ,")))
            continue
        dst, *src = [a.strip() for a in args.split(",")]
        if op == "mov.b32":
            regs[dst] = val(src[0])
        elif op == "shr.b32":
            regs[dst] = val(src[0]) >> val(src[1])
        elif op == "xor.b32":
            regs[dst] = val(src[0]) ^ val(src[1])
        elif op == "prmt.b32":
            regs[dst] = _prmt(val(src[0]), val(src[1]), val(src[2]))
        elif op == "lop3.b32":
            regs[dst] = _lop3(val(src[0]), val(src[1]), val(src[2]), val(src[3]))
        elif op == "sub.f16x2":
            a, b = _f16x2(val(src[0])), _f16x2(val(src[1]))
            regs[dst] = _word(*(np.float16(x - y) for x, y in zip(a, b)))
        elif op == "fma.rn.f16x2":
            a, b, c = _f16x2(val(src[0])), _f16x2(val(src[1])), _f16x2(val(src[2]))
            regs[dst] = _word(*(np.float16(np.float32(x) * np.float32(y) + np.float32(z)) for x, y, z in zip(a, b, c)))
        elif op == "mul.rn.f16x2":
            a, b = _f16x2(val(src[0])), _f16x2(val(src[1]))
            regs[dst] = _word(*(np.float16(np.float32(x) * np.float32(y)) for x, y in zip(a, b)))
        elif op == "cvt.f32.f16":
            regs[dst] = np.float32(regs[src[0]])
        elif op == "add.f32":
            regs[dst] = np.float32(regs[src[0]]) + np.float32(regs[src[1]])
        else:
            raise AssertionError(f"instruction {op} is not modelled here")
    return regs


def _signed_nibble(v: int) -> int:
    return v - 16 if v >= 8 else v


def test_int4_widening_ptx_gives_every_nibble():
    """Four packed bytes -> the low nibbles (elements 2i) in $0, $1 and the high ones (2i + 1) in
    $2, $3, as f16 pairs in element order, for every byte value in every position."""
    rng = np.random.default_rng(0)
    words = [int.from_bytes(bytes([b, (b * 7) & 255, (b * 13 + 5) & 255, 255 - b]), "little") for b in range(256)]
    words += [int(w) for w in rng.integers(0, 2**32, 64, dtype=np.uint64)]
    for word in words:
        regs = run_ptx(triton_dequant.INT4_TO_F16, {"$4": word})
        data = word.to_bytes(4, "little")
        lo = _f16x2(regs["$0"]) + _f16x2(regs["$1"])
        hi = _f16x2(regs["$2"]) + _f16x2(regs["$3"])
        assert [float(v) for v in lo] == [_signed_nibble(b & 15) for b in data], hex(word)
        assert [float(v) for v in hi] == [_signed_nibble(b >> 4) for b in data], hex(word)


def _words_dot(words, x):
    order = ((0, 4), (2, 6), (1, 5), (3, 7))
    pairs = {f"${8 + 4 * p + w}": _word(x[8 * w + a], x[8 * w + b]) for p, (a, b) in enumerate(order) for w in range(4)}
    return run_ptx(triton_dequant.INT4_WORDS_DOT, {**{f"${4 + w}": words[w] for w in range(4)}, **pairs})


def test_int4_words_dot_ptx_sums_each_element_times_its_x():
    """Four packed words (elements 0..7 each, element e in bits 4e..4e+3) times x given, a word,
    as the pairs (x0, x4), (x2, x6), (x1, x5), (x3, x7): the sum of the 32 products in $0, zeros
    in $1..$3. One nonzero element at a time gives its product exactly (x distinct at every
    position: an element meeting another's x is wrong); random words give the sum to f16 rounding."""
    x = np.float16(2.0) ** (np.arange(32) % 16 - 8).astype(np.float16)
    x[16:] *= -1
    for w, e, v in itertools.product(range(4), range(8), (-8, -3, 1, 7)):
        words = [0] * 4  # a zero nibble is the value 0
        words[w] = (v & 15) << (4 * e)
        regs = _words_dot(words, x)
        assert float(regs["$0"]) == v * float(x[8 * w + e]), (w, e, v, regs["$0"])
        assert [regs[f"${i}"] for i in (1, 2, 3)] == [0, 0, 0]
    rng = np.random.default_rng(1)
    x = rng.standard_normal(32).astype(np.float16)
    for _ in range(64):
        words = [int(w) for w in rng.integers(0, 2**32, 4, dtype=np.uint64)]
        elements = [_signed_nibble(words[w] >> (4 * e) & 15) for w in range(4) for e in range(8)]
        exact = sum(float(v) * float(xv) for v, xv in zip(elements, x))
        assert abs(float(_words_dot(words, x)["$0"]) - exact) <= 2e-3 * 8 * float(np.abs(x).sum()), words


def test_int8_widening_ptx_gives_every_byte():
    for first in range(0, 256, 4):
        word = int.from_bytes(bytes(range(first, first + 4)), "little")
        regs = run_ptx(triton_dequant.INT8_TO_F16, {"$2": word})
        got = [float(v) for v in _f16x2(regs["$0"]) + _f16x2(regs["$1"])]
        assert got == [b - 256 if b >= 128 else b for b in range(first, first + 4)], hex(word)


def test_the_ptx_model_can_fail():
    """A mask one bit short, run through the same model, gives a wrong value."""
    broken = triton_dequant.INT4_TO_F16.replace("0x000F000F, 0x64086408", "0x00070007, 0x64086408", 1)
    regs = run_ptx(broken, {"$4": 0x0F0F0F0F})
    assert float(_f16x2(regs["$0"])[0]) != -1.0


def test_ptx_carries_the_widening_and_is_reproducible(tmp_path):
    spec = triton_dequant.DequantSpec(1, 4096, 4096, "int4", 128, False, 8, 16, 64, 128, 4, 3)
    first = triton_dequant.compile_kernel(spec, cache_dir=str(tmp_path / "a"))
    again = triton_dequant.compile_kernel(spec, cache_dir=str(tmp_path / "b"))
    ptx = first.ptx.decode()
    assert ".target sm_90" in ptx and "lop3.b32" in ptx and "prmt.b32" in ptx
    assert "cvt.rn.f16.s" not in ptx  # no integer conversions left on the slow unit
    assert ".maxnreg" not in ptx  # no register budget unless the spec sets one
    assert first.ptx == again.ptx
    assert first.parameters == 3 + 1 + 2  # x, w, scale, out and Triton's two scratch pointers


def test_one_row_build_ptx_has_the_word_products_and_the_register_budget(tmp_path):
    """The one-row kernel builds take: INT4_WORDS_DOT's products inline (its f16x2 multiply and
    fmas on x pairs, not the byte form's widening alone) and `.maxnreg 128` in the PTX."""
    from inferx_compiler.passes.support.dequant_matvec import matvec_spec

    spec = matvec_spec(1, 4096, 4096, "int4", 128, 132, 90)
    ptx = triton_dequant.compile_kernel(spec, cache_dir=str(tmp_path)).ptx.decode()
    assert ".maxnreg 128" in ptx
    assert "mul.rn.f16x2" in ptx and ptx.count("fma.rn.f16x2 s, b") >= 4 and "shr.b32 t" in ptx
    plain = dataclasses.replace(spec, words=False, ahead=False, max_registers=0)
    assert "mul.rn.f16x2" not in triton_dequant.compile_kernel(plain, cache_dir=str(tmp_path)).ptx.decode()


def test_rule_splits_k_until_every_sm_has_work():
    from inferx_compiler.passes.support.dequant_matvec import matvec_spec

    spec = matvec_spec(2, 4096, 4096, "int4", 128, 132, 90)
    assert (spec.split, spec.block_n, spec.step, spec.has_init) == (8, 64, 128, False)
    spec = matvec_spec(1, 4096, 4096, "int4", 128, 132, 90)  # one row: x resident, two programs of 8 warps a SM
    assert (spec.dot, spec.split, spec.block_n, spec.grid, spec.has_init) == (False, 1, 8, (264, 1, 1), True)
    assert (spec.words, spec.ahead, spec.max_registers, spec.warps) == (True, True, 128, 8)  # 2 x 256 x 128 fit a SM
    assert not matvec_spec(1, 4096, 4096, "int4", 16, 132, 90).words  # the word products take groups of 32 and more
    assert not matvec_spec(1, 4096, 512, "int4", 32, 132, 90).words  # and four words a thread: 8 x 512 / 8 < 4 x 256
    assert matvec_spec(1, 4096, 1024, "int4", 32, 132, 90).words
    spec = matvec_spec(1, 768, 3072, "int4", 128, 132, 90)  # 24 groups: tiles, in steps of 8 groups
    assert (spec.dot, spec.programs, spec.block_n, spec.step, spec.grid) == (False, 0, 8, 1024, (96, 1, 1))
    spec = matvec_spec(64, 4096, 4096, "int8", 0, 132, 90)  # 64-row tiles, slices of at least 8 steps
    assert (spec.block_m, spec.split, spec.grid) == (64, 4, (64, 4, 1))
    assert matvec_spec(8, 4096, 4096, "int4", 128, 132, 90).block_m == 16
    assert matvec_spec(1, 4096, 256, "int4", 128, 132, 90).split == 1  # two steps of K: one slice
    assert matvec_spec(65, 64, 256, "int8", 0, 132, 90) == "65 rows (the kernel takes at most 64)"
    assert "IREE's matrix-vector code" in matvec_spec(1, 4096, 4096, "int8", 0, 132, 90)  # int8 below 16 rows


# ----------------------------------------------------------------------------- builds
def _build(tmp_path, extra: list, batch: int = 2) -> tuple[dict, dict]:
    onnx_path = save(wide_mlp(width=256, layers=2), tmp_path / "wide.onnx")
    out = str(tmp_path / f"m{len(extra)}b{batch}.ixa")
    assert compile_main([onnx_path, "--target", "h200", "--precision", "int4", "--group-size", "64",
                         "--batch-sizes", str(batch), "--no-measure", "-q", "-o", out, *extra]) == 0
    return artifact_json(out)


def test_h200_int4_build_runs_the_kernel_and_disable_pass_restores_iree(tmp_path):
    """The static batch-2 function's two layers become our kernel's dispatches, each finishing the
    ops after its product (the first: bias, GELU and the second layer's f16 cast; the second:
    its bias), so the function keeps one IREE dispatch (the first layer's input cast); IREE's
    dequantize-and-matmul stays for the dynamic-batch function; --disable-pass
    inferx-dequant-matvec leaves them all to IREE."""
    _, report = _build(tmp_path, [])
    ours = [d for d in report["dispatches"] if d["root"].startswith("inferx_dequant_matvec")]
    assert sorted((d["loops"], d["element_type"]) for d in ours) == [([2, 256, 256], "int4")] * 2
    assert all("linalg.generic" in d["fused"] and d["config"].endswith("split 1, epilogue") for d in ours)
    static = [d for d in report["dispatches"] if d["dispatch"].startswith("main$b2_dispatch")]
    assert len(static) == 1, static
    remarks = [r for r in report["decisions"] if r.get("pass") == "inferx-quantize-contractions"]
    assert sum("widened in our kernel" in r["decision"] and "finished in it" in r["decision"] for r in remarks) == 2
    assert sum("not our kernel: dynamic rows" in r["decision"] for r in remarks) == 2
    _, report = _build(tmp_path, ["--disable-pass", "inferx-dequant-matvec"])
    assert not [d for d in report["dispatches"] if d["root"].startswith("inferx_dequant_matvec")]


def test_h200_int4_batch_one_takes_the_resident_row_form(tmp_path):
    """One row: both layers on the dot-free form with x resident (256 / 64 = 4 groups, a power of
    two), each finishing its epilogue; compiled ahead of time like the others."""
    _, report = _build(tmp_path, [], batch=1)
    ours = [d for d in report["dispatches"] if d["root"].startswith("inferx_dequant_matvec")]
    assert sorted(d["loops"] for d in ours) == [[1, 256, 256]] * 2
    assert all("x resident on" in d["config"] and d["config"].endswith("epilogue") for d in ours), ours
