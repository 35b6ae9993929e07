// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-quantize-contractions{target=h200 group-size=32},inferx-dequant-chain{target=h200})' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-quantize-contractions{target=h200 group-size=32},inferx-dequant-chain{target=h200})' --verify-diagnostics >/dev/null
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-quantize-contractions{target=h200 group-size=32 matvec-kernel=false},inferx-dequant-chain{target=h200})' | filecheck %s --check-prefix=IREE

// What inferx-dequant-chain leaves alone: a lone layer, rows that are not one, a chain the kernel
// cannot hold; and layers left to IREE's own dequantize-and-matmul (the IREE prefix: none of our
// kernels to chain).
// IREE-NOT: inferx_dequant_chain

// A lone layer and rows that are not one (two rows: the kernel's tile form, no resident x): no chain.
// CHECK-NOT:   inferx_dequant_chain
// CHECK-LABEL: func.func @one(
// CHECK:         flow.dispatch @{{.+}}::@inferx_dequant_matvec(
// CHECK-LABEL: func.func @two_rows(
// CHECK-COUNT-3: flow.dispatch @{{.+}}::@inferx_dequant_matvec(
func.func @one(%x: tensor<1x256xf32>, %w0: tensor<256x128xf32> {inferx.parameter = "fc0.w"}, %b0: tensor<128xf32>) -> (tensor<1x128xf32>) {
  %c0 = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<1x128xf32>
  %z0 = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<1x128xf32>) -> tensor<1x128xf32>
  // expected-remark @+1 {{weights widened in our kernel}}
  %y0 = linalg.matmul {inferx.precision = "i4"} ins(%x, %w0 : tensor<1x256xf32>, tensor<256x128xf32>) outs(%z0 : tensor<1x128xf32>) -> tensor<1x128xf32>
  %h0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y0, %b0 : tensor<1x128xf32>, tensor<128xf32>) outs(%e0 : tensor<1x128xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x128xf32>
  return %h0 : tensor<1x128xf32>
}


func.func @two_rows(%x: tensor<2x256xf32>, %w0: tensor<256x128xf32> {inferx.parameter = "fc0.w"}, %b0: tensor<128xf32>, %w1: tensor<128x256xf32> {inferx.parameter = "fc1.w"}, %b1: tensor<256xf32>, %w2: tensor<256x100xf32> {inferx.parameter = "fc2.w"}, %b2: tensor<100xf32>) -> (tensor<2x100xf32>) {
  %c0 = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x128xf32>
  %z0 = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<2x128xf32>) -> tensor<2x128xf32>
  // expected-remark @+1 {{weights widened in our kernel}}
  %y0 = linalg.matmul {inferx.precision = "i4"} ins(%x, %w0 : tensor<2x256xf32>, tensor<256x128xf32>) outs(%z0 : tensor<2x128xf32>) -> tensor<2x128xf32>
  %h0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y0, %b0 : tensor<2x128xf32>, tensor<128xf32>) outs(%e0 : tensor<2x128xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<2x128xf32>
  %e1 = tensor.empty() : tensor<2x256xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<2x256xf32>) -> tensor<2x256xf32>
  // expected-remark @+1 {{weights widened in our kernel}}
  %y1 = linalg.matmul {inferx.precision = "i4"} ins(%h0, %w1 : tensor<2x128xf32>, tensor<128x256xf32>) outs(%z1 : tensor<2x256xf32>) -> tensor<2x256xf32>
  %h1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y1, %b1 : tensor<2x256xf32>, tensor<256xf32>) outs(%e1 : tensor<2x256xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<2x256xf32>
  %e2 = tensor.empty() : tensor<2x100xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<2x100xf32>) -> tensor<2x100xf32>
  // expected-remark @+1 {{weights widened in our kernel}}
  %y2 = linalg.matmul {inferx.precision = "i4"} ins(%h1, %w2 : tensor<2x256xf32>, tensor<256x100xf32>) outs(%z2 : tensor<2x100xf32>) -> tensor<2x100xf32>
  %h2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y2, %b2 : tensor<2x100xf32>, tensor<100xf32>) outs(%e2 : tensor<2x100xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<2x100xf32>
  return %h2 : tensor<2x100xf32>
}


// -----

// A chain whose layer the kernel cannot hold (a program's tile of 32 rows of 8192 int4 values is
// more than the registers it may keep while waiting): declined, a launch a layer.
// CHECK-LABEL: func.func @too_large(
// CHECK-NOT:     inferx_dequant_chain
// CHECK-COUNT-2: flow.dispatch @{{.+}}::@inferx_dequant_matvec(
func.func @too_large(%x: tensor<1x256xf32>, %w0: tensor<256x8192xf32> {inferx.parameter = "fc0.w"}, %b0: tensor<8192xf32>, %w1: tensor<8192x16384xf32> {inferx.parameter = "fc1.w"}, %b1: tensor<16384xf32>) -> (tensor<1x16384xf32>) {
  %c0 = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<1x8192xf32>
  %z0 = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<1x8192xf32>) -> tensor<1x8192xf32>
  // expected-remark @+1 {{weights widened in our kernel}}
  %y0 = linalg.matmul {inferx.precision = "i4"} ins(%x, %w0 : tensor<1x256xf32>, tensor<256x8192xf32>) outs(%z0 : tensor<1x8192xf32>) -> tensor<1x8192xf32>
  %h0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y0, %b0 : tensor<1x8192xf32>, tensor<8192xf32>) outs(%e0 : tensor<1x8192xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x8192xf32>
  %e1 = tensor.empty() : tensor<1x16384xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<1x16384xf32>) -> tensor<1x16384xf32>
  // expected-remark @+2 {{weights widened in our kernel}}
  // expected-remark @+1 {{declined: a chain of 2 layers: layer 1: 32 rows of 8192 int4 values a program exceed 65536 bytes}}
  %y1 = linalg.matmul {inferx.precision = "i4"} ins(%h0, %w1 : tensor<1x8192xf32>, tensor<8192x16384xf32>) outs(%z1 : tensor<1x16384xf32>) -> tensor<1x16384xf32>
  %h1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y1, %b1 : tensor<1x16384xf32>, tensor<16384xf32>) outs(%e1 : tensor<1x16384xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x16384xf32>
  return %h1 : tensor<1x16384xf32>
}

