/* Y[r, :] = softmax(X[r, :]) over the last dim of a row-major f32 [R, N] tensor, AVX-512.
 *
 * IREE 3.13 compiles a softmax (raised to linalg.softmax) into two passes of `exp` a value, a
 * divide a value, and per row a horizontal max and sum in scalar steps: BERT's 12x128x128
 * attention softmax took 0.28 ms on one Xeon core with f32 reductions reassociated (0.53 without)
 * against onnxruntime's 0.07. Here, per row: the max in 16 lanes (NaN-propagating, as
 * arith.maximumf), one pass computing e = exp(x - max) into Y and summing it, one pass scaling Y
 * by 1 / sum (one divide a row; e / sum and e * (1 / sum) differ by at most an ulp).
 *
 * exp(t), t <= 0: t = n ln2 + r with n = round(t log2 e) and |r| <= ln2 / 2, e^r by Cephes'
 * expf polynomial (about 1 ulp), scaled by 2^n with vscalefps (underflow to 0 below -104; NaN
 * stays NaN).
 *
 * `inferx_softmax_rows` computes rows [r0, r0 + rt) (clipped to R); IREE's workgroups call it
 * once per tile of rows, spread over its worker threads. Built freestanding (no libc) and
 * linked by IREE into its embedded ELF: see inferx_compiler/kernels/cpu_objects.py.
 */
#include <immintrin.h>
#include <stdint.h>

static inline __attribute__((always_inline)) __m512 max_nan(__m512 a, __m512 b) {
  /* max, or NaN where either lane is NaN (the hardware's max returns the second operand) */
  return _mm512_mask_add_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
}

static inline __attribute__((always_inline)) __m512 exp_nonpositive(__m512 t) {
  t = _mm512_max_ps(_mm512_set1_ps(-104.0f), t); /* second operand: a NaN t stays NaN */
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), t);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

static void softmax_row(const float *x, float *y, int64_t n) {
  const int64_t full = n & ~(int64_t)15;
  const __mmask16 tail = (__mmask16)((1u << (n - full)) - 1u);
  __m512 m = _mm512_set1_ps(-__builtin_inff());
  for (int64_t i = 0; i < full; i += 16) m = max_nan(m, _mm512_loadu_ps(x + i));
  if (tail) m = max_nan(m, _mm512_mask_loadu_ps(_mm512_set1_ps(-__builtin_inff()), tail, x + full));
  /* horizontal max: NaN if any lane is (the lanes' max then propagates through exp and the sum) */
  __m512 swapped = _mm512_shuffle_f32x4(m, m, _MM_SHUFFLE(1, 0, 3, 2));
  m = max_nan(m, swapped);
  m = max_nan(m, _mm512_shuffle_f32x4(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
  m = max_nan(m, _mm512_permute_ps(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = max_nan(m, _mm512_permute_ps(m, _MM_SHUFFLE(2, 3, 0, 1)));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < full; i += 16) {
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
    _mm512_storeu_ps(y + i, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (tail) {
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + full), m));
    _mm512_mask_storeu_ps(y + full, tail, e);
    sum = _mm512_mask_add_ps(sum, tail, sum, e);
  }
  const __m512 scale = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t i = 0; i < full; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), scale));
  if (tail) _mm512_mask_storeu_ps(y + full, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, y + full), scale));
}

void inferx_softmax_rows(const float *x, int64_t x_offset, float *y, int64_t y_offset, int64_t R, int64_t N,
                         int64_t r0, int64_t rt) {
  x += x_offset;
  y += y_offset;
  const int64_t r1 = r0 + rt < R ? r0 + rt : R;
  for (int64_t r = r0; r < r1; ++r) softmax_row(x + r * N, y + r * N, N);
}
