// RUN: inferx-opt %s --print-ir-after-all --pass-pipeline='builtin.module(cse,inferx-annotate-precision{precision=f16})' 2>&1 >/dev/null | filecheck %s
// Each pass, ours included, prints the IR after it runs.
// CHECK: IR Dump After {{.*}}CSE
// CHECK: IR Dump After inferx-annotate-precision
// CHECK: inferx.precision = "f16"
func.func @mm(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
