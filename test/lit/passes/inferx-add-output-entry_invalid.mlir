// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-add-output-entry)' --verify-diagnostics
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-add-output-entry{transients=maybe})' 2>&1 | filecheck %s --check-prefix=OPTION
// OPTION: error: {{.*}}inferx-add-output-entry{{.*}}transients

// The name the entry would take is already used by something that is not its entry.
// expected-error @+1 {{cannot add 'main$into': the module already has a symbol of that name}}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func private @main$into(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
