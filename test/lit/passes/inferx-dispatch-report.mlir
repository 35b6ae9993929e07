// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-dispatch-report)' --split-input-file | filecheck %s

// A static matmul: root is the contraction, loops are M, N, K, flops = 2*M*N*K.
// CHECK-LABEL: hal.executable private @matmul_static
// CHECK-SAME:    inferx.dispatch = {element_type = "f32", flops = 65536 : i64, fused = [], kind = "contraction", linalg_ops = 1 : i64, loops = array<i64: 16, 64, 32>, root = "linalg.matmul"}
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
// CHECK-SAME:    fused = ["generic:elementwise"], kind = "reduction", linalg_ops = 2 : i64, loops = array<i64: 8, 128>, root = "linalg.generic"
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

// -----

// A named convolution: every loop counts, the reduction ones (c, kh, kw) included:
// 2 * (n=1 f=3 oh=3 ow=3) * (c=2 kh=3 kw=3) = 972 FLOPs.
// CHECK-LABEL: hal.executable private @conv_named
// CHECK-SAME:    flops = 972 : i64
// CHECK-SAME:    kind = "contraction"
// CHECK-SAME:    loops = array<i64: 1, 3, 3, 3, 2, 3, 3>, root = "linalg.conv_2d_nchw_fchw"
hal.executable private @conv_named {
  hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {
      func.func @f(%x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>, %o: tensor<1x3x3x3xf32>) -> tensor<1x3x3x3xf32> {
        %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) outs(%o : tensor<1x3x3x3xf32>) -> tensor<1x3x3x3xf32>
        return %r : tensor<1x3x3x3xf32>
      }
    }
  }
}

// -----

// Max pooling is convolution-shaped but takes a max, not a multiply-add: not a contraction.
// CHECK-LABEL: hal.executable private @maxpool
// CHECK-SAME:    kind = "pooling"
hal.executable private @maxpool {
  hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {
      func.func @f(%x: tensor<1x2x5x5xf32>, %k: tensor<3x3xf32>, %o: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
        %r = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %k : tensor<1x2x5x5xf32>, tensor<3x3xf32>) outs(%o : tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
        return %r : tensor<1x2x3x3xf32>
      }
    }
  }
}
