// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-split-reduction)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-split-reduction)' --verify-diagnostics
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=cpu},inferx-split-reduction)' 2>&1 >/dev/null | filecheck %s --check-prefix=CPU
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-split-reduction{split=5})' 2>&1 >/dev/null | filecheck %s --check-prefix=INDIVISIBLE

// CPU: remark: inferx-split-reduction: declined: target 'cpu' (llvm-cpu): split-K is for GPUs
// INDIVISIBLE: remark: inferx-split-reduction: declined: reduction 3072 is not divisible by split=5

// A matrix-vector shape (batch 1 of an MLP): IREE's warp reduction runs it; left alone.
// CHECK-LABEL: func.func @matvec(
// CHECK:         linalg.matmul
func.func @matvec(%x: tensor<1x4096xf16>, %w: tensor<4096x4096xf16>, %init: tensor<1x4096xf32>) -> tensor<1x4096xf32> {
  // expected-remark @+1 {{inferx-split-reduction: declined: 1x4096 output: a matrix-vector shape}}
  %y = linalg.matmul ins(%x, %w : tensor<1x4096xf16>, tensor<4096x4096xf16>) outs(%init : tensor<1x4096xf32>) -> tensor<1x4096xf32>
  return %y : tensor<1x4096xf32>
}

// -----

// An output that fills the SMs (BERT b8's FFN up: 768 tiles): left alone.
// CHECK-LABEL: func.func @large_output(
// CHECK:         linalg.matmul
func.func @large_output(%x: tensor<1024x768xf16>, %w: tensor<768x3072xf16>, %init: tensor<1024x3072xf32>) -> tensor<1024x3072xf32> {
  // expected-remark @+1 {{inferx-split-reduction: declined: 1024x3072 output is 768 tiles: it fills the 132 SMs}}
  %y = linalg.matmul ins(%x, %w : tensor<1024x768xf16>, tensor<768x3072xf16>) outs(%init : tensor<1024x3072xf32>) -> tensor<1024x3072xf32>
  return %y : tensor<1024x3072xf32>
}

// -----

// A short reduction: no split leaves chunks of >= 128.
// CHECK-LABEL: func.func @short_reduction(
// CHECK:         linalg.matmul
func.func @short_reduction(%x: tensor<128x192xf16>, %w: tensor<192x768xf16>, %init: tensor<128x768xf32>) -> tensor<128x768xf32> {
  // expected-remark @+1 {{inferx-split-reduction: declined: reduction 192 has no power-of-two split with chunks >= 128}}
  %y = linalg.matmul ins(%x, %w : tensor<128x192xf16>, tensor<192x768xf16>) outs(%init : tensor<128x768xf32>) -> tensor<128x768xf32>
  return %y : tensor<128x768xf32>
}

// -----

// Integer matmuls: the rule was not measured on them.
// CHECK-LABEL: func.func @i8_inputs(
// CHECK:         linalg.matmul
func.func @i8_inputs(%x: tensor<128x3072xi8>, %w: tensor<3072x768xi8>, %init: tensor<128x768xi32>) -> tensor<128x768xi32> {
  // expected-remark @+1 {{inferx-split-reduction: declined: i8 inputs: the rule was measured on f16, bf16 and f32 only}}
  %y = linalg.matmul ins(%x, %w : tensor<128x3072xi8>, tensor<3072x768xi8>) outs(%init : tensor<128x768xi32>) -> tensor<128x768xi32>
  return %y : tensor<128x768xi32>
}

// -----

// A dynamic row count (the artifact's dynamic function): its static-shape functions get the split.
// CHECK-LABEL: func.func @dynamic_rows(
// CHECK:         linalg.matmul
func.func @dynamic_rows(%x: tensor<?x3072xf16>, %w: tensor<3072x768xf16>, %init: tensor<?x768xf32>) -> tensor<?x768xf32> {
  // expected-remark @+1 {{inferx-split-reduction: declined: dynamic shape or transposing indexing maps}}
  %y = linalg.matmul ins(%x, %w : tensor<?x3072xf16>, tensor<3072x768xf16>) outs(%init : tensor<?x768xf32>) -> tensor<?x768xf32>
  return %y : tensor<?x768xf32>
}

// -----

// The FFN down projection, to see the CPU and indivisible-split remarks above.
// CHECK-LABEL: func.func @ffn_down(
// CHECK-NOT:     linalg.matmul
func.func @ffn_down(%x: tensor<128x3072xf16>, %w: tensor<3072x768xf16>, %init: tensor<128x768xf32>) -> tensor<128x768xf32> {
  // expected-remark @+1 {{inferx-split-reduction: split: 128x768 output is 24 tiles for 132 SMs}}
  %y = linalg.matmul ins(%x, %w : tensor<128x3072xf16>, tensor<3072x768xf16>) outs(%init : tensor<128x768xf32>) -> tensor<128x768xf32>
  return %y : tensor<128x768xf32>
}

// -----

// An output that fills one wave (1024x768: 192 tiles for 132 SMs) with a short reduction: a
// 2-way split would cost as much as it saves (BERT b8's projections), so it needs chunks >= 1024.
// CHECK-LABEL: func.func @full_wave_short_reduction(
// CHECK:         linalg.matmul
func.func @full_wave_short_reduction(%x: tensor<1024x768xf16>, %w: tensor<768x768xf16>, %init: tensor<1024x768xf32>) -> tensor<1024x768xf32> {
  // expected-remark @+1 {{inferx-split-reduction: declined: reduction 768 has no power-of-two split with chunks >= 1024}}
  %y = linalg.matmul ins(%x, %w : tensor<1024x768xf16>, tensor<768x768xf16>) outs(%init : tensor<1024x768xf32>) -> tensor<1024x768xf32>
  return %y : tensor<1024x768xf32>
}
