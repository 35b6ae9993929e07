// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-annotate-precision{from-plan=true})' | filecheck %s
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-annotate-precision{from-plan=true},inferx-lower-to-linalg)' | filecheck %s --check-prefix=LOWERED
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-annotate-precision{from-plan=true others=f16})' | filecheck %s --check-prefix=GPU

// The plan names layers (ONNX node names, the ops' name locations): each contraction of a layer
// gets that layer's precision; an f32 entry and a layer the plan does not name stay unannotated.
// CHECK-LABEL: func.func @mlp(
// CHECK:         linalg.matmul {inferx.precision = "i8"}
// CHECK:         linalg.matmul {inferx.precision = "f16"}
// CHECK:         linalg.matmul ins(
// CHECK:         linalg.matmul ins(
// The lowering drops the plan and the float decision; the integer one stays for IREE's level.
// LOWERED-NOT:   inferx.precision_plan
// LOWERED:       linalg.matmul {inferx.precision = "i8"}
// LOWERED-NOT:   inferx.precision = "f16"
// A GPU plan (others=f16): the contraction of no listed layer ("head", standing for attention's
// batch matmuls) gets f16; the listed layers keep the plan's precision, fc2 stays f32.
// GPU:           linalg.matmul {inferx.precision = "i8"}
// GPU:           linalg.matmul {inferx.precision = "f16"}
// GPU:           linalg.matmul ins(
// GPU:           linalg.matmul {inferx.precision = "f16"}
module attributes {inferx.precision_plan = {fc0 = "i8", fc1 = "f16", fc2 = "f32"}} {
  func.func @mlp(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32> loc("fc0")
    %1 = linalg.matmul ins(%0, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32> loc("fc1")
    %2 = linalg.matmul ins(%1, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32> loc("fc2")
    %3 = linalg.matmul ins(%2, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32> loc("head")
    return %3 : tensor<4x8xf32>
  }
}
