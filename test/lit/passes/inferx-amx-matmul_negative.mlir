// REQUIRES: c-compiler
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-amx},inferx-amx-matmul)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-amx},inferx-amx-matmul)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-amx-matmul)' 2>&1 | filecheck %s --check-prefix=NOAMX
// RUN: env CC=/nonexistent/cc inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-amx},inferx-amx-matmul)' 2>&1 >/dev/null | filecheck %s --check-prefix=NOCC

// Declined, each with its reason: a right-hand operand computed from activations (attention's
// products), K not a multiple of 32, bf16 x bf16 -> bf16. An f32 matmul is not this pass's.
// REMARK: remark: inferx-amx-matmul: declined: the right-hand operand is not computed from stored weights alone
// REMARK: remark: inferx-amx-matmul: declined: K=48 is not a multiple of 32 (the AMX tile's bf16 depth)
// REMARK: remark: inferx-amx-matmul: declined: bf16 x bf16 -> bf16: the kernel takes bf16 x bf16 -> f32
// CHECK-LABEL: func.func @declined(
// CHECK-NOT:     flow.dispatch
// CHECK-COUNT-4: linalg.matmul
func.func @declined(%x: tensor<8x64xbf16>, %k: tensor<64x16xbf16>, %x48: tensor<8x48xbf16>,
                    %w48: tensor<48x16xbf16> {inferx.parameter = "k48.w"}, %w: tensor<64x16xbf16> {inferx.parameter = "w"},
                    %xf: tensor<8x64xf32>, %wf: tensor<64x16xf32> {inferx.parameter = "f.w"})
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xbf16>, tensor<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %zb = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %eb = tensor.empty() : tensor<8x16xbf16>
  %zbf = linalg.fill ins(%zb : bf16) outs(%eb : tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %a = linalg.matmul ins(%x, %k : tensor<8x64xbf16>, tensor<64x16xbf16>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %b = linalg.matmul ins(%x48, %w48 : tensor<8x48xbf16>, tensor<48x16xbf16>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %c = linalg.matmul ins(%x, %w : tensor<8x64xbf16>, tensor<64x16xbf16>) outs(%zbf : tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %d = linalg.matmul ins(%xf, %wf : tensor<8x64xf32>, tensor<64x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %a, %b, %c, %d : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xbf16>, tensor<8x16xf32>
}

// -----

// A target without AMX leaves every matmul to IREE, silently (nothing to decline there); a build
// machine without a C compiler declines with the reason.
// NOAMX-LABEL: func.func @weight_projection(
// NOAMX-NOT:     remark
// NOAMX-NOT:     flow.dispatch
// NOAMX:         linalg.matmul
// NOCC: remark: inferx-amx-matmul: declined: CC='/nonexistent/cc' is not an executable on PATH
// REMARK-NEXT: remark: inferx-amx-matmul: bf16 8 rows x 64x32 weight on AMX
// CHECK-LABEL: func.func @weight_projection(
// CHECK:         flow.dispatch @inferx_bf16_amx_8x32x64
func.func @weight_projection(%x: tensor<8x64xbf16>, %w: tensor<64x32xbf16> {inferx.parameter = "w"},
                             %z: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<8x64xbf16>, tensor<64x32xbf16>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
