// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul)' --verify-diagnostics
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul{group=false})' | filecheck %s --check-prefix=APART

// Query, key and value projections of one input (BERT-base's): three
// matmuls reading the same A, each with its own bias and f16 cast, the keys stored transposed.
// They become one kernel: A is bound once, then each member's weight and bias; one result each.
// Together they are 128x2304, 72 tiles of 64x64 (each alone: 24, so 96 narrower ones of 64x16).
// CHECK-LABEL: hal.executable.source private @inferx_matmul_128x2304x768_
// CHECK:           %[[X:.+]] = arith.constant 72 : index
// CHECK-LABEL: func.func @qkv(
// CHECK-SAME:    %[[A:.+]]: tensor<128x768xf16>, %[[WQ:.+]]: tensor<768x768xf16>, %[[WK:.+]]: tensor<768x768xf16>, %[[WV:.+]]: tensor<768x768xf16>, %[[BQ:.+]]: tensor<768xf32>, %[[BK:.+]]: tensor<768xf32>, %[[BV:.+]]: tensor<768xf32>
// CHECK-NOT:     linalg.matmul
// CHECK:         %[[D:.+]]:5 = flow.dispatch @inferx_matmul_128x2304x768_{{[0-9a-f]+}}::@inferx_matmul(%[[A]], %[[WQ]], %[[BQ]], %[[WK]], %[[BK]], %[[WV]], %[[BV]])
// CHECK-SAME:      -> (tensor<128x768xf16>, tensor<768x128xf16>, tensor<128x768xf16>, tensor<16xi8>, tensor<16xi8>)
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[D]]#0, %[[D]]#1, %[[D]]#2
// APART-LABEL: func.func @qkv(
// APART-COUNT-3: flow.dispatch
// APART-NOT:     flow.dispatch
// APART:         return
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @qkv(%a: tensor<128x768xf16>, %wq: tensor<768x768xf16>, %wk: tensor<768x768xf16>, %wv: tensor<768x768xf16>,
               %bq: tensor<768xf32>, %bk: tensor<768xf32>, %bv: tensor<768xf32>) -> (tensor<128x768xf16>, tensor<768x128xf16>, tensor<128x768xf16>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x768xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<128x768xf32>) -> tensor<128x768xf32>
  %e16 = tensor.empty() : tensor<128x768xf16>
  %e16t = tensor.empty() : tensor<768x128xf16>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 128x768x768 f16, tile 64x64, one kernel with 2 other matmul(s) reading the same A: 72 tiles of 64x64 for 132 SMs; fused 1 ops after it (linalg.generic)}}
  %q = linalg.matmul ins(%a, %wq : tensor<128x768xf16>, tensor<768x768xf16>) outs(%f : tensor<128x768xf32>) -> tensor<128x768xf32>
  %q16 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%q, %bq : tensor<128x768xf32>, tensor<768xf32>) outs(%e16 : tensor<128x768xf16>) {
  ^bb0(%in: f32, %b: f32, %out: f16):
    %s = arith.addf %in, %b : f32
    %t = arith.truncf %s : f32 to f16
    linalg.yield %t : f16
  } -> tensor<128x768xf16>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 128x768x768 f16, tile 64x64, one kernel with 2 other matmul(s) reading the same A: 72 tiles of 64x64 for 132 SMs; fused 1 ops after it (linalg.generic)}}
  %k = linalg.matmul ins(%a, %wk : tensor<128x768xf16>, tensor<768x768xf16>) outs(%f : tensor<128x768xf32>) -> tensor<128x768xf32>
  %k16 = linalg.generic {indexing_maps = [#tr, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%k, %bk : tensor<128x768xf32>, tensor<768xf32>) outs(%e16t : tensor<768x128xf16>) {
  ^bb0(%in: f32, %b: f32, %out: f16):
    %s = arith.addf %in, %b : f32
    %t = arith.truncf %s : f32 to f16
    linalg.yield %t : f16
  } -> tensor<768x128xf16>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 128x768x768 f16, tile 64x64, one kernel with 2 other matmul(s) reading the same A: 72 tiles of 64x64 for 132 SMs; fused 1 ops after it (linalg.generic)}}
  %v = linalg.matmul ins(%a, %wv : tensor<128x768xf16>, tensor<768x768xf16>) outs(%f : tensor<128x768xf32>) -> tensor<128x768xf32>
  %v16 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%v, %bv : tensor<128x768xf32>, tensor<768xf32>) outs(%e16 : tensor<128x768xf16>) {
  ^bb0(%in: f32, %b: f32, %out: f16):
    %s = arith.addf %in, %b : f32
    %t = arith.truncf %s : f32 to f16
    linalg.yield %t : f16
  } -> tensor<128x768xf16>
  return %q16, %k16, %v16 : tensor<128x768xf16>, tensor<768x128xf16>, tensor<128x768xf16>
}

// -----

// Without epilogues (the products returned as they are) the members store their f32 products.
// A different width (%c) is not a sibling; alone, its 256x64 output is too small for the kernel
// (16 tiles of 64x16) and stays IREE's.
// CHECK-LABEL: func.func @plain(
// CHECK:         %[[D:.+]]:4 = flow.dispatch @inferx_matmul_256x256x128_{{[0-9a-f]+}}::@inferx_matmul(%arg0, %arg1, %arg2) : {{.*}} -> (tensor<1x256x128xf32>, tensor<1x256x128xf32>, tensor<16xi8>, tensor<16xi8>)
// CHECK-DAG:     tensor.collapse_shape %[[D]]#0
// CHECK-DAG:     tensor.collapse_shape %[[D]]#1
// CHECK:         linalg.matmul ins(%arg0, %arg3
func.func @plain(%a: tensor<256x128xf16>, %b0: tensor<128x128xf16>, %b1: tensor<128x128xf16>, %b2: tensor<128x64xf16>)
    -> (tensor<256x128xf32>, tensor<256x128xf32>, tensor<256x64xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x128xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<256x128xf32>) -> tensor<256x128xf32>
  %e2 = tensor.empty() : tensor<256x64xf32>
  %f2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<256x64xf32>) -> tensor<256x64xf32>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 256x128x128 f16, tile 64x16, one kernel with 1 other matmul(s) reading the same A: 64 tiles of 64x16 for 132 SMs (16 of 64x64); epilogue not fused: the product is not read by an elementwise op}}
  %x = linalg.matmul ins(%a, %b0 : tensor<256x128xf16>, tensor<128x128xf16>) outs(%f : tensor<256x128xf32>) -> tensor<256x128xf32>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 256x128x128 f16, tile 64x16, one kernel with 1 other matmul(s) reading the same A: 64 tiles of 64x16 for 132 SMs (16 of 64x64); epilogue not fused: the product is not read by an elementwise op}}
  %y = linalg.matmul ins(%a, %b1 : tensor<256x128xf16>, tensor<128x128xf16>) outs(%f : tensor<256x128xf32>) -> tensor<256x128xf32>
  // expected-remark @+1 {{inferx-hopper-matmul: declined: 256x64 output: 16 tiles of 64x16 for 132 SMs and a short reduction; IREE's split-K kernel is faster there}}
  %c = linalg.matmul ins(%a, %b2 : tensor<256x128xf16>, tensor<128x64xf16>) outs(%f2 : tensor<256x64xf32>) -> tensor<256x64xf32>
  return %x, %y, %c : tensor<256x128xf32>, tensor<256x128xf32>, tensor<256x64xf32>
}

// -----

// Not grouped: the second matmul's weight is computed from the first one's result (one kernel
// cannot both produce and consume it), so each keeps its own kernel and says why.
// CHECK-LABEL: func.func @chained(
// CHECK-COUNT-2: flow.dispatch
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @chained(%a: tensor<640x640xf16>, %b: tensor<640x640xf16>) -> tensor<640x640xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<640x640xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<640x640xf32>) -> tensor<640x640xf32>
  %e16 = tensor.empty() : tensor<640x640xf16>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 640x640x640 f16, tile 64x64 (4 warps, 4 stages): 100 tiles of 64x64 for 132 SMs; fused 1 ops after it (linalg.generic); not grouped with its siblings: one of them reads another's result (through linalg.generic)}}
  %p = linalg.matmul ins(%a, %b : tensor<640x640xf16>, tensor<640x640xf16>) outs(%f : tensor<640x640xf32>) -> tensor<640x640xf32>
  %p16 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<640x640xf32>) outs(%e16 : tensor<640x640xf16>) {
  ^bb0(%in: f32, %out: f16):
    %t = arith.truncf %in : f32 to f16
    linalg.yield %t : f16
  } -> tensor<640x640xf16>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 640x640x640 f16, tile 64x64 (4 warps, 4 stages): 100 tiles of 64x64 for 132 SMs; epilogue not fused: the product is not read by an elementwise op; not grouped with its siblings: one of them reads another's result (through linalg.generic)}}
  %y = linalg.matmul ins(%a, %p16 : tensor<640x640xf16>, tensor<640x640xf16>) outs(%f : tensor<640x640xf32>) -> tensor<640x640xf32>
  return %y : tensor<640x640xf32>
}

// -----

// Not grouped: together the two long reductions would be split (16 tiles of 64x64 for 132 SMs),
// and a split product cannot be written per member; each is split on its own.
// CHECK-LABEL: func.func @long_reduction(
// CHECK-COUNT-2: flow.dispatch {{.*}} -> (tensor<16x128x128xf32>
func.func @long_reduction(%a: tensor<128x4096xf16>, %b0: tensor<4096x128xf16>, %b1: tensor<4096x128xf16>)
    -> (tensor<128x128xf32>, tensor<128x128xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x128xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<128x128xf32>) -> tensor<128x128xf32>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 128x128x4096 f16, tile 64x64 (4 warps, 4 stages): 4 tiles of 64x64 for 132 SMs, reduction 4096 split 16 ways; not grouped with its siblings: together their reduction would be split (8 tiles of 64x64 for 132 SMs, reduction 4096 split 16 ways)}}
  %x = linalg.matmul ins(%a, %b0 : tensor<128x4096xf16>, tensor<4096x128xf16>) outs(%f : tensor<128x128xf32>) -> tensor<128x128xf32>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 128x128x4096 f16, tile 64x64 (4 warps, 4 stages): 4 tiles of 64x64 for 132 SMs, reduction 4096 split 16 ways; not grouped with its siblings: together their reduction would be split (8 tiles of 64x64 for 132 SMs, reduction 4096 split 16 ways)}}
  %y = linalg.matmul ins(%a, %b1 : tensor<128x4096xf16>, tensor<4096x128xf16>) outs(%f : tensor<128x128xf32>) -> tensor<128x128xf32>
  return %x, %y : tensor<128x128xf32>, tensor<128x128xf32>
}
