// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-quantize-contractions{group-size=3})' 2>&1 | filecheck %s --check-prefix=GROUP
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=ascend910b},inferx-quantize-contractions)' 2>&1 | filecheck %s --check-prefix=NONE
// GROUP: error: pass 'inferx-quantize-contractions': group-size must be a positive even number, got 3
// NONE: error: inferx-quantize-contractions: int8 contractions need an executable target (target 'ascend910b')
func.func @f(%x: tensor<4x64xf32>, %w: tensor<64x8xf32> {inferx.parameter = "w"}, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = linalg.matmul {inferx.precision = "i8"} ins(%x, %w : tensor<4x64xf32>, tensor<64x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
