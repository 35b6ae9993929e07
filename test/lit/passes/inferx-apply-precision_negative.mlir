// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-apply-precision)' | filecheck %s

// "f32" is a decision to stay in f32: the op is left as it is.
// CHECK-LABEL: func.func @matmul_annotated_f32(
// CHECK:         linalg.matmul {inferx.precision = "f32"} ins(%{{.+}}, %{{.+}} : tensor<4x8xf32>, tensor<8x16xf32>)
// CHECK-NOT:     arith.truncf
func.func @matmul_annotated_f32(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.matmul {inferx.precision = "f32"} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// "i8" needs quantization (scales), which is not this pass's job.
// CHECK-LABEL: func.func @matmul_annotated_i8(
// CHECK:         linalg.matmul {inferx.precision = "i8"} ins(%{{.+}}, %{{.+}} : tensor<4x8xf32>, tensor<8x16xf32>)
// CHECK-NOT:     arith.truncf
func.func @matmul_annotated_i8(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.matmul {inferx.precision = "i8"} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// An annotated elementwise op is not a contraction: truncating it would lose precision
// without any f32 accumulation to keep.
// CHECK-LABEL: func.func @add_annotated_f16(
// CHECK:         linalg.add {inferx.precision = "f16"} ins(%{{.+}}, %{{.+}} : tensor<4x16xf32>, tensor<4x16xf32>)
// CHECK-NOT:     arith.truncf
func.func @add_annotated_f16(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.add {inferx.precision = "f16"} ins(%a, %b : tensor<4x16xf32>, tensor<4x16xf32>) outs(%a : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Inputs already in f16: nothing is left to truncate.
// CHECK-LABEL: func.func @matmul_f16_inputs_annotated(
// CHECK:         linalg.matmul {inferx.precision = "f16"} ins(%{{.+}}, %{{.+}} : tensor<4x8xf16>, tensor<8x16xf16>)
// CHECK-NOT:     arith.truncf
func.func @matmul_f16_inputs_annotated(%a: tensor<4x8xf16>, %b: tensor<8x16xf16>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.matmul {inferx.precision = "f16"} ins(%a, %b : tensor<4x8xf16>, tensor<8x16xf16>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Pooling has no multiply to feed with low-precision inputs.
// CHECK-LABEL: func.func @pooling_sum_annotated_f16(
// CHECK:         linalg.pooling_nchw_sum {{.*}}inferx.precision = "f16"
// CHECK-NOT:     arith.truncf
func.func @pooling_sum_annotated_f16(%x: tensor<1x3x8x8xf32>, %k: tensor<3x3xf32>, %o: tensor<1x3x6x6xf32>) -> tensor<1x3x6x6xf32> {
  %0 = linalg.pooling_nchw_sum {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>, inferx.precision = "f16"} ins(%x, %k : tensor<1x3x8x8xf32>, tensor<3x3xf32>) outs(%o : tensor<1x3x6x6xf32>) -> tensor<1x3x6x6xf32>
  return %0 : tensor<1x3x6x6xf32>
}
