// RUN: inferx-opt %s --split-input-file --verify-diagnostics

func.func @storage_unknown(%x: tensor<4x64xf32>) -> tensor<4x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op storage "i7" is not one of "i8" | "u8" | "i4" | "u4"}}
  %q = "inferx.quantize"(%x) {scale = dense<0.5> : tensor<f32>, storage = "i7"} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// -----

func.func @storage_vs_result_type(%x: tensor<4x64xf32>) -> tensor<4x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op result element type i8 does not match storage "u4": expected i4}}
  %q = "inferx.quantize"(%x) {scale = dense<0.5> : tensor<f32>, storage = "u4"} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// -----

func.func @storage_vs_operand_type(%q: tensor<4x64xi4>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'inferx.dequantize' op operand element type i4 does not match storage "i8": expected i8}}
  %d = "inferx.dequantize"(%q) {scale = dense<0.5> : tensor<f32>, storage = "i8"} : (tensor<4x64xi4>) -> tensor<4x64xf32>
  return %d : tensor<4x64xf32>
}

// -----

func.func @signed_storage_type(%x: tensor<4x64xf32>) -> tensor<4x64xui8> {
  // expected-error @+1 {{'inferx.quantize' op result element type ui8 does not match storage "u8": expected i8}}
  %q = "inferx.quantize"(%x) {scale = dense<0.5> : tensor<f32>, storage = "u8"} : (tensor<4x64xf32>) -> tensor<4x64xui8>
  return %q : tensor<4x64xui8>
}

// -----

func.func @float_side_not_float(%x: tensor<4x64xi32>) -> tensor<4x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op float side must have f32, f16 or bf16 elements, got tensor<4x64xi32>}}
  %q = "inferx.quantize"(%x) {scale = dense<0.5> : tensor<f32>, storage = "i8"} : (tensor<4x64xi32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// -----

func.func @shape_mismatch(%x: tensor<4x64xf32>) -> tensor<4x32xi8> {
  // expected-error @+1 {{'inferx.quantize' op shapes differ: tensor<4x64xf32> vs tensor<4x32xi8>}}
  %q = "inferx.quantize"(%x) {scale = dense<0.5> : tensor<f32>, storage = "i8"} : (tensor<4x64xf32>) -> tensor<4x32xi8>
  return %q : tensor<4x32xi8>
}

// -----

func.func @scale_not_f32(%x: tensor<4x64xf32>) -> tensor<4x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op scale must be f32 dense elements, got dense<1> : tensor<i32>}}
  %q = "inferx.quantize"(%x) {scale = dense<1> : tensor<i32>, storage = "i8"} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// -----

func.func @scale_missing(%x: tensor<4x64xf32>) -> tensor<4x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op requires attribute 'scale'}}
  %q = "inferx.quantize"(%x) {storage = "i8"} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// -----

func.func @scale_not_positive(%x: tensor<4x64xf32>) -> tensor<4x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op scale values must be positive}}
  %q = "inferx.quantize"(%x) {axis = 0 : i64, scale = dense<[0.5, 0.0, 1.0, 2.0]> : tensor<4xf32>, storage = "i8"} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// -----

func.func @per_tensor_scale_shape(%x: tensor<4x64xf32>) -> tensor<4x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op per-tensor scale must have shape [] or [1], got [4]}}
  %q = "inferx.quantize"(%x) {scale = dense<0.5> : tensor<4xf32>, storage = "i8"} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// -----

func.func @axis_out_of_range(%x: tensor<4x64xf32>) -> tensor<4x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op axis 2 is out of range for a rank-2 tensor}}
  %q = "inferx.quantize"(%x) {axis = 2 : i64, scale = dense<0.5> : tensor<4xf32>, storage = "i8"} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// -----

func.func @per_channel_scale_length(%x: tensor<4x64xf32>) -> tensor<4x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op per-channel scale must have shape [64], got [4]}}
  %q = "inferx.quantize"(%x) {axis = 1 : i64, scale = dense<0.5> : tensor<4xf32>, storage = "i8"} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// -----

func.func @per_channel_dynamic_axis(%x: tensor<?x64xf32>) -> tensor<?x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op per-channel axis 0 must have a static size}}
  %q = "inferx.quantize"(%x) {axis = 0 : i64, scale = dense<0.5> : tensor<4xf32>, storage = "i8"} : (tensor<?x64xf32>) -> tensor<?x64xi8>
  return %q : tensor<?x64xi8>
}

// -----

func.func @group_size_not_dividing(%x: tensor<4x64xf32>) -> tensor<4x64xi4> {
  // expected-error @+1 {{'inferx.quantize' op last dimension 64 is not divisible by group_size 24}}
  %q = "inferx.quantize"(%x) {group_size = 24 : i64, scale = dense<0.5> : tensor<4x2xf32>, storage = "i4"} : (tensor<4x64xf32>) -> tensor<4x64xi4>
  return %q : tensor<4x64xi4>
}

// -----

func.func @grouped_scale_shape(%w: tensor<4x64xi4>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'inferx.dequantize' op grouped scale must have shape [4, 2], got [4, 4]}}
  %d = "inferx.dequantize"(%w) {group_size = 32 : i64, scale = dense<0.5> : tensor<4x4xf32>, storage = "i4"} : (tensor<4x64xi4>) -> tensor<4x64xf32>
  return %d : tensor<4x64xf32>
}

// -----

func.func @axis_and_group_size(%x: tensor<4x64xf32>) -> tensor<4x64xi4> {
  // expected-error @+1 {{'inferx.quantize' op axis (per-channel) and group_size (grouped) are exclusive}}
  %q = "inferx.quantize"(%x) {axis = 0 : i64, group_size = 32 : i64, scale = dense<0.5> : tensor<4x2xf32>, storage = "i4"} : (tensor<4x64xf32>) -> tensor<4x64xi4>
  return %q : tensor<4x64xi4>
}

// -----

func.func @zero_point_out_of_range(%x: tensor<4x64xf32>) -> tensor<4x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op zero_point 300 is outside the "u8" range [0, 255]}}
  %q = "inferx.quantize"(%x) {scale = dense<0.5> : tensor<f32>, storage = "u8", zero_point = dense<300> : tensor<i32>} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// -----

func.func @zero_point_shape(%x: tensor<4x64xf32>) -> tensor<4x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op zero_point shape [] differs from scale shape [4]}}
  %q = "inferx.quantize"(%x) {axis = 0 : i64, scale = dense<0.5> : tensor<4xf32>, storage = "i8", zero_point = dense<0> : tensor<i32>} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// -----

func.func @axis_not_integer(%x: tensor<4x64xf32>) -> tensor<4x64xi8> {
  // expected-error @+1 {{'inferx.quantize' op attribute 'axis' must be an integer, got "0"}}
  %q = "inferx.quantize"(%x) {axis = "0", scale = dense<0.5> : tensor<4xf32>, storage = "i8"} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}
