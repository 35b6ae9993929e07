// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=cpu},inferx-isolate-casts)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=cpu},inferx-isolate-casts)' --verify-diagnostics
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-isolate-casts)' | filecheck %s --check-prefix=GPU
// RUN: not inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=tpu},inferx-isolate-casts)' 2>&1 | filecheck %s --check-prefix=TARGET

// A layer norm as torch-mlir spells it (the row mean broadcast by tensor.extract inside the
// body), then the bf16 truncation a matmul reads: a barrier goes between the normalization and
// the truncation, which reads the barrier's result. The residual keeps reading the f32 value.
// CHECK-LABEL: func.func @layer_norm_then_bf16(
// CHECK:         %[[Y:[0-9]+]] = linalg.generic {{.+}} : tensor<128x768xf32>, tensor<128x768xf32>, tensor<768xf32>)
// CHECK:         %[[B:.+]] = util.optimization_barrier %[[Y]] : tensor<128x768xf32>
// CHECK:         %[[T:.+]] = linalg.generic {{.+}} ins(%[[B]] : tensor<128x768xf32>) outs(%{{.+}} : tensor<128x768xbf16>)
// CHECK:           arith.truncf
// CHECK:         return %[[T]], %[[Y]]
// GPU-LABEL:   func.func @layer_norm_then_bf16(
// GPU-NOT:       util.optimization_barrier
// TARGET: error: {{.*}}unknown target 'tpu'
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @layer_norm_then_bf16(%x: tensor<128x768xf32>, %gamma: tensor<768xf32>) -> (tensor<128x768xbf16>, tensor<128x768xf32>) {
  %c0 = arith.constant 0.0 : f32
  %n = arith.constant 768.0 : f32
  %e1 = tensor.empty() : tensor<128x1xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<128x1xf32>) -> tensor<128x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<128x768xf32>) outs(%z : tensor<128x1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<128x1xf32>
  %e = tensor.empty() : tensor<128x768xf32>
  %mean = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<128x768xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %c0i = arith.constant 0 : index
    %v = tensor.extract %sum[%i, %c0i] : tensor<128x1xf32>
    %m = arith.divf %v, %n : f32
    linalg.yield %m : f32
  } -> tensor<128x768xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean, %gamma : tensor<128x768xf32>, tensor<128x768xf32>, tensor<768xf32>) outs(%e : tensor<128x768xf32>) {
  ^bb0(%in: f32, %mu: f32, %g: f32, %out: f32):
    %d = arith.subf %in, %mu : f32
    %r = arith.mulf %d, %g : f32
    linalg.yield %r : f32
  } -> tensor<128x768xf32>
  %e16 = tensor.empty() : tensor<128x768xbf16>
  // expected-remark @+1 {{inferx-isolate-casts: truncation to bf16 kept out of the normalization that produces its input}}
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<128x768xf32>) outs(%e16 : tensor<128x768xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %c = arith.truncf %in : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<128x768xbf16>
  return %t, %y : tensor<128x768xbf16>, tensor<128x768xf32>
}
