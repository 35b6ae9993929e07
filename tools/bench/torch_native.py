"""The benchmark models as native torch.nn modules: the PyTorch baseline a user actually has.

tools/bench/torch_impl.py runs the ONNX graph op by op (a faithful interpreter, but not what
anyone deploys); this file writes each architecture of tools/bench/models.py the way a torch
user writes it -- nn.Conv2d / nn.Linear / nn.LayerNorm / nn.Embedding, F.gelu (erf form),
F.scaled_dot_product_attention -- and loads the weights from the ONNX model's initializers, so
both compute the same function with the same weights:

    resnet   ResNet-50 v1.5 (stride on the 3x3 of the bottleneck), BatchNorm folded into the
             conv bias as models.py builds it (so Conv2d(bias=True), no BatchNorm2d), 3x3/2
             max-pool, AdaptiveAvgPool2d(1), Linear head.
    bert     BERT encoder, post-LN: x = LN(x + attn(x)); x = LN(x + ffn(x)); separate
             query/key/value Linears (as HF BertSelfAttention), SDPA, erf GELU.
    gpt2     GPT-2, pre-LN: x = x + attn(LN(x)); x = x + mlp(LN(x)); fused qkv Linear (c_attn,
             as HF GPT2Attention / nanoGPT; loaded from models.py's separate q/k/v weights),
             SDPA(is_causal=True), final LN, LM head tied to the token embedding.
             models.py masks with an additive -1e4 before the softmax: exp(-1e4 + s) underflows
             to exactly 0 in fp32 (and fp16) for any score |s| << 1e4, so is_causal gives the same
             probabilities (checked against onnxruntime by test/e2e/test_bench_torch_native.py).
    mlp      nn.Sequential of `layers` x (Linear + GELU).

Every hyperparameter (widths, depths, heads, sequence length, vocabulary) is read from the
initializers, so the *_lite variants and `tiny` work too.

    mod = torch_native.build("bert", onnx_model)    # fp32, eval mode, on the CPU
    (y,) = mod(x)                                  # inputs positionally in graph-input order

Every initializer is accounted for exactly once: a weight is copied into exactly one parameter
(or one slice of one, for the fused qkv), and the structural constants models.py stores as
initializers (GELU's sqrt(2)/1/0.5, reshape shapes, the attention scale, the causal mask, the LM
head's zero bias) are checked against what the module computes instead; every parameter must be
filled completely. build() raises if anything is left over, used twice, or mis-shaped.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


# ----------------------------------------------------------------------------- ResNet-50 v1.5
class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, mid: int, stride: int):
        super().__init__()
        cout = mid * self.expansion
        self.c1 = nn.Conv2d(cin, mid, 1)
        self.c2 = nn.Conv2d(mid, mid, 3, stride=stride, padding=1)
        self.c3 = nn.Conv2d(mid, cout, 1)
        self.down = nn.Conv2d(cin, cout, 1, stride=stride) if (stride != 1 or cin != cout) else None

    def forward(self, x):
        h = F.relu(self.c1(x))
        h = F.relu(self.c2(h))
        h = self.c3(h)
        return F.relu(h + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self, blocks=(3, 4, 6, 3), width=64, classes=1000, in_ch=3):
        super().__init__()
        self.stem = nn.Conv2d(in_ch, width, 7, stride=2, padding=3)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        cin, stages = width, []
        for s, n in enumerate(blocks):
            mid = width * 2**s
            layer = []
            for b in range(n):
                layer.append(Bottleneck(cin, mid, 2 if (b == 0 and s > 0) else 1))
                cin = mid * Bottleneck.expansion
            stages.append(nn.Sequential(*layer))
        self.layers = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.pool(F.relu(self.stem(x)))
        x = self.layers(x)
        return (self.fc(torch.flatten(self.avgpool(x), 1)),)


# ----------------------------------------------------------------------------- transformers
def _split_heads(t, heads):
    b, s, d = t.shape
    return t.view(b, s, heads, d // heads).transpose(1, 2)  # [b, heads, s, dh]


def _merge_heads(t):
    b, h, s, dh = t.shape
    return t.transpose(1, 2).reshape(b, s, h * dh)


class BertSelfAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        q, k, v = (_split_heads(f(x), self.heads) for f in (self.q, self.k, self.v))
        return self.o(_merge_heads(F.scaled_dot_product_attention(q, k, v)))


class FeedForward(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))  # F.gelu default: the exact (erf) form


class BertLayer(nn.Module):
    def __init__(self, d, heads, ffn, eps=1e-5):
        super().__init__()
        self.attn, self.ln1 = BertSelfAttention(d, heads), nn.LayerNorm(d, eps=eps)
        self.ffn, self.ln2 = FeedForward(d, ffn), nn.LayerNorm(d, eps=eps)

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ffn(x))


class BertEncoder(nn.Module):
    """Input: the embedding output [batch, seq, d] (models.py's bert has no vocabulary table)."""

    def __init__(self, layers=12, d=768, heads=12, ffn=3072):
        super().__init__()
        self.layers = nn.ModuleList(BertLayer(d, heads, ffn) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return (x,)


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)  # q, k, v in one GEMM
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        q, k, v = (_split_heads(t, self.heads) for t in self.c_attn(x).chunk(3, dim=-1))
        return self.c_proj(_merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True)))


class GPT2Block(nn.Module):
    def __init__(self, d, heads, eps=1e-5):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(d, eps=eps), CausalSelfAttention(d, heads)
        self.ln_2, self.mlp = nn.LayerNorm(d, eps=eps), FeedForward(d, 4 * d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, layers=12, d=768, heads=12, seq=128, vocab=50257):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.h = nn.ModuleList(GPT2Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return (self.lm_head(self.ln_f(x)),)


# ----------------------------------------------------------------------------- MLP
class MLP(nn.Sequential):
    def __init__(self, width=4096, layers=8):
        super().__init__(*[m for _ in range(layers) for m in (nn.Linear(width, width), nn.GELU())])

    def forward(self, x):
        return (super().forward(x),)


# ----------------------------------------------------------------------------- weight loading
class _Loader:
    """Copies ONNX initializers into parameters, accounting for every one of them."""

    def __init__(self, module: nn.Module, onnx_model):
        from onnx import numpy_helper

        self.arrays = {i.name: numpy_helper.to_array(i) for i in onnx_model.graph.initializer}
        self.used: dict[str, int] = {}
        self.params = dict(module.named_parameters())  # tied parameters appear once
        self.filled = dict.fromkeys(self.params, 0)
        self.fills: set = set()

    def has(self, name):
        return name in self.arrays

    def take(self, name) -> np.ndarray:
        if name not in self.arrays:
            raise KeyError(f"torch_native: initializer {name!r} not in the ONNX model")
        self.used[name] = self.used.get(name, 0) + 1
        return self.arrays[name]

    def param(self, pname, iname, transpose=False, rows=None):
        """param[rows] <- initializer (transposed: ONNX MatMul weights are [in, out])."""
        a = self.take(iname)
        a = a.T if transpose else a
        p = self.params[pname]
        dst = p.data if rows is None else p.data[rows[0]:rows[1]]
        if tuple(dst.shape) != a.shape or a.dtype != np.float32:
            raise ValueError(f"torch_native: {iname} {a.dtype}{list(a.shape)} -> {pname}"
                             f"{'' if rows is None else list(rows)} {list(dst.shape)}")
        key = (pname, rows)
        if key in self.fills:
            raise ValueError(f"torch_native: {pname}{'' if rows is None else list(rows)} filled twice")
        self.fills.add(key)
        with torch.no_grad():
            dst.copy_(torch.from_numpy(np.array(a, order="C")))  # a writable copy
        self.filled[pname] += a.size

    def const(self, iname, expected):
        """A structural constant: not a weight, but it must equal what the module computes."""
        a = self.take(iname)
        e = np.asarray(expected, dtype=a.dtype)
        if a.shape != e.shape or not np.array_equal(a, e):
            raise ValueError(f"torch_native: constant {iname} = {a.reshape(-1)[:8]}... is not the "
                             f"expected {e.reshape(-1)[:8]}... (architecture mismatch)")

    def const_if_present(self, iname, expected):
        if iname in self.arrays and iname not in self.used:
            self.const(iname, expected)

    def finish(self):
        unused = [n for n in self.arrays if n not in self.used]
        twice = [n for n, c in self.used.items() if c != 1]
        partial = [f"{n} ({f}/{self.params[n].numel()})" for n, f in self.filled.items()
                   if f != self.params[n].numel()]
        if unused or twice or partial:
            raise ValueError(f"torch_native: initializers unused {unused[:5]} ({len(unused)}), used more than "
                             f"once {twice[:5]}, parameters not filled exactly {partial[:5]}")


def _gelu_consts(ld):
    ld.const_if_present("c_sqrt2", np.sqrt(2.0))
    ld.const_if_present("c_one", 1.0)
    ld.const_if_present("c_half", 0.5)


def _attn_consts(ld, seq, heads, d):
    dh = d // heads
    ld.const_if_present("shape.heads", [0, seq, heads, dh])
    ld.const_if_present("shape.merge", [0, seq, d])
    # SDPA's default scale is 1/sqrt(head dim): what models.py multiplies the scores by
    ld.const_if_present("c_scale", 1.0 / np.sqrt(dh))


def _resnet(onnx_model):
    arrays = {i.name: i for i in onnx_model.graph.initializer}
    width, in_ch = arrays["stem.w"].dims[0], arrays["stem.w"].dims[1]
    blocks = []
    while f"l{len(blocks) + 1}.0.c1.w" in arrays:
        s, n = len(blocks) + 1, 0
        while f"l{s}.{n}.c1.w" in arrays:
            n += 1
        blocks.append(n)
    m = ResNet(tuple(blocks), width, arrays["fc.w"].dims[0], in_ch)
    ld = _Loader(m, onnx_model)
    ld.param("stem.weight", "stem.w")
    ld.param("stem.bias", "stem.b")
    for s, n in enumerate(blocks):
        for b in range(n):
            for conv in ("c1", "c2", "c3", "down"):
                src = f"l{s + 1}.{b}.{conv}"
                if conv == "down" and not ld.has(src + ".w"):
                    continue
                ld.param(f"layers.{s}.{b}.{conv}.weight", src + ".w")
                ld.param(f"layers.{s}.{b}.{conv}.bias", src + ".b")
    ld.param("fc.weight", "fc.w")  # Gemm transB=1: already [out, in]
    ld.param("fc.bias", "fc.b")
    return m, ld


def _layer_count(ini: dict) -> int:
    """Transformer layers in models.py's naming: L0.ln1.g, L1.ln1.g, ..."""
    layers = 0
    while f"L{layers}.ln1.g" in ini:
        layers += 1
    return layers


def _bert(onnx_model):
    from onnx import numpy_helper

    ini = {i.name: i for i in onnx_model.graph.initializer}
    layers = _layer_count(ini)
    d, ffn = ini["L0.attn.q.w"].dims[0], ini["L0.ffn.fc1.w"].dims[1]
    _, seq, heads, _ = (int(v) for v in numpy_helper.to_array(ini["shape.heads"]))
    m = BertEncoder(layers, d, heads, ffn)
    ld = _Loader(m, onnx_model)
    for i in range(layers):
        p, q = f"L{i}", f"layers.{i}"
        for t in ("q", "k", "v", "o"):
            ld.param(f"{q}.attn.{t}.weight", f"{p}.attn.{t}.w", transpose=True)
            ld.param(f"{q}.attn.{t}.bias", f"{p}.attn.{t}.b")
        for fc in ("fc1", "fc2"):
            ld.param(f"{q}.ffn.{fc}.weight", f"{p}.ffn.{fc}.w", transpose=True)
            ld.param(f"{q}.ffn.{fc}.bias", f"{p}.ffn.{fc}.b")
        for ln in ("ln1", "ln2"):
            ld.param(f"{q}.{ln}.weight", f"{p}.{ln}.g")
            ld.param(f"{q}.{ln}.bias", f"{p}.{ln}.b")
    _attn_consts(ld, seq, heads, d)
    _gelu_consts(ld)
    return m, ld


def _gpt2(onnx_model):
    from onnx import numpy_helper

    ini = {i.name: i for i in onnx_model.graph.initializer}
    layers = _layer_count(ini)
    vocab, d = ini["wte"].dims
    seq = ini["wpe"].dims[0]
    heads = int(numpy_helper.to_array(ini["shape.heads"])[2])
    m = GPT2(layers, d, heads, seq, vocab)
    ld = _Loader(m, onnx_model)
    ld.param("wte.weight", "wte")  # also the LM head (tied): one parameter, loaded once
    ld.param("wpe.weight", "wpe")
    for i in range(layers):
        p, q = f"L{i}", f"h.{i}"
        for j, t in enumerate(("q", "k", "v")):  # fused c_attn: rows [j*d, (j+1)*d) of [3d, d]
            ld.param(f"{q}.attn.c_attn.weight", f"{p}.attn.{t}.w", transpose=True, rows=(j * d, (j + 1) * d))
            ld.param(f"{q}.attn.c_attn.bias", f"{p}.attn.{t}.b", rows=(j * d, (j + 1) * d))
        ld.param(f"{q}.attn.c_proj.weight", f"{p}.attn.o.w", transpose=True)
        ld.param(f"{q}.attn.c_proj.bias", f"{p}.attn.o.b")
        ld.param(f"{q}.mlp.fc1.weight", f"{p}.mlp.fc1.w", transpose=True)
        ld.param(f"{q}.mlp.fc1.bias", f"{p}.mlp.fc1.b")
        ld.param(f"{q}.mlp.fc2.weight", f"{p}.mlp.fc2.w", transpose=True)
        ld.param(f"{q}.mlp.fc2.bias", f"{p}.mlp.fc2.b")
        for a, b in (("ln1", "ln_1"), ("ln2", "ln_2")):
            ld.param(f"{q}.{b}.weight", f"{p}.{a}.g")
            ld.param(f"{q}.{b}.bias", f"{p}.{a}.b")
    ld.param("ln_f.weight", "ln_f.g")
    ld.param("ln_f.bias", "ln_f.b")
    assert m.lm_head.weight is m.wte.weight
    _attn_consts(ld, seq, heads, d)
    _gelu_consts(ld)
    ld.const("causal_mask", np.triu(np.full((seq, seq), -1e4, np.float32), k=1))  # == is_causal
    ld.const("shape.flat", [-1, d])
    ld.const("shape.logits", [-1, seq, vocab])
    ld.const("zero_bias", np.zeros((1,), np.float32))  # lm_head has bias=False
    return m, ld


def _mlp(onnx_model):
    ini = {i.name: i for i in onnx_model.graph.initializer}
    layers = 0
    while f"fc{layers}.w" in ini:
        layers += 1
    m = MLP(ini["fc0.w"].dims[0], layers)
    ld = _Loader(m, onnx_model)
    for i in range(layers):
        ld.param(f"{2 * i}.weight", f"fc{i}.w")  # Gemm transB=1: already [out, in]
        ld.param(f"{2 * i}.bias", f"fc{i}.b")
    _gelu_consts(ld)
    return m, ld


FAMILIES = {"resnet": _resnet, "bert": _bert, "gpt2": _gpt2, "mlp": _mlp}


_SIGNATURE = {"resnet": "stem.w", "gpt2": "wte", "bert": "L0.ffn.fc1.w", "mlp": "fc0.w"}
_ALIASES = {"tiny": "mlp"}  # models.py's harness smoke model is a 2-layer mlp


def family(name: str, onnx_model=None) -> str:
    """The architecture of models.py's `name`: 'resnet', 'bert', 'gpt2' or 'mlp' (by name prefix,
    cross-checked against the initializers when `onnx_model` is given)."""
    fam = _ALIASES.get(name) or next((f for f in FAMILIES if name.startswith(f)), None)
    if onnx_model is not None:
        names = {i.name for i in onnx_model.graph.initializer}
        found = [f for f, key in _SIGNATURE.items() if key in names]
        if len(found) != 1 or (fam is not None and found != [fam]):
            raise ValueError(f"torch_native: model {name!r} has initializers of {found or 'no known'} "
                             f"architecture (name says {fam})")
        fam = found[0]
    if fam is None:
        raise KeyError(f"torch_native: no native module for model {name!r}")
    return fam


def build(name: str, onnx_model) -> nn.Module:
    """The native torch module for models.py's `name`, with `onnx_model`'s weights (fp32, eval, CPU).

    forward(*inputs) takes the ONNX graph inputs positionally in graph-input order (same
    dtypes/shapes) and returns a tuple in graph-output order; `input_names` / `output_names`
    are set on the module.
    """
    m, ld = FAMILIES[family(name, onnx_model)](onnx_model)
    ld.finish()
    inits = {i.name for i in onnx_model.graph.initializer}
    m.input_names = [vi.name for vi in onnx_model.graph.input if vi.name not in inits]
    m.output_names = [vi.name for vi in onnx_model.graph.output]
    if len(m.input_names) != 1 or len(m.output_names) != 1:
        raise ValueError(f"torch_native: {name}: expected one input and one output, got "
                         f"{m.input_names} -> {m.output_names}")
    return m.eval()


__all__ = ["build", "family", "ResNet", "BertEncoder", "GPT2", "MLP", "FAMILIES"]
