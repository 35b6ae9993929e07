// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-add-output-entry)' | filecheck %s
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-bind-parameters,inferx-add-output-entry)' | filecheck %s --check-prefix=BOUND
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-add-output-entry{transients=true})' | filecheck %s --check-prefix=TRANS

// @main is kept as it is; @main$into takes the same inputs (with their attributes) and one
// storage argument per result, tagged with the result's index, and calls @main.
// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %{{.+}}: tensor<?x4xf32>, %{{.+}}: tensor<4x8xf32> {inferx.parameter = "fc.weight"}) -> (tensor<?x8xf32>, tensor<?xf32>)
// CHECK-LABEL: func.func @main$into(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<?x4xf32>,
// CHECK-SAME:    %[[W:[a-z0-9]+]]: tensor<4x8xf32> {inferx.parameter = "fc.weight"},
// CHECK-SAME:    %{{.+}}: tensor<?x8xf32> {iree.abi.output = 0 : index},
// CHECK-SAME:    %{{.+}}: tensor<?xf32> {iree.abi.output = 1 : index}) -> (tensor<?x8xf32>, tensor<?xf32>)
// CHECK:         %[[R:.+]]:2 = call @main(%[[X]], %[[W]])
// CHECK:         return %[[R]]#0, %[[R]]#1

// After inferx-bind-parameters the weight is no longer an argument of either entry point.
// BOUND-LABEL: func.func @main(
// BOUND-SAME:    %{{.+}}: tensor<?x4xf32>) ->
// BOUND-LABEL: func.func @main$into(
// BOUND-SAME:    %[[X:[a-z0-9]+]]: tensor<?x4xf32>, %{{.+}}: tensor<?x8xf32> {iree.abi.output = 0 : index}, %{{.+}}: tensor<?xf32> {iree.abi.output = 1 : index})
// BOUND:         call @main(%[[X]])
// BOUND-NOT:     func.func @_inferx_impl_main$into

// transients=true: the entry of a static-shape function takes a last argument holding the
// call's transient storage, and every result is produced in it (hal.tensor.transients); a
// function with dynamic dims keeps the plain entry (IREE 3.13 fails on some of those).
// TRANS-LABEL: func.func @main$into(
// TRANS-SAME:    %{{.+}}: tensor<?xf32> {iree.abi.output = 1 : index}) -> (tensor<?x8xf32>, tensor<?xf32>)
// TRANS-NOT:     hal.tensor.transients
// TRANS-LABEL: func.func @fixed$into(
// TRANS-SAME:    %{{.+}}: tensor<8xf32> {iree.abi.output = 1 : index},
// TRANS-SAME:    %[[S:[a-z0-9]+]]: !hal.buffer {inferx.transients}) -> (tensor<2x8xf32>, tensor<8xf32>)
// TRANS:         %[[R:.+]]:2 = call @fixed(
// TRANS:         %[[T0:.+]] = hal.tensor.transients %[[R]]#0 : tensor<2x8xf32> from %[[S]] : !hal.buffer
// TRANS:         %[[T1:.+]] = hal.tensor.transients %[[R]]#1 : tensor<8xf32> from %[[S]] : !hal.buffer
// TRANS:         return %[[T0]], %[[T1]]
func.func @main(%x: tensor<?x4xf32>, %w: tensor<4x8xf32> {inferx.parameter = "fc.weight"}) -> (tensor<?x8xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%d) : tensor<?x8xf32>
  %cst = arith.constant 0.0 : f32
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.matmul ins(%x, %w : tensor<?x4xf32>, tensor<4x8xf32>) outs(%z : tensor<?x8xf32>) -> tensor<?x8xf32>
  %e1 = tensor.empty(%d) : tensor<?xf32>
  %s = linalg.fill ins(%cst : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  return %r, %s : tensor<?x8xf32>, tensor<?xf32>
}

func.func @fixed(%x: tensor<2x4xf32>, %w: tensor<4x8xf32> {inferx.parameter = "fc.weight"}) -> (tensor<2x8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<2x8xf32>
  %cst = arith.constant 0.0 : f32
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x8xf32>) outs(%z : tensor<2x8xf32>) -> tensor<2x8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %s = linalg.fill ins(%cst : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  return %r, %s : tensor<2x8xf32>, tensor<8xf32>
}
