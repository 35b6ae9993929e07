// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=nosuch},inferx-conv-image-loop)' 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=cpu},inferx-conv-image-loop{images=4})' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=cpu},inferx-conv-image-loop{chunk=0})' 2>&1 | filecheck %s --check-prefix=CHUNK
// CHUNK: error: {{.*}}inferx-conv-image-loop{{.*}}chunk must be >= 1, got 0
// TARGET: error: {{.*}}unknown target 'nosuch'; valid targets: {{.*}}x86-avx512
// OPTION: error: {{.*}}inferx-conv-image-loop{{.*}}images
func.func @f(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  return %x : tensor<1x4x8x8xf32>
}
