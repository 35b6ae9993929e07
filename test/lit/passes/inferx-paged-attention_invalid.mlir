// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=cpu},inferx-paged-attention)' --verify-diagnostics
// RUN: not inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h100},inferx-paged-attention)' 2>&1 >/dev/null | filecheck %s --check-prefix=H100

// The kernel's call has no other implementation: where it cannot become the kernel, the pass
// fails naming the call and why (the frontend writes it only where it can).
// H100: error: inferx-paged-attention: the call of @inferx_paged_decode_attention_0 cannot run: a f32 cache (the kernel reads f16 or bf16)
func.func private @inferx_paged_decode_attention_0(tensor<1x4x64xf32>, tensor<1x4x1x64xf32>, tensor<1x4x1x64xf32>, tensor<1x2x3x4x16x64xf32>, tensor<1x2xi64>, tensor<1xi64>, tensor<1xi32>) -> tensor<1x4x64xf32> attributes {inferx.kernel = "paged_decode_attention", inferx.splits = 1 : i64, inferx.window = 0 : i64}
func.func @f32_cache(%q: tensor<1x4x64xf32>, %k: tensor<1x4x1x64xf32>, %v: tensor<1x4x1x64xf32>, %cache: tensor<1x2x3x4x16x64xf32>, %table: tensor<1x2xi64>, %start: tensor<1xi64>) -> tensor<1x4x64xf32> {
  %layer = arith.constant dense<0> : tensor<1xi32>
  // expected-error @+1 {{inferx-paged-attention: the call of @inferx_paged_decode_attention_0 cannot run: target 'cpu' is not a CUDA GPU}}
  %out = call @inferx_paged_decode_attention_0(%q, %k, %v, %cache, %table, %start, %layer) : (tensor<1x4x64xf32>, tensor<1x4x1x64xf32>, tensor<1x4x1x64xf32>, tensor<1x2x3x4x16x64xf32>, tensor<1x2xi64>, tensor<1xi64>, tensor<1xi32>) -> tensor<1x4x64xf32>
  return %out : tensor<1x4x64xf32>
}

// -----

// H100: error: inferx-paged-attention: the call of @inferx_paged_prefill_attention_0 cannot run: head_dim 80 (the kernel takes powers of two from 16)
func.func private @inferx_paged_prefill_attention_0(tensor<1x4x8x80xf16>, tensor<1x4x8x80xf16>, tensor<1x4x8x80xf16>, tensor<1x2x3x4x16x80xf16>, tensor<1x2xi64>, tensor<1xi64>, tensor<1xi32>) -> tensor<1x4x8x80xf16> attributes {inferx.kernel = "paged_prefill_attention", inferx.window = 0 : i64}
func.func @head_dim_80(%q: tensor<1x4x8x80xf16>, %k: tensor<1x4x8x80xf16>, %v: tensor<1x4x8x80xf16>, %cache: tensor<1x2x3x4x16x80xf16>, %table: tensor<1x2xi64>, %start: tensor<1xi64>) -> tensor<1x4x8x80xf16> {
  %layer = arith.constant dense<0> : tensor<1xi32>
  // expected-error @+1 {{inferx-paged-attention: the call of @inferx_paged_prefill_attention_0 cannot run: target 'cpu' is not a CUDA GPU}}
  %out = call @inferx_paged_prefill_attention_0(%q, %k, %v, %cache, %table, %start, %layer) : (tensor<1x4x8x80xf16>, tensor<1x4x8x80xf16>, tensor<1x4x8x80xf16>, tensor<1x2x3x4x16x80xf16>, tensor<1x2xi64>, tensor<1xi64>, tensor<1xi32>) -> tensor<1x4x8x80xf16>
  return %out : tensor<1x4x8x80xf16>
}
