// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-apply-precision)' --verify-diagnostics

// An unknown precision cannot be applied, and guessing would hide a producer's bug.
func.func @matmul_annotated_f8(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{inferx-apply-precision: inferx.precision must be one of "f32" | "f16" | "bf16" | "i8" | "i4", got "f8"}}
  %0 = linalg.matmul {inferx.precision = "f8"} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// The annotation is a string, not a type.
func.func @matmul_annotated_type(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{inferx-apply-precision: inferx.precision must be one of "f32" | "f16" | "bf16" | "i8" | "i4", got f16}}
  %0 = linalg.matmul {inferx.precision = f16} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
