// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-quantize-contractions{group-size=32 matvec-kernel=false})' | filecheck %s
// IREE's weight-only form (our kernel for the matrix-vector rows is off here: inferx-quantize-contractions_matvec.mlir).

// CUDA, int8, one row per sample (an MLP): weight-only. The activations are truncated to f16; the
// int8 weight is stored [N, K] (reduction innermost, the matrix-vector layout) and dequantized to
// the f16 [K, N] weight through a permuted map with f16 scales (an elementwise generic IREE
// fuses into the matmul's dispatch); the f16 x f16 matmul accumulates into the f32 init.
// CHECK-DAG:     #[[NK:.+]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-LABEL: func.func @int8_weight_only(
// CHECK-SAME:    %[[X:.+]]: tensor<?x64xf32>, %{{.+}}: tensor<?x32xf32>, %[[WQ:.+]]: tensor<32x64xi8> {inferx.parameter = "fc.w#q:int8hn"}, %[[S:.+]]: tensor<32xf16> {inferx.parameter = "fc.w#q:int8hn:scale"}
// CHECK:         %[[X16:.+]] = linalg.generic {{.*}} ins(%[[X]] : tensor<?x64xf32>) outs({{.*}} : tensor<?x64xf16>)
// CHECK:           arith.truncf
// CHECK:         %[[W16:.+]] = linalg.generic {indexing_maps = [#[[NK]], {{.*}} ins(%[[WQ]], %[[S]] : tensor<32x64xi8>, tensor<32xf16>) outs({{.*}} : tensor<64x32xf16>)
// CHECK:           arith.sitofp {{.*}} : i8 to f16
// CHECK:           arith.mulf {{.*}} : f16
// CHECK:         linalg.matmul ins(%[[X16]], %[[W16]] : tensor<?x64xf16>, tensor<64x32xf16>) outs(%{{.*}} : tensor<?x32xf32>)
// CHECK-NOT:     math.roundeven
func.func @int8_weight_only(%x: tensor<?x64xf32>, %w: tensor<64x32xf32> {inferx.parameter = "fc.w"}, %z: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %y = linalg.matmul {inferx.precision = "i8"} ins(%x, %w : tensor<?x64xf32>, tensor<64x32xf32>) outs(%z : tensor<?x32xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// CUDA, int8, rows are tokens (the input collapsed from [batch, seq, K], as
// inferx-unbroadcast-matmul leaves a transformer projection): the weight stays [K, N].
// CHECK-LABEL: func.func @int8_tokens(
// CHECK-SAME:    tensor<64x32xi8> {inferx.parameter = "fc.w#q:int8h"}, %{{.+}}: tensor<32xf16> {inferx.parameter = "fc.w#q:int8h:scale"}
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<256x64xf16>, tensor<64x32xf16>)
func.func @int8_tokens(%x: tensor<2x128x64xf32>, %w: tensor<64x32xf32> {inferx.parameter = "fc.w"}, %z: tensor<256x32xf32>) -> tensor<256x32xf32> {
  %x2 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x128x64xf32> into tensor<256x64xf32>
  %y = linalg.matmul {inferx.precision = "i8"} ins(%x2, %w : tensor<256x64xf32>, tensor<64x32xf32>) outs(%z : tensor<256x32xf32>) -> tensor<256x32xf32>
  return %y : tensor<256x32xf32>
}

// -----

// CUDA, int4 in groups of 32, one row per sample: the weight [N, K/32, 32] i4 with [N, K/32] f16
// scales, dequantized through a permuted map to [K/32, 32, N] f16, collapsed to [K, N], one
// f16 x f16 -> f32 matmul.
// CHECK-LABEL: func.func @int4_weight_only(
// CHECK-SAME:    tensor<8x2x32xi4> {inferx.parameter = "w#q:int4g32hn"}, %[[S:.+]]: tensor<8x2xf16> {inferx.parameter = "w#q:int4g32hn:scale"}
// CHECK:         arith.sitofp {{.*}} : i4 to f16
// CHECK:         %[[W:.+]] = tensor.collapse_shape {{.*}} : tensor<2x32x8xf16> into tensor<64x8xf16>
// CHECK:         linalg.matmul ins(%{{.*}}, %[[W]] : tensor<4x64xf16>, tensor<64x8xf16>) outs({{.*}} : tensor<4x8xf32>)
func.func @int4_weight_only(%x: tensor<4x64xf32>, %w: tensor<64x8xf32> {inferx.parameter = "w"}, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = linalg.matmul {inferx.precision = "i4"} ins(%x, %w : tensor<4x64xf32>, tensor<64x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// CUDA, a generation model built in f16: the decode step's projection (2 token rows, collapsed
// from [batch, 1, K]) reads the transposed f16 weight into an f16 result. Its sums move to f32
// (an f32 zero init, then truncf for the users), the activations are used as they are (no second
// truncf), and 2 static token rows take the matrix-vector layout ([N, K] int8).
// CHECK-LABEL: func.func @f16_decode_rows(
// CHECK-SAME:    %[[X:.+]]: tensor<2x1x64xf16>, %{{.+}}: tensor<2x32xf16>, %[[WQ:.+]]: tensor<32x64xi8> {inferx.parameter = "fc.w#q:int8hnt"}, %{{.+}}: tensor<32xf16> {inferx.parameter = "fc.w#q:int8hnt:scale"}
// CHECK:         %[[X2:.+]] = tensor.collapse_shape %[[X]]
// CHECK-NOT:     arith.truncf
// CHECK:         %[[P:.+]] = linalg.matmul ins(%[[X2]], %{{.*}} : tensor<2x64xf16>, tensor<64x32xf16>) outs(%{{.*}} : tensor<2x32xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[P]] : tensor<2x32xf32>) outs(%{{.*}} : tensor<2x32xf16>)
// CHECK:           arith.truncf {{.*}} : f32 to f16
func.func @f16_decode_rows(%x: tensor<2x1x64xf16>, %w: tensor<32x64xf16> {inferx.parameter = "fc.w"}, %z: tensor<2x32xf16>) -> tensor<2x32xf16> {
  %x2 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x1x64xf16> into tensor<2x64xf16>
  %e = tensor.empty() : tensor<64x32xf16>
  %t = linalg.transpose ins(%w : tensor<32x64xf16>) outs(%e : tensor<64x32xf16>) permutation = [1, 0]
  %c = arith.constant 0.0 : f16
  %f = linalg.fill ins(%c : f16) outs(%z : tensor<2x32xf16>) -> tensor<2x32xf16>
  %y = linalg.matmul {inferx.precision = "i8"} ins(%x2, %t : tensor<2x64xf16>, tensor<64x32xf16>) outs(%f : tensor<2x32xf16>) -> tensor<2x32xf16>
  return %y : tensor<2x32xf16>
}

// -----

// f16 inputs into an f32 init (what torch-mlir gives a decoder's f16 linear) stay as they are;
// 64 token rows are a matrix-matrix product: the weight stays [K, N] int4 groups.
// CHECK-LABEL: func.func @f16_prefill_rows(
// CHECK-SAME:    tensor<2x32x32xi4> {inferx.parameter = "fc.w#q:int4g32ht"}
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<64x64xf16>, tensor<64x32xf16>) outs(%{{.*}} : tensor<64x32xf32>)
// CHECK-NOT:     arith.truncf {{.*}} : f32 to f16
func.func @f16_prefill_rows(%x: tensor<1x64x64xf16>, %w: tensor<32x64xf16> {inferx.parameter = "fc.w"}, %z: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %x2 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<1x64x64xf16> into tensor<64x64xf16>
  %e = tensor.empty() : tensor<64x32xf16>
  %t = linalg.transpose ins(%w : tensor<32x64xf16>) outs(%e : tensor<64x32xf16>) permutation = [1, 0]
  %y = linalg.matmul {inferx.precision = "i4"} ins(%x2, %t : tensor<64x64xf16>, tensor<64x32xf16>) outs(%z : tensor<64x32xf32>) -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}
