// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul{tuning-db=%S/Inputs/hopper-tuning-db.json})' --verify-diagnostics
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul{tuning-db=%S/Inputs/hopper-tuning-db.json})' | filecheck %s
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul{tuning-db=%S/Inputs/no-such-db.json})' 2>&1 | filecheck %s --check-prefix=MISSING
// MISSING: --tuning-db {{.*}}no-such-db.json: no such file

// Measured configurations (tuning-db=, written by `inferx-compile --tune`) override the tile
// rule for their signature (shape, element type, operand layouts) on their target only.

// BERT b8's FFN up projection: the rule's 128x256 (see inferx-hopper-matmul.mlir) loses to
// 128x128 in the database.
// CHECK-LABEL: hal.executable.source private @inferx_matmul_1024x3072x768_
// CHECK:         inferx.config = {{{.*}}config = "tile 128x128x64, 8 warps, 3 stages, split 1"{{.*}}source = "tuned (inferx-hopper-matmul)"
// CHECK-LABEL: func.func @tuned_tile(
// CHECK:         flow.dispatch @inferx_matmul_1024x3072x768_
func.func @tuned_tile(%a: tensor<1024x768xf16>, %b: tensor<768x3072xf16>) -> tensor<1024x3072xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024x3072xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1024x3072xf32>) -> tensor<1024x3072xf32>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 1024x3072x768 f16, tile 128x128 (8 warps, 3 stages): tuned: 128x128 (12.1 us, the rule's 128x256 13.3 us)}}
  %y = linalg.matmul ins(%a, %b : tensor<1024x768xf16>, tensor<768x3072xf16>) outs(%f : tensor<1024x3072xf32>) -> tensor<1024x3072xf32>
  return %y : tensor<1024x3072xf32>
}

// -----

// The database says IREE's own code is fastest: the matmul stays.
// CHECK-LABEL: func.func @tuned_iree(
// CHECK:         linalg.matmul
func.func @tuned_iree(%a: tensor<512x1024xf16>, %b: tensor<1024x49xf16>, %init: tensor<512x49xf32>) -> tensor<512x49xf32> {
  // expected-remark @+1 {{inferx-hopper-matmul: declined: tuned: IREE's own code is fastest (6.9 us, the rule's iree 6.9 us)}}
  %y = linalg.matmul ins(%a, %b : tensor<512x1024xf16>, tensor<1024x49xf16>) outs(%init : tensor<512x49xf32>) -> tensor<512x49xf32>
  return %y : tensor<512x49xf32>
}

// -----

// Not in the database for this target (only for the h100): the rule decides.
// CHECK-LABEL: func.func @untuned(
// CHECK:         flow.dispatch @inferx_matmul_1024x768x768_
func.func @untuned(%a: tensor<1024x768xf16>, %b: tensor<768x768xf16>, %init: tensor<1024x768xf32>) -> tensor<1024x768xf32> {
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 1024x768x768 f16, tile 128x64 (4 warps, 4 stages): 96 tiles of 128x64 for 132 SMs}}
  %y = linalg.matmul ins(%a, %b : tensor<1024x768xf16>, tensor<768x768xf16>) outs(%init : tensor<1024x768xf32>) -> tensor<1024x768xf32>
  return %y : tensor<1024x768xf32>
}

// -----

// A tuning build's candidate (inferx.hopper_config on the op) comes before the database.
// CHECK-LABEL: func.func @candidate(
// CHECK:         flow.dispatch @inferx_matmul_1024x3072x768_
func.func @candidate(%a: tensor<1024x768xf16>, %b: tensor<768x3072xf16>, %init: tensor<1024x3072xf32>) -> tensor<1024x3072xf32> {
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 1024x3072x768 f16, tile 64x32 (4 warps, 4 stages): forced by inferx.hopper_config = "64x32"}}
  %y = linalg.matmul {inferx.hopper_config = "64x32"} ins(%a, %b : tensor<1024x768xf16>, tensor<768x3072xf16>) outs(%init : tensor<1024x3072xf32>) -> tensor<1024x3072xf32>
  return %y : tensor<1024x3072xf32>
}

// -----

// GPT-2 b1's q, k, v: the group is looked up as one 128x2304 matmul, whose entry picks 64x64.
// CHECK-LABEL: func.func @tuned_group(
// CHECK-COUNT-1: flow.dispatch @inferx_matmul_128x2304x768_
// CHECK-NOT:     linalg.matmul
func.func @tuned_group(%x: tensor<128x768xf16>, %wq: tensor<768x768xf16>, %wk: tensor<768x768xf16>, %wv: tensor<768x768xf16>)
    -> (tensor<128x768xf32>, tensor<128x768xf32>, tensor<128x768xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x768xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<128x768xf32>) -> tensor<128x768xf32>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 128x768x768 f16, tile 64x64, one kernel with 2 other matmul(s) reading the same A: tuned: 64x64 (5.2 us, the rule's 64x128 6.0 us)}}
  %q = linalg.matmul ins(%x, %wq : tensor<128x768xf16>, tensor<768x768xf16>) outs(%f : tensor<128x768xf32>) -> tensor<128x768xf32>
  // expected-remark @+1 {{tuned: 64x64}}
  %k = linalg.matmul ins(%x, %wk : tensor<128x768xf16>, tensor<768x768xf16>) outs(%f : tensor<128x768xf32>) -> tensor<128x768xf32>
  // expected-remark @+1 {{tuned: 64x64}}
  %v = linalg.matmul ins(%x, %wv : tensor<128x768xf16>, tensor<768x768xf16>) outs(%f : tensor<128x768xf32>) -> tensor<128x768xf32>
  return %q, %k, %v : tensor<128x768xf32>, tensor<128x768xf32>, tensor<128x768xf32>
}
