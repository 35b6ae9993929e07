// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-fuse-attention)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-fuse-attention)' --verify-diagnostics
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=cpu},inferx-fuse-attention)' 2>&1 >/dev/null | filecheck %s --check-prefix=CPU

// On CPU targets the chain stays: IREE's CPU attention is slower than the decomposed form and
// breaks its data tiling.
// CPU: remark: inferx-fuse-attention: declined: target 'cpu' (llvm-cpu)
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#row1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
#mask = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
func.func @attention(%q: tensor<4x16x8xf32>, %kt: tensor<4x8x16xf32>, %v: tensor<4x16x8xf32>) -> tensor<4x16x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant -3.40282347E+38 : f32
  %c0 = arith.constant 0 : i64
  %scale = arith.constant dense<0.353553385> : tensor<f32>
  %e0 = tensor.empty() : tensor<4x16x16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<4x16x8xf32>, tensor<4x8x16xf32>) outs(%z0 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [1, 4, 16, 16] : tensor<4x16x16xf32> into tensor<1x4x16x16xf32>
  %e1 = tensor.empty() : tensor<1x4x16x16xf32>
  %x = linalg.generic {indexing_maps = [#id4, #scalar, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %scale : tensor<1x4x16x16xf32>, tensor<f32>) outs(%e1 : tensor<1x4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x4x16x16xf32>
  %em = tensor.empty() : tensor<1x4x16xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%em : tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  %ei = tensor.empty() : tensor<1x4x16xi64>
  %fi = linalg.fill ins(%c0 : i64) outs(%ei : tensor<1x4x16xi64>) -> tensor<1x4x16xi64>
  %mx:2 = linalg.generic {indexing_maps = [#id4, #row, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<1x4x16x16xf32>) outs(%fm, %fi : tensor<1x4x16xf32>, tensor<1x4x16xi64>) {
  ^bb0(%a: f32, %o: f32, %oi: i64):
    %i = linalg.index 3 : index
    %ii = arith.index_cast %i : index to i64
    %mm = arith.maximumf %a, %o : f32
    %gt = arith.cmpf ogt, %a, %o : f32
    %si = arith.select %gt, %ii, %oi : i64
    linalg.yield %mm, %si : f32, i64
  } -> (tensor<1x4x16xf32>, tensor<1x4x16xi64>)
  %mx4 = tensor.expand_shape %mx#0 [[0], [1], [2, 3]] output_shape [1, 4, 16, 1] : tensor<1x4x16xf32> into tensor<1x4x16x1xf32>
  %sub = linalg.generic {indexing_maps = [#id4, #row1, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %mx4 : tensor<1x4x16x16xf32>, tensor<1x4x16x1xf32>) outs(%e1 : tensor<1x4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<1x4x16x16xf32>
  %exp = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<1x4x16x16xf32>) outs(%e1 : tensor<1x4x16x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %ex = math.exp %a : f32
    linalg.yield %ex : f32
  } -> tensor<1x4x16x16xf32>
  %es = tensor.empty() : tensor<1x4x16x1xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<1x4x16x1xf32>) -> tensor<1x4x16x1xf32>
  %sum = linalg.generic {indexing_maps = [#id4, #row1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<1x4x16x16xf32>) outs(%fs : tensor<1x4x16x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %ad = arith.addf %a, %o : f32
    linalg.yield %ad : f32
  } -> tensor<1x4x16x1xf32>
  %p = linalg.generic {indexing_maps = [#id4, #row1, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<1x4x16x16xf32>, tensor<1x4x16x1xf32>) outs(%e1 : tensor<1x4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %dv = arith.divf %a, %b : f32
    linalg.yield %dv : f32
  } -> tensor<1x4x16x16xf32>
  %p3 = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x4x16x16xf32> into tensor<4x16x16xf32>
  %e2 = tensor.empty() : tensor<4x16x8xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %out = linalg.batch_matmul ins(%p3, %v : tensor<4x16x16xf32>, tensor<4x16x8xf32>) outs(%z2 : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  return %out : tensor<4x16x8xf32>
}

// -----

// Not a softmax (sqrt instead of exp): nothing to fuse, nothing said.
// CHECK-LABEL: func.func @softmax_without_exp(
// CHECK-NOT:     iree_linalg_ext.attention
// CHECK:         linalg.batch_matmul
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#row1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
#mask = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
func.func @softmax_without_exp(%q: tensor<4x16x8xf32>, %kt: tensor<4x8x16xf32>, %v: tensor<4x16x8xf32>) -> tensor<4x16x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant -3.40282347E+38 : f32
  %c0 = arith.constant 0 : i64
  %scale = arith.constant dense<0.353553385> : tensor<f32>
  %e0 = tensor.empty() : tensor<4x16x16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<4x16x8xf32>, tensor<4x8x16xf32>) outs(%z0 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [1, 4, 16, 16] : tensor<4x16x16xf32> into tensor<1x4x16x16xf32>
  %e1 = tensor.empty() : tensor<1x4x16x16xf32>
  %x = linalg.generic {indexing_maps = [#id4, #scalar, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %scale : tensor<1x4x16x16xf32>, tensor<f32>) outs(%e1 : tensor<1x4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x4x16x16xf32>
  %em = tensor.empty() : tensor<1x4x16xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%em : tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  %ei = tensor.empty() : tensor<1x4x16xi64>
  %fi = linalg.fill ins(%c0 : i64) outs(%ei : tensor<1x4x16xi64>) -> tensor<1x4x16xi64>
  %mx:2 = linalg.generic {indexing_maps = [#id4, #row, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<1x4x16x16xf32>) outs(%fm, %fi : tensor<1x4x16xf32>, tensor<1x4x16xi64>) {
  ^bb0(%a: f32, %o: f32, %oi: i64):
    %i = linalg.index 3 : index
    %ii = arith.index_cast %i : index to i64
    %mm = arith.maximumf %a, %o : f32
    %gt = arith.cmpf ogt, %a, %o : f32
    %si = arith.select %gt, %ii, %oi : i64
    linalg.yield %mm, %si : f32, i64
  } -> (tensor<1x4x16xf32>, tensor<1x4x16xi64>)
  %mx4 = tensor.expand_shape %mx#0 [[0], [1], [2, 3]] output_shape [1, 4, 16, 1] : tensor<1x4x16xf32> into tensor<1x4x16x1xf32>
  %sub = linalg.generic {indexing_maps = [#id4, #row1, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %mx4 : tensor<1x4x16x16xf32>, tensor<1x4x16x1xf32>) outs(%e1 : tensor<1x4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<1x4x16x16xf32>
  %exp = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<1x4x16x16xf32>) outs(%e1 : tensor<1x4x16x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %ex = math.sqrt %a : f32
    linalg.yield %ex : f32
  } -> tensor<1x4x16x16xf32>
  %es = tensor.empty() : tensor<1x4x16x1xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<1x4x16x1xf32>) -> tensor<1x4x16x1xf32>
  %sum = linalg.generic {indexing_maps = [#id4, #row1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<1x4x16x16xf32>) outs(%fs : tensor<1x4x16x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %ad = arith.addf %a, %o : f32
    linalg.yield %ad : f32
  } -> tensor<1x4x16x1xf32>
  %p = linalg.generic {indexing_maps = [#id4, #row1, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<1x4x16x16xf32>, tensor<1x4x16x1xf32>) outs(%e1 : tensor<1x4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %dv = arith.divf %a, %b : f32
    linalg.yield %dv : f32
  } -> tensor<1x4x16x16xf32>
  %p3 = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x4x16x16xf32> into tensor<4x16x16xf32>
  %e2 = tensor.empty() : tensor<4x16x8xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %out = linalg.batch_matmul ins(%p3, %v : tensor<4x16x16xf32>, tensor<4x16x8xf32>) outs(%z2 : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  return %out : tensor<4x16x8xf32>
}

// -----

// A scale that is not a constant cannot become the op's scale operand.
// CHECK-LABEL: func.func @scale_not_constant(
// CHECK-NOT:     iree_linalg_ext.attention
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#row1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
#mask = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
func.func @scale_not_constant(%q: tensor<4x16x8xf32>, %kt: tensor<4x8x16xf32>, %v: tensor<4x16x8xf32>, %scale: tensor<f32>) -> tensor<4x16x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant -3.40282347E+38 : f32
  %c0 = arith.constant 0 : i64
  %e0 = tensor.empty() : tensor<4x16x16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<4x16x8xf32>, tensor<4x8x16xf32>) outs(%z0 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [1, 4, 16, 16] : tensor<4x16x16xf32> into tensor<1x4x16x16xf32>
  %e1 = tensor.empty() : tensor<1x4x16x16xf32>
  %x = linalg.generic {indexing_maps = [#id4, #scalar, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %scale : tensor<1x4x16x16xf32>, tensor<f32>) outs(%e1 : tensor<1x4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x4x16x16xf32>
  %em = tensor.empty() : tensor<1x4x16xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%em : tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  %ei = tensor.empty() : tensor<1x4x16xi64>
  %fi = linalg.fill ins(%c0 : i64) outs(%ei : tensor<1x4x16xi64>) -> tensor<1x4x16xi64>
  %mx:2 = linalg.generic {indexing_maps = [#id4, #row, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<1x4x16x16xf32>) outs(%fm, %fi : tensor<1x4x16xf32>, tensor<1x4x16xi64>) {
  ^bb0(%a: f32, %o: f32, %oi: i64):
    %i = linalg.index 3 : index
    %ii = arith.index_cast %i : index to i64
    %mm = arith.maximumf %a, %o : f32
    %gt = arith.cmpf ogt, %a, %o : f32
    %si = arith.select %gt, %ii, %oi : i64
    linalg.yield %mm, %si : f32, i64
  } -> (tensor<1x4x16xf32>, tensor<1x4x16xi64>)
  %mx4 = tensor.expand_shape %mx#0 [[0], [1], [2, 3]] output_shape [1, 4, 16, 1] : tensor<1x4x16xf32> into tensor<1x4x16x1xf32>
  %sub = linalg.generic {indexing_maps = [#id4, #row1, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %mx4 : tensor<1x4x16x16xf32>, tensor<1x4x16x1xf32>) outs(%e1 : tensor<1x4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<1x4x16x16xf32>
  %exp = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<1x4x16x16xf32>) outs(%e1 : tensor<1x4x16x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %ex = math.exp %a : f32
    linalg.yield %ex : f32
  } -> tensor<1x4x16x16xf32>
  %es = tensor.empty() : tensor<1x4x16x1xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<1x4x16x1xf32>) -> tensor<1x4x16x1xf32>
  %sum = linalg.generic {indexing_maps = [#id4, #row1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<1x4x16x16xf32>) outs(%fs : tensor<1x4x16x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %ad = arith.addf %a, %o : f32
    linalg.yield %ad : f32
  } -> tensor<1x4x16x1xf32>
  %p = linalg.generic {indexing_maps = [#id4, #row1, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<1x4x16x16xf32>, tensor<1x4x16x1xf32>) outs(%e1 : tensor<1x4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %dv = arith.divf %a, %b : f32
    linalg.yield %dv : f32
  } -> tensor<1x4x16x16xf32>
  %p3 = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x4x16x16xf32> into tensor<4x16x16xf32>
  %e2 = tensor.empty() : tensor<4x16x8xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  // expected-remark @+1 {{inferx-fuse-attention: declined: the scores are scaled by a non-constant}}
  %out = linalg.batch_matmul ins(%p3, %v : tensor<4x16x16xf32>, tensor<4x16x8xf32>) outs(%z2 : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  return %out : tensor<4x16x8xf32>
}
