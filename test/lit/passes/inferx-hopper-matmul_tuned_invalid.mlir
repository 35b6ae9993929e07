// REQUIRES: triton
// RUN: not inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul{tuning-db=%S/Inputs/hopper-tuning-db.json})' 2>&1 | filecheck %s

// A configuration the pass cannot spell, on the op or in the database: an error at the op.
// CHECK: error: {{.*}}inferx-hopper-matmul: inferx.hopper_config on the op: hopper configuration '32x32': expected 'iree', BMxBN or BMxBN:S with BMxBN one of 128x128,
func.func @bad_attribute(%a: tensor<1024x768xf16>, %b: tensor<768x3072xf16>, %init: tensor<1024x3072xf32>) -> tensor<1024x3072xf32> {
  %y = linalg.matmul {inferx.hopper_config = "32x32"} ins(%a, %b : tensor<1024x768xf16>, tensor<768x3072xf16>) outs(%init : tensor<1024x3072xf32>) -> tensor<1024x3072xf32>
  return %y : tensor<1024x3072xf32>
}

// -----

// CHECK: error: {{.*}}inferx-hopper-matmul: tuning database {{.*}}hopper-tuning-db.json, entry inferx-hopper-matmul|256x512x1024|bf16|ABT: hopper configuration 'bogus'
func.func @bad_entry(%x: tensor<256x1024xbf16>, %wt: tensor<512x1024xbf16>, %init: tensor<256x512xf32>) -> tensor<256x512xf32> {
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
         ins(%x, %wt : tensor<256x1024xbf16>, tensor<512x1024xbf16>) outs(%init : tensor<256x512xf32>) -> tensor<256x512xf32>
  return %y : tensor<256x512xf32>
}
