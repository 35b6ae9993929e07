// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=nosuch},inferx-f32-matmul)' 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-f32-matmul{tile=32})' 2>&1 | filecheck %s --check-prefix=OPTION
// TARGET: error: {{.*}}unknown target 'nosuch'; valid targets: {{.*}}x86-avx512
// OPTION: error: {{.*}}inferx-f32-matmul{{.*}}tile
func.func @f(%x: tensor<8x64xf32>, %w: tensor<64x32xf32> {inferx.parameter = "w"}, %z: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<8x64xf32>, tensor<64x32xf32>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
