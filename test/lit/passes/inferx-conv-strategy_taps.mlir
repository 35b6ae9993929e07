// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-conv-strategy)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-conv-strategy)' --verify-diagnostics
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h100},inferx-conv-strategy)' 2>&1 >/dev/null | filecheck %s --check-prefix=GPU

// A depthwise 3x3 convolution, stride 2, dilation 1: one elementwise generic over the output
// that reads the 9 strided windows of the input (offsets (i, j), strides 2) and the filter at
// constant tap indices, accumulating into the convolution's init.
// CHECK-DAG:     #[[TAP00:.+]] = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
// CHECK-DAG:     #[[TAP22:.+]] = affine_map<(d0, d1, d2, d3) -> (d1, 2, 2)>
// CHECK-LABEL: func.func @depthwise_s2(
// CHECK-SAME:    %[[X:.+]]: tensor<1x32x15x15xf32>, %[[W:.+]]: tensor<32x3x3xf32>, %[[B:.+]]: tensor<1x32x7x7xf32>
// CHECK:         tensor.extract_slice %[[X]][0, 0, 0, 0] [1, 32, 7, 7] [1, 1, 2, 2]
// CHECK:         tensor.extract_slice %[[X]][0, 0, 2, 2] [1, 32, 7, 7] [1, 1, 2, 2]
// CHECK:         linalg.generic {{.*}}#[[TAP00]]{{.*}}#[[TAP22]]
// CHECK-SAME:      outs(%[[B]] : tensor<1x32x7x7xf32>)
// CHECK-COUNT-9:   arith.mulf
// CHECK-NOT:     linalg.depthwise_conv_2d_nchw_chw
// GPU-DAG: remark: inferx-conv-strategy: declined: depthwise a GPU target
func.func @depthwise_s2(%x: tensor<1x32x15x15xf32>, %w: tensor<32x3x3xf32>, %b: tensor<1x32x7x7xf32>) -> tensor<1x32x7x7xf32> {
  // expected-remark @+1 {{inferx-conv-strategy: taps: depthwise 3x3 stride (2, 2) dilation (1, 1) over 32 channels}}
  %r = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x, %w : tensor<1x32x15x15xf32>, tensor<32x3x3xf32>) outs(%b : tensor<1x32x7x7xf32>) -> tensor<1x32x7x7xf32>
  return %r : tensor<1x32x7x7xf32>
}

// -----

// Dilation 2 on a depthwise filter: the windows start at (2i, 2j).
// CHECK-LABEL: func.func @depthwise_dilated(
// CHECK:         tensor.extract_slice %{{.*}}[0, 0, 4, 4] [2, 8, 8, 8] [1, 1, 1, 1]
// CHECK:         linalg.generic
func.func @depthwise_dilated(%x: tensor<2x8x12x12xf32>, %w: tensor<8x3x3xf32>, %b: tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32> {
  // expected-remark @+1 {{inferx-conv-strategy: taps: depthwise 3x3 stride (1, 1) dilation (2, 2)}}
  %r = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<2> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<2x8x12x12xf32>, tensor<8x3x3xf32>) outs(%b : tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
  return %r : tensor<2x8x8x8xf32>
}

// -----

// A dilated full convolution on a CPU: im2col from the tap windows, each tap's window at
// (2i, 2j), then one matmul.
// CHECK-LABEL: func.func @dilated_conv(
// CHECK:         tensor.extract_slice %{{.*}}[0, 0, 4, 4] [8, 1, 8, 8] [1, 1, 1, 1]
// CHECK:         linalg.matmul
// CHECK-NOT:     linalg.conv_2d_nchw_fchw
// (GPU targets decline f32 convolutions before looking at dilation)
// GPU-DAG: remark: inferx-conv-strategy: declined: f32 on CUDA
func.func @dilated_conv(%x: tensor<1x8x12x12xf32>, %w: tensor<8x8x3x3xf32>, %b: tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32> {
  // expected-remark @+1 {{inferx-conv-strategy: im2col: 3x3 stride (1, 1)}}
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<2> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x8x12x12xf32>, tensor<8x8x3x3xf32>) outs(%b : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  return %r : tensor<1x8x8x8xf32>
}

// -----

// A dynamic batch (the artifact's dynamic function): the windows take the input's batch size.
// CHECK-LABEL: func.func @depthwise_dynamic_batch(
// CHECK:         %[[N:.+]] = tensor.dim %{{.*}}, %c0
// CHECK:         tensor.extract_slice %{{.*}}[0, 0, 1, 1] [%[[N]], 16, 8, 8] [1, 1, 1, 1] : tensor<?x16x10x10xf32> to tensor<?x16x8x8xf32>
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<?x16x8x8xf32>)
func.func @depthwise_dynamic_batch(%x: tensor<?x16x10x10xf32>, %w: tensor<16x3x3xf32>, %b: tensor<?x16x8x8xf32>) -> tensor<?x16x8x8xf32> {
  // expected-remark @+1 {{inferx-conv-strategy: taps: depthwise 3x3 stride (1, 1)}}
  %r = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<?x16x10x10xf32>, tensor<16x3x3xf32>) outs(%b : tensor<?x16x8x8xf32>) -> tensor<?x16x8x8xf32>
  return %r : tensor<?x16x8x8xf32>
}

// -----

// f16 inputs into an f32 init (the ONNX importer's f16 convolutions): the products widen to f32.
// CHECK-LABEL: func.func @depthwise_f16_into_f32(
// CHECK:         linalg.generic
// CHECK:           arith.extf {{.*}} : f16 to f32
// CHECK:           arith.mulf {{.*}} : f32
// CHECK:           arith.addf {{.*}} : f32
func.func @depthwise_f16_into_f32(%x: tensor<1x4x6x6xf16>, %w: tensor<4x3x3xf16>, %b: tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32> {
  // expected-remark @+1 {{inferx-conv-strategy: taps: depthwise 3x3}}
  %r = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x4x6x6xf16>, tensor<4x3x3xf16>) outs(%b : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %r : tensor<1x4x4x4xf32>
}
