// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=tpu},inferx-split-reduction)' 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-split-reduction{split=1})' 2>&1 | filecheck %s --check-prefix=SPLIT
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-split-reduction{max-split=1})' 2>&1 | filecheck %s --check-prefix=MAX
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-split-reduction{min-chunk=8})' 2>&1 | filecheck %s --check-prefix=CHUNK
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-split-reduction{split=two})' 2>&1 | filecheck %s --check-prefix=TYPE
// TARGET: error: {{.*}}unknown target 'tpu'
// SPLIT: error: pass 'inferx-split-reduction': split must be 0 (the rule) or >= 2, got 1
// MAX: error: pass 'inferx-split-reduction': max-split must be >= 2, got 1
// CHUNK: error: pass 'inferx-split-reduction': min-chunk must be >= 16, got 8
// TYPE: error: pass 'inferx-split-reduction': option 'split' expects int, got 'two'
func.func @f() {
  return
}
