// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-cpu-math)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-cpu-math)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-cpu-math)' 2>&1 | filecheck %s --check-prefix=CUDA

#id = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>

// An erf GELU as the ONNX importer leaves it: the division by the constant sqrt 2 (a rank-0
// tensor input) becomes a multiplication by its reciprocal, and erf a division-free piecewise
// polynomial (|x| clamped to 4, x P(x^2) below 1.5, Q(|x|) above, the sign of x): no divf, no
// math.erf left.
// REMARK-DAG: remark: inferx-cpu-math: erf as a division-free polynomial
// REMARK-DAG: remark: inferx-cpu-math: division by 1.41421354 as a multiplication by its reciprocal
// A CUDA target keeps both (its own code divides and approximates erf fast).
// CUDA-NOT:   remark
// CUDA-LABEL: func.func @gelu(
// CUDA:         arith.divf
// CUDA:         math.erf
// CHECK-LABEL: func.func @gelu(
// CHECK:         linalg.generic
// CHECK:           %[[R:.+]] = arith.constant 0.707106{{[0-9]+}} : f32
// CHECK:           arith.mulf %{{.+}}, %[[R]] : f32
// CHECK:         linalg.generic
// CHECK:           %[[A:.+]] = math.absf %[[X:.+]] : f32
// CHECK:           arith.minimumf %[[A]], %{{.+}} : f32
// CHECK-COUNT-8:   arith.mulf {{.*}} fastmath<contract> : f32
// CHECK:           arith.cmpf olt
// CHECK:           arith.select
// CHECK:           math.copysign %{{.+}}, %[[X]] : f32
// CHECK-NOT:     math.erf
// CHECK-NOT:     arith.divf
// CHECK:         return
func.func @gelu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s2 = arith.constant dense<1.41421354> : tensor<f32>
  %e = tensor.empty() : tensor<4x8xf32>
  %d = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s2 : tensor<4x8xf32>, tensor<f32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %v = arith.divf %a, %c : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%d : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.erf %a : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A division by a constant captured from outside the body.
// REMARK: remark: inferx-cpu-math: division by 8 as a multiplication by its reciprocal
// CHECK-LABEL: func.func @captured(
// CHECK:         arith.mulf %{{.+}}, %{{.+}} : f32
// CHECK-NOT:     arith.divf
func.func @captured(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = arith.constant 8.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %d = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.divf %a, %c : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// Rounded right after, a division by a power of two still becomes a product: its reciprocal
// is exact, so the product is the quotient.
// REMARK: remark: inferx-cpu-math: division by 0.25 as a multiplication by its reciprocal
// CHECK-LABEL: func.func @power_of_two_before_rounding(
// CHECK:         arith.mulf
// CHECK-NEXT:    math.roundeven
func.func @power_of_two_before_rounding(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %d = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.divf %a, %c : f32
    %r = math.roundeven %v : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}
