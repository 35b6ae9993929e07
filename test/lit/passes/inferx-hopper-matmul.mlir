// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul)' --verify-diagnostics
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul{tile=64x64 split=2})' 2>&1 >/dev/null | filecheck %s --check-prefix=FORCED
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-hopper-matmul{tma=true})' | filecheck %s --check-prefix=TMA

// BERT b8's FFN up projection: a zero-initialized f16 matmul whose 96 tiles of 128x256 make one
// wave on the H200's 132 SMs (192 of 128x128 would take two). The kernel (sm_90a PTX, embedded) is declared once; the matmul becomes a
// dispatch to it (operands a, b; results: the [1, M, N] product and Triton's two scratch buffers).
// CHECK-LABEL: hal.executable.source private @inferx_matmul_1024x3072x768_
// CHECK-SAME:    path = "inferx_matmul_1024x3072x768_{{[0-9a-f]+}}.ptx", data = dense<"0x
// CHECK:         hal.executable.export public @inferx_matmul ordinal(0)
// CHECK-SAME:      layout(#[[LAYOUT:[a-z_0-9]+]])
// CHECK:           %[[X:.+]] = arith.constant 96 : index
// CHECK:           hal.return %[[X]]
// CHECK:         <workgroup_size = [256 : index, 1 : index, 1 : index], workgroup_local_memory = {{[0-9]+}}>
// CHECK-LABEL: func.func @ffn_up(
// CHECK-SAME:    %[[A:.+]]: tensor<1024x768xf16>, %[[B:.+]]: tensor<768x3072xf16>
// CHECK-NOT:     linalg.matmul
// CHECK:         %[[D:.+]]:3 = flow.dispatch @inferx_matmul_1024x3072x768_{{[0-9a-f]+}}::@inferx_matmul(%[[A]], %[[B]]) : (tensor<1024x768xf16>, tensor<768x3072xf16>) -> (tensor<1x1024x3072xf32>, tensor<16xi8>, tensor<16xi8>)
// CHECK:         %[[Y:.+]] = tensor.collapse_shape %[[D]]#0 {{\[}}[0, 1], [2]] : tensor<1x1024x3072xf32> into tensor<1024x3072xf32>
// CHECK:         return %[[Y]]
// With TMA loads the kernel writes two 128-byte descriptors a program into Triton's global
// scratch: the first scratch result is sized for the 96 programs (24576 bytes).
// TMA-LABEL: func.func @ffn_up(
// TMA:         flow.dispatch {{.*}} -> (tensor<1x1024x3072xf32>, tensor<24576xi8>, tensor<16xi8>)
func.func @ffn_up(%a: tensor<1024x768xf16>, %b: tensor<768x3072xf16>) -> tensor<1024x3072xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024x3072xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1024x3072xf32>) -> tensor<1024x3072xf32>
  // expected-remark @+2 {{inferx-hopper-matmul: sm_90a kernel: 1024x3072x768 f16, tile 128x256 (8 warps, 3 stages): 96 tiles of 128x256: one wave on the 132 SMs, where 192 of 128x128 take two}}
  // FORCED: remark: inferx-hopper-matmul: sm_90a kernel: 1024x3072x768 f16, tile 64x64 (4 warps, 4 stages): forced (tile=64x64 split=2)
  %y = linalg.matmul ins(%a, %b : tensor<1024x768xf16>, tensor<768x3072xf16>) outs(%f : tensor<1024x3072xf32>) -> tensor<1024x3072xf32>
  return %y : tensor<1024x3072xf32>
}

// -----

// At twice the rows, 128x128 tiles fill the SMs at least twice over (384 tiles): no 128x256.
func.func @ffn_up_b16(%a: tensor<2048x768xf16>, %b: tensor<768x3072xf16>) -> tensor<2048x3072xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2048x3072xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2048x3072xf32>) -> tensor<2048x3072xf32>
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 2048x3072x768 f16, tile 128x128 (8 warps, 3 stages): 384 tiles of 128x128 fill the 132 SMs}}
  %y = linalg.matmul ins(%a, %b : tensor<2048x768xf16>, tensor<768x3072xf16>) outs(%f : tensor<2048x3072xf32>) -> tensor<2048x3072xf32>
  return %y : tensor<2048x3072xf32>
}

// -----

// A convolution's matmul at batch 1 accumulates into the bias. ResNet-50's conv5 shape (512
// filters x 49 pixels, K=4608) is 8 tiles of 64x64, so its reduction is split 8 ways (16 would
// leave slices of 288, not a multiple of 64): the kernel writes [8, M, N] slices and a
// linalg.generic sums them into the init (IREE fuses the epilogue there). Unsplit, the kernel
// adds the init in its epilogue (a third read-only binding) and yields the [M, N] result: a bf16
// matmul whose right operand is stored transposed ([N, K]) shows it.
// CHECK-LABEL: func.func @conv5(
// CHECK-SAME:    %[[W:.+]]: tensor<512x4608xf16>, %[[COL:.+]]: tensor<4608x49xf16>, %[[BIAS:.+]]: tensor<512x49xf32>
// CHECK:         %[[P:.+]]:3 = flow.dispatch @inferx_matmul_512x49x4608_{{[0-9a-f]+}}::@inferx_matmul(%[[W]], %[[COL]]) : {{.*}} -> (tensor<8x512x49xf32>, tensor<16xi8>, tensor<16xi8>)
// CHECK:         linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins(%[[P]]#0 : tensor<8x512x49xf32>) outs(%[[BIAS]] : tensor<512x49xf32>)
// CHECK:           arith.addf
// CHECK-LABEL: func.func @transposed_b(
// CHECK-SAME:    %[[X:.+]]: tensor<256x1024xbf16>, %[[WT:.+]]: tensor<512x1024xbf16>, %[[INIT:.+]]: tensor<256x512xf32>
// CHECK:         flow.dispatch @inferx_matmul_256x512x1024_{{[0-9a-f]+}}::@inferx_matmul(%[[X]], %[[WT]], %[[INIT]]) : {{.*}} -> (tensor<256x512xf32>, tensor<16xi8>, tensor<16xi8>)
func.func @conv5(%w: tensor<512x4608xf16>, %col: tensor<4608x49xf16>, %bias: tensor<512x49xf32>) -> tensor<512x49xf32> {
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 512x49x4608 f16, tile 64x64 (4 warps, 4 stages): 8 tiles of 64x64 for 132 SMs, reduction 4608 split 8 ways}}
  %y = linalg.matmul ins(%w, %col : tensor<512x4608xf16>, tensor<4608x49xf16>) outs(%bias : tensor<512x49xf32>) -> tensor<512x49xf32>
  return %y : tensor<512x49xf32>
}
func.func @transposed_b(%x: tensor<256x1024xbf16>, %wt: tensor<512x1024xbf16>, %init: tensor<256x512xf32>) -> tensor<256x512xf32> {
  // expected-remark @+1 {{inferx-hopper-matmul: sm_90a kernel: 256x512x1024 bf16, tile 64x16 (4 warps, 4 stages): 128 tiles of 64x16 for 132 SMs (32 of 64x64)}}
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
         ins(%x, %wt : tensor<256x1024xbf16>, tensor<512x1024xbf16>) outs(%init : tensor<256x512xf32>) -> tensor<256x512xf32>
  return %y : tensor<256x512xf32>
}
