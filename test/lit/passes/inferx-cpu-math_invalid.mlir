// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=nosuch},inferx-cpu-math)' 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-cpu-math{degree=4})' 2>&1 | filecheck %s --check-prefix=OPTION
// TARGET: error: {{.*}}unknown target 'nosuch'; valid targets: {{.*}}x86-avx512
// OPTION: error: {{.*}}inferx-cpu-math{{.*}}degree
func.func @f(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  return %x : tensor<8x64xf32>
}
