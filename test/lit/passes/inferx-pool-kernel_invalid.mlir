// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=nosuch},inferx-pool-kernel)' 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-pool-kernel{window=3})' 2>&1 | filecheck %s --check-prefix=OPTION
// TARGET: error: {{.*}}unknown target 'nosuch'; valid targets: {{.*}}x86-avx512
// OPTION: error: {{.*}}inferx-pool-kernel{{.*}}window
func.func @f(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  return %x : tensor<1x4x8x8xf32>
}
