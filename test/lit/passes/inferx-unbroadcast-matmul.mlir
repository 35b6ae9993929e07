// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-unbroadcast-matmul)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-unbroadcast-matmul)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A projection at fp16 as the ONNX importer and the precision passes leave it: the weight
// broadcast over the batch, truncated, then a batch matmul. It becomes one matmul over the
// 8*64 rows against the truncated 2-D weight; the broadcast and its copy are gone.
// REMARK: remark: inferx-unbroadcast-matmul: one matmul over 512 rows against the unbroadcast 256x128 operand
// CHECK-LABEL: func.func @projection_f16(
// CHECK-SAME:    %[[X:.+]]: tensor<8x64x256xf16>, %[[W:.+]]: tensor<256x128xf32>)
// CHECK:         %[[WH:.+]] = linalg.generic {{.*}} ins(%[[W]] : tensor<256x128xf32>) outs({{.*}} : tensor<256x128xf16>)
// CHECK:           arith.truncf
// CHECK:         %[[X2:.+]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<8x64x256xf16> into tensor<512x256xf16>
// CHECK:         %[[ACC:.+]] = tensor.collapse_shape {{.*}} : tensor<8x64x128xf32> into tensor<512x128xf32>
// CHECK:         %[[MM:.+]] = linalg.matmul ins(%[[X2]], %[[WH]] : tensor<512x256xf16>, tensor<256x128xf16>) outs(%[[ACC]] : tensor<512x128xf32>)
// CHECK:         %[[Y:.+]] = tensor.expand_shape %[[MM]] {{\[}}[0, 1], [2]] output_shape [8, 64, 128] : tensor<512x128xf32> into tensor<8x64x128xf32>
// CHECK:         return %[[Y]]
// CHECK-NOT:     linalg.batch_matmul
// CHECK-NOT:     tensor<8x256x128x
#bcast = affine_map<(d0, d1, d2) -> (d1, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @projection_f16(%x: tensor<8x64x256xf16>, %w: tensor<256x128xf32>) -> tensor<8x64x128xf32> {
  %zero = arith.constant 0.0 : f32
  %eb = tensor.empty() : tensor<8x256x128xf32>
  %wb = linalg.generic {indexing_maps = [#bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%w : tensor<256x128xf32>) outs(%eb : tensor<8x256x128xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<8x256x128xf32>
  %eh = tensor.empty() : tensor<8x256x128xf16>
  %wh = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%wb : tensor<8x256x128xf32>) outs(%eh : tensor<8x256x128xf16>) {
  ^bb0(%in: f32, %out: f16):
    %t = arith.truncf %in : f32 to f16
    linalg.yield %t : f16
  } -> tensor<8x256x128xf16>
  %e = tensor.empty() : tensor<8x64x128xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x64x128xf32>) -> tensor<8x64x128xf32>
  %y = linalg.batch_matmul ins(%x, %wh : tensor<8x64x256xf16>, tensor<8x256x128xf16>) outs(%z : tensor<8x64x128xf32>) -> tensor<8x64x128xf32>
  return %y : tensor<8x64x128xf32>
}

// -----

// A dynamic batch and a `linalg.broadcast` (no cast): the rows are B*64, read back with tensor.dim.
// REMARK: remark: inferx-unbroadcast-matmul: one matmul over B*M rows against the unbroadcast 32x16 operand
// CHECK-LABEL: func.func @dynamic_batch(
// CHECK-SAME:    %[[X:.+]]: tensor<?x64x32xf32>, %[[W:.+]]: tensor<32x16xf32>, %[[Z:.+]]: tensor<?x64x16xf32>)
// CHECK:         %[[X2:.+]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<?x64x32xf32> into tensor<?x32xf32>
// CHECK:         %[[Z2:.+]] = tensor.collapse_shape %[[Z]] {{\[}}[0, 1], [2]] : tensor<?x64x16xf32> into tensor<?x16xf32>
// CHECK:         %[[MM:.+]] = linalg.matmul ins(%[[X2]], %[[W]] : tensor<?x32xf32>, tensor<32x16xf32>) outs(%[[Z2]] : tensor<?x16xf32>)
// CHECK:         %[[B:.+]] = tensor.dim %[[Z]], %{{.+}} : tensor<?x64x16xf32>
// CHECK:         tensor.expand_shape %[[MM]] {{\[}}[0, 1], [2]] output_shape [%[[B]], 64, 16] : tensor<?x16xf32> into tensor<?x64x16xf32>
// CHECK-NOT:     linalg.broadcast
func.func @dynamic_batch(%x: tensor<?x64x32xf32>, %w: tensor<32x16xf32>, %z: tensor<?x64x16xf32>) -> tensor<?x64x16xf32> {
  %c0 = arith.constant 0 : index
  %b = tensor.dim %x, %c0 : tensor<?x64x32xf32>
  %e = tensor.empty(%b) : tensor<?x32x16xf32>
  %wb = linalg.broadcast ins(%w : tensor<32x16xf32>) outs(%e : tensor<?x32x16xf32>) dimensions = [0]
  %y = linalg.batch_matmul ins(%x, %wb : tensor<?x64x32xf32>, tensor<?x32x16xf32>) outs(%z : tensor<?x64x16xf32>) -> tensor<?x64x16xf32>
  return %y : tensor<?x64x16xf32>
}
