// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-bind-parameters)' --verify-diagnostics

// A parameter must have a static shape: its size is fixed in the archive.
// expected-error @+1 {{parameter 'w' must be a statically shaped tensor}}
func.func @dynamic_parameter(%w: tensor<?xf32> {inferx.parameter = "w"}) -> tensor<?xf32> {
  return %w : tensor<?xf32>
}
