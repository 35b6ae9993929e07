// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-split-reduction)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-split-reduction)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=cpu},inferx-split-reduction{split=2})' | filecheck %s --check-prefix=FORCED

// BERT's FFN down projection at batch 1, fp16: a 128x768 output is 24 tiles for the H200's 132
// SMs, so the 3072-long reduction is split 16 ways: the operands only reshaped, a batched
// contraction into 16 f32 partial sums, then their sum added into the matmul's init.
// REMARK: remark: inferx-split-reduction: split: 128x768 output is 24 tiles for 132 SMs: reduction 3072 split 16 ways
// CHECK-DAG:   #[[A:.+]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
// CHECK-DAG:   #[[B:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
// CHECK-DAG:   #[[P:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG:   #[[S:.+]] = affine_map<(d0, d1, d2) -> (d2, d0, d1)>
// CHECK-DAG:   #[[Y:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @ffn_down(
// CHECK-SAME:    %[[X:.+]]: tensor<128x3072xf16>, %[[W:.+]]: tensor<3072x768xf16>, %[[INIT:.+]]: tensor<128x768xf32>)
// CHECK:         %[[X3:.+]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2]] output_shape [128, 16, 192]
// CHECK:         %[[W3:.+]] = tensor.expand_shape %[[W]] {{\[}}[0, 1], [2]] output_shape [16, 192, 768]
// CHECK:         %[[Z:.+]] = linalg.fill {{.*}} -> tensor<16x128x768xf32>
// CHECK:         %[[PART:.+]] = linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[P]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[X3]], %[[W3]] : tensor<128x16x192xf16>, tensor<16x192x768xf16>) outs(%[[Z]] : tensor<16x128x768xf32>)
// CHECK:           arith.extf
// CHECK:           arith.extf
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         %[[SUM:.+]] = linalg.generic {indexing_maps = [#[[S]], #[[Y]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[PART]] : tensor<16x128x768xf32>) outs(%[[INIT]] : tensor<128x768xf32>)
// CHECK:         return %[[SUM]]
// CHECK-NOT:     linalg.matmul
// FORCED-LABEL: func.func @ffn_down(
// FORCED:         output_shape [128, 2, 1536]
func.func @ffn_down(%x: tensor<128x3072xf16>, %w: tensor<3072x768xf16>, %init: tensor<128x768xf32>) -> tensor<128x768xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<128x3072xf16>, tensor<3072x768xf16>) outs(%init : tensor<128x768xf32>) -> tensor<128x768xf32>
  return %y : tensor<128x768xf32>
}

// -----

// ResNet-50's last 3x3 convolution as im2col leaves it (512 filters x 49 pixels, K = 4608):
// 8 tiles, so the largest split allowed (max-split 16, chunks of 288).
// REMARK: remark: inferx-split-reduction: split: 512x49 output is 8 tiles for 132 SMs: reduction 4608 split 16 ways
// CHECK-LABEL: func.func @conv5(
// CHECK:         output_shape [512, 16, 288]
// CHECK:         linalg.generic {{.*}} outs({{.*}} : tensor<16x512x49xf32>)
// FORCED-LABEL: func.func @conv5(
// FORCED:         output_shape [512, 2, 2304]
func.func @conv5(%w: tensor<512x4608xf16>, %col: tensor<4608x49xf16>, %init: tensor<512x49xf32>) -> tensor<512x49xf32> {
  %y = linalg.matmul ins(%w, %col : tensor<512x4608xf16>, tensor<4608x49xf16>) outs(%init : tensor<512x49xf32>) -> tensor<512x49xf32>
  return %y : tensor<512x49xf32>
}

// -----

// A bf16 MLP layer at batch 64: 64 tiles, split 4 (tiles x S within 3 per SM).
// REMARK: remark: inferx-split-reduction: split: 64x4096 output is 64 tiles for 132 SMs: reduction 4096 split 4 ways
// CHECK-LABEL: func.func @mlp_b64(
// CHECK:         output_shape [64, 4, 1024]
func.func @mlp_b64(%x: tensor<64x4096xbf16>, %w: tensor<4096x4096xbf16>, %init: tensor<64x4096xf32>) -> tensor<64x4096xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<64x4096xbf16>, tensor<4096x4096xbf16>) outs(%init : tensor<64x4096xf32>) -> tensor<64x4096xf32>
  return %y : tensor<64x4096xf32>
}

// -----

// f32 inputs (IREE's SIMT path): the same rule; the products need no widening.
// REMARK: remark: inferx-split-reduction: split: 128x768 output is 24 tiles for 132 SMs: reduction 3072 split 16 ways
// CHECK-LABEL: func.func @ffn_down_f32(
// CHECK:         output_shape [128, 16, 192]
// CHECK:         linalg.generic {{.*}} outs({{.*}} : tensor<16x128x768xf32>)
// CHECK-NOT:       arith.extf
// CHECK:           arith.mulf
func.func @ffn_down_f32(%x: tensor<128x3072xf32>, %w: tensor<3072x768xf32>, %init: tensor<128x768xf32>) -> tensor<128x768xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<128x3072xf32>, tensor<3072x768xf32>) outs(%init : tensor<128x768xf32>) -> tensor<128x768xf32>
  return %y : tensor<128x768xf32>
}
