// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=nosuch},inferx-softmax-kernel)' 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-softmax-kernel{rows=8})' 2>&1 | filecheck %s --check-prefix=OPTION
// TARGET: error: {{.*}}unknown target 'nosuch'; valid targets: {{.*}}x86-avx512
// OPTION: error: {{.*}}inferx-softmax-kernel{{.*}}rows
func.func @f(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  return %x : tensor<8x64xf32>
}
