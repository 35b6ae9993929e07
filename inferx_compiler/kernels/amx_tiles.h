/* What the AMX kernels (bf16_amx_gemm.c, u8s8_amx_gemm.c) share: the permission to use the
 * tile state, the tile configuration of a 32x32 block, and the walk over a workgroup's blocks.
 *
 * Tiles: 0-3 sums (0, 1: rows 0-15 of the block, columns 0-15 and 16-31; 2, 3: rows 16-31),
 * 4, 5 the A tiles of the two row halves, 6, 7 the B tiles of the two column panels. Every row
 * of every tile is 64 bytes. Included by the kernels (cpu_objects.py hashes it with them).
 */
#ifndef INFERX_AMX_TILES_H
#define INFERX_AMX_TILES_H

#include <immintrin.h>
#include <stdint.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#define SYS_ARCH_PRCTL 158

typedef struct {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

static inline long request_amx(void) {
  long result;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "a"((long)SYS_ARCH_PRCTL), "D"((long)ARCH_REQ_XCOMP_PERM), "S"((long)XFEATURE_XTILEDATA)
                   : "rcx", "r11", "memory");
  return result;
}

/* The tiles' shapes for a block of rows0 + rows1 rows (rows1 may be 0: its tiles go unused). */
static inline void configure(int rows0, int rows1) {
  tile_config c;
  uint8_t *bytes = (uint8_t *)&c;
  for (unsigned i = 0; i < sizeof c; ++i) bytes[i] = 0;
  c.palette = 1;
  const int rows[8] = {rows0, rows0, rows1, rows1, rows0, rows1, 16, 16};
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = (uint8_t)(rows[t] ? rows[t] : 1);
    c.colsb[t] = 64;
  }
  _tile_loadconfig(&c);
}

/* Calls BLOCK(n, panels, m, rows1) for every block of rows [m0, min(m0 + mt, M)) x columns
 * [n0, min(n0 + nt, N)): 32 columns (2 panels) or a last 16 (1), 32 rows or the last ones,
 * configuring the tiles when the block's rows change; then releases the tiles. */
#define INFERX_AMX_FOR_EACH_BLOCK(M, N, m0, mt, n0, nt, BLOCK)                           \
  do {                                                                                    \
    const int64_t m1_ = (m0) + (mt) < (M) ? (m0) + (mt) : (M);                            \
    const int64_t n1_ = (n0) + (nt) < (N) ? (n0) + (nt) : (N);                            \
    int configured0_ = -1, configured1_ = -1;                                             \
    for (int64_t n = (n0); n < n1_; n += 32) {                                            \
      const int panels = n1_ - n >= 32 ? 2 : 1;                                           \
      for (int64_t m = (m0); m < m1_; m += 32) {                                          \
        const int64_t rows_ = m1_ - m < 32 ? m1_ - m : 32;                                \
        const int rows0_ = rows_ < 16 ? (int)rows_ : 16;                                  \
        const int rows1 = (int)rows_ - rows0_;                                            \
        if (rows0_ != configured0_ || rows1 != configured1_) {                            \
          configure(rows0_, rows1);                                                       \
          configured0_ = rows0_;                                                          \
          configured1_ = rows1;                                                           \
        }                                                                                 \
        BLOCK;                                                                            \
      }                                                                                   \
    }                                                                                     \
    _tile_release();                                                                      \
  } while (0)

#endif
