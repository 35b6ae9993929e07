"""inferx-conv-strategy end to end: every kind of convolution, every algorithm, against onnxruntime."""

from __future__ import annotations

import json
import zipfile

import onnx
import pytest

import inferx_compiler
from e2e_models import bottleneck_head, conv_zoo, random_inputs
from helpers import onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.kernels import cpu_objects
from inferx_compiler.targets import get_target

# This machine's CPU has IREE's NCHWc conv microkernel (AVX-512): 3x3 convolutions with channel
# counts in 16-blocks stay convolutions there (and their numbers are checked below).
NCHWC_HERE = get_target("cpu").conv_microkernel
# On an Intel core with AVX-512 (Target.f32_kernel) and a C compiler, 3x3-and-larger f32
# convolutions off NCHWc's blocks or with small outputs go to our kernel's convolution entry.
KERNEL_HERE = get_target("cpu").f32_kernel and cpu_objects.c_compiler()[0] is not None

TOLERANCE = 1e-4
ALGORITHMS = {"auto": "auto", "winograd": "winograd,matmul,im2col", "none": "none"}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """algorithms -> (onnx path, artifact path), the conv zoo built with static batches 1 and 2."""
    root = tmp_path_factory.mktemp("conv_zoo")
    onnx_path = save(conv_zoo(), root / "conv_zoo.onnx")
    out = {}
    for name, algorithms in ALGORITHMS.items():
        artifact = str(root / f"{name}.ixa")
        assert compile_main([onnx_path, "--target", "cpu", "--batch-sizes", "1,2", "--no-measure",
                             "--conv-algorithms", algorithms, "-o", artifact, "-q"]) == 0
        out[name] = (onnx_path, artifact)
    return out


def _decisions(artifact: str) -> dict[str, str]:
    """ONNX node -> the conv strategy's decision for it in the batch-1 function."""
    with zipfile.ZipFile(artifact) as z:
        report = json.loads(z.read("report.json"))
    return {d["node"]: d["decision"] for d in report["decisions"]
            if d["pass"] == "inferx-conv-strategy" and d["function"] == "main$b1"}


@pytest.mark.parametrize("algorithms", list(ALGORITHMS))
@pytest.mark.parametrize("batch", [1, 2, 3])  # 1, 2: static-shape functions; 3: the dynamic one
def test_conv_zoo_matches_onnxruntime(zoo, algorithms, batch):
    onnx_path, artifact = zoo[algorithms]
    feeds = random_inputs(onnx.load(onnx_path), batch, seed=batch)
    expected = onnxruntime_outputs(onnx_path, feeds)["y"]
    sess = inferx_compiler.load(artifact, device="cpu")
    got = sess.run(feeds)["y"]
    assert sess.function_for([feeds["x"].shape]) == ("main" if batch == 3 else f"main$b{batch}")
    err = rel_l2(got, expected)
    assert err <= TOLERANCE, f"{algorithms} b{batch}: relative L2 {err:.2e}"


def test_decisions_per_convolution(zoo):
    decisions = _decisions(zoo["auto"][1])
    # (the stem: after space-to-depth, the 4x4 convolution's decision)
    for node in ("stem7x7_s2", "c3x3_s1_odd", "c3x3_s2"):
        assert decisions[node].startswith("kernel" if KERNEL_HERE else "im2col"), (node, decisions[node])
    # 1x1: 25 pixels fill 78% of the entry's 32 lanes (our kernel), 9 pixels 28% (a matmul)
    assert decisions["c1x1_s1"].startswith("kernel" if KERNEL_HERE else "matmul")
    assert decisions["c1x1_s2"].startswith("matmul")
    # 64 -> 64 channels over 5x5 pixels: our kernel, else NCHWc where the microkernel exists;
    # Winograd is off in the cpu target's record
    assert decisions["c3x3_s1_64"].startswith("kernel" if KERNEL_HERE else "nchwc" if NCHWC_HERE else "im2col")
    assert decisions["c3x3_dilated"].startswith("kernel" if KERNEL_HERE else "im2col")
    assert decisions["c3x3_grouped"].startswith("declined")
    assert decisions["c3x3_depthwise"].startswith("taps") and decisions["c3x3_dw_s2"].startswith("taps")
    assert _decisions(zoo["winograd"][1])["c3x3_s1_64"].startswith("winograd")
    assert _decisions(zoo["none"][1]) == {}


def test_dynamic_function_loops_its_convolutions_over_the_images(zoo):
    """In the dynamic-batch function every NCHW convolution becomes a loop of static one-image
    convolutions (inferx-conv-image-loop), which the strategy then decides as in a static
    function; depthwise ones get their taps over the dynamic batch directly, grouped ones stay IREE's."""
    with zipfile.ZipFile(zoo["auto"][1]) as z:
        report = json.loads(z.read("report.json"))
    dynamic = [d for d in report["decisions"] if d["function"] == "main"]
    looped = [d for d in dynamic if d["pass"] == "inferx-conv-image-loop"]
    assert looped and all(d["decision"].startswith("looped over the batch's images") for d in looped)
    strategy = [d for d in dynamic if d["pass"] == "inferx-conv-strategy"]
    chosen = [d for d in strategy if not d["decision"].startswith("declined")]
    assert len(chosen) >= len(looped)
    assert all("dynamic batch" not in d["decision"] for d in strategy)
    assert sum(d["decision"].startswith("taps: depthwise") for d in strategy) == 2


def test_conv_builds_keep_data_tiling(tmp_path, capfd):
    """The rewrites must leave IREE able to data-tile the module: when it cannot, the driver
    builds again without data tiling for every function (a warning and a manifest note), and
    the convolutions lose their NCHWc microkernel (ResNet-50's 3x3 ones: 100 -> 12-60
    GFLOP/s). A dynamic-batch 1x1 convolution rewritten as a matmul over a collapsed dynamic
    dim did that to this bottleneck head (IREE 3.13: 'affine.delinearize_index' op no basis
    element may be statically non-positive)."""
    path = save(bottleneck_head(), tmp_path / "head.onnx")
    artifact = str(tmp_path / "head.ixa")
    assert compile_main([path, "--target", "cpu", "--batch-sizes", "1,2", "--no-measure", "-o", artifact]) == 0
    assert "without data tiling" not in capfd.readouterr().err
    with zipfile.ZipFile(artifact) as z:
        flags = json.loads(z.read("manifest.json"))["iree_flags"]
    assert "--iree-opt-data-tiling=true" in flags and "--iree-opt-data-tiling=false" not in flags
    feeds = random_inputs(onnx.load(path), 3, seed=1)
    assert rel_l2(inferx_compiler.load(artifact, device="cpu").run(feeds)["y"],
                  onnxruntime_outputs(path, feeds)["y"]) <= TOLERANCE


def test_bad_conv_algorithms_flag(tmp_path, capfd):
    path = save(conv_zoo(), tmp_path / "z.onnx")
    assert compile_main([path, "--target", "cpu", "--conv-algorithms", "fft", "-o", str(tmp_path / "z.ixa")]) != 0
    assert "--conv-algorithms: unknown algorithm(s) fft" in capfd.readouterr().err


def test_cuda_window_copies_get_the_rule_configuration(tmp_path):
    """On a CUDA target at fp16 the im2col copies get inferx-dispatch-config's window-copy rule
    (whole rows per workgroup; IREE's own is 32 threads over a 4x8 tile), the matmuls keep IREE's
    or run inferx-hopper-matmul's kernels; `--disable-pass inferx-dispatch-config` leaves no
    dispatch to the rules. The numbers are checked
    on the H200 (tools/bench/gpu.py, ResNet-50 against onnxruntime before timing)."""
    onnx_path = save(conv_zoo(), tmp_path / "conv_zoo.onnx")
    sources = {}
    for name, extra in (("rule", []), ("off", ["--disable-pass", "inferx-dispatch-config"])):
        report = tmp_path / f"{name}.json"
        assert compile_main([onnx_path, "--target", "h200", "--precision", "fp16", "--batch-sizes", "2",
                             "--no-measure", "--report", str(report), "-o", str(tmp_path / f"{name}.ixa"), "-q",
                             *extra]) == 0
        dispatches = json.loads(report.read_text())["dispatches"]
        sources[name] = {d["dispatch"]: (d.get("config_source", "IREE"), d["root"], d["kind"]) for d in dispatches}
    ruled = [k for k, (src, _, _) in sources["rule"].items() if src == "rule"]
    assert ruled, sources["rule"]
    assert all(sources["rule"][k][1] == "linalg.generic" for k in ruled)
    assert all(src in ("IREE", "inferx-hopper-matmul") for src, _, kind in sources["rule"].values()
               if kind == "contraction")
    assert all(src != "rule" for src, _, _ in sources["off"].values())


def test_pointwise_conv_fed_by_a_transpose_compiles(tmp_path):
    """PP-OCRv4's recognizer: Reshape -> Transpose -> 1x1 Conv. The pass's matmul for it once
    lacked the indexing maps the parser fills in, and IREE 3.13 crashed (SIGSEGV) compiling it."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array((np.random.default_rng(0).standard_normal((48, 24, 1, 1)) * 0.2).astype(np.float32), "w")
    shape = numpy_helper.from_array(np.array([1, 1, 10, 24], np.int64), "shape")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
         helper.make_node("Transpose", ["r"], ["t"], name="to_nchw", perm=[0, 3, 1, 2]),
         helper.make_node("Conv", ["t", "w"], ["y"], name="pointwise", kernel_shape=[1, 1])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 10, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 48, 1, 10])], [w, shape])
    path = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "pw.onnx")
    out = str(tmp_path / "pw.ixa")
    assert compile_main([path, "--target", "cpu", "-o", out, "-q"]) == 0
    x = np.random.default_rng(1).standard_normal((1, 10, 24)).astype(np.float32)
    got = inferx_compiler.load(out).run({"x": x})["y"]
    assert rel_l2(got, onnxruntime_outputs(path, {"x": x})["y"]) <= 1e-5


def _stem(c: int, k: int, pad: int, size: int, filters: int = 16, pool: bool = False):
    """x [batch, c, size, size] -> Conv k x k, stride 2, pads `pad`, bias -> Relu (-> a 3x3
    stride-2 MaxPool padded by 1 with `pool`, as ResNet's stem)."""
    import numpy as np
    from onnx import TensorProto, helper

    from e2e_models import _model, _w

    rng = np.random.default_rng(k * 10 + c)
    inits = {"w": _w(rng, filters, c, k, k, scale=1.0 / np.sqrt(c * k * k)), "b": _w(rng, filters, scale=0.1)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="stem", strides=[2, 2], pads=[pad] * 4),
             helper.make_node("Relu", ["c"], ["r" if pool else "y"], name="relu")]
    out = (size + 2 * pad - k) // 2 + 1
    if pool:
        nodes.append(helper.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
                                      pads=[1, 1, 1, 1]))
        out = (out + 2 - 3) // 2 + 1
    return _model(nodes, "stem", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", c, size, size])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", filters, out, out])], inits)


@pytest.mark.parametrize("c, k, pad, size", [(3, 7, 3, 45),  # ResNet's stem, odd input (padded to even)
                                             (1, 3, 1, 20),  # a grayscale 3x3 stem
                                             (2, 4, 0, 9)])  # an even filter: the last row is cut
def test_space_to_depth_stems_match_onnxruntime(tmp_path, c, k, pad, size):
    # without our kernel (which takes such stems as they are where it applies: the next test)
    _check_stem(tmp_path, c, k, pad, size, ["--conv-algorithms", "s2d,nchwc,im2col,matmul"], "s2d:", 2)


@pytest.mark.skipif(not KERNEL_HERE, reason="our f32 convolution kernel does not apply on this machine")
@pytest.mark.parametrize("c, k, pad, size", [(3, 7, 3, 45), (1, 3, 1, 20), (2, 4, 0, 9)])
def test_stems_on_the_kernel_match_onnxruntime(tmp_path, c, k, pad, size):
    # the stride-2 taps gathered by our convolution entry, no space-to-depth; then ResNet's max
    # pooling (inferx-pool-kernel), so the bias and the ReLU run in the kernel's epilogue
    _check_stem(tmp_path, c, k, pad, size, [], "kernel:", 1, pool=True)


def _check_stem(tmp_path, c, k, pad, size, flags, decision, decisions, pool=False):
    path = save(_stem(c, k, pad, size, pool=pool), tmp_path / "stem.onnx")
    artifact = str(tmp_path / "stem.ixa")
    assert compile_main([path, "--target", "cpu", "--batch-sizes", "1,2", "--no-measure", "-o", artifact, "-q",
                         *flags]) == 0
    report = json.loads(zipfile.ZipFile(artifact).read("report.json"))
    stem = [d["decision"] for d in report["decisions"]
            if d["pass"] == "inferx-conv-strategy" and d["function"] == "main$b1"]
    # s2d: then the stride-1 convolution's own decision
    assert stem[0].startswith(decision) and len(stem) == decisions, stem
    sess = inferx_compiler.load(artifact)
    for batch in (1, 2, 3):  # 3: the dynamic function (IREE's direct convolution)
        feeds = random_inputs(onnx.load(path), batch, seed=batch)
        err = rel_l2(sess.run(feeds)["y"], onnxruntime_outputs(path, feeds)["y"])
        assert err <= TOLERANCE, f"{c}ch {k}x{k} b{batch}: relative L2 {err:.2e}"
