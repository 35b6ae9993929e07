// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-dispatch-report)' --split-input-file | filecheck %s

// A dispatch with no linalg op (a plain copy): nothing to describe, no attribute.
// CHECK-LABEL: hal.executable private @no_linalg
// CHECK-NOT:   inferx.dispatch
hal.executable private @no_linalg {
  hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {
      func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
        return %x : tensor<4xf32>
      }
    }
  }
}

// -----

// linalg ops outside any hal.executable (graph-level IR) are not dispatches.
// CHECK-LABEL: func.func @not_in_executable
// CHECK-NOT:   inferx.dispatch
func.func @not_in_executable(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %c: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
