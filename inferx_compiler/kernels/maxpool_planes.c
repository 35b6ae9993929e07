/* Y[p] = max pooling of X[p] over 2-D planes (NCHW: one plane an image's channel), AVX-512.
 *
 * IREE 3.13 treats a `linalg.pooling_nchw_max` as a convolution for its data tiling: its input
 * gets an identity "encoding", which is one more copy of the padded input in a dispatch of its
 * own (ResNet-50 b8: 26.6 MB copied in 3.7-10.7 ms, then the pooling itself 1.9 ms, at two
 * threads on a Xeon; onnxruntime's whole max pooling 0.9 ms). Here the pooling reads the
 * unpadded input once: per output row, the vertical max of the window's rows (16 lanes at a
 * time, contiguous) into a row buffer with -inf margins, then the horizontal max over the
 * window's columns from that buffer (unaligned loads at stride 1, a two-vector permute at
 * stride 2, gathers otherwise).
 *
 * Padding is virtual: window positions outside the plane are skipped (the -inf padding ONNX
 * and torch-mlir put around a max pooling), so a window entirely outside gives -inf. NaN
 * propagates as arith.maximumf does (the hardware's max returns its second operand on NaN).
 *
 * `inferx_maxpool_rows(x, xo, y, yo, P, HW, p0, pt, H, W, OH, OW, KH, KW, SH, SW, PH, PW)` pools
 * planes [p0, p0 + pt) (clipped to P): x is [P, H * W], y [P, OH * OW]. The row buffer is on the
 * stack: the pass declines planes whose buffer would pass MAXPOOL_ROW_MAX floats. Built
 * freestanding (no libc) and linked by IREE into its embedded ELF: see cpu_objects.py.
 */
#include <immintrin.h>
#include <stdint.h>

#define MAXPOOL_ROW_MAX 4096 /* floats in the row buffer (16 KiB); passes/pool_kernel.py: ROW_MAX */

static inline __attribute__((always_inline)) __m512 max_nan(__m512 a, __m512 b) {
  /* max, or NaN where either lane is NaN */
  return _mm512_mask_add_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
}

/* row[0, len) = -inf, then row[pw, pw + w) = max over the rows [r0, r1) of the plane */
static void vertical_max(const float *plane, int64_t w, int64_t r0, int64_t r1, float *row, int64_t pw,
                         int64_t len) {
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  for (int64_t i = 0; i < len; i += 16) _mm512_storeu_ps(row + i, ninf);
  float *out = row + pw;
  int64_t c = 0;
  for (; c + 16 <= w; c += 16) {
    __m512 m = ninf;
    for (int64_t r = r0; r < r1; ++r) m = max_nan(m, _mm512_loadu_ps(plane + r * w + c));
    _mm512_storeu_ps(out + c, m);
  }
  if (c < w) {
    const __mmask16 tail = (__mmask16)((1u << (w - c)) - 1u);
    __m512 m = ninf;
    for (int64_t r = r0; r < r1; ++r) m = max_nan(m, _mm512_mask_loadu_ps(ninf, tail, plane + r * w + c));
    _mm512_mask_storeu_ps(out + c, tail, m);
  }
}

/* out[o] = max over j < kw of row[o * sw + j], o < ow */
static void horizontal_max(const float *row, float *out, int64_t ow, int64_t kw, int64_t sw) {
  const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i evens = _mm512_slli_epi32(lanes, 1);
  const __m512i gather = _mm512_mullo_epi32(lanes, _mm512_set1_epi32((int32_t)sw));
  for (int64_t o = 0; o < ow; o += 16) {
    const __mmask16 keep = ow - o >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (ow - o)) - 1u);
    const float *base = row + o * sw;
    __m512 m = _mm512_set1_ps(-__builtin_inff());
    for (int64_t j = 0; j < kw; ++j) {
      __m512 v;
      if (sw == 1) {
        v = _mm512_loadu_ps(base + j);
      } else if (sw == 2) {
        v = _mm512_permutex2var_ps(_mm512_loadu_ps(base + j), evens, _mm512_loadu_ps(base + j + 16));
      } else {
        v = _mm512_i32gather_ps(gather, base + j, 4);
      }
      m = max_nan(m, v);
    }
    _mm512_mask_storeu_ps(out + o, keep, m);
  }
}

void inferx_maxpool_rows(const float *x, int64_t x_offset, float *y, int64_t y_offset, int64_t P, int64_t HW,
                         int64_t p0, int64_t pt, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH,
                         int64_t KW, int64_t SH, int64_t SW, int64_t PH, int64_t PW) {
  float row[MAXPOOL_ROW_MAX] __attribute__((aligned(64)));
  /* the buffer covers every column a 16-lane group of outputs reads: up to (OW rounded up to 16)
     * SW + KW + 16 (the stride-2 path loads two vectors), and the plane's PW + W */
  int64_t len = ((OW + 15) / 16 * 16) * SW + KW + 16;
  if (len < PW + W) len = PW + W;
  len = (len + 15) / 16 * 16;
  x += x_offset;
  y += y_offset;
  const int64_t p1 = p0 + pt < P ? p0 + pt : P;
  for (int64_t p = p0; p < p1; ++p) {
    const float *plane = x + p * HW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      int64_t r0 = oh * SH - PH, r1 = r0 + KH;
      if (r0 < 0) r0 = 0;
      if (r1 > H) r1 = H;
      vertical_max(plane, W, r0, r1, row, PW, len);
      horizontal_max(row, y + p * OH * OW + oh * OW, OW, KW, SW);
    }
  }
}
