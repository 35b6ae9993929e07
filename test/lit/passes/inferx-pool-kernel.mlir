// REQUIRES: c-compiler
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-pool-kernel)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-pool-kernel)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: env CC=/nonexistent/cc inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-pool-kernel)' 2>&1 | filecheck %s --check-prefix=NOCC

// torch-mlir's max pooling (ResNet's stem: 3x3, stride 2, a -inf pad of 1 around H and W, a
// -inf fill): the unpadded input viewed as [N * C, H * W] planes goes to the kernel's dispatch
// with the padding folded (its sizes are the C function's trailing constants), the result is
// reshaped back to NCHW, and the pad and the pooling are gone.
// REMARK: remark: inferx-pool-kernel: 3x3 max pooling, stride 2x2, over 32 planes of 20x20 (padding 1x1 folded) on our AVX-512 kernel
// Without a C compiler the pooling stays IREE's, with a remark naming the missing compiler.
// NOCC: remark: inferx-pool-kernel: max pooling left to IREE: CC='/nonexistent/cc' is not an executable
// NOCC-NOT: flow.dispatch
// NOCC: linalg.pooling_nchw_max
// CHECK:       stream.executable private @inferx_maxpool_32x400_20x20_k3x3_s2x2_p1x1_o10x10 attributes {hal.executable.objects = #hal.executable.objects<{{.*}}path = "{{.*}}/maxpool_planes-{{[0-9a-f]+}}.o"
// CHECK:         func.func private @inferx_maxpool_rows(memref<f32>, index, memref<f32>, index, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64) attributes {hal.import.static, llvm.bareptr = true}
// CHECK:         func.func @inferx_maxpool_32x400_20x20_k3x3_s2x2_p1x1_o10x10({{.*}}) attributes {inferx.config = {{.*}}source = "rule (inferx-pool-kernel)"
// CHECK-SAME:      inferx.dispatch = {{.*}}flops = 28800
// CHECK-SAME:      root = "inferx_maxpool_rows (C, AVX-512)"
// CHECK:           stream.binding.subspan %arg1{{.*}} : !stream.binding -> memref<32x100xf32>
// CHECK:           arith.constant 20 : i64
// CHECK:           call @inferx_maxpool_rows({{.*}}) : (memref<f32>, index, memref<f32>, index, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64) -> ()
// CHECK-LABEL: func.func @stem_pool(
// CHECK-SAME:    %[[X:.+]]: tensor<2x16x20x20xf32>
// CHECK:         %[[PLANES:.+]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2, 3]] : tensor<2x16x20x20xf32> into tensor<32x400xf32>
// CHECK:         %[[Y:.+]] = flow.dispatch @inferx_maxpool_32x400_20x20_k3x3_s2x2_p1x1_o10x10::@inferx_maxpool_32x400_20x20_k3x3_s2x2_p1x1_o10x10(%[[PLANES]]) : (tensor<32x400xf32>) -> tensor<32x100xf32>
// CHECK:         %[[OUT:.+]] = tensor.expand_shape %[[Y]] {{\[}}[0, 1], [2, 3]] output_shape [2, 16, 10, 10] : tensor<32x100xf32> into tensor<2x16x10x10xf32>
// CHECK-NOT:     tensor.pad
// CHECK-NOT:     linalg.pooling_nchw_max
// CHECK:         return %[[OUT]]
func.func @stem_pool(%x: tensor<2x16x20x20xf32>) -> tensor<2x16x10x10xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %padded = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %ninf : f32
  } : tensor<2x16x20x20xf32> to tensor<2x16x22x22xf32>
  %e = tensor.empty() : tensor<2x16x10x10xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e : tensor<2x16x10x10xf32>) -> tensor<2x16x10x10xf32>
  %window = tensor.empty() : tensor<3x3xf32>
  %y = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%padded, %window : tensor<2x16x22x22xf32>, tensor<3x3xf32>) outs(%init : tensor<2x16x10x10xf32>) -> tensor<2x16x10x10xf32>
  return %y : tensor<2x16x10x10xf32>
}

// -----

// A pooling over an input that is no -inf pad (a zero pad, kept: the kernel reads the padded
// tensor as it is, with no padding of its own), with a window that is not square and unequal
// strides; the zero pad stays, feeding the kernel.
// REMARK: remark: inferx-pool-kernel: 2x3 max pooling, stride 1x2, over 3 planes of 9x11 (padding 0x0 folded) on our AVX-512 kernel
// CHECK-LABEL: func.func @zero_padded(
// CHECK:         %[[P:.+]] = tensor.pad
// CHECK:         %[[PLANES:.+]] = tensor.collapse_shape %[[P]] {{\[}}[0, 1], [2, 3]] : tensor<1x3x9x11xf32> into tensor<3x99xf32>
// CHECK:         flow.dispatch @inferx_maxpool_3x99_9x11_k2x3_s1x2_p0x0_o8x5::@inferx_maxpool_3x99_9x11_k2x3_s1x2_p0x0_o8x5(%[[PLANES]]) : (tensor<3x99xf32>) -> tensor<3x40xf32>
// CHECK-NOT:     linalg.pooling_nchw_max
func.func @zero_padded(%x: tensor<1x3x7x9xf32>) -> tensor<1x3x8x5xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %padded = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %zero : f32
  } : tensor<1x3x7x9xf32> to tensor<1x3x9x11xf32>
  %e = tensor.empty() : tensor<1x3x8x5xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x3x8x5xf32>) -> tensor<1x3x8x5xf32>
  %window = tensor.empty() : tensor<2x3xf32>
  %y = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<[1, 2]> : vector<2xi64>}
      ins(%padded, %window : tensor<1x3x9x11xf32>, tensor<2x3xf32>) outs(%init : tensor<1x3x8x5xf32>) -> tensor<1x3x8x5xf32>
  return %y : tensor<1x3x8x5xf32>
}

// -----

// A pooling of a pooling (GoogLeNet's pool branch after its stage pooling): the second reads
// the first one's kernel result through its own -inf pad, both on the kernel.
// REMARK: remark: inferx-pool-kernel: 3x3 max pooling, stride 2x2, over 4 planes of 9x9 (padding 0x0 folded) on our AVX-512 kernel
// REMARK: remark: inferx-pool-kernel: 3x3 max pooling, stride 1x1, over 4 planes of 4x4 (padding 1x1 folded) on our AVX-512 kernel
// CHECK-LABEL: func.func @chained(
// CHECK:         %[[A:.+]] = flow.dispatch @inferx_maxpool_4x81_9x9_k3x3_s2x2_p0x0_o4x4
// CHECK:         %[[AX:.+]] = tensor.expand_shape %[[A]]
// CHECK:         %[[AP:.+]] = tensor.collapse_shape %[[AX]]
// CHECK:         flow.dispatch @inferx_maxpool_4x16_4x4_k3x3_s1x1_p1x1_o4x4{{.*}}(%[[AP]])
// CHECK-NOT:     linalg.pooling_nchw_max
func.func @chained(%x: tensor<1x4x9x9xf32>) -> tensor<1x4x4x4xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %w = tensor.empty() : tensor<3x3xf32>
  %e = tensor.empty() : tensor<1x4x4x4xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %y1 = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%x, %w : tensor<1x4x9x9xf32>, tensor<3x3xf32>) outs(%init : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %padded = tensor.pad %y1 low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %ninf : f32
  } : tensor<1x4x4x4xf32> to tensor<1x4x6x6xf32>
  %y2 = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%padded, %w : tensor<1x4x6x6xf32>, tensor<3x3xf32>) outs(%init : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %y2 : tensor<1x4x4x4xf32>
}
