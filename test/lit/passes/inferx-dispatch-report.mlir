// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-dispatch-report)' --split-input-file | filecheck %s

// A static matmul: root is the contraction, loops are M, N, K, flops = 2*M*N*K.
// CHECK-LABEL: hal.executable private @matmul_static
// CHECK-SAME:    inferx.dispatch = {element_type = "f32", flops = 65536 : i64, kind = "contraction", linalg_ops = 1 : i64, loops = array<i64: 16, 64, 32>, root = "linalg.matmul"}
hal.executable private @matmul_static {
  hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {
      func.func @f(%a: tensor<16x32xf32>, %b: tensor<32x64xf32>, %c: tensor<16x64xf32>) -> tensor<16x64xf32> {
        %r = linalg.matmul ins(%a, %b : tensor<16x32xf32>, tensor<32x64xf32>) outs(%c : tensor<16x64xf32>) -> tensor<16x64xf32>
        return %r : tensor<16x64xf32>
      }
    }
  }
}

// -----

// A dynamic M: the extent is -1 and flops unknown (-1).
// CHECK-LABEL: hal.executable private @matmul_dynamic
// CHECK-SAME:    flops = -1 : i64
// CHECK-SAME:    loops = array<i64: -1, 64, 32>
hal.executable private @matmul_dynamic {
  hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {
      func.func @f(%a: tensor<?x32xf32>, %b: tensor<32x64xf32>, %c: tensor<?x64xf32>) -> tensor<?x64xf32> {
        %r = linalg.matmul ins(%a, %b : tensor<?x32xf32>, tensor<32x64xf32>) outs(%c : tensor<?x64xf32>) -> tensor<?x64xf32>
        return %r : tensor<?x64xf32>
      }
    }
  }
}

// -----

// An elementwise generic followed by a row reduction: no contraction, so the root is
// the last linalg op, classified as a reduction.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: hal.executable private @exp_then_sum
// CHECK-SAME:    element_type = "f16"
// CHECK-SAME:    kind = "reduction", linalg_ops = 2 : i64, loops = array<i64: 8, 128>, root = "linalg.generic"
hal.executable private @exp_then_sum {
  hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {
      func.func @f(%x: tensor<8x128xf16>, %acc: tensor<8xf16>) -> tensor<8xf16> {
        %e = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
            ins(%x : tensor<8x128xf16>) outs(%x : tensor<8x128xf16>) {
        ^bb0(%in: f16, %out: f16):
          %v = math.exp %in : f16
          linalg.yield %v : f16
        } -> tensor<8x128xf16>
        %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
            ins(%e : tensor<8x128xf16>) outs(%acc : tensor<8xf16>) {
        ^bb0(%in: f16, %out: f16):
          %v = arith.addf %in, %out : f16
          linalg.yield %v : f16
        } -> tensor<8xf16>
        return %s : tensor<8xf16>
      }
    }
  }
}
