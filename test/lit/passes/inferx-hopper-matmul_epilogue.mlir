// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul)' --verify-diagnostics
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul{epilogue=false})' | filecheck %s --check-prefix=OFF

// The ops after a matmul that its kernel finishes (epilogues). Their numbers are checked against
// IREE's in test/e2e/test_hopper_epilogue.py (Triton's interpreter); these check the rewrite.

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// A projection with its bias, an erf GELU that reads the biased value twice, and the f16 cast
// the next layer reads: one dispatch, which reads the bias vector and writes f16.
// CHECK-LABEL: func.func @bias_gelu(
// CHECK-SAME:    %[[A:.+]]: tensor<1024x768xf16>, %[[B:.+]]: tensor<768x3072xf16>, %[[BIAS:.+]]: tensor<3072xf32>
// CHECK:         %[[D:.+]]:3 = flow.dispatch @inferx_matmul_1024x3072x768_{{[0-9a-f]+}}::@inferx_matmul(%[[A]], %[[B]], %[[BIAS]]) : (tensor<1024x768xf16>, tensor<768x3072xf16>, tensor<3072xf32>) -> (tensor<1024x3072xf16>, tensor<16xi8>, tensor<16xi8>)
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[D]]#0 : tensor<1024x3072xf16>
// OFF-LABEL: func.func @bias_gelu(
// OFF:         flow.dispatch {{.*}} -> (tensor<1x1024x3072xf32>, tensor<16xi8>, tensor<16xi8>)
// OFF-COUNT-4: linalg.generic
func.func @bias_gelu(%a: tensor<1024x768xf16>, %b: tensor<768x3072xf16>, %bias: tensor<3072xf32>) -> tensor<1024x3072xf16> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024x3072xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<1024x3072xf32>) -> tensor<1024x3072xf32>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 1024x3072x768 f16, tile 128x256 (8 warps, 3 stages): 96 tiles of 128x256: one wave on the 132 SMs, where 192 of 128x128 take two; fused 4 ops after it (4 linalg.generic)}}
  %p = linalg.matmul ins(%a, %b : tensor<1024x768xf16>, tensor<768x3072xf16>) outs(%z : tensor<1024x3072xf32>) -> tensor<1024x3072xf32>
  %x = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %bias : tensor<1024x3072xf32>, tensor<3072xf32>) outs(%e : tensor<1024x3072xf32>) {
  ^bb0(%in: f32, %bi: f32, %out: f32):
    %s = arith.addf %in, %bi : f32
    linalg.yield %s : f32
  } -> tensor<1024x3072xf32>
  %r2 = arith.constant 0.70710678 : f32
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<1024x3072xf32>) outs(%e : tensor<1024x3072xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %r2 : f32
    %r = math.erf %s : f32
    linalg.yield %r : f32
  } -> tensor<1024x3072xf32>
  %g = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %t : tensor<1024x3072xf32>, tensor<1024x3072xf32>) outs(%e : tensor<1024x3072xf32>) {
  ^bb0(%in: f32, %er: f32, %out: f32):
    %one = arith.constant 1.0 : f32
    %u = arith.addf %er, %one : f32
    %v = arith.mulf %in, %u : f32
    linalg.yield %v : f32
  } -> tensor<1024x3072xf32>
  %e16 = tensor.empty() : tensor<1024x3072xf16>
  %o = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<1024x3072xf32>) outs(%e16 : tensor<1024x3072xf16>) {
  ^bb0(%in: f32, %out: f16):
    %c = arith.truncf %in : f32 to f16
    linalg.yield %c : f16
  } -> tensor<1024x3072xf16>
  return %o : tensor<1024x3072xf16>
}

// -----

// Keys split into heads and transposed for attention ([B*S, D] -> [B*H, Dh, S], f16): the kernel
// stores each element where the reshapes and the transpose put it.
// CHECK-LABEL: func.func @key_heads(
// CHECK:         %[[D:.+]]:3 = flow.dispatch @inferx_matmul_1024x768x768_{{[0-9a-f]+}}::@inferx_matmul({{.*}}) : {{.*}} -> (tensor<96x64x128xf16>, tensor<16xi8>, tensor<16xi8>)
// CHECK-NOT:     linalg.transpose
// CHECK:         return %[[D]]#0
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last = affine_map<(d0, d1, d2) -> (d2)>
func.func @key_heads(%a: tensor<1024x768xf16>, %b: tensor<768x768xf16>, %bias: tensor<768xf32>) -> tensor<96x64x128xf16> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024x768xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<1024x768xf32>) -> tensor<1024x768xf32>
  // expected-remark @+1 {{fused 6 ops after it (2 tensor.expand_shape, 2 linalg.generic, linalg.transpose, tensor.collapse_shape)}}
  %p = linalg.matmul ins(%a, %b : tensor<1024x768xf16>, tensor<768x768xf16>) outs(%z : tensor<1024x768xf32>) -> tensor<1024x768xf32>
  %pe = tensor.expand_shape %p [[0, 1], [2]] output_shape [8, 128, 768] : tensor<1024x768xf32> into tensor<8x128x768xf32>
  %e3 = tensor.empty() : tensor<8x128x768xf32>
  %x = linalg.generic {indexing_maps = [#id3, #last, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%pe, %bias : tensor<8x128x768xf32>, tensor<768xf32>) outs(%e3 : tensor<8x128x768xf32>) {
  ^bb0(%in: f32, %bi: f32, %out: f32):
    %s = arith.addf %in, %bi : f32
    linalg.yield %s : f32
  } -> tensor<8x128x768xf32>
  %h = tensor.expand_shape %x [[0], [1], [2, 3]] output_shape [8, 128, 12, 64] : tensor<8x128x768xf32> into tensor<8x128x12x64xf32>
  %e4 = tensor.empty() : tensor<8x12x64x128xf32>
  %kt = linalg.transpose ins(%h : tensor<8x128x12x64xf32>) outs(%e4 : tensor<8x12x64x128xf32>) permutation = [0, 2, 3, 1]
  %c = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<8x12x64x128xf32> into tensor<96x64x128xf32>
  %e16 = tensor.empty() : tensor<96x64x128xf16>
  %o = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%c : tensor<96x64x128xf32>) outs(%e16 : tensor<96x64x128xf16>) {
  ^bb0(%in: f32, %out: f16):
    %t = arith.truncf %in : f32 to f16
    linalg.yield %t : f16
  } -> tensor<96x64x128xf16>
  return %o : tensor<96x64x128xf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// The residual add's result feeds a layer norm (a reduction) and its normalization: the kernel
// stops at the residual (the one value read after it); the reduction is IREE's.
// CHECK-LABEL: func.func @residual_then_norm(
// CHECK-SAME:    %[[RES:[a-z0-9]+]]: tensor<1024x768xf32>
// CHECK:         %[[D:.+]]:3 = flow.dispatch @inferx_matmul_1024x768x3072_{{[0-9a-f]+}}::@inferx_matmul({{.*}}, %[[RES]]) : {{.*}} -> (tensor<1024x768xf32>, tensor<16xi8>, tensor<16xi8>)
// CHECK:         linalg.generic {{.*}}"reduction"{{.*}} ins(%[[D]]#0
#row = affine_map<(d0, d1) -> (d0)>
func.func @residual_then_norm(%a: tensor<1024x3072xf16>, %b: tensor<3072x768xf16>, %res: tensor<1024x768xf32>) -> tensor<1024x768xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024x768xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<1024x768xf32>) -> tensor<1024x768xf32>
  // expected-remark @+1 {{fused 1 ops after it (linalg.generic)}}
  %p = linalg.matmul ins(%a, %b : tensor<1024x3072xf16>, tensor<3072x768xf16>) outs(%z : tensor<1024x768xf32>) -> tensor<1024x768xf32>
  %x = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %res : tensor<1024x768xf32>, tensor<1024x768xf32>) outs(%e : tensor<1024x768xf32>) {
  ^bb0(%in: f32, %r: f32, %out: f32):
    %s = arith.addf %in, %r : f32
    linalg.yield %s : f32
  } -> tensor<1024x768xf32>
  %er = tensor.empty() : tensor<1024xf32>
  %zr = linalg.fill ins(%c0 : f32) outs(%er : tensor<1024xf32>) -> tensor<1024xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<1024x768xf32>) outs(%zr : tensor<1024xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<1024xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : tensor<1024x768xf32>, tensor<1024xf32>) outs(%e : tensor<1024x768xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %d = arith.subf %in, %s : f32
    linalg.yield %d : f32
  } -> tensor<1024x768xf32>
  return %y : tensor<1024x768xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// Not fused: the product is also returned (the kernel writes one result), a consumer that
// broadcasts the product over a new loop, and a split reduction (its slices are summed after).
// CHECK-LABEL: func.func @product_returned(
// CHECK:         flow.dispatch {{.*}} -> (tensor<1x1024x768xf32>, tensor<16xi8>, tensor<16xi8>)
// CHECK:         linalg.generic
func.func @product_returned(%a: tensor<1024x768xf16>, %b: tensor<768x768xf16>) -> (tensor<1024x768xf32>, tensor<1024x768xf32>) {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024x768xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<1024x768xf32>) -> tensor<1024x768xf32>
  // expected-remark @+1 {{epilogue not fused: the product is not read by an elementwise op}}
  %p = linalg.matmul ins(%a, %b : tensor<1024x768xf16>, tensor<768x768xf16>) outs(%z : tensor<1024x768xf32>) -> tensor<1024x768xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<1024x768xf32>) outs(%e : tensor<1024x768xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = math.exp %in : f32
    linalg.yield %s : f32
  } -> tensor<1024x768xf32>
  return %x, %p : tensor<1024x768xf32>, tensor<1024x768xf32>
}
// CHECK-LABEL: func.func @broadcast_product(
// CHECK:         flow.dispatch {{.*}} -> (tensor<1x1024x768xf32>, tensor<16xi8>, tensor<16xi8>)
// CHECK:         linalg.generic
#b3 = affine_map<(d0, d1, d2) -> (d1, d2)>
#o3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @broadcast_product(%a: tensor<1024x768xf16>, %b: tensor<768x768xf16>) -> tensor<2x1024x768xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024x768xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<1024x768xf32>) -> tensor<1024x768xf32>
  // expected-remark @+1 {{epilogue not fused: the product is broadcast over a new loop}}
  %p = linalg.matmul ins(%a, %b : tensor<1024x768xf16>, tensor<768x768xf16>) outs(%z : tensor<1024x768xf32>) -> tensor<1024x768xf32>
  %e3 = tensor.empty() : tensor<2x1024x768xf32>
  %x = linalg.generic {indexing_maps = [#b3, #o3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<1024x768xf32>) outs(%e3 : tensor<2x1024x768xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x1024x768xf32>
  return %x : tensor<2x1024x768xf32>
}
// CHECK-LABEL: func.func @split_k(
// CHECK:         flow.dispatch {{.*}} -> (tensor<8x512x49xf32>, tensor<16xi8>, tensor<16xi8>)
func.func @split_k(%w: tensor<512x4608xf16>, %col: tensor<4608x49xf16>) -> tensor<512x49xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<512x49xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<512x49xf32>) -> tensor<512x49xf32>
  // expected-remark @+1 {{reduction 4608 split 8 ways}}
  %p = linalg.matmul ins(%w, %col : tensor<512x4608xf16>, tensor<4608x49xf16>) outs(%z : tensor<512x49xf32>) -> tensor<512x49xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<512x49xf32>) outs(%e : tensor<512x49xf32>) {
  ^bb0(%in: f32, %out: f32):
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %in, %zero : f32
    linalg.yield %r : f32
  } -> tensor<512x49xf32>
  return %x : tensor<512x49xf32>
}

// -----

// A ReLU whose result is padded for the next 3x3 convolution stays IREE's (IREE writes it into
// the padded buffer itself; a kernel's result would be copied there): the kernel stops before it.
// CHECK-LABEL: func.func @relu_then_pad(
// CHECK:         %[[D:.+]]:3 = flow.dispatch {{.*}} -> (tensor<1x64x56x56xf32>, tensor<16xi8>, tensor<16xi8>)
// CHECK:         %[[R:.+]] = linalg.generic {{.*}} ins(%[[D]]#0 : tensor<1x64x56x56xf32>)
// CHECK:         tensor.pad %[[R]]
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @relu_then_pad(%w: tensor<64x64xf16>, %x: tensor<64x3136xf16>) -> tensor<1x64x58x58xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x3136xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<64x3136xf32>) -> tensor<64x3136xf32>
  // expected-remark @+1 {{fused 1 ops after it (tensor.expand_shape)}}
  %p = linalg.matmul ins(%w, %x : tensor<64x64xf16>, tensor<64x3136xf16>) outs(%z : tensor<64x3136xf32>) -> tensor<64x3136xf32>
  %p4 = tensor.expand_shape %p [[0, 1], [2, 3]] output_shape [1, 64, 56, 56] : tensor<64x3136xf32> into tensor<1x64x56x56xf32>
  %e4 = tensor.empty() : tensor<1x64x56x56xf32>
  %r = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%p4 : tensor<1x64x56x56xf32>) outs(%e4 : tensor<1x64x56x56xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %c0 : f32
    linalg.yield %m : f32
  } -> tensor<1x64x56x56xf32>
  %padded = tensor.pad %r low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %c0 : f32
  } : tensor<1x64x56x56xf32> to tensor<1x64x58x58xf32>
  return %padded : tensor<1x64x58x58xf32>
}
// CHECK-LABEL: func.func @only_relu_then_pad(
// CHECK:         flow.dispatch {{.*}} -> (tensor<1x64x3136xf32>, tensor<16xi8>, tensor<16xi8>)
func.func @only_relu_then_pad(%w: tensor<64x64xf16>, %x: tensor<64x3136xf16>) -> tensor<64x3138xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x3136xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<64x3136xf32>) -> tensor<64x3136xf32>
  // expected-remark @+1 {{epilogue not fused: the result of the ops after it is padded next}}
  %p = linalg.matmul ins(%w, %x : tensor<64x64xf16>, tensor<64x3136xf16>) outs(%z : tensor<64x3136xf32>) -> tensor<64x3136xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<64x3136xf32>) outs(%e : tensor<64x3136xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %c0 : f32
    linalg.yield %m : f32
  } -> tensor<64x3136xf32>
  %padded = tensor.pad %r low[0, 1] high[0, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %c0 : f32
  } : tensor<64x3136xf32> to tensor<64x3138xf32>
  return %padded : tensor<64x3138xf32>
}
// A residual of dynamic shape: the kernel cannot address it.
// CHECK-LABEL: func.func @dynamic_residual(
// CHECK:         flow.dispatch {{.*}} -> (tensor<1x1024x768xf32>, tensor<16xi8>, tensor<16xi8>)
func.func @dynamic_residual(%a: tensor<1024x768xf16>, %b: tensor<768x768xf16>, %res: tensor<?x768xf32>) -> tensor<1024x768xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024x768xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<1024x768xf32>) -> tensor<1024x768xf32>
  // expected-remark @+1 {{epilogue not fused: linalg.generic with a dynamic shape}}
  %p = linalg.matmul ins(%a, %b : tensor<1024x768xf16>, tensor<768x768xf16>) outs(%z : tensor<1024x768xf32>) -> tensor<1024x768xf32>
  %x = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%p, %res : tensor<1024x768xf32>, tensor<?x768xf32>) outs(%e : tensor<1024x768xf32>) {
  ^bb0(%in: f32, %q: f32, %out: f32):
    %s = arith.addf %in, %q : f32
    linalg.yield %s : f32
  } -> tensor<1024x768xf32>
  return %x : tensor<1024x768xf32>
}
