// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-bind-parameters)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-bind-parameters{scope=weights})' | filecheck %s --check-prefix=SCOPE
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-bind-parameters)' | filecheck %s --check-prefix=SHARED

// The trailing argument tagged inferx.parameter becomes a named parameter; the
// user-facing @main keeps only the real input and calls the original body.
// CHECK-LABEL: func.func private @_inferx_impl_main(
// CHECK-SAME:    %{{.+}}: tensor<?x4xf32>, %{{.+}}: tensor<4x8xf32>)
// CHECK:       util.global private @[[W:__inferx_param_0]] = #stream.parameter.named<"model"::"fc.weight"> : tensor<4x8xf32>
// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %[[X:.+]]: tensor<?x4xf32>) -> tensor<?x8xf32>
// CHECK:         %[[LOADED:.+]] = util.global.load immutable @[[W]] : tensor<4x8xf32>
// CHECK:         %[[R:.+]] = call @_inferx_impl_main(%[[X]], %[[LOADED]])
// CHECK:         return %[[R]]
// SCOPE:       #stream.parameter.named<"weights"::"fc.weight">
func.func @main(%x: tensor<?x4xf32>, %w: tensor<4x8xf32> {inferx.parameter = "fc.weight"}) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%d) : tensor<?x8xf32>
  %cst = arith.constant 0.0 : f32
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.matmul ins(%x, %w : tensor<?x4xf32>, tensor<4x8xf32>) outs(%z : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

// Two entry functions (a dynamic one and its static-shape copy) naming the same
// parameter key load one global: the weight exists once.
// SHARED-LABEL: func.func private @_inferx_impl_main$b2(
// SHARED:       util.global private @[[W:.+]] = #stream.parameter.named<"model"::"fc.weight"> : tensor<4x8xf32>
// SHARED-NOT:   util.global
// SHARED-LABEL: func.func @main(
// SHARED:       util.global.load immutable @[[W]]
// SHARED-LABEL: func.func @main$b2(
// SHARED:       util.global.load immutable @[[W]]
func.func @main(%x: tensor<?x4xf32>, %w: tensor<4x8xf32> {inferx.parameter = "fc.weight"}) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%d) : tensor<?x8xf32>
  %r = linalg.matmul ins(%x, %w : tensor<?x4xf32>, tensor<4x8xf32>) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
func.func @main$b2(%x: tensor<2x4xf32>, %w: tensor<4x8xf32> {inferx.parameter = "fc.weight"}) -> tensor<2x8xf32> {
  %e = tensor.empty() : tensor<2x8xf32>
  %r = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x8xf32>) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}
