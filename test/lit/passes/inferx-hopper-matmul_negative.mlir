// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul)' --verify-diagnostics
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=a100},inferx-hopper-matmul)' 2>&1 >/dev/null | filecheck %s --check-prefix=AMPERE
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=cpu},inferx-hopper-matmul)' 2>&1 >/dev/null | filecheck %s --check-prefix=CPU
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul{split=3})' 2>&1 >/dev/null | filecheck %s --check-prefix=INDIVISIBLE

// AMPERE: remark: inferx-hopper-matmul: declined: target 'a100' (sm_80) is not a Hopper GPU
// CPU: remark: inferx-hopper-matmul: declined: target 'cpu' ({{.*}}) is not a Hopper GPU
// INDIVISIBLE: remark: inferx-hopper-matmul: declined: split=3 does not cut reduction 64 into multiples of 64

// No executable is declared when nothing is rewritten.
// CHECK-NOT: hal.executable.source

// A matrix-vector shape (batch 1 of an MLP): IREE's warp reduction runs it.
// CHECK-LABEL: func.func @matvec(
// CHECK:         linalg.matmul
func.func @matvec(%x: tensor<1x4096xf16>, %w: tensor<4096x4096xf16>, %init: tensor<1x4096xf32>) -> tensor<1x4096xf32> {
  // expected-remark @+1 {{inferx-hopper-matmul: declined: 1x4096 output: a matrix-vector shape}}
  %y = linalg.matmul ins(%x, %w : tensor<1x4096xf16>, tensor<4096x4096xf16>) outs(%init : tensor<1x4096xf32>) -> tensor<1x4096xf32>
  return %y : tensor<1x4096xf32>
}

// -----

// f32 inputs (an fp32 build): the kernel takes f16/bf16 only.
// CHECK-LABEL: func.func @f32_inputs(
// CHECK:         linalg.matmul
func.func @f32_inputs(%x: tensor<128x64xf32>, %w: tensor<64x256xf32>, %init: tensor<128x256xf32>) -> tensor<128x256xf32> {
  // expected-remark @+1 {{inferx-hopper-matmul: declined: f32 x f32 -> f32: the kernel takes f16 or bf16 inputs with an f32 accumulator}}
  %y = linalg.matmul ins(%x, %w : tensor<128x64xf32>, tensor<64x256xf32>) outs(%init : tensor<128x256xf32>) -> tensor<128x256xf32>
  return %y : tensor<128x256xf32>
}

// -----

// f16 accumulation: declined too (the kernel accumulates in f32).
// CHECK-LABEL: func.func @f16_accumulator(
// CHECK:         linalg.matmul
func.func @f16_accumulator(%x: tensor<128x64xf16>, %w: tensor<64x256xf16>, %init: tensor<128x256xf16>) -> tensor<128x256xf16> {
  // expected-remark @+1 {{inferx-hopper-matmul: declined: f16 x f16 -> f16: the kernel takes f16 or bf16 inputs with an f32 accumulator}}
  %y = linalg.matmul ins(%x, %w : tensor<128x64xf16>, tensor<64x256xf16>) outs(%init : tensor<128x256xf16>) -> tensor<128x256xf16>
  return %y : tensor<128x256xf16>
}

// -----

// The dynamic-batch function: shapes unknown at build time.
// CHECK-LABEL: func.func @dynamic(
// CHECK:         linalg.matmul
func.func @dynamic(%x: tensor<?x64xf16>, %w: tensor<64x256xf16>, %init: tensor<?x256xf32>) -> tensor<?x256xf32> {
  // expected-remark @+1 {{inferx-hopper-matmul: declined: dynamic shape}}
  %y = linalg.matmul ins(%x, %w : tensor<?x64xf16>, tensor<64x256xf16>) outs(%init : tensor<?x256xf32>) -> tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}

// -----

// A reduction that is not a multiple of 16 (a 7x7 stem convolution on 3 channels: K = 147).
// CHECK-LABEL: func.func @odd_reduction(
// CHECK:         linalg.matmul
func.func @odd_reduction(%w: tensor<64x147xf16>, %col: tensor<147x12544xf16>, %init: tensor<64x12544xf32>) -> tensor<64x12544xf32> {
  // expected-remark @+1 {{inferx-hopper-matmul: declined: reduction 147 is not a multiple of 16}}
  %y = linalg.matmul ins(%w, %col : tensor<64x147xf16>, tensor<147x12544xf16>) outs(%init : tensor<64x12544xf32>) -> tensor<64x12544xf32>
  return %y : tensor<64x12544xf32>
}

// -----

// A short reduction and the forced split: 64 cannot be cut into 3 slices of whole 64-blocks.
// CHECK-LABEL: func.func @short_reduction(
func.func @short_reduction(%x: tensor<4096x64xf16>, %w: tensor<64x4096xf16>, %init: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 4096x4096x64 f16, tile 128x128 (8 warps, 3 stages): 1024 tiles of 128x128 fill the 132 SMs}}
  %y = linalg.matmul ins(%x, %w : tensor<4096x64xf16>, tensor<64x4096xf16>) outs(%init : tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  return %y : tensor<4096x4096xf32>
}

// -----

// A weight-only int8 layer (what inferx-quantize-contractions writes for CUDA targets): the f16
// weight is dequantized from int8 by a generic IREE fuses into its own matmul dispatch; the
// kernel would need that weight written out on every call.
// CHECK-LABEL: func.func @weight_only_int8(
// CHECK:         linalg.matmul
#nk = affine_map<(d0, d1) -> (d1, d0)>
#col = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @weight_only_int8(%x: tensor<256x512xf16>, %wq: tensor<1024x512xi8>, %s: tensor<1024xf16>, %init: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %e = tensor.empty() : tensor<512x1024xf16>
  %w = linalg.generic {indexing_maps = [#nk, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%wq, %s : tensor<1024x512xi8>, tensor<1024xf16>) outs(%e : tensor<512x1024xf16>) {
  ^bb0(%q: i8, %sc: f16, %o: f16):
    %f = arith.sitofp %q : i8 to f16
    %v = arith.mulf %f, %sc : f16
    linalg.yield %v : f16
  } -> tensor<512x1024xf16>
  // expected-remark @+1 {{inferx-hopper-matmul: declined: an operand is dequantized from integers (weight-only int8/int4)}}
  %y = linalg.matmul ins(%x, %w : tensor<256x512xf16>, tensor<512x1024xf16>) outs(%init : tensor<256x1024xf32>) -> tensor<256x1024xf32>
  return %y : tensor<256x1024xf32>
}
