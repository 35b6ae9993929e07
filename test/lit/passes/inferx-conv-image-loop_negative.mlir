// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-conv-image-loop)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-conv-image-loop)' --verify-diagnostics

// A static batch: already the static convolution the other passes take.
// CHECK-LABEL: func.func @static_batch(
// CHECK-NOT:     scf.for
func.func @static_batch(%x: tensor<2x16x26x26xf32>, %w: tensor<16x16x3x3xf32>, %b: tensor<2x16x24x24xf32>) -> tensor<2x16x24x24xf32> {
  // expected-remark @+1 {{inferx-conv-image-loop: declined: static batch}}
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<2x16x26x26xf32>, tensor<16x16x3x3xf32>) outs(%b : tensor<2x16x24x24xf32>) -> tensor<2x16x24x24xf32>
  return %r : tensor<2x16x24x24xf32>
}

// -----

// Dynamic spatial dims: a loop over the images would not make the convolution static.
// CHECK-LABEL: func.func @dynamic_spatial(
// CHECK-NOT:     scf.for
func.func @dynamic_spatial(%x: tensor<?x16x?x?xf32>, %w: tensor<16x16x3x3xf32>, %b: tensor<?x16x?x?xf32>) -> tensor<?x16x?x?xf32> {
  // expected-remark @+1 {{inferx-conv-image-loop: declined: dynamic channel or spatial dims}}
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<?x16x?x?xf32>, tensor<16x16x3x3xf32>) outs(%b : tensor<?x16x?x?xf32>) -> tensor<?x16x?x?xf32>
  return %r : tensor<?x16x?x?xf32>
}

// -----

// An integer convolution (quantized models): not looped.
// CHECK-LABEL: func.func @integer(
// CHECK-NOT:     scf.for
func.func @integer(%x: tensor<?x4x6x6xi8>, %w: tensor<4x4x3x3xi8>, %b: tensor<?x4x4x4xi32>) -> tensor<?x4x4x4xi32> {
  // expected-remark @+1 {{inferx-conv-image-loop: declined: i8 x i8 -> i32 (float convolutions only)}}
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<?x4x6x6xi8>, tensor<4x4x3x3xi8>) outs(%b : tensor<?x4x4x4xi32>) -> tensor<?x4x4x4xi32>
  return %r : tensor<?x4x4x4xi32>
}
