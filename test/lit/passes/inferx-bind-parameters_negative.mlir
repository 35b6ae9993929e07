// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-bind-parameters)' --split-input-file | filecheck %s

// No argument carries inferx.parameter: the function is left exactly as it is.
// CHECK-LABEL: func.func @no_parameters(
// CHECK-NOT:   util.global
// CHECK:         return
func.func @no_parameters(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Private functions are not entry points; their tagged arguments are not bound.
// CHECK-LABEL: func.func private @private_helper(
// CHECK-NOT:   util.global
func.func private @private_helper(%w: tensor<4xf32> {inferx.parameter = "w"}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
