// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-add-output-entry)' --split-input-file | filecheck %s

// A function with no results gets no storage entry.
// CHECK-LABEL: func.func @no_results(
// CHECK-NOT:   $into
// CHECK:       return
func.func @no_results(%x: tensor<4xf32>) {
  return
}

// -----

// A result that is not a tensor cannot be aliased onto a caller buffer: no entry is added.
// CHECK-LABEL: func.func @scalar_result(
// CHECK-NOT:   $into
// CHECK:       return
func.func @scalar_result(%x: tensor<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %v = tensor.extract %x[%c0] : tensor<4xf32>
  return %v : f32
}

// -----

// Private functions are not entry points.
// CHECK-LABEL: func.func private @helper(
// CHECK-NOT:   $into
// CHECK:       return
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Running the pass twice adds nothing the second time (an existing $into entry is not wrapped).
// CHECK-COUNT-1: func.func @twice$into(
// CHECK-NOT:     func.func @twice$into$into
func.func @twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func @twice$into(%x: tensor<4xf32>, %o: tensor<4xf32> {iree.abi.output = 0 : index}) -> tensor<4xf32> {
  %r = call @twice(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
