// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=cpu},inferx-isolate-casts)' | filecheck %s
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=cpu},inferx-isolate-casts)' --verify-diagnostics
// Left alone: the truncation of an argument, of a matmul's epilogue (a contraction is not a
// normalization), and of a dynamic-shape normalization (a barrier would hide its dims from
// IREE's shape cleanup).
// CHECK-LABEL: func.func @not_after_a_normalization(
// CHECK-NOT:     util.optimization_barrier
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>
func.func @not_after_a_normalization(%x: tensor<64x32xf32>, %w: tensor<32x16xf32>, %d: tensor<?x8xf32>)
    -> (tensor<64x32xf16>, tensor<64x16xf16>, tensor<?x8xf16>) {
  %c0 = arith.constant 0.0 : f32
  %ex = tensor.empty() : tensor<64x32xf16>
  %tx = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<64x32xf32>) outs(%ex : tensor<64x32xf16>) {
  ^bb0(%in: f32, %out: f16):
    %c = arith.truncf %in : f32 to f16
    linalg.yield %c : f16
  } -> tensor<64x32xf16>
  %e = tensor.empty() : tensor<64x16xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<64x16xf32>) -> tensor<64x16xf32>
  %p = linalg.matmul ins(%x, %w : tensor<64x32xf32>, tensor<32x16xf32>) outs(%z : tensor<64x16xf32>) -> tensor<64x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<64x16xf32>) outs(%e : tensor<64x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %c0 : f32
    linalg.yield %m : f32
  } -> tensor<64x16xf32>
  %e16 = tensor.empty() : tensor<64x16xf16>
  %tr = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<64x16xf32>) outs(%e16 : tensor<64x16xf16>) {
  ^bb0(%in: f32, %out: f16):
    %c = arith.truncf %in : f32 to f16
    linalg.yield %c : f16
  } -> tensor<64x16xf16>
  %c0i = arith.constant 0 : index
  %rows = tensor.dim %d, %c0i : tensor<?x8xf32>
  %e1 = tensor.empty(%rows) : tensor<?x1xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%d : tensor<?x8xf32>) outs(%z1 : tensor<?x1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  } -> tensor<?x1xf32>
  %ed = tensor.empty(%rows) : tensor<?x8xf32>
  %nd = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%d, %s : tensor<?x8xf32>, tensor<?x1xf32>) outs(%ed : tensor<?x8xf32>) {
  ^bb0(%in: f32, %sum: f32, %out: f32):
    %q = arith.divf %in, %sum : f32
    linalg.yield %q : f32
  } -> tensor<?x8xf32>
  %ed16 = tensor.empty(%rows) : tensor<?x8xf16>
  %td = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%nd : tensor<?x8xf32>) outs(%ed16 : tensor<?x8xf16>) {
  ^bb0(%in: f32, %out: f16):
    %c = arith.truncf %in : f32 to f16
    linalg.yield %c : f16
  } -> tensor<?x8xf16>
  return %tx, %tr, %td : tensor<64x32xf16>, tensor<64x16xf16>, tensor<?x8xf16>
}
