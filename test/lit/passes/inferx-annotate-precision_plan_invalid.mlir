// RUN: not inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-annotate-precision{from-plan=true})' 2>&1 | filecheck %s

// A plan for another model: a lowered layer that has no contraction here.
// CHECK: error: inferx-annotate-precision: inferx.precision_plan names layers that have no contraction in this module: fc9
module attributes {inferx.precision_plan = {fc0 = "i8", fc9 = "i4"}} {
  func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32> loc("fc0")
    return %0 : tensor<4x8xf32>
  }
}

// -----

// An unknown precision in the plan.
// CHECK: error: inferx-annotate-precision: inferx.precision_plan: layer 'fc0' has precision "f8"; valid: f32, f16, bf16, i8, i4
module attributes {inferx.precision_plan = {fc0 = "f8"}} {
  func.func @g() {
    return
  }
}

// -----

// from-plan without a plan on the module.
// CHECK: error: inferx-annotate-precision: from-plan=true needs the module attribute inferx.precision_plan
func.func @h() {
  return
}
