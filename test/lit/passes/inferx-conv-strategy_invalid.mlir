// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=tpu},inferx-conv-strategy)' 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-conv-strategy{algorithms=fft})' 2>&1 | filecheck %s --check-prefix=ALGO
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-conv-strategy{winograd-min-channels=0})' 2>&1 | filecheck %s --check-prefix=MIN
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-conv-strategy{kernel=maybe})' 2>&1 | filecheck %s --check-prefix=KERNEL
// TARGET: error: {{.*}}unknown target 'tpu'; valid targets: cpu, {{.*}}a100
// ALGO: error: pass 'inferx-conv-strategy': unknown algorithm(s) fft; valid: auto, or a comma-separated subset of matmul,kernel,nchwc,winograd,im2col,s2d
// KERNEL: error: pass 'inferx-conv-strategy': option 'kernel' expects bool, got 'maybe'
// MIN: error: pass 'inferx-conv-strategy': winograd-min-channels must be >= 1, got 0
func.func @f() {
  return
}
