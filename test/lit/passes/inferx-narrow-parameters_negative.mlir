// RUN: inferx-opt --context=iree %s --split-input-file --pass-pipeline='builtin.module(inferx-narrow-parameters)' | filecheck %s
// RUN: inferx-opt --context=iree %s --split-input-file --pass-pipeline='builtin.module(inferx-narrow-parameters)' --verify-diagnostics

// Also read at f32 (a bias add beside the truncation): the f32 parameter stays, the artifact
// would otherwise store both.
// CHECK-LABEL: func.func @also_f32(
// CHECK-SAME:    %{{.+}}: tensor<16x16xf32> {inferx.parameter = "w"}
// CHECK:         arith.truncf
#id = affine_map<(d0, d1) -> (d0, d1)>
// expected-remark @+1 {{inferx-narrow-parameters: 'w' stays f32: also read at f32 (by linalg.generic)}}
func.func @also_f32(%w: tensor<16x16xf32> {inferx.parameter = "w"}, %r: tensor<16x16xf32>) -> (tensor<16x16xbf16>, tensor<16x16xf32>) {
  %e = tensor.empty() : tensor<16x16xbf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<16x16xf32>) outs(%e : tensor<16x16xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %c = arith.truncf %in : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<16x16xbf16>
  %s = tensor.empty() : tensor<16x16xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w, %r : tensor<16x16xf32>, tensor<16x16xf32>) outs(%s : tensor<16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %c = arith.addf %a, %b : f32
    linalg.yield %c : f32
  } -> tensor<16x16xf32>
  return %t, %sum : tensor<16x16xbf16>, tensor<16x16xf32>
}

// -----

// Read at two narrow types: stays (one stored copy could not serve both).
// CHECK-LABEL: func.func @two_types(
// CHECK-SAME:    %{{.+}}: tensor<16x16xf32> {inferx.parameter = "w"}
#id = affine_map<(d0, d1) -> (d0, d1)>
// expected-remark @+1 {{inferx-narrow-parameters: 'w' stays f32: read at 2 narrow types (bf16, f16)}}
func.func @two_types(%w: tensor<16x16xf32> {inferx.parameter = "w"}) -> (tensor<16x16xbf16>, tensor<16x16xf16>) {
  %e = tensor.empty() : tensor<16x16xbf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<16x16xf32>) outs(%e : tensor<16x16xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %c = arith.truncf %in : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<16x16xbf16>
  %e2 = tensor.empty() : tensor<16x16xf16>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<16x16xf32>) outs(%e2 : tensor<16x16xf16>) {
  ^bb0(%in: f32, %out: f16):
    %c = arith.truncf %in : f32 to f16
    linalg.yield %c : f16
  } -> tensor<16x16xf16>
  return %t, %h : tensor<16x16xbf16>, tensor<16x16xf16>
}

// -----

// A truncated argument that is not a parameter (an input), and a parameter read at f32 only:
// nothing to do, no remark.
// CHECK-LABEL: func.func @not_parameters(
// CHECK-SAME:    %{{.+}}: tensor<16x16xf32>, %{{.+}}: tensor<16x16xf32> {inferx.parameter = "b"})
// CHECK:         arith.truncf
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @not_parameters(%x: tensor<16x16xf32>, %b: tensor<16x16xf32> {inferx.parameter = "b"}) -> (tensor<16x16xbf16>, tensor<16x16xf32>) {
  %e = tensor.empty() : tensor<16x16xbf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<16x16xf32>) outs(%e : tensor<16x16xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %c = arith.truncf %in : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<16x16xbf16>
  return %t, %b : tensor<16x16xbf16>, tensor<16x16xf32>
}

// -----

// One key, two functions (a static-shape function beside the dynamic one): the dynamic one
// reads the weight at f32, so the key stays f32 in both (one stored copy for both).
// CHECK-LABEL: func.func @dynamic(
// CHECK-SAME:    {inferx.parameter = "w"}
// CHECK-LABEL: func.func @static(
// CHECK-SAME:    %{{.+}}: tensor<16x16xf32> {inferx.parameter = "w"}
// CHECK:         arith.truncf
#id = affine_map<(d0, d1) -> (d0, d1)>
// expected-remark @+1 {{inferx-narrow-parameters: 'w' stays f32: also read at f32 (by linalg.matmul)}}
func.func @dynamic(%x: tensor<?x16xf32>, %w: tensor<16x16xf32> {inferx.parameter = "w"}) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x16xf32>
  %zero = arith.constant 0.0 : f32
  %o = tensor.empty(%n) : tensor<?x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%o : tensor<?x16xf32>) -> tensor<?x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x16xf32>, tensor<16x16xf32>) outs(%f : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
func.func @static(%x: tensor<4x16xf16>, %w: tensor<16x16xf32> {inferx.parameter = "w"}) -> tensor<16x16xf16> {
  %e = tensor.empty() : tensor<16x16xf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<16x16xf32>) outs(%e : tensor<16x16xf16>) {
  ^bb0(%in: f32, %out: f16):
    %c = arith.truncf %in : f32 to f16
    linalg.yield %c : f16
  } -> tensor<16x16xf16>
  return %t : tensor<16x16xf16>
}
