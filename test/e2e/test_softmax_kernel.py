"""Softmax over the last dim through our AVX-512 kernel on this CPU (inferx_compiler/kernels/
softmax_rows.c, inferx-softmax-kernel), on rows that reach its edges: N = 37 (two 16-lane
pieces and a masked tail of 5), N = 16 (no tail), N = 128 (BERT's attention rows), rows past
one workgroup (1,056 rows of 37: 221 rows a workgroup), large and negative scores (exp
underflowing to 0 in part of a row), and a row max that differs from the importer's own row
value (the kernel takes its own max). References: onnxruntime fp32, and the same build with
the pass disabled (IREE's softmax)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferx_compiler
from e2e_models import _model
from helpers import artifact_json, onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.kernels import cpu_objects
from inferx_compiler.targets import get_target

pytestmark = [
    pytest.mark.skipif("avx512f" not in get_target("cpu").features, reason="this CPU has no AVX-512 (avx512f)"),
    pytest.mark.skipif(cpu_objects.c_compiler()[0] is None, reason="no C compiler for the kernel"),
]

# exp to about an ulp and e * (1 / sum) for e / sum: ~1e-7 here. A wrong row, tail mask or
# max gives errors of the size of the values (> 1e-2).
TOLERANCE = 1e-5
SHAPES = {"a": [4, 8, 33, 37], "b": [6, 16], "c": [12, 128, 128]}


def softmaxes():
    """Three softmaxes over the last dim, scaled first (attention's 1/sqrt(d)), one of them
    after a mask-like add."""
    nodes, inputs, outputs = [], [], []
    inits = {"scale": np.array(0.125, np.float32), "bias": np.linspace(-30, 0, 37, dtype=np.float32)}
    for name, shape in SHAPES.items():
        inputs.append(helper.make_tensor_value_info(f"x{name}", TensorProto.FLOAT, shape))
        outputs.append(helper.make_tensor_value_info(f"y{name}", TensorProto.FLOAT, shape))
        nodes.append(helper.make_node("Mul", [f"x{name}", "scale"], [f"s{name}"], name=f"scale_{name}"))
        source = f"s{name}"
        if name == "a":
            nodes.append(helper.make_node("Add", [source, "bias"], ["masked"], name="mask_a"))
            source = "masked"
        nodes.append(helper.make_node("Softmax", [source], [f"y{name}"], axis=-1, name=f"softmax_{name}"))
    return _model(nodes, "softmaxes", inputs, outputs, inits)


def _feeds(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {f"x{name}": (rng.standard_normal(shape) * 40).astype(np.float32) for name, shape in SHAPES.items()}


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("softmax_kernel")
    path = save(softmaxes(), root / "softmaxes.onnx")
    out = {}
    for name, extra in (("kernel", []), ("iree", ["--disable-pass", "inferx-softmax-kernel"])):
        # x86-avx512 runs on any AVX-512 machine
        assert compile_main([str(path), "--target", "x86-avx512", "--no-measure", "-q", "-o",
                             str(root / f"{name}.ixa"), *extra]) == 0
        out[name] = (root / f"{name}.ixa", *artifact_json(root / f"{name}.ixa"))
    return path, out


def test_softmax_kernel_matches_onnxruntime(builds):
    path, out = builds
    artifact, manifest, report = out["kernel"]
    ours = sorted(d["dispatch"] for d in report["dispatches"] if d["dispatch"].startswith("inferx_softmax_"))
    assert ours == ["inferx_softmax_1056x37", "inferx_softmax_1536x128", "inferx_softmax_6x16"]
    assert "softmax_rows.c" in manifest["compiler"]["c_kernels"]
    decisions = [d["decision"] for d in report["decisions"] if d["pass"] == "inferx-softmax-kernel"]
    assert len(decisions) == 3 and all("on our AVX-512 kernel" in d for d in decisions), decisions
    model = inferx_compiler.load(str(artifact), device="cpu")
    for seed in (1, 2):
        feeds = _feeds(seed)
        got, want = model.run(feeds), onnxruntime_outputs(str(path), feeds)
        for name in SHAPES:
            y = got[f"y{name}"]
            assert y.shape == want[f"y{name}"].shape
            assert rel_l2(y, want[f"y{name}"]) <= TOLERANCE, (name, rel_l2(y, want[f"y{name}"]))
            assert np.allclose(y.sum(-1), 1.0, atol=1e-5)


def test_disabled_pass_leaves_iree_softmax_that_agrees(builds):
    path, out = builds
    _, manifest, report = out["iree"]
    assert not [d for d in report["dispatches"] if d["dispatch"].startswith("inferx_softmax_")]
    assert "softmax_rows.c" not in manifest["compiler"].get("c_kernels", {})
    kernel = inferx_compiler.load(str(out["kernel"][0]), device="cpu")
    iree = inferx_compiler.load(str(out["iree"][0]), device="cpu")
    feeds = _feeds(3)
    got, want = kernel.run(feeds), iree.run(feeds)
    for name in SHAPES:
        assert rel_l2(got[f"y{name}"], want[f"y{name}"]) <= TOLERANCE, name


def test_kernel_object_is_freestanding():
    import subprocess

    built = cpu_objects.build("softmax_rows.c")
    symbols = subprocess.run(["nm", "-u", built.path], capture_output=True, text=True)
    if symbols.returncode == 0:  # binutils present: nothing left for IREE's linker to resolve
        assert symbols.stdout.strip() == ""
