// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2})' | filecheck %s

// inferx-set-target writes the module's record and nothing else: functions, ops and their
// attributes are left as they were (a pass that decides from the target is what changes them).
// CHECK-LABEL: func.func @matmul_untouched
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>, %[[W:.+]]: tensor<8x16xf32> {inferx.parameter = "w"})
// CHECK: %[[E:.+]] = tensor.empty() : tensor<4x16xf32>
// CHECK: linalg.matmul ins(%[[X]], %[[W]] : tensor<4x8xf32>, tensor<8x16xf32>) outs(%[[E]] : tensor<4x16xf32>)
// CHECK-NOT: inferx.target
func.func @matmul_untouched(%x: tensor<4x8xf32>, %w: tensor<8x16xf32> {inferx.parameter = "w"}) -> tensor<4x16xf32> {
  %e = tensor.empty() : tensor<4x16xf32>
  %r = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
