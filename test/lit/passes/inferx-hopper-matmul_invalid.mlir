// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=tpu},inferx-hopper-matmul)' 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-hopper-matmul{tile=32x32})' 2>&1 | filecheck %s --check-prefix=TILE
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-hopper-matmul{split=-1})' 2>&1 | filecheck %s --check-prefix=SPLIT
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-hopper-matmul{stages=3})' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-hopper-matmul{epilogue=maybe})' 2>&1 | filecheck %s --check-prefix=EPILOGUE
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-hopper-matmul{group=2})' 2>&1 | filecheck %s --check-prefix=GROUP
// TARGET: error: {{.*}}unknown target 'tpu'
// TILE: error: pass 'inferx-hopper-matmul': tile must be one of 128x128, 64x128, 128x64, 64x64, 128x256, 256x128, 64x256, 64x32, 64x16, got '32x32'
// SPLIT: error: pass 'inferx-hopper-matmul': split must be 0 (the rule) or >= 1, got -1
// OPTION: error: pass 'inferx-hopper-matmul' has no option 'stages'; valid options: tile, split, epilogue, group, tma, tuning-db
// EPILOGUE: error: pass 'inferx-hopper-matmul': option 'epilogue' expects bool, got 'maybe'
// GROUP: error: pass 'inferx-hopper-matmul': option 'group' expects bool, got '2'
func.func @f() {
  return
}
