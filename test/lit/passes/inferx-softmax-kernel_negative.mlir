// REQUIRES: c-compiler
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-softmax-kernel)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-softmax-kernel)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-softmax-kernel)' 2>&1 | filecheck %s --check-prefix=NOAVX512

#x = affine_map<(d0, d1) -> (d0, d1)>
#row1 = affine_map<(d0, d1) -> (d0, 0)>

// Softmax-shaped chains the kernel declines, each with its reason: a dynamic shape, f16
// values, exp(x - b) read by something else (returned too); then e / sum(e) where e is not an
// exp of a row-shifted x (a sum-normalization, not a softmax: no remark, nothing rewritten).
// REMARK:      remark: inferx-softmax-kernel: softmax left to IREE: dynamic shape
// REMARK-NEXT: remark: inferx-softmax-kernel: softmax left to IREE: element type f16 (the kernel takes f32)
// REMARK-NEXT: remark: inferx-softmax-kernel: softmax left to IREE: exp(x - max) has other users (the kernel writes only the result)
// REMARK-NOT:  remark
// NOAVX512-NOT: remark
// NOAVX512-NOT: flow.dispatch
// CHECK-LABEL: func.func @declined(
// CHECK-NOT:     flow.dispatch
// CHECK-COUNT-3: math.exp
// CHECK-NOT:     flow.dispatch
// CHECK:         return
func.func @declined(%xd: tensor<?x16xf32>, %xh: tensor<4x16xf16>, %x: tensor<4x16xf32>, %b: tensor<4x1xf32>)
    -> (tensor<?x16xf32>, tensor<4x16xf16>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %xd, %c0 : tensor<?x16xf32>
  %bd = tensor.empty(%n) : tensor<?x1xf32>
  %yd = func.call @softmax_dyn(%xd, %bd) : (tensor<?x16xf32>, tensor<?x1xf32>) -> tensor<?x16xf32>
  %yh = func.call @softmax_f16(%xh) : (tensor<4x16xf16>) -> tensor<4x16xf16>
  %y:2 = func.call @softmax_shared(%x, %b) : (tensor<4x16xf32>, tensor<4x1xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %yn = func.call @normalize(%x) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return %yd, %yh, %y#0, %y#1, %yn : tensor<?x16xf32>, tensor<4x16xf16>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

func.func private @softmax_dyn(%x: tensor<?x16xf32>, %b: tensor<?x1xf32>) -> tensor<?x16xf32> {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x16xf32>
  %e0 = tensor.empty(%n) : tensor<?x16xf32>
  %sub = linalg.generic {indexing_maps = [#x, #row1, #x], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<?x16xf32>, tensor<?x1xf32>) outs(%e0 : tensor<?x16xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %d = arith.subf %a, %c : f32
    linalg.yield %d : f32
  } -> tensor<?x16xf32>
  %exp = linalg.generic {indexing_maps = [#x, #x], iterator_types = ["parallel", "parallel"]}
      ins(%sub : tensor<?x16xf32>) outs(%e0 : tensor<?x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.exp %a : f32
    linalg.yield %v : f32
  } -> tensor<?x16xf32>
  %es = tensor.empty(%n) : tensor<?x1xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum = linalg.generic {indexing_maps = [#x, #row1], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<?x16xf32>) outs(%fs : tensor<?x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<?x1xf32>
  %y = linalg.generic {indexing_maps = [#x, #row1, #x], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<?x16xf32>, tensor<?x1xf32>) outs(%e0 : tensor<?x16xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %v = arith.divf %a, %c : f32
    linalg.yield %v : f32
  } -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

func.func private @softmax_f16(%x: tensor<4x16xf16>) -> tensor<4x16xf16> {
  %zero = arith.constant 0.0 : f16
  %e0 = tensor.empty() : tensor<4x16xf16>
  %exp0 = linalg.generic {indexing_maps = [#x, #x], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x16xf16>) outs(%e0 : tensor<4x16xf16>) {
  ^bb0(%a: f16, %o: f16):
    linalg.yield %a : f16
  } -> tensor<4x16xf16>
  %b0 = tensor.empty() : tensor<4x1xf16>
  %bz = linalg.fill ins(%zero : f16) outs(%b0 : tensor<4x1xf16>) -> tensor<4x1xf16>
  %sub = linalg.generic {indexing_maps = [#x, #row1, #x], iterator_types = ["parallel", "parallel"]}
      ins(%exp0, %bz : tensor<4x16xf16>, tensor<4x1xf16>) outs(%e0 : tensor<4x16xf16>) {
  ^bb0(%a: f16, %c: f16, %o: f16):
    %d = arith.subf %a, %c : f16
    linalg.yield %d : f16
  } -> tensor<4x16xf16>
  %exp = linalg.generic {indexing_maps = [#x, #x], iterator_types = ["parallel", "parallel"]}
      ins(%sub : tensor<4x16xf16>) outs(%e0 : tensor<4x16xf16>) {
  ^bb0(%a: f16, %o: f16):
    %v = math.exp %a : f16
    linalg.yield %v : f16
  } -> tensor<4x16xf16>
  %es = tensor.empty() : tensor<4x1xf16>
  %fs = linalg.fill ins(%zero : f16) outs(%es : tensor<4x1xf16>) -> tensor<4x1xf16>
  %sum = linalg.generic {indexing_maps = [#x, #row1], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<4x16xf16>) outs(%fs : tensor<4x1xf16>) {
  ^bb0(%a: f16, %o: f16):
    %v = arith.addf %a, %o : f16
    linalg.yield %v : f16
  } -> tensor<4x1xf16>
  %y = linalg.generic {indexing_maps = [#x, #row1, #x], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<4x16xf16>, tensor<4x1xf16>) outs(%e0 : tensor<4x16xf16>) {
  ^bb0(%a: f16, %c: f16, %o: f16):
    %v = arith.divf %a, %c : f16
    linalg.yield %v : f16
  } -> tensor<4x16xf16>
  return %y : tensor<4x16xf16>
}

func.func private @softmax_shared(%x: tensor<4x16xf32>, %b: tensor<4x1xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x16xf32>
  %sub = linalg.generic {indexing_maps = [#x, #row1, #x], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<4x16xf32>, tensor<4x1xf32>) outs(%e0 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %d = arith.subf %a, %c : f32
    linalg.yield %d : f32
  } -> tensor<4x16xf32>
  %exp = linalg.generic {indexing_maps = [#x, #x], iterator_types = ["parallel", "parallel"]}
      ins(%sub : tensor<4x16xf32>) outs(%e0 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.exp %a : f32
    linalg.yield %v : f32
  } -> tensor<4x16xf32>
  %es = tensor.empty() : tensor<4x1xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<4x1xf32>) -> tensor<4x1xf32>
  %sum = linalg.generic {indexing_maps = [#x, #row1], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<4x16xf32>) outs(%fs : tensor<4x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<4x1xf32>
  %y = linalg.generic {indexing_maps = [#x, #row1, #x], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<4x16xf32>, tensor<4x1xf32>) outs(%e0 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %v = arith.divf %a, %c : f32
    linalg.yield %v : f32
  } -> tensor<4x16xf32>
  return %y, %exp : tensor<4x16xf32>, tensor<4x16xf32>
}

func.func private @normalize(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x16xf32>
  %es = tensor.empty() : tensor<4x1xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<4x1xf32>) -> tensor<4x1xf32>
  %sum = linalg.generic {indexing_maps = [#x, #row1], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x16xf32>) outs(%fs : tensor<4x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<4x1xf32>
  %y = linalg.generic {indexing_maps = [#x, #row1, #x], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : tensor<4x16xf32>, tensor<4x1xf32>) outs(%e0 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %v = arith.divf %a, %c : f32
    linalg.yield %v : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
