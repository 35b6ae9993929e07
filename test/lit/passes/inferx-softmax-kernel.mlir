// REQUIRES: c-compiler
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-softmax-kernel)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-softmax-kernel)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: env CC=/nonexistent/cc inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-softmax-kernel)' 2>&1 | filecheck %s --check-prefix=NOCC

#x = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row = affine_map<(d0, d1, d2) -> (d0, d1)>
#row1 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>

// torch-mlir's softmax over the last dim (a max with its argmax index, x - max, exp, the sum
// into a [.., 1] tensor, the division): x viewed as [rows, N] goes to the kernel's dispatch (24
// rows of 20: 24 rows a workgroup, its object linked by path), the result is reshaped back and
// the chain is gone.
// REMARK: remark: inferx-softmax-kernel: softmax over 20 values, 24 rows, on our AVX-512 kernel
// Without a C compiler the chain stays IREE's, with a remark naming the missing compiler.
// NOCC: remark: inferx-softmax-kernel: softmax left to IREE: CC='/nonexistent/cc' is not an executable
// NOCC-NOT: flow.dispatch
// NOCC: arith.divf
// CHECK:       stream.executable private @inferx_softmax_24x20 attributes {hal.executable.objects = #hal.executable.objects<{{.*}}path = "{{.*}}/softmax_rows-{{[0-9a-f]+}}.o"
// CHECK:         stream.executable.export public @inferx_softmax_24x20 workgroups() -> (index, index, index)
// CHECK:         func.func private @inferx_softmax_rows(memref<f32>, index, memref<f32>, index, i64, i64, i64, i64) attributes {hal.import.static, llvm.bareptr = true}
// CHECK:         func.func @inferx_softmax_24x20({{.*}}) attributes {inferx.config = {{.*}}source = "rule (inferx-softmax-kernel)"
// CHECK-SAME:      inferx.dispatch = {{.*}}root = "inferx_softmax_rows (C, AVX-512)"
// CHECK:           call @inferx_softmax_rows({{.*}}) : (memref<f32>, index, memref<f32>, index, i64, i64, i64, i64) -> ()
// CHECK-LABEL: func.func @softmax(
// CHECK-SAME:    %[[X:.+]]: tensor<2x12x20xf32>
// CHECK:         %[[ROWS:.+]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<2x12x20xf32> into tensor<24x20xf32>
// CHECK:         %[[Y:.+]] = flow.dispatch @inferx_softmax_24x20::@inferx_softmax_24x20(%[[ROWS]]) : (tensor<24x20xf32>) -> tensor<24x20xf32>
// CHECK:         %[[OUT:.+]] = tensor.expand_shape %[[Y]] {{\[}}[0, 1], [2]] output_shape [2, 12, 20] : tensor<24x20xf32> into tensor<2x12x20xf32>
// CHECK-NOT:     math.exp
// CHECK-NOT:     arith.divf
// CHECK:         return %[[OUT]]
func.func @softmax(%x: tensor<2x12x20xf32>) -> tensor<2x12x20xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : i64
  %ei = tensor.empty() : tensor<2x12xi64>
  %fi = linalg.fill ins(%c0 : i64) outs(%ei : tensor<2x12xi64>) -> tensor<2x12xi64>
  %em = tensor.empty() : tensor<2x12xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%em : tensor<2x12xf32>) -> tensor<2x12xf32>
  %max:2 = linalg.generic {indexing_maps = [#x, #row, #row], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<2x12x20xf32>) outs(%fm, %fi : tensor<2x12xf32>, tensor<2x12xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 2 : index
    %ii = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %gt, %ii, %idx : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<2x12xf32>, tensor<2x12xi64>)
  %max1 = tensor.expand_shape %max#0 [[0], [1, 2]] output_shape [2, 12, 1] : tensor<2x12xf32> into tensor<2x12x1xf32>
  %e0 = tensor.empty() : tensor<2x12x20xf32>
  %sub = linalg.generic {indexing_maps = [#x, #row1, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %max1 : tensor<2x12x20xf32>, tensor<2x12x1xf32>) outs(%e0 : tensor<2x12x20xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<2x12x20xf32>
  %exp = linalg.generic {indexing_maps = [#x, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%sub : tensor<2x12x20xf32>) outs(%e0 : tensor<2x12x20xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.exp %a : f32
    linalg.yield %v : f32
  } -> tensor<2x12x20xf32>
  %es = tensor.empty() : tensor<2x12x1xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<2x12x1xf32>) -> tensor<2x12x1xf32>
  %sum = linalg.generic {indexing_maps = [#x, #row1], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%exp : tensor<2x12x20xf32>) outs(%fs : tensor<2x12x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<2x12x1xf32>
  %y = linalg.generic {indexing_maps = [#x, #row1, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%exp, %sum : tensor<2x12x20xf32>, tensor<2x12x1xf32>) outs(%e0 : tensor<2x12x20xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.divf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<2x12x20xf32>
  return %y : tensor<2x12x20xf32>
}
