// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-annotate-precision)' | filecheck %s

// Integer contractions are quantized computations, not float ones to demote.
// CHECK-LABEL: func.func @matmul_i8_i32(
// CHECK-NOT:     inferx.precision
func.func @matmul_i8_i32(%a: tensor<4x8xi8>, %b: tensor<8x16xi8>, %c: tensor<4x16xi32>) -> tensor<4x16xi32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xi8>, tensor<8x16xi8>) outs(%c : tensor<4x16xi32>) -> tensor<4x16xi32>
  return %0 : tensor<4x16xi32>
}

// -----

// Inputs already in f16: there is nothing left to demote.
// CHECK-LABEL: func.func @matmul_f16_f32(
// CHECK-NOT:     inferx.precision
func.func @matmul_f16_f32(%a: tensor<4x8xf16>, %b: tensor<8x16xf16>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf16>, tensor<8x16xf16>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// An existing annotation is an earlier decision and is not overwritten.
// CHECK-LABEL: func.func @matmul_already_annotated(
// CHECK:         linalg.matmul {inferx.precision = "bf16"}
func.func @matmul_already_annotated(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.matmul {inferx.precision = "bf16"} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Elementwise ops have no reduction: not a contraction.
// CHECK-LABEL: func.func @add_f32(
// CHECK-NOT:     inferx.precision
func.func @add_f32(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.add ins(%a, %b : tensor<4x16xf32>, tensor<4x16xf32>) outs(%a : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Pooling looks like a convolution to linalg but its body has no multiply.
// CHECK-LABEL: func.func @pooling_sum_f32(
// CHECK-NOT:     inferx.precision
func.func @pooling_sum_f32(%x: tensor<1x3x8x8xf32>, %k: tensor<3x3xf32>, %o: tensor<1x3x6x6xf32>) -> tensor<1x3x6x6xf32> {
  %0 = linalg.pooling_nchw_sum {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %k : tensor<1x3x8x8xf32>, tensor<3x3xf32>) outs(%o : tensor<1x3x6x6xf32>) -> tensor<1x3x6x6xf32>
  return %0 : tensor<1x3x6x6xf32>
}

// -----

// A reduction that only adds (a row sum) is not a contraction.
// CHECK-LABEL: func.func @generic_row_sum_f32(
// CHECK-NOT:     inferx.precision
func.func @generic_row_sum_f32(%a: tensor<4x8xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(m, k) -> (m, k)>, affine_map<(m, k) -> (m)>], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<4x8xf32>) outs(%c : tensor<4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A contraction on buffers has no tensor result to rewrite later.
// CHECK-LABEL: func.func @matmul_memref_f32(
// CHECK-NOT:     inferx.precision
func.func @matmul_memref_f32(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

