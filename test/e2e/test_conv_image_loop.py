"""The dynamic-batch function's convolutions as loops over the images (inferx-conv-image-loop):
a batch with no static function of its own runs them on the static-convolution paths (our f32
kernel, IREE's NCHWc and matmuls), and its numbers match onnxruntime's."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

import inferx_compiler
from e2e_models import deep_bottleneck
from helpers import onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.compile import main as compile_main


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("conv_image_loop")
    model = save(deep_bottleneck(), root / "residual.onnx")
    looped, plain = str(root / "looped.ixa"), str(root / "plain.ixa")
    assert compile_main([model, "--target", "cpu", "-o", looped, "-q"]) == 0
    assert compile_main([model, "--target", "cpu", "--disable-pass", "inferx-conv-image-loop", "-o", plain, "-q"]) == 0
    return model, looped, plain


def test_the_dynamic_batch_matches_onnxruntime(builds):
    model, looped, _ = builds
    sess = inferx_compiler.load(looped)
    for batch in (1, 3, 6):  # 3: one image an iteration; 6: a chunk of 4, then 2 one by one
        x = np.random.default_rng(batch).standard_normal((batch, 3, 12, 12)).astype(np.float32)
        got = sess.run({"x": x})["proj"]
        assert sess.function_for([x.shape]) == ("main$b1" if batch == 1 else "main")
        assert rel_l2(got, onnxruntime_outputs(model, {"x": x})["proj"]) <= 1e-5


def test_every_dynamic_batch_convolution_is_looped(builds):
    _, looped, plain = builds

    def decisions(path):
        with zipfile.ZipFile(path) as z:
            return [d for d in json.loads(z.read("report.json"))["decisions"] if d["pass"] == "inferx-conv-image-loop"]

    looped_decisions = decisions(looped)
    assert sorted(d["node"] for d in looped_decisions if d["function"] == "main" and "looped" in d["decision"]) == \
        ["expand", "mid", "proj", "reduce", "stem"]
    assert all("declined: static batch" in d["decision"] for d in looped_decisions if d["function"] == "main$b1")
    assert decisions(plain) == []
