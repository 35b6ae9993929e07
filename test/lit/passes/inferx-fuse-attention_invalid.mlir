// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=tpu},inferx-fuse-attention)' 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-fuse-attention{force=maybe})' 2>&1 | filecheck %s --check-prefix=FORCE
// TARGET: error: {{.*}}unknown target 'tpu'
// FORCE: error: pass 'inferx-fuse-attention': option 'force' expects bool, got 'maybe'
func.func @f() {
  return
}
