// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-add-output-entry)' --verify-diagnostics

// The name the entry would take is already used by something that is not its entry.
// expected-error @+1 {{cannot add 'main$into': the module already has a symbol of that name}}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func private @main$into(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
