// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h100},inferx-paged-attention)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h100},inferx-paged-attention)' --verify-diagnostics >/dev/null
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=a100},inferx-paged-attention)' 2>&1 >/dev/null | filecheck %s --check-prefix=AMPERE

// A decode step at batch 2 (8 query heads over 2 KV heads of 64) calls the decode declaration the
// frontend writes (frontend/llm/kernel_calls.py): the call becomes two dispatches, our partials
// kernel, 2 x 2 programs (batch x KV heads) by 4 splits (inferx.splits), reading the step's own
// key and value and the whole cache (2 layers, 9 blocks of 16 rows) as it lies, with Triton's two
// scratch results after the two it writes; then the combine, a program a (sequence, head) = 16.
// The declaration goes.
// AMPERE: remark: inferx-paged-attention: decode attention: batch 2, 8 heads over 2 KV heads, 4 splits, f16 cache in blocks of 16: our kernel (Triton, sm_80)
// CHECK-NOT:   func.func private @inferx_paged_decode_attention_0
// CHECK:       hal.executable.source private @[[COMBINE:inferx_paged_attention_combine_[0-9a-f]+]]
// CHECK:         hal.executable.export public @combine_kernel ordinal(0)
// CHECK:           %[[ROWS:.+]] = arith.constant 16 : index
// CHECK:           hal.return %[[ROWS]], %{{.+}}, %{{.+}}
// CHECK:       hal.executable.source private @[[EXE:inferx_paged_attention_[0-9a-f]+]]
// CHECK:         hal.executable.export public @paged_attention_kernel ordinal(0)
// CHECK:           %[[PROGRAMS:.+]] = arith.constant 4 : index
// CHECK:           %[[SPLITS:.+]] = arith.constant 4 : index
// CHECK:           hal.return %[[PROGRAMS]], %[[SPLITS]], %{{.+}}
// CHECK:         config = "16 query rows, 64 positions a step, 4 splits, 4 warps, 2 stages", signature = "decode attention b2 h8/2 d64", source = "rule (inferx-paged-attention)"
// CHECK-LABEL: func.func @decode_b2(
// CHECK-SAME:    %[[Q:[^:]+]]: tensor<2x8x64xf16>, %[[K:[^:]+]]: tensor<2x2x1x64xf16>, %[[V:[^:]+]]: tensor<2x2x1x64xf16>, %[[C:[^:]+]]: tensor<2x2x9x2x16x64xf16>, %[[T:[^:]+]]: tensor<2x4xi64>, %[[S:[^:]+]]: tensor<2xi64>
// CHECK:         %[[L:.+]] = arith.constant dense<1> : tensor<1xi32>
// CHECK:         %[[P:.+]]:4 = flow.dispatch @[[EXE]]::@paged_attention_kernel(%[[Q]], %[[K]], %[[V]], %[[C]], %[[T]], %[[S]], %[[L]]) : ({{.+}}) -> (tensor<2x8x4x64xf32>, tensor<2x8x4x2xf32>, tensor<{{[0-9]+}}xi8>, tensor<{{[0-9]+}}xi8>)
// CHECK:         %[[O:.+]]:3 = flow.dispatch @[[COMBINE]]::@combine_kernel(%[[P]]#0, %[[P]]#1) : (tensor<2x8x4x64xf32>, tensor<2x8x4x2xf32>) -> (tensor<2x8x64xf16>, tensor<{{[0-9]+}}xi8>, tensor<{{[0-9]+}}xi8>)
// CHECK-NOT:     call
// CHECK:         return %[[O]]#0
func.func private @inferx_paged_decode_attention_0(tensor<2x8x64xf16>, tensor<2x2x1x64xf16>, tensor<2x2x1x64xf16>, tensor<2x2x9x2x16x64xf16>, tensor<2x4xi64>, tensor<2xi64>, tensor<1xi32>) -> tensor<2x8x64xf16> attributes {inferx.kernel = "paged_decode_attention", inferx.splits = 4 : i64, inferx.window = 0 : i64}
func.func @decode_b2(%q: tensor<2x8x64xf16>, %k: tensor<2x2x1x64xf16>, %v: tensor<2x2x1x64xf16>, %cache: tensor<2x2x9x2x16x64xf16>, %table: tensor<2x4xi64>, %start: tensor<2xi64>) -> tensor<2x8x64xf16> {
  %layer = arith.constant dense<1> : tensor<1xi32>
  // expected-remark @+1 {{inferx-paged-attention: decode attention: batch 2, 8 heads over 2 KV heads, 4 splits, f16 cache in blocks of 16: our kernel (Triton, sm_90)}}
  %out = call @inferx_paged_decode_attention_0(%q, %k, %v, %cache, %table, %start, %layer) : (tensor<2x8x64xf16>, tensor<2x2x1x64xf16>, tensor<2x2x1x64xf16>, tensor<2x2x9x2x16x64xf16>, tensor<2x4xi64>, tensor<2xi64>, tensor<1xi32>) -> tensor<2x8x64xf16>
  return %out : tensor<2x8x64xf16>
}

// -----

// A sliding window (Mistral) is the kernel's: one more constant, its own kernel.
// CHECK:       hal.executable.source private @inferx_paged_attention_
// CHECK:         config = "16 query rows, 64 positions a step, 1 splits, 4 warps, 2 stages, window 96"
// CHECK-LABEL: func.func @windowed(
// CHECK:         flow.dispatch @inferx_paged_attention_
func.func private @inferx_paged_decode_attention_0(tensor<1x4x64xbf16>, tensor<1x4x1x64xbf16>, tensor<1x4x1x64xbf16>, tensor<1x2x3x4x16x64xbf16>, tensor<1x2xi64>, tensor<1xi64>, tensor<1xi32>) -> tensor<1x4x64xbf16> attributes {inferx.kernel = "paged_decode_attention", inferx.splits = 1 : i64, inferx.window = 96 : i64}
func.func @windowed(%q: tensor<1x4x64xbf16>, %k: tensor<1x4x1x64xbf16>, %v: tensor<1x4x1x64xbf16>, %cache: tensor<1x2x3x4x16x64xbf16>, %table: tensor<1x2xi64>, %start: tensor<1xi64>) -> tensor<1x4x64xbf16> {
  %layer = arith.constant dense<0> : tensor<1xi32>
  // expected-remark @+1 {{inferx-paged-attention: decode attention: batch 1, 4 heads over 4 KV heads, 1 splits, bf16 cache in blocks of 16}}
  %out = call @inferx_paged_decode_attention_0(%q, %k, %v, %cache, %table, %start, %layer) : (tensor<1x4x64xbf16>, tensor<1x4x1x64xbf16>, tensor<1x4x1x64xbf16>, tensor<1x2x3x4x16x64xbf16>, tensor<1x2xi64>, tensor<1xi64>, tensor<1xi32>) -> tensor<1x4x64xbf16>
  return %out : tensor<1x4x64xbf16>
}

// -----

// A prefill chunk (batch 1, 32 tokens, 8 heads over 2 KV heads) attends through the prefill
// kernel: it reads q, the chunk's own keys and values and the cache; 1 x 2 programs (batch x KV
// heads) by 2 tiles of 64 query rows (4 heads x 32 tokens a KV head), one output, then Triton's
// scratch.
// AMPERE: remark: inferx-paged-attention: prefill attention: batch 1 x 32 tokens, 8 heads over 2 KV heads, f16 cache in blocks of 16: our kernel (Triton, sm_80)
// CHECK:       hal.executable.source private @[[EXE:inferx_prefill_attention_[0-9a-f]+]]
// CHECK:           %[[PROGRAMS:.+]] = arith.constant 2 : index
// CHECK:           %[[TILES:.+]] = arith.constant 2 : index
// CHECK:           hal.return %[[PROGRAMS]], %[[TILES]], %{{.+}}
// CHECK:         config = "64 query rows, 64 positions a step, 4 warps, 2 stages", signature = "prefill attention b1 t32 h8/2 d64"
// CHECK-LABEL: func.func @prefill_b1_t32(
// CHECK:         %[[R:.+]]:3 = flow.dispatch @[[EXE]]::@prefill_attention_kernel(%{{.+}}) : (tensor<1x8x32x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>, tensor<2x2x9x2x16x64xf16>, tensor<1x4xi64>, tensor<1xi64>, tensor<1xi32>) -> (tensor<1x8x32x64xf16>, tensor<{{[0-9]+}}xi8>, tensor<{{[0-9]+}}xi8>)
// CHECK:         return %[[R]]#0
func.func private @inferx_paged_prefill_attention_0(tensor<1x8x32x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>, tensor<2x2x9x2x16x64xf16>, tensor<1x4xi64>, tensor<1xi64>, tensor<1xi32>) -> tensor<1x8x32x64xf16> attributes {inferx.kernel = "paged_prefill_attention", inferx.window = 0 : i64}
func.func @prefill_b1_t32(%q: tensor<1x8x32x64xf16>, %k: tensor<1x2x32x64xf16>, %v: tensor<1x2x32x64xf16>, %cache: tensor<2x2x9x2x16x64xf16>, %table: tensor<1x4xi64>, %start: tensor<1xi64>) -> tensor<1x8x32x64xf16> {
  %layer = arith.constant dense<0> : tensor<1xi32>
  // expected-remark @+1 {{inferx-paged-attention: prefill attention: batch 1 x 32 tokens, 8 heads over 2 KV heads, f16 cache in blocks of 16: our kernel (Triton, sm_90)}}
  %out = call @inferx_paged_prefill_attention_0(%q, %k, %v, %cache, %table, %start, %layer) : (tensor<1x8x32x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>, tensor<2x2x9x2x16x64xf16>, tensor<1x4xi64>, tensor<1xi64>, tensor<1xi32>) -> tensor<1x8x32x64xf16>
  return %out : tensor<1x8x32x64xf16>
}
