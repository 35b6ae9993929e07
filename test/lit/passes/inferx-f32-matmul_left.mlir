// REQUIRES: c-compiler
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-f32-matmul)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-f32-matmul)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-f32-matmul)' 2>&1 | filecheck %s --check-prefix=NOAVX512
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-f32-matmul)' 2>&1 | filecheck %s --check-prefix=NOKERNEL

// The weight on the left (a convolution as a matmul, w[F, C] x columns[C, pixels]): the
// weight is packed at load in blocks of 14 rows (the kernel's register tile), 30 rows padded to
// 42 (element (mb, k, r) = w[14 mb + r, k]); the bias (the init, a broadcast of a parameter),
// the residual add and the ReLU after it run in the kernel's generated epilogue, which reads
// the bias vector and the residual (its own variant, `_e<tag>`, its object built from the
// generated C), and the dispatch's result replaces the ReLU's.
// REMARK:      remark: inferx-f32-matmul: f32 30x40 weight x 40x50 activations on AVX-512 (inferx_f32l, weight packed at load)
// REMARK-NEXT: remark: inferx-f32-matmul: fused 2 ops after it (linalg.generic, linalg.generic) in its epilogue
// NOAVX512-NOT: remark
// NOAVX512-NOT: flow.dispatch
// A target whose record leaves f32 matmuls to IREE (Target.f32_kernel: off where our kernel
// measured no faster, and on records naming no Intel core) says so.
// NOKERNEL: remark: inferx-f32-matmul: declined: target 'x86-avx512-vnni' leaves f32 matmuls to IREE, whose mmt4d measured as fast there (Target.f32_kernel)
// NOKERNEL-LABEL: func.func @pointwise_conv(
// NOKERNEL-NOT:     flow.dispatch
// NOKERNEL:         linalg.matmul
// CHECK:       #[[PACK:.+]] = affine_map<(d0, d1, d2) -> (d0 * 14 + d2, d1)>
// CHECK:       stream.executable private @inferx_f32l_30x50x40_e[[TAG:[0-9a-f]+]] attributes {{.*}}path = "{{.*}}/f32_gemm_[[TAG]]-{{[0-9a-f]+}}.o"
// CHECK:         func.func private @inferx_f32l_[[TAG]]_tile(memref<f32>, index, memref<f32>, index, memref<f32>, index, memref<f32>, index, memref<f32>, index, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK:         func.func @inferx_f32l_30x50x40_e[[TAG]]({{.*}}fused = ["linalg.generic", "linalg.generic"]
// CHECK-LABEL: func.func @pointwise_conv(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<40x50xf32>, %[[W:[^:]+]]: tensor<30x40xf32> {inferx.parameter = "c.w"}, %[[B:[^:]+]]: tensor<30xf32> {inferx.parameter = "c.b"}, %[[R:[^:]+]]: tensor<30x50xf32>
// CHECK:         %[[PADDED:.+]] = tensor.insert_slice %[[W]] into %{{.+}}[0, 0] [30, 40] [1, 1] : tensor<30x40xf32> into tensor<42x40xf32>
// CHECK:         %[[BLOCKS:.+]] = linalg.generic {indexing_maps = [#[[PACK]], {{.*}}]{{.*}} ins(%[[PADDED]] : tensor<42x40xf32>) outs(%{{.+}} : tensor<3x40x14xf32>)
// CHECK:         %[[FLAT:.+]] = tensor.collapse_shape %[[BLOCKS]] {{\[}}[0, 1, 2]] : tensor<3x40x14xf32> into tensor<1680xf32>
// CHECK:         %[[Y:.+]] = flow.dispatch @inferx_f32l_30x50x40_e[[TAG]]::@inferx_f32l_30x50x40_e[[TAG]](%[[FLAT]], %[[X]], %[[B]], %[[R]]) : (tensor<1680xf32>, tensor<40x50xf32>, tensor<30xf32>, tensor<30x50xf32>) -> tensor<30x50xf32>
// CHECK-NEXT:    return %[[Y]]
// CHECK-NOT:     linalg.matmul
#id = affine_map<(d0, d1) -> (d0, d1)>

func.func @pointwise_conv(%x: tensor<40x50xf32>, %w: tensor<30x40xf32> {inferx.parameter = "c.w"},
                          %b: tensor<30xf32> {inferx.parameter = "c.b"}, %res: tensor<30x50xf32>) -> tensor<30x50xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<30x50xf32>
  %init = linalg.broadcast ins(%b : tensor<30xf32>) outs(%e : tensor<30x50xf32>) dimensions = [1]
  %y = linalg.matmul ins(%w, %x : tensor<30x40xf32>, tensor<40x50xf32>) outs(%init : tensor<30x50xf32>) -> tensor<30x50xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y, %res : tensor<30x50xf32>, tensor<30x50xf32>) outs(%e : tensor<30x50xf32>) {
  ^bb0(%a: f32, %r: f32, %o: f32):
    %t = arith.addf %a, %r : f32
    linalg.yield %t : f32
  } -> tensor<30x50xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%s : tensor<30x50xf32>) outs(%e : tensor<30x50xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c = arith.cmpf ugt, %a, %zero : f32
    %t = arith.select %c, %a, %zero : f32
    linalg.yield %t : f32
  } -> tensor<30x50xf32>
  return %relu : tensor<30x50xf32>
}

// -----

// Declined epilogues, the product still on the kernel: an op it has no vector code for (exp: no
// math library in the freestanding kernel) stays IREE's, as does a transpose of the product
// (the kernel stores the product's layout: the bias init is then added after it); a dynamic
// pixel count leaves the matmul to IREE.
// REMARK:      remark: inferx-f32-matmul: f32 8x16 weight x 16x20 activations on AVX-512 (inferx_f32l, weight packed at load)
// REMARK-NEXT: remark: inferx-f32-matmul: the ops after it stay IREE's: exp (the kernel is freestanding: no vector math library)
// CHECK-LABEL: func.func @exp_after(
// CHECK:         %[[Y:.+]] = flow.dispatch @inferx_f32l_8x20x16::@inferx_f32l_8x20x16(
// CHECK:         linalg.generic {{.*}} ins(%[[Y]] : tensor<8x20xf32>)
// CHECK:           math.exp

#id = affine_map<(d0, d1) -> (d0, d1)>

func.func @exp_after(%x: tensor<16x20xf32>, %w: tensor<8x16xf32> {inferx.parameter = "e.w"}) -> tensor<8x20xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x20xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x20xf32>) -> tensor<8x20xf32>
  %y = linalg.matmul ins(%w, %x : tensor<8x16xf32>, tensor<16x20xf32>) outs(%z : tensor<8x20xf32>) -> tensor<8x20xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y : tensor<8x20xf32>) outs(%e : tensor<8x20xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.exp %a : f32
    linalg.yield %t : f32
  } -> tensor<8x20xf32>
  return %g : tensor<8x20xf32>
}

// -----

// A transpose of the product: the kernel stores the product's layout, so the epilogue stops
// before it (the plan with the transpose refused, the one without it kept): here the bias init
// alone runs in the kernel, the transpose stays IREE's.
// REMARK:      remark: inferx-f32-matmul: f32 8x16 weight x 16x20 activations on AVX-512 (inferx_f32l, weight packed at load)
// REMARK-NEXT: remark: inferx-f32-matmul: fused 0 ops after it (the init) in its epilogue
// CHECK-LABEL: func.func @transposed_after(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<16x20xf32>, %{{[^:]+}}: tensor<8x16xf32> {inferx.parameter = "t.w"}, %[[B:[^:]+]]: tensor<8xf32>
// CHECK:         %[[C:.+]] = flow.dispatch @inferx_f32l_8x20x16_e{{[0-9a-f]+}}::@inferx_f32l_8x20x16_e{{[0-9a-f]+}}(%{{.+}}, %[[X]], %[[B]])
// CHECK-NEXT:    linalg.transpose ins(%[[C]] : tensor<8x20xf32>)

func.func @transposed_after(%x: tensor<16x20xf32>, %w: tensor<8x16xf32> {inferx.parameter = "t.w"},
                            %b: tensor<8xf32> {inferx.parameter = "t.b"}) -> tensor<20x8xf32> {
  %e = tensor.empty() : tensor<8x20xf32>
  %et = tensor.empty() : tensor<20x8xf32>
  %init = linalg.broadcast ins(%b : tensor<8xf32>) outs(%e : tensor<8x20xf32>) dimensions = [1]
  %y = linalg.matmul ins(%w, %x : tensor<8x16xf32>, tensor<16x20xf32>) outs(%init : tensor<8x20xf32>) -> tensor<8x20xf32>
  %t = linalg.transpose ins(%y : tensor<8x20xf32>) outs(%et : tensor<20x8xf32>) permutation = [1, 0]
  return %t : tensor<20x8xf32>
}

// -----

// REMARK: remark: inferx-f32-matmul: declined: dynamic operands (the left-weight kernel takes static shapes)
// CHECK-LABEL: func.func @dynamic_columns(
// CHECK-NOT:     flow.dispatch
// CHECK:         linalg.matmul

func.func @dynamic_columns(%x: tensor<16x?xf32>, %w: tensor<8x16xf32> {inferx.parameter = "d.w"}, %z: tensor<8x?xf32>) -> tensor<8x?xf32> {
  %y = linalg.matmul ins(%w, %x : tensor<8x16xf32>, tensor<16x?xf32>) outs(%z : tensor<8x?xf32>) -> tensor<8x?xf32>
  return %y : tensor<8x?xf32>
}
