// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-quantize-contractions{group-size=32})' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-quantize-contractions{group-size=32})' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// int8: the f32 weight argument is replaced by an int8 weight and one scale per output column
// (derived parameter keys); each activation row gets its range (max and min, 0 included), a step
// and a zero point, and is rounded to i8; the matmul sums s8 x s8 into i32; the result is
// corrected by zero point x weight column sums, rescaled and added to the original init.
// REMARK: remark: inferx-quantize-contractions: int8: 64x32 weight 'fc.w' stored as int8, int8 activations, s32 sums
// CHECK-LABEL: func.func @int8_projection(
// CHECK-SAME:    %[[X:.+]]: tensor<?x64xf32>, %[[WQ:.+]]: tensor<64x32xi8> {inferx.parameter = "fc.w#q:int8"}, %[[S:.+]]: tensor<32xf32> {inferx.parameter = "fc.w#q:int8:scale"})
// CHECK-NOT:     tensor<64x32xf32>
// CHECK:         %[[HI:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<?x64xf32>) outs({{.*}} : tensor<?xf32>)
// CHECK:           arith.maximumf
// CHECK:         %[[LO:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<?x64xf32>) outs({{.*}} : tensor<?xf32>)
// CHECK:           arith.minimumf
// CHECK:         %[[STEP:.+]] = linalg.generic {{.*}} ins(%[[HI]], %[[LO]] : tensor<?xf32>, tensor<?xf32>)
// CHECK:           arith.subf
// CHECK:         %[[ZP:.+]] = linalg.generic {{.*}} ins(%[[LO]], %[[STEP]] : tensor<?xf32>, tensor<?xf32>)
// CHECK:           arith.negf
// CHECK:           math.copysign
// CHECK:           arith.select
// CHECK:         %[[COLSUM:.+]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[WQ]] : tensor<64x32xi8>) outs({{.*}} : tensor<32xi32>)
// CHECK:         %[[XQ:.+]] = linalg.generic {{.*}} ins(%[[X]], %[[STEP]], %[[ZP]] : tensor<?x64xf32>, tensor<?xf32>, tensor<?xf32>) outs({{.*}} : tensor<?x64xi8>)
// CHECK-NOT:       math.roundeven
// CHECK:           math.copysign
// CHECK:           arith.select
// CHECK:           arith.constant -1.280000e+02 : f32
// CHECK:           arith.trunci {{.*}} : i32 to i8
// CHECK:         %[[ACC:.+]] = linalg.matmul ins(%[[XQ]], %[[WQ]] : tensor<?x64xi8>, tensor<64x32xi8>) outs({{.*}} : tensor<?x32xi32>)
// CHECK:         %[[Y:.+]] = linalg.generic {{.*}} ins(%[[ACC]], %[[COLSUM]], %[[STEP]], %[[ZP]], %[[S]] : tensor<?x32xi32>, tensor<32xi32>, tensor<?xf32>, tensor<?xf32>, tensor<32xf32>)
// CHECK:           arith.sitofp
// CHECK:           arith.subf
// CHECK:           arith.addf
// CHECK:         return %[[Y]]
// CHECK-NOT:     inferx.precision
func.func @int8_projection(%x: tensor<?x64xf32>, %w: tensor<64x32xf32> {inferx.parameter = "fc.w"}) -> tensor<?x32xf32> {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%m) : tensor<?x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x32xf32>) -> tensor<?x32xf32>
  %y = linalg.matmul {inferx.precision = "i8"} ins(%x, %w : tensor<?x64xf32>, tensor<64x32xf32>) outs(%z : tensor<?x32xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// int4 through a transposed weight (ONNX Gemm transB=1): the stored int4 weight is [K/G, G, N]
// of W^T with one scale per group and column; it is requantized to int8 per column (the column
// scale from the largest group scale), collapsed to [K, N], and the int8 form follows. The
// transpose and the f32 argument are gone.
// REMARK: remark: inferx-quantize-contractions: int4: 128x16 weight 'gemm.w' stored as int4g32t, int8 activations, s32 sums
// CHECK-LABEL: func.func @int4_transposed(
// CHECK-SAME:    %[[X:.+]]: tensor<4x128xf32>, %[[WQ:.+]]: tensor<4x32x16xi4> {inferx.parameter = "gemm.w#q:int4g32t"}, %[[S4:.+]]: tensor<4x16xf32> {inferx.parameter = "gemm.w#q:int4g32t:scale"})
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[TOP:.+]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[S4]] : tensor<4x16xf32>) outs({{.*}} : tensor<16xf32>)
// CHECK:         %[[S8:.+]] = linalg.generic {{.*}} ins(%[[TOP]] : tensor<16xf32>)
// CHECK:         %[[W8G:.+]] = linalg.generic {{.*}} ins(%[[WQ]], %[[S4]], %[[S8]] : tensor<4x32x16xi4>, tensor<4x16xf32>, tensor<16xf32>) outs({{.*}} : tensor<4x32x16xi8>)
// CHECK:           arith.extsi {{.*}} : i4 to i32
// CHECK:           math.roundeven
// CHECK:         %[[W8:.+]] = tensor.collapse_shape %[[W8G]] {{\[}}[0, 1], [2]] : tensor<4x32x16xi8> into tensor<128x16xi8>
// CHECK:         linalg.matmul ins(%{{.*}}, %[[W8]] : tensor<4x128xi8>, tensor<128x16xi8>) outs({{.*}} : tensor<4x16xi32>)
// CHECK:         linalg.generic {{.*}} ins({{.*}}, %[[S8]] : tensor<4x16xi32>, tensor<16xi32>, tensor<4xf32>, tensor<4xf32>, tensor<16xf32>) outs({{.*}} : tensor<4x16xf32>)
func.func @int4_transposed(%x: tensor<4x128xf32>, %w: tensor<16x128xf32> {inferx.parameter = "gemm.w"}) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<128x16xf32>
  %wt = linalg.transpose ins(%w : tensor<16x128xf32>) outs(%et : tensor<128x16xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.matmul {inferx.precision = "i4"} ins(%x, %wt : tensor<4x128xf32>, tensor<128x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
