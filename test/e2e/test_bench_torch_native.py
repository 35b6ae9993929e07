"""tools/bench/torch_native.py: the native torch.nn modules compute what models.py's ONNX graphs compute."""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

BENCH = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "tools", "bench"))
LITE = ["resnet_lite", "bert_lite", "gpt2_lite", "mlp_lite"]


def _load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(BENCH, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, BENCH)
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(BENCH)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _load("models"), _load("torch_native")


def _rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


@pytest.mark.parametrize("name", LITE)
def test_native_module_matches_onnxruntime(bench, name):
    models, torch_native = bench
    onnx_model = models.build(name)
    mod = torch_native.build(name, onnx_model)
    assert isinstance(mod, torch.nn.Module) and not mod.training
    assert mod.input_names == [vi.name for vi in onnx_model.graph.input]
    sess = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 2):
        feeds = models.feeds(onnx_model, batch)
        ref = sess.run(None, feeds)
        with torch.inference_mode():
            out = mod(*[torch.from_numpy(feeds[k]) for k in mod.input_names])
        assert isinstance(out, tuple) and len(out) == len(ref) == len(mod.output_names)
        for o, r in zip(out, ref):
            assert o.dtype == torch.float32 and tuple(o.shape) == r.shape
            err = _rel_l2(o.numpy(), r)
            assert err <= 1e-4, f"{name} b{batch}: rel L2 {err:.2e}"


def test_gpt2_lm_head_is_tied_and_qkv_fused(bench):
    models, torch_native = bench
    mod = torch_native.build("gpt2_lite", models.build("gpt2_lite"))
    assert mod.lm_head.weight is mod.wte.weight
    d = mod.wte.weight.shape[1]
    assert tuple(mod.h[0].attn.c_attn.weight.shape) == (3 * d, d)
    names = [n for n, _ in mod.named_parameters()]
    assert "lm_head.weight" not in names  # one parameter, loaded once from `wte`


def test_causal_sdpa_equals_additive_minus_1e4_mask():
    """models.py masks with -1e4 added to the scores; SDPA(is_causal=True) must agree in fp32."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 64, 32, generator=g) * 3 for _ in range(3))
    mask = torch.triu(torch.full((64, 64), -1e4), diagonal=1)
    ref = torch.softmax(q @ k.transpose(-1, -2) / 32**0.5 + mask, dim=-1) @ v
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert _rel_l2(out.numpy(), ref.numpy()) <= 1e-6


def test_every_initializer_is_accounted_for(bench):
    """An extra, missing or mis-shaped initializer is an error, not a silently random weight."""
    import onnx
    from onnx import numpy_helper

    models, torch_native = bench
    m = models.build("mlp_lite")
    extra = onnx.ModelProto()
    extra.CopyFrom(m)
    extra.graph.initializer.append(numpy_helper.from_array(np.zeros(3, np.float32), "stray"))
    with pytest.raises(ValueError, match="unused"):
        torch_native.build("mlp_lite", extra)
    bad = onnx.ModelProto()
    bad.CopyFrom(m)
    i = next(j for j, t in enumerate(bad.graph.initializer) if t.name == "fc1.b")
    bad.graph.initializer[i].CopyFrom(numpy_helper.from_array(np.zeros(7, np.float32), "fc1.b"))
    with pytest.raises(ValueError, match="fc1.b"):
        torch_native.build("mlp_lite", bad)
    g = models.build("gpt2_lite")
    i = next(j for j, t in enumerate(g.graph.initializer) if t.name == "causal_mask")
    mask = numpy_helper.to_array(g.graph.initializer[i]).copy()
    mask[mask != 0] = -np.inf
    g.graph.initializer[i].CopyFrom(numpy_helper.from_array(mask, "causal_mask"))
    with pytest.raises(ValueError, match="causal_mask"):
        torch_native.build("gpt2_lite", g)


def test_traces_as_one_graph(bench):
    """No graph breaks under dynamo (what torch.compile / reduce-overhead on the GPU relies on)."""
    models, torch_native = bench
    for name in LITE:
        m = models.build(name)
        mod = torch_native.build(name, m)
        feeds = models.feeds(m, 2)
        with torch.inference_mode():
            ex = torch._dynamo.explain(mod)(*[torch.from_numpy(feeds[k]) for k in mod.input_names])
        assert ex.graph_count == 1 and ex.graph_break_count == 0, (name, ex.break_reasons)
    torch._dynamo.reset()
