// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-quantize-contractions{group-size=32})' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-quantize-contractions{group-size=32})' --verify-diagnostics >/dev/null
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-quantize-contractions{group-size=32 matvec-kernel=false})' 2>&1 >/dev/null | filecheck %s --check-prefix=OFF
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=orin},inferx-quantize-contractions{group-size=32})' 2>&1 >/dev/null | filecheck %s --check-prefix=ORIN
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-quantize-contractions{group-size=24})' 2>&1 >/dev/null | filecheck %s --check-prefix=GROUP24

// CUDA weight-only layers whose rows are not tokens (an MLP's batch): our Triton kernel
// (passes/support/dequant_matvec.py) reads the stored int8/int4 weight and its f16 scales; IREE's
// dequantize-and-matmul form is what it replaces.
// OFF: remark: inferx-quantize-contractions: int4: 256x128 weight 'fc.w' stored as int4g32hn, f16 activations, weights dequantized in the matmul, f32 sums (not our kernel: matvec-kernel=false)
// ORIN: remark: inferx-quantize-contractions: int4: 256x128 weight 'fc.w' stored as int4g32hn, f16 activations, weights widened in our kernel (Triton, split 4), f32 sums
// GROUP24: remark: {{.*}}(not our kernel: int4 groups of 24 along K=192: the kernel takes a power-of-two group of at least 16 that divides K)

// int4, 2 rows, K = 256 in groups of 32, a zero init and nothing elementwise after the product:
// four slices of K (the grid's second dimension) summed by a linalg reduction; the executable
// embeds the kernel's PTX.
// CHECK:       hal.executable.source private @[[EXE:inferx_dequant_int4_2x128x256_[0-9a-f]+]]
// CHECK-SAME:    data = dense<"0x
// CHECK:         hal.executable.export public @inferx_dequant_matvec ordinal(0)
// CHECK:           %[[TILES:.+]] = arith.constant 2 : index
// CHECK:           %[[SPLIT:.+]] = arith.constant 4 : index
// CHECK:           hal.return %[[TILES]], %[[SPLIT]], %{{.+}}
// CHECK:         } <workgroup_size = [128 : index, 1 : index, 1 : index]
// CHECK-SAME:      config = "16x64 rows, step 32, 4 warps, 3 stages, split 4"
// CHECK-LABEL: func.func @int4_rows(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x256xf32>, %[[WQ:[^:]+]]: tensor<128x8x32xi4> {inferx.parameter = "fc.w#q:int4g32hn"}, %[[S:[^:]+]]: tensor<128x8xf16> {inferx.parameter = "fc.w#q:int4g32hn:scale"}
// CHECK:         %[[Z:.+]] = linalg.fill
// CHECK:         %[[X16:.+]] = linalg.generic {{.*}} ins(%[[X]] : tensor<2x256xf32>) outs({{.*}} : tensor<2x256xf16>)
// CHECK:         %[[P:.+]]:3 = flow.dispatch @[[EXE]]::@inferx_dequant_matvec(%[[X16]], %[[WQ]], %[[S]]) : (tensor<2x256xf16>, tensor<128x8x32xi4>, tensor<128x8xf16>) -> (tensor<4x2x128xf32>, tensor<16xi8>, tensor<16xi8>)
// CHECK:         %[[Y:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[P]]#0 : tensor<4x2x128xf32>) outs(%[[Z]] : tensor<2x128xf32>)
// CHECK:           arith.addf
// CHECK-NOT:     arith.sitofp
// CHECK:         return %[[Y]]
func.func @int4_rows(%x: tensor<2x256xf32>, %w: tensor<256x128xf32> {inferx.parameter = "fc.w"}) -> tensor<2x128xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x128xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x128xf32>) -> tensor<2x128xf32>
  // expected-remark @+1 {{int4: 256x128 weight 'fc.w' stored as int4g32hn, f16 activations, weights widened in our kernel (Triton, split 4), f32 sums}}
  %y = linalg.matmul {inferx.precision = "i4"} ins(%x, %w : tensor<2x256xf32>, tensor<256x128xf32>) outs(%z : tensor<2x128xf32>) -> tensor<2x128xf32>
  return %y : tensor<2x128xf32>
}

// -----

// int4, 2 rows, the bias add and ReLU after the product and the next layer's f16 cast: one
// slice of K whose kernel finishes them (the bias read as a vector) and writes the f16 result
// the next layer reads; no IREE op is left between the two layers' kernels.
// CHECK:       hal.executable.source private @[[EXE1:inferx_dequant_int4_2x128x256_[0-9a-f]+]]
// CHECK:           %[[ONE:.+]] = arith.constant 1 : index
// CHECK:           hal.return %{{.+}}, %[[ONE]], %[[ONE]]
// CHECK:         config = "16x32 rows, step 256, 4 warps, 4 stages, split 1, epilogue"
// CHECK-LABEL: func.func @int4_epilogue(
// CHECK-SAME:    %[[B:[^:]+]]: tensor<128xf32>
// CHECK:         %[[H:.+]]:3 = flow.dispatch @[[EXE1]]::@inferx_dequant_matvec(%{{.+}}, %{{.+}}, %{{.+}}, %[[B]]) : (tensor<2x256xf16>, tensor<128x8x32xi4>, tensor<128x8xf16>, tensor<128xf32>) -> (tensor<2x128xf16>,
// CHECK-NOT:     linalg.generic
// CHECK:         flow.dispatch @{{.+}}::@inferx_dequant_matvec(%[[H]]#0,
func.func @int4_epilogue(%x: tensor<2x256xf32>, %w: tensor<256x128xf32> {inferx.parameter = "fc.w"}, %b: tensor<128xf32>,
                         %w2: tensor<128x64xf32> {inferx.parameter = "fc2.w"}) -> tensor<2x64xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x128xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x128xf32>) -> tensor<2x128xf32>
  // expected-remark @+1 {{weights widened in our kernel (Triton, split 1, 3 linalg.generic finished in it)}}
  %y = linalg.matmul {inferx.precision = "i4"} ins(%x, %w : tensor<2x256xf32>, tensor<256x128xf32>) outs(%z : tensor<2x128xf32>) -> tensor<2x128xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y, %b : tensor<2x128xf32>, tensor<128xf32>) outs(%e : tensor<2x128xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<2x128xf32>
  %relu = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%biased : tensor<2x128xf32>) outs(%e : tensor<2x128xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<2x128xf32>
  %e2 = tensor.empty() : tensor<2x64xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<2x64xf32>) -> tensor<2x64xf32>
  // expected-remark @+1 {{weights widened in our kernel (Triton, split 2)}}
  %y2 = linalg.matmul {inferx.precision = "i4"} ins(%relu, %w2 : tensor<2x128xf32>, tensor<128x64xf32>) outs(%z2 : tensor<2x64xf32>) -> tensor<2x64xf32>
  return %y2 : tensor<2x64xf32>
}

// -----

// int8, Gemm transB (the weight read transposed), 16 rows, K too short to split: one slice whose
// kernel adds the init (the epilogue's only input) and writes the product.
// CHECK:       #pipeline_layout = #hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, ReadOnly>, #hal.pipeline.binding<storage_buffer, ReadOnly>, #hal.pipeline.binding<storage_buffer, ReadOnly>, #hal.pipeline.binding<storage_buffer, ReadOnly>, #hal.pipeline.binding<storage_buffer>,
// CHECK:       hal.executable.source private @[[EXE8:inferx_dequant_int8_16x64x256_[0-9a-f]+]]
// CHECK-LABEL: func.func @int8_transposed(
// CHECK-SAME:    %[[Z8:[^:]+]]: tensor<16x64xf32>, %[[WQ8:[^:]+]]: tensor<64x256xi8> {inferx.parameter = "fc.w#q:int8hnt"}, %[[S8:[^:]+]]: tensor<64xf16>
// CHECK:         %[[P8:.+]]:3 = flow.dispatch @[[EXE8]]::@inferx_dequant_matvec(%{{.+}}, %[[WQ8]], %[[S8]], %[[Z8]]) : (tensor<16x256xf16>, tensor<64x256xi8>, tensor<64xf16>, tensor<16x64xf32>) -> (tensor<16x64xf32>,
// CHECK:         return %[[P8]]#0
func.func @int8_transposed(%x: tensor<16x256xf32>, %wt: tensor<64x256xf32> {inferx.parameter = "fc.w"}, %z: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %e = tensor.empty() : tensor<256x64xf32>
  %w = linalg.transpose ins(%wt : tensor<64x256xf32>) outs(%e : tensor<256x64xf32>) permutation = [1, 0]
  // expected-remark @+1 {{weights widened in our kernel (Triton, split 1, the init added in it)}}
  %y = linalg.matmul {inferx.precision = "i8"} ins(%x, %w : tensor<16x256xf32>, tensor<256x64xf32>) outs(%z : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// Declined, IREE's form kept: dynamic rows, more rows than the kernel takes, int8 with few rows.
// CHECK-NOT:   hal.executable.source
// CHECK-LABEL: func.func @declined(
// CHECK-COUNT-3: arith.sitofp
func.func @declined(%x: tensor<?x256xf32>, %w: tensor<256x128xf32> {inferx.parameter = "a.w"}, %z: tensor<?x128xf32>,
                    %x2: tensor<96x256xf32>, %w2: tensor<256x128xf32> {inferx.parameter = "b.w"}, %z2: tensor<96x128xf32>,
                    %x3: tensor<4x256xf32>, %w3: tensor<256x128xf32> {inferx.parameter = "c.w"}, %z3: tensor<4x128xf32>) -> (tensor<?x128xf32>, tensor<96x128xf32>, tensor<4x128xf32>) {
  // expected-remark @+1 {{(not our kernel: dynamic rows)}}
  %y = linalg.matmul {inferx.precision = "i4"} ins(%x, %w : tensor<?x256xf32>, tensor<256x128xf32>) outs(%z : tensor<?x128xf32>) -> tensor<?x128xf32>
  // expected-remark @+1 {{(not our kernel: 96 rows (the kernel takes at most 64))}}
  %y2 = linalg.matmul {inferx.precision = "i4"} ins(%x2, %w2 : tensor<96x256xf32>, tensor<256x128xf32>) outs(%z2 : tensor<96x128xf32>) -> tensor<96x128xf32>
  // expected-remark @+1 {{(not our kernel: int8 with 4 rows: IREE's matrix-vector code reads an int8 weight about as fast, in fewer dispatches)}}
  %y3 = linalg.matmul {inferx.precision = "i8"} ins(%x3, %w3 : tensor<4x256xf32>, tensor<256x128xf32>) outs(%z3 : tensor<4x128xf32>) -> tensor<4x128xf32>
  return %y, %y2, %y3 : tensor<?x128xf32>, tensor<96x128xf32>, tensor<4x128xf32>
}

// -----

// GROUP24 reaches this case only: groups of 24 are even (the pass takes them) but not a power of two.
func.func @group24(%x: tensor<2x192xf32>, %w: tensor<192x64xf32> {inferx.parameter = "g.w"}, %z: tensor<2x64xf32>) -> tensor<2x64xf32> {
  // expected-remark @+1 {{weights widened in our kernel}}
  %y = linalg.matmul {inferx.precision = "i4"} ins(%x, %w : tensor<2x192xf32>, tensor<192x64xf32>) outs(%z : tensor<2x64xf32>) -> tensor<2x64xf32>
  return %y : tensor<2x64xf32>
}
