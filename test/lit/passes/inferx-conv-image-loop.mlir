// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-conv-image-loop{chunk=1})' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-conv-image-loop)' | filecheck %s --check-prefix=CHUNK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-conv-image-loop)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-conv-image-loop)' | filecheck %s --check-prefix=GPU

// A padded 3x3 convolution over a dynamic batch with the bias broadcast into its init (as
// torch-mlir imports an ONNX Conv): a loop over the images, each image sliced, padded on its
// own, convolved into a zero fill of one image, the bias slice added, the sum inserted.
// REMARK: remark: inferx-conv-image-loop: looped over the batch's images: static 4-image convolutions while whole chunks remain, then 1-image ones
// CHECK-LABEL: func.func @padded_with_bias(
// CHECK-SAME:    %[[X:.*]]: tensor<?x16x24x24xf32>
// CHECK:         %[[N:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x16x24x24xf32>
// CHECK:         tensor.pad
// CHECK:         %[[N2:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x16x24x24xf32>
// CHECK-NEXT:    %[[EMPTY:.*]] = tensor.empty(%[[N2]]) : tensor<?x32x24x24xf32>
// CHECK:         %[[LOOP:.*]] = scf.for %[[I:.*]] = %{{.*}} to %[[N2]] step %{{.*}} iter_args(%[[ACC:.*]] = %[[EMPTY]])
// CHECK:           %[[IMAGE:.*]] = tensor.extract_slice %[[X]][%[[I]], 0, 0, 0] [1, 16, 24, 24] [1, 1, 1, 1]
// CHECK:           %[[PADDED:.*]] = tensor.pad %[[IMAGE]] low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:           } : tensor<1x16x24x24xf32> to tensor<1x16x26x26xf32>
// CHECK:           %[[ZEROS:.*]] = linalg.fill {{.*}} -> tensor<1x32x24x24xf32>
// CHECK:           %[[CONV:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%[[PADDED]], %{{.*}} : tensor<1x16x26x26xf32>, tensor<32x16x3x3xf32>) outs(%[[ZEROS]] : tensor<1x32x24x24xf32>)
// CHECK:           %[[BIAS:.*]] = tensor.extract_slice %[[INIT:.*]][%[[I]], 0, 0, 0] [1, 32, 24, 24]
// CHECK:           %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[CONV]], %[[BIAS]] :
// CHECK:             arith.addf
// CHECK:           %[[PLACED:.*]] = tensor.insert_slice %[[SUM]] into %[[ACC]][%[[I]], 0, 0, 0] [1, 32, 24, 24] [1, 1, 1, 1]
// CHECK:           scf.yield %[[PLACED]]
// CHECK:         return %[[LOOP]]
// With chunks of 4 (the default): a loop over whole chunks (static 4-image convolutions), then
// one over the remaining images, its lower bound where the first stopped.
// CHUNK-LABEL: func.func @padded_with_bias(
// CHUNK:         tensor.pad
// CHUNK:         %[[N:.*]] = tensor.dim
// CHUNK-NEXT:    %[[EMPTY:.*]] = tensor.empty(%[[N]]) : tensor<?x32x24x24xf32>
// CHUNK-NEXT:    %[[FOUR:.*]] = arith.constant 4 : index
// CHUNK-NEXT:    %[[CHUNKS:.*]] = arith.divui %[[N]], %[[FOUR]]
// CHUNK-NEXT:    %[[WHOLE:.*]] = arith.muli %[[CHUNKS]], %[[FOUR]]
// CHUNK:         %[[FIRST:.*]] = scf.for %{{.*}} = %{{.*}} to %[[WHOLE]] step %{{.*}} iter_args(%{{.*}} = %[[EMPTY]])
// CHUNK:           } : tensor<4x16x24x24xf32> to tensor<4x16x26x26xf32>
// CHUNK:           linalg.conv_2d_nchw_fchw {{.*}} -> tensor<4x32x24x24xf32>
// CHUNK:           tensor.insert_slice {{.*}} [4, 32, 24, 24] [1, 1, 1, 1]
// CHUNK:         %[[REST:.*]] = scf.for %{{.*}} = %[[WHOLE]] to %[[N]] step %{{.*}} iter_args(%{{.*}} = %[[FIRST]])
// CHUNK:           linalg.conv_2d_nchw_fchw {{.*}} -> tensor<1x32x24x24xf32>
// CHUNK:         return %[[REST]]
// GPU-LABEL: func.func @padded_with_bias(
// GPU-NOT:       scf.for
#bcast = affine_map<(d0, d1, d2, d3) -> (d1)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @padded_with_bias(%x: tensor<?x16x24x24xf32>, %w: tensor<32x16x3x3xf32>, %b: tensor<32xf32>) -> tensor<?x32x24x24xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x16x24x24xf32>
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %zero : f32
  } : tensor<?x16x24x24xf32> to tensor<?x16x26x26xf32>
  %e = tensor.empty(%n) : tensor<?x32x24x24xf32>
  %init = linalg.generic {indexing_maps = [#bcast, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%b : tensor<32xf32>) outs(%e : tensor<?x32x24x24xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<?x32x24x24xf32>
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%p, %w : tensor<?x16x26x26xf32>, tensor<32x16x3x3xf32>) outs(%init : tensor<?x32x24x24xf32>) -> tensor<?x32x24x24xf32>
  return %r : tensor<?x32x24x24xf32>
}

// -----

// Stride 2, no padding, a zero init: no bias added, the strides and dilations kept.
// CHECK-LABEL: func.func @strided_zero_init(
// CHECK:         scf.for
// CHECK:           tensor.extract_slice %{{.*}} [1, 8, 16, 16] [1, 1, 1, 1] : tensor<?x8x16x16xf32> to tensor<1x8x16x16xf32>
// CHECK-NOT:       tensor.pad
// CHECK:           linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} {{.*}} -> tensor<1x8x8x8xf32>
// CHECK-NOT:       arith.addf
// CHECK:           tensor.insert_slice
func.func @strided_zero_init(%x: tensor<?x8x16x16xf32>, %w: tensor<8x8x1x1xf32>) -> tensor<?x8x8x8xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x8x16x16xf32>
  %e = tensor.empty(%n) : tensor<?x8x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x8x8x8xf32>) -> tensor<?x8x8x8xf32>
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x, %w : tensor<?x8x16x16xf32>, tensor<8x8x1x1xf32>) outs(%f : tensor<?x8x8x8xf32>) -> tensor<?x8x8x8xf32>
  return %r : tensor<?x8x8x8xf32>
}
