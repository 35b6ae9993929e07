"""The benchmark model set, built in code with onnx.helper and seeded random weights.

Nothing is downloaded. Every model is a pure function of (name, seed): the same numpy
Generator stream (PCG64, float32 standard normals) gives the same weights on any machine
with the same numpy bit stream, which is what lets tools/bench/gpu.py rebuild the weights on
the GPU host instead of carrying them (the bytes are checked there by sha256).

    python tools/bench/models.py --list
    python tools/bench/models.py bert [--cache DIR]      # build (or find) the cached ONNX file

Models (batch dim is dynamic, named 'batch'; opset 17):
    resnet50   ResNet-50 v1.5, 224x224, BatchNorm folded into conv bias (what a deployment
               export gives after fusion), ReLU, 3x3/2 max-pool, 3-4-6-3 bottlenecks,
               global average pool, Gemm 2048->1000.                input x [batch,3,224,224] f32
    bert       BERT-base encoder: 12 post-LN layers, d=768, 12 heads, FFN 3072, erf GELU,
               seq 128. Input is the (float) embedding output, so no vocabulary table.
                                                                     input x [batch,128,768] f32
    gpt2       GPT-2 small: int64 token ids -> Gather(wte, 50257x768) + wpe, 12 pre-LN layers
               with a causal mask (additive, -1e4), final LayerNorm, LM head TIED to wte
               (Gemm transB=1 on the same initializer) giving logits for all 128 positions.
               GELU is the erf form (GPT-2 uses the tanh approximation; the cost is the same).
                                                                     input ids [batch,128] i64
    mlp        weight-bound MLP: 8 x (Gemm 4096x4096 + bias, erf GELU).  x [batch,4096] f32
Quick variants (same code, smaller): resnet_lite, bert_lite, gpt2_lite, mlp_lite; and `tiny`
(a 2-layer MLP) for the harness's smoke test.

erf GELU is written as Div/Erf/Add/Mul/Mul whose node names end in `.gelu.div` ...
`.gelu.half`, so the torch re-implementation in run.py can recognise it and call F.gelu.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

import numpy as np

OPSET = 17
GEN_VERSION = 1  # bump when a builder changes: it is part of the cache key
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "inferx-bench")


# ----------------------------------------------------------------------------- builder helpers
class _G:
    """A graph under construction: nodes, initializers (in creation order), unique names."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self._n = [], {}, 0

    def w(self, name, shape, std):
        a = self.rng.standard_normal(shape, dtype=np.float32)
        a *= np.float32(std)
        self.inits[name] = a
        return name

    def const(self, name, array):
        if name not in self.inits:
            self.inits[name] = array
        return name

    def node(self, op, inputs, name, n_out=1, **attrs):
        from onnx import helper

        outs = [f"{name}:{i}" if n_out > 1 else name for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs if n_out > 1 else outs[0]

    def gelu(self, x, p):
        self.const("c_sqrt2", np.array(np.sqrt(2.0), np.float32))
        self.const("c_one", np.array(1.0, np.float32))
        self.const("c_half", np.array(0.5, np.float32))
        d = self.node("Div", [x, "c_sqrt2"], f"{p}.gelu.div")
        e = self.node("Erf", [d], f"{p}.gelu.erf")
        a = self.node("Add", [e, "c_one"], f"{p}.gelu.add")
        m = self.node("Mul", [x, a], f"{p}.gelu.mul")
        return self.node("Mul", [m, "c_half"], f"{p}.gelu.half")

    def model(self, name, inputs, outputs):
        from onnx import helper, numpy_helper

        graph = helper.make_graph(self.nodes, name, inputs, outputs,
                                  [numpy_helper.from_array(a, n) for n, a in self.inits.items()])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="inferx-bench")
        m.ir_version = 8
        return m


def _vi(name, elem, shape):
    from onnx import helper

    return helper.make_tensor_value_info(name, elem, shape)


# ----------------------------------------------------------------------------- models
def resnet(seed=10, blocks=(3, 4, 6, 3), width=64, size=224, classes=1000, name="resnet50"):
    from onnx import TensorProto

    g = _G(seed)

    def conv(x, cin, cout, k, stride, p, relu=True, gain=1.0):
        wn = g.w(f"{p}.w", (cout, cin, k, k), gain * np.sqrt(2.0 / (cin * k * k)))
        bn = g.w(f"{p}.b", (cout,), 0.02)  # folded BatchNorm shift
        y = g.node("Conv", [x, wn, bn], p, kernel_shape=[k, k], strides=[stride, stride],
                   pads=[k // 2] * 4)
        return g.node("Relu", [y], p + ".relu") if relu else y

    x = conv("x", 3, width, 7, 2, "stem")
    x = g.node("MaxPool", [x], "stem.pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for s, n in enumerate(blocks):
        mid = width * 2 ** s
        cout = mid * 4
        for b in range(n):
            p = f"l{s + 1}.{b}"
            stride = 2 if (b == 0 and s > 0) else 1
            h = conv(x, cin, mid, 1, 1, p + ".c1")
            h = conv(h, mid, mid, 3, stride, p + ".c2")
            h = conv(h, mid, cout, 1, 1, p + ".c3", relu=False, gain=0.2)
            sc = conv(x, cin, cout, 1, stride, p + ".down", relu=False) if b == 0 else x
            x = g.node("Relu", [g.node("Add", [h, sc], p + ".add")], p + ".relu")
            cin = cout
    x = g.node("GlobalAveragePool", [x], "gap")
    x = g.node("Flatten", [x], "flatten", axis=1)
    g.w("fc.w", (classes, cin), 1.0 / np.sqrt(cin))
    g.w("fc.b", (classes,), 0.01)
    g.nodes.append(_mk("Gemm", [x, "fc.w", "fc.b"], ["logits"], "fc", transB=1))
    return g.model(name, [_vi("x", TensorProto.FLOAT, ["batch", 3, size, size])],
                   [_vi("logits", TensorProto.FLOAT, ["batch", classes])])


def _mk(op, inputs, outputs, name, **attrs):
    from onnx import helper

    return helper.make_node(op, inputs, outputs, name=name, **attrs)


def _attention(g, x, p, d, heads, seq, mask=None, out_gain=1.0):
    dh = d // heads
    g.const("shape.heads", np.array([0, seq, heads, dh], np.int64))
    g.const("shape.merge", np.array([0, seq, d], np.int64))
    g.const("c_scale", np.array(1.0 / np.sqrt(dh), np.float32))
    hs = {}
    for t in ("q", "k", "v"):
        y = g.node("MatMul", [x, g.w(f"{p}.{t}.w", (d, d), 1 / np.sqrt(d))], f"{p}.{t}")
        y = g.node("Add", [y, g.w(f"{p}.{t}.b", (d,), 0.02)], f"{p}.{t}.bias")
        y = g.node("Reshape", [y, "shape.heads"], f"{p}.{t}.split")
        hs[t] = g.node("Transpose", [y], f"{p}.{t}.perm", perm=[0, 2, 3, 1] if t == "k" else [0, 2, 1, 3])
    s = g.node("MatMul", [hs["q"], hs["k"]], f"{p}.scores")
    s = g.node("Mul", [s, "c_scale"], f"{p}.scale")
    if mask is not None:
        s = g.node("Add", [s, mask], f"{p}.mask")
    a = g.node("Softmax", [s], f"{p}.softmax", axis=-1)
    c = g.node("MatMul", [a, hs["v"]], f"{p}.ctx")
    c = g.node("Transpose", [c], f"{p}.ctx.perm", perm=[0, 2, 1, 3])
    c = g.node("Reshape", [c, "shape.merge"], f"{p}.ctx.merge")
    o = g.node("MatMul", [c, g.w(f"{p}.o.w", (d, d), out_gain / np.sqrt(d))], f"{p}.o")
    return g.node("Add", [o, g.w(f"{p}.o.b", (d,), 0.02)], f"{p}.o.bias")


def _ffn(g, x, p, d, ffn, out_gain=1.0):
    h = g.node("MatMul", [x, g.w(f"{p}.fc1.w", (d, ffn), 1 / np.sqrt(d))], f"{p}.fc1")
    h = g.node("Add", [h, g.w(f"{p}.fc1.b", (ffn,), 0.02)], f"{p}.fc1.bias")
    h = g.gelu(h, f"{p}.act")
    h = g.node("MatMul", [h, g.w(f"{p}.fc2.w", (ffn, d), out_gain / np.sqrt(ffn))], f"{p}.fc2")
    return g.node("Add", [h, g.w(f"{p}.fc2.b", (d,), 0.02)], f"{p}.fc2.bias")


def _ln(g, x, p, d):
    gam = p + ".g"
    g.inits[gam] = (1 + 0.05 * g.rng.standard_normal(d, dtype=np.float32)).astype(np.float32)
    beta = g.w(p + ".b", (d,), 0.02)
    return g.node("LayerNormalization", [x, gam, beta], p, axis=-1, epsilon=1e-5)


def bert(seed=20, layers=12, d=768, heads=12, seq=128, ffn=3072, name="bert"):
    from onnx import TensorProto

    g = _G(seed)
    x = "x"
    for i in range(layers):
        p = f"L{i}"
        x = _ln(g, g.node("Add", [x, _attention(g, x, p + ".attn", d, heads, seq)], p + ".res1"), p + ".ln1", d)
        x = _ln(g, g.node("Add", [x, _ffn(g, x, p + ".ffn", d, ffn)], p + ".res2"), p + ".ln2", d)
    g.nodes.append(_mk("Identity", [x], ["y"], "out"))
    return g.model(name, [_vi("x", TensorProto.FLOAT, ["batch", seq, d])],
                   [_vi("y", TensorProto.FLOAT, ["batch", seq, d])])


def gpt2(seed=30, layers=12, d=768, heads=12, seq=128, vocab=50257, name="gpt2"):
    from onnx import TensorProto

    g = _G(seed)
    g.w("wte", (vocab, d), 0.02)
    g.w("wpe", (seq, d), 0.01)
    mask = np.triu(np.full((seq, seq), -1e4, np.float32), k=1)
    g.const("causal_mask", mask)
    x = g.node("Gather", ["wte", "ids"], "embed", axis=0)
    x = g.node("Add", [x, "wpe"], "embed.pos")
    gain = 1.0 / np.sqrt(2 * layers)
    for i in range(layers):
        p = f"L{i}"
        a = _attention(g, _ln(g, x, p + ".ln1", d), p + ".attn", d, heads, seq, mask="causal_mask", out_gain=gain)
        x = g.node("Add", [x, a], p + ".res1")
        f = _ffn(g, _ln(g, x, p + ".ln2", d), p + ".mlp", d, 4 * d, out_gain=gain)
        x = g.node("Add", [x, f], p + ".res2")
    x = _ln(g, x, "ln_f", d)
    g.const("shape.flat", np.array([-1, d], np.int64))
    g.const("shape.logits", np.array([-1, seq, vocab], np.int64))
    g.const("zero_bias", np.zeros((1,), np.float32))
    x = g.node("Reshape", [x, "shape.flat"], "lm.flat")
    x = g.node("Gemm", [x, "wte", "zero_bias"], "lm_head", transB=1)  # tied to the embedding
    g.nodes.append(_mk("Reshape", [x, "shape.logits"], ["logits"], "lm.unflat"))
    return g.model(name, [_vi("ids", TensorProto.INT64, ["batch", seq])],
                   [_vi("logits", TensorProto.FLOAT, ["batch", seq, vocab])])


def mlp(seed=40, width=4096, layers=8, name="mlp"):
    from onnx import TensorProto

    g = _G(seed)
    x = "x"
    for i in range(layers):
        p = f"fc{i}"
        g.w(p + ".w", (width, width), np.sqrt(2.0 / width))
        g.w(p + ".b", (width,), 0.02)
        x = g.gelu(g.node("Gemm", [x, p + ".w", p + ".b"], p, transB=1), p)
    g.nodes.append(_mk("Identity", [x], ["y"], "out"))
    return g.model(name, [_vi("x", TensorProto.FLOAT, ["batch", width])],
                   [_vi("y", TensorProto.FLOAT, ["batch", width])])


# name -> (builder, kwargs, batches for --full, batches for --quick)
MODELS = {
    "resnet50": (resnet, {}, (1, 8)),
    "bert": (bert, {}, (1, 8)),
    "gpt2": (gpt2, {}, (1,)),
    "mlp": (mlp, {}, (1, 64)),
    "resnet_lite": (resnet, dict(blocks=(1, 1, 1, 1), width=16, size=96, classes=100, name="resnet_lite"), (1, 8)),
    "bert_lite": (bert, dict(layers=2, d=256, heads=4, seq=64, ffn=1024, name="bert_lite"), (1, 8)),
    "gpt2_lite": (gpt2, dict(layers=2, d=256, heads=4, seq=64, vocab=4096, name="gpt2_lite"), (1,)),
    "mlp_lite": (mlp, dict(width=1024, layers=8, name="mlp_lite"), (1, 64)),
    "tiny": (mlp, dict(width=64, layers=2, name="tiny"), (1, 3)),
}
FULL = ["mlp", "bert", "gpt2", "resnet50"]
QUICK = ["mlp_lite", "bert_lite", "gpt2_lite", "resnet_lite"]


def build(name: str):
    fn, kw, _ = MODELS[name]
    return fn(**kw)


def weight_bytes(name: str, model=None) -> int:
    """Bytes of float initializers (what a batch-1 forward pass must read at least once)."""
    from onnx import numpy_helper

    model = model if model is not None else build(name)
    return int(sum(numpy_helper.to_array(i).nbytes for i in model.graph.initializer if i.data_type == 1))


def path(name: str, cache: str | None = None) -> str:
    """The cached ONNX file for `name`, built and written on first use (atomically)."""
    import onnx

    cache = cache or os.environ.get("INFERX_BENCH_CACHE") or DEFAULT_CACHE
    os.makedirs(cache, exist_ok=True)
    fn, kw, _ = MODELS[name]
    key = hashlib.sha256(json.dumps([name, kw, GEN_VERSION, OPSET], sort_keys=True, default=str)
                         .encode()).hexdigest()[:10]
    out = os.path.join(cache, f"{name}-{key}.onnx")
    if not os.path.exists(out):
        m = build(name)
        onnx.checker.check_model(m)
        tmp = out + f".tmp{os.getpid()}"
        onnx.save(m, tmp)
        os.replace(tmp, out)
    return out


def feeds(model_or_path, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for a model: float N(0,1), int64 token ids in [0, vocab)."""
    import onnx

    m = onnx.load(model_or_path, load_external_data=False) if isinstance(model_or_path, str) else model_or_path
    vocab = None
    for init in m.graph.initializer:
        if init.name == "wte":
            vocab = init.dims[0]
    rng = np.random.default_rng(1000 + seed * 7 + batch)
    out = {}
    inits = {i.name for i in m.graph.initializer}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        dims = [d.dim_value if d.dim_value > 0 else batch for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == 7:
            out[vi.name] = rng.integers(0, vocab or 1000, size=dims, dtype=np.int64)
        else:
            out[vi.name] = rng.standard_normal(dims, dtype=np.float32)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*")
    p.add_argument("--cache", default=None)
    p.add_argument("--list", action="store_true")
    a = p.parse_args(argv)
    if a.list or not a.names:
        for n, (fn, kw, b) in MODELS.items():
            print(f"{n:12s} {fn.__name__:7s} batches={b} {kw}")
        return 0
    for n in a.names:
        print(path(n, a.cache))
    return 0


if __name__ == "__main__":
    sys.exit(main())
