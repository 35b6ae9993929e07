// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-conv-strategy)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-conv-strategy{algorithms=winograd,matmul,im2col})' | filecheck %s --check-prefix=WINO
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-conv-strategy)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-conv-strategy)' | filecheck %s --check-prefix=GPU

// A 3x3 stride-1 convolution at batch 1 on a CPU target: the filter transposed to
// [F, kh, kw, C] (a weight: computed once, at load) and reshaped to F x K; for each of the 9
// taps a strided window of the input (viewed as CNHW: at batch 1 a reshape) copied with
// permutation maps, the taps concatenated into K = (kh, kw, c) x P, then linalg.matmul
// accumulating into the conv's init. With Winograd allowed and 64 channels each way it is
// marked for IREE's Winograd rewrite.
// REMARK: remark: inferx-conv-strategy: im2col: 3x3 stride (1, 1): im2col + matmul
// CHECK-DAG:   #[[FTAPS:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1, d2)>
// CHECK-DAG:   #[[WIN:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d2, d3, d4)>
// CHECK-LABEL: func.func @conv3x3_s1_b1(
// CHECK-SAME:    %[[X:.+]]: tensor<1x64x58x58xf32>, %[[W:.+]]: tensor<64x64x3x3xf32>, %[[B:.+]]: tensor<1x64x56x56xf32>)
// CHECK:         %[[WT:.+]] = linalg.generic {indexing_maps = [#[[FTAPS]], {{.+}}]{{.*}} ins(%[[W]] : tensor<64x64x3x3xf32>) outs({{.+}} : tensor<64x3x3x64xf32>)
// CHECK:         %[[W2:.+]] = tensor.collapse_shape %[[WT]] {{\[}}[0], [1, 2, 3]] : tensor<64x3x3x64xf32> into tensor<64x576xf32>
// CHECK:         %[[B2:.+]] = tensor.collapse_shape %[[B]] {{\[}}[0], [1], [2, 3]] : tensor<1x64x56x56xf32> into tensor<1x64x3136xf32>
// CHECK:         %[[CHW:.+]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2], [3]]
// CHECK:         %[[XT:.+]] = tensor.expand_shape %[[CHW]] {{.*}} output_shape [64, 1, 58, 58]
// CHECK:         %[[S0:.+]] = tensor.extract_slice %[[XT]][0, 0, 0, 0] [64, 1, 56, 56] [1, 1, 1, 1]
// CHECK:         %[[T0:.+]] = linalg.generic {indexing_maps = [#[[WIN]], {{.+}}]{{.*}} ins(%[[S0]] : tensor<64x1x56x56xf32>) outs({{.+}} : tensor<1x64x1x56x56xf32>)
// CHECK:         tensor.extract_slice %[[XT]][0, 0, 0, 1] [64, 1, 56, 56] [1, 1, 1, 1]
// CHECK:         %[[S8:.+]] = tensor.extract_slice %[[XT]][0, 0, 2, 2] [64, 1, 56, 56] [1, 1, 1, 1]
// CHECK:         %[[T8:.+]] = linalg.generic {{.*}} ins(%[[S8]]
// CHECK:         %[[CAT:.+]] = tensor.concat dim(0) %[[T0]], {{.*}}, %[[T8]] : {{.*}} -> tensor<9x64x1x56x56xf32>
// CHECK:         %[[K:.+]] = tensor.collapse_shape %[[CAT]] {{\[}}[0, 1], [2, 3, 4]] : tensor<9x64x1x56x56xf32> into tensor<576x3136xf32>
// CHECK:         %[[ACC:.+]] = tensor.collapse_shape %[[B2]] {{.*}} into tensor<64x3136xf32>
// CHECK:         %[[MM:.+]] = linalg.matmul ins(%[[W2]], %[[K]] : tensor<64x576xf32>, tensor<576x3136xf32>) outs(%[[ACC]] : tensor<64x3136xf32>)
// CHECK:         tensor.expand_shape %[[MM]]
// CHECK:         %[[OUT:.+]] = tensor.expand_shape {{.*}} output_shape [1, 64, 56, 56]
// CHECK:         return %[[OUT]]
// CHECK-NOT:     linalg.conv_2d
// WINO-LABEL:  func.func @conv3x3_s1_b1(
// WINO:          linalg.conv_2d_nchw_fchw {__winograd_conv, inferx.conv_strategy = "winograd"
func.func @conv3x3_s1_b1(%x: tensor<1x64x58x58xf32>, %w: tensor<64x64x3x3xf32>, %b: tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x64x58x58xf32>, tensor<64x64x3x3xf32>) outs(%b : tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
  return %r : tensor<1x64x56x56xf32>
}

// -----

// 1x1, stride 1: the input is only reshaped (no copy) and multiplied as C x (H*W).
// REMARK: remark: inferx-conv-strategy: matmul: 1x1 filter, stride (1, 1): a matmul
// CHECK-LABEL: func.func @conv1x1_s1_b1(
// CHECK-SAME:    %[[X:.+]]: tensor<1x16x24x24xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         %[[C:.+]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2, 3]] : tensor<1x16x24x24xf32> into tensor<16x576xf32>
// CHECK:         linalg.matmul ins(%{{.+}}, %[[C]] : tensor<64x16xf32>, tensor<16x576xf32>) outs(%{{.+}} : tensor<64x576xf32>)
// WINO-LABEL:  func.func @conv1x1_s1_b1(
// WINO:          linalg.matmul
func.func @conv1x1_s1_b1(%x: tensor<1x16x24x24xf32>, %w: tensor<64x16x1x1xf32>, %b: tensor<1x64x24x24xf32>) -> tensor<1x64x24x24xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x16x24x24xf32>, tensor<64x16x1x1xf32>) outs(%b : tensor<1x64x24x24xf32>) -> tensor<1x64x24x24xf32>
  return %r : tensor<1x64x24x24xf32>
}

// -----

// 1x1, stride 2, batch 2: the input transposed to CNHW (named linalg.transpose), its strided
// subsampling copied with permutation maps, one matmul over all 2 x 36 pixels into zeros,
// then transposed back to NCHW while the conv's init is added.
// REMARK: remark: inferx-conv-strategy: matmul: 1x1 filter, stride (2, 2): a matmul
// CHECK-DAG:   #[[WIN2:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d2, d3, d4)>
// CHECK-DAG:   #[[FNP:.+]] = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
// CHECK-DAG:   #[[ID3:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @conv1x1_s2_b2(
// CHECK-SAME:    %[[X:.+]]: tensor<2x16x12x12xf32>, %[[W:.+]]: tensor<32x16x1x1xf32>, %[[B:.+]]: tensor<2x32x6x6xf32>)
// CHECK-NOT:     linalg.generic {{.*}} ins(%[[W]]
// CHECK:         %[[B2:.+]] = tensor.collapse_shape %[[B]] {{\[}}[0], [1], [2, 3]] : tensor<2x32x6x6xf32> into tensor<2x32x36xf32>
// CHECK:         %[[XT:.+]] = linalg.transpose ins(%[[X]] : tensor<2x16x12x12xf32>) outs({{.+}} : tensor<16x2x12x12xf32>) permutation = [1, 0, 2, 3]
// CHECK:         %[[S:.+]] = tensor.extract_slice %[[XT]][0, 0, 0, 0] [16, 2, 6, 6] [1, 1, 2, 2]
// CHECK:         %[[COPY:.+]] = linalg.generic {indexing_maps = [#[[WIN2]], {{.+}}]{{.*}} ins(%[[S]] : tensor<16x2x6x6xf32>) outs({{.+}} : tensor<1x16x2x6x6xf32>)
// CHECK-NOT:     tensor.concat
// CHECK:         %[[COL:.+]] = tensor.collapse_shape %[[COPY]] {{\[}}[0, 1], [2, 3, 4]] : tensor<1x16x2x6x6xf32> into tensor<16x72xf32>
// CHECK:         %[[Z:.+]] = linalg.fill
// CHECK:         %[[MM:.+]] = linalg.matmul ins(%{{.+}}, %[[COL]] : tensor<32x16xf32>, tensor<16x72xf32>) outs(%[[Z]] : tensor<32x72xf32>)
// CHECK:         %[[E:.+]] = tensor.expand_shape %[[MM]] {{\[}}[0], [1, 2]] output_shape [32, 2, 36]
// CHECK:         %[[T:.+]] = linalg.generic {indexing_maps = [#[[FNP]], #[[ID3]], #[[ID3]]]{{.*}} ins(%[[E]], %[[B2]] : tensor<32x2x36xf32>, tensor<2x32x36xf32>)
// CHECK:           arith.addf
// CHECK:         tensor.expand_shape %[[T]] {{\[}}[0], [1], [2, 3]] output_shape [2, 32, 6, 6]
func.func @conv1x1_s2_b2(%x: tensor<2x16x12x12xf32>, %w: tensor<32x16x1x1xf32>, %b: tensor<2x32x6x6xf32>) -> tensor<2x32x6x6xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x, %w : tensor<2x16x12x12xf32>, tensor<32x16x1x1xf32>) outs(%b : tensor<2x32x6x6xf32>) -> tensor<2x32x6x6xf32>
  return %r : tensor<2x32x6x6xf32>
}

// -----

// A 7x7 stride-2 stem with 3 input channels: space-to-depth (inferx-conv-strategy_s2d.mlir),
// then the 4x4 stride-1 convolution over 12 channels through im2col, K = 12*4*4 = 192 (AVX2: no
// NCHWc microkernel). With s2d not listed, im2col on the stem itself, K = 3*7*7 = 147; Winograd
// does not apply (7x7, stride 2) even when allowed.
// REMARK: remark: inferx-conv-strategy: s2d: 7x7 stride 2 over 3 channels: space-to-depth into a 4x4 stride-1 convolution over 12
// REMARK: remark: inferx-conv-strategy: im2col: 4x4 stride (1, 1): im2col + matmul
// CHECK-LABEL: func.func @stem7x7_s2_c3(
// CHECK:         linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<16x192xf32>, tensor<192x2304xf32>)
// WINO-LABEL:  func.func @stem7x7_s2_c3(
// WINO-NOT:      __winograd_conv
// WINO:          linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<16x147xf32>, tensor<147x2304xf32>)
func.func @stem7x7_s2_c3(%x: tensor<1x3x102x102xf32>, %w: tensor<16x3x7x7xf32>, %b: tensor<1x16x48x48xf32>) -> tensor<1x16x48x48xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x, %w : tensor<1x3x102x102xf32>, tensor<16x3x7x7xf32>) outs(%b : tensor<1x16x48x48xf32>) -> tensor<1x16x48x48xf32>
  return %r : tensor<1x16x48x48xf32>
}

// -----

// 3x3 stride 2 at batch 2 with 1 pixel of padding already applied (13x13 -> 6x6): nine strided
// windows of the CNHW input, K = 9 x 8.
// REMARK: remark: inferx-conv-strategy: im2col: 3x3 stride (2, 2): im2col + matmul
// CHECK-LABEL: func.func @conv3x3_s2_b2(
// CHECK:         linalg.transpose ins(%{{.+}} : tensor<2x8x13x13xf32>) outs({{.+}} : tensor<8x2x13x13xf32>)
// CHECK:         tensor.extract_slice %{{.+}}[0, 0, 0, 0] [8, 2, 6, 6] [1, 1, 2, 2]
// CHECK:         tensor.extract_slice %{{.+}}[0, 0, 2, 2] [8, 2, 6, 6] [1, 1, 2, 2]
// CHECK:         tensor.concat dim(0) {{.*}} -> tensor<9x8x2x6x6xf32>
// CHECK:         linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<16x72xf32>, tensor<72x72xf32>) outs(%{{.+}} : tensor<16x72xf32>)
// CHECK-NOT:     linalg.conv_2d
func.func @conv3x3_s2_b2(%x: tensor<2x8x13x13xf32>, %w: tensor<16x8x3x3xf32>, %b: tensor<2x16x6x6xf32>) -> tensor<2x16x6x6xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x, %w : tensor<2x8x13x13xf32>, tensor<16x8x3x3xf32>) outs(%b : tensor<2x16x6x6xf32>) -> tensor<2x16x6x6xf32>
  return %r : tensor<2x16x6x6xf32>
}

// -----

// On CUDA (f16 inputs) the im2col stays one copy with windowed maps (K = (c, kh, kw)): the
// CUDA window-copy rule of inferx-dispatch-config configures that form.
// GPU-DAG:     #[[GCOPY:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 + d4, d3 + d5)>
// GPU-LABEL:   func.func @conv3x3_f16_b1(
// GPU-SAME:      %[[X:.+]]: tensor<1x16x10x10xf16>, %[[W:.+]]: tensor<32x16x3x3xf16>
// GPU:           tensor.collapse_shape %[[W]] {{\[}}[0], [1, 2, 3]] : tensor<32x16x3x3xf16> into tensor<32x144xf16>
// GPU:           linalg.generic {indexing_maps = [#[[GCOPY]], {{.+}}]{{.*}} ins(%[[X]] : tensor<1x16x10x10xf16>)
// GPU-NOT:       tensor.concat
// GPU:           linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<32x144xf16>, tensor<144x64xf16>)
// CHECK-LABEL: func.func @conv3x3_f16_b1(
// CHECK:         tensor.concat
func.func @conv3x3_f16_b1(%x: tensor<1x16x10x10xf16>, %w: tensor<32x16x3x3xf16>, %b: tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x16x10x10xf16>, tensor<32x16x3x3xf16>) outs(%b : tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  return %r : tensor<1x32x8x8xf32>
}
