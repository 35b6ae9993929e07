// REQUIRES: c-compiler
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-amx},inferx-amx-matmul)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-amx},inferx-amx-matmul)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

#id = affine_map<(d0, d1) -> (d0, d1)>

// A bf16 projection whose weight is a parameter read through the transpose of a Gemm
// (transB=1) and the bf16 truncation: the weight is zero-padded from 48 to 64 columns, packed
// in the kernel's tiles ([N/16][K/32][16][16][2]: element (nb, kb, r, c, p) = w[32kb + 2r + p,
// 16nb + c]), the kernel's executable (its object linked by path) is dispatched, the padded
// columns are cut and the accumulator (not a zero fill) is added.
// REMARK: remark: inferx-amx-matmul: bf16 8 rows x 64x48 weight on AMX (inferx_bf16_amx, weight packed at load)
// CHECK:       #[[X86:.+]] = #hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">
// CHECK-DAG:   #[[PACK:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d1 * 32 + d2 * 2 + d4, d0 * 16 + d3)>
// CHECK:       stream.executable private @inferx_bf16_amx_8x64x64 attributes {hal.executable.objects = #hal.executable.objects<{#[[X86]] = [#hal.executable.object<{path = "{{.*}}/bf16_amx_gemm-{{[0-9a-f]+}}.o"}>]}>}
// CHECK:         func.func private @inferx_bf16_amx_tile(memref<bf16>, index, memref<bf16>, index, memref<f32>, index, i64, i64, i64, i64, i64, i64, i64) attributes {hal.import.static, llvm.bareptr = true}
// CHECK:         func.func @inferx_bf16_amx_8x64x64({{.*}}) attributes {inferx.config = {{.*}}source = "rule (inferx-amx-matmul)"
// CHECK:           call @inferx_bf16_amx_tile(
// CHECK-LABEL: func.func @projection(
// CHECK-SAME:    %[[X:.+]]: tensor<8x64xf32>, %{{.+}}: tensor<48x64xf32> {inferx.parameter = "p.w"}, %[[BIAS:.+]]: tensor<8x48xf32>
// CHECK:         %[[XB:.+]] = linalg.generic {{.*}} ins(%[[X]] : tensor<8x64xf32>) outs(%{{.+}} : tensor<8x64xbf16>)
// CHECK:         %[[PADDED:.+]] = tensor.insert_slice %{{.+}} into %{{.+}}[0, 0] [64, 48] [1, 1] : tensor<64x48xbf16> into tensor<64x64xbf16>
// CHECK:         %[[TILES:.+]] = linalg.generic {indexing_maps = [#[[PACK]], {{.*}}]{{.*}} ins(%[[PADDED]] : tensor<64x64xbf16>) outs(%{{.+}} : tensor<4x2x16x16x2xbf16>)
// CHECK:         %[[FLAT:.+]] = tensor.collapse_shape %[[TILES]] {{\[}}[0, 1, 2, 3, 4]] : tensor<4x2x16x16x2xbf16> into tensor<4096xbf16>
// CHECK:         %[[C:.+]] = flow.dispatch @inferx_bf16_amx_8x64x64::@inferx_bf16_amx_8x64x64(%[[XB]], %[[FLAT]]) : (tensor<8x64xbf16>, tensor<4096xbf16>) -> tensor<8x64xf32>
// CHECK:         %[[CUT:.+]] = tensor.extract_slice %[[C]][0, 0] [8, 48] [1, 1] : tensor<8x64xf32> to tensor<8x48xf32>
// CHECK:         %[[Y:.+]] = linalg.generic {{.*}} ins(%[[CUT]] : tensor<8x48xf32>) outs(%[[BIAS]] : tensor<8x48xf32>)
// CHECK:           arith.addf
// CHECK:         return %[[Y]]
// CHECK-NOT:     linalg.matmul
func.func @projection(%x: tensor<8x64xf32>, %w: tensor<48x64xf32> {inferx.parameter = "p.w"},
                      %bias: tensor<8x48xf32>) -> tensor<8x48xf32> {
  %e0 = tensor.empty() : tensor<8x64xbf16>
  %xb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x64xf32>) outs(%e0 : tensor<8x64xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<8x64xbf16>
  %et = tensor.empty() : tensor<64x48xf32>
  %wt = linalg.transpose ins(%w : tensor<48x64xf32>) outs(%et : tensor<64x48xf32>) permutation = [1, 0]
  %e1 = tensor.empty() : tensor<64x48xbf16>
  %wb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%wt : tensor<64x48xf32>) outs(%e1 : tensor<64x48xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<64x48xbf16>
  %y = linalg.matmul ins(%xb, %wb : tensor<8x64xbf16>, tensor<64x48xbf16>) outs(%bias : tensor<8x48xf32>) -> tensor<8x48xf32>
  return %y : tensor<8x48xf32>
}

// -----

// Dynamic rows and a zero-filled accumulator: the row count is the dispatch's workload and
// operand, and the kernel's sums are the result (no addition).
// REMARK: remark: inferx-amx-matmul: bf16 dynamic rows x 32x32 weight on AMX
// CHECK-LABEL: func.func @dynamic_rows(
// CHECK:         tensor.dim %{{.+}}, %{{.+}} : tensor<?x32xbf16>
// CHECK:         %[[ROWS:.+]] = tensor.dim %{{.+}}, %{{.+}} : tensor<?x32xbf16>
// CHECK:         %[[C:.+]] = flow.dispatch @inferx_bf16_amx_Dx32x32::@inferx_bf16_amx_Dx32x32[%[[ROWS]]](%{{.+}}, %{{.+}}, %[[ROWS]]) : (tensor<?x32xbf16>{%[[ROWS]]}, tensor<1024xbf16>, index) -> tensor<?x32xf32>{%[[ROWS]]}
// CHECK-NEXT:    return %[[C]]
func.func @dynamic_rows(%x: tensor<?x32xbf16>, %w: tensor<32x32xbf16> {inferx.parameter = "d.w"}) -> tensor<?x32xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %rows = tensor.dim %x, %c0 : tensor<?x32xbf16>
  %e = tensor.empty(%rows) : tensor<?x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x32xf32>) -> tensor<?x32xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x32xbf16>, tensor<32x32xbf16>) outs(%z : tensor<?x32xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
