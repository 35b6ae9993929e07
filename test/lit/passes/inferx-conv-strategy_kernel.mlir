// REQUIRES: c-compiler
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-conv-strategy)' | filecheck %s
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-conv-strategy)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-conv-strategy{kernel=false})' | filecheck %s --check-prefix=NOPASS
// RUN: inferx-opt %s --split-input-file --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512-vnni},inferx-conv-strategy)' | filecheck %s --check-prefix=NOKERNEL

// On a target whose record runs f32 products on our kernel (x86-avx512: Target.f32_kernel), a
// 3x3 f32 convolution whose channels are off IREE's 16-channel NCHWc blocks stays a convolution
// marked for our convolution entry (inferx-f32-matmul carries it out), where it was im2col +
// matmul before; so does a dilated one (IREE's direct convolution before) and one with at most
// KERNEL_NCHWC_MAX_PIXELS output pixels even where NCHWc applies (at two threads NCHWc is
// faster on large images, ours on small ones). With `kernel=false` (inferx-f32-matmul does not
// run) and on a record without the kernel, the other rules decide.
// REMARK: remark: inferx-conv-strategy: kernel: 3x3 stride (1, 1) dilation (1, 1), 8->12 channels, 10x10 pixels: our f32 convolution kernel (implicit im2col)
// REMARK: remark: inferx-conv-strategy: kernel: 3x3 stride (2, 2) dilation (1, 1), 32->32 channels, 7x7 pixels
// REMARK: remark: inferx-conv-strategy: kernel: 3x3 stride (1, 1) dilation (2, 2), 8->8 channels, 8x8 pixels
// CHECK-LABEL: func.func @kernel_convs(
// CHECK-COUNT-3: linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel"
// CHECK-NOT:     linalg.matmul
// NOPASS-LABEL: func.func @kernel_convs(
// NOPASS:         linalg.matmul
// NOPASS:         linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "nchwc"
// NOPASS-NOT:     "kernel"
// NOKERNEL-LABEL: func.func @kernel_convs(
// NOKERNEL-NOT:   "kernel"
func.func @kernel_convs(%x: tensor<1x8x12x12xf32>, %w: tensor<12x8x3x3xf32>, %b: tensor<1x12x10x10xf32>,
                        %x2: tensor<1x32x15x15xf32>, %w2: tensor<32x32x3x3xf32>, %b2: tensor<1x32x7x7xf32>,
                        %wd: tensor<8x8x3x3xf32>, %bd: tensor<1x8x8x8xf32>)
    -> (tensor<1x12x10x10xf32>, tensor<1x32x7x7xf32>, tensor<1x8x8x8xf32>) {
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x8x12x12xf32>, tensor<12x8x3x3xf32>) outs(%b : tensor<1x12x10x10xf32>) -> tensor<1x12x10x10xf32>
  %s = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x2, %w2 : tensor<1x32x15x15xf32>, tensor<32x32x3x3xf32>) outs(%b2 : tensor<1x32x7x7xf32>) -> tensor<1x32x7x7xf32>
  %d = linalg.conv_2d_nchw_fchw {dilations = dense<2> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %wd : tensor<1x8x12x12xf32>, tensor<8x8x3x3xf32>) outs(%bd : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  return %a, %s, %d : tensor<1x12x10x10xf32>, tensor<1x32x7x7xf32>, tensor<1x8x8x8xf32>
}

// -----

// Not for the kernel: NCHWc's blocks over a large image, a 1x1 filter over 3x3 pixels (a matmul:
// they fill 28% of the entry's lanes), a filter of more than 64 taps (9x9: the kernel's tap
// table), an f16 convolution.
// REMARK:      remark: inferx-conv-strategy: nchwc: 3x3 stride (1, 1), 16->16 channels
// REMARK-NEXT: remark: inferx-conv-strategy: matmul: 1x1 filter
// REMARK-NEXT: remark: inferx-conv-strategy: im2col: 9x9 stride (1, 1)
// REMARK-NEXT: remark: inferx-conv-strategy: im2col: 3x3 stride (1, 1)
// CHECK-LABEL: func.func @other_rules(
// CHECK-NOT:     "kernel"
func.func @other_rules(%x: tensor<1x16x34x34xf32>, %w: tensor<16x16x3x3xf32>, %b: tensor<1x16x32x32xf32>,
                       %x1: tensor<1x16x3x3xf32>, %w1: tensor<16x16x1x1xf32>, %b1: tensor<1x16x3x3xf32>,
                       %x9: tensor<1x3x20x20xf32>, %w9: tensor<8x3x9x9xf32>, %b9: tensor<1x8x12x12xf32>,
                       %xh: tensor<1x8x12x12xf16>, %wh: tensor<12x8x3x3xf16>, %bh: tensor<1x12x10x10xf16>)
    -> (tensor<1x16x32x32xf32>, tensor<1x16x3x3xf32>, tensor<1x8x12x12xf32>, tensor<1x12x10x10xf16>) {
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x16x34x34xf32>, tensor<16x16x3x3xf32>) outs(%b : tensor<1x16x32x32xf32>) -> tensor<1x16x32x32xf32>
  %p = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x1, %w1 : tensor<1x16x3x3xf32>, tensor<16x16x1x1xf32>) outs(%b1 : tensor<1x16x3x3xf32>) -> tensor<1x16x3x3xf32>
  %n = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x9, %w9 : tensor<1x3x20x20xf32>, tensor<8x3x9x9xf32>) outs(%b9 : tensor<1x8x12x12xf32>) -> tensor<1x8x12x12xf32>
  %h = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%xh, %wh : tensor<1x8x12x12xf16>, tensor<12x8x3x3xf16>) outs(%bh : tensor<1x12x10x10xf16>) -> tensor<1x12x10x10xf16>
  return %a, %p, %n, %h : tensor<1x16x32x32xf32>, tensor<1x16x3x3xf32>, tensor<1x8x12x12xf32>, tensor<1x12x10x10xf16>
}

// -----

// 1x1 filters whose pixels fill the entry's lanes: the convolution entry, at batch 1 too (its
// tiles read the image as the product's operand, as the matmul would; ResNet-50 b1 40.7 -> 38.3
// ms on the AMX Xeon), at batch 2 strided or not (as a matmul the images would be folded into
// its columns: two transposes a convolution).
// REMARK:      remark: inferx-conv-strategy: kernel: 1x1 stride (1, 1) dilation (1, 1), 16->32 channels, 9x9 pixels
// REMARK-NEXT: remark: inferx-conv-strategy: kernel: 1x1 stride (1, 1) dilation (1, 1), 16->32 channels, 9x9 pixels
// REMARK-NEXT: remark: inferx-conv-strategy: kernel: 1x1 stride (2, 2) dilation (1, 1), 16->32 channels, 5x5 pixels
// CHECK-LABEL: func.func @pointwise(
// CHECK-NOT:     linalg.matmul
// CHECK-COUNT-3: linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel"
func.func @pointwise(%x1: tensor<1x16x9x9xf32>, %x2: tensor<2x16x9x9xf32>, %w: tensor<32x16x1x1xf32>,
                     %b1: tensor<1x32x9x9xf32>, %b2: tensor<2x32x9x9xf32>, %b3: tensor<2x32x5x5xf32>)
    -> (tensor<1x32x9x9xf32>, tensor<2x32x9x9xf32>, tensor<2x32x5x5xf32>) {
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x1, %w : tensor<1x16x9x9xf32>, tensor<32x16x1x1xf32>) outs(%b1 : tensor<1x32x9x9xf32>) -> tensor<1x32x9x9xf32>
  %b = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x2, %w : tensor<2x16x9x9xf32>, tensor<32x16x1x1xf32>) outs(%b2 : tensor<2x32x9x9xf32>) -> tensor<2x32x9x9xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x2, %w : tensor<2x16x9x9xf32>, tensor<32x16x1x1xf32>) outs(%b3 : tensor<2x32x5x5xf32>) -> tensor<2x32x5x5xf32>
  return %a, %b, %c : tensor<1x32x9x9xf32>, tensor<2x32x9x9xf32>, tensor<2x32x5x5xf32>
}

// -----

// Images whose pixels fill under 3/4 of the entry's 32-lane panels (KERNEL_MIN_LANE_FILL; it
// takes an image at a time): a 1x1 over 3x3 pixels at batch 2 stays a matmul (the images side by
// side), a 3x3 with a 6x6 output (36 pixels: 56%) over 16-channel blocks stays NCHWc.
// REMARK:      remark: inferx-conv-strategy: matmul: 1x1 filter, stride (1, 1): a matmul
// REMARK-NEXT: remark: inferx-conv-strategy: nchwc: 3x3 stride (1, 1), 32->32 channels
// CHECK-LABEL: func.func @thin_images(
// CHECK-NOT:     "kernel"
func.func @thin_images(%x: tensor<2x16x3x3xf32>, %w: tensor<32x16x1x1xf32>, %b: tensor<2x32x3x3xf32>,
                       %x6: tensor<1x32x8x8xf32>, %w6: tensor<32x32x3x3xf32>, %b6: tensor<1x32x6x6xf32>)
    -> (tensor<2x32x3x3xf32>, tensor<1x32x6x6xf32>) {
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<2x16x3x3xf32>, tensor<32x16x1x1xf32>) outs(%b : tensor<2x32x3x3xf32>) -> tensor<2x32x3x3xf32>
  %s = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x6, %w6 : tensor<1x32x8x8xf32>, tensor<32x32x3x3xf32>) outs(%b6 : tensor<1x32x6x6xf32>) -> tensor<1x32x6x6xf32>
  return %a, %s : tensor<2x32x3x3xf32>, tensor<1x32x6x6xf32>
}

// -----

// The boundary where NCHWc applies too (KERNEL_NCHWC_MAX_PIXELS = 196): a 14x14 output over
// 16-channel blocks goes to our kernel, a 16x16 one (256 pixels) stays NCHWc.
// REMARK:      remark: inferx-conv-strategy: kernel: 3x3 stride (1, 1) dilation (1, 1), 16->16 channels, 14x14 pixels
// REMARK-NEXT: remark: inferx-conv-strategy: nchwc: 3x3 stride (1, 1), 16->16 channels
// CHECK-LABEL: func.func @nchwc_boundary(
// CHECK:         linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "kernel"
// CHECK:         linalg.conv_2d_nchw_fchw {inferx.conv_strategy = "nchwc"
func.func @nchwc_boundary(%x14: tensor<1x16x16x16xf32>, %x16: tensor<1x16x18x18xf32>, %w: tensor<16x16x3x3xf32>,
                          %b14: tensor<1x16x14x14xf32>, %b16: tensor<1x16x16x16xf32>)
    -> (tensor<1x16x14x14xf32>, tensor<1x16x16x16xf32>) {
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x14, %w : tensor<1x16x16x16xf32>, tensor<16x16x3x3xf32>) outs(%b14 : tensor<1x16x14x14xf32>) -> tensor<1x16x14x14xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x16, %w : tensor<1x16x18x18xf32>, tensor<16x16x3x3xf32>) outs(%b16 : tensor<1x16x16x16xf32>) -> tensor<1x16x16x16xf32>
  return %a, %c : tensor<1x16x14x14xf32>, tensor<1x16x16x16xf32>
}
