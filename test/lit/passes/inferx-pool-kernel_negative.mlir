// REQUIRES: c-compiler
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-pool-kernel)' | filecheck %s
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx512},inferx-pool-kernel)' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: inferx-opt %s --pass-pipeline='builtin.module(inferx-set-target{target=x86-avx2},inferx-pool-kernel)' 2>&1 | filecheck %s --check-prefix=NOAVX512

// Max poolings the kernel declines, each with its reason: a dynamic batch, f16 values, a
// dilated window, an init that is not -inf (a max with 0 is a ReLU too: not the kernel's
// function), planes too wide for its row buffer. A sum pooling (average pooling) is not
// the kernel's: no remark, nothing rewritten. On a target without AVX-512 nothing is said.
// REMARK:      remark: inferx-pool-kernel: max pooling left to IREE: dynamic shape
// REMARK-NEXT: remark: inferx-pool-kernel: max pooling left to IREE: element type f16 (the kernel takes f32)
// REMARK-NEXT: remark: inferx-pool-kernel: max pooling left to IREE: dilation (2, 2) (the kernel takes 1)
// REMARK-NEXT: remark: inferx-pool-kernel: max pooling left to IREE: an init other than a -inf fill
// REMARK-NEXT: remark: inferx-pool-kernel: max pooling left to IREE: planes 5000 wide need a row buffer over 4096 floats
// REMARK-NOT:  remark
// NOAVX512-NOT: remark
// NOAVX512-NOT: flow.dispatch
// CHECK-LABEL: func.func @declined(
// CHECK-NOT:     flow.dispatch
// CHECK-COUNT-5: linalg.pooling_nchw_max
// CHECK:         linalg.pooling_nchw_sum
// CHECK-NOT:     flow.dispatch
// CHECK:         return
func.func @declined(%xd: tensor<?x4x8x8xf32>, %xh: tensor<1x4x8x8xf16>, %x: tensor<1x4x8x8xf32>, %xw: tensor<1x1x2x5000xf32>)
    -> (tensor<?x4x3x3xf32>, tensor<1x4x3x3xf16>, tensor<1x4x2x2xf32>, tensor<1x4x3x3xf32>, tensor<1x1x1x2499xf32>, tensor<1x4x3x3xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %ninfh = arith.constant 0xFC00 : f16
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %n = tensor.dim %xd, %c0 : tensor<?x4x8x8xf32>
  %w = tensor.empty() : tensor<3x3xf32>
  %ed = tensor.empty(%n) : tensor<?x4x3x3xf32>
  %fd = linalg.fill ins(%ninf : f32) outs(%ed : tensor<?x4x3x3xf32>) -> tensor<?x4x3x3xf32>
  %yd = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%xd, %w : tensor<?x4x8x8xf32>, tensor<3x3xf32>) outs(%fd : tensor<?x4x3x3xf32>) -> tensor<?x4x3x3xf32>
  %wh = tensor.empty() : tensor<3x3xf16>
  %eh = tensor.empty() : tensor<1x4x3x3xf16>
  %fh = linalg.fill ins(%ninfh : f16) outs(%eh : tensor<1x4x3x3xf16>) -> tensor<1x4x3x3xf16>
  %yh = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%xh, %wh : tensor<1x4x8x8xf16>, tensor<3x3xf16>) outs(%fh : tensor<1x4x3x3xf16>) -> tensor<1x4x3x3xf16>
  %e2 = tensor.empty() : tensor<1x4x2x2xf32>
  %f2 = linalg.fill ins(%ninf : f32) outs(%e2 : tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  %yl = linalg.pooling_nchw_max {dilations = dense<2> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%x, %w : tensor<1x4x8x8xf32>, tensor<3x3xf32>) outs(%f2 : tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  %e3 = tensor.empty() : tensor<1x4x3x3xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  %yz = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%x, %w : tensor<1x4x8x8xf32>, tensor<3x3xf32>) outs(%f3 : tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  %ww = tensor.empty() : tensor<2x2xf32>
  %ew = tensor.empty() : tensor<1x1x1x2499xf32>
  %fw = linalg.fill ins(%ninf : f32) outs(%ew : tensor<1x1x1x2499xf32>) -> tensor<1x1x1x2499xf32>
  %yw = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%xw, %ww : tensor<1x1x2x5000xf32>, tensor<2x2xf32>) outs(%fw : tensor<1x1x1x2499xf32>) -> tensor<1x1x1x2499xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  %ys = linalg.pooling_nchw_sum {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%x, %w : tensor<1x4x8x8xf32>, tensor<3x3xf32>) outs(%f4 : tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %yd, %yh, %yl, %yz, %yw, %ys : tensor<?x4x3x3xf32>, tensor<1x4x3x3xf16>, tensor<1x4x2x2xf32>, tensor<1x4x3x3xf32>, tensor<1x1x1x2499xf32>, tensor<1x4x3x3xf32>
}
