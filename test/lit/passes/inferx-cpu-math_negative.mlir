// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-cpu-math)' | filecheck %s
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-cpu-math)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK --allow-empty

// Left alone, without a remark: a division by a value that varies (a softmax's sum), by a
// constant zero (x / 0 is inf or NaN, not x * inf), f16 arithmetic, and a quantization's
// round(x / scale) whose reciprocal is inexact (an ulp moves a half-way quotient's integer).
// REMARK-NOT: remark
// CHECK-LABEL: func.func @kept(
// CHECK-COUNT-3: arith.divf
// CHECK:         math.erf
func.func @kept(%x: tensor<4x8xf32>, %s: tensor<4x1xf32>, %h: tensor<4x8xf16>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf16>) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f16
  %e = tensor.empty() : tensor<4x8xf32>
  %eh = tensor.empty() : tensor<4x8xf16>
  %n = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<4x8xf32>, tensor<4x1xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %v = arith.divf %a, %c : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %z = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.divf %a, %zero : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %hh = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<4x8xf16>) outs(%eh : tensor<4x8xf16>) {
  ^bb0(%a: f16, %o: f16):
    %v = arith.divf %a, %two : f16
    %w = math.erf %v : f16
    linalg.yield %w : f16
  } -> tensor<4x8xf16>
  return %n, %z, %hh : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf16>
}

// -----

// CHECK-LABEL: func.func @quantize_keeps_its_division(
// CHECK:         arith.divf
// CHECK-NEXT:    math.roundeven
// CHECK:         arith.divf
// CHECK-NEXT:    arith.fptosi
func.func @quantize_keeps_its_division(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi32>) {
  %scale = arith.constant 0.0452 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %ei = tensor.empty() : tensor<4x8xi32>
  %q = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.divf %a, %scale : f32
    %r = math.roundeven %v : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%ei : tensor<4x8xi32>) {
  ^bb0(%a: f32, %o: i32):
    %v = arith.divf %a, %scale : f32
    %r = arith.fptosi %v : f32 to i32
    linalg.yield %r : i32
  } -> tensor<4x8xi32>
  return %q, %t : tensor<4x8xf32>, tensor<4x8xi32>
}
