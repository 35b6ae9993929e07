// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-dispatch-config)' | filecheck %s --check-prefix=DEFAULT
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-dispatch-config{candidate=1})' | filecheck %s --check-prefix=C1
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-dispatch-config{candidate=2})' | filecheck %s --check-prefix=C2
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-dispatch-config{candidate=1})' | filecheck %s --check-prefix=AVX512

// An im2col-style copy that IREE lowers with DoubleTilingExpert. Without a tuning database
// IREE keeps its choice; candidate K attaches the K-th distinct rule proposal: the innermost
// loop (56) vectorized by the f32 lanes that divide it (8 on AVX2: 16 and 32 do not divide 56,
// so only the workgroup split differs between the 2 distinct candidates; one 16-lane vector
// on AVX-512), workgroups sized to half the L2 (candidate 1) or the L1 (candidate 2).
// DEFAULT-LABEL: hal.executable private @copy
// DEFAULT-SAME:    inferx.config = {candidates = 2 : i64, config = "", signature = "linalg.generic|[64, 3, 3, 56, 56]|{{.*}}", source = "IREE"}
// DEFAULT-NOT:     compilation_info
// C1-DAG:        #[[CFG:.+]] = #iree_cpu.lowering_config<distribution = [1, 3, 3, 28, 56], vector_common_parallel = [1, 1, 1, 1, 8]>
// C1-DAG:        #[[TI:.+]] = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>
// C1-DAG:        #[[CI:.+]] = #iree_codegen.compilation_info<lowering_config = #[[CFG]], translation_info = #[[TI]]>
// C1-LABEL:      hal.executable private @copy
// C1-SAME:         source = "candidate 1"
// C1:              linalg.generic {{.*}} attrs = {compilation_info = #[[CI]]}
// C2-LABEL:      hal.executable private @copy
// C2-SAME:         distribution = [1, 3, 3, 7, 56], vector_common_parallel = [1, 1, 1, 1, 8]
// C2-SAME:         source = "candidate 2"
// AVX512-LABEL:  hal.executable private @copy
// AVX512-SAME:     vector_common_parallel = [1, 1, 1, 1, 16]
#copy_src = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 + d3, d2 + d4)>
#id5 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
hal.executable private @copy attributes {inferx.iree_config = {translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>}} {
  hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {
      func.func @f(%x: tensor<64x58x58xf32>, %o: tensor<64x3x3x56x56xf32>) -> tensor<64x3x3x56x56xf32> {
        %r = linalg.generic {indexing_maps = [#copy_src, #id5], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<64x58x58xf32>) outs(%o : tensor<64x3x3x56x56xf32>) {
        ^bb0(%in: f32, %out: f32):
          linalg.yield %in : f32
        } -> tensor<64x3x3x56x56xf32>
        return %r : tensor<64x3x3x56x56xf32>
      }
    }
  }
}

