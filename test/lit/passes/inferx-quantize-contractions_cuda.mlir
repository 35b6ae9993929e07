// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-quantize-contractions{target=h200 group-size=32})' | filecheck %s

// CUDA, int8: weight-only. The activations are truncated to f16, the int8 weight is dequantized
// to f16 with f16 scales (an elementwise generic IREE fuses into the matmul's dispatch), and the
// f16 x f16 matmul accumulates into the f32 init. No integer arithmetic, no activation scales.
// CHECK-LABEL: func.func @int8_weight_only(
// CHECK-SAME:    %[[X:.+]]: tensor<?x64xf32>, %{{.+}}: tensor<?x32xf32>, %[[WQ:.+]]: tensor<64x32xi8> {inferx.parameter = "fc.w#q:int8h"}, %[[S:.+]]: tensor<32xf16> {inferx.parameter = "fc.w#q:int8h:scale"}
// CHECK:         %[[X16:.+]] = linalg.generic {{.*}} ins(%[[X]] : tensor<?x64xf32>) outs({{.*}} : tensor<?x64xf16>)
// CHECK:           arith.truncf
// CHECK:         %[[W16:.+]] = linalg.generic {{.*}} ins(%[[WQ]], %[[S]] : tensor<64x32xi8>, tensor<32xf16>) outs({{.*}} : tensor<64x32xf16>)
// CHECK:           arith.sitofp {{.*}} : i8 to f16
// CHECK:           arith.mulf {{.*}} : f16
// CHECK:         linalg.matmul ins(%[[X16]], %[[W16]] : tensor<?x64xf16>, tensor<64x32xf16>) outs(%{{.*}} : tensor<?x32xf32>)
// CHECK-NOT:     math.roundeven
func.func @int8_weight_only(%x: tensor<?x64xf32>, %w: tensor<64x32xf32> {inferx.parameter = "fc.w"}, %z: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %y = linalg.matmul {inferx.precision = "i8"} ins(%x, %w : tensor<?x64xf32>, tensor<64x32xf32>) outs(%z : tensor<?x32xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// CUDA, int4 in groups of 32: the weight [K/32, 32, N] i4 with [K/32, N] f16 scales, dequantized
// to f16, collapsed to [K, N], one f16 x f16 -> f32 matmul.
// CHECK-LABEL: func.func @int4_weight_only(
// CHECK-SAME:    tensor<2x32x8xi4> {inferx.parameter = "w#q:int4g32h"}, %[[S:.+]]: tensor<2x8xf16> {inferx.parameter = "w#q:int4g32h:scale"}
// CHECK:         arith.sitofp {{.*}} : i4 to f16
// CHECK:         %[[W:.+]] = tensor.collapse_shape {{.*}} : tensor<2x32x8xf16> into tensor<64x8xf16>
// CHECK:         linalg.matmul ins(%{{.*}}, %[[W]] : tensor<4x64xf16>, tensor<64x8xf16>) outs({{.*}} : tensor<4x8xf32>)
func.func @int4_weight_only(%x: tensor<4x64xf32>, %w: tensor<64x8xf32> {inferx.parameter = "w"}, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = linalg.matmul {inferx.precision = "i4"} ins(%x, %w : tensor<4x64xf32>, tensor<64x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
