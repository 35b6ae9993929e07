// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-conv-strategy)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-conv-strategy)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-conv-strategy)' | filecheck %s --check-prefix=AVX2
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-conv-strategy{algorithms=nchwc,im2col,matmul})' 2>&1 >/dev/null | filecheck %s --check-prefix=UNLISTED
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-conv-strategy)' 2>&1 >/dev/null | filecheck %s --check-prefix=CUDA

// A 3-channel 7x7 stride-2 stem (ResNet's, odd input size 229): space-to-depth. The input is
// zero-padded to an even size (230), each 2x2 pixel block becomes 4 channels (expand, transpose,
// collapse: 12), zero-padded to 16 channels where the NCHWc microkernel takes the result; the
// filter is padded to 8x8 and rearranged the same way into 16x4x4; the stride-1 4x4
// convolution then gets its own decision (nchwc on AVX-512, im2col on AVX2, where the channels
// stay 12). Not listed in `algorithms`, or on CUDA (not under auto), the stem is left as it was.
// REMARK: remark: inferx-conv-strategy: s2d: 7x7 stride 2 over 3 channels: space-to-depth into a 4x4 stride-1 convolution over 12
// REMARK: remark: inferx-conv-strategy: nchwc: 4x4 stride (1, 1), 16->64 channels: IREE's NCHWc data tiling + conv microkernel
// UNLISTED-NOT: s2d
// UNLISTED: remark: inferx-conv-strategy: im2col: 7x7 stride (2, 2): im2col + matmul
// CUDA-NOT:    s2d
// CHECK-LABEL: func.func @stem(
// CHECK-SAME:    %[[X:.+]]: tensor<2x3x229x229xf32>, %[[W:.+]]: tensor<64x3x7x7xf32>, %[[B:.+]]: tensor<2x64x112x112xf32>)
// CHECK:         %[[XP:.+]] = tensor.insert_slice %[[X]] into %{{.+}}[0, 0, 0, 0] [2, 3, 229, 229] [1, 1, 1, 1] : tensor<2x3x229x229xf32> into tensor<2x3x230x230xf32>
// CHECK:         %[[X6:.+]] = tensor.expand_shape %[[XP]] {{\[}}[0], [1], [2, 3], [4, 5]] output_shape [2, 3, 115, 2, 115, 2]
// CHECK:         %[[XT:.+]] = linalg.transpose ins(%[[X6]] : tensor<2x3x115x2x115x2xf32>) outs(%{{.+}} : tensor<2x3x2x2x115x115xf32>) permutation = [0, 1, 3, 5, 2, 4]
// CHECK:         %[[X12:.+]] = tensor.collapse_shape %[[XT]] {{\[}}[0], [1, 2, 3], [4], [5]] : tensor<2x3x2x2x115x115xf32> into tensor<2x12x115x115xf32>
// CHECK:         %[[X16:.+]] = tensor.insert_slice %[[X12]] into %{{.+}}[0, 0, 0, 0] [2, 12, 115, 115] [1, 1, 1, 1] : tensor<2x12x115x115xf32> into tensor<2x16x115x115xf32>
// CHECK:         %[[WP:.+]] = tensor.insert_slice %[[W]] into %{{.+}} : tensor<64x3x7x7xf32> into tensor<64x3x8x8xf32>
// CHECK:         linalg.transpose ins(%{{.+}} : tensor<64x3x4x2x4x2xf32>) outs(%{{.+}} : tensor<64x3x2x2x4x4xf32>) permutation = [0, 1, 3, 5, 2, 4]
// CHECK:         %[[W16:.+]] = tensor.insert_slice %{{.+}} : tensor<64x12x4x4xf32> into tensor<64x16x4x4xf32>
// CHECK:         linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "nchwc", dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%[[X16]], %[[W16]] : tensor<2x16x115x115xf32>, tensor<64x16x4x4xf32>) outs(%[[B]] : tensor<2x64x112x112xf32>)
// AVX2-LABEL:  func.func @stem(
// AVX2:          tensor.collapse_shape %{{.+}} {{\[}}[0], [1, 2, 3], [4], [5]] : tensor<2x3x2x2x115x115xf32> into tensor<2x12x115x115xf32>
// AVX2-NOT:      tensor<2x16x115x115xf32>
// AVX2-NOT:      linalg.conv_2d_nchw_fchw
// AVX2:          linalg.matmul
func.func @stem(%x: tensor<2x3x229x229xf32>, %w: tensor<64x3x7x7xf32>, %b: tensor<2x64x112x112xf32>) -> tensor<2x64x112x112xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x, %w : tensor<2x3x229x229xf32>, tensor<64x3x7x7xf32>) outs(%b : tensor<2x64x112x112xf32>) -> tensor<2x64x112x112xf32>
  return %r : tensor<2x64x112x112xf32>
}

// -----

// An even filter over an input one row and column longer than the blocks it needs (4x4 stride
// 2 over 9x9: 3x3 outputs read 8x8): the input is cut, not padded.
// REMARK: remark: inferx-conv-strategy: s2d: 4x4 stride 2 over 2 channels: space-to-depth into a 2x2 stride-1 convolution over 8
// CHECK-LABEL: func.func @even_filter(
// CHECK:         tensor.extract_slice %{{.+}}[0, 0, 0, 0] [1, 2, 8, 8] [1, 1, 1, 1] : tensor<1x2x9x9xf32> to tensor<1x2x8x8xf32>
// CHECK:         tensor.expand_shape {{.*}} output_shape [1, 2, 4, 2, 4, 2]
func.func @even_filter(%x: tensor<1x2x9x9xf32>, %w: tensor<16x2x4x4xf32>, %b: tensor<1x16x3x3xf32>) -> tensor<1x16x3x3xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x, %w : tensor<1x2x9x9xf32>, tensor<16x2x4x4xf32>) outs(%b : tensor<1x16x3x3xf32>) -> tensor<1x16x3x3xf32>
  return %r : tensor<1x16x3x3xf32>
}

// -----

// Declined for space-to-depth (other rules decide): more than 4 input channels, stride 1,
// a 1x1 filter, dilation 2.
// REMARK-NOT:  s2d
// REMARK:      remark: inferx-conv-strategy: im2col: 3x3 stride (2, 2): im2col + matmul
// REMARK:      remark: inferx-conv-strategy: im2col: 7x7 stride (1, 1): im2col + matmul
// REMARK:      remark: inferx-conv-strategy: matmul: 1x1 filter, stride (2, 2): a matmul
// REMARK:      remark: inferx-conv-strategy: im2col: 3x3 stride (2, 2): im2col + matmul
func.func @not_s2d(%x8: tensor<1x8x17x17xf32>, %w8: tensor<16x8x3x3xf32>, %b8: tensor<1x16x8x8xf32>,
                   %x3: tensor<1x3x16x16xf32>, %w3: tensor<16x3x7x7xf32>, %b3: tensor<1x16x10x10xf32>,
                   %w1: tensor<16x3x1x1xf32>, %b1: tensor<1x16x8x8xf32>,
                   %wd: tensor<16x3x3x3xf32>, %bd: tensor<1x16x6x6xf32>)
    -> (tensor<1x16x8x8xf32>, tensor<1x16x10x10xf32>, tensor<1x16x8x8xf32>, tensor<1x16x6x6xf32>) {
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x8, %w8 : tensor<1x8x17x17xf32>, tensor<16x8x3x3xf32>) outs(%b8 : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %s = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x3, %w3 : tensor<1x3x16x16xf32>, tensor<16x3x7x7xf32>) outs(%b3 : tensor<1x16x10x10xf32>) -> tensor<1x16x10x10xf32>
  %p = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x3, %w1 : tensor<1x3x16x16xf32>, tensor<16x3x1x1xf32>) outs(%b1 : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %d = linalg.conv_2d_nchw_fchw {dilations = dense<2> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x3, %wd : tensor<1x3x16x16xf32>, tensor<16x3x3x3xf32>) outs(%bd : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  return %a, %s, %p, %d : tensor<1x16x8x8xf32>, tensor<1x16x10x10xf32>, tensor<1x16x8x8xf32>, tensor<1x16x6x6xf32>
}
