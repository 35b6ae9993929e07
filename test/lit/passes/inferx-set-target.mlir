// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512})' | filecheck %s --check-prefix=AVX512
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=h200})' | filecheck %s --check-prefix=H200
// RUN: inferx-opt %s --context=iree --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2})' | filecheck %s --check-prefix=IREE
// A second inferx-set-target replaces the first record.
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-set-target{target=x86-avx2})' | filecheck %s --check-prefix=IREE

// The whole record goes on the module: what the targeted passes decide from.
// AVX512: module attributes {inferx.target = {
// AVX512-SAME: arch = "skylake-avx512"
// AVX512-SAME: backend = "llvm-cpu"
// AVX512-SAME: features = ["avx2", "fma", "avx512f"]
// AVX512-SAME: l2_bytes = 1048576 : i64
// AVX512-SAME: name = "x86-avx512"
// AVX512-SAME: vector_bits = 512 : i64

// H200: module attributes {inferx.target = {
// H200-SAME: arch = "sm_90"
// H200-SAME: backend = "cuda"
// H200-SAME: cores = 132 : i64
// H200-SAME: name = "h200"
// H200-SAME: shared_memory_bytes = 232448 : i64
// H200-SAME: subgroup_size = 32 : i64

// IREE's context parses the same dictionary.
// IREE: module attributes {inferx.target = {
// IREE-SAME: name = "x86-avx2"
// IREE-SAME: vector_bits = 256 : i64
// IREE-NOT: h200
func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  return %arg0 : tensor<4xf32>
}
