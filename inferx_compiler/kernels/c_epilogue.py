"""C text for the elementwise work after a product of our f32 kernel (f32_gemm.c's left-weight
entry): the epilogue that passes/analysis/matmul_epilogue.py finds after a matmul (the init, a bias, a
residual add, an activation), applied to the kernel's registers before they are stored.

After inferx-conv-strategy a 1x1 convolution is a matmul w[F, C] x x[C, H W] whose bias, ReLU and
residual add follow as separate ops. IREE fuses them into its own matmul's dispatch; after our
kernel they would be one more dispatch reading the product back from memory (ResNet-50 at
batch 1 on a Zen 4 core: 5.2 ms of 103 in such dispatches, 3.9-6.6 GFLOP/s). Here they become
C: `generate(epilogue, m, n)` returns the source of a kernel variant (this file's macro
INFERX_EPILOGUE, then f32_gemm.c included, then an entry `inferx_f32l_<tag>_tile` taking the
epilogue's inputs after the activations), or raises Unsupported naming what it cannot run:

  - inputs and result f32; the result stored where the product would be ([M, N] row-major:
    any reshape of it);
  - each input read along a row's columns contiguously (a residual) or one value a row (a
    bias): its offset's row part is any mixed-radix expression of the row, its column part n
    or nothing;
  - body ops: add, sub, mul, div, max and min (NaN-propagating, as arith.maximumf/minimumf),
    compare and select, neg, abs, sqrt, f32 casts. Not erf, exp, tanh, log, rsqrt: the kernel
    is freestanding, with no vector math library (GELU stays IREE's dispatch).
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from inferx_compiler.kernels.triton_matmul import Epilogue, Offsets

_CMP = {"ogt": "_CMP_GT_OQ", "oge": "_CMP_GE_OQ", "olt": "_CMP_LT_OQ", "ole": "_CMP_LE_OQ", "oeq": "_CMP_EQ_OQ",
        "une": "_CMP_NEQ_UQ", "ugt": "_CMP_NLE_UQ", "uge": "_CMP_NLT_UQ", "ult": "_CMP_NGE_UQ", "ule": "_CMP_NGT_UQ"}
_BINARY = {"add": "_mm512_add_ps({0}, {1})", "sub": "_mm512_sub_ps({0}, {1})", "mul": "_mm512_mul_ps({0}, {1})",
           "div": "_mm512_div_ps({0}, {1})", "max": "inferx_max_nan({0}, {1})", "min": "inferx_min_nan({0}, {1})"}
_UNARY = {"neg": "_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512({0}), _mm512_set1_epi32((int)0x80000000)))",
          "abs": "_mm512_abs_ps({0})", "sqrt": "_mm512_sqrt_ps({0})", "cast:f32": "{0}"}
# max/min of arith (maximumf/minimumf): NaN when either operand is; the hardware's returns the second
_HELPERS = """\
static inline __m512 inferx_max_nan(__m512 a, __m512 b) {
  return _mm512_mask_add_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
}
static inline __m512 inferx_min_nan(__m512 a, __m512 b) {
  return _mm512_mask_add_ps(_mm512_min_ps(a, b), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
}
"""


class Unsupported(Exception):
    """The epilogue has something the C kernel cannot run (the message says what)."""


@dataclasses.dataclass(frozen=True)
class CEpilogue:
    tag: str  # names the variant's entry and object: a hash of its text
    source: str  # C text: the macro, f32_gemm.c included, the entry
    inputs: int  # pointer arguments after the activations
    conv: bool = False  # the convolution entry (inferx_f32c_*: columns gathered from the image)

    @property
    def entry(self) -> str:
        return f"inferx_f32{'c' if self.conv else 'l'}_{self.tag}_tile"


def _digits(terms, extent: int) -> np.ndarray:
    """sum(((i // div) % size) * mult) for i in range(extent)."""
    i = np.arange(extent, dtype=np.int64)
    return sum(((i // div) % size) * mult for div, size, mult in terms) if terms else np.zeros(extent, np.int64)


def _row_offset(terms) -> str:
    """C text of the offset's row part for `row`."""
    parts = [f"(((row) / {div}) % {size}) * {mult}" for div, size, mult in terms]
    return " + ".join(parts) if parts else "0"


def _column_kind(offsets: Offsets, n: int) -> str:
    cols = _digits(offsets.cols, n)
    if np.array_equal(cols, np.arange(n)):
        return "vector"
    if not cols.any():
        return "broadcast"
    raise Unsupported("an input read across a row's columns with a stride (a transposed operand)")


def _check_result(epilogue: Epilogue, m: int, n: int) -> None:
    if epilogue.element_type != "f32":
        raise Unsupported(f"a {epilogue.element_type} result (the kernel stores f32)")
    if not (np.array_equal(_digits(epilogue.offsets.rows, m), np.arange(m) * n)
            and np.array_equal(_digits(epilogue.offsets.cols, n), np.arange(n))):
        raise Unsupported("a result stored transposed (the kernel stores the product's layout)")


def _statements(epilogue: Epilogue, half: int, kinds: list) -> list:
    """C statements computing the body for register `half` (columns col + 16 half ...)."""
    acc, mask = f"acc{half}", ("lo", "hi")[half]
    names = {"acc": acc}
    lines = []
    for i, kind in enumerate(kinds):
        names[f"x{i}"] = (f"_mm512_maskz_loadu_ps({mask}, x[{i}] + o{i} + (col) + {16 * half})" if kind == "vector"
                          else f"_mm512_set1_ps(x[{i}][o{i}])")
    for name, op, args in epilogue.body:
        var = f"{name}_{half}"
        if op == "const":
            value, element_type = args
            if element_type != "f32":
                raise Unsupported(f"a {element_type} constant")
            lines.append(f"const __m512 {var} = _mm512_set1_ps({float(value)!r}f);")
        elif op.startswith("cmp:"):
            predicate = _CMP.get(op[4:])
            if predicate is None:
                raise Unsupported(f"the comparison {op[4:]}")
            lines.append(f"const __mmask16 {var} = _mm512_cmp_ps_mask({names[args[0]]}, {names[args[1]]}, {predicate});")
        elif op == "select":
            cond, yes, no = (names[a] for a in args)
            lines.append(f"const __m512 {var} = _mm512_mask_blend_ps({cond}, {no}, {yes});")
        elif op in _BINARY:
            lines.append(f"const __m512 {var} = {_BINARY[op].format(*(names[a] for a in args))};")
        elif op in _UNARY:
            lines.append(f"const __m512 {var} = {_UNARY[op].format(names[args[0]])};")
        else:
            raise Unsupported(f"{op} (the kernel is freestanding: no vector math library)")
        names[name] = var
    lines.append(f"{acc} = {names[epilogue.result]};")
    return lines


def generate(epilogue: Epilogue, m: int, n: int, conv: bool = False) -> CEpilogue:
    """The kernel variant running `epilogue` after an [m, n] product (raises Unsupported).
    `conv`: the convolution entry, whose product for image i is rows i F .. i F + F - 1 of the
    [m, n] = [images F, OH OW] product."""
    _check_result(epilogue, m, n)
    kinds = []
    for entry in epilogue.inputs:
        if entry.element_type != "f32":
            raise Unsupported(f"a {entry.element_type} input (the kernel reads f32)")
        kinds.append(_column_kind(entry.offsets, n))
    lines = [f"const int64_t o{i} = {_row_offset(e.offsets.rows)};" for i, e in enumerate(epilogue.inputs)]
    for half in (0, 1):
        lines += ["{"] + ["  " + s for s in _statements(epilogue, half, kinds)] + ["}"]
    macro = "#define INFERX_EPILOGUE(acc0, acc1, row, col, lo, hi, x) do { \\\n" + "".join(
        f"    {line} \\\n" for line in lines) + "  } while (0)\n"
    fetches = [f"_mm_prefetch((const char *)(x[{i}] + {_row_offset(e.offsets.rows)} + (col)), _MM_HINT_T0);"
               for i, (e, kind) in enumerate(zip(epilogue.inputs, kinds)) if kind == "vector"]
    macro += "#define INFERX_EPILOGUE_PREFETCH(row, col, x) do { \\\n" + "".join(
        f"    {line} \\\n" for line in fetches) + "  } while (0)\n"
    tag = hashlib.sha256(("conv\n" if conv else "").encode() + macro.encode()).hexdigest()[:12]
    pointers = "".join(f", const float *x{i}, int64_t x{i}_offset" for i in range(len(kinds)))
    inputs = ", ".join(f"x{i} + x{i}_offset" for i in range(len(kinds))) or "0"  # (never read: no inputs)
    if conv:
        params = "INFERX_CONV_PARAMS"
        call = "conv_tile(a + a_offset, b + b_offset, c + c_offset, x, INFERX_CONV_ARGS);"
    else:
        params = "int64_t M, int64_t N, int64_t K, int64_t kc, int64_t m0, int64_t mt, int64_t n0, int64_t nt"
        call = "left_tile(a + a_offset, b + b_offset, 0, c + c_offset, x, 0, M, N, K, kc, m0, mt, n0, nt, 1, 0);"
    entry = CEpilogue(tag, "", len(kinds), conv).entry
    source = f"""/* generated by inferx_compiler/kernels/c_epilogue.py: f32_gemm.c's {'convolution' if conv else 'left-weight'} entry with an epilogue */
#include <immintrin.h>
#include <stdint.h>
{_HELPERS}{macro}#define INFERX_LEFT_ONLY
#include "f32_gemm.c"

void {entry}(const float *a, int64_t a_offset, const float *b, int64_t b_offset{pointers},
                        float *c, int64_t c_offset, {params}) {{
  const float *const x[] = {{{inputs}}};
  {call}
}}
"""
    return CEpilogue(tag, source, len(kinds), conv)
