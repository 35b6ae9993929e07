// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-dispatch-config{candidate=1})' | filecheck %s

// IREE chose another pipeline (here the convolution one): the rules do not model it.
// CHECK-LABEL: hal.executable private @other_pipeline
// CHECK-SAME:    candidates = 0 : i64{{.*}}source = "IREE"
// CHECK-NOT:     compilation_info
#id2 = affine_map<(d0, d1) -> (d0, d1)>
hal.executable private @other_pipeline attributes {inferx.iree_config = {translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<ConvTileAndDecomposeExpert>>}} {
  hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {
      func.func @f(%x: tensor<64x64xf32>, %o: tensor<64x64xf32>) -> tensor<64x64xf32> {
        %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x64xf32>) outs(%o : tensor<64x64xf32>) {
        ^bb0(%in: f32, %out: f32):
          linalg.yield %in : f32
        } -> tensor<64x64xf32>
        return %r : tensor<64x64xf32>
      }
    }
  }
}

// -----

// Without IREE's configuration recorded, nothing says which pipeline the rules would feed.
// CHECK-LABEL: hal.executable private @no_iree_config
// CHECK-SAME:    source = "IREE"
// CHECK-NOT:     compilation_info
#id2 = affine_map<(d0, d1) -> (d0, d1)>
hal.executable private @no_iree_config {
  hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {
      func.func @f(%x: tensor<64x64xf32>, %o: tensor<64x64xf32>) -> tensor<64x64xf32> {
        %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x64xf32>) outs(%o : tensor<64x64xf32>) {
        ^bb0(%in: f32, %out: f32):
          linalg.yield %in : f32
        } -> tensor<64x64xf32>
        return %r : tensor<64x64xf32>
      }
    }
  }
}

// -----

// A dynamic loop: no static tile fits an unknown extent.
// CHECK-LABEL: hal.executable private @dynamic
// CHECK-SAME:    candidates = 0 : i64
// CHECK-NOT:     compilation_info
#id2 = affine_map<(d0, d1) -> (d0, d1)>
hal.executable private @dynamic attributes {inferx.iree_config = {translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>}} {
  hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {
      func.func @f(%x: tensor<?x64xf32>, %o: tensor<?x64xf32>) -> tensor<?x64xf32> {
        %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<?x64xf32>) outs(%o : tensor<?x64xf32>) {
        ^bb0(%in: f32, %out: f32):
          linalg.yield %in : f32
        } -> tensor<?x64xf32>
        return %r : tensor<?x64xf32>
      }
    }
  }
}

// -----

// IREE's own executables (initializers run once at load, encodings) are left alone.
// CHECK-LABEL: hal.executable private @_initializer_0
// CHECK-NOT:     inferx.config
// CHECK-NOT:     compilation_info
#id2 = affine_map<(d0, d1) -> (d0, d1)>
hal.executable private @_initializer_0 attributes {inferx.iree_config = {translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>}} {
  hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {
      func.func @f(%x: tensor<64x64xf32>, %o: tensor<64x64xf32>) -> tensor<64x64xf32> {
        %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x64xf32>) outs(%o : tensor<64x64xf32>) {
        ^bb0(%in: f32, %out: f32):
          linalg.yield %in : f32
        } -> tensor<64x64xf32>
        return %r : tensor<64x64xf32>
      }
    }
  }
}

// -----

// A reduction (here a row sum): left to IREE (the rules model all-parallel generics only).
// CHECK-LABEL: hal.executable private @row_sum
// CHECK-SAME:    candidates = 0 : i64
// CHECK-NOT:     compilation_info
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
hal.executable private @row_sum attributes {inferx.iree_config = {translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>}} {
  hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {
      func.func @f(%x: tensor<256x1024xf32>, %o: tensor<256xf32>) -> tensor<256xf32> {
        %r = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<256x1024xf32>) outs(%o : tensor<256xf32>) {
        ^bb0(%in: f32, %acc: f32):
          %s = arith.addf %in, %acc : f32
          linalg.yield %s : f32
        } -> tensor<256xf32>
        return %r : tensor<256xf32>
      }
    }
  }
}
