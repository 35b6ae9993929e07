// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-f16-matvec)' --verify-diagnostics | filecheck %s

// What the pass leaves as it is, each with the reason it says.

// CHECK-LABEL: func.func @sixteen_rows(
// CHECK:         linalg.matmul
// CHECK-NOT:     flow.dispatch
func.func @sixteen_rows(%x: tensor<16x256xf16>, %w: tensor<64x256xf16> {inferx.parameter = "w"}, %z: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %et = tensor.empty() : tensor<256x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x256xf16>) outs(%et : tensor<256x64xf16>) permutation = [1, 0]
  // expected-remark @+1 {{inferx-f16-matvec: declined: 16 rows (a matrix-matrix product)}}
  %y = linalg.matmul ins(%x, %t : tensor<16x256xf16>, tensor<256x64xf16>) outs(%z : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// CHECK-LABEL: func.func @dynamic_rows(
// CHECK:         linalg.matmul
func.func @dynamic_rows(%x: tensor<?x256xf16>, %w: tensor<64x256xf16> {inferx.parameter = "w"}, %z: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %et = tensor.empty() : tensor<256x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x256xf16>) outs(%et : tensor<256x64xf16>) permutation = [1, 0]
  // expected-remark @+1 {{inferx-f16-matvec: declined: dynamic rows}}
  %y = linalg.matmul ins(%x, %t : tensor<?x256xf16>, tensor<256x64xf16>) outs(%z : tensor<?x64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// A weight stored [K, N] (an ONNX MatMul's initializer): the kernel reads [N, K].
// CHECK-LABEL: func.func @weight_stored_k_n(
// CHECK:         linalg.matmul
func.func @weight_stored_k_n(%x: tensor<1x256xf16>, %w: tensor<256x64xf16> {inferx.parameter = "w"}, %z: tensor<1x64xf32>) -> tensor<1x64xf32> {
  // expected-remark @+1 {{inferx-f16-matvec: declined: the weight is stored [K, N] (the kernel reads [N, K], reduction innermost)}}
  %y = linalg.matmul ins(%x, %w : tensor<1x256xf16>, tensor<256x64xf16>) outs(%z : tensor<1x64xf32>) -> tensor<1x64xf32>
  return %y : tensor<1x64xf32>
}

// -----

// An activation on the right (attention's scores): no stored weight.
// CHECK-LABEL: func.func @activation_rhs(
// CHECK:         linalg.matmul
func.func @activation_rhs(%x: tensor<1x256xf16>, %v: tensor<256x64xf16>, %z: tensor<1x64xf32>) -> tensor<1x64xf32> {
  // expected-remark @+1 {{inferx-f16-matvec: declined: the right-hand side is not a stored weight}}
  %y = linalg.matmul ins(%x, %v : tensor<1x256xf16>, tensor<256x64xf16>) outs(%z : tensor<1x64xf32>) -> tensor<1x64xf32>
  return %y : tensor<1x64xf32>
}

// -----

// CHECK-LABEL: func.func @f32_operands(
// CHECK:         linalg.matmul
func.func @f32_operands(%x: tensor<1x256xf32>, %w: tensor<64x256xf32> {inferx.parameter = "w"}, %z: tensor<1x64xf32>) -> tensor<1x64xf32> {
  %et = tensor.empty() : tensor<256x64xf32>
  %t = linalg.transpose ins(%w : tensor<64x256xf32>) outs(%et : tensor<256x64xf32>) permutation = [1, 0]
  // expected-remark @+1 {{inferx-f16-matvec: declined: not an f16 x f16 product}}
  %y = linalg.matmul ins(%x, %t : tensor<1x256xf32>, tensor<256x64xf32>) outs(%z : tensor<1x64xf32>) -> tensor<1x64xf32>
  return %y : tensor<1x64xf32>
}

// -----

// An int8/int4 annotation is inferx-quantize-contractions' to rewrite.
// CHECK-LABEL: func.func @integer_annotation(
// CHECK:         linalg.matmul {inferx.precision = "i4"}
func.func @integer_annotation(%x: tensor<1x256xf16>, %w: tensor<64x256xf16> {inferx.parameter = "w"}, %z: tensor<1x64xf32>) -> tensor<1x64xf32> {
  %et = tensor.empty() : tensor<256x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x256xf16>) outs(%et : tensor<256x64xf16>) permutation = [1, 0]
  // expected-remark @+1 {{inferx-f16-matvec: declined: an integer precision is inferx-quantize-contractions'}}
  %y = linalg.matmul {inferx.precision = "i4"} ins(%x, %t : tensor<1x256xf16>, tensor<256x64xf16>) outs(%z : tensor<1x64xf32>) -> tensor<1x64xf32>
  return %y : tensor<1x64xf32>
}

// -----

// K not a multiple of the kernel's step (128 values): the kernel's own reason.
// CHECK-LABEL: func.func @short_step(
// CHECK:         linalg.matmul
func.func @short_step(%x: tensor<1x96xf16>, %w: tensor<64x96xf16> {inferx.parameter = "w"}, %z: tensor<1x64xf32>) -> tensor<1x64xf32> {
  %et = tensor.empty() : tensor<96x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x96xf16>) outs(%et : tensor<96x64xf16>) permutation = [1, 0]
  // expected-remark @+1 {{inferx-f16-matvec: declined: split 1 does not cut K=96 into multiples of 128}}
  %y = linalg.matmul ins(%x, %t : tensor<1x96xf16>, tensor<96x64xf16>) outs(%z : tensor<1x64xf32>) -> tensor<1x64xf32>
  return %y : tensor<1x64xf32>
}
