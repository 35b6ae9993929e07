// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-unbroadcast-matmul)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-unbroadcast-matmul)' --verify-diagnostics

// Attention's q.k^T: both operands vary with the batch; left alone, without a remark.
// CHECK-LABEL: func.func @no_broadcast(
// CHECK:         linalg.batch_matmul
func.func @no_broadcast(%q: tensor<4x16x8xf32>, %k: tensor<4x8x16xf32>, %z: tensor<4x16x16xf32>) -> tensor<4x16x16xf32> {
  %s = linalg.batch_matmul ins(%q, %k : tensor<4x16x8xf32>, tensor<4x8x16xf32>) outs(%z : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  return %s : tensor<4x16x16xf32>
}

// -----

// The broadcast operand on the left (a weight times batched activations): declined.
// CHECK-LABEL: func.func @left_broadcast(
// CHECK:         linalg.broadcast
// CHECK:         linalg.batch_matmul
func.func @left_broadcast(%w: tensor<16x32xf32>, %x: tensor<4x32x8xf32>, %z: tensor<4x16x8xf32>) -> tensor<4x16x8xf32> {
  %e = tensor.empty() : tensor<4x16x32xf32>
  %wb = linalg.broadcast ins(%w : tensor<16x32xf32>) outs(%e : tensor<4x16x32xf32>) dimensions = [0]
  // expected-remark @+1 {{inferx-unbroadcast-matmul: declined: the left-hand operand is broadcast over the batch}}
  %y = linalg.batch_matmul ins(%wb, %x : tensor<4x16x32xf32>, tensor<4x32x8xf32>) outs(%z : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  return %y : tensor<4x16x8xf32>
}

// -----

// A broadcast along another dim than the batch is no shared operand: left alone.
// CHECK-LABEL: func.func @broadcast_other_dim(
// CHECK:         linalg.batch_matmul
#bcast1 = affine_map<(d0, d1, d2) -> (d0, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @broadcast_other_dim(%x: tensor<4x16x32xf32>, %w: tensor<4x8xf32>, %z: tensor<4x16x8xf32>) -> tensor<4x16x8xf32> {
  %e = tensor.empty() : tensor<4x32x8xf32>
  %wb = linalg.generic {indexing_maps = [#bcast1, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%w : tensor<4x8xf32>) outs(%e : tensor<4x32x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4x32x8xf32>
  %y = linalg.batch_matmul ins(%x, %wb : tensor<4x16x32xf32>, tensor<4x32x8xf32>) outs(%z : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  return %y : tensor<4x16x8xf32>
}

// -----

// A batch matmul reading its right operand transposed (explicit indexing maps): declined.
// CHECK-LABEL: func.func @transposed_rhs(
// CHECK:         linalg.batch_matmul
func.func @transposed_rhs(%x: tensor<4x16x32xf32>, %w: tensor<8x32xf32>, %z: tensor<4x16x8xf32>) -> tensor<4x16x8xf32> {
  %e = tensor.empty() : tensor<4x8x32xf32>
  %wb = linalg.broadcast ins(%w : tensor<8x32xf32>) outs(%e : tensor<4x8x32xf32>) dimensions = [0]
  // expected-remark @+1 {{inferx-unbroadcast-matmul: declined: a batch matmul with transposing indexing maps}}
  %y = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>]
       ins(%x, %wb : tensor<4x16x32xf32>, tensor<4x8x32xf32>) outs(%z : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  return %y : tensor<4x16x8xf32>
}
