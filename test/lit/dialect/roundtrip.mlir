// RUN: inferx-opt %s | inferx-opt | filecheck %s

// IRDL-defined ops have no custom assembly: they print in the generic form.

// CHECK-LABEL: func.func @quantize_per_tensor_i8(
// CHECK-SAME:    %[[X:.+]]: tensor<4x64xf32>)
// CHECK:         %[[Q:.+]] = "inferx.quantize"(%[[X]]) {scale = dense<5.000000e-01> : tensor<f32>, storage = "i8", zero_point = dense<3> : tensor<i32>} : (tensor<4x64xf32>) -> tensor<4x64xi8>
// CHECK:         %[[D:.+]] = "inferx.dequantize"(%[[Q]]) {{.+}} : (tensor<4x64xi8>) -> tensor<4x64xf32>
// CHECK:         return %[[D]]
func.func @quantize_per_tensor_i8(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %q = "inferx.quantize"(%x) {scale = dense<0.5> : tensor<f32>, storage = "i8", zero_point = dense<3> : tensor<i32>} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  %d = "inferx.dequantize"(%q) {scale = dense<0.5> : tensor<f32>, storage = "i8", zero_point = dense<3> : tensor<i32>} : (tensor<4x64xi8>) -> tensor<4x64xf32>
  return %d : tensor<4x64xf32>
}

// CHECK-LABEL: func.func @quantize_per_channel_u8(
// CHECK:         "inferx.quantize"(%{{.+}}) {{.+}}axis = 0 : i64{{.+}}storage = "u8"{{.+}} : (tensor<4x64xf16>) -> tensor<4x64xi8>
func.func @quantize_per_channel_u8(%x: tensor<4x64xf16>) -> tensor<4x64xi8> {
  %q = "inferx.quantize"(%x) {axis = 0 : i64, scale = dense<[0.5, 0.25, 1.0, 2.0]> : tensor<4xf32>, storage = "u8", zero_point = dense<[128, 128, 0, 255]> : tensor<4xi32>} : (tensor<4x64xf16>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// CHECK-LABEL: func.func @dequantize_grouped_i4(
// CHECK-SAME:    %[[W:.+]]: tensor<8x64xi4>)
// CHECK:         "inferx.dequantize"(%[[W]]) {{.+}}group_size = 32 : i64{{.+}}storage = "i4"{{.+}} : (tensor<8x64xi4>) -> tensor<8x64xbf16>
func.func @dequantize_grouped_i4(%w: tensor<8x64xi4>) -> tensor<8x64xbf16> {
  %d = "inferx.dequantize"(%w) {group_size = 32 : i64, scale = dense<0.125> : tensor<8x2xf32>, storage = "i4"} : (tensor<8x64xi4>) -> tensor<8x64xbf16>
  return %d : tensor<8x64xbf16>
}

// The precision annotation is a discardable attribute on linalg ops.
// CHECK-LABEL: func.func @annotated_matmul(
// CHECK:         linalg.matmul {inferx.precision = "f16"}
func.func @annotated_matmul(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.matmul {inferx.precision = "f16"} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
