// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-dispatch-config)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-dispatch-config)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=h200},inferx-dispatch-config{rules=false})' | filecheck %s --check-prefix=NORULES

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

// A small elementwise op (4096 elements, under the elementwise rule's 65536): IREE keeps its configuration.
// CHECK-LABEL: hal.executable private @elementwise
// CHECK-SAME:    source = "IREE"
// CHECK-NOT:     attrs = {compilation_info
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

// -----

// A large elementwise epilogue (a 1024x3072 matmul's bias add and f16 truncation, its product
// coming from inferx-hopper-matmul's kernel): rows of 3072 cut into tiles of 1024, 4 elements per
// thread, 256 threads.
// REMARK: remark: inferx-dispatch-config: rule: elementwise, 4 elements a thread, up to 256 threads
// CHECK-LABEL: hal.executable private @epilogue
// CHECK-SAME:    thread = [1, 4], workgroup = [1, 1024]
// CHECK-SAME:    workgroup_size = [256, 1, 1]
// CHECK-SAME:    source = "rule"
// CHECK:         linalg.generic {{.*}} attrs =  {compilation_info = #
// NORULES-LABEL: hal.executable private @epilogue
// NORULES-SAME:    source = "IREE"
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
hal.executable private @epilogue {
  hal.executable.variant public @cuda target(#hal.executable.target<"cuda", "cuda-nvptx-fb">) {
    builtin.module {
      func.func @f(%x: tensor<1024x3072xf32>, %b: tensor<3072xf32>, %o: tensor<1024x3072xf16>) -> tensor<1024x3072xf16> {
        %r = linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]} ins(%x, %b : tensor<1024x3072xf32>, tensor<3072xf32>) outs(%o : tensor<1024x3072xf16>) {
        ^bb0(%in: f32, %bias: f32, %out: f16):
          %s = arith.addf %in, %bias : f32
          %t = arith.truncf %s : f32 to f16
          linalg.yield %t : f16
        } -> tensor<1024x3072xf16>
        return %r : tensor<1024x3072xf16>
      }
    }
  }
}

// -----

// A transposing epilogue with short rows (ResNet-50 b8's back to NCHW: 8x1024x196): 196-element
// rows (49 threads of 4), 4 of them per workgroup (196 threads).
// CHECK-LABEL: hal.executable private @transpose_epilogue
// CHECK-SAME:    thread = [1, 1, 4], workgroup = [1, 4, 196]
// CHECK-SAME:    workgroup_size = [196, 1, 1]
#in3 = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
hal.executable private @transpose_epilogue {
  hal.executable.variant public @cuda target(#hal.executable.target<"cuda", "cuda-nvptx-fb">) {
    builtin.module {
      func.func @f(%x: tensor<1024x8x196xf32>, %o: tensor<8x1024x196xf16>) -> tensor<8x1024x196xf16> {
        %r = linalg.generic {indexing_maps = [#in3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<1024x8x196xf32>) outs(%o : tensor<8x1024x196xf16>) {
        ^bb0(%in: f32, %out: f16):
          %z = arith.constant 0.0 : f32
          %m = arith.maximumf %in, %z : f32
          %t = arith.truncf %m : f32 to f16
          linalg.yield %t : f16
        } -> tensor<8x1024x196xf16>
        return %r : tensor<8x1024x196xf16>
      }
    }
  }
}

// -----

// A cast of a softmax in the same dispatch (attention probabilities to f16): linalg.softmax
// reduces along the row the rule would tile (IREE 3.13 then unrolled the whole row into 90k lines
// of LLVM IR, whose VectorCombine ran without end); IREE keeps its configuration.
// CHECK-LABEL: hal.executable private @after_softmax
// CHECK-SAME:    source = "IREE"
// CHECK-NOT:     compilation_info
#id3s = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
hal.executable private @after_softmax {
  hal.executable.variant public @cuda target(#hal.executable.target<"cuda", "cuda-nvptx-fb">) {
    builtin.module {
      func.func @f(%x: tensor<64x128x2688xf32>, %p: tensor<64x128x2688xf32>, %o: tensor<64x128x2688xf16>) -> tensor<64x128x2688xf16> {
        %s = linalg.softmax dimension(2) ins(%x : tensor<64x128x2688xf32>) outs(%p : tensor<64x128x2688xf32>) -> tensor<64x128x2688xf32>
        %r = linalg.generic {indexing_maps = [#id3s, #id3s], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<64x128x2688xf32>) outs(%o : tensor<64x128x2688xf16>) {
        ^bb0(%in: f32, %out: f16):
          %t = arith.truncf %in : f32 to f16
          linalg.yield %t : f16
        } -> tensor<64x128x2688xf16>
        return %r : tensor<64x128x2688xf16>
      }
    }
  }
}

// -----

// An elementwise op fed by a reduction in the same dispatch (a layer norm's last step): the rule
// does not model the reduction's tiling; IREE keeps its configuration.
// CHECK-LABEL: hal.executable private @after_reduction
// CHECK-SAME:    source = "IREE"
// CHECK-NOT:     compilation_info
#id2r = affine_map<(d0, d1) -> (d0, d1)>
#rowsum = affine_map<(d0, d1) -> (d0)>
hal.executable private @after_reduction {
  hal.executable.variant public @cuda target(#hal.executable.target<"cuda", "cuda-nvptx-fb">) {
    builtin.module {
      func.func @f(%x: tensor<1024x768xf32>, %acc: tensor<1024xf32>, %o: tensor<1024x768xf32>) -> tensor<1024x768xf32> {
        %sum = linalg.generic {indexing_maps = [#id2r, #rowsum], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<1024x768xf32>) outs(%acc : tensor<1024xf32>) {
        ^bb0(%in: f32, %a: f32):
          %s = arith.addf %in, %a : f32
          linalg.yield %s : f32
        } -> tensor<1024xf32>
        %r = linalg.generic {indexing_maps = [#id2r, #rowsum, #id2r], iterator_types = ["parallel", "parallel"]} ins(%x, %sum : tensor<1024x768xf32>, tensor<1024xf32>) outs(%o : tensor<1024x768xf32>) {
        ^bb0(%in: f32, %s: f32, %out: f32):
          %d = arith.subf %in, %s : f32
          linalg.yield %d : f32
        } -> tensor<1024x768xf32>
        return %r : tensor<1024x768xf32>
      }
    }
  }
}

// -----

// An attention whose output is transposed in the same dispatch: the elementwise root is the
// transpose, but the dispatch computes the attention too (IREE's TileAndFuse failed with the
// elementwise configuration there); IREE keeps its own.
// CHECK-LABEL: hal.executable private @attention_then_transpose
// CHECK-SAME:    source = "IREE"
// CHECK-NOT:     attrs = {compilation_info
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d3, d2)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d3, d4)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#t_in = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
#t_out = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
hal.executable private @attention_then_transpose {
  hal.executable.variant public @cuda target(#hal.executable.target<"cuda", "cuda-nvptx-fb">) {
    builtin.module {
      func.func @f(%q: tensor<96x128x64xf16>, %k: tensor<96x128x64xf16>, %v: tensor<96x128x64xf16>, %init: tensor<96x128x64xf32>, %o: tensor<128x96x64xf16>) -> tensor<128x96x64xf16> {
        %scale = arith.constant 0.125 : f32
        %a = iree_linalg_ext.attention <indexing_maps = [#q, #k, #v, #s, #o]> ins(%q, %k, %v, %scale : tensor<96x128x64xf16>, tensor<96x128x64xf16>, tensor<96x128x64xf16>, f32) outs(%init : tensor<96x128x64xf32>) {
        ^bb0(%score: f32):
          iree_linalg_ext.yield %score : f32
        } -> tensor<96x128x64xf32>
        %r = linalg.generic {indexing_maps = [#t_in, #t_out], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a : tensor<96x128x64xf32>) outs(%o : tensor<128x96x64xf16>) {
        ^bb0(%in: f32, %out: f16):
          %t = arith.truncf %in : f32 to f16
          linalg.yield %t : f16
        } -> tensor<128x96x64xf16>
        return %r : tensor<128x96x64xf16>
      }
    }
  }
}

// -----

// A split into attention heads (8x128x12x64 stored as 8x12x128x64): the output's outer dims are
// permuted, its innermost is the innermost loop, so the rule applies (64-element rows, 12 a
// workgroup: 192 threads).
// CHECK-LABEL: hal.executable private @heads_split
// CHECK-SAME:    thread = [1, 1, 1, 4], workgroup = [1, 1, 12, 64]
// CHECK-SAME:    source = "rule"
#in4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#heads = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
hal.executable private @heads_split {
  hal.executable.variant public @cuda target(#hal.executable.target<"cuda", "cuda-nvptx-fb">) {
    builtin.module {
      func.func @f(%x: tensor<8x128x12x64xf32>, %o: tensor<8x12x128x64xf16>) -> tensor<8x12x128x64xf16> {
        %r = linalg.generic {indexing_maps = [#in4, #heads], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<8x128x12x64xf32>) outs(%o : tensor<8x12x128x64xf16>) {
        ^bb0(%in: f32, %out: f16):
          %t = arith.truncf %in : f32 to f16
          linalg.yield %t : f16
        } -> tensor<8x12x128x64xf16>
        return %r : tensor<8x12x128x64xf16>
      }
    }
  }
}

// -----

// Keys transposed for attention (8x128x768 written as 8x768x128): the innermost loop strides the
// output, and the rule's configuration made it 5x slower on an H200; IREE keeps its own.
// CHECK-LABEL: hal.executable private @keys_transposed
// CHECK-SAME:    source = "IREE"
// CHECK-NOT:     attrs = {compilation_info
#in3k = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#bias = affine_map<(d0, d1, d2) -> (d2)>
#kt = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
hal.executable private @keys_transposed {
  hal.executable.variant public @cuda target(#hal.executable.target<"cuda", "cuda-nvptx-fb">) {
    builtin.module {
      func.func @f(%x: tensor<8x128x768xf32>, %b: tensor<768xf32>, %o: tensor<8x768x128xf16>) -> tensor<8x768x128xf16> {
        %r = linalg.generic {indexing_maps = [#in3k, #bias, #kt], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %b : tensor<8x128x768xf32>, tensor<768xf32>) outs(%o : tensor<8x768x128xf16>) {
        ^bb0(%in: f32, %bb: f32, %out: f16):
          %s = arith.addf %in, %bb : f32
          %t = arith.truncf %s : f32 to f16
          linalg.yield %t : f16
        } -> tensor<8x768x128xf16>
        return %r : tensor<8x768x128xf16>
      }
    }
  }
}
