// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h100},inferx-paged-attention)' --verify-diagnostics | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-paged-attention)' | filecheck %s

// What the pass leaves as it is.

// Calls of other functions are not ours: left as they are.
// CHECK-LABEL: func.func @other_call(
// CHECK:         call @helper
// CHECK-NOT:     flow.dispatch
func.func private @helper(tensor<4xf32>) -> tensor<4xf32>
func.func @other_call(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A module without our declarations (every build that is not a CUDA generation model, or one
// built with the attention written out): unchanged, and no target needed.
// CHECK-LABEL: func.func @no_kernel_calls(
// CHECK:         linalg.generic
// CHECK-NOT:     flow.dispatch
#map = affine_map<(d0) -> (d0)>
func.func @no_kernel_calls(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %y : tensor<4xf32>
}
