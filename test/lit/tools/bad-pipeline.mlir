// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-no-such-pass)' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-bind-parameters{nope=1})' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-bind-parameters,inferx-lower-to-linalg)' 2>&1 | filecheck %s --check-prefix=MIXED
// UNKNOWN: error: unknown inferx pass 'inferx-no-such-pass'; registered passes: {{.*}}inferx-bind-parameters
// OPTION: error: pass 'inferx-bind-parameters' has no option 'nope'; valid options: scope
// MIXED: error: one pipeline cannot mix graph-level and iree-level inferx passes
func.func @f() {
  return
}
