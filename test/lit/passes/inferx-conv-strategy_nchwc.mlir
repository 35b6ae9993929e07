// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-conv-strategy)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-conv-strategy)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-conv-strategy{algorithms=nchwc,im2col,matmul})' | filecheck %s --check-prefix=AVX2
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-conv-strategy{algorithms=im2col,matmul})' | filecheck %s --check-prefix=NONCHWC

// On a target with IREE's NCHWc conv microkernel (AVX-512), a 3x3 f32 convolution whose
// channel counts are multiples of 16 stays a convolution, marked for IREE's conv data tiling.
// Without the microkernel (AVX2), or with nchwc not allowed, it becomes im2col + matmul.
// REMARK: remark: inferx-conv-strategy: nchwc: 3x3 stride (1, 1), 64->64 channels: IREE's NCHWc data tiling + conv microkernel
// CHECK-LABEL: func.func @conv3x3_s1(
// CHECK:         linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "nchwc", dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
// CHECK-NOT:     linalg.matmul
// AVX2-LABEL:  func.func @conv3x3_s1(
// AVX2:          linalg.matmul
// AVX2-NOT:      linalg.conv_2d
// NONCHWC-LABEL: func.func @conv3x3_s1(
// NONCHWC:       linalg.matmul
func.func @conv3x3_s1(%x: tensor<1x64x58x58xf32>, %w: tensor<64x64x3x3xf32>, %b: tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x64x58x58xf32>, tensor<64x64x3x3xf32>) outs(%b : tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
  return %r : tensor<1x64x56x56xf32>
}

// -----

// Stride 2 at batch 4: the microkernel takes strides and batches.
// REMARK: remark: inferx-conv-strategy: nchwc: 3x3 stride (2, 2), 32->48 channels
// CHECK-LABEL: func.func @conv3x3_s2_b4(
// CHECK:         linalg.conv_2d_nchw_fchw {{.*}}inferx.conv_strategy = "nchwc"
func.func @conv3x3_s2_b4(%x: tensor<4x32x17x17xf32>, %w: tensor<48x32x3x3xf32>, %b: tensor<4x48x8x8xf32>) -> tensor<4x48x8x8xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x, %w : tensor<4x32x17x17xf32>, tensor<48x32x3x3xf32>) outs(%b : tensor<4x48x8x8xf32>) -> tensor<4x48x8x8xf32>
  return %r : tensor<4x48x8x8xf32>
}

// -----

// Three input channels (an image stem): NCHWc's 16-channel blocks would be 13/16 padding on the
// stem itself; after space-to-depth (12 channels, padded to 16) the 4x4 stride-1 convolution takes
// them. With neither listed (algorithms=im2col,matmul): im2col on the stem, K = 3*7*7 = 147.
// REMARK: remark: inferx-conv-strategy: s2d: 7x7 stride 2 over 3 channels: space-to-depth into a 4x4 stride-1 convolution over 12
// REMARK: remark: inferx-conv-strategy: nchwc: 4x4 stride (1, 1), 16->64 channels: IREE's NCHWc data tiling + conv microkernel
// CHECK-LABEL: func.func @stem(
// CHECK:         linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "nchwc", {{.*}}} ins(%{{.+}}, %{{.+}} : tensor<1x16x19x19xf32>, tensor<64x16x4x4xf32>)
// CHECK-NOT:     linalg.matmul
// NONCHWC-LABEL: func.func @stem(
// NONCHWC:       linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<64x147xf32>, tensor<147x256xf32>)
func.func @stem(%x: tensor<1x3x38x38xf32>, %w: tensor<64x3x7x7xf32>, %b: tensor<1x64x16x16xf32>) -> tensor<1x64x16x16xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x, %w : tensor<1x3x38x38xf32>, tensor<64x3x7x7xf32>) outs(%b : tensor<1x64x16x16xf32>) -> tensor<1x64x16x16xf32>
  return %r : tensor<1x64x16x16xf32>
}

// -----

// Output channels off the block (24): im2col.
// REMARK: remark: inferx-conv-strategy: im2col: 3x3 stride (1, 1): im2col + matmul
// CHECK-LABEL: func.func @odd_outputs(
// CHECK:         linalg.matmul
func.func @odd_outputs(%x: tensor<1x32x10x10xf32>, %w: tensor<24x32x3x3xf32>, %b: tensor<1x24x8x8xf32>) -> tensor<1x24x8x8xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x32x10x10xf32>, tensor<24x32x3x3xf32>) outs(%b : tensor<1x24x8x8xf32>) -> tensor<1x24x8x8xf32>
  return %r : tensor<1x24x8x8xf32>
}

// -----

// 1x1 filters stay matmuls (through NCHWc ResNet-50's 1x1 convolutions were 3.6x slower).
// REMARK: remark: inferx-conv-strategy: matmul: 1x1 filter, stride (1, 1): a matmul
// CHECK-LABEL: func.func @conv1x1(
// CHECK:         linalg.matmul
// CHECK-NOT:     linalg.conv_2d
func.func @conv1x1(%x: tensor<1x64x14x14xf32>, %w: tensor<256x64x1x1xf32>, %b: tensor<1x256x14x14xf32>) -> tensor<1x256x14x14xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x64x14x14xf32>, tensor<256x64x1x1xf32>) outs(%b : tensor<1x256x14x14xf32>) -> tensor<1x256x14x14xf32>
  return %r : tensor<1x256x14x14xf32>
}

// -----

// f16 inputs: the microkernel is f32 only.
// REMARK: remark: inferx-conv-strategy: im2col: 3x3 stride (1, 1): im2col + matmul
// CHECK-LABEL: func.func @f16_input(
// CHECK:         linalg.matmul
func.func @f16_input(%x: tensor<1x32x10x10xf16>, %w: tensor<32x32x3x3xf16>, %b: tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x32x10x10xf16>, tensor<32x32x3x3xf16>) outs(%b : tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  return %r : tensor<1x32x8x8xf32>
}
