/* F[M, N] (f32) = sum over groups g of S[g, n] * (A[M, K] (u8) x W[K, N] (s4))_g, with AVX-512
 * VNNI `vpdpbusd`: the int4 weights are read as they are stored (half of int8's bytes) and
 * widened to s8 in registers; each group of G consecutive k is summed in s32, then scaled by its
 * f32 scale into an f32 sum (true group-wise int4, no requantization to int8).
 *
 * Layouts (all row-major, no padding):
 *   A  u8  [M, K]                     K a multiple of G, G a multiple of 8
 *   W  s4  [N / 16][K / 8][64 bytes]  for 16 columns and 8 consecutive k (k0 = 8j): byte
 *                                     4c + q holds w[k0 + q][c] in its low nibble and
 *                                     w[k0 + 4 + q][c] in its high nibble (c < 16, q < 4): the
 *                                     low nibbles of a line are vpdpbusd's operand for k0..k0+3,
 *                                     the high ones for k0+4..k0+7
 *   S  f32 [K / G, N]                 group scales
 *   F  f32 [M, N]                     N a multiple of 32
 *
 * `inferx_u8s4_tile` computes rows [m0, m0 + mt) and columns [n0, n0 + nt) (clipped to M, N);
 * IREE's workgroups call it once per tile. Register tile: up to 8 rows x 32 columns (16 s32
 * accumulators for one group; the f32 sums accumulate in F's tile, which stays in L1). Group sums wrap in s32 only past G * 255 * 8 (G < 1052689; checked by the
 * caller). Built freestanding, linked into IREE's embedded ELF (kernels/cpu_objects.py).
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

typedef int32_t unaligned_i32 __attribute__((aligned(1), may_alias));

static inline __attribute__((always_inline)) __m512i low_s4(__m512i v, __m512i nibble, __m512i eight) {
  return _mm512_sub_epi8(_mm512_xor_si512(_mm512_and_si512(v, nibble), eight), eight);
}

static inline __attribute__((always_inline)) __m512i high_s4(__m512i v, __m512i nibble, __m512i eight) {
  return _mm512_sub_epi8(_mm512_xor_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), nibble), eight), eight);
}

#define INFERX_S4_TILE(R)                                                                          \
  static inline __attribute__((always_inline)) void s4_tile_##R(                                  \
      const uint8_t *a, int64_t lda, const int8_t *w0, const int8_t *w1, const float *s, int64_t lds, \
      float *f, int64_t ldf, int64_t groups, int64_t lines_per_group) {                            \
    const __m512i nibble = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);                    \
    for (int64_t g = 0; g < groups; ++g) {                                                         \
      __m512i i0[R], i1[R];                                                                        \
      for (int r = 0; r < R; ++r) {                                                                \
        i0[r] = _mm512_setzero_si512();                                                            \
        i1[r] = _mm512_setzero_si512();                                                            \
      }                                                                                            \
      for (int64_t l = 0; l < lines_per_group; ++l) {                                              \
        const int64_t j = g * lines_per_group + l;                                                 \
        __m512i v0 = _mm512_loadu_si512((const void *)(w0 + j * 64));                              \
        __m512i v1 = _mm512_loadu_si512((const void *)(w1 + j * 64));                              \
        __m512i lo0 = low_s4(v0, nibble, eight), hi0 = high_s4(v0, nibble, eight);                 \
        __m512i lo1 = low_s4(v1, nibble, eight), hi1 = high_s4(v1, nibble, eight);                 \
        for (int r = 0; r < R; ++r) {                                                              \
          __m512i xl = _mm512_set1_epi32(*(const unaligned_i32 *)(a + r * lda + j * 8));           \
          __m512i xh = _mm512_set1_epi32(*(const unaligned_i32 *)(a + r * lda + j * 8 + 4));       \
          i0[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(i0[r], xl, lo0), xh, hi0);               \
          i1[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(i1[r], xl, lo1), xh, hi1);               \
        }                                                                                          \
      }                                                                                            \
      /* the group's s32 sums, scaled, into the f32 tile (in F itself: it stays in L1) */          \
      __m512 s0 = _mm512_loadu_ps(s + g * lds), s1 = _mm512_loadu_ps(s + g * lds + 16);            \
      for (int r = 0; r < R; ++r) {                                                                \
        __m512 p0 = _mm512_mul_ps(_mm512_cvtepi32_ps(i0[r]), s0);                                  \
        __m512 p1 = _mm512_mul_ps(_mm512_cvtepi32_ps(i1[r]), s1);                                  \
        if (g) {                                                                                   \
          p0 = _mm512_add_ps(p0, _mm512_loadu_ps(f + r * ldf));                                    \
          p1 = _mm512_add_ps(p1, _mm512_loadu_ps(f + r * ldf + 16));                               \
        }                                                                                          \
        _mm512_storeu_ps(f + r * ldf, p0);                                                         \
        _mm512_storeu_ps(f + r * ldf + 16, p1);                                                    \
      }                                                                                            \
    }                                                                                              \
  }

INFERX_S4_TILE(1)
INFERX_S4_TILE(2)
INFERX_S4_TILE(3)
INFERX_S4_TILE(4)
INFERX_S4_TILE(5)
INFERX_S4_TILE(6)
INFERX_S4_TILE(7)
INFERX_S4_TILE(8)

void inferx_u8s4_tile(const uint8_t *a, int64_t a_offset, const int8_t *w, int64_t w_offset, const float *s,
                      int64_t s_offset, float *f, int64_t f_offset, int64_t M, int64_t N, int64_t K, int64_t G,
                      int64_t m0, int64_t mt, int64_t n0, int64_t nt) {
  a += a_offset;
  w += w_offset;
  s += s_offset;
  f += f_offset;
  const int64_t groups = K / G, lines_per_group = G / 8, panel = (K / 8) * 64;
  const int64_t m1 = m0 + mt < M ? m0 + mt : M;
  const int64_t n1 = n0 + nt < N ? n0 + nt : N;
  for (int64_t n = n0; n < n1; n += 32) {
    const int8_t *w0 = w + (n / 16) * panel;
    const int8_t *w1 = w0 + panel;
    for (int64_t m = m0; m < m1; m += 8) {
      const int64_t rows = m1 - m < 8 ? m1 - m : 8;
      const uint8_t *ap = a + m * K;
      float *fp = f + m * N + n;
      switch (rows) {
        case 8: s4_tile_8(ap, K, w0, w1, s + n, N, fp, N, groups, lines_per_group); break;
        case 7: s4_tile_7(ap, K, w0, w1, s + n, N, fp, N, groups, lines_per_group); break;
        case 6: s4_tile_6(ap, K, w0, w1, s + n, N, fp, N, groups, lines_per_group); break;
        case 5: s4_tile_5(ap, K, w0, w1, s + n, N, fp, N, groups, lines_per_group); break;
        case 4: s4_tile_4(ap, K, w0, w1, s + n, N, fp, N, groups, lines_per_group); break;
        case 3: s4_tile_3(ap, K, w0, w1, s + n, N, fp, N, groups, lines_per_group); break;
        case 2: s4_tile_2(ap, K, w0, w1, s + n, N, fp, N, groups, lines_per_group); break;
        default: s4_tile_1(ap, K, w0, w1, s + n, N, fp, N, groups, lines_per_group); break;
      }
    }
  }
}
