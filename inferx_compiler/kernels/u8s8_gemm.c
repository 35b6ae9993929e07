/* C[M, N] (s32) = A[M, K] (u8) x B[K, N] (s8) with AVX-512 VNNI `vpdpbusd`: four u8 x s8
 * products summed into each s32 lane, 64 multiply-adds an instruction (IREE 3.13's s8 x s8
 * microkernel uses `vpdpwssd` on 16-bit pairs: half that).
 *
 * Layouts (all row-major, no padding):
 *   A  u8  [M, K]                     K a multiple of 4
 *   B  s8  [N / 16][K / 4][16][4]     packed: for 16 columns and 4 consecutive k, one 64-byte
 *                                     vector, the 4 k of a column adjacent (vpdpbusd's order)
 *   C  s32 [M, N]                     N a multiple of 32
 *
 * `inferx_u8s8_tile` computes the output rows [m0, m0 + mt) and columns [n0, n0 + nt) (clipped
 * to M and N); IREE's workgroups call it once per tile, spread over its worker threads. Inside
 * a tile: 32 columns (two 16-column panels of B, which stay in L1/L2 across the row blocks) by
 * up to 8 rows: 16 accumulators, 2 vector loads and 8 broadcasts per 4 k.
 *
 * Sums wrap (no saturation): |C| <= K * 255 * 128, inside s32 for K < 65793 (the caller checks).
 * Built freestanding (no libc, no stack protector) and linked by IREE into its embedded ELF:
 * see inferx_compiler/kernels/cpu_objects.py.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

typedef int32_t unaligned_i32 __attribute__((aligned(1), may_alias));

#define INFERX_TILE(R)                                                                              \
  static inline __attribute__((always_inline)) void tile_##R(                                       \
      const uint8_t *a, int64_t lda, const int8_t *b0, const int8_t *b1, int32_t *c, int64_t ldc,    \
      int64_t kgroups) {                                                                            \
    __m512i acc0[R], acc1[R];                                                                       \
    for (int r = 0; r < R; ++r) {                                                                   \
      acc0[r] = _mm512_setzero_si512();                                                             \
      acc1[r] = _mm512_setzero_si512();                                                             \
    }                                                                                               \
    for (int64_t kg = 0; kg < kgroups; ++kg) {                                                      \
      __m512i w0 = _mm512_loadu_si512((const void *)(b0 + kg * 64));                                \
      __m512i w1 = _mm512_loadu_si512((const void *)(b1 + kg * 64));                                \
      for (int r = 0; r < R; ++r) {                                                                 \
        __m512i x = _mm512_set1_epi32(*(const unaligned_i32 *)(a + r * lda + kg * 4));              \
        acc0[r] = _mm512_dpbusd_epi32(acc0[r], x, w0);                                              \
        acc1[r] = _mm512_dpbusd_epi32(acc1[r], x, w1);                                              \
      }                                                                                             \
    }                                                                                               \
    for (int r = 0; r < R; ++r) {                                                                   \
      _mm512_storeu_si512((void *)(c + r * ldc), acc0[r]);                                          \
      _mm512_storeu_si512((void *)(c + r * ldc + 16), acc1[r]);                                     \
    }                                                                                               \
  }

INFERX_TILE(1)
INFERX_TILE(2)
INFERX_TILE(3)
INFERX_TILE(4)
INFERX_TILE(5)
INFERX_TILE(6)
INFERX_TILE(7)
INFERX_TILE(8)

void inferx_u8s8_tile(const uint8_t *a, int64_t a_offset, const int8_t *b, int64_t b_offset, int32_t *c,
                      int64_t c_offset, int64_t M, int64_t N, int64_t K, int64_t m0, int64_t mt, int64_t n0,
                      int64_t nt) {
  a += a_offset;
  b += b_offset;
  c += c_offset;
  const int64_t kgroups = K / 4;
  const int64_t m1 = m0 + mt < M ? m0 + mt : M;
  const int64_t n1 = n0 + nt < N ? n0 + nt : N;
  for (int64_t n = n0; n < n1; n += 32) {
    const int8_t *b0 = b + (n / 16) * K * 16;
    const int8_t *b1 = b0 + K * 16;
    for (int64_t m = m0; m < m1; m += 8) {
      const int64_t rows = m1 - m < 8 ? m1 - m : 8;
      const uint8_t *ap = a + m * K;
      int32_t *cp = c + m * N + n;
      switch (rows) {
        case 8: tile_8(ap, K, b0, b1, cp, N, kgroups); break;
        case 7: tile_7(ap, K, b0, b1, cp, N, kgroups); break;
        case 6: tile_6(ap, K, b0, b1, cp, N, kgroups); break;
        case 5: tile_5(ap, K, b0, b1, cp, N, kgroups); break;
        case 4: tile_4(ap, K, b0, b1, cp, N, kgroups); break;
        case 3: tile_3(ap, K, b0, b1, cp, N, kgroups); break;
        case 2: tile_2(ap, K, b0, b1, cp, N, kgroups); break;
        default: tile_1(ap, K, b0, b1, cp, N, kgroups); break;
      }
    }
  }
}
