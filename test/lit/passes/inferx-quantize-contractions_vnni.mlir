// REQUIRES: c-compiler
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-quantize-contractions)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-quantize-contractions)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-quantize-contractions{vnni-kernel=false})' | filecheck %s --check-prefix=OFF
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-amx},inferx-quantize-contractions)' 2>&1 | filecheck %s --check-prefix=AMX
// RUN: env CC=/nonexistent/cc inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-quantize-contractions)' 2>&1 >/dev/null | filecheck %s --check-prefix=NOCC

// On a target with AVX-512 VNNI, a static int8 product runs on our u8 x s8 kernel: the
// activations are quantized as before plus 128 (u8 in [0, 255]), the int8 weight is packed for
// the kernel ([N/16][K/4][16][4], flattened: IREE computes it at load), the kernel's executable
// (its object file linked by path) is dispatched with flow.dispatch, and the rescale takes the
// 128 x column sums back in s32 before the usual correction. Two products of one shape share
// one executable.
// On a target with AMX (x86-amx) and K a multiple of 64, the same product runs on the AMX kernel
// (the same operands, packing and sums; only the executable's object and name differ).
// AMX: remark: inferx-quantize-contractions: int8: 64x32 weight 'a.w' stored as int8, u8 activations, s32 sums by the AMX kernel (u8 x s8)
// AMX: stream.executable private @inferx_u8s8_amx_8x32x64 attributes {hal.executable.objects = {{.*}}path = "{{.*}}/u8s8_amx_gemm-{{[0-9a-f]+}}.o"
// AMX: func.func private @inferx_u8s8_amx_tile(memref<i8>, index, memref<i8>, index, memref<i32>, index,
// AMX: flow.dispatch @inferx_u8s8_amx_8x32x64::@inferx_u8s8_amx_8x32x64({{.*}}) : (tensor<8x64xi8>, tensor<2048xi8>) -> tensor<8x32xi32>
// REMARK: remark: inferx-quantize-contractions: int8: 64x32 weight 'a.w' stored as int8, u8 activations, s32 sums by the VNNI kernel (u8 x s8)
// REMARK: remark: inferx-quantize-contractions: int8: 64x32 weight 'b.w' stored as int8, u8 activations, s32 sums by the VNNI kernel (u8 x s8)
// NOCC: remark: inferx-quantize-contractions: int8: 64x32 weight 'a.w' stored as int8, int8 activations, s32 sums (not the VNNI kernel: CC='/nonexistent/cc' is not an executable on PATH)
// CHECK:       #[[X86:.+]] = #hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">
// CHECK:       stream.executable private @inferx_u8s8_8x32x64 attributes {hal.executable.objects = #hal.executable.objects<{#[[X86]] = [#hal.executable.object<{path = "{{.*}}/u8s8_gemm-{{[0-9a-f]+}}.o"}>]}>}
// CHECK:         stream.executable.export public @inferx_u8s8_8x32x64 workgroups()
// CHECK:           stream.return
// CHECK:         func.func private @inferx_u8s8_tile(memref<i8>, index, memref<i8>, index, memref<i32>, index, i64, i64, i64, i64, i64, i64, i64) attributes {hal.import.static, llvm.bareptr = true}
// CHECK:         func.func @inferx_u8s8_8x32x64(
// CHECK:           call @inferx_u8s8_tile(
// CHECK-NOT:   stream.executable
// CHECK-LABEL: func.func @two_products(
// CHECK-SAME:    %[[X:.+]]: tensor<8x64xf32>, %{{.+}}: tensor<64x32xi8> {inferx.parameter = "a.w#q:int8"}, %{{.+}}: tensor<32xf32> {inferx.parameter = "a.w#q:int8:scale"}
// CHECK:         %[[XQ:.+]] = linalg.generic {{.*}} outs({{.*}} : tensor<8x64xi8>)
// CHECK:           arith.constant 1.280000e+02 : f32
// CHECK:           arith.constant 0.000000e+00 : f32
// CHECK:           arith.constant 2.550000e+02 : f32
// CHECK:           arith.trunci {{.*}} : i32 to i8
// CHECK:         %[[G:.+]] = tensor.expand_shape %{{.+}} {{\[}}[0, 1], [2, 3]] output_shape [16, 4, 2, 16] : tensor<64x32xi8> into tensor<16x4x2x16xi8>
// CHECK:         %[[P:.+]] = linalg.transpose ins(%[[G]] : tensor<16x4x2x16xi8>) outs(%{{.+}} : tensor<2x16x16x4xi8>) permutation = [2, 0, 3, 1]
// CHECK:         %[[FLAT:.+]] = tensor.collapse_shape %[[P]] {{\[}}[0, 1, 2, 3]] : tensor<2x16x16x4xi8> into tensor<2048xi8>
// CHECK:         %[[ACC:.+]] = flow.dispatch @inferx_u8s8_8x32x64::@inferx_u8s8_8x32x64(%[[XQ]], %[[FLAT]]) : (tensor<8x64xi8>, tensor<2048xi8>) -> tensor<8x32xi32>
// CHECK:         linalg.generic {{.*}} ins(%[[ACC]], {{.*}}) outs({{.*}} : tensor<8x32xf32>)
// CHECK:           arith.muli
// CHECK:           arith.subi
// CHECK:           arith.sitofp
// CHECK:         flow.dispatch @inferx_u8s8_8x32x64::@inferx_u8s8_8x32x64(
// CHECK-NOT:     linalg.matmul
// OFF-NOT:     stream.executable
// OFF-NOT:     flow.dispatch
// OFF:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x64xi8>, tensor<64x32xi8>) outs({{.*}} : tensor<8x32xi32>)
func.func @two_products(%x: tensor<8x64xf32>, %wa: tensor<64x32xf32> {inferx.parameter = "a.w"},
                        %wb: tensor<64x32xf32> {inferx.parameter = "b.w"}) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %a = linalg.matmul {inferx.precision = "i8"} ins(%x, %wa : tensor<8x64xf32>, tensor<64x32xf32>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  %b = linalg.matmul {inferx.precision = "i8"} ins(%x, %wb : tensor<8x64xf32>, tensor<64x32xf32>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %a, %b : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Dynamic rows (a model's dynamic-batch function) run on the kernel too: the row count is the
// dispatch's workload and last operand, the executable's workgroup count divides it by the
// 32-row tile. Output columns that are not a multiple of the kernel's 32 (16 here): the weight is
// zero-padded to 32 columns at load and the extra columns cut from the sums. A reduction that is
// not a multiple of 4 (K=62) is declined, with the reason.
// REMARK: remark: inferx-quantize-contractions: int8: 64x32 weight 'dyn.w' stored as int8, u8 activations, s32 sums by the VNNI kernel (u8 x s8)
// REMARK: remark: inferx-quantize-contractions: int8: 64x16 weight 'narrow.w' stored as int8, u8 activations, s32 sums by the VNNI kernel (u8 x s8)
// REMARK: remark: inferx-quantize-contractions: int8: 62x32 weight 'odd.w' stored as int8, int8 activations, s32 sums (not the VNNI kernel: K=62 is not a multiple of 4)
// CHECK:       stream.executable private @inferx_u8s8_Dx32x64
// CHECK:         stream.executable.export public @inferx_u8s8_Dx32x64 workgroups(%[[ROWS:.+]]: index)
// CHECK:           arith.ceildivui %[[ROWS]], %{{.+}} : index
// CHECK:         func.func @inferx_u8s8_Dx32x64(%{{.+}}: !stream.binding, %{{.+}}: !stream.binding, %{{.+}}: !stream.binding, %[[M:.+]]: index)
// CHECK:           stream.binding.subspan {{.*}} -> memref<?x64xi8>{%[[M]]}
// CHECK:           stream.binding.subspan {{.*}} -> memref<?x32xi32>{%[[M]]}
// CHECK-LABEL: func.func @dynamic_narrow_odd(
// CHECK:         tensor.dim
// CHECK:         flow.dispatch @inferx_u8s8_Dx32x64::@inferx_u8s8_Dx32x64[%[[N:.+]]](%{{.+}}, %{{.+}}, %[[N]]) : (tensor<?x64xi8>{%[[N]]}, tensor<2048xi8>, index) -> tensor<?x32xi32>{%[[N]]}
// CHECK:         tensor.insert_slice %{{.+}} into %{{.+}}[0, 0] [64, 16] [1, 1] : tensor<64x16xi8> into tensor<64x32xi8>
// CHECK:         %[[PADDED:.+]] = flow.dispatch @inferx_u8s8_8x32x64::@inferx_u8s8_8x32x64({{.*}}) : (tensor<8x64xi8>, tensor<2048xi8>) -> tensor<8x32xi32>
// CHECK:         tensor.extract_slice %[[PADDED]][0, 0] [8, 16] [1, 1] : tensor<8x32xi32> to tensor<8x16xi32>
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x62xi8>, tensor<62x32xi8>)
func.func @dynamic_narrow_odd(%x: tensor<?x64xf32>, %w: tensor<64x32xf32> {inferx.parameter = "dyn.w"},
                              %x8: tensor<8x64xf32>, %w16: tensor<64x16xf32> {inferx.parameter = "narrow.w"},
                              %x62: tensor<8x62xf32>, %w62: tensor<62x32xf32> {inferx.parameter = "odd.w"})
    -> (tensor<?x32xf32>, tensor<8x16xf32>, tensor<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%m) : tensor<?x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x32xf32>) -> tensor<?x32xf32>
  %y = linalg.matmul {inferx.precision = "i8"} ins(%x, %w : tensor<?x64xf32>, tensor<64x32xf32>) outs(%z : tensor<?x32xf32>) -> tensor<?x32xf32>
  %e16 = tensor.empty() : tensor<8x16xf32>
  %z16 = linalg.fill ins(%zero : f32) outs(%e16 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y16 = linalg.matmul {inferx.precision = "i8"} ins(%x8, %w16 : tensor<8x64xf32>, tensor<64x16xf32>) outs(%z16 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %e62 = tensor.empty() : tensor<8x32xf32>
  %z62 = linalg.fill ins(%zero : f32) outs(%e62 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %y62 = linalg.matmul {inferx.precision = "i8"} ins(%x62, %w62 : tensor<8x62xf32>, tensor<62x32xf32>) outs(%z62 : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %y, %y16, %y62 : tensor<?x32xf32>, tensor<8x16xf32>, tensor<8x32xf32>
}

// -----

// int4 in groups of 32 (the RUN lines below; the first ones' default of 128 does not divide
// K=64 and leaves this product alone): the u8s4 kernel reads the int4 weight as stored, packed at load two k-quads to a byte ([N/16][K/8][16][4]: low nibble k = 8j + q, high
// nibble k = 8j + 4 + q), and sums each group in s32 scaled by its f32 scale; the correction is
// sum_g s[g, n] * sum_k w[g, k, n] (at load) times the zero point + 128.
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-quantize-contractions{group-size=32})' 2>/dev/null | filecheck %s --check-prefix=INT4
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-quantize-contractions{group-size=32})' 2>&1 >/dev/null | filecheck %s --check-prefix=INT4-REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-quantize-contractions{group-size=4})' 2>&1 >/dev/null | filecheck %s --check-prefix=INT4-G4
// INT4-REMARK: remark: inferx-quantize-contractions: int4: 64x32 weight 'g.w' stored as int4g32, u8 activations, int4 read as stored, group sums by the VNNI kernel (u8 x s4)
// INT4-G4: remark: inferx-quantize-contractions: int4: 64x32 weight 'g.w' stored as int4g4, requantized to int8 at load, u8 activations, s32 sums by the VNNI kernel (u8 x s8)
// INT4-DAG:    #[[LOW:.+]] = affine_map<(d0, d1, d2, d3) -> (d1 * 8 + d3, d0 * 16 + d2)>
// INT4-DAG:    #[[HIGH:.+]] = affine_map<(d0, d1, d2, d3) -> (d1 * 8 + d3 + 4, d0 * 16 + d2)>
// INT4:        stream.executable private @inferx_u8s4_4x32x64g32
// INT4:          func.func private @inferx_u8s4_tile(memref<i8>, index, memref<i8>, index, memref<f32>, index, memref<f32>, index, i64, i64, i64, i64, i64, i64, i64, i64)
// INT4-LABEL:  func.func @int4_groups(
// INT4-SAME:     %[[X:.+]]: tensor<4x64xf32>, %[[W:.+]]: tensor<2x32x32xi4> {inferx.parameter = "g.w#q:int4g32"}, %[[S:.+]]: tensor<2x32xf32> {inferx.parameter = "g.w#q:int4g32:scale"})
// INT4:          %[[XQ:.+]] = linalg.generic {{.*}} outs({{.*}} : tensor<4x64xi8>)
// INT4:          %[[FLAT:.+]] = tensor.collapse_shape %[[W]] {{\[}}[0, 1], [2]] : tensor<2x32x32xi4> into tensor<64x32xi4>
// INT4:          %[[PACKED:.+]] = linalg.generic {indexing_maps = [#[[LOW]], #[[HIGH]], #{{.+}}], {{.*}} ins(%[[FLAT]], %[[FLAT]] : tensor<64x32xi4>, tensor<64x32xi4>) outs({{.*}} : tensor<2x8x16x4xi8>)
// INT4:            arith.andi
// INT4:            arith.shli
// INT4:            arith.ori
// INT4:          %[[BYTES:.+]] = tensor.collapse_shape %[[PACKED]] {{\[}}[0, 1, 2, 3]] : tensor<2x8x16x4xi8> into tensor<1024xi8>
// INT4:          %[[SUMS:.+]] = flow.dispatch @inferx_u8s4_4x32x64g32::@inferx_u8s4_4x32x64g32(%[[XQ]], %[[BYTES]], %[[S]]) : (tensor<4x64xi8>, tensor<1024xi8>, tensor<2x32xf32>) -> tensor<4x32xf32>
// INT4:          %[[CORR:.+]] = linalg.generic {{.*}} iterator_types = ["reduction", "reduction", "parallel"]} ins(%[[W]], %[[S]] : tensor<2x32x32xi4>, tensor<2x32xf32>) outs({{.*}} : tensor<32xf32>)
// INT4:          linalg.generic {{.*}} ins(%[[SUMS]], %[[CORR]], {{.*}}) outs({{.*}} : tensor<4x32xf32>)
// INT4-NOT:      linalg.matmul
func.func @int4_groups(%x: tensor<4x64xf32>, %w: tensor<64x32xf32> {inferx.parameter = "g.w"}) -> tensor<4x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  %y = linalg.matmul {inferx.precision = "i4"} ins(%x, %w : tensor<4x64xf32>, tensor<64x32xf32>) outs(%z : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
