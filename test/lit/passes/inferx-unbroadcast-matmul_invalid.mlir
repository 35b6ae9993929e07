// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-unbroadcast-matmul{target=h200})' 2>&1 | filecheck %s
// CHECK: error: pass 'inferx-unbroadcast-matmul' has no option 'target'; valid options: (none)
func.func @f() {
  return
}
