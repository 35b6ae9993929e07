// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-quantize-contractions{group-size=32})' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-quantize-contractions{group-size=32})' --verify-diagnostics

// Not annotated: left alone, without a remark.
// CHECK-LABEL: func.func @unannotated(
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x64xf32>, tensor<64x8xf32>)
func.func @unannotated(%x: tensor<4x64xf32>, %w: tensor<64x8xf32> {inferx.parameter = "w"}, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<4x64xf32>, tensor<64x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The right-hand side is an activation, not a stored weight: declined.
// CHECK-LABEL: func.func @activation_rhs(
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x64xf32>, tensor<64x8xf32>)
func.func @activation_rhs(%x: tensor<4x64xf32>, %v: tensor<64x8xf32>, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-remark @+1 {{inferx-quantize-contractions: declined: int8 needs a stored weight on the right-hand side}}
  %y = linalg.matmul {inferx.precision = "i8"} ins(%x, %v : tensor<4x64xf32>, tensor<64x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// int4 groups of 32 do not divide K = 48: declined, the f32 weight stays.
// CHECK-LABEL: func.func @int4_ragged_groups(
// CHECK-SAME:    tensor<48x8xf32> {inferx.parameter = "w"}
// CHECK:         linalg.matmul
func.func @int4_ragged_groups(%x: tensor<4x48xf32>, %w: tensor<48x8xf32> {inferx.parameter = "w"}, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-remark @+1 {{inferx-quantize-contractions: declined: int4 groups of 32 do not divide K=48}}
  %y = linalg.matmul {inferx.precision = "i4"} ins(%x, %w : tensor<4x48xf32>, tensor<48x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A batch matmul (attention's q.k^T) annotated by a uniform plan: declined, named.
// CHECK-LABEL: func.func @batch_matmul(
// CHECK:         linalg.batch_matmul
func.func @batch_matmul(%q: tensor<2x4x8xf32>, %k: tensor<2x8x4xf32>, %z: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  // expected-remark @+1 {{inferx-quantize-contractions: declined: int8 is built for linalg.matmul, not linalg.batch_matmul}}
  %y = linalg.batch_matmul {inferx.precision = "i8"} ins(%q, %k : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%z : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %y : tensor<2x4x4xf32>
}

// -----

// An f16 decision is inferx-apply-precision's, not this pass's: untouched, annotation kept.
// CHECK-LABEL: func.func @f16_annotation(
// CHECK:         linalg.matmul {inferx.precision = "f16"}
func.func @f16_annotation(%x: tensor<4x64xf32>, %w: tensor<64x8xf32> {inferx.parameter = "w"}, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = linalg.matmul {inferx.precision = "f16"} ins(%x, %w : tensor<4x64xf32>, tensor<64x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// On a CPU target an f16 product is declined (the CPU form quantizes f32 activations); the
// remark says what it needs.
// CHECK-LABEL: func.func @f16_on_cpu(
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<2x64xf16>, tensor<64x32xf16>)
func.func @f16_on_cpu(%x: tensor<2x64xf16>, %w: tensor<64x32xf16> {inferx.parameter = "fc.w"}, %z: tensor<2x32xf32>) -> tensor<2x32xf32> {
  // expected-remark @+1 {{inferx-quantize-contractions: declined: int8 needs f32 operands}}
  %y = linalg.matmul {inferx.precision = "i8"} ins(%x, %w : tensor<2x64xf16>, tensor<64x32xf16>) outs(%z : tensor<2x32xf32>) -> tensor<2x32xf32>
  return %y : tensor<2x32xf32>
}
