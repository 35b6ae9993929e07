// REQUIRES: c-compiler
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-f32-matmul)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-f32-matmul)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-f32-matmul)' 2>&1 | filecheck %s --check-prefix=NOKERNEL

// A convolution inferx-conv-strategy marked "kernel" runs on f32_gemm.c's convolution entry:
// its filter [F, C, KH, KW] packed at load in the left-weight layout (14-row blocks of the
// [F, C KH KW] rows, 12 filters padded to 14), its input read where it is (the zero pad before
// it folded into the kernel: the padding in the symbol, the unpadded source as the operand),
// the bias init and the ReLU after it in the generated epilogue.
// REMARK:      remark: inferx-f32-matmul: f32 convolution as a 12x72 filter x 72x100 columns on AVX-512 (inferx_f32c: implicit im2col, filter packed at load)
// REMARK-NEXT: remark: inferx-f32-matmul: fused 1 ops after it (linalg.generic) in its epilogue
// NOKERNEL: remark: inferx-f32-matmul: declined: target 'x86-avx512-vnni' leaves f32 matmuls to IREE, whose mmt4d measured as fast there (Target.f32_kernel)
// NOKERNEL-LABEL: func.func @padded_conv(
// NOKERNEL-NOT:     flow.dispatch
// NOKERNEL:         linalg.conv_2d_nchw_fchw
// CHECK:       stream.executable private @inferx_f32c_1x8x10x10_k3x3_s1x1_d1x1_p1x1_e[[TAG:[0-9a-f]+]] attributes {{.*}}path = "{{.*}}/f32_gemm_[[TAG]]-{{[0-9a-f]+}}.o"
// CHECK:         func.func private @inferx_f32c_[[TAG]]_tile(memref<f32>, index, memref<f32>, index, memref<f32>, index, memref<f32>, index, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK:         func.func @inferx_f32c_1x8x10x10_k3x3_s1x1_d1x1_p1x1_e[[TAG]]({{.*}}fused = ["linalg.generic"]{{.*}}loops = array<i64: 12, 100, 72>
// CHECK-LABEL: func.func @padded_conv(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<1x8x10x10xf32>, %[[W:[^:]+]]: tensor<12x8x3x3xf32> {inferx.parameter = "c.w"}, %[[B:[^:]+]]: tensor<12xf32> {inferx.parameter = "c.b"}
// CHECK:         %[[ROWS:.+]] = tensor.collapse_shape %[[W]] {{\[}}[0], [1, 2, 3]] : tensor<12x8x3x3xf32> into tensor<12x72xf32>
// CHECK:         tensor.insert_slice %[[ROWS]] into %{{.+}}[0, 0] [12, 72] [1, 1] : tensor<12x72xf32> into tensor<14x72xf32>
// CHECK:         %[[FLAT:.+]] = tensor.collapse_shape %{{.+}} {{\[}}[0, 1, 2]] : tensor<1x72x14xf32> into tensor<1008xf32>
// CHECK:         %[[Y:.+]] = flow.dispatch @inferx_f32c_1x8x10x10_k3x3_s1x1_d1x1_p1x1_e[[TAG]]::@inferx_f32c_1x8x10x10_k3x3_s1x1_d1x1_p1x1_e[[TAG]](%[[FLAT]], %[[X]], %[[B]]) : (tensor<1008xf32>, tensor<1x8x10x10xf32>, tensor<12xf32>) -> tensor<1x12x10x10xf32>
// CHECK-NEXT:    return %[[Y]]
// CHECK-NOT:     linalg.conv_2d_nchw_fchw
#map4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

func.func @padded_conv(%x: tensor<1x8x10x10xf32>, %w: tensor<12x8x3x3xf32> {inferx.parameter = "c.w"},
                       %b: tensor<12xf32> {inferx.parameter = "c.b"}) -> tensor<1x12x10x10xf32> {
  %zero = arith.constant 0.0 : f32
  %padded = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x8x10x10xf32> to tensor<1x8x12x12xf32>
  %e = tensor.empty() : tensor<1x12x10x10xf32>
  %init = linalg.broadcast ins(%b : tensor<12xf32>) outs(%e : tensor<1x12x10x10xf32>) dimensions = [0, 2, 3]
  %y = linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel", dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%padded, %w : tensor<1x8x12x12xf32>, tensor<12x8x3x3xf32>) outs(%init : tensor<1x12x10x10xf32>) -> tensor<1x12x10x10xf32>
  %relu = linalg.generic {indexing_maps = [#map4, #map4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
         ins(%y : tensor<1x12x10x10xf32>) outs(%e : tensor<1x12x10x10xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.maximumf %a, %zero : f32
    linalg.yield %t : f32
  } -> tensor<1x12x10x10xf32>
  return %relu : tensor<1x12x10x10xf32>
}

// -----

// Two images, stride 2, dilation 2, a zero init and nothing after it: the plain entry
// (`inferx_f32c_tile`, no epilogue variant), its geometry in the symbol; a pad by a value other
// than zero stays IREE's (its result is the operand, no padding folded).
// REMARK:      remark: inferx-f32-matmul: f32 convolution as a 4x36 filter x 36x16 columns
// REMARK-NEXT: remark: inferx-f32-matmul: the ops after it stay IREE's: the product is not read by an elementwise op
// CHECK-LABEL: func.func @strided_dilated(
// CHECK:         %[[P:.+]] = tensor.pad
// CHECK:         flow.dispatch @inferx_f32c_2x4x11x11_k3x3_s2x2_d2x2_p0x0::@inferx_f32c_2x4x11x11_k3x3_s2x2_d2x2_p0x0(%{{.+}}, %[[P]]) : (tensor<{{[0-9]+}}xf32>, tensor<2x4x11x11xf32>) -> tensor<2x4x4x4xf32>
func.func @strided_dilated(%x: tensor<2x4x9x9xf32>, %w: tensor<4x4x3x3xf32> {inferx.parameter = "s.w"}) -> tensor<2x4x4x4xf32> {
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %padded = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %one : f32
  } : tensor<2x4x9x9xf32> to tensor<2x4x11x11xf32>
  %e = tensor.empty() : tensor<2x4x4x4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %y = linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel", dilations = dense<2> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%padded, %w : tensor<2x4x11x11xf32>, tensor<4x4x3x3xf32>) outs(%init : tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  return %y : tensor<2x4x4x4xf32>
}

// -----

// Eight 7x7 images through a 1x1 filter: 49 pixels an image would fill 2 panels of 32 columns
// to 77%, so the entry tiles all images' pixels side by side (joined: 392 columns, 13 panels,
// 4 a workgroup): 4 column workgroups, not 1.
// REMARK:      remark: inferx-f32-matmul: f32 convolution as a 4x8 filter x 8x49 columns
// CHECK:       stream.executable private @inferx_f32c_8x8x7x7_k1x1_s1x1_d1x1_p0x0
// CHECK:         stream.executable.export public @inferx_f32c_8x8x7x7_k1x1_s1x1_d1x1_p0x0 workgroups() -> (index, index, index) {
// CHECK-NEXT:      %[[X:.+]] = arith.constant 4 : index
// CHECK-NEXT:      %[[Y:.+]] = arith.constant 1 : index
// CHECK-LABEL: func.func @joined_images(
// CHECK:         flow.dispatch @inferx_f32c_8x8x7x7_k1x1_s1x1_d1x1_p0x0::@inferx_f32c_8x8x7x7_k1x1_s1x1_d1x1_p0x0(
func.func @joined_images(%x: tensor<8x8x7x7xf32>, %w: tensor<4x8x1x1xf32> {inferx.parameter = "j.w"}) -> tensor<8x4x7x7xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x4x7x7xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<8x4x7x7xf32>) -> tensor<8x4x7x7xf32>
  %y = linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel", dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<8x8x7x7xf32>, tensor<4x8x1x1xf32>) outs(%init : tensor<8x4x7x7xf32>) -> tensor<8x4x7x7xf32>
  return %y : tensor<8x4x7x7xf32>
}

// -----

// Two 28x28 images over 64 channels (joined: 1568 columns, 49 panels): the kernel's held-panel
// buffer takes 24 panels of a 64-row K block, and 13 a workgroup keep x86-avx512's 4 cores busy
// (4 tiles, one round): 4 column workgroups, not the 13 of 4-panel tiles.
// REMARK:      remark: inferx-f32-matmul: f32 convolution as a 4x64 filter x 64x784 columns
// CHECK:       stream.executable private @inferx_f32c_2x64x28x28_k1x1_s1x1_d1x1_p0x0
// CHECK:         stream.executable.export public @inferx_f32c_2x64x28x28_k1x1_s1x1_d1x1_p0x0 workgroups() -> (index, index, index) {
// CHECK-NEXT:      %[[X:.+]] = arith.constant 4 : index
// CHECK-NEXT:      %[[Y:.+]] = arith.constant 1 : index
// CHECK-LABEL: func.func @held_panels(
// CHECK:         flow.dispatch @inferx_f32c_2x64x28x28_k1x1_s1x1_d1x1_p0x0::@inferx_f32c_2x64x28x28_k1x1_s1x1_d1x1_p0x0(
func.func @held_panels(%x: tensor<2x64x28x28xf32>, %w: tensor<4x64x1x1xf32> {inferx.parameter = "h.w"}) -> tensor<2x4x28x28xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x28x28xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x28x28xf32>) -> tensor<2x4x28x28xf32>
  %y = linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel", dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<2x64x28x28xf32>, tensor<4x64x1x1xf32>) outs(%init : tensor<2x4x28x28xf32>) -> tensor<2x4x28x28xf32>
  return %y : tensor<2x4x28x28xf32>
}

// -----

// A ReLU whose result is padded by -inf for a max pooling inferx-pool-kernel takes (ResNet-50's
// stem): that kernel reads the unpadded value, so the ReLU joins the convolution's epilogue and
// the pad reads the kernel's result.
// REMARK:      remark: inferx-f32-matmul: f32 convolution as a 8x27 filter x 27x64 columns
// REMARK-NEXT: remark: inferx-f32-matmul: fused 1 ops after it (linalg.generic) in its epilogue
// CHECK-LABEL: func.func @relu_before_max_pool(
// CHECK:         %[[Y:.+]] = flow.dispatch @inferx_f32c_1x3x17x17_k3x3_s2x2_d1x1_p0x0_e{{[0-9a-f]+}}::
// CHECK-NEXT:    tensor.pad %[[Y]] low[0, 0, 1, 1]
#mapr = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @relu_before_max_pool(%x: tensor<1x3x17x17xf32>, %w: tensor<8x3x3x3xf32> {inferx.parameter = "s.w"}) -> tensor<1x8x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<1x8x8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %y = linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel", dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x, %w : tensor<1x3x17x17xf32>, tensor<8x3x3x3xf32>) outs(%init : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %relu = linalg.generic {indexing_maps = [#mapr, #mapr], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
         ins(%y : tensor<1x8x8x8xf32>) outs(%e : tensor<1x8x8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.maximumf %a, %zero : f32
    linalg.yield %t : f32
  } -> tensor<1x8x8x8xf32>
  %padded = tensor.pad %relu low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %ninf : f32
  } : tensor<1x8x8x8xf32> to tensor<1x8x10x10xf32>
  %pe = tensor.empty() : tensor<1x8x4x4xf32>
  %pinit = linalg.fill ins(%ninf : f32) outs(%pe : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %window = tensor.empty() : tensor<3x3xf32>
  %p = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%padded, %window : tensor<1x8x10x10xf32>, tensor<3x3xf32>) outs(%pinit : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  return %p : tensor<1x8x4x4xf32>
}

// -----

// ... but not for a pooling the pool kernel declines (dilation 2): IREE writes the ReLU's result
// into the padded buffer itself.
// REMARK:      remark: inferx-f32-matmul: f32 convolution as a 8x27 filter x 27x64 columns
// REMARK-NEXT: remark: inferx-f32-matmul: the ops after it stay IREE's: the result of the ops after it is padded next
// CHECK-LABEL: func.func @relu_before_dilated_max_pool(
// CHECK:         %[[Y:.+]] = flow.dispatch @inferx_f32c_1x3x17x17_k3x3_s2x2_d1x1_p0x0::
// CHECK-NEXT:    %[[R:.+]] = linalg.generic {{.*}} ins(%[[Y]] :
// CHECK:         tensor.pad %[[R]] low[0, 0, 1, 1]
#mapr = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @relu_before_dilated_max_pool(%x: tensor<1x3x17x17xf32>, %w: tensor<8x3x3x3xf32> {inferx.parameter = "s.w"}) -> tensor<1x8x3x3xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<1x8x8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %y = linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel", dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x, %w : tensor<1x3x17x17xf32>, tensor<8x3x3x3xf32>) outs(%init : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %relu = linalg.generic {indexing_maps = [#mapr, #mapr], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
         ins(%y : tensor<1x8x8x8xf32>) outs(%e : tensor<1x8x8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.maximumf %a, %zero : f32
    linalg.yield %t : f32
  } -> tensor<1x8x8x8xf32>
  %padded = tensor.pad %relu low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %ninf : f32
  } : tensor<1x8x8x8xf32> to tensor<1x8x10x10xf32>
  %pe = tensor.empty() : tensor<1x8x3x3xf32>
  %pinit = linalg.fill ins(%ninf : f32) outs(%pe : tensor<1x8x3x3xf32>) -> tensor<1x8x3x3xf32>
  %window = tensor.empty() : tensor<3x3xf32>
  %p = linalg.pooling_nchw_max {dilations = dense<2> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%padded, %window : tensor<1x8x10x10xf32>, tensor<3x3xf32>) outs(%pinit : tensor<1x8x3x3xf32>) -> tensor<1x8x3x3xf32>
  return %p : tensor<1x8x3x3xf32>
}

// -----

// A 3x3 convolution over one 9x9 image (7x7 out): its 49 pixels would leave 23% of two 32-pixel panels
// empty, so its pixels become the product's rows (the `_r` layout: 64 filters in two 32-lane
// panels, the filter packed as W^T [72, 64] = 4608 floats, layout argument 2): all 49 pixels a
// tile, the filters split over x86-avx512's 4 cores in 32-filter panels (2 workgroups). 48
// filters (not whole panels) and two joined images keep the column layout.
// REMARK:      remark: inferx-f32-matmul: f32 convolution as a 64x72 filter x 72x49 columns
// REMARK:      remark: inferx-f32-matmul: f32 convolution as a 48x72 filter x 72x49 columns
// REMARK:      remark: inferx-f32-matmul: f32 convolution as a 64x72 filter x 72x49 columns
// CHECK:       stream.executable private @inferx_f32c_2x8x9x9_k3x3_s1x1_d1x1_p0x0 attributes
// CHECK:       stream.executable private @inferx_f32c_1x8x9x9_k3x3_s1x1_d1x1_p0x0 attributes
// CHECK:       stream.executable private @inferx_f32c_1x8x9x9_k3x3_s1x1_d1x1_p0x0_r attributes
// CHECK:         stream.executable.export public @inferx_f32c_1x8x9x9_k3x3_s1x1_d1x1_p0x0_r workgroups() -> (index, index, index) {
// CHECK-NEXT:      %[[X:.+]] = arith.constant 1 : index
// CHECK-NEXT:      %[[Y:.+]] = arith.constant 2 : index
// CHECK:         config = "workgroup tile 32x49, pixel rows
// CHECK:         %[[LAYOUT:.+]] = arith.constant 2 : i64
// CHECK-NEXT:    %[[MT:.+]] = arith.constant 32 : i64
// CHECK-NEXT:    %[[NT:.+]] = arith.constant 49 : i64
// CHECK:         call @inferx_f32c_tile({{.*}}, %[[LAYOUT]], %{{.+}}, %[[MT]], %{{.+}}, %[[NT]])
// CHECK-LABEL: func.func @pixel_rows(
// CHECK:         flow.dispatch @inferx_f32c_1x8x9x9_k3x3_s1x1_d1x1_p0x0_r::@inferx_f32c_1x8x9x9_k3x3_s1x1_d1x1_p0x0_r(%{{.+}}, %{{.+}}) : (tensor<4608xf32>, tensor<1x8x9x9xf32>) -> tensor<1x64x7x7xf32>
// CHECK:         flow.dispatch @inferx_f32c_1x8x9x9_k3x3_s1x1_d1x1_p0x0::
// CHECK:         flow.dispatch @inferx_f32c_2x8x9x9_k3x3_s1x1_d1x1_p0x0::
func.func @pixel_rows(%x: tensor<1x8x9x9xf32>, %w: tensor<64x8x3x3xf32> {inferx.parameter = "r.w"},
                      %v: tensor<48x8x3x3xf32> {inferx.parameter = "r.v"}, %x2: tensor<2x8x9x9xf32>)
    -> (tensor<1x64x7x7xf32>, tensor<1x48x7x7xf32>, tensor<2x64x7x7xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x64x7x7xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x64x7x7xf32>) -> tensor<1x64x7x7xf32>
  %y = linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel", dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x8x9x9xf32>, tensor<64x8x3x3xf32>) outs(%init : tensor<1x64x7x7xf32>) -> tensor<1x64x7x7xf32>
  %e48 = tensor.empty() : tensor<1x48x7x7xf32>
  %i48 = linalg.fill ins(%zero : f32) outs(%e48 : tensor<1x48x7x7xf32>) -> tensor<1x48x7x7xf32>
  %y48 = linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel", dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %v : tensor<1x8x9x9xf32>, tensor<48x8x3x3xf32>) outs(%i48 : tensor<1x48x7x7xf32>) -> tensor<1x48x7x7xf32>
  %e2 = tensor.empty() : tensor<2x64x7x7xf32>
  %i2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x64x7x7xf32>) -> tensor<2x64x7x7xf32>
  %y2 = linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel", dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x2, %w : tensor<2x8x9x9xf32>, tensor<64x8x3x3xf32>) outs(%i2 : tensor<2x64x7x7xf32>) -> tensor<2x64x7x7xf32>
  return %y, %y48, %y2 : tensor<1x64x7x7xf32>, tensor<1x48x7x7xf32>, tensor<2x64x7x7xf32>
}

// -----

// Declined, each with its remark: a filter that is an input (not a stored weight), an f16
// convolution; a convolution not marked "kernel" is not this pass's.
// REMARK:      remark: inferx-f32-matmul: declined: the filter is not computed from stored weights alone
// REMARK-NEXT: remark: inferx-f32-matmul: declined: operands f16 x f16 -> f16 (the kernel takes f32)
// CHECK-LABEL: func.func @declined(
// CHECK-NOT:     flow.dispatch
// CHECK-COUNT-3: linalg.conv_2d_nchw_fchw
func.func @declined(%x: tensor<1x4x6x6xf32>, %w: tensor<4x4x3x3xf32>, %b: tensor<1x4x4x4xf32>,
                    %xh: tensor<1x4x6x6xf16>, %wh: tensor<4x4x3x3xf16> {inferx.parameter = "h.w"}, %bh: tensor<1x4x4x4xf16>,
                    %wp: tensor<4x4x3x3xf32> {inferx.parameter = "p.w"})
    -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf16>, tensor<1x4x4x4xf32>) {
  %a = linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel", dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x4x6x6xf32>, tensor<4x4x3x3xf32>) outs(%b : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %h = linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel", dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%xh, %wh : tensor<1x4x6x6xf16>, tensor<4x4x3x3xf16>) outs(%bh : tensor<1x4x4x4xf16>) -> tensor<1x4x4x4xf16>
  %n = linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "nchwc", dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %wp : tensor<1x4x6x6xf32>, tensor<4x4x3x3xf32>) outs(%b : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %a, %h, %n : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf16>, tensor<1x4x4x4xf32>
}
