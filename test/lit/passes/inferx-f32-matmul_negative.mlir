// REQUIRES: c-compiler
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-f32-matmul)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-f32-matmul)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-f32-matmul)' 2>&1 | filecheck %s --check-prefix=NOAVX512
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=aarch64},inferx-f32-matmul)' 2>&1 | filecheck %s --check-prefix=NOAVX512
// RUN: env CC=/nonexistent/cc inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-f32-matmul)' 2>&1 >/dev/null | filecheck %s --check-prefix=NOCC

// Declined, each with its reason: a right-hand operand computed from activations (attention's
// products), K=257 over 256 with no divisor from 64 to 256 (a prime), f32 activations against an
// f16 weight, a dynamic right-hand operand, a weight read through transposed indexing maps. A
// bf16 matmul is not this pass's (no remark).
// REMARK:      remark: inferx-f32-matmul: declined: the right-hand operand is not computed from stored weights alone
// REMARK-NEXT: remark: inferx-f32-matmul: declined: K=257 has no divisor from 64 to 256 (the kernel's packed weight is in whole K blocks)
// REMARK-NEXT: remark: inferx-f32-matmul: declined: f32 x f16 -> f32: the kernel takes f32 x f32 -> f32
// REMARK-NEXT: remark: inferx-f32-matmul: declined: a dynamic right-hand operand
// REMARK-NEXT: remark: inferx-f32-matmul: declined: transposed or broadcast indexing maps
// REMARK-NEXT: remark: inferx-f32-matmul: f32 8 rows x 64x32 weight on AVX-512
// CHECK-LABEL: func.func @declined(
// CHECK-NOT:     flow.dispatch
// CHECK-COUNT-6: linalg.matmul
// CHECK-NOT:     flow.dispatch
// CHECK:         return
func.func @declined(%x: tensor<8x64xf32>, %k: tensor<64x16xf32>, %x257: tensor<8x257xf32>,
                    %w257: tensor<257x16xf32> {inferx.parameter = "k257.w"},
                    %wh: tensor<64x16xf16> {inferx.parameter = "h.w"},
                    %wd: tensor<64x?xf32> {inferx.parameter = "d.w"}, %zd: tensor<8x?xf32>,
                    %wt: tensor<16x64xf32> {inferx.parameter = "t.w"},
                    %xb: tensor<8x64xbf16>, %wb: tensor<64x16xbf16> {inferx.parameter = "b.w"})
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x?xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %a = linalg.matmul ins(%x, %k : tensor<8x64xf32>, tensor<64x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %b = linalg.matmul ins(%x257, %w257 : tensor<8x257xf32>, tensor<257x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %c = linalg.matmul ins(%x, %wh : tensor<8x64xf32>, tensor<64x16xf16>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %d = linalg.matmul ins(%x, %wd : tensor<8x64xf32>, tensor<64x?xf32>) outs(%zd : tensor<8x?xf32>) -> tensor<8x?xf32>
  %t = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>,
                                      affine_map<(d0, d1, d2) -> (d0, d1)>]
         ins(%x, %wt : tensor<8x64xf32>, tensor<16x64xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %bf = linalg.matmul ins(%xb, %wb : tensor<8x64xbf16>, tensor<64x16xbf16>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %a, %b, %c, %d, %t, %bf : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x?xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// A target without AVX-512 (AVX2, Arm) leaves every matmul to IREE, silently (nothing to decline
// there); a build machine without a C compiler declines with the reason.
// NOAVX512-NOT:   remark
// NOAVX512-LABEL: func.func @weight_projection(
// NOAVX512-NOT:     remark
// NOAVX512-NOT:     flow.dispatch
// NOAVX512:         linalg.matmul
// NOAVX512-NOT:   remark
// NOCC: remark: inferx-f32-matmul: declined: CC='/nonexistent/cc' is not an executable on PATH
// NOCC-NOT: weight on AVX-512
// CHECK-LABEL: func.func @weight_projection(
// CHECK:         flow.dispatch @inferx_f32_8x32x64
// CHECK-NOT:     linalg.matmul
func.func @weight_projection(%x: tensor<8x64xf32>, %w: tensor<64x32xf32> {inferx.parameter = "w"},
                             %z: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<8x64xf32>, tensor<64x32xf32>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
