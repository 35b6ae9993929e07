/* One convolution on f32_gemm.c's convolution entry alone, against a float64 reference: how
 * fast is the kernel, per tile shape and thread count, without IREE around it?
 *
 *   gcc -O3 -mavx512f -fopenmp -I inferx_compiler/kernels tools/bench/conv_kernel_bench.c -o /tmp/conv_bench -lm
 *   OMP_NUM_THREADS=1 /tmp/conv_bench F C H K STRIDE PAD      e.g. 256 256 14 3 1 1 (ResNet-50's 14x14 layer)
 *   MT=266 NT=32 COLD=1 OMP_NUM_THREADS=2 /tmp/conv_bench 256 256 14 3 1 1
 *
 * F filters over C channels of an H x H image, a K x K filter; MT / NT the workgroup tile (rows,
 * a multiple of 14; columns), else the rule's defaults for the left-weight entry; IMAGES=n runs n
 * images a call (the reference checks the first and the last); JOINED=1 tiles their columns side by side;
 * PIXEL_ROWS=1 runs the pixel-rows layout (MT filters, NT pixels a tile; F a multiple of 32); RESIDUAL=1 adds a residual input in the
 * epilogue; KC=n another K block; COLD=1 evicts the caches (a 300 MB sweep)
 * before every repetition, as in a model whose other layers ran between. The default tile is the
 * left-weight entry's rule, not the convolution entry's (passes/cpu_extern.py `_f32c_tile`): give
 * MT/NT as a build's report shows them. -DHELD_SLOTS=0 builds the kernel with its stack's panel
 * buffer only (test/e2e/test_f32_held_panels.py builds it three ways).
 * Prints the best of 7 repetitions (ms, GFLOP/s) and the relative L2 error against float64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* RESIDUAL=1: the epilogue adds a residual input (as ResNet's blocks do), read like the
 * generated epilogues read theirs */
static int64_t residual_n;
#define INFERX_EPILOGUE(acc0, acc1, row, col, lo, hi, x)                                   \
  do {                                                                                     \
    acc0 = _mm512_add_ps(acc0, _mm512_maskz_loadu_ps(lo, x[0] + (row) * residual_n + (col)));      \
    acc1 = _mm512_add_ps(acc1, _mm512_maskz_loadu_ps(hi, x[0] + (row) * residual_n + (col) + 16)); \
  } while (0)
#define INFERX_EPILOGUE_PREFETCH(row, col, x) _mm_prefetch((const char *)(x[0] + (row) * residual_n + (col)), _MM_HINT_T0)
#include "f32_gemm.c"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s F C H K STRIDE PAD\n", argv[0]);
    return 2;
  }
  const int64_t F = atoi(argv[1]), C = atoi(argv[2]), H = atoi(argv[3]), KH = atoi(argv[4]), S = atoi(argv[5]),
                P = atoi(argv[6]);
  const int64_t W = H, KW = KH, OH = (H + 2 * P - KH) / S + 1, OW = (W + 2 * P - KW) / S + 1, N = OH * OW,
                K = C * KH * KW;
  int64_t kc = K <= 256 ? K : 0;
  for (int64_t d = 256; d >= 64 && !kc; --d)
    if (K % d == 0) kc = d;
  if (getenv("KC")) kc = atoi(getenv("KC")); /* a K block other than the rule's (K a multiple of it) */
  if (!kc) {
    fprintf(stderr, "K=%ld has no K block from 64 to 256\n", (long)K);
    return 2;
  }
  const int64_t images = getenv("IMAGES") ? atoi(getenv("IMAGES")) : 1;
  const int64_t joined = getenv("JOINED") && images > 1 && N >= 32; /* the columns of all images side by side */
  float *x = malloc(4 * images * C * H * W), *w = malloc(4 * F * K), *y = malloc(4 * images * F * N);
  for (int64_t i = 0; i < images * C * H * W; ++i) x[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int64_t i = 0; i < F * K; ++i) w[i] = (float)rand() / RAND_MAX - 0.5f;
  const int64_t blocks = (F + 13) / 14;
  /* PIXEL_ROWS=1: the pixel-rows layout (F a multiple of 32), the weight packed as W^T for it */
  const int pixel_rows = getenv("PIXEL_ROWS") != 0 && F % 32 == 0;
  float *a = calloc(blocks * 14 * K, 4); /* the packed weight: [blocks][K][14], or [K / kc][F / 32][kc][32] */
  for (int64_t f = 0; f < F; ++f)
    for (int64_t k = 0; k < K; ++k)
      a[pixel_rows ? (k / kc) * kc * F + ((f / 32) * kc + k % kc) * 32 + f % 32 : ((f / 14) * K + k) * 14 + f % 14] =
          w[f * K + k];
  const int64_t layout = pixel_rows ? 2 : joined;
  int64_t mt = 14 * (blocks < 9 ? blocks : 9), nt = N >= 1024 ? 256 : ((N + 31) / 32 * 32 < 128 ? (N + 31) / 32 * 32 : 128);
  if (pixel_rows) mt = F < 256 ? F : 256, nt = (N + 1) / 2; /* filters, pixels */
  if (getenv("MT")) mt = atoi(getenv("MT"));
  if (getenv("NT")) nt = atoi(getenv("NT"));
  residual_n = N;
  float *r = malloc(4 * images * F * N);
  for (int64_t i = 0; i < images * F * N; ++i) r[i] = (float)rand() / RAND_MAX - 0.5f;
  const float *const residual[] = {r};
  const float *const *epilogue_x = getenv("RESIDUAL") ? residual : 0;
  const int64_t flush_bytes = 300l << 20;
  char *flush = calloc(flush_bytes, 1);
  double best = 1e9;
  for (int rep = 0; rep < 7; ++rep) {
    if (getenv("COLD"))
      for (int64_t i = 0; i < flush_bytes; i += 64) flush[i]++;
    const double t0 = now();
    const int64_t rt = (F + mt - 1) / mt, ct = (N * (layout == 1 ? images : 1) + nt - 1) / nt;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < rt * ct; ++t)
      conv_tile(a, x, y, epilogue_x, F, N, K, kc, images, H, W, OW, KH, KW, S, S, 1, 1, P, P, layout, (t / ct) * mt, mt,
                       (t % ct) * nt, nt);
    const double t = now() - t0;
    if (t < best) best = t;
  }
  double err = 0, ref = 0;
  for (int64_t img = 0; img < images; img += images > 1 ? images - 1 : 1) /* the first and the last image */
    for (int64_t f = 0; f < F; ++f)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const float *xi = x + img * C * H * W;
          const int64_t at = (img * F + f) * N + oh * OW + ow;
          double s = 0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * S - P + kh, iw = ow * S - P + kw;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                  s += (double)w[((f * C + c) * KH + kh) * KW + kw] * xi[(c * H + ih) * W + iw];
              }
          if (epilogue_x) s += r[at];
          const double d = y[at] - s;
          err += d * d;
          ref += s * s;
        }
  printf("F=%ld C=%ld H=%ld %ldx%ld stride %ld pad %ld, %ld image(s)%s, tile %ldx%ld: %.3f ms, %.1f GFLOP/s, relative L2 %.1e\n",
         (long)F, (long)C, (long)H, (long)KH, (long)KW, (long)S, (long)P, (long)images,
         layout == 2 ? " pixel rows" : layout ? " joined" : "", (long)mt, (long)nt, best * 1e3,
         2.0 * images * F * N * K / best / 1e9,
         sqrt(err / ref));
  return 0;
}
