/* One product on f32_gemm.c's right entry (activations x a packed weight) alone, against a
 * float64 reference: how fast is the kernel, per tile shape and thread count, without IREE?
 *
 *   gcc -O3 -mavx512f -mprfchw -fopenmp -I inferx_compiler/kernels tools/bench/f32_kernel_bench.c -o /tmp/f32_bench -lm
 *   OMP_NUM_THREADS=2 /tmp/f32_bench M N K                 e.g. 128 768 3072 (BERT-base's second FFN product)
 *   MT=128 NT=384 COPIES=30 OMP_NUM_THREADS=2 /tmp/f32_bench 128 768 3072
 *
 * MT / NT: the workgroup tile (rows; columns, a multiple of 32), else 128 rows and 128 or 256
 * columns (give them as a build's report shows them: passes/cpu_extern.py `_f32_tile`); the
 * tiles are spread over the threads as they free up, as IREE's workers take workgroups.
 * COPIES=n: n copies of the packed weight, a different one each repetition (30 of BERT's
 * 9 MiB weights: read from memory, as in a model whose other layers ran between).
 * Prints the mean and the best of REPS repetitions (default 20), GFLOP/s at the best, and the
 * relative L2 error of 64 sampled outputs against float64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "f32_gemm.c"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int64_t env_or(const char *name, int64_t fallback) { return getenv(name) ? atoll(getenv(name)) : fallback; }

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s M N K  (N a multiple of 32)\n", argv[0]);
    return 2;
  }
  const int64_t M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]);
  int64_t kc = K <= 256 ? K : 0;
  for (int64_t d = 256; d >= 64 && !kc; --d)
    if (K % d == 0) kc = d;
  if (!kc || N % 32) {
    fprintf(stderr, "K=%ld has no K block from 64 to 256, or N=%ld is not a multiple of 32\n", (long)K, (long)N);
    return 2;
  }
  const int64_t MT = env_or("MT", M < 128 ? M : 128), NT = env_or("NT", N < 1024 ? 128 : 256);
  const int64_t copies = env_or("COPIES", 1), reps = env_or("REPS", 20);
  float *a = aligned_alloc(64, 4 * M * K), *w = malloc(4 * K * N), *c = aligned_alloc(64, 4 * M * N);
  float *packed = aligned_alloc(64, 4 * K * N * copies);
  for (int64_t i = 0; i < M * K; ++i) a[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int64_t i = 0; i < K * N; ++i) w[i] = (float)rand() / RAND_MAX - 0.5f;
  /* [K / kc][N / 32][kc][32] */
  for (int64_t k0 = 0; k0 < K; k0 += kc)
    for (int64_t p = 0; p < N / 32; ++p)
      for (int64_t k = 0; k < kc; ++k) memcpy(packed + k0 * N + (p * kc + k) * 32, w + (k0 + k) * N + p * 32, 128);
  for (int64_t i = 1; i < copies; ++i) memcpy(packed + i * K * N, packed, 4 * K * N);
  const int64_t col_tiles = (N + NT - 1) / NT, tiles = (M + MT - 1) / MT * col_tiles;
  double best = 1e30, total = 0;
  for (int64_t r = 0; r < reps; ++r) {
    const float *b = packed + (r % copies) * K * N;
    const double t0 = now();
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < tiles; ++t)
      inferx_f32_tile(a, 0, b, 0, c, 0, M, N, K, kc, N, t / col_tiles * MT, MT, t % col_tiles * NT, NT);
    const double dt = now() - t0;
    total += dt;
    best = dt < best ? dt : best;
  }
  double err = 0, ref = 0;
  for (int s = 0; s < 64; ++s) {
    const int64_t i = rand() % M, j = rand() % N;
    double d = 0;
    for (int64_t k = 0; k < K; ++k) d += (double)a[i * K + k] * w[k * N + j];
    err += (d - c[i * N + j]) * (d - c[i * N + j]);
    ref += d * d;
  }
  printf("%ldx%ldx%ld tile %ldx%ld: mean %.3f ms, best %.3f ms (%.1f GFLOP/s), rel L2 %.1e\n", (long)M, (long)N,
         (long)K, (long)MT, (long)NT, total / reps * 1e3, best * 1e3, 2.0 * M * N * K / best / 1e9, sqrt(err / ref));
  return 0;
}
