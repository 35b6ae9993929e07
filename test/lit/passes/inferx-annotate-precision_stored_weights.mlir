// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-annotate-precision{precision=i4 stored-weights=true})' | filecheck %s

// A decoder's projection: activations times the transpose of a stored f16 weight. Annotated
// whatever its float type (generation models are built in their dtype already).
// CHECK-LABEL: func.func @projection_f16(
// CHECK:         linalg.transpose
// CHECK:         linalg.matmul {inferx.precision = "i4"}
func.func @projection_f16(%x: tensor<2x128xf16>, %w: tensor<64x128xf16> {inferx.parameter = "model.layers.0.mlp.up_proj.weight"}) -> tensor<2x64xf16> {
  %e = tensor.empty() : tensor<128x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x128xf16>) outs(%e : tensor<128x64xf16>) permutation = [1, 0]
  %z = arith.constant 0.0 : f16
  %o = tensor.empty() : tensor<2x64xf16>
  %f = linalg.fill ins(%z : f16) outs(%o : tensor<2x64xf16>) -> tensor<2x64xf16>
  %0 = linalg.matmul ins(%x, %t : tensor<2x128xf16>, tensor<128x64xf16>) outs(%f : tensor<2x64xf16>) -> tensor<2x64xf16>
  return %0 : tensor<2x64xf16>
}

// -----

// A stored weight read directly ([K, N]) is annotated too.
// CHECK-LABEL: func.func @stored_kn_f32(
// CHECK:         linalg.matmul {inferx.precision = "i4"}
func.func @stored_kn_f32(%x: tensor<2x128xf32>, %w: tensor<128x64xf32> {inferx.parameter = "w"}, %c: tensor<2x64xf32>) -> tensor<2x64xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<2x128xf32>, tensor<128x64xf32>) outs(%c : tensor<2x64xf32>) -> tensor<2x64xf32>
  return %0 : tensor<2x64xf32>
}

// -----

// Attention's products read activations and the KV cache, not stored weights: left in the
// model's dtype, as is a weight argument without the parameter tag.
// CHECK-LABEL: func.func @not_stored(
// CHECK-NOT:     inferx.precision
func.func @not_stored(%q: tensor<2x128xf16>, %k: tensor<128x64xf16>, %c: tensor<2x64xf16>) -> tensor<2x64xf16> {
  %0 = linalg.matmul ins(%q, %k : tensor<2x128xf16>, tensor<128x64xf16>) outs(%c : tensor<2x64xf16>) -> tensor<2x64xf16>
  return %0 : tensor<2x64xf16>
}

// -----

// A transpose that is not [1, 0] of a stored weight, and integer matmuls, are not annotated.
// CHECK-LABEL: func.func @not_a_weight_transpose(
// CHECK-NOT:     inferx.precision
func.func @not_a_weight_transpose(%x: tensor<2x128xf16>, %a: tensor<64x128xf16>, %i: tensor<2x8xi8>, %w8: tensor<8x4xi8> {inferx.parameter = "w8"}, %c8: tensor<2x4xi32>) -> (tensor<2x64xf16>, tensor<2x4xi32>) {
  %e = tensor.empty() : tensor<128x64xf16>
  %t = linalg.transpose ins(%a : tensor<64x128xf16>) outs(%e : tensor<128x64xf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<2x64xf16>
  %0 = linalg.matmul ins(%x, %t : tensor<2x128xf16>, tensor<128x64xf16>) outs(%o : tensor<2x64xf16>) -> tensor<2x64xf16>
  %1 = linalg.matmul ins(%i, %w8 : tensor<2x8xi8>, tensor<8x4xi8>) outs(%c8 : tensor<2x4xi32>) -> tensor<2x4xi32>
  return %0, %1 : tensor<2x64xf16>, tensor<2x4xi32>
}
