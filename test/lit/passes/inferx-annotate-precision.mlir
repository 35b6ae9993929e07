// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-annotate-precision)' | filecheck %s --check-prefix=F16
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-annotate-precision{precision=bf16})' | filecheck %s --check-prefix=BF16
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-annotate-precision{precision=f16 min-flops=1000})' | filecheck %s --check-prefix=FLOPS
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-annotate-precision{convolutions=none})' | filecheck %s --check-prefix=NOCONV
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-annotate-precision{convolutions=static})' | filecheck %s --check-prefix=STATIC

// 2 * 4 * 16 * 8 = 1024 FLOPs: at least min-flops=1000.
// F16-LABEL:   func.func @matmul_f32(
// F16:           linalg.matmul {inferx.precision = "f16"}
// BF16-LABEL:  func.func @matmul_f32(
// BF16:          linalg.matmul {inferx.precision = "bf16"}
// FLOPS-LABEL: func.func @matmul_f32(
// FLOPS:         linalg.matmul {inferx.precision = "f16"}
func.func @matmul_f32(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// 2 * 2 * 2 * 2 = 16 FLOPs: annotated by default, below min-flops=1000.
// F16-LABEL:   func.func @matmul_f32_tiny(
// F16:           linalg.matmul {inferx.precision = "f16"}
// FLOPS-LABEL: func.func @matmul_f32_tiny(
// FLOPS:         linalg.matmul ins(
// FLOPS-NOT:     inferx.precision
func.func @matmul_f32_tiny(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>, %c: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<2x2xf32>, tensor<2x2xf32>) outs(%c : tensor<2x2xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// 2 * 2 * 4 * 16 * 8 = 2048 FLOPs.
// F16-LABEL:   func.func @batch_matmul_f32(
// F16:           linalg.batch_matmul {inferx.precision = "f16"}
// BF16-LABEL:  func.func @batch_matmul_f32(
// BF16:          linalg.batch_matmul {inferx.precision = "bf16"}
// FLOPS-LABEL: func.func @batch_matmul_f32(
// FLOPS:         linalg.batch_matmul {inferx.precision = "f16"}
func.func @batch_matmul_f32(%a: tensor<2x4x8xf32>, %b: tensor<2x8x16xf32>, %c: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %0 = linalg.batch_matmul ins(%a, %b : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs(%c : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// 2 * (1*5*6*6) * (3*3*3) = 9720 FLOPs.
// F16-LABEL:   func.func @conv_2d_nchw_f32(
// F16:           linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, inferx.precision = "f16", strides = dense<1> : tensor<2xi64>}
// FLOPS-LABEL: func.func @conv_2d_nchw_f32(
// FLOPS:         linalg.conv_2d_nchw_fchw {{.*}}inferx.precision = "f16"
func.func @conv_2d_nchw_f32(%x: tensor<1x3x8x8xf32>, %w: tensor<5x3x3x3xf32>, %o: tensor<1x5x6x6xf32>) -> tensor<1x5x6x6xf32> {
  %0 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x3x8x8xf32>, tensor<5x3x3x3xf32>) outs(%o : tensor<1x5x6x6xf32>) -> tensor<1x5x6x6xf32>
  return %0 : tensor<1x5x6x6xf32>
}

// 2 * (1*3*6*6) * (3*3) = 1944 FLOPs.
// F16-LABEL:   func.func @depthwise_conv_f32(
// F16:           linalg.depthwise_conv_2d_nchw_chw {{.*}}inferx.precision = "f16"
// FLOPS-LABEL: func.func @depthwise_conv_f32(
// FLOPS:         linalg.depthwise_conv_2d_nchw_chw {{.*}}inferx.precision = "f16"
func.func @depthwise_conv_f32(%x: tensor<1x3x8x8xf32>, %w: tensor<3x3x3xf32>, %o: tensor<1x3x6x6xf32>) -> tensor<1x3x6x6xf32> {
  %0 = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x3x8x8xf32>, tensor<3x3x3xf32>) outs(%o : tensor<1x3x6x6xf32>) -> tensor<1x3x6x6xf32>
  return %0 : tensor<1x3x6x6xf32>
}

// A generic with a reduction loop and a mul-add body is a contraction (here a matmul
// with a transposed B: 2 * 4 * 16 * 8 = 1024 FLOPs).
// F16-LABEL:   func.func @generic_matmul_transpose_b_f32(
// F16:           linalg.generic
// F16-SAME:        attrs =  {inferx.precision = "f16"}
// BF16-LABEL:  func.func @generic_matmul_transpose_b_f32(
// BF16:          attrs =  {inferx.precision = "bf16"}
// FLOPS-LABEL: func.func @generic_matmul_transpose_b_f32(
// FLOPS:         attrs =  {inferx.precision = "f16"}
func.func @generic_matmul_transpose_b_f32(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<4x8xf32>, tensor<16x8xf32>) outs(%c : tensor<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// Dynamic sizes: the FLOPs are unknown, so only the default min-flops=0 annotates.
// F16-LABEL:   func.func @matmul_dynamic_f32(
// F16:           linalg.matmul {inferx.precision = "f16"}
// FLOPS-LABEL: func.func @matmul_dynamic_f32(
// FLOPS-NOT:     inferx.precision
func.func @matmul_dynamic_f32(%a: tensor<?x8xf32>, %b: tensor<8x16xf32>, %c: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x16xf32>) outs(%c : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// convolutions=none keeps convolutions in f32 (CUDA targets: IREE 3.13 miscompiles them in
// f16) while matmuls are still annotated.
// F16-LABEL:   func.func @conv_and_matmul(
// BF16-LABEL:  func.func @conv_and_matmul(
// FLOPS-LABEL: func.func @conv_and_matmul(
// NOCONV-LABEL: func.func @conv_and_matmul(
// NOCONV:         linalg.conv_2d_nchw_fchw
// NOCONV-NOT:     inferx.precision
// NOCONV-SAME:    ins(
// NOCONV:         linalg.matmul {inferx.precision = "f16"}
func.func @conv_and_matmul(%x: tensor<1x3x8x8xf32>, %w: tensor<5x3x3x3xf32>, %o: tensor<1x5x6x6xf32>,
                           %a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> (tensor<1x5x6x6xf32>, tensor<4x16xf32>) {
  %0 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x3x8x8xf32>, tensor<5x3x3x3xf32>) outs(%o : tensor<1x5x6x6xf32>) -> tensor<1x5x6x6xf32>
  %1 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0, %1 : tensor<1x5x6x6xf32>, tensor<4x16xf32>
}

// convolutions=static demotes a static convolution (CUDA: inferx-conv-strategy turns it into a
// matmul) and keeps one with a dynamic batch in f32 (it stays a convolution in IREE's hands).
// STATIC-LABEL: func.func @static_and_dynamic_convs(
// STATIC:         linalg.conv_2d_nchw_fchw {{{.*}}inferx.precision = "f16"{{.*}}} ins(%{{.+}} : tensor<1x3x8x8xf32>
// STATIC:         linalg.conv_2d_nchw_fchw
// STATIC-NOT:       inferx.precision
// STATIC-SAME:      tensor<?x3x8x8xf32>
func.func @static_and_dynamic_convs(%x: tensor<1x3x8x8xf32>, %y: tensor<?x3x8x8xf32>, %w: tensor<5x3x3x3xf32>,
                                    %o: tensor<1x5x6x6xf32>, %p: tensor<?x5x6x6xf32>) -> (tensor<1x5x6x6xf32>, tensor<?x5x6x6xf32>) {
  %0 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x3x8x8xf32>, tensor<5x3x3x3xf32>) outs(%o : tensor<1x5x6x6xf32>) -> tensor<1x5x6x6xf32>
  %1 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%y, %w : tensor<?x3x8x8xf32>, tensor<5x3x3x3xf32>) outs(%p : tensor<?x5x6x6xf32>) -> tensor<?x5x6x6xf32>
  return %0, %1 : tensor<1x5x6x6xf32>, tensor<?x5x6x6xf32>
}
