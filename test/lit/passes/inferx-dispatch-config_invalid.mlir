// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-dispatch-config{candidate=-1})' 2>&1 | filecheck %s --check-prefix=NEG
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=tpu},inferx-dispatch-config)' 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-dispatch-config{tuning-db=%t.missing.json})' 2>&1 | filecheck %s --check-prefix=DB
// RUN: echo '{"format": "something-else"}' > %t.bad.json
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-dispatch-config{tuning-db=%t.bad.json})' 2>&1 | filecheck %s --check-prefix=BAD
// NEG: error: pass 'inferx-dispatch-config': candidate must be >= 0, got -1
// TARGET: error: {{.*}}unknown target 'tpu'
// DB: --tuning-db {{.*}}.missing.json: no such file (write one with --tune)
// BAD: not an inferx tuning database of version 1 (format='something-else'
func.func @f() {
  return
}
