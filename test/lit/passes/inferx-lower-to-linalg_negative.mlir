// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-lower-to-linalg)' | filecheck %s

// Hand-written quantization in linalg is not an inferx op: it is left alone.
// CHECK-LABEL: func.func @linalg_quantize_untouched(
// CHECK:         %[[R:.+]] = linalg.generic
// CHECK:           arith.fptosi
// CHECK:         return %[[R]]
func.func @linalg_quantize_untouched(%x: tensor<4xf32>, %e: tensor<4xi8>) -> tensor<4xi8> {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xi8>) {
  ^bb0(%in: f32, %out: i8):
    %q = arith.fptosi %in : f32 to i8
    linalg.yield %q : i8
  } -> tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// inferx.parameter belongs to inferx-bind-parameters (IREE level) and must cross.
// CHECK-LABEL: func.func @parameter_attribute_kept(
// CHECK-SAME:    {inferx.parameter = "fc.weight"}
func.func @parameter_attribute_kept(%w: tensor<4x8xf32> {inferx.parameter = "fc.weight"}) -> tensor<4x8xf32> {
  return %w : tensor<4x8xf32>
}
