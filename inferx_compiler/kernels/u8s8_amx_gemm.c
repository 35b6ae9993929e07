/* C[M, N] (s32) = A[M, K] (u8) x B[K, N] (s8) with AMX (`tdpbusd`): one instruction multiplies
 * a 16x64 u8 tile by a 64x16 s8 one into 16x16 s32 sums (16384 multiply-adds; the AVX-512 VNNI
 * kernel u8s8_gemm.c does 64 an instruction). The same operands and sums as u8s8_gemm.c, bit for
 * bit: integer sums, no rounding.
 *
 * Layouts (row-major, no padding):
 *   A  u8  [M, K]                     K a multiple of 64
 *   B  s8  [N / 16][K / 4][16][4]     u8s8_gemm.c's packing: for 16 columns, rows of 4
 *                                     consecutive k per column; 16 such rows (64 k) are one
 *                                     1 KiB tile in the order `tdpbusd` reads
 *   C  s32 [M, N]                     N a multiple of 16
 *
 * Sums wrap (no saturation): |C| <= K * 255 * 128, inside s32 for K < 65793 (the caller checks).
 *
 * `inferx_u8s8_amx_tile` computes the output rows [m0, m0 + mt) and columns [n0, n0 + nt) (clipped
 * to M and N); IREE's workgroups call it once per tile, spread over its worker threads. Inside a
 * tile: blocks of 32 rows x 32 columns held in four accumulator tiles over the whole of K (two A
 * tiles and two B tiles loaded per 32 k); the last rows and a last 16-column panel use smaller
 * tiles.
 *
 * AMX state needs the kernel's permission (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM,
 * XFEATURE_XTILEDATA)) before the first tile instruction of a process; each call asks (a
 * no-op once granted, well under a microsecond), so the compiled module needs nothing from its
 * host program. Built freestanding (no libc) and linked by IREE into its embedded ELF: see
 * inferx_compiler/kernels/cpu_objects.py.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "amx_tiles.h"

/* One block: rows [0, rows0 + rows1) of `a`, columns [0, 16 * panels) of `c`. */
static inline void block(const uint8_t *a, int64_t lda, const int8_t *b0, const int8_t *b1, int32_t *c,
                         int64_t ldc, int64_t kblocks, int rows1, int panels) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const uint8_t *a1 = a + 16 * lda;
  for (int64_t kb = 0; kb < kblocks; ++kb) {
    _tile_loadd(4, a + kb * 64, lda);
    _tile_loadd(6, b0 + kb * 1024, 64);
    _tile_dpbusd(0, 4, 6);
    if (panels == 2) {
      _tile_loadd(7, b1 + kb * 1024, 64);
      _tile_dpbusd(1, 4, 7);
    }
    if (rows1) {
      _tile_loadd(5, a1 + kb * 64, lda);
      _tile_dpbusd(2, 5, 6);
      if (panels == 2) _tile_dpbusd(3, 5, 7);
    }
  }
  _tile_stored(0, c, ldc * 4);
  if (panels == 2) _tile_stored(1, c + 16, ldc * 4);
  if (rows1) {
    _tile_stored(2, c + 16 * ldc, ldc * 4);
    if (panels == 2) _tile_stored(3, c + 16 * ldc + 16, ldc * 4);
  }
}

void inferx_u8s8_amx_tile(const uint8_t *a, int64_t a_offset, const int8_t *b, int64_t b_offset, int32_t *c,
                          int64_t c_offset, int64_t M, int64_t N, int64_t K, int64_t m0, int64_t mt, int64_t n0,
                          int64_t nt) {
  if (request_amx() != 0) return; /* the kernel is only chosen for CPUs with AMX; never reached */
  a += a_offset;
  b += b_offset;
  c += c_offset;
  const int64_t kblocks = K / 64;
  INFERX_AMX_FOR_EACH_BLOCK(M, N, m0, mt, n0, nt,
                            block(a + m * K, K, b + (n / 16) * K * 16, b + (n / 16 + 1) * K * 16, c + m * N + n, N,
                                  kblocks, rows1, panels));
}
