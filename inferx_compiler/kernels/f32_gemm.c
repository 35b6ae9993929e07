/* C[M, N] (f32) = A[M, K] (f32) x B[K, N] (f32) with AVX-512 FMA, the weight packed at load.
 *
 * IREE 3.13 runs an f32 matmul against a weight as data-tiled mmt4d: the activations are packed
 * on every call, and on BERT-base's shapes its microkernel ran 80-110 GFLOP/s a core on a Xeon
 * with AVX-512 whose FMA units sustain 213 (tools/bench/dispatch_profile.py); this kernel runs
 * those shapes at 150-163 in isolation (onnxruntime's MLAS: 158-160).
 *
 * Layouts (row-major):
 *   A  f32 [M, K]                      any K, read in place
 *   B  f32 [K / kc][N / 32][kc][32]    packed (by inferx-f32-matmul, at load): K blocks of kc
 *                                      rows (cpu_objects.f32_k_block), each 32-column panels of
 *                                      kc rows of 32 consecutive columns
 *   C  f32 [M, N]                      N a multiple of 32 (the pass pads the weight with zero
 *                                      columns at load and cuts the result)
 *
 * `inferx_f32_tile` computes output rows [m0, m0 + mt) and columns [n0, n0 + nt) (clipped to M
 * and N); IREE's workgroups call it once per tile, spread over its worker threads. Inside a
 * tile, for each K block: for each block of up to 14 rows (the tile's rows spread evenly), for
 * each 32-column panel: a 14x32 register tile (28 zmm accumulators) takes per k two B vectors
 * and 14 broadcast A elements: 28 FMAs. The accumulators start from C after the first K block.
 * Rows whose stride K puts them in few L1 sets (K a multiple of 1024 floats: every row in one
 * set) are first packed per K block by a 16x16 register transpose; other rows are read in
 * place. The next B rows are prefetched into L1 and the next panel into L2, so one row (a
 * matrix-vector product) streams the weight at memory speed. Sums per element in the order
 * k = 0, 1, ... (IREE's order differs: results agree to f32 rounding).
 *
 * Built freestanding (no libc) and linked by IREE into its embedded ELF: see
 * inferx_compiler/kernels/cpu_objects.py. Stack use: the 16 KiB packed row block.
 */
#include <immintrin.h>
#include <stdint.h>

#define MR 14      /* register tile rows */
#define PREFETCH_K 32 /* B rows read ahead (2 KiB): keeps memory streaming when few rows share a panel */
#define PACKED_ROWS 16 /* a packed row block's stride along k: one register of the transpose */
#define KC_MAX 256 /* the largest K block: a panel's K block is at most 32 KiB, the packed rows 14 KiB */

/* c[0:rows, 0:32] (+)= a[0:rows, 0:kc] b[0:kc, 0:32]; rows is a compile-time constant after inlining. */
static inline __attribute__((always_inline)) void micro(int rows, const float *a, int64_t lda, int64_t step, const float *b,
                                                        int64_t kc, float *c, int64_t ldc, int accumulate, __mmask16 lo,
                                                        __mmask16 hi, int left) {
  __m512 acc[MR][2];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
    if (i < rows) {
      acc[i][0] = accumulate ? _mm512_maskz_loadu_ps(lo, c + i * ldc) : _mm512_setzero_ps();
      acc[i][1] = accumulate ? _mm512_maskz_loadu_ps(hi, c + i * ldc + 16) : _mm512_setzero_ps();
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    if (left) {
      /* the weight's packed rows stream from L2, one line a k; the panel is in L1 */
      _mm_prefetch((const char *)(a + (k + PREFETCH_K) * step), _MM_HINT_T0);
    } else {
      _mm_prefetch((const char *)(b + (k + PREFETCH_K) * 32), _MM_HINT_T0);
      _mm_prefetch((const char *)(b + (k + PREFETCH_K) * 32 + 16), _MM_HINT_T0);
      /* and the next panel's block into L2: the first row block of a tile streams the weight from memory */
      _mm_prefetch((const char *)(b + (k + kc) * 32), _MM_HINT_T1);
      _mm_prefetch((const char *)(b + (k + kc) * 32 + 16), _MM_HINT_T1);
    }
    const __m512 b0 = _mm512_loadu_ps(b + k * 32);
    const __m512 b1 = _mm512_loadu_ps(b + k * 32 + 16);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      if (i < rows) {
        const __m512 ai = _mm512_set1_ps(a[i * lda + k * step]);
        acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
      }
    }
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
    if (i < rows) {
      _mm512_mask_storeu_ps(c + i * ldc, lo, acc[i][0]);
      _mm512_mask_storeu_ps(c + i * ldc + 16, hi, acc[i][1]);
    }
  }
}

/* micro with `rows` (and `left`) as compile-time constants. */
#define INFERX_MICRO_ROWS(name, left)                                                                                      \
  static void name(int rows, const float *a, int64_t lda, int64_t step, const float *b, int64_t kc, float *c, int64_t ldc, \
                   int accumulate, __mmask16 lo, __mmask16 hi) {                                                           \
    switch (rows) {                                                                                                        \
      INFERX_ROWS(1, left) INFERX_ROWS(2, left) INFERX_ROWS(3, left) INFERX_ROWS(4, left) INFERX_ROWS(5, left)            \
      INFERX_ROWS(6, left) INFERX_ROWS(7, left) INFERX_ROWS(8, left) INFERX_ROWS(9, left) INFERX_ROWS(10, left)           \
      INFERX_ROWS(11, left) INFERX_ROWS(12, left) INFERX_ROWS(13, left) INFERX_ROWS(14, left)                              \
      default:                                                                                                             \
        break;                                                                                                             \
    }                                                                                                                      \
  }
#define INFERX_ROWS(r, left) \
  case r:                    \
    micro(r, a, lda, step, b, kc, c, ldc, accumulate, lo, hi, left); \
    break;
INFERX_MICRO_ROWS(micro_rows, 0)
INFERX_MICRO_ROWS(micro_rows_left, 1)
#undef INFERX_ROWS
#undef INFERX_MICRO_ROWS

/* Whether MR rows K floats apart fall into few L1 sets (48 KiB, 12 ways, 64 sets of 64-byte
 * lines): rows repeat a set every 64 / gcd(K / 16, 64) rows; under 4, a register tile's rows
 * would evict each other (K = 3072 or 4096: every row in one set). Such rows are packed. */
static int rows_share_l1_sets(int64_t K) {
  if (K % 16) return 0; /* rows not line-aligned: they spread over the sets */
  int64_t lines = K / 16, g = 64;
  while (lines % g) g /= 2;
  return 64 / g < 4;
}

/* 16x16 transpose of r[0..15] in registers (32-, 64-, then 128-bit interleaves). */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int j = 0; j < 2; ++j) {
      r[i + j] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + j]), _mm512_castps_pd(t[i + j + 2])));
      r[i + j + 2] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + j]), _mm512_castps_pd(t[i + j + 2])));
    }
  for (int i = 0; i < 16; i += 8)
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
  }
}

/* packed[k][i] = a[i][k] for i < rows (row stride PACKED_ROWS), k < kc: 16 k at a time through a
 * register transpose; the rows past `rows` hold whatever the registers did (never read). */
static void pack_rows(const float *a, int64_t lda, int rows, int64_t kc, float *packed) {
  int64_t k = 0;
  for (; k + 16 <= kc; k += 16) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_loadu_ps(a + i * lda + k) : _mm512_setzero_ps();
    transpose16(r);
    /* after the transpose r[j] holds column k + j with j's two low bits swapped (the interleaves' order) */
    for (int j = 0; j < 16; ++j) _mm512_storeu_ps(packed + (k + ((j & ~3) | (j & 1) << 1 | (j >> 1 & 1))) * PACKED_ROWS, r[j]);
  }
  for (; k < kc; ++k)
    for (int i = 0; i < rows; ++i) packed[k * PACKED_ROWS + i] = a[i * lda + k];
}

void inferx_f32_tile(const float *a, int64_t a_offset, const float *b, int64_t b_offset, float *c, int64_t c_offset,
                     int64_t M, int64_t N, int64_t K, int64_t kc, int64_t m0, int64_t mt, int64_t n0, int64_t nt) {
  a += a_offset;
  b += b_offset;
  c += c_offset;
  const int64_t m1 = m0 + mt < M ? m0 + mt : M;
  const int64_t n1 = n0 + nt < N ? n0 + nt : N;
  float packed[KC_MAX * PACKED_ROWS]; /* a's rows block [kc][MR]: rows K floats apart would share L1 sets */
  const int pack = rows_share_l1_sets(K);
  for (int64_t k0 = 0; k0 < K; k0 += kc) {
    const float *block = b + k0 * N; /* [N / 32][kc][32] */
    const int64_t blocks = (m1 - m0 + MR - 1) / MR; /* rows spread evenly: 128 = 8 x 13 + 2 x 12 */
    for (int64_t j = 0, m = m0; j < blocks; ++j) {
      const int rows = (int)((m1 - m0) / blocks + (j < (m1 - m0) % blocks));
      const float *rows_a = a + m * K + k0;
      int64_t lda = K, step = 1;
      if (pack) {
        pack_rows(rows_a, K, rows, kc, packed);
        rows_a = packed, lda = 1, step = PACKED_ROWS;
      }
      for (int64_t n = n0; n < n1; n += 32) micro_rows(rows, rows_a, lda, step, block + n * kc, kc, c + m * N + n, N, k0 > 0, 0xFFFF, 0xFFFF);
      m += rows;
    }
  }
}

/* panel[k][0:32] = b[k][0:cols] for k < kc (row stride ldb), the columns past `cols` zero. */
static void pack_panel(const float *b, int64_t ldb, int64_t kc, __mmask16 lo, __mmask16 hi, float *panel) {
  for (int64_t k = 0; k < kc; ++k) {
    _mm_prefetch((const char *)(b + (k + 8) * ldb), _MM_HINT_T0);
    _mm512_storeu_ps(panel + k * 32, _mm512_maskz_loadu_ps(lo, b + k * ldb));
    _mm512_storeu_ps(panel + k * 32 + 16, _mm512_maskz_loadu_ps(hi, b + k * ldb + 16));
  }
}

static __mmask16 first_lanes(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* The weight on the left: C[M, N] = A x B[K, N] with A a weight [M, K] packed (by
 * inferx-f32-matmul, at load) as [ceil(M / 14)][K][14] (blocks of MR rows, k-major, the rows
 * past M zero: a 16-float line a k ran no faster) and B activations, row-major [K, N],
 * any N (a convolution as a matmul: w[F, C kh kw] x col[C kh kw, pixels]). Same register tile;
 * for each K block and 32-column panel of the tile, the panel is first copied into a contiguous
 * [kc][32] block (the columns past N zero: one pass over it, then read by every row block; in
 * place, rows a few thousand pixels apart would share L1 sets), the weight's row blocks stream
 * from L2 past it (prefetched PREFETCH_K k ahead), and the last panel's stores are masked. m0 and mt are
 * multiples of 14. Stack use: the 32 KiB panel. */
void inferx_f32l_tile(const float *a, int64_t a_offset, const float *b, int64_t b_offset, float *c, int64_t c_offset,
                      int64_t M, int64_t N, int64_t K, int64_t kc, int64_t m0, int64_t mt, int64_t n0, int64_t nt) {
  a += a_offset;
  b += b_offset;
  c += c_offset;
  const int64_t m1 = m0 + mt < M ? m0 + mt : M;
  const int64_t n1 = n0 + nt < N ? n0 + nt : N;
  float panel[KC_MAX * 32];
  for (int64_t k0 = 0; k0 < K; k0 += kc) {
    for (int64_t n = n0; n < n1; n += 32) {
      const __mmask16 lo = first_lanes(n1 - n), hi = first_lanes(n1 - n - 16);
      pack_panel(b + k0 * N + n, N, kc, lo, hi, panel);
      for (int64_t m = m0; m < m1; m += MR) {
        const int rows = (int)(m1 - m < MR ? m1 - m : MR);
        micro_rows_left(rows, a + ((m / MR) * K + k0) * MR, 1, MR, panel, kc, c + m * N + n, N, k0 > 0,
                        lo, hi);
      }
    }
  }
}
