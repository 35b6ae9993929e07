"""Models built in code with onnx.helper and seeded random weights (nothing downloaded)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _w(rng, *shape, scale=None):
    scale = scale if scale is not None else 1.0 / np.sqrt(shape[0] if len(shape) > 1 else 1)
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _model(nodes, name, inputs, outputs, inits, opset=OPSET):
    graph = helper.make_graph(nodes, name, inputs, outputs,
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="inferx-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def mlp(seed=0, d_in=64, hidden=128, d_out=10):
    """Two-layer MLP with a dynamic batch dim named 'batch'."""
    rng = np.random.default_rng(seed)
    inits = {"w1": _w(rng, d_in, hidden), "b1": _w(rng, hidden, scale=0.1),
             "w2": _w(rng, hidden, d_out), "b2": _w(rng, d_out, scale=0.1)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
             helper.make_node("Add", ["h0", "b1"], ["h1"], name="fc1_bias"),
             helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
             helper.make_node("MatMul", ["h2", "w2"], ["h3"], name="fc2"),
             helper.make_node("Add", ["h3", "b2"], ["y"], name="fc2_bias")]
    return _model(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d_in])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", d_out])], inits)


def wide_mlp(seed=1, width=1024, layers=4):
    """Weight-bound MLP: `layers` x Linear(width, width) (Gemm with bias) + erf GELU."""
    rng = np.random.default_rng(seed)
    nodes, inits, cur = [], {}, "x"
    for i in range(layers):
        inits[f"w{i}"] = _w(rng, width, width)
        inits[f"b{i}"] = _w(rng, width, scale=0.1)
        nodes.append(helper.make_node("Gemm", [cur, f"w{i}", f"b{i}"], [f"g{i}"], name=f"linear{i}"))
        nodes += _gelu(f"g{i}", f"a{i}", f"gelu{i}", inits)
        cur = f"a{i}"
    nodes.append(helper.make_node("Identity", [cur], ["y"], name="out"))
    return _model(nodes, "wide_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width])], inits)


def _gelu(x, y, prefix, inits):
    """Exact GELU, 0.5*x*(1+erf(x/sqrt2)), spelled in ONNX ops."""
    inits.setdefault("c_sqrt2", np.array(np.sqrt(2.0), np.float32))
    inits.setdefault("c_one", np.array(1.0, np.float32))
    inits.setdefault("c_half", np.array(0.5, np.float32))
    return [helper.make_node("Div", [x, "c_sqrt2"], [f"{prefix}_d"], name=f"{prefix}_div"),
            helper.make_node("Erf", [f"{prefix}_d"], [f"{prefix}_e"], name=f"{prefix}_erf"),
            helper.make_node("Add", [f"{prefix}_e", "c_one"], [f"{prefix}_p"], name=f"{prefix}_add"),
            helper.make_node("Mul", [x, f"{prefix}_p"], [f"{prefix}_m"], name=f"{prefix}_mul"),
            helper.make_node("Mul", [f"{prefix}_m", "c_half"], [y], name=f"{prefix}_half")]


def cnn(seed=2, channels=16, classes=10, size=32):
    """Conv -> BatchNorm -> Relu -> MaxPool -> Conv -> BatchNorm -> Relu -> GlobalAvgPool -> Gemm."""
    rng = np.random.default_rng(seed)
    c = channels
    inits = {
        "conv1_w": _w(rng, c, 3, 3, 3, scale=0.2), "conv1_b": _w(rng, c, scale=0.1),
        "bn1_s": (1 + 0.1 * rng.standard_normal(c)).astype(np.float32), "bn1_b": _w(rng, c, scale=0.1),
        "bn1_m": _w(rng, c, scale=0.1), "bn1_v": (1 + 0.1 * rng.random(c)).astype(np.float32),
        "conv2_w": _w(rng, 2 * c, c, 3, 3, scale=0.1),
        "bn2_s": (1 + 0.1 * rng.standard_normal(2 * c)).astype(np.float32), "bn2_b": _w(rng, 2 * c, scale=0.1),
        "bn2_m": _w(rng, 2 * c, scale=0.1), "bn2_v": (1 + 0.1 * rng.random(2 * c)).astype(np.float32),
        "fc_w": _w(rng, classes, 2 * c), "fc_b": _w(rng, classes, scale=0.1),
    }
    nodes = [
        helper.make_node("Conv", ["x", "conv1_w", "conv1_b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn1_s", "bn1_b", "bn1_m", "bn1_v"], ["n1"], name="bn1"),
        helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2_w"], ["c2"], name="conv2", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c2", "bn2_s", "bn2_b", "bn2_m", "bn2_v"], ["n2"], name="bn2"),
        helper.make_node("Relu", ["n2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
    ]
    return _model(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, size, size])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])], inits)


def transformer_block(seed=3, d=64, heads=4, seq=16, ffn=128, causal=False):
    """Post-norm encoder block: MHA (softmax attention) + residual + LayerNorm + erf-GELU FFN.
    `causal=True` adds GPT-2's additive causal mask (-1e4 above the diagonal) before the softmax."""
    rng = np.random.default_rng(seed)
    dh = d // heads
    inits = {
        "wq": _w(rng, d, d), "wk": _w(rng, d, d), "wv": _w(rng, d, d), "wo": _w(rng, d, d),
        "bq": _w(rng, d, scale=0.1), "bk": _w(rng, d, scale=0.1), "bv": _w(rng, d, scale=0.1),
        "bo": _w(rng, d, scale=0.1),
        "ln1_g": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32), "ln1_b": _w(rng, d, scale=0.1),
        "ln2_g": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32), "ln2_b": _w(rng, d, scale=0.1),
        "w1": _w(rng, d, ffn), "b1": _w(rng, ffn, scale=0.1), "w2": _w(rng, ffn, d), "b2": _w(rng, d, scale=0.1),
        "heads_shape": np.array([0, seq, heads, dh], np.int64),
        "merge_shape": np.array([0, seq, d], np.int64),
        "scale": np.array(1.0 / np.sqrt(dh), np.float32),
        **({"causal_mask": np.triu(np.full((seq, seq), -1e4, np.float32), k=1)} if causal else {}),
    }
    n = helper.make_node
    nodes = []
    for p in ("q", "k", "v"):
        nodes += [n("MatMul", ["x", f"w{p}"], [f"{p}0"], name=f"{p}_proj"),
                  n("Add", [f"{p}0", f"b{p}"], [f"{p}1"], name=f"{p}_bias"),
                  n("Reshape", [f"{p}1", "heads_shape"], [f"{p}2"], name=f"{p}_split_heads"),
                  n("Transpose", [f"{p}2"], [f"{p}h"], name=f"{p}_transpose",
                    perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [
        n("MatMul", ["qh", "kh"], ["s0"], name="scores"),
        n("Mul", ["s0", "scale"], ["s1"], name="scale_scores"),
        n("Add", ["s1", "causal_mask"], ["s1m"], name="causal_mask_add") if causal else
        n("Identity", ["s1"], ["s1m"], name="no_mask"),
        n("Softmax", ["s1m"], ["attn"], name="softmax", axis=-1),
        n("MatMul", ["attn", "vh"], ["ctx0"], name="context"),
        n("Transpose", ["ctx0"], ["ctx1"], name="merge_transpose", perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx1", "merge_shape"], ["ctx2"], name="merge_heads"),
        n("MatMul", ["ctx2", "wo"], ["o0"], name="out_proj"),
        n("Add", ["o0", "bo"], ["o1"], name="out_bias"),
        n("Add", ["x", "o1"], ["res1"], name="residual1"),
        n("LayerNormalization", ["res1", "ln1_g", "ln1_b"], ["h1"], name="ln1", axis=-1, epsilon=1e-5),
        n("MatMul", ["h1", "w1"], ["f0"], name="ffn1"),
        n("Add", ["f0", "b1"], ["f1"], name="ffn1_bias"),
    ]
    nodes += _gelu("f1", "f2", "gelu", inits)
    nodes += [
        n("MatMul", ["f2", "w2"], ["f3"], name="ffn2"),
        n("Add", ["f3", "b2"], ["f4"], name="ffn2_bias"),
        n("Add", ["h1", "f4"], ["res2"], name="residual2"),
        n("LayerNormalization", ["res2", "ln2_g", "ln2_b"], ["y"], name="ln2", axis=-1, epsilon=1e-5),
    ]
    return _model(nodes, "encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", seq, d])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", seq, d])], inits)


class _ConvChain:
    """Conv (+ bias) + Relu layers appended to one node list, with seeded weights."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.inits, self.nodes = {}, []

    def conv(self, name, x, cin, cout, k, stride=1, pad=0, dilation=1, group=1, bias=True):
        self.inits[f"{name}_w"] = _w(self.rng, cout, cin // group, k, k, scale=1.0 / np.sqrt(cin // group * k * k))
        ins = [x, f"{name}_w"]
        if bias:
            self.inits[f"{name}_b"] = _w(self.rng, cout, scale=0.1)
            ins.append(f"{name}_b")
        self.nodes.append(helper.make_node("Conv", ins, [f"{name}_c"], name=name, kernel_shape=[k, k],
                                           strides=[stride, stride], pads=[pad] * 4,
                                           dilations=[dilation, dilation], group=group))
        self.nodes.append(helper.make_node("Relu", [f"{name}_c"], [f"{name}_r"], name=f"{name}_relu"))
        return f"{name}_r"

    def model(self, name, last, size, out_channels, out_size, in_channels=3):
        self.nodes.append(helper.make_node("Identity", [last], ["y"], name="out"))
        return _model(self.nodes, name,
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", in_channels, size, size])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", out_channels, out_size,
                                                                               out_size])], self.inits)


def conv_zoo(seed=4, size=20):
    """One convolution of every kind the conv strategy pass decides on, chained: a 7x7 stride-2
    stem on 3 channels, 3x3 stride 1 with 5 -> 7 channels (not a multiple of any vector width),
    3x3 stride 2, 1x1 stride 1, 1x1 stride 2, a 3x3 stride-1 64 -> 64 conv (Winograd-sized),
    a dilated 3x3, a grouped 3x3, a depthwise 3x3, a residual add, a strided depthwise 3x3;
    bias on most, Relu between."""
    c = _ConvChain(seed)
    h = c.conv("stem7x7_s2", "x", 3, 5, 7, stride=2, pad=3)           # 20 -> 10
    h = c.conv("c3x3_s1_odd", h, 5, 7, 3, pad=1)
    h = c.conv("c3x3_s2", h, 7, 16, 3, stride=2, pad=1)                 # 10 -> 5
    h = c.conv("c1x1_s1", h, 16, 64, 1, bias=False)
    skip = h
    h = c.conv("c3x3_s1_64", h, 64, 64, 3, pad=1)
    c.nodes.append(helper.make_node("Add", [h, skip], ["res"], name="residual"))
    h = c.conv("c3x3_dilated", "res", 64, 32, 3, pad=2, dilation=2)
    h = c.conv("c3x3_grouped", h, 32, 32, 3, pad=1, group=4)
    h = c.conv("c3x3_depthwise", h, 32, 32, 3, pad=1, group=32)
    h = c.conv("c1x1_s2", h, 32, 24, 1, stride=2)                       # 5 -> 3
    h = c.conv("c3x3_dw_s2", h, 24, 24, 3, stride=2, pad=1, group=24)   # 3 -> 2, depthwise strided
    return c.model("conv_zoo", h, size, 24, 2)


def bottleneck_head(seed=8, channels=16, size=8):
    """A ResNet bottleneck's head: 3x3 stride 2, ReLU, then a 1x1 expanding 4x (with bias):
    the pattern whose dynamic-batch 1x1 rewrite once made IREE drop data tiling for the module."""
    c = _ConvChain(seed)
    h = c.conv("c3x3_s2", "x", channels, channels, 3, stride=2, pad=1)
    h = c.conv("c1x1_expand", h, channels, 4 * channels, 1)
    return c.model("bottleneck_head", h, size, 4 * channels, size // 2, in_channels=channels)


def deep_bottleneck(seed=9, channels=320, size=12):
    """A stem (3x3 over 3 channels), a bottleneck whose 1x1 layers read more than one of the f32
    kernel's K blocks (`channels` = 320: blocks of 160) with their biases, a padded 3x3, a residual
    add and a strided 1x1 projection: x [batch, 3, size, size] -> proj [batch, 96, size/2, size/2]."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], {}

    def conv(name, x, c, f, k, stride=1, pad=0, relu=True):
        inits[f"{name}_w"] = (rng.standard_normal((f, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
        inits[f"{name}_b"] = rng.standard_normal(f).astype(np.float32) * 0.1
        nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c" if relu else name],
                                      name=name, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4))
        if relu:
            nodes.append(helper.make_node("Relu", [f"{name}_c"], [name], name=f"{name}_relu"))

    conv("stem", "x", 3, channels, 3, pad=1)
    conv("reduce", "stem", channels, 64, 1)
    conv("mid", "reduce", 64, 64, 3, pad=1)
    conv("expand", "mid", 64, channels, 1, relu=False)
    nodes.append(helper.make_node("Add", ["expand", "stem"], ["sum"], name="residual"))
    conv("proj", "sum", channels, 96, 1, stride=2, relu=False)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, size, size])
    y = helper.make_tensor_value_info("proj", TensorProto.FLOAT, ["batch", 96, size // 2, size // 2])
    return _model(nodes, "deep_bottleneck", [x], [y], inits)


def small_conv_zoo(seed=4, size=20):
    """Four of the zoo's kinds (the 7x7 stride-2 stem, 3x3 stride 2, a dilated 3x3, 1x1 stride
    2): for tests that build a model many times (--tune)."""
    c = _ConvChain(seed)
    h = c.conv("stem7x7_s2", "x", 3, 5, 7, stride=2, pad=3)           # 20 -> 10
    h = c.conv("c3x3_s2", h, 5, 16, 3, stride=2, pad=1)                 # 10 -> 5
    h = c.conv("c3x3_dilated", h, 16, 16, 3, pad=2, dilation=2)
    h = c.conv("c1x1_s2", h, 16, 8, 1, stride=2)                        # 5 -> 3
    return c.model("small_conv_zoo", h, size, 8, 3)


def sensitive_mlp(seed=5, width=256, layers=4, sensitive=2, outlier=300.0, seq=None):
    """MatMul + ReLU layers where the input of layer `sensitive` has one outlier channel: the
    layer before scales that output column up by `outlier`, and the sensitive layer scales the
    matching weight row down by as much (the model computes the same function). Quantizing the
    sensitive layer's activations per row then spends the int8 range on the outlier and rounds
    every other channel to a few levels: that layer must stay in floating point; the others lose
    about 1% each at int8. Layers fc0..fc{n-1}, weights w0..; input x [batch, width], or with `seq`
    [batch, seq, width] (rows are tokens)."""
    rng = np.random.default_rng(seed)
    ws = [_w(rng, width, width) for _ in range(layers)]
    ws[sensitive - 1][:, 0] *= outlier
    ws[sensitive][0, :] /= outlier
    nodes, inits, cur = [], {}, "x"
    for i in range(layers):
        inits[f"w{i}"] = ws[i]
        nodes.append(helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"], name=f"fc{i}"))
        last = i == layers - 1
        nodes.append(helper.make_node("Identity" if last else "Relu", [f"m{i}"], ["y" if last else f"r{i}"],
                                      name=f"act{i}"))
        cur = f"r{i}"
    dims = ["batch", width] if seq is None else ["batch", seq, width]
    return _model(nodes, "sensitive_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)], inits)


def tied_lm(seed=6, vocab=512, d=128, seq=8):
    """A token embedding (Gather) whose table is also the output projection (Gemm transB=1, as
    GPT-2 ties them): ids [batch, seq] int64 -> logits [batch*seq, vocab]."""
    rng = np.random.default_rng(seed)
    inits = {"wte": _w(rng, vocab, d, scale=0.5), "w_mid": _w(rng, d, d),
             "shape2d": np.array([-1, d], np.int64)}
    nodes = [helper.make_node("Gather", ["wte", "ids"], ["emb"], name="embed"),
             helper.make_node("Reshape", ["emb", "shape2d"], ["h0"], name="flatten"),
             helper.make_node("MatMul", ["h0", "w_mid"], ["h1"], name="mid"),
             helper.make_node("Relu", ["h1"], ["h2"], name="act"),
             helper.make_node("Gemm", ["h2", "wte"], ["logits"], name="lm_head", transB=1)]
    return _model(nodes, "tied_lm", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", seq])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["rows", vocab])], inits)


MODELS = {"mlp": mlp, "cnn": cnn, "transformer": transformer_block, "wide_mlp": wide_mlp}


def random_inputs(model: onnx.ModelProto, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        dims = [d.dim_value if d.dim_value > 0 else batch for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def norm_projection(seed=7, d=768, seq=128):
    """A transformer block's entry: h = LayerNorm(x); y = h @ W + b + h (the projection with its
    residual). At d=768 and bf16 on AVX-512 CPUs, IREE 3.13 fuses the normalization, the bf16
    truncation and both data-tiling packs into one dispatch it cannot vectorize (see
    passes/isolate_casts.py)."""
    rng = np.random.default_rng(seed)
    inits = {"gamma": (1 + 0.05 * rng.standard_normal(d)).astype(np.float32), "beta": _w(rng, d, scale=0.02),
             "w": _w(rng, d, d), "b": _w(rng, d, scale=0.02)}
    nodes = [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["h"], name="ln", axis=-1, epsilon=1e-5),
             helper.make_node("MatMul", ["h", "w"], ["p"], name="proj"),
             helper.make_node("Add", ["p", "b"], ["pb"], name="proj_bias"),
             helper.make_node("Add", ["pb", "h"], ["y"], name="residual")]
    return _model(nodes, "norm_projection", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", seq, d])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", seq, d])], inits)
