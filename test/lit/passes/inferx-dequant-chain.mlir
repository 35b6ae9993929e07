// REQUIRES: triton
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-quantize-contractions{target=h200 group-size=32},inferx-dequant-chain{target=h200})' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-quantize-contractions{target=h200 group-size=32},inferx-dequant-chain{target=h200})' --verify-diagnostics >/dev/null
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-quantize-contractions{target=h200 group-size=32},inferx-dequant-chain{target=h200},inferx-dequant-chain{target=h200})' | filecheck %s --check-prefix=TWICE
// TWICE-LABEL: func.func @chain(
// TWICE-COUNT-1: flow.dispatch
// TWICE-NOT:   flow.dispatch
// TWICE-LABEL: func.func @branch(

// One-row int4 layers (an MLP at batch 1), each one's f16 result read only by the next: after
// inferx-quantize-contractions each is a dispatch of the one-row kernel; inferx-dequant-chain
// puts them in one persistent kernel. The binding layout: the 10 inputs read-only (x, then each
// layer's weight, scales and bias), then the counter (written in place), the result, the f16
// scratch for the layers' results, Triton's two scratch buffers.
// CHECK:       #pipeline_layout = #hal.pipeline.layout<bindings = [{{(#hal.pipeline.binding<storage_buffer, ReadOnly>, ){10}#}}hal.pipeline.binding<storage_buffer>, #hal.pipeline.binding<storage_buffer>, #hal.pipeline.binding<storage_buffer>, #hal.pipeline.binding<storage_buffer>, #hal.pipeline.binding<storage_buffer>]>
// CHECK-NOT:   inferx_dequant_int4
// CHECK:       hal.executable.source private @[[EXE:inferx_dequant_chain_3x128x256_[0-9a-f]+]]
// CHECK-SAME:    data = dense<"0x
// CHECK:         hal.executable.export public @inferx_dequant_chain ordinal(0)
// CHECK:           %[[PROGRAMS:.+]] = arith.constant 528 : index
// CHECK:           hal.return %[[PROGRAMS]],
// CHECK:         config = "528 programs, 4 warps, rows a program 1/1/1, at most 128 registers, grid barrier"
// CHECK-NOT:   hal.executable.source
// (Each chain remark below sits at the chain's first dispatch, which carries the next layer's
// matmul location: the f16 cast of that layer's input is the last op the first kernel finishes.)
// CHECK-LABEL: func.func @chain(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<1x256xf32>
// CHECK-NOT:     flow.dispatch
// CHECK:         %[[ZERO:.+]] = arith.constant 0 : i32
// CHECK:         %[[COUNTER:.+]] = flow.tensor.splat %[[ZERO]] : tensor<1xi32>
// CHECK:         %[[R:.+]]:5 = flow.dispatch @[[EXE]]::@inferx_dequant_chain(%[[X]], {{(%[^,]+, ){9}%}}[[COUNTER]]) : (tensor<1x256xf32>, {{.*}}, tensor<1xi32>) -> (%[[COUNTER]], tensor<1x100xf32>, tensor<384xf16>, tensor<16xi8>, tensor<16xi8>)
// CHECK-NOT:     flow.dispatch
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[R]]#1

func.func @chain(%x: tensor<1x256xf32>, %w0: tensor<256x128xf32> {inferx.parameter = "fc0.w"}, %b0: tensor<128xf32>, %w1: tensor<128x256xf32> {inferx.parameter = "fc1.w"}, %b1: tensor<256xf32>, %w2: tensor<256x100xf32> {inferx.parameter = "fc2.w"}, %b2: tensor<100xf32>) -> (tensor<1x100xf32>) {
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
  %e1 = tensor.empty() : tensor<1x256xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<1x256xf32>) -> tensor<1x256xf32>
  // (the chain's remark is at its first dispatch, which carries this matmul's location: the f16
  // cast of this layer's input is the last op the first layer's kernel finishes)
  // expected-remark @+2 {{3 int4 layers in one launch (Triton, 528 programs, a grid barrier between layers, the input's f16 cast in it)}}
  // expected-remark @+1 {{weights widened in our kernel}}
  %y1 = linalg.matmul {inferx.precision = "i4"} ins(%h0, %w1 : tensor<1x128xf32>, tensor<128x256xf32>) outs(%z1 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %h1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y1, %b1 : tensor<1x256xf32>, tensor<256xf32>) outs(%e1 : tensor<1x256xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x256xf32>
  %e2 = tensor.empty() : tensor<1x100xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<1x100xf32>) -> tensor<1x100xf32>
  // expected-remark @+1 {{weights widened in our kernel}}
  %y2 = linalg.matmul {inferx.precision = "i4"} ins(%h1, %w2 : tensor<1x256xf32>, tensor<256x100xf32>) outs(%z2 : tensor<1x100xf32>) -> tensor<1x100xf32>
  %h2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y2, %b2 : tensor<1x100xf32>, tensor<100xf32>) outs(%e2 : tensor<1x100xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x100xf32>
  return %h2 : tensor<1x100xf32>
}


// -----

// A layer whose result is read elsewhere too ends a chain there: the first layer keeps its own
// dispatch (its f32 result returned), the other two are one launch that reads it and casts it.
// CHECK-LABEL: func.func @branch(
// CHECK:         %[[H:.+]]:3 = flow.dispatch @{{.+}}::@inferx_dequant_matvec(
// CHECK:         %[[R:.+]]:5 = flow.dispatch @{{.+}}::@inferx_dequant_chain(%[[H]]#0,
// CHECK:         return %[[R]]#1, %[[H]]#0
func.func @branch(%x: tensor<1x256xf32>, %w0: tensor<256x128xf32> {inferx.parameter = "fc0.w"}, %b0: tensor<128xf32>, %w1: tensor<128x256xf32> {inferx.parameter = "fc1.w"}, %b1: tensor<256xf32>, %w2: tensor<256x128xf32> {inferx.parameter = "fc2.w"}, %b2: tensor<128xf32>) -> (tensor<1x128xf32>, tensor<1x128xf32>) {
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
  %e1 = tensor.empty() : tensor<1x256xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<1x256xf32>) -> tensor<1x256xf32>
  // expected-remark @+1 {{weights widened in our kernel}}
  %y1 = linalg.matmul {inferx.precision = "i4"} ins(%h0, %w1 : tensor<1x128xf32>, tensor<128x256xf32>) outs(%z1 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %h1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y1, %b1 : tensor<1x256xf32>, tensor<256xf32>) outs(%e1 : tensor<1x256xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x256xf32>
  %e2 = tensor.empty() : tensor<1x128xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<1x128xf32>) -> tensor<1x128xf32>
  // expected-remark @+2 {{weights widened in our kernel}}
  // expected-remark @+1 {{inferx-dequant-chain: 2 int4 layers in one launch}}
  %y2 = linalg.matmul {inferx.precision = "i4"} ins(%h1, %w2 : tensor<1x256xf32>, tensor<256x128xf32>) outs(%z2 : tensor<1x128xf32>) -> tensor<1x128xf32>
  %h2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y2, %b2 : tensor<1x128xf32>, tensor<128xf32>) outs(%e2 : tensor<1x128xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x128xf32>
  return %h2, %h0 : tensor<1x128xf32>, tensor<1x128xf32>
}


// -----

// Two chains in one function: the longer takes the persistent launch; the other keeps a launch a
// layer (two persistent kernels that IREE ran at once could wait on each other's programs).
// CHECK-LABEL: func.func @two_chains(
// CHECK:         flow.dispatch @{{.+}}::@inferx_dequant_chain(
// CHECK-COUNT-2: flow.dispatch @{{.+}}::@inferx_dequant_matvec(
func.func @two_chains(%x: tensor<1x256xf32>, %u: tensor<1x128xf32>, %w0: tensor<256x128xf32> {inferx.parameter = "fc0.w"}, %b0: tensor<128xf32>, %w1: tensor<128x256xf32> {inferx.parameter = "fc1.w"}, %b1: tensor<256xf32>, %w2: tensor<256x64xf32> {inferx.parameter = "fc2.w"}, %b2: tensor<64xf32>, %w3: tensor<128x128xf32> {inferx.parameter = "fc3.w"}, %b3: tensor<128xf32>, %w4: tensor<128x32xf32> {inferx.parameter = "fc4.w"}, %b4: tensor<32xf32>) -> (tensor<1x64xf32>, tensor<1x32xf32>) {
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
  %e1 = tensor.empty() : tensor<1x256xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<1x256xf32>) -> tensor<1x256xf32>
  // expected-remark @+2 {{weights widened in our kernel}}
  // expected-remark @+1 {{inferx-dequant-chain: 3 int4 layers in one launch}}
  %y1 = linalg.matmul {inferx.precision = "i4"} ins(%h0, %w1 : tensor<1x128xf32>, tensor<128x256xf32>) outs(%z1 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %h1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y1, %b1 : tensor<1x256xf32>, tensor<256xf32>) outs(%e1 : tensor<1x256xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x256xf32>
  %e2 = tensor.empty() : tensor<1x64xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<1x64xf32>) -> tensor<1x64xf32>
  // expected-remark @+1 {{weights widened in our kernel}}
  %y2 = linalg.matmul {inferx.precision = "i4"} ins(%h1, %w2 : tensor<1x256xf32>, tensor<256x64xf32>) outs(%z2 : tensor<1x64xf32>) -> tensor<1x64xf32>
  %h2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y2, %b2 : tensor<1x64xf32>, tensor<64xf32>) outs(%e2 : tensor<1x64xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x64xf32>
  %e3 = tensor.empty() : tensor<1x128xf32>
  %z3 = linalg.fill ins(%c0 : f32) outs(%e3 : tensor<1x128xf32>) -> tensor<1x128xf32>
  // expected-remark @+1 {{weights widened in our kernel}}
  %y3 = linalg.matmul {inferx.precision = "i4"} ins(%u, %w3 : tensor<1x128xf32>, tensor<128x128xf32>) outs(%z3 : tensor<1x128xf32>) -> tensor<1x128xf32>
  %h3 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y3, %b3 : tensor<1x128xf32>, tensor<128xf32>) outs(%e3 : tensor<1x128xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x128xf32>
  %e4 = tensor.empty() : tensor<1x32xf32>
  %z4 = linalg.fill ins(%c0 : f32) outs(%e4 : tensor<1x32xf32>) -> tensor<1x32xf32>
  // expected-remark @+2 {{weights widened in our kernel}}
  // expected-remark @+1 {{declined: a chain of 2 layers, but this function's longest (3 layers) takes the one persistent launch it may have}}
  %y4 = linalg.matmul {inferx.precision = "i4"} ins(%h3, %w4 : tensor<1x128xf32>, tensor<128x32xf32>) outs(%z4 : tensor<1x32xf32>) -> tensor<1x32xf32>
  %h4 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y4, %b4 : tensor<1x32xf32>, tensor<32xf32>) outs(%e4 : tensor<1x32xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x32xf32>
  return %h2, %h4 : tensor<1x64xf32>, tensor<1x32xf32>
}
