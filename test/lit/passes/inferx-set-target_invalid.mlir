// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=tpu})' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{name=h200})' 2>&1 | filecheck %s --check-prefix=OPTION
// A targeted pass on a module without a record says how to give it one (it never probes the host).
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-f32-matmul)' 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-split-reduction)' 2>&1 | filecheck %s --check-prefix=MISSING

// UNKNOWN: error: pass 'inferx-set-target': unknown target 'tpu'; valid targets: cpu, x86-avx2, {{.*}}h200
// OPTION: error: pass 'inferx-set-target' has no option 'name'; valid options: target
// MISSING: error: {{.*}}decides from the target, and the module has no 'inferx.target' attribute: compile with inferx-compile, or put inferx-set-target{target=NAME} first in the pipeline
func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  return %arg0 : tensor<4xf32>
}
