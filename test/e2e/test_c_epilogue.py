"""The C the f32 kernel's epilogues are generated as (inferx_compiler/kernels/c_epilogue.py), run:
each variant compiled as a shared library with this machine's C compiler and called through
ctypes on a product whose rows and columns end inside a register tile and a 32-column panel
(M = 17, N = 45), against numpy. Covers every op it generates (arith's NaN-propagating max and
min, unordered and ordered compares, select, neg of zero, abs, sqrt, div), a per-row input (a
bias), a per-element one (a residual), a row offset through a reshape, and what it declines."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from inferx_compiler.kernels import c_epilogue, cpu_objects
from inferx_compiler.kernels.triton_matmul import Epilogue, EpilogueInput, Offsets
from inferx_compiler.targets import get_target

pytestmark = [
    pytest.mark.skipif("avx512f" not in get_target("cpu").features, reason="this CPU has no AVX-512 (avx512f)"),
    pytest.mark.skipif(cpu_objects.c_compiler()[0] is None, reason="no C compiler for the kernel"),
]

M, N, K = 17, 45, 24
ROWS = 14  # the kernel's register tile rows: the weight's packed blocks
PLAIN = Offsets(rows=((1, M, N),), cols=((1, N, 1),))
PER_ROW = EpilogueInput("f32", Offsets(rows=((1, M, 1),), cols=()))
PER_ELEMENT = EpilogueInput("f32", PLAIN)


def _run(epilogue: Epilogue, inputs: list[np.ndarray], tmp_path, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """(the kernel's output, the f32 product it started from) for random w [M, K], x [K, N]."""
    generated = c_epilogue.generate(epilogue, M, N)
    source = tmp_path / f"{generated.tag}.c"
    source.write_text(generated.source)
    library = tmp_path / f"{generated.tag}.so"
    command, _ = cpu_objects.c_compiler()
    subprocess.run(command + ["-O2", "-mavx512f", "-shared", "-fPIC", "-I", cpu_objects.HERE, str(source),
                              "-o", str(library)], check=True, capture_output=True)
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((M, K)).astype(np.float32)
    x = rng.standard_normal((K, N)).astype(np.float32)
    blocks = -(-M // ROWS)
    padded = np.zeros((blocks * ROWS, K), np.float32)
    padded[:M] = w
    packed = np.ascontiguousarray(padded.reshape(blocks, ROWS, K).transpose(0, 2, 1))  # (mb, k, r)
    out = np.full((M, N), np.nan, np.float32)  # poisoned: every element must be written
    f = getattr(ctypes.CDLL(str(library)), generated.entry)
    pointer = ctypes.POINTER(ctypes.c_float)
    i64 = ctypes.c_int64
    arrays = [packed, x] + [np.ascontiguousarray(a, np.float32) for a in inputs]
    args = []
    for a in arrays:
        args += [a.ctypes.data_as(pointer), i64(0)]
    args += [out.ctypes.data_as(pointer), i64(0)]
    args += [i64(M), i64(N), i64(K), i64(K)]
    tile_rows, tile_cols = 14, 32  # several tiles: the last row and column tiles partial
    for m0 in range(0, M, tile_rows):
        for n0 in range(0, N, tile_cols):
            f(*args, i64(m0), i64(tile_rows), i64(n0), i64(tile_cols))
    product = (w.astype(np.float64) @ x.astype(np.float64)).astype(np.float32)
    return out, product


def test_bias_residual_relu(tmp_path):
    rng = np.random.default_rng(1)
    bias, residual = rng.standard_normal(M).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    body = (("v0", "add", ("acc", "x0")), ("v1", "add", ("v0", "x1")), ("v2", "const", ("0.0", "f32")),
            ("v3", "cmp:ugt", ("v1", "v2")), ("v4", "select", ("v3", "v1", "v2")))
    out, product = _run(Epilogue((PER_ROW, PER_ELEMENT), body, "v4", "f32", PLAIN), [bias, residual], tmp_path)
    want = np.maximum(product + bias[:, None] + residual, 0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_every_op(tmp_path):
    """max/min as arith's (NaN where either side is), compares on NaN (unordered true, ordered
    false), select, neg of +0 (-0), abs, sqrt, div, sub, mul, f32 casts."""
    rng = np.random.default_rng(2)
    residual = rng.standard_normal((M, N)).astype(np.float32)
    residual[::3, ::4] = np.nan
    residual[1, :] = 0.0
    # (NaN first: the hardware's max and min return their second operand where either is NaN)
    body = (("v0", "max", ("x0", "acc")), ("v1", "min", ("x0", "acc")), ("v2", "cmp:ugt", ("x0", "acc")),
            ("v3", "cmp:olt", ("x0", "acc")), ("v4", "select", ("v2", "v0", "v1")), ("v5", "select", ("v3", "v4", "acc")),
            ("v6", "neg", ("x0",)), ("v7", "abs", ("v6",)), ("v8", "sqrt", ("v7",)), ("v9", "const", ("2.0", "f32")),
            ("v10", "div", ("v5", "v9")), ("v11", "sub", ("v10", "v8")), ("v12", "mul", ("v11", "v9")),
            ("v13", "cast:f32", ("v12",)))
    out, acc = _run(Epilogue((PER_ELEMENT,), body, "v13", "f32", PLAIN), [residual], tmp_path)
    x0 = residual
    with np.errstate(invalid="ignore"):
        v0, v1 = np.maximum(acc, x0), np.minimum(acc, x0)  # numpy's propagate NaN, as arith's
        v2 = ~(x0 <= acc)  # unordered greater-than
        v3 = x0 < acc  # ordered less-than
        v5 = np.where(v3, np.where(v2, v0, v1), acc)
        want = ((v5 / 2.0) - np.sqrt(np.abs(-x0))) * 2.0
    np.testing.assert_allclose(out, want.astype(np.float32), rtol=1e-5, atol=1e-5, equal_nan=True)
    assert np.isnan(out).sum() == np.isnan(want).sum()


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_and_min_propagate_nan(op, tmp_path):
    """arith.maximumf/minimumf: NaN where either operand is (the hardware's instruction returns
    its second operand there, here the finite product)."""
    residual = np.random.default_rng(3).standard_normal((M, N)).astype(np.float32)
    residual[::2, ::3] = np.nan
    out, acc = _run(Epilogue((PER_ELEMENT,), (("v0", op, ("x0", "acc")),), "v0", "f32", PLAIN), [residual], tmp_path)
    with np.errstate(invalid="ignore"):
        want = (np.maximum if op == "max" else np.minimum)(residual, acc)
    assert np.array_equal(np.isnan(out), np.isnan(residual))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_neg_of_zero_is_negative_zero(tmp_path):
    body = (("v0", "sub", ("acc", "acc")), ("v1", "neg", ("v0",)))  # -(+0)
    out, _ = _run(Epilogue((), body, "v1", "f32", PLAIN), [], tmp_path)
    assert (out == 0).all() and np.signbit(out).all()


def test_row_offset_through_a_reshape(tmp_path):
    """A per-row input read through mixed-radix row digits: rows (m // 5) % 4 of a 4-vector."""
    bias = np.arange(4, dtype=np.float32) * 10
    entry = EpilogueInput("f32", Offsets(rows=((5, 4, 1),), cols=()))
    body = (("v0", "add", ("acc", "x0")),)
    out, product = _run(Epilogue((entry,), body, "v0", "f32", PLAIN), [bias], tmp_path)
    rows = (np.arange(M) // 5) % 4
    np.testing.assert_allclose(out, product + bias[rows][:, None], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("epilogue, why", [
    (Epilogue((), (("v0", "exp", ("acc",)),), "v0", "f32", PLAIN), "exp"),
    (Epilogue((EpilogueInput("f16", PLAIN),), (("v0", "add", ("acc", "x0")),), "v0", "f32", PLAIN), "f16 input"),
    (Epilogue((EpilogueInput("f32", Offsets(rows=((1, M, 1),), cols=((1, N, M),))),), (("v0", "add", ("acc", "x0")),),
              "v0", "f32", PLAIN), "with a stride"),
    (Epilogue((), (("v0", "neg", ("acc",)),), "v0", "f32", Offsets(rows=((1, M, 1),), cols=((1, N, M),))),
     "stored transposed"),
    (Epilogue((), (("v0", "neg", ("acc",)),), "v0", "f16", PLAIN), "f16 result"),
    (Epilogue((), (("v0", "cmp:one", ("acc", "acc")), ("v1", "select", ("v0", "acc", "acc"))), "v1", "f32", PLAIN),
     "comparison one"),
])
def test_declined(epilogue, why):
    with pytest.raises(c_epilogue.Unsupported, match=why):
        c_epilogue.generate(epilogue, M, N)


def test_generated_text_is_deterministic():
    body = (("v0", "add", ("acc", "x0")),)
    a = c_epilogue.generate(Epilogue((PER_ROW,), body, "v0", "f32", PLAIN), M, N)
    b = c_epilogue.generate(Epilogue((PER_ROW,), body, "v0", "f32", PLAIN), M, N)
    assert a == b and a.entry == f"inferx_f32l_{a.tag}_tile"
