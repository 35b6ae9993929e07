// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-dispatch-config{target=h200})' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-dispatch-config{target=h200})' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-dispatch-config{target=h200 rules=false})' | filecheck %s --check-prefix=NORULES

// An im2col window copy (f32 -> f16) on a CUDA target: whole 56-element rows per workgroup,
// 8 elements per thread (7 threads a row), 28 rows (196 threads, within 256); every other loop 1.
// REMARK: remark: inferx-dispatch-config: rule: window copy, whole rows per workgroup
// CHECK-DAG:   #[[TI:.+]] = #iree_codegen.translation_info<pipeline = #iree_gpu.pipeline<TileAndFuse> workgroup_size = [196, 1, 1] subgroup_size = 32>
// CHECK-DAG:   #[[CI:.+]] = #iree_codegen.compilation_info<lowering_config = #iree_gpu.lowering_config<{thread = [1, 1, 1, 1, 8], workgroup = [1, 1, 1, 28, 56]}>, translation_info = #[[TI]]>
// CHECK-LABEL: hal.executable private @im2col
// CHECK-SAME:    source = "rule"
// CHECK:         linalg.generic {{.*}} attrs = {compilation_info = #[[CI]]}
// NORULES-LABEL: hal.executable private @im2col
// NORULES-SAME:    source = "IREE"
// NORULES-NOT:     compilation_info
#window = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 + d3, d2 + d4)>
#id5 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
hal.executable private @im2col {
  hal.executable.variant public @cuda target(#hal.executable.target<"cuda", "cuda-nvptx-fb">) {
    builtin.module {
      func.func @f(%x: tensor<64x58x58xf32>, %o: tensor<64x3x3x56x56xf16>) -> tensor<64x3x3x56x56xf16> {
        %r = linalg.generic {indexing_maps = [#window, #id5], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<64x58x58xf32>) outs(%o : tensor<64x3x3x56x56xf16>) {
        ^bb0(%in: f32, %out: f16):
          %t = arith.truncf %in : f32 to f16
          linalg.yield %t : f16
        } -> tensor<64x3x3x56x56xf16>
        return %r : tensor<64x3x3x56x56xf16>
      }
    }
  }
}

// -----

// Rows of 7 (ResNet's last stage): one element per thread, 7 threads a row, 7 rows: 49 threads.
// CHECK-LABEL: hal.executable private @short_rows
// CHECK-SAME:    thread = [1, 1, 1, 1, 1], workgroup = [1, 1, 1, 7, 7]
// CHECK-SAME:    workgroup_size = [49, 1, 1]
#window = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 + d3, d2 + d4)>
#id5 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
hal.executable private @short_rows {
  hal.executable.variant public @cuda target(#hal.executable.target<"cuda", "cuda-nvptx-fb">) {
    builtin.module {
      func.func @f(%x: tensor<512x9x9xf32>, %o: tensor<512x3x3x7x7xf16>) -> tensor<512x3x3x7x7xf16> {
        %r = linalg.generic {indexing_maps = [#window, #id5], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<512x9x9xf32>) outs(%o : tensor<512x3x3x7x7xf16>) {
        ^bb0(%in: f32, %out: f16):
          %t = arith.truncf %in : f32 to f16
          linalg.yield %t : f16
        } -> tensor<512x3x3x7x7xf16>
        return %r : tensor<512x3x3x7x7xf16>
      }
    }
  }
}

// -----

// An elementwise op with plain (projected permutation) maps: not a window copy; IREE keeps it.
// CHECK-LABEL: hal.executable private @elementwise
// CHECK-SAME:    source = "IREE"
// CHECK-NOT:     compilation_info
#id2 = affine_map<(d0, d1) -> (d0, d1)>
hal.executable private @elementwise {
  hal.executable.variant public @cuda target(#hal.executable.target<"cuda", "cuda-nvptx-fb">) {
    builtin.module {
      func.func @f(%x: tensor<64x64xf32>, %o: tensor<64x64xf16>) -> tensor<64x64xf16> {
        %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x64xf32>) outs(%o : tensor<64x64xf16>) {
        ^bb0(%in: f32, %out: f16):
          %t = arith.truncf %in : f32 to f16
          linalg.yield %t : f16
        } -> tensor<64x64xf16>
        return %r : tensor<64x64xf16>
      }
    }
  }
}
