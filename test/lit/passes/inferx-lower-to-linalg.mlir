// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-lower-to-linalg)' | filecheck %s

// Per-tensor i8 with a zero point: rank-0 constants, round-half-even, clamp, truncate.
// CHECK-DAG:   #[[ID2:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[SCALAR2:.+]] = affine_map<(d0, d1) -> ()>
// CHECK-DAG:   #[[ROW2:.+]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG:   #[[ID3:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG:   #[[GROUP3:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @quantize_per_tensor_i8(
// CHECK-SAME:    %[[X:.+]]: tensor<4x64xf32>)
// CHECK-DAG:     %[[SCALE:.+]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK-DAG:     %[[ZP:.+]] = arith.constant dense<3> : tensor<i32>
// CHECK-DAG:     %[[INIT:.+]] = tensor.empty() : tensor<4x64xi8>
// CHECK:         %[[Q:.+]] = linalg.generic {indexing_maps = [#[[ID2]], #[[SCALAR2]], #[[SCALAR2]], #[[ID2]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:      ins(%[[X]], %[[SCALE]], %[[ZP]] : tensor<4x64xf32>, tensor<f32>, tensor<i32>) outs(%[[INIT]] : tensor<4x64xi8>)
// CHECK:         ^bb0(%[[IN:.+]]: f32, %[[S:.+]]: f32, %[[Z:.+]]: i32, %{{.+}}: i8):
// CHECK:           %[[DIV:.+]] = arith.divf %[[IN]], %[[S]] : f32
// round half to even without math.roundeven (passes/support/rounding.py): (v + copysign(2^23, v)) - that,
// where |v| < 2^23
// CHECK:           %[[BIG:.+]] = arith.constant 0x4B000000 : f32
// CHECK:           %[[MAGIC:.+]] = math.copysign %[[BIG]], %[[DIV]] : f32
// CHECK:           %[[UP:.+]] = arith.addf %[[DIV]], %[[MAGIC]] : f32
// CHECK:           %[[DOWN:.+]] = arith.subf %[[UP]], %[[MAGIC]] : f32
// CHECK:           %[[ABS:.+]] = math.absf %[[DIV]] : f32
// CHECK:           %[[SMALL:.+]] = arith.cmpf olt, %[[ABS]], %[[BIG]] : f32
// CHECK:           %[[RND:.+]] = arith.select %[[SMALL]], %[[DOWN]], %[[DIV]] : f32
// CHECK:           %[[ZF:.+]] = arith.sitofp %[[Z]] : i32 to f32
// CHECK:           %[[SHIFT:.+]] = arith.addf %[[RND]], %[[ZF]] : f32
// CHECK:           %[[LO:.+]] = arith.constant -1.280000e+02 : f32
// CHECK:           %[[MAX:.+]] = arith.maximumf %[[SHIFT]], %[[LO]] : f32
// CHECK:           %[[HI:.+]] = arith.constant 1.270000e+02 : f32
// CHECK:           %[[MIN:.+]] = arith.minimumf %[[MAX]], %[[HI]] : f32
// CHECK:           %[[I32:.+]] = arith.fptosi %[[MIN]] : f32 to i32
// CHECK:           %[[I8:.+]] = arith.trunci %[[I32]] : i32 to i8
// CHECK:           linalg.yield %[[I8]] : i8
// CHECK:         return %[[Q]]
// CHECK-NOT:     inferx.
func.func @quantize_per_tensor_i8(%x: tensor<4x64xf32>) -> tensor<4x64xi8> {
  %q = "inferx.quantize"(%x) {scale = dense<0.5> : tensor<f32>, storage = "i8", zero_point = dense<3> : tensor<i32>} : (tensor<4x64xf32>) -> tensor<4x64xi8>
  return %q : tensor<4x64xi8>
}

// Per-channel unsigned 4-bit: the scale is indexed by the channel loop, storage is i4,
// clamp to [0, 15], widening with extui.
// CHECK-LABEL: func.func @quantize_dequantize_per_channel_u4(
// CHECK-SAME:    %[[X:.+]]: tensor<4x64xf32>)
// CHECK:         %[[SCALE:.+]] = arith.constant dense<[5.000000e-01, 2.500000e-01, 1.000000e+00, 2.000000e+00]> : tensor<4xf32>
// CHECK:         %[[Q:.+]] = linalg.generic {indexing_maps = [#[[ID2]], #[[ROW2]], #[[ID2]]]
// CHECK-SAME:      ins(%[[X]], %[[SCALE]] : tensor<4x64xf32>, tensor<4xf32>) outs(%{{.+}} : tensor<4x64xi4>)
// CHECK:           arith.constant 0.000000e+00 : f32
// CHECK:           arith.constant 1.500000e+01 : f32
// CHECK:           arith.trunci %{{.+}} : i32 to i4
// CHECK:         %[[D:.+]] = linalg.generic {indexing_maps = [#[[ID2]], #[[ROW2]], #[[ID2]]]
// CHECK-SAME:      ins(%[[Q]], %{{.+}} : tensor<4x64xi4>, tensor<4xf32>) outs(%{{.+}} : tensor<4x64xf32>)
// CHECK:         ^bb0(%[[IN:.+]]: i4, %[[S:.+]]: f32, %{{.+}}: f32):
// CHECK:           %[[W:.+]] = arith.extui %[[IN]] : i4 to i32
// CHECK:           %[[F:.+]] = arith.sitofp %[[W]] : i32 to f32
// CHECK:           %[[Y:.+]] = arith.mulf %[[F]], %[[S]] : f32
// CHECK:           linalg.yield %[[Y]] : f32
// CHECK:         return %[[D]]
func.func @quantize_dequantize_per_channel_u4(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %q = "inferx.quantize"(%x) {axis = 0 : i64, scale = dense<[0.5, 0.25, 1.0, 2.0]> : tensor<4xf32>, storage = "u4"} : (tensor<4x64xf32>) -> tensor<4x64xi4>
  %d = "inferx.dequantize"(%q) {axis = 0 : i64, scale = dense<[0.5, 0.25, 1.0, 2.0]> : tensor<4xf32>, storage = "u4"} : (tensor<4x64xi4>) -> tensor<4x64xf32>
  return %d : tensor<4x64xf32>
}

// Grouped signed 4-bit weights: the last axis is expanded into [groups, group_size],
// scale and zero point drop the inner loop, the result is collapsed back.
// CHECK-LABEL: func.func @dequantize_grouped_i4_to_f16(
// CHECK-SAME:    %[[W:.+]]: tensor<8x64xi4>)
// CHECK-DAG:     %[[SCALE:.+]] = arith.constant dense<1.250000e-01> : tensor<8x2xf32>
// CHECK-DAG:     %[[ZP:.+]] = arith.constant dense<1> : tensor<8x2xi32>
// CHECK:         %[[EXP:.+]] = tensor.expand_shape %[[W]] {{\[}}[0], [1, 2]] output_shape [8, 2, 32] : tensor<8x64xi4> into tensor<8x2x32xi4>
// CHECK:         %[[D:.+]] = linalg.generic {indexing_maps = [#[[ID3]], #[[GROUP3]], #[[GROUP3]], #[[ID3]]], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME:      ins(%[[EXP]], %[[SCALE]], %[[ZP]] : tensor<8x2x32xi4>, tensor<8x2xf32>, tensor<8x2xi32>) outs(%{{.+}} : tensor<8x2x32xf16>)
// CHECK:         ^bb0(%[[IN:.+]]: i4, %[[S:.+]]: f32, %[[Z:.+]]: i32, %{{.+}}: f16):
// CHECK:           %[[EXT:.+]] = arith.extsi %[[IN]] : i4 to i32
// CHECK:           %[[SUB:.+]] = arith.subi %[[EXT]], %[[Z]] : i32
// CHECK:           %[[F:.+]] = arith.sitofp %[[SUB]] : i32 to f32
// CHECK:           %[[MUL:.+]] = arith.mulf %[[F]], %[[S]] : f32
// CHECK:           %[[H:.+]] = arith.truncf %[[MUL]] : f32 to f16
// CHECK:           linalg.yield %[[H]] : f16
// CHECK:         %[[COL:.+]] = tensor.collapse_shape %[[D]] {{\[}}[0], [1, 2]] : tensor<8x2x32xf16> into tensor<8x64xf16>
// CHECK:         return %[[COL]]
func.func @dequantize_grouped_i4_to_f16(%w: tensor<8x64xi4>) -> tensor<8x64xf16> {
  %d = "inferx.dequantize"(%w) {group_size = 32 : i64, scale = dense<0.125> : tensor<8x2xf32>, storage = "i4", zero_point = dense<1> : tensor<8x2xi32>} : (tensor<8x64xi4>) -> tensor<8x64xf16>
  return %d : tensor<8x64xf16>
}

// A dynamic batch dimension is read with tensor.dim; f16 input is extended first.
// CHECK-LABEL: func.func @quantize_dynamic_f16(
// CHECK-SAME:    %[[X:.+]]: tensor<?x64xf16>)
// CHECK:         %[[C0:.+]] = arith.constant 0 : index
// CHECK:         %[[DIM:.+]] = tensor.dim %[[X]], %[[C0]] : tensor<?x64xf16>
// CHECK:         %[[INIT:.+]] = tensor.empty(%[[DIM]]) : tensor<?x64xi8>
// CHECK:         linalg.generic
// CHECK-SAME:      outs(%[[INIT]] : tensor<?x64xi8>)
// CHECK:         ^bb0(%[[IN:.+]]: f16, %{{.+}}: f32, %{{.+}}: i8):
// CHECK:           arith.extf %[[IN]] : f16 to f32
func.func @quantize_dynamic_f16(%x: tensor<?x64xf16>) -> tensor<?x64xi8> {
  %q = "inferx.quantize"(%x) {scale = dense<[0.5]> : tensor<1xf32>, storage = "i8"} : (tensor<?x64xf16>) -> tensor<?x64xi8>
  return %q : tensor<?x64xi8>
}

// A float precision annotation left over (not applied) is dropped; an integer one stays for
// inferx-quantize-contractions in IREE's context.
// CHECK-LABEL: func.func @annotation_dropped(
// CHECK:         linalg.matmul ins(
// CHECK-LABEL: func.func @integer_annotation_kept(
// CHECK:         linalg.matmul {inferx.precision = "i4"} ins(
func.func @annotation_dropped(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.matmul {inferx.precision = "f16"} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
func.func @integer_annotation_kept(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = linalg.matmul {inferx.precision = "i4"} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
