// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-f16-matvec)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-f16-matvec)' --verify-diagnostics >/dev/null
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=a100},inferx-f16-matvec)' 2>&1 >/dev/null | filecheck %s --check-prefix=AMPERE
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=cpu},inferx-f16-matvec)' 2>&1 >/dev/null | filecheck %s --check-prefix=CPU

// A float decode step's projection: 2 token rows of f16 against the stored f16 weight W[N, K]
// (read through its transpose), f32 sums into a zero init. Our kernel reads W as stored (no
// derived copy, no scales: two inputs), K split in 4 slices (the grid's second dimension) summed
// by a linalg reduction; the transpose goes.
// AMPERE: remark: inferx-f16-matvec: f16: 2x128x1024 against 'layers.0.q' read as stored [N, K] by our kernel (Triton, split 4), f32 sums
// CPU: remark: inferx-f16-matvec: declined: target 'cpu' is not a CUDA GPU
// CHECK:       hal.executable.source private @[[EXE:inferx_dequant_f16_2x128x1024_[0-9a-f]+]]
// CHECK:         hal.executable.export public @inferx_dequant_matvec ordinal(0)
// CHECK:           %[[TILES:.+]] = arith.constant 2 : index
// CHECK:           %[[SPLIT:.+]] = arith.constant 4 : index
// CHECK:           hal.return %[[TILES]], %[[SPLIT]], %{{.+}}
// CHECK:         config = "16x64 rows, step 128, 4 warps, 3 stages, split 4", signature = "f16 2x128x1024", source = "rule (inferx-f16-matvec)"
// CHECK-LABEL: func.func @decode_rows(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x1024xf16>, %[[W:[^:]+]]: tensor<128x1024xf16> {inferx.parameter = "layers.0.q"}
// CHECK:         %[[Z:.+]] = linalg.fill
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[P:.+]]:3 = flow.dispatch @[[EXE]]::@inferx_dequant_matvec(%[[X]], %[[W]]) : (tensor<2x1024xf16>, tensor<128x1024xf16>) -> (tensor<4x2x128xf32>, tensor<16xi8>, tensor<16xi8>)
// CHECK:         %[[Y:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[P]]#0 : tensor<4x2x128xf32>) outs(%[[Z]] : tensor<2x128xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         return %[[Y]]
func.func @decode_rows(%x: tensor<2x1024xf16>, %w: tensor<128x1024xf16> {inferx.parameter = "layers.0.q"}) -> tensor<2x128xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x128xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x128xf32>) -> tensor<2x128xf32>
  %et = tensor.empty() : tensor<1024x128xf16>
  %t = linalg.transpose ins(%w : tensor<128x1024xf16>) outs(%et : tensor<1024x128xf16>) permutation = [1, 0]
  // expected-remark @+1 {{f16: 2x128x1024 against 'layers.0.q' read as stored [N, K] by our kernel (Triton, split 4), f32 sums}}
  %y = linalg.matmul ins(%x, %t : tensor<2x1024xf16>, tensor<1024x128xf16>) outs(%z : tensor<2x128xf32>) -> tensor<2x128xf32>
  return %y : tensor<2x128xf32>
}

// -----

// One row into an f16 result (a model built in f16): the sums move to f32 and, in one slice,
// the kernel finishes the cast back to f16 itself (its epilogue), so no IREE kernel reads the
// f32 product.
// CHECK-LABEL: func.func @one_row_f16_result(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<1x256xf16>, %[[W:[^:]+]]: tensor<64x256xf16> {inferx.parameter = "lm_head"}
// CHECK:         %[[Y:.+]]:3 = flow.dispatch @{{inferx_dequant_f16_1x64x256_[0-9a-f]+}}::@inferx_dequant_matvec(%[[X]], %[[W]]) : (tensor<1x256xf16>, tensor<64x256xf16>) -> (tensor<1x64xf16>, tensor<16xi8>, tensor<16xi8>)
// CHECK-NOT:     arith.truncf
// CHECK:         return %[[Y]]#0
func.func @one_row_f16_result(%x: tensor<1x256xf16>, %w: tensor<64x256xf16> {inferx.parameter = "lm_head"}) -> tensor<1x64xf16> {
  %c0 = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<1x64xf16>
  %z = linalg.fill ins(%c0 : f16) outs(%e : tensor<1x64xf16>) -> tensor<1x64xf16>
  %et = tensor.empty() : tensor<256x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x256xf16>) outs(%et : tensor<256x64xf16>) permutation = [1, 0]
  // expected-remark @+1 {{f16: 1x64x256 against 'lm_head' read as stored [N, K] by our kernel (Triton, split 1, linalg.generic finished in it), f32 sums}}
  %y = linalg.matmul ins(%x, %t : tensor<1x256xf16>, tensor<256x64xf16>) outs(%z : tensor<1x64xf16>) -> tensor<1x64xf16>
  return %y : tensor<1x64xf16>
}
