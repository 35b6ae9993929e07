// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-conv-strategy)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-conv-strategy)' --verify-diagnostics
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=ascend910b},inferx-conv-strategy)' 2>&1 >/dev/null | filecheck %s --check-prefix=NOCODEGEN

// A dynamic batch: left to IREE (the artifact's static-shape functions get a strategy).
// CHECK-LABEL: func.func @dynamic_batch(
// CHECK:         linalg.conv_2d_nchw_fchw
// NOCODEGEN: remark: inferx-conv-strategy: declined: target 'ascend910b' has no code generator to choose for
func.func @dynamic_batch(%x: tensor<?x16x26x26xf32>, %w: tensor<16x16x3x3xf32>, %b: tensor<?x16x24x24xf32>) -> tensor<?x16x24x24xf32> {
  // expected-remark @+1 {{inferx-conv-strategy: declined: dynamic batch}}
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<?x16x26x26xf32>, tensor<16x16x3x3xf32>) outs(%b : tensor<?x16x24x24xf32>) -> tensor<?x16x24x24xf32>
  return %r : tensor<?x16x24x24xf32>
}

// -----

// Dynamic spatial dims: neither im2col nor a matmul has static sizes to use.
// CHECK-LABEL: func.func @dynamic_spatial(
// CHECK:         linalg.conv_2d_nchw_fchw
func.func @dynamic_spatial(%x: tensor<1x16x?x?xf32>, %w: tensor<16x16x3x3xf32>, %b: tensor<1x16x?x?xf32>) -> tensor<1x16x?x?xf32> {
  // expected-remark @+1 {{inferx-conv-strategy: declined: dynamic channel or spatial dims}}
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x16x?x?xf32>, tensor<16x16x3x3xf32>) outs(%b : tensor<1x16x?x?xf32>) -> tensor<1x16x?x?xf32>
  return %r : tensor<1x16x?x?xf32>
}

// -----

// A depthwise convolution with dynamic spatial dims: left to IREE.
// CHECK-LABEL: func.func @depthwise_dynamic(
// CHECK:         linalg.depthwise_conv_2d_nchw_chw
func.func @depthwise_dynamic(%x: tensor<1x32x?x?xf32>, %w: tensor<32x3x3xf32>, %b: tensor<1x32x?x?xf32>) -> tensor<1x32x?x?xf32> {
  // expected-remark @+1 {{inferx-conv-strategy: declined: depthwise dynamic dims}}
  %r = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x32x?x?xf32>, tensor<32x3x3xf32>) outs(%b : tensor<1x32x?x?xf32>) -> tensor<1x32x?x?xf32>
  return %r : tensor<1x32x?x?xf32>
}

// -----

// Grouped convolution (2 groups).
// CHECK-LABEL: func.func @grouped(
// CHECK:         linalg.conv_2d_ngchw_gfchw
func.func @grouped(%x: tensor<1x2x8x10x10xf32>, %w: tensor<2x8x8x3x3xf32>, %b: tensor<1x2x8x8x8xf32>) -> tensor<1x2x8x8x8xf32> {
  // expected-remark @+1 {{inferx-conv-strategy: declined: linalg.conv_2d_ngchw_gfchw (grouped or another layout) is left to IREE}}
  %r = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x2x8x10x10xf32>, tensor<2x8x8x3x3xf32>) outs(%b : tensor<1x2x8x8x8xf32>) -> tensor<1x2x8x8x8xf32>
  return %r : tensor<1x2x8x8x8xf32>
}

// -----

// Channels-last layout: not what the importers produce; left alone.
// CHECK-LABEL: func.func @nhwc(
// CHECK:         linalg.conv_2d_nhwc_hwcf
func.func @nhwc(%x: tensor<1x10x10x8xf32>, %w: tensor<3x3x8x16xf32>, %b: tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32> {
  // expected-remark @+1 {{inferx-conv-strategy: declined: linalg.conv_2d_nhwc_hwcf}}
  %r = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x10x10x8xf32>, tensor<3x3x8x16xf32>) outs(%b : tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32>
  return %r : tensor<1x8x8x16xf32>
}

// -----

// Pooling ops are convolution-shaped but not convolutions: not even looked at.
// CHECK-LABEL: func.func @maxpool(
// CHECK:         linalg.pooling_nchw_max
func.func @maxpool(%x: tensor<1x8x10x10xf32>, %k: tensor<3x3xf32>, %b: tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32> {
  %r = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %k : tensor<1x8x10x10xf32>, tensor<3x3xf32>) outs(%b : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  return %r : tensor<1x8x8x8xf32>
}

// -----

// An integer depthwise convolution (a quantized model's): left to IREE.
// CHECK-LABEL: func.func @depthwise_i8(
// CHECK:         linalg.depthwise_conv_2d_nchw_chw
func.func @depthwise_i8(%x: tensor<1x4x6x6xi8>, %w: tensor<4x3x3xi8>, %b: tensor<1x4x4x4xi32>) -> tensor<1x4x4x4xi32> {
  // expected-remark @+1 {{inferx-conv-strategy: declined: depthwise integer operands}}
  %r = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x4x6x6xi8>, tensor<4x3x3xi8>) outs(%b : tensor<1x4x4x4xi32>) -> tensor<1x4x4x4xi32>
  return %r : tensor<1x4x4x4xi32>
}
