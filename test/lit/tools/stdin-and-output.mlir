// RUN: inferx-opt < %s -o %t.mlir && filecheck %s < %t.mlir
// Reads stdin when no file is given and writes -o.
// CHECK-LABEL: func.func @identity
func.func @identity(%a: f32) -> f32 {
  return %a : f32
}
