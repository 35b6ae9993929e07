// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=nosuch},inferx-amx-matmul)' 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-amx-matmul{tile=32})' 2>&1 | filecheck %s --check-prefix=OPTION
// TARGET: error: {{.*}}unknown target 'nosuch'; valid targets: {{.*}}x86-amx
// OPTION: error: {{.*}}inferx-amx-matmul{{.*}}tile
func.func @f(%x: tensor<8x64xbf16>, %w: tensor<64x32xbf16> {inferx.parameter = "w"}, %z: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<8x64xbf16>, tensor<64x32xbf16>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
