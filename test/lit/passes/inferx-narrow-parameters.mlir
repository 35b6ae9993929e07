// RUN: inferx-opt --context=iree %s --split-input-file --pass-pipeline='builtin.module(inferx-narrow-parameters)' | filecheck %s
// RUN: inferx-opt --context=iree %s --split-input-file --pass-pipeline='builtin.module(inferx-narrow-parameters)' --verify-diagnostics

// A weight read only through a bf16 truncation becomes a bf16 parameter named after it (the
// driver computes "w1#cast:bf16" from "w1"); the truncation and the f32 argument go away.
// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %[[X:.+]]: tensor<4x64xbf16>, %[[W:.+]]: tensor<64x128xbf16> {inferx.parameter = "w1#cast:bf16"})
// CHECK-NOT:     arith.truncf
// CHECK:         linalg.matmul ins(%[[X]], %[[W]] : tensor<4x64xbf16>, tensor<64x128xbf16>)
#id = affine_map<(d0, d1) -> (d0, d1)>
// expected-remark @+1 {{inferx-narrow-parameters: 'w1' stored as bf16 (1 truncation(s) removed)}}
func.func @main(%x: tensor<4x64xbf16>, %w: tensor<64x128xf32> {inferx.parameter = "w1"}) -> tensor<4x128xf32> {
  %e = tensor.empty() : tensor<64x128xbf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<64x128xf32>) outs(%e : tensor<64x128xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %c = arith.truncf %in : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<64x128xbf16>
  %zero = arith.constant 0.0 : f32
  %o = tensor.empty() : tensor<4x128xf32>
  %f = linalg.fill ins(%zero : f32) outs(%o : tensor<4x128xf32>) -> tensor<4x128xf32>
  %y = linalg.matmul ins(%x, %t : tensor<4x64xbf16>, tensor<64x128xbf16>) outs(%f : tensor<4x128xf32>) -> tensor<4x128xf32>
  return %y : tensor<4x128xf32>
}

// -----

// f16, truncated twice (two contractions, before apply-precision shared its copies): one
// parameter serves both; the other arguments keep their places.
// CHECK-LABEL: func.func @two_reads(
// CHECK-SAME:    %{{.+}}: tensor<8x32xf16>, %{{.+}}: tensor<8x32xf16>, %[[W:.+]]: tensor<32x32xf16> {inferx.parameter = "w#cast:f16"})
// CHECK:         linalg.matmul ins(%{{.+}}, %[[W]]
// CHECK:         linalg.matmul ins(%{{.+}}, %[[W]]
#id = affine_map<(d0, d1) -> (d0, d1)>
// expected-remark @+1 {{inferx-narrow-parameters: 'w' stored as f16 (2 truncation(s) removed)}}
func.func @two_reads(%a: tensor<8x32xf16>, %w: tensor<32x32xf32> {inferx.parameter = "w"}, %b: tensor<8x32xf16>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %e = tensor.empty() : tensor<32x32xf16>
  %t1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<32x32xf32>) outs(%e : tensor<32x32xf16>) {
  ^bb0(%in: f32, %out: f16):
    %c = arith.truncf %in : f32 to f16
    linalg.yield %c : f16
  } -> tensor<32x32xf16>
  %t2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<32x32xf32>) outs(%e : tensor<32x32xf16>) {
  ^bb0(%in: f32, %out: f16):
    %c = arith.truncf %in : f32 to f16
    linalg.yield %c : f16
  } -> tensor<32x32xf16>
  %zero = arith.constant 0.0 : f32
  %o = tensor.empty() : tensor<8x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%o : tensor<8x32xf32>) -> tensor<8x32xf32>
  %y1 = linalg.matmul ins(%a, %t1 : tensor<8x32xf16>, tensor<32x32xf16>) outs(%f : tensor<8x32xf32>) -> tensor<8x32xf32>
  %y2 = linalg.matmul ins(%b, %t2 : tensor<8x32xf16>, tensor<32x32xf16>) outs(%f : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %y1, %y2 : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// One key read at bf16 by two functions: both read the one bf16 parameter.
// CHECK-LABEL: func.func @first(
// CHECK-SAME:    tensor<16x16xbf16> {inferx.parameter = "w#cast:bf16"}
// CHECK-LABEL: func.func @second(
// CHECK-SAME:    tensor<16x16xbf16> {inferx.parameter = "w#cast:bf16"}
#id = affine_map<(d0, d1) -> (d0, d1)>
// expected-remark @+1 {{inferx-narrow-parameters: 'w' stored as bf16 (2 truncation(s) removed in 2 functions)}}
func.func @first(%w: tensor<16x16xf32> {inferx.parameter = "w"}) -> tensor<16x16xbf16> {
  %e = tensor.empty() : tensor<16x16xbf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<16x16xf32>) outs(%e : tensor<16x16xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %c = arith.truncf %in : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<16x16xbf16>
  return %t : tensor<16x16xbf16>
}
func.func @second(%w: tensor<16x16xf32> {inferx.parameter = "w"}) -> tensor<16x16xbf16> {
  %e = tensor.empty() : tensor<16x16xbf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<16x16xf32>) outs(%e : tensor<16x16xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %c = arith.truncf %in : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<16x16xbf16>
  return %t : tensor<16x16xbf16>
}

// -----

// ONNX Gemm transB=1: the weight is transposed, then truncated. The transpose moves onto the
// bf16 parameter (same values, half the bytes moved).
// CHECK-LABEL: func.func @transposed(
// CHECK-SAME:    %[[W:[a-z0-9]+]]: tensor<32x64xbf16> {inferx.parameter = "w#cast:bf16"})
// CHECK:         %[[T:.+]] = linalg.transpose ins(%[[W]] : tensor<32x64xbf16>) outs(%{{.+}} : tensor<64x32xbf16>) permutation = [1, 0]
// CHECK-NOT:     arith.truncf
// CHECK:         linalg.matmul ins(%{{.+}}, %[[T]] : tensor<4x64xbf16>, tensor<64x32xbf16>)
#id = affine_map<(d0, d1) -> (d0, d1)>
// expected-remark @+1 {{inferx-narrow-parameters: 'w' stored as bf16 (1 truncation(s) removed)}}
func.func @transposed(%x: tensor<4x64xbf16>, %w: tensor<32x64xf32> {inferx.parameter = "w"}) -> tensor<4x32xf32> {
  %e0 = tensor.empty() : tensor<64x32xf32>
  %wt = linalg.transpose ins(%w : tensor<32x64xf32>) outs(%e0 : tensor<64x32xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<64x32xbf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%wt : tensor<64x32xf32>) outs(%e : tensor<64x32xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %c = arith.truncf %in : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<64x32xbf16>
  %zero = arith.constant 0.0 : f32
  %o = tensor.empty() : tensor<4x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%o : tensor<4x32xf32>) -> tensor<4x32xf32>
  %y = linalg.matmul ins(%x, %t : tensor<4x64xbf16>, tensor<64x32xbf16>) outs(%f : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
