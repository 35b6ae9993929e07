// RUN: not inferx-opt --context=iree %s --pass-pipeline='builtin.module(inferx-narrow-parameters{types=bf16})' 2>&1 | filecheck %s
// CHECK: error: pass 'inferx-narrow-parameters' has no option 'types'
func.func @f() {
  return
}
