"""inferx-hopper-matmul's fused epilogues: the kernel computes what the ops it replaces computed.

For each function below (a matmul and the ops after it, shaped like what torch-mlir gives for a
projection + bias + GELU, attention heads, a convolution at batch 2 with its bias, ReLU and
residual...), the reference is IREE itself compiling and running the function on this CPU; the
fused kernel is the one the pass plans for it (`fusible_epilogue`), run through Triton's
interpreter (the same generated @triton.jit source the PTX is compiled from) on the same inputs.
No GPU here: the H200 check of whole models against onnxruntime is tools/bench/gpu.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

from inferx_compiler.kernels import triton_matmul  # noqa: E402
from inferx_compiler.targets import get_target  # noqa: E402

_ZERO = """
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %p = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf16>, tensor<{k}x{n}xf16>) outs(%z : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
"""

CASES = {
    # bias, then erf GELU reading the biased value twice, then the f16 cast of the next layer
    "bias_gelu_f16": ("""
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @f(%a: tensor<96x64xf16>, %b: tensor<64x80xf16>, %bias: tensor<80xf32>) -> tensor<96x80xf16> {
""" + _ZERO.format(m=96, n=80, k=64) + """
  %x = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %bias : tensor<96x80xf32>, tensor<80xf32>) outs(%e : tensor<96x80xf32>) {
  ^bb0(%in: f32, %bi: f32, %out: f32):
    %s = arith.addf %in, %bi : f32
    linalg.yield %s : f32
  } -> tensor<96x80xf32>
  %r2 = arith.constant 0.70710678 : f32
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<96x80xf32>) outs(%e : tensor<96x80xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %r2 : f32
    %r = math.erf %s : f32
    linalg.yield %r : f32
  } -> tensor<96x80xf32>
  %g = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %t : tensor<96x80xf32>, tensor<96x80xf32>) outs(%e : tensor<96x80xf32>) {
  ^bb0(%in: f32, %er: f32, %out: f32):
    %one = arith.constant 1.0 : f32
    %half = arith.constant 0.5 : f32
    %u = arith.addf %er, %one : f32
    %v = arith.mulf %in, %u : f32
    %w = arith.mulf %v, %half : f32
    linalg.yield %w : f32
  } -> tensor<96x80xf32>
  %e16 = tensor.empty() : tensor<96x80xf16>
  %o = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<96x80xf32>) outs(%e16 : tensor<96x80xf16>) {
  ^bb0(%in: f32, %out: f16):
    %c = arith.truncf %in : f32 to f16
    linalg.yield %c : f16
  } -> tensor<96x80xf16>
  return %o : tensor<96x80xf16>
}""", 4),
    # [B*S, D] -> [B, S, D] + bias -> [B, S, H, Dh] -> keys transposed [B, H, Dh, S] -> [B*H, Dh, S] f16
    "attention_heads": ("""
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last = affine_map<(d0, d1, d2) -> (d2)>
func.func @f(%a: tensor<64x64xf16>, %b: tensor<64x128xf16>, %bias: tensor<128xf32>) -> tensor<8x32x32xf16> {
""" + _ZERO.format(m=64, n=128, k=64) + """
  %pe = tensor.expand_shape %p [[0, 1], [2]] output_shape [2, 32, 128] : tensor<64x128xf32> into tensor<2x32x128xf32>
  %e3 = tensor.empty() : tensor<2x32x128xf32>
  %x = linalg.generic {indexing_maps = [#id3, #last, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%pe, %bias : tensor<2x32x128xf32>, tensor<128xf32>) outs(%e3 : tensor<2x32x128xf32>) {
  ^bb0(%in: f32, %bi: f32, %out: f32):
    %s = arith.addf %in, %bi : f32
    linalg.yield %s : f32
  } -> tensor<2x32x128xf32>
  %h = tensor.expand_shape %x [[0], [1], [2, 3]] output_shape [2, 32, 4, 32] : tensor<2x32x128xf32> into tensor<2x32x4x32xf32>
  %e4 = tensor.empty() : tensor<2x4x32x32xf32>
  %kt = linalg.transpose ins(%h : tensor<2x32x4x32xf32>) outs(%e4 : tensor<2x4x32x32xf32>) permutation = [0, 2, 3, 1]
  %c = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x4x32x32xf32> into tensor<8x32x32xf32>
  %e16 = tensor.empty() : tensor<8x32x32xf16>
  %o = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%c : tensor<8x32x32xf32>) outs(%e16 : tensor<8x32x32xf16>) {
  ^bb0(%in: f32, %out: f16):
    %t = arith.truncf %in : f32 to f16
    linalg.yield %t : f16
  } -> tensor<8x32x32xf16>
  return %o : tensor<8x32x32xf16>
}""", 6),
    # a 3x3 convolution at batch 2 as [Cout, K] x [K, N*H*W]: back to NCHW, per-channel bias
    # broadcast from [1, C, 1, 1] (read as the 64 values), ReLU, the residual, and a select
    "conv_nchw_relu_residual": ("""
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#nchw = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2, d3)>
#chan = affine_map<(d0, d1, d2, d3) -> (0, d1, 0, 0)>
func.func @f(%a: tensor<64x144xf16>, %b: tensor<144x72xf16>, %bias: tensor<64xf32>, %res: tensor<2x64x6x6xf32>) -> tensor<2x64x6x6xf32> {
""" + _ZERO.format(m=64, n=72, k=144) + """
  %pe = tensor.expand_shape %p [[0], [1, 2, 3]] output_shape [64, 2, 6, 6] : tensor<64x72xf32> into tensor<64x2x6x6xf32>
  %bias4 = tensor.expand_shape %bias [[0, 1, 2, 3]] output_shape [1, 64, 1, 1] : tensor<64xf32> into tensor<1x64x1x1xf32>
  %e4 = tensor.empty() : tensor<2x64x6x6xf32>
  %x = linalg.generic {indexing_maps = [#nchw, #chan, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%pe, %bias4 : tensor<64x2x6x6xf32>, tensor<1x64x1x1xf32>) outs(%e4 : tensor<2x64x6x6xf32>) {
  ^bb0(%in: f32, %bi: f32, %out: f32):
    %s = arith.addf %in, %bi : f32
    linalg.yield %s : f32
  } -> tensor<2x64x6x6xf32>
  %y = linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %res : tensor<2x64x6x6xf32>, tensor<2x64x6x6xf32>) outs(%e4 : tensor<2x64x6x6xf32>) {
  ^bb0(%in: f32, %r: f32, %out: f32):
    %zero = arith.constant 0.0 : f32
    %relu = arith.maximumf %in, %zero : f32
    %s = arith.addf %relu, %r : f32
    %neg = arith.cmpf olt, %r, %zero : f32
    %sel = arith.select %neg, %s, %relu : f32
    linalg.yield %sel : f32
  } -> tensor<2x64x6x6xf32>
  return %y : tensor<2x64x6x6xf32>
}""", 3),
    # ResNet at batch 1: the bias is the matmul's init (a linalg.broadcast of the per-channel vector,
    # read as the vector), the result back to NCHW, and torch-mlir's ReLU (cmpf ugt + select)
    "conv_bias_init_relu": ("""
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @f(%a: tensor<32x64xf16>, %b: tensor<64x64xf16>, %bias: tensor<32xf32>) -> tensor<1x32x8x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e4 = tensor.empty() : tensor<1x32x8x8xf32>
  %bb = linalg.broadcast ins(%bias : tensor<32xf32>) outs(%e4 : tensor<1x32x8x8xf32>) dimensions = [0, 2, 3]
  %init = tensor.collapse_shape %bb [[0, 1], [2, 3]] : tensor<1x32x8x8xf32> into tensor<32x64xf32>
  %p = linalg.matmul ins(%a, %b : tensor<32x64xf16>, tensor<64x64xf16>) outs(%init : tensor<32x64xf32>) -> tensor<32x64xf32>
  %p3 = tensor.expand_shape %p [[0, 1], [2]] output_shape [1, 32, 64] : tensor<32x64xf32> into tensor<1x32x64xf32>
  %p4 = tensor.expand_shape %p3 [[0], [1], [2, 3]] output_shape [1, 32, 8, 8] : tensor<1x32x64xf32> into tensor<1x32x8x8xf32>
  %y = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%p4 : tensor<1x32x8x8xf32>) outs(%e4 : tensor<1x32x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %pos = arith.cmpf ugt, %in, %c0 : f32
    %r = arith.select %pos, %in, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x32x8x8xf32>
  return %y : tensor<1x32x8x8xf32>
}""", 3),
    # the init is read (not a zero fill), and a bias materialized as a broadcast copy first
    "init_and_broadcast_bias": ("""
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @f(%a: tensor<48x32xf16>, %b: tensor<32x40xf16>, %init: tensor<48x40xf32>, %bias: tensor<40xf32>) -> tensor<48x40xf32> {
  %e = tensor.empty() : tensor<48x40xf32>
  %p = linalg.matmul ins(%a, %b : tensor<48x32xf16>, tensor<32x40xf16>) outs(%init : tensor<48x40xf32>) -> tensor<48x40xf32>
  %bb = linalg.generic {indexing_maps = [#col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%bias : tensor<40xf32>) outs(%e : tensor<48x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<48x40xf32>
  %x = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %bb : tensor<48x40xf32>, tensor<48x40xf32>) outs(%e : tensor<48x40xf32>) {
  ^bb0(%in: f32, %bi: f32, %out: f32):
    %s = arith.subf %in, %bi : f32
    %t = math.tanh %s : f32
    linalg.yield %t : f32
  } -> tensor<48x40xf32>
  return %x : tensor<48x40xf32>
}""", 1),
}

_INTERPRETER = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np, torch
from inferx_compiler.kernels import triton_matmul as tm
spec_json, data = sys.argv[1], sys.argv[2]
spec = tm.spec_from_json(spec_json)
arrays = np.load(data)
out = torch.full(tuple(arrays["out_shape"]), float("nan"), dtype=getattr(torch, str(arrays["out_dtype"])))
args = [torch.from_numpy(arrays["a"]), torch.from_numpy(arrays["b"])]
args.append(None)  # the init (a zero fill, or an epilogue input)
args += [torch.from_numpy(arrays[f"x{i}"]) for i in range(len(spec.epilogue.inputs))]
tm.kernel_function(spec)[spec.grid[:2]](*args, out, **tm.constants(spec))
np.save(data + ".out.npy", out.float().numpy())
"""


def _planned(text: str):
    """The module (keep it alive while using the rest), its matmul, the pass's epilogue plan for
    it, and the function's arguments."""
    from iree.compiler import ir

    from inferx_compiler.passes.support.iree_ir import is_zero_fill
    from inferx_compiler.passes.analysis.linalg_analysis import collect
    from inferx_compiler.passes.analysis.matmul_epilogue import fusible_epilogue

    ctx = ir.Context()
    module = ir.Module.parse(text, ctx)
    matmul = collect(module.operation, lambda o: o.name == "linalg.matmul")[0]
    plan, why = fusible_epilogue(matmul, add_init=not is_zero_fill(matmul.operands[2]))
    assert plan is not None, why
    func = module.body.operations[0]
    arguments = list(func.regions[0].blocks[0].arguments)
    return module, matmul, plan, arguments


def _reference(text: str, inputs: list) -> np.ndarray:
    import iree.compiler
    import iree.runtime

    vmfb = iree.compiler.compile_str(text, target_backends=["llvm-cpu"],
                                     extra_args=["--iree-llvmcpu-target-cpu=generic"])
    module = iree.runtime.load_vm_flatbuffer(vmfb, backend="llvm-cpu")
    results = module.f(*inputs)
    if isinstance(results, (tuple, list)):
        return [np.asarray(r.to_host()) for r in results]
    return np.asarray(results.to_host())


def _random(arg, rng) -> np.ndarray:
    shape = list(arg.type.shape)
    dtype = np.float16 if str(arg.type.element_type) == "f16" else np.float32
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_kernel_matches_iree_in_the_interpreter(case, tmp_path):
    text, fused_ops = CASES[case]
    module, matmul, plan, arguments = _planned(text)
    assert len(plan.ops) == fused_ops, plan.fused  # every op after the matmul
    rng = np.random.default_rng(0)
    inputs = [_random(arg, rng) for arg in arguments]
    ref = _reference(text, inputs)

    from inferx_compiler.passes.hopper_matmul import matmul_form

    with module.context:
        form, why = matmul_form(matmul)
    assert form is not None, why
    spec = triton_matmul.KernelSpec(form.m, form.n, form.k, form.element_type, block_m=32,
                                    block_n=32, block_k=16, warps=4, stages=2, epilogue=plan.epilogue)
    index = {arg: i for i, arg in enumerate(arguments)}
    data = {"a": inputs[0], "b": inputs[1], "out_shape": np.array(ref.shape), "out_dtype": np.array(
        "float16" if ref.dtype == np.float16 else "float32")}
    for i, value in enumerate(plan.operands):
        source = inputs[index[value]]  # every operand here is an argument (or read through one)
        data[f"x{i}"] = source
    np.savez(tmp_path / "data.npz", **data)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", _INTERPRETER, triton_matmul.spec_to_json(spec),
                           str(tmp_path / "data.npz")], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(tmp_path / "data.npz.out.npy")
    assert np.isfinite(got).all(), "some output elements were never written"
    err = float(np.linalg.norm(got - ref.astype(np.float32)) / np.linalg.norm(ref.astype(np.float32)))
    tolerance = 2e-3 if ref.dtype == np.float16 else 2e-5  # f16: its rounding; f32: summation order
    assert err <= tolerance, err


def test_product_read_outside_the_epilogue_is_not_fused():
    """The product also returned: the kernel would need two outputs, so nothing is fused."""
    from iree.compiler import ir

    from inferx_compiler.passes.analysis.linalg_analysis import collect
    from inferx_compiler.passes.analysis.matmul_epilogue import fusible_epilogue

    text = CASES["init_and_broadcast_bias"][0].replace("-> tensor<48x40xf32> {\n  %e", "-> (tensor<48x40xf32>, "
                                                       "tensor<48x40xf32>) {\n  %e").replace(
        "return %x : tensor<48x40xf32>", "return %x, %p : tensor<48x40xf32>, tensor<48x40xf32>")
    module = ir.Module.parse(text, ir.Context())
    matmul = collect(module.operation, lambda o: o.name == "linalg.matmul")[0]
    plan, why = fusible_epilogue(matmul)
    assert plan is None and why


def test_spec_round_trips_through_json():
    spec = triton_matmul.KernelSpec(64, 128, 64, "f16", epilogue=triton_matmul.Epilogue(
        (triton_matmul.EpilogueInput("f32", triton_matmul.Offsets(cols=((1, 128, 1),))),),
        (("v0", "add", ("acc", "x0")),), "v0", "f16", triton_matmul.Offsets(((1, 64, 128),), ((1, 128, 1),))))
    assert triton_matmul.spec_from_json(triton_matmul.spec_to_json(spec)) == spec
    assert json.loads(triton_matmul.spec_to_json(spec))["epilogue"]["result"] == "v0"


# Query, key and value projections of one input, each with its own epilogue (bias + f16 cast;
# bias, keys transposed; bias + residual + ReLU kept in f32), and a fourth sibling whose product
# is returned as it is: one grouped kernel (inferx-hopper-matmul's sibling grouping) computes all four.
GROUP = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#row = affine_map<(d0, d1) -> (d0)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
func.func @f(%a: tensor<96x48xf16>, %wq: tensor<48x80xf16>, %wk: tensor<48x80xf16>, %wv: tensor<48x80xf16>,
             %wp: tensor<48x80xf16>, %bq: tensor<80xf32>, %bk: tensor<80xf32>, %bv: tensor<80xf32>,
             %res: tensor<96x80xf32>) -> (tensor<96x80xf16>, tensor<80x96xf16>, tensor<96x80xf32>, tensor<96x80xf32>) {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<96x80xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<96x80xf32>) -> tensor<96x80xf32>
  %e16 = tensor.empty() : tensor<96x80xf16>
  %e16t = tensor.empty() : tensor<80x96xf16>
  %q = linalg.matmul ins(%a, %wq : tensor<96x48xf16>, tensor<48x80xf16>) outs(%z : tensor<96x80xf32>) -> tensor<96x80xf32>
  %q16 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%q, %bq : tensor<96x80xf32>, tensor<80xf32>) outs(%e16 : tensor<96x80xf16>) {
  ^bb0(%in: f32, %b: f32, %out: f16):
    %s = arith.addf %in, %b : f32
    %t = arith.truncf %s : f32 to f16
    linalg.yield %t : f16
  } -> tensor<96x80xf16>
  %k = linalg.matmul ins(%a, %wk : tensor<96x48xf16>, tensor<48x80xf16>) outs(%z : tensor<96x80xf32>) -> tensor<96x80xf32>
  %k16 = linalg.generic {indexing_maps = [#tr, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%k, %bk : tensor<96x80xf32>, tensor<80xf32>) outs(%e16t : tensor<80x96xf16>) {
  ^bb0(%in: f32, %b: f32, %out: f16):
    %s = arith.addf %in, %b : f32
    %t = arith.truncf %s : f32 to f16
    linalg.yield %t : f16
  } -> tensor<80x96xf16>
  %v = linalg.matmul ins(%a, %wv : tensor<96x48xf16>, tensor<48x80xf16>) outs(%z : tensor<96x80xf32>) -> tensor<96x80xf32>
  %v2 = linalg.generic {indexing_maps = [#id, #col, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%v, %bv, %res : tensor<96x80xf32>, tensor<80xf32>, tensor<96x80xf32>) outs(%e : tensor<96x80xf32>) {
  ^bb0(%in: f32, %b: f32, %r: f32, %out: f32):
    %s = arith.addf %in, %b : f32
    %u = arith.addf %s, %r : f32
    %m = arith.maximumf %u, %c0 : f32
    linalg.yield %m : f32
  } -> tensor<96x80xf32>
  %p = linalg.matmul ins(%a, %wp : tensor<96x48xf16>, tensor<48x80xf16>) outs(%z : tensor<96x80xf32>) -> tensor<96x80xf32>
  return %q16, %k16, %v2, %p : tensor<96x80xf16>, tensor<80x96xf16>, tensor<96x80xf32>, tensor<96x80xf32>
}"""

_GROUP_INTERPRETER = r"""
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np, torch
from inferx_compiler.kernels import triton_matmul as tm
spec = tm.spec_from_json(open(sys.argv[1]).read())
arrays = np.load(sys.argv[2])
args = [torch.from_numpy(arrays[f"in{i}"]) for i in range(spec.input_bindings)]
outs = [torch.full(tuple(arrays[f"shape{i}"]), float("nan"), dtype=getattr(torch, str(arrays[f"dtype{i}"])))
        for i in range(spec.outputs)]
tm.kernel_function(spec)[spec.grid[:2]](*args, *outs)
np.savez(sys.argv[2] + ".out.npz", *[o.float().numpy() for o in outs])
"""


def test_grouped_siblings_match_iree_in_the_interpreter(tmp_path):
    """The pass's own grouping plan for four siblings (its tile rule, each member's epilogue plan)
    run through Triton's interpreter, every output against IREE's CPU code for the function."""
    from iree.compiler import ir

    from inferx_compiler.passes.hopper_matmul import HopperMatmul, matmul_form, sibling_groups
    from inferx_compiler.passes.analysis.linalg_analysis import collect

    module = ir.Module.parse(GROUP, ir.Context())
    with module.context:
        candidates = [(op, matmul_form(op)[0]) for op in collect(module.operation, lambda o: o.name == "linalg.matmul")]
        (siblings,) = sibling_groups(candidates)
        group, why = HopperMatmul().group_plan(siblings, get_target("h200"))
    assert group is not None, why
    spec = group.spec
    assert spec.outputs == 4 and [p is None for p in group.plans] == [False, False, False, True]
    arguments = list(module.body.operations[0].regions[0].blocks[0].arguments)
    rng = np.random.default_rng(1)
    inputs = [_random(arg, rng) for arg in arguments]
    refs = _reference(GROUP, inputs)
    index = {arg: i for i, arg in enumerate(arguments)}
    bindings = [inputs[0]]  # A, then each member's B and epilogue inputs (all function arguments here)
    for (op, _), plan in zip(siblings, group.plans):
        bindings += [inputs[index[op.operands[1]]]] + [inputs[index[v]] for v in (plan.operands if plan else [])]
    data = {f"in{i}": x for i, x in enumerate(bindings)}
    for i, (ref, plan) in enumerate(zip(refs, group.plans)):
        data[f"shape{i}"] = np.array(ref.shape if plan else (1, *ref.shape))
        data[f"dtype{i}"] = np.array("float16" if ref.dtype == np.float16 else "float32")
    np.savez(tmp_path / "data.npz", **data)
    (tmp_path / "spec.json").write_text(triton_matmul.spec_to_json(spec))
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", _GROUP_INTERPRETER, str(tmp_path / "spec.json"),
                           str(tmp_path / "data.npz")], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(tmp_path / "data.npz.out.npz")
    for i, ref in enumerate(refs):
        out = got[f"arr_{i}"].reshape(ref.shape)
        assert np.isfinite(out).all(), f"output {i}: some elements were never written"
        ref = ref.astype(np.float32)
        err = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
        assert err <= (2e-3 if i < 2 else 2e-5), (i, err)
