"""2-D max pooling through our AVX-512 kernel on this CPU (inferx_compiler/kernels/
maxpool_planes.c, inferx-pool-kernel), on poolings that reach its paths and edges: ResNet's stem
pooling (3x3, stride 2, -inf padding folded: the permute path), a VGG-style 2x2 stride 2 without
padding, ceil_mode over an odd plane (windows past the padded edge), stride 1 over 37-wide rows
(masked 16-lane tails), stride 3 (the gather path), asymmetric padding, a 5x1 window. Max pooling
is exact, so the outputs must equal onnxruntime's bit for bit. The static-shape functions get
the kernel; the dynamic one keeps IREE's pooling (declined with a remark). NaN inputs are
compared with the same build without the pass (IREE's arith.maximumf propagates NaN)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferx_compiler
from e2e_models import _model
from helpers import artifact_json, onnxruntime_outputs, save
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.kernels import cpu_objects
from inferx_compiler.targets import get_target

pytestmark = [
    pytest.mark.skipif("avx512f" not in get_target("cpu").features, reason="this CPU has no AVX-512 (avx512f)"),
    pytest.mark.skipif(cpu_objects.c_compiler()[0] is None, reason="no C compiler for the kernel"),
]

# name: (input [C, H, W] after the batch dim, MaxPool attributes)
POOLS = {
    "stem": ([16, 40, 40], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    "vgg": ([8, 14, 14], dict(kernel_shape=[2, 2], strides=[2, 2])),
    "ceil": ([4, 15, 15], dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    "same": ([3, 9, 37], dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])),
    "s3": ([2, 19, 50], dict(kernel_shape=[3, 3], strides=[3, 3], pads=[1, 1, 1, 1])),
    "asym": ([5, 12, 17], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 1, 0])),
    "tall": ([2, 21, 6], dict(kernel_shape=[5, 1], strides=[2, 1], pads=[2, 0, 2, 0])),
}
BUCKETS = "1,3"


def poolings():
    """Each pooling after a ReLU (what ResNet's stem pools: the -inf padding then matters only
    where a window leaves the plane)."""
    nodes, inputs, outputs = [], [], []
    for name, (shape, attrs) in POOLS.items():
        inputs.append(helper.make_tensor_value_info(f"x{name}", TensorProto.FLOAT, ["N", *shape]))
        outputs.append(helper.make_tensor_value_info(f"y{name}", TensorProto.FLOAT, ["N", *_pooled(shape, attrs)]))
        nodes.append(helper.make_node("Relu", [f"x{name}"], [f"r{name}"], name=f"relu_{name}"))
        nodes.append(helper.make_node("MaxPool", [f"r{name}"], [f"y{name}"], name=f"pool_{name}", **attrs))
    return _model(nodes, "poolings", inputs, outputs, {})


def _pooled(shape, attrs) -> list[int]:
    """MaxPool's output [C, OH, OW] (ONNX's formula, floor or ceil)."""
    pads = attrs.get("pads", [0, 0, 0, 0])
    rounding = np.ceil if attrs.get("ceil_mode") else np.floor
    sizes = [int(rounding((shape[1 + i] + pads[i] + pads[2 + i] - attrs["kernel_shape"][i]) / attrs["strides"][i])) + 1
             for i in range(2)]
    return [shape[0], *sizes]


def _feeds(batch: int, seed: int, nan: bool = False) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {f"x{name}": rng.standard_normal([batch, *shape]).astype(np.float32) for name, (shape, _) in POOLS.items()}
    if nan:
        for x in feeds.values():
            x.reshape(-1)[rng.integers(0, x.size, 3)] = np.nan
    return feeds


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("pool_kernel")
    path = save(poolings(), root / "poolings.onnx")
    out = {}
    for name, extra in (("kernel", []), ("iree", ["--disable-pass", "inferx-pool-kernel"])):
        # x86-avx512 runs on any AVX-512 machine
        assert compile_main([str(path), "--target", "x86-avx512", "--batch-sizes", BUCKETS, "--no-measure", "-q",
                             "-o", str(root / f"{name}.ixa"), *extra]) == 0
        out[name] = (root / f"{name}.ixa", *artifact_json(root / f"{name}.ixa"))
    return path, out


def test_pool_kernel_equals_onnxruntime(builds):
    path, out = builds
    artifact, manifest, report = out["kernel"]
    ours = [d["dispatch"] for d in report["dispatches"] if d["dispatch"].startswith("inferx_maxpool_")]
    assert len(ours) == 2 * len(POOLS), ours  # every pooling in both static-shape functions
    assert "maxpool_planes.c" in manifest["compiler"]["c_kernels"]
    decisions = [d["decision"] for d in report["decisions"] if d["pass"] == "inferx-pool-kernel"]
    assert sum("on our AVX-512 kernel" in d for d in decisions) == 2 * len(POOLS), decisions
    assert sum("left to IREE: dynamic shape" in d for d in decisions) == len(POOLS), decisions
    model = inferx_compiler.load(str(artifact), device="cpu")
    for batch in (1, 3, 2):  # the two buckets, and a batch the dynamic function serves
        feeds = _feeds(batch, seed=batch)
        got, want = model.run(feeds), onnxruntime_outputs(str(path), feeds)
        for name in POOLS:
            assert got[f"y{name}"].shape == want[f"y{name}"].shape, name
            assert np.array_equal(got[f"y{name}"], want[f"y{name}"]), (batch, name)


def test_nan_propagates_as_iree_pooling(builds):
    _, out = builds
    kernel = inferx_compiler.load(str(out["kernel"][0]), device="cpu")
    iree = inferx_compiler.load(str(out["iree"][0]), device="cpu")
    assert not [d for d in out["iree"][2]["dispatches"] if d["dispatch"].startswith("inferx_maxpool_")]
    feeds = _feeds(3, seed=7, nan=True)
    got, want = kernel.run(feeds), iree.run(feeds)
    for name in POOLS:
        assert np.isnan(want[f"y{name}"]).any(), name  # the test's NaNs reach the outputs
        assert np.array_equal(got[f"y{name}"], want[f"y{name}"], equal_nan=True), name
