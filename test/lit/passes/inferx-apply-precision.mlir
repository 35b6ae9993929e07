// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-apply-precision)' | filecheck %s
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-annotate-precision{precision=bf16},inferx-apply-precision)' | filecheck %s --check-prefix=PIPE

// A named matmul reads truncated inputs and still accumulates into f32; the named op
// body extends each input to the output type.
// CHECK-LABEL: func.func @matmul_f32_to_f16(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<4x8xf32>, %[[B:[^:]+]]: tensor<8x16xf32>, %[[C:[^:]+]]: tensor<4x16xf32>)
// CHECK:         %[[EA:.+]] = tensor.empty() : tensor<4x8xf16>
// CHECK:         %[[A16:.+]] = linalg.generic {{.+}} ins(%[[A]] : tensor<4x8xf32>) outs(%[[EA]] : tensor<4x8xf16>)
// CHECK:           arith.truncf %{{.+}} : f32 to f16
// CHECK:         %[[EB:.+]] = tensor.empty() : tensor<8x16xf16>
// CHECK:         %[[B16:.+]] = linalg.generic {{.+}} ins(%[[B]] : tensor<8x16xf32>) outs(%[[EB]] : tensor<8x16xf16>)
// CHECK:         %[[R:.+]] = linalg.matmul ins(%[[A16]], %[[B16]] : tensor<4x8xf16>, tensor<8x16xf16>) outs(%[[C]] : tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK:         return %[[R]]
// With annotate-precision{precision=bf16} first, the existing "f16" decision stands.
// PIPE-LABEL:  func.func @matmul_f32_to_f16(
// PIPE:          linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<4x8xf16>, tensor<8x16xf16>) outs(%{{.+}} : tensor<4x16xf32>)
func.func @matmul_f32_to_f16(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.matmul {inferx.precision = "f16"} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// Convolutions keep their attributes (strides, dilations); the annotation is gone.
// CHECK-LABEL: func.func @conv_2d_nchw_f32_to_bf16(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<1x3x9x9xf32>, %[[W:[^:]+]]: tensor<5x3x3x3xf32>, %[[O:[^:]+]]: tensor<1x5x4x4xf32>)
// CHECK:         %[[X16:.+]] = linalg.generic {{.+}} ins(%[[X]] : tensor<1x3x9x9xf32>) outs(%{{.+}} : tensor<1x3x9x9xbf16>)
// CHECK:           arith.truncf %{{.+}} : f32 to bf16
// CHECK:         %[[W16:.+]] = linalg.generic {{.+}} ins(%[[W]] : tensor<5x3x3x3xf32>) outs(%{{.+}} : tensor<5x3x3x3xbf16>)
// CHECK:         %[[R:.+]] = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%[[X16]], %[[W16]] : tensor<1x3x9x9xbf16>, tensor<5x3x3x3xbf16>) outs(%[[O]] : tensor<1x5x4x4xf32>)
// CHECK-NOT:     inferx.precision
// CHECK:         return %[[R]]
func.func @conv_2d_nchw_f32_to_bf16(%x: tensor<1x3x9x9xf32>, %w: tensor<5x3x3x3xf32>, %o: tensor<1x5x4x4xf32>) -> tensor<1x5x4x4xf32> {
  %0 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>, inferx.precision = "bf16"} ins(%x, %w : tensor<1x3x9x9xf32>, tensor<5x3x3x3xf32>) outs(%o : tensor<1x5x4x4xf32>) -> tensor<1x5x4x4xf32>
  return %0 : tensor<1x5x4x4xf32>
}

// A generic contraction gets f16 block arguments, each extended back to f32 for the
// unchanged f32 body.
// CHECK-LABEL: func.func @generic_matmul_f32_to_f16(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<4x8xf32>, %[[B:[^:]+]]: tensor<16x8xf32>, %[[C:[^:]+]]: tensor<4x16xf32>)
// CHECK:         %[[A16:.+]] = linalg.generic {{.+}} ins(%[[A]] : tensor<4x8xf32>) outs(%{{.+}} : tensor<4x8xf16>)
// CHECK:         %[[B16:.+]] = linalg.generic {{.+}} ins(%[[B]] : tensor<16x8xf32>) outs(%{{.+}} : tensor<16x8xf16>)
// CHECK:         %[[R:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[A16]], %[[B16]] : tensor<4x8xf16>, tensor<16x8xf16>) outs(%[[C]] : tensor<4x16xf32>) {
// CHECK-NEXT:    ^bb0(%[[X:.+]]: f16, %[[Y:.+]]: f16, %[[ACC:.+]]: f32):
// CHECK-NEXT:      %[[XF:.+]] = arith.extf %[[X]] : f16 to f32
// CHECK-NEXT:      %[[YF:.+]] = arith.extf %[[Y]] : f16 to f32
// CHECK-NEXT:      %[[M:.+]] = arith.mulf %[[XF]], %[[YF]] : f32
// CHECK-NEXT:      %[[S:.+]] = arith.addf %[[ACC]], %[[M]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK-NEXT:    } -> tensor<4x16xf32>
// CHECK:         return %[[R]]
func.func @generic_matmul_f32_to_f16(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<4x8xf32>, tensor<16x8xf32>) outs(%c : tensor<4x16xf32>) attrs = {inferx.precision = "f16"} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// Dynamic sizes are carried to the truncation's tensor.empty with tensor.dim.
// CHECK-LABEL: func.func @batch_matmul_dynamic_f32_to_f16(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<?x4x8xf32>
// CHECK:         %[[C0:.+]] = arith.constant 0 : index
// CHECK:         %[[D0:.+]] = tensor.dim %[[A]], %[[C0]] : tensor<?x4x8xf32>
// CHECK:         %[[E:.+]] = tensor.empty(%[[D0]]) : tensor<?x4x8xf16>
// CHECK:         %[[A16:.+]] = linalg.generic {{.+}} ins(%[[A]] : tensor<?x4x8xf32>) outs(%[[E]] : tensor<?x4x8xf16>)
// CHECK:         linalg.batch_matmul ins(%[[A16]], %{{.+}} : tensor<?x4x8xf16>, tensor<?x8x16xf16>) outs(%{{.+}} : tensor<?x4x16xf32>)
func.func @batch_matmul_dynamic_f32_to_f16(%a: tensor<?x4x8xf32>, %b: tensor<?x8x16xf32>, %c: tensor<?x4x16xf32>) -> tensor<?x4x16xf32> {
  %0 = linalg.batch_matmul {inferx.precision = "f16"} ins(%a, %b : tensor<?x4x8xf32>, tensor<?x8x16xf32>) outs(%c : tensor<?x4x16xf32>) -> tensor<?x4x16xf32>
  return %0 : tensor<?x4x16xf32>
}

// Without an annotation apply-precision changes nothing; annotate-precision then
// apply-precision gives bf16 inputs with f32 accumulation.
// CHECK-LABEL: func.func @generic_matmul_unannotated(
// CHECK-NOT:     arith.truncf
// CHECK:         ^bb0(%{{.+}}: f32, %{{.+}}: f32, %{{.+}}: f32):
// PIPE-LABEL:  func.func @generic_matmul_unannotated(
// PIPE-SAME:     %[[A:[^:]+]]: tensor<4x8xf32>, %[[B:[^:]+]]: tensor<8x16xf32>
// PIPE:          %[[A16:.+]] = linalg.generic {{.+}} ins(%[[A]] : tensor<4x8xf32>) outs(%{{.+}} : tensor<4x8xbf16>)
// PIPE:          %[[B16:.+]] = linalg.generic {{.+}} ins(%[[B]] : tensor<8x16xf32>) outs(%{{.+}} : tensor<8x16xbf16>)
// PIPE:          linalg.generic {{.+}} ins(%[[A16]], %[[B16]] : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%{{.+}} : tensor<4x16xf32>)
// PIPE-NEXT:     ^bb0(%{{.+}}: bf16, %{{.+}}: bf16, %{{.+}}: f32):
// PIPE-NOT:      inferx.precision
func.func @generic_matmul_unannotated(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// Two contractions reading the same f32 input (an attention's query and key projections) read
// one truncated copy of it, so later passes see that they share it; an f16 and a bf16 reader
// get a copy each.
// CHECK-LABEL: func.func @shared_input(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>
// CHECK:         %[[X16:.+]] = linalg.generic {{.+}} ins(%[[X]] : tensor<4x8xf32>) outs(%{{.+}} : tensor<4x8xf16>)
// CHECK-NOT:     ins(%[[X]] : tensor<4x8xf32>) outs(%{{.+}} : tensor<4x8xf16>)
// CHECK:         linalg.matmul ins(%[[X16]], %{{.+}} : tensor<4x8xf16>, tensor<8x16xf16>)
// CHECK-NOT:     ins(%[[X]] : tensor<4x8xf32>) outs(%{{.+}} : tensor<4x8xf16>)
// CHECK:         linalg.matmul ins(%[[X16]], %{{.+}} : tensor<4x8xf16>, tensor<8x16xf16>)
// CHECK:         %[[XB:.+]] = linalg.generic {{.+}} ins(%[[X]] : tensor<4x8xf32>) outs(%{{.+}} : tensor<4x8xbf16>)
// CHECK:         linalg.matmul ins(%[[XB]], %{{.+}} : tensor<4x8xbf16>, tensor<8x16xbf16>)
func.func @shared_input(%x: tensor<4x8xf32>, %wq: tensor<8x16xf32>, %wk: tensor<8x16xf32>, %c: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %q = linalg.matmul {inferx.precision = "f16"} ins(%x, %wq : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  %k = linalg.matmul {inferx.precision = "f16"} ins(%x, %wk : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  %b = linalg.matmul {inferx.precision = "bf16"} ins(%x, %wk : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %q, %k, %b : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}
