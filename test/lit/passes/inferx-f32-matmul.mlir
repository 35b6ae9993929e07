// REQUIRES: c-compiler
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-f32-matmul)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-f32-matmul)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

#id = affine_map<(d0, d1) -> (d0, d1)>

// An f32 projection whose weight is a parameter read through the transpose of a Gemm
// (transB=1): the weight is zero-padded from 48 to 64 columns, packed in the kernel's layout
// ([K/kc][N/32][kc][32]: element (kb, p, r, c) = w[kc kb + r, 32 p + c], here kc = K = 64), the
// kernel's executable (its object linked by path) is dispatched, storing the 48 columns of the
// result (the padded ones are not stored: no cut after it) and the accumulator (not a zero fill)
// is added.
// REMARK: remark: inferx-f32-matmul: f32 8 rows x 64x48 weight on AVX-512 (inferx_f32, weight packed at load)
// CHECK:       #[[X86:.+]] = #hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">
// CHECK-DAG:   #[[PACK:.+]] = affine_map<(d0, d1, d2, d3) -> (d0 * 64 + d2, d1 * 32 + d3)>
// CHECK:       stream.executable private @inferx_f32_8x48x64 attributes {hal.executable.objects = #hal.executable.objects<{#[[X86]] = [#hal.executable.object<{path = "{{.*}}/f32_gemm-{{[0-9a-f]+}}.o"}>]}>}
// CHECK:         func.func private @inferx_f32_tile(memref<f32>, index, memref<f32>, index, memref<f32>, index, i64, i64, i64, i64, i64, i64, i64, i64, i64) attributes {hal.import.static, llvm.bareptr = true}
// CHECK:         func.func @inferx_f32_8x48x64({{.*}}) attributes {inferx.config = {{.*}}source = "rule (inferx-f32-matmul)"
// CHECK-SAME:      inferx.dispatch = {{.*}}root = "inferx_f32 (C, AVX-512)"
// CHECK:           %[[LDC:.+]] = arith.constant 48 : i64
// CHECK:           call @inferx_f32_tile({{.*}}, %[[LDC]], {{.*}}) : (memref<f32>, index, memref<f32>, index, memref<f32>, index, i64, i64, i64, i64, i64, i64, i64, i64, i64) -> ()
// CHECK-LABEL: func.func @projection(
// CHECK-SAME:    %[[X:.+]]: tensor<8x64xf32>, %{{.+}}: tensor<48x64xf32> {inferx.parameter = "p.w"}, %[[BIAS:.+]]: tensor<8x48xf32>
// CHECK:         %[[WT:.+]] = linalg.transpose
// CHECK:         %[[PADDED:.+]] = tensor.insert_slice %[[WT]] into %{{.+}}[0, 0] [64, 48] [1, 1] : tensor<64x48xf32> into tensor<64x64xf32>
// CHECK:         %[[PANELS:.+]] = linalg.generic {indexing_maps = [#[[PACK]], {{.*}}]{{.*}} ins(%[[PADDED]] : tensor<64x64xf32>) outs(%{{.+}} : tensor<1x2x64x32xf32>)
// CHECK:         %[[FLAT:.+]] = tensor.collapse_shape %[[PANELS]] {{\[}}[0, 1, 2, 3]] : tensor<1x2x64x32xf32> into tensor<4096xf32>
// CHECK:         %[[C:.+]] = flow.dispatch @inferx_f32_8x48x64::@inferx_f32_8x48x64(%[[X]], %[[FLAT]]) : (tensor<8x64xf32>, tensor<4096xf32>) -> tensor<8x48xf32>
// CHECK-NOT:     tensor.extract_slice
// CHECK:         %[[Y:.+]] = linalg.generic {{.*}} ins(%[[C]] : tensor<8x48xf32>) outs(%[[BIAS]] : tensor<8x48xf32>)
// CHECK:           arith.addf
// CHECK:         return %[[Y]]
// CHECK-NOT:     linalg.matmul
func.func @projection(%x: tensor<8x64xf32>, %w: tensor<48x64xf32> {inferx.parameter = "p.w"},
                      %bias: tensor<8x48xf32>) -> tensor<8x48xf32> {
  %et = tensor.empty() : tensor<64x48xf32>
  %wt = linalg.transpose ins(%w : tensor<48x64xf32>) outs(%et : tensor<64x48xf32>) permutation = [1, 0]
  %y = linalg.matmul ins(%x, %wt : tensor<8x64xf32>, tensor<64x48xf32>) outs(%bias : tensor<8x48xf32>) -> tensor<8x48xf32>
  return %y : tensor<8x48xf32>
}

// -----

// Dynamic rows and a zero-filled accumulator: the row count is the dispatch's workload and
// operand (workgroups of rows), and the kernel's sums are the result (no addition, no cut: 32
// columns are the kernel's own).
// REMARK: remark: inferx-f32-matmul: f32 dynamic rows x 32x32 weight on AVX-512
// CHECK:       stream.executable private @inferx_f32_Dx32x32
// CHECK:         stream.executable.export public @inferx_f32_Dx32x32 workgroups(%[[W:.+]]: index)
// CHECK:           arith.ceildivui %[[W]], %{{.+}} : index
// CHECK:         func.func private @inferx_f32_tile(memref<f32>, index, memref<f32>, index, memref<f32>, index, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-LABEL: func.func @dynamic_rows(
// CHECK:         tensor.dim %{{.+}}, %{{.+}} : tensor<?x32xf32>
// CHECK:         %[[ROWS:.+]] = tensor.dim %{{.+}}, %{{.+}} : tensor<?x32xf32>
// CHECK:         %[[C:.+]] = flow.dispatch @inferx_f32_Dx32x32::@inferx_f32_Dx32x32[%[[ROWS]]](%{{.+}}, %{{.+}}, %[[ROWS]]) : (tensor<?x32xf32>{%[[ROWS]]}, tensor<1024xf32>, index) -> tensor<?x32xf32>{%[[ROWS]]}
// CHECK-NEXT:    return %[[C]]
func.func @dynamic_rows(%x: tensor<?x32xf32>, %w: tensor<32x32xf32> {inferx.parameter = "d.w"}) -> tensor<?x32xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %rows = tensor.dim %x, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%rows) : tensor<?x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x32xf32>) -> tensor<?x32xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x32xf32>, tensor<32x32xf32>) outs(%z : tensor<?x32xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// K over 256: the weight is packed in K blocks of its largest divisor from 64 to 256 (1024: 4
// blocks of 256; 320: 2 blocks of 160), the block passed to the kernel after M, N, K. Two
// products of one shape share one executable.
// REMARK: remark: inferx-f32-matmul: f32 4 rows x 1024x64 weight on AVX-512
// REMARK: remark: inferx-f32-matmul: f32 4 rows x 1024x64 weight on AVX-512
// REMARK: remark: inferx-f32-matmul: f32 4 rows x 320x32 weight on AVX-512
// CHECK-DAG:   #[[PACK256:.+]] = affine_map<(d0, d1, d2, d3) -> (d0 * 256 + d2, d1 * 32 + d3)>
// CHECK-DAG:   #[[PACK160:.+]] = affine_map<(d0, d1, d2, d3) -> (d0 * 160 + d2, d1 * 32 + d3)>
// CHECK:       stream.executable private @inferx_f32_4x32x320
// CHECK:         %[[K320:.+]] = arith.constant 320 : i64
// CHECK-NEXT:    %[[KC160:.+]] = arith.constant 160 : i64
// CHECK:         call @inferx_f32_tile({{.*}}, %[[K320]], %[[KC160]], {{.*}})
// CHECK:       stream.executable private @inferx_f32_4x64x1024
// CHECK:         %[[K1024:.+]] = arith.constant 1024 : i64
// CHECK-NEXT:    %[[KC256:.+]] = arith.constant 256 : i64
// CHECK:         call @inferx_f32_tile({{.*}}, %[[K1024]], %[[KC256]], {{.*}})
// CHECK-NOT:   stream.executable
// CHECK-LABEL: func.func @deep(
// CHECK:         %[[P0:.+]] = linalg.generic {indexing_maps = [#[[PACK256]], {{.*}}]{{.*}} outs(%{{.+}} : tensor<4x2x256x32xf32>)
// CHECK:         %[[F0:.+]] = tensor.collapse_shape %[[P0]] {{.*}} : tensor<4x2x256x32xf32> into tensor<65536xf32>
// CHECK:         flow.dispatch @inferx_f32_4x64x1024::@inferx_f32_4x64x1024(%{{.+}}, %[[F0]])
// CHECK:         linalg.generic {indexing_maps = [#[[PACK256]], {{.*}}]{{.*}} outs(%{{.+}} : tensor<4x2x256x32xf32>)
// CHECK:         flow.dispatch @inferx_f32_4x64x1024::@inferx_f32_4x64x1024(
// CHECK:         linalg.generic {indexing_maps = [#[[PACK160]], {{.*}}]{{.*}} outs(%{{.+}} : tensor<2x1x160x32xf32>)
// CHECK:         flow.dispatch @inferx_f32_4x32x320::@inferx_f32_4x32x320(
// CHECK-NOT:     linalg.matmul
func.func @deep(%x: tensor<4x1024xf32>, %w: tensor<1024x64xf32> {inferx.parameter = "k.w"},
                %v: tensor<1024x64xf32> {inferx.parameter = "k.v"}, %z: tensor<4x64xf32>,
                %x320: tensor<4x320xf32>, %u: tensor<320x32xf32> {inferx.parameter = "k.u"}, %z32: tensor<4x32xf32>)
    -> (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x32xf32>) {
  %y = linalg.matmul ins(%x, %w : tensor<4x1024xf32>, tensor<1024x64xf32>) outs(%z : tensor<4x64xf32>) -> tensor<4x64xf32>
  %y2 = linalg.matmul ins(%x, %v : tensor<4x1024xf32>, tensor<1024x64xf32>) outs(%z : tensor<4x64xf32>) -> tensor<4x64xf32>
  %y3 = linalg.matmul ins(%x320, %u : tensor<4x320xf32>, tensor<320x32xf32>) outs(%z32 : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y, %y2, %y3 : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x32xf32>
}

// -----

// A few rows stream the weight: one column tile a worker (x86-avx512's record: 4 cores), all
// of 2048 columns in 4 tiles of 512; 32 rows (over STREAMING_ROWS) keep 256-column tiles (8).
// CHECK:       stream.executable private @inferx_f32_32x2048x96
// CHECK:         %[[C8:.+]] = arith.constant 8 : index
// CHECK:         stream.return %[[C8]],
// CHECK:         %[[NT256:.+]] = arith.constant 256 : i64
// CHECK:         call @inferx_f32_tile({{.*}}, %[[NT256]]) :
// CHECK:       stream.executable private @inferx_f32_1x2048x96
// CHECK:         %[[C4:.+]] = arith.constant 4 : index
// CHECK:         stream.return %[[C4]],
// CHECK:         %[[NT512:.+]] = arith.constant 512 : i64
// CHECK:         call @inferx_f32_tile({{.*}}, %[[NT512]]) :
func.func @streaming(%x: tensor<1x96xf32>, %w: tensor<96x2048xf32> {inferx.parameter = "s.w"}, %z: tensor<1x2048xf32>,
                     %x32: tensor<32x96xf32>, %z32: tensor<32x2048xf32>) -> (tensor<1x2048xf32>, tensor<32x2048xf32>) {
  %y = linalg.matmul ins(%x, %w : tensor<1x96xf32>, tensor<96x2048xf32>) outs(%z : tensor<1x2048xf32>) -> tensor<1x2048xf32>
  %y32 = linalg.matmul ins(%x32, %w : tensor<32x96xf32>, tensor<96x2048xf32>) outs(%z32 : tensor<32x2048xf32>) -> tensor<32x2048xf32>
  return %y, %y32 : tensor<1x2048xf32>, tensor<32x2048xf32>
}

// -----

// Where the kernel packs the rows (K = 1024: rows 4 KiB apart), the widest tiles that divide N,
// keep the workgroups a multiple of the workers (x86-avx512: 4 cores) and hold a K block of
// their panels in a quarter of its 1 MiB L2 (8 panels of 256 rows): 8192 columns as 32 tiles
// of 256 (the L2 bound, not 512); 768 columns as 4 tiles of 192 (one a worker), where rows read
// in place (K = 640) keep 128-column tiles (6). (Executables in reverse order.)
// CHECK:       stream.executable private @inferx_f32_128x8192x1024
// CHECK:         %[[C32:.+]] = arith.constant 32 : index
// CHECK:         stream.return %[[C32]],
// CHECK:       stream.executable private @inferx_f32_128x768x640
// CHECK:         %[[C6:.+]] = arith.constant 6 : index
// CHECK:         stream.return %[[C6]],
// CHECK:       stream.executable private @inferx_f32_128x768x1024
// CHECK:         %[[C4:.+]] = arith.constant 4 : index
// CHECK:         stream.return %[[C4]],
// CHECK:         %[[NT192:.+]] = arith.constant 192 : i64
// CHECK:         call @inferx_f32_tile({{.*}}, %[[NT192]]) :
func.func @packed_rows_wide_tiles(%x: tensor<128x1024xf32>, %w: tensor<1024x768xf32> {inferx.parameter = "p.w"},
                                  %x640: tensor<128x640xf32>, %v: tensor<640x768xf32> {inferx.parameter = "p.v"},
                                  %u: tensor<1024x8192xf32> {inferx.parameter = "p.u"},
                                  %z: tensor<128x768xf32>, %z2: tensor<128x8192xf32>)
    -> (tensor<128x768xf32>, tensor<128x768xf32>, tensor<128x8192xf32>) {
  %y = linalg.matmul ins(%x, %w : tensor<128x1024xf32>, tensor<1024x768xf32>) outs(%z : tensor<128x768xf32>) -> tensor<128x768xf32>
  %y2 = linalg.matmul ins(%x640, %v : tensor<128x640xf32>, tensor<640x768xf32>) outs(%z : tensor<128x768xf32>) -> tensor<128x768xf32>
  %y3 = linalg.matmul ins(%x, %u : tensor<128x1024xf32>, tensor<1024x8192xf32>) outs(%z2 : tensor<128x8192xf32>) -> tensor<128x8192xf32>
  return %y, %y2, %y3 : tensor<128x768xf32>, tensor<128x768xf32>, tensor<128x8192xf32>
}
