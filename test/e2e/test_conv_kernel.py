"""Convolutions on our f32 kernel's convolution entry (f32_gemm.c `inferx_f32c_tile`, chosen by
inferx-conv-strategy as "kernel", carried out by inferx-f32-matmul) on shapes that reach its
edges, against onnxruntime in f32: channels off the 16-channel blocks, zero padding folded into
the kernel (symmetric and not), stride 2 (the gathered path), dilation 2, a 5x5 filter, a 7x7
output over 32 channels (where NCHWc would apply too), output widths of 1, 2 and 5 pixels (one
panel spanning many rows: the segment table's limit), more filters than one row tile, a residual
add and ReLU in the epilogue at batch 1 and 3 (the image's rows offset), and the static (1, 3)
and dynamic (2) functions. The kernel sums in f32 in another order than onnxruntime: results
agree to ~1e-7; a misplaced tap, pad, image or panel is off by the size of the values."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferx_compiler
from e2e_models import _model, _w
from helpers import artifact_json, onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.kernels import cpu_objects
from inferx_compiler.targets import get_target

pytestmark = [
    pytest.mark.skipif("avx512f" not in get_target("cpu").features, reason="this CPU has no AVX-512 (avx512f)"),
    pytest.mark.skipif(cpu_objects.c_compiler()[0] is None, reason="no C compiler for the kernel"),
]

TOLERANCE = 1e-5


def conv_zoo(seed=5, c=6, size=13):
    """x [B, 6, 13, 13] -> five branches, each on the kernel, concatenated over channels after a
    global average pool (so every branch's every pixel counts) and also returned whole:
      a: 3x3, pads 1 (6 -> 20 channels: off the blocks, one row tile of 2 blocks), + bias, ReLU;
      b: 5x5 stride 2, pads (2, 1, 1, 2) (asymmetric), 6 -> 10, + bias;
      c: 3x3 dilation 2, no pad, 6 -> 8;
      d: a's output -> 3x3 pads 1 (20 -> 20) + bias, + a (residual), ReLU;
      e: 3x3 stride 2 pads 1 over d (20 -> 32, a 7x7 output);
      f: 3x3 over a 13x1 and a 13x2 column of x (output widths 1 and 2: gathered), and a 5-wide
         window (segments of 5 pixels);
      g: two 3x3 pads 1 over d (20 -> 32 channels, 169 pixels), the second + bias + the first
         (residual), ReLU.
    At batch 1 e and g are in the pixel-rows layout (filters in whole 32-lane panels, an image's
    pixels leaving panels part empty); at batch 3 their images are joined."""
    rng = np.random.default_rng(seed)
    inits = {"wa": _w(rng, 20, c, 3, 3, scale=(9 * c) ** -0.5), "ba": _w(rng, 20, scale=0.1),
             "wb": _w(rng, 10, c, 5, 5, scale=(25 * c) ** -0.5), "bb": _w(rng, 10, scale=0.1),
             "wc": _w(rng, 8, c, 3, 3, scale=(9 * c) ** -0.5),
             "wd": _w(rng, 20, 20, 3, 3, scale=(180) ** -0.5), "bd": _w(rng, 20, scale=0.1),
             "we": _w(rng, 32, 20, 3, 3, scale=(180) ** -0.5),
             "wf": _w(rng, 4, c, 3, 3, scale=(9 * c) ** -0.5),
             "wg": _w(rng, 32, 20, 3, 3, scale=(180) ** -0.5), "wg2": _w(rng, 32, 20, 3, 3, scale=(180) ** -0.5),
             "bg": _w(rng, 32, scale=0.1)}
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["ca"], pads=[1, 1, 1, 1], name="a"),
             helper.make_node("Relu", ["ca"], ["ra"]),
             helper.make_node("Conv", ["x", "wb", "bb"], ["yb"], kernel_shape=[5, 5], strides=[2, 2],
                              pads=[2, 1, 1, 2], name="b"),
             helper.make_node("Conv", ["x", "wc"], ["yc"], dilations=[2, 2], name="c"),
             helper.make_node("Conv", ["ra", "wd", "bd"], ["cd"], pads=[1, 1, 1, 1], name="d"),
             helper.make_node("Add", ["cd", "ra"], ["sd"]),
             helper.make_node("Relu", ["sd"], ["yd"]),
             helper.make_node("Conv", ["yd", "we"], ["ye"], strides=[2, 2], pads=[1, 1, 1, 1], name="e"),
             helper.make_node("Slice", ["x", "s0", "s1", "axes"], ["x1"]),
             helper.make_node("Conv", ["x1", "wf"], ["yf1"], pads=[1, 1, 1, 1], name="f1"),
             helper.make_node("Slice", ["x", "s0", "s2", "axes"], ["x2"]),
             helper.make_node("Conv", ["x2", "wf"], ["yf2"], pads=[1, 1, 1, 1], name="f2"),
             helper.make_node("Slice", ["x", "s0", "s5", "axes"], ["x5"]),
             helper.make_node("Conv", ["x5", "wf"], ["yf5"], pads=[1, 1, 1, 1], name="f5"),
             helper.make_node("Conv", ["yd", "wg"], ["g1"], pads=[1, 1, 1, 1], name="g1"),
             helper.make_node("Conv", ["yd", "wg2", "bg"], ["g2"], pads=[1, 1, 1, 1], name="g2"),
             helper.make_node("Add", ["g2", "g1"], ["sg"]),
             helper.make_node("Relu", ["sg"], ["yg"])]
    inits.update({"s0": np.array([0], np.int64), "s1": np.array([1], np.int64), "s2": np.array([2], np.int64),
                  "s5": np.array([5], np.int64), "axes": np.array([3], np.int64)})
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", c, size, size])
    outs = [("yb", 10, 6, 6), ("yc", 8, 9, 9), ("yd", 20, 13, 13), ("ye", 32, 7, 7), ("yf1", 4, 13, 1),
            ("yf2", 4, 13, 2), ("yf5", 4, 13, 5), ("yg", 32, 13, 13)]
    return _model(nodes, "conv_zoo", [x],
                  [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", *s]) for n, *s in outs], inits)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    root = tmp_path_factory.mktemp("conv_kernel")
    path = save(conv_zoo(), root / "zoo.onnx")
    out = root / "zoo.ixa"
    # x86-avx512: a record with the f32 kernel on, runs on any AVX-512 machine
    assert compile_main([str(path), "--target", "x86-avx512", "--batch-sizes", "1,3", "--no-measure", "-o", str(out),
                         "-q"]) == 0
    return path, out


def test_every_convolution_on_the_kernel(zoo):
    """Each convolution of the static functions is one `inferx_f32c_` dispatch whose symbol
    carries its geometry (images, channels, input size, filter, strides, dilations, folded pads);
    the bias and ReLU (and d's residual add) ran in the epilogue at batch 1."""
    path, out = zoo
    manifest, report = artifact_json(out)
    convs = {d["dispatch"]: d for d in report["dispatches"] if d["dispatch"].startswith("inferx_f32c_")}
    geometries = {name[len("inferx_f32c_"):].split("_e")[0].removesuffix("_r") for name in convs}
    for images in (1, 3):
        assert {f"{images}x6x13x13_k3x3_s1x1_d1x1_p1x1", f"{images}x6x13x13_k5x5_s2x2_d1x1_p2x1",
                f"{images}x6x13x13_k3x3_s1x1_d2x2_p0x0", f"{images}x20x13x13_k3x3_s1x1_d1x1_p1x1",
                f"{images}x20x13x13_k3x3_s2x2_d1x1_p1x1", f"{images}x6x13x1_k3x3_s1x1_d1x1_p1x1",
                f"{images}x6x13x2_k3x3_s1x1_d1x1_p1x1", f"{images}x6x13x5_k3x3_s1x1_d1x1_p1x1"} <= geometries, \
            sorted(geometries)
    residual = [d for name, d in convs.items() if name.startswith("inferx_f32c_1x20x13x13_k3x3_s1x1_d1x1_p1x1_e")]
    assert residual and residual[0]["fused"].count("linalg.generic") >= 2, residual
    # e and g (32 filters over 49 and 169 pixels) in the pixel-rows layout at batch 1 only, g's
    # second convolution with its bias, residual and ReLU in the epilogue
    rows = {name for name in convs if re.search(r"_p\d+x\d+_r(_e|$)", name)}
    assert {re.sub(r"_r(_e.*)?$", "", n) for n in rows} == {"inferx_f32c_1x20x13x13_k3x3_s2x2_d1x1_p1x1",
                                                          "inferx_f32c_1x20x13x13_k3x3_s1x1_d1x1_p1x1"}, sorted(rows)
    assert any(n.endswith("_r") for n in rows) and any("_r_e" in n for n in rows), sorted(rows)
    assert all("pixel rows" in convs[n]["config"] for n in rows)
    assert not [d for d in report["dispatches"] if "conv" in d["dispatch"] and "main$b1" in d["dispatch"]]


def test_kernel_matches_onnxruntime(zoo):
    """Every output at batch 1 and 3 (the static functions: the kernel) and 2 (the dynamic
    function: IREE's convolutions) against onnxruntime at f32 rounding."""
    path, out = zoo
    model = inferx_compiler.load(str(out), device="cpu")
    name = model.inputs[0].name
    for batch in (1, 3, 2):
        x = np.random.default_rng(40 + batch).standard_normal([batch, 6, 13, 13]).astype(np.float32)
        got, want = model.run({name: x}), onnxruntime_outputs(str(path), {name: x})
        for key in want:
            assert got[key].shape == want[key].shape, (batch, key)
            assert rel_l2(got[key], want[key]) <= TOLERANCE, (batch, key, rel_l2(got[key], want[key]))


def test_without_the_pass_the_other_rules_decide(tmp_path):
    """With inferx-f32-matmul disabled, inferx-conv-strategy offers no `kernel` (the convolutions
    would be left to IREE's direct code otherwise): no f32c dispatch, the same numbers."""
    path = save(conv_zoo(), tmp_path / "zoo.onnx")
    out = tmp_path / "zoo.ixa"
    assert compile_main([str(path), "--target", "x86-avx512", "--batch-sizes", "1", "--no-measure", "-o", str(out),
                         "-q", "--disable-pass", "inferx-f32-matmul"]) == 0
    _, report = artifact_json(out)
    assert not [d for d in report["dispatches"] if d["dispatch"].startswith("inferx_f32c_")]
    assert not [d for d in report["decisions"] if d["pass"] == "inferx-conv-strategy" and "kernel:" in d["decision"]]
    model = inferx_compiler.load(str(out), device="cpu")
    x = np.random.default_rng(3).standard_normal([1, 6, 13, 13]).astype(np.float32)
    got, want = model.run({"x": x}), onnxruntime_outputs(str(path), {"x": x})
    assert all(rel_l2(got[k], want[k]) <= TOLERANCE for k in want)
