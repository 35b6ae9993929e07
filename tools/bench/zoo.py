"""A zoo of CPU models we never tuned for: speed that holds beyond the four benchmark models.

    python tools/bench/zoo.py --list                          # the models and their shapes
    python tools/bench/run.py --zoo [--families conv,mlp] [--limit N] [--out DIR]
    python tools/bench/zoo.py run --out docs/bench/DATE-zoo   # the same

A seeded generator (`zoo_models`, a pure function of --seed) of ONNX models in five families,
each swept over its shapes by draws from one numpy Generator:
  conv     conv nets: 3-channel stems of 3x3/5x5/7x7 at stride 1 or 2, channel counts that are
           not multiples of 16, 1x1/3x3/5x5 convolutions, strides, dilation, grouped and
           depthwise-separable blocks, residual and concatenating blocks, BatchNormalization
           folded into the bias or left as a node, 16x16 to 224x224 inputs; global pooling + Gemm
  encoder  transformer encoders: d 64-1024, 1-16 heads, sequence 16-512, pre- or post-LN,
           GELU/ReLU/SiLU, with or without an additive attention-mask input
  decoder  causal decoders: token ids -> embedding + positions, pre-LN, causal mask, LM head
  mlp      MLPs of widths 64-8192 (rectangular at the large end)
  tiny     models where the per-call cost dominates (a 32x32 CNN, a 2-layer MLP, ...)
Every model has a dynamic batch dim ('batch'); each is measured at its batches from 1, 2 and 8.

Method, as a new user meets it: `inferx-compile m.onnx --target cpu` with default flags (so a
batch other than 1 runs the dynamic function), `inferx_compiler.load(m, device="cpu")`,
onnxruntime with default graph optimizations, both on --threads threads (onnxruntime
intra_op, `session.intra_op.allow_spinning=0` so that its idle pool does not take the cores
from the other engine; IREE local-task's group count), in one process. Outputs are first
checked against onnxruntime (relative L2 <= 1e-3, fp32). Then alternating blocks of
back-to-back calls (--rounds blocks per engine, each at least --block-ms), median per call.
Ratio = onnxruntime's median / ours (above 1: faster than onnxruntime). The worst ten get a
per-dispatch profile of their artifact: the dispatch that takes the most of a call.
Outputs in --out: results.json (every model's figures), results.md (the tables).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models as bench_models  # noqa: E402  (the graph-builder helpers of the benchmark set)

ZOO_VERSION = 1  # part of the ONNX cache key: bump when a builder changes
FAMILIES = ("conv", "encoder", "decoder", "mlp", "tiny")


@dataclasses.dataclass(frozen=True)
class ZooModel:
    name: str
    family: str
    params: dict
    batches: tuple[int, ...]

    def build(self):
        import zlib

        return BUILDERS[self.family](seed=zlib.crc32(self.name.encode()), **self.params)


# ------------------------------------------------------------------------------------ builders
def _float_input(name, shape):
    from onnx import TensorProto

    return bench_models._vi(name, TensorProto.FLOAT, shape)


def _act(g, x, kind: str, p: str):
    if kind == "relu":
        return g.node("Relu", [x], p + ".relu")
    if kind == "silu":
        return g.node("Mul", [x, g.node("Sigmoid", [x], p + ".sig")], p + ".silu")
    return g.gelu(x, p)


def conv_net(seed, size, stem_k, stem_stride, widths, block, kernel, dilation, bn_folded, classes=100):
    """A conv net of len(widths) stages (a stride-2 block between stages), one block type."""
    g = bench_models._G(seed)

    def conv(x, cin, cout, k, stride, p, groups=1, dil=1, relu=True):
        w = g.w(f"{p}.w", (cout, cin // groups, k, k), math.sqrt(2.0 / (cin // groups * k * k)))
        pad = dil * (k // 2)
        if bn_folded:
            y = g.node("Conv", [x, w, g.w(f"{p}.b", (cout,), 0.02)], p, kernel_shape=[k, k],
                       strides=[stride] * 2, pads=[pad] * 4, group=groups, dilations=[dil] * 2)
        else:
            y = g.node("Conv", [x, w], p, kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4,
                       group=groups, dilations=[dil] * 2)
            g.inits[p + ".bn.s"] = (1 + 0.1 * g.rng.standard_normal(cout)).astype(np.float32)
            g.w(p + ".bn.b", (cout,), 0.02)
            g.inits[p + ".bn.m"] = (0.05 * g.rng.standard_normal(cout)).astype(np.float32)
            g.inits[p + ".bn.v"] = (1 + 0.1 * np.abs(g.rng.standard_normal(cout))).astype(np.float32)
            y = g.node("BatchNormalization", [y, p + ".bn.s", p + ".bn.b", p + ".bn.m", p + ".bn.v"], p + ".bn",
                       epsilon=1e-5)
        return g.node("Relu", [y], p + ".relu") if relu else y

    x = conv("x", 3, widths[0], stem_k, stem_stride, "stem")
    cin = widths[0]
    for s, cout in enumerate(widths):
        stride = 1 if s == 0 else 2
        p = f"s{s}"
        if block == "plain":
            x = conv(x, cin, cout, kernel, stride, p + ".a", dil=dilation if stride == 1 else 1)
            x = conv(x, cout, cout, kernel, 1, p + ".b", dil=dilation)
        elif block == "residual":
            h = conv(x, cin, cout, kernel, stride, p + ".a")
            h = conv(h, cout, cout, kernel, 1, p + ".b", dil=dilation, relu=False)
            sc = conv(x, cin, cout, 1, stride, p + ".sc", relu=False) if (stride != 1 or cin != cout) else x
            x = g.node("Relu", [g.node("Add", [h, sc], p + ".add")], p + ".out")
        elif block == "dwsep":  # depthwise kxk then pointwise 1x1 (MobileNet)
            h = conv(x, cin, cin, kernel, stride, p + ".dw", groups=cin, dil=dilation if stride == 1 else 1)
            x = conv(h, cin, cout, 1, 1, p + ".pw")
        elif block == "grouped":  # 1x1, grouped kxk (4 groups), 1x1 (ResNeXt)
            mid = 4 * max(1, cout // 8)
            h = conv(x, cin, mid, 1, 1, p + ".a")
            h = conv(h, mid, mid, kernel, stride, p + ".g", groups=4)
            x = conv(h, mid, cout, 1, 1, p + ".c")
        else:  # concat: a 1x1 branch and a kxk branch side by side (Inception)
            half = cout // 2
            a = conv(x, cin, half, 1, stride, p + ".a")
            b = conv(x, cin, cout - half, kernel, stride, p + ".b", dil=dilation if stride == 1 else 1)
            x = g.node("Concat", [a, b], p + ".cat", axis=1)
        cin = cout
    x = g.node("GlobalAveragePool", [x], "gap")
    x = g.node("Flatten", [x], "flatten", axis=1)
    g.w("fc.w", (classes, cin), 1 / math.sqrt(cin))
    g.w("fc.b", (classes,), 0.01)
    g.nodes.append(bench_models._mk("Gemm", [x, "fc.w", "fc.b"], ["y"], "fc", transB=1))
    return g.model("conv", [_float_input("x", ["batch", 3, size, size])], [_float_input("y", ["batch", classes])])


def _ffn(g, x, p, d, ffn, act):
    h = g.node("MatMul", [x, g.w(f"{p}.fc1.w", (d, ffn), 1 / math.sqrt(d))], f"{p}.fc1")
    h = _act(g, g.node("Add", [h, g.w(f"{p}.fc1.b", (ffn,), 0.02)], f"{p}.fc1.bias"), act, p + ".act")
    h = g.node("MatMul", [h, g.w(f"{p}.fc2.w", (ffn, d), 0.5 / math.sqrt(ffn))], f"{p}.fc2")
    return g.node("Add", [h, g.w(f"{p}.fc2.b", (d,), 0.02)], f"{p}.fc2.bias")


def _layers(g, x, layers, d, heads, seq, ffn, act, pre_ln, mask):
    for i in range(layers):
        p = f"L{i}"
        if pre_ln:
            a = bench_models._attention(g, bench_models._ln(g, x, p + ".ln1", d), p + ".attn", d, heads, seq,
                                        mask=mask, out_gain=0.5)
            x = g.node("Add", [x, a], p + ".res1")
            x = g.node("Add", [x, _ffn(g, bench_models._ln(g, x, p + ".ln2", d), p + ".ffn", d, ffn, act)],
                       p + ".res2")
        else:
            a = bench_models._attention(g, x, p + ".attn", d, heads, seq, mask=mask)
            x = bench_models._ln(g, g.node("Add", [x, a], p + ".res1"), p + ".ln1", d)
            x = bench_models._ln(g, g.node("Add", [x, _ffn(g, x, p + ".ffn", d, ffn, act)], p + ".res2"),
                                 p + ".ln2", d)
    return x


def encoder(seed, d, heads, seq, layers, ffn_mult, act, pre_ln, masked):
    """A transformer encoder over float embeddings [batch, seq, d]; `masked`: an additive mask
    input [batch, 1, 1, seq] (padding masks as exporters write them)."""
    g = bench_models._G(seed)
    inputs = [_float_input("x", ["batch", seq, d])]
    if masked:
        inputs.append(_float_input("mask", ["batch", 1, 1, seq]))
    x = _layers(g, "x", layers, d, heads, seq, ffn_mult * d, act, pre_ln, "mask" if masked else None)
    g.nodes.append(bench_models._mk("Identity", [x], ["y"], "out"))
    return g.model("encoder", inputs, [_float_input("y", ["batch", seq, d])])


def decoder(seed, d, heads, seq, layers, vocab, act):
    """A causal decoder: token ids -> embedding + learned positions, pre-LN layers under a
    causal mask, final LN, an untied LM head over every position."""
    from onnx import TensorProto

    g = bench_models._G(seed)
    g.w("wte", (vocab, d), 0.02)
    g.w("wpe", (seq, d), 0.01)
    g.const("causal_mask", np.triu(np.full((seq, seq), -1e4, np.float32), k=1))
    x = g.node("Add", [g.node("Gather", ["wte", "ids"], "embed", axis=0), "wpe"], "embed.pos")
    x = _layers(g, x, layers, d, heads, seq, 4 * d, act, True, "causal_mask")
    x = bench_models._ln(g, x, "ln_f", d)
    x = g.node("MatMul", [x, g.w("head.w", (d, vocab), 1 / math.sqrt(d))], "head")
    g.nodes.append(bench_models._mk("Identity", [x], ["logits"], "out"))
    return g.model("decoder", [bench_models._vi("ids", TensorProto.INT64, ["batch", seq])],
                   [_float_input("logits", ["batch", seq, vocab])])


def mlp(seed, widths, act):
    """Gemm + bias + activation through `widths` (the first is the input width)."""
    g = bench_models._G(seed)
    x = "x"
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        g.w(f"fc{i}.w", (b, a), math.sqrt(2.0 / a))
        g.w(f"fc{i}.b", (b,), 0.02)
        x = g.node("Gemm", [x, f"fc{i}.w", f"fc{i}.b"], f"fc{i}", transB=1)
        if i < len(widths) - 2:
            x = _act(g, x, act, f"fc{i}")
    g.nodes.append(bench_models._mk("Identity", [x], ["y"], "out"))
    return g.model("mlp", [_float_input("x", ["batch", widths[0]])], [_float_input("y", ["batch", widths[-1]])])


BUILDERS = {"conv": conv_net, "encoder": encoder, "decoder": decoder, "mlp": mlp}


def _tiny(seed, kind):
    if kind == "cnn32":
        return conv_net(seed, 32, 3, 1, (16, 32), "plain", 3, 1, True, classes=10)
    if kind == "cnn16":
        return conv_net(seed, 16, 3, 1, (8,), "residual", 3, 1, True, classes=10)
    if kind == "mlp2":
        return mlp(seed, (64, 64, 10), "relu")
    return encoder(seed, 32, 2, 8, 1, 2, "gelu", True, False)


BUILDERS["tiny"] = _tiny


# ----------------------------------------------------------------------------------- the zoo
ODD_WIDTHS = (12, 20, 24, 36, 40, 56, 72, 100, 120, 136)


def zoo_models(seed: int = 0) -> list[ZooModel]:
    """The zoo: 16 conv nets, 10 encoders, 4 decoders, 8 MLPs, 4 tiny models, drawn from one
    seeded Generator (the same list on every machine for a seed)."""
    rng = np.random.default_rng(seed)
    pick = lambda seq: seq[int(rng.integers(len(seq)))]  # noqa: E731
    out = []
    blocks = ("plain", "residual", "dwsep", "grouped", "concat")
    for i in range(16):
        size = pick((16, 32, 56, 64, 96, 128, 160, 224))
        stages = int(rng.integers(2, 5)) if size >= 64 else int(rng.integers(1, 3))
        base = pick(ODD_WIDTHS[:6])
        widths = tuple(int(base * 2 ** s * pick((1.0, 1.5))) // 4 * 4 for s in range(stages))
        block = blocks[i % len(blocks)]
        params = dict(size=size, stem_k=pick((3, 5, 7)), stem_stride=2 if size >= 96 else pick((1, 2)),
                      widths=widths, block=block, kernel=pick((1, 3, 3, 5)) if block != "grouped" else 3,
                      dilation=pick((1, 1, 2)), bn_folded=bool(rng.integers(2)))
        batches = (1, 2, 8) if size <= 64 else (1, 2)
        out.append(ZooModel(f"conv{i:02d}_{block}_{size}", "conv", params, batches))
    for i in range(10):
        heads = pick((1, 2, 4, 6, 8, 12, 16))
        dh = pick((16, 32, 64)) if heads > 1 else pick((64, 96, 128))
        d = min(heads * dh, 1024)
        seq = pick((16, 32, 64, 128, 256, 512)) if d <= 384 else pick((16, 32, 64, 128))
        params = dict(d=d, heads=heads, seq=seq, layers=int(rng.integers(1, 4)), ffn_mult=pick((2, 4)),
                      act=pick(("gelu", "relu", "silu")), pre_ln=bool(rng.integers(2)), masked=bool(rng.integers(2)))
        out.append(ZooModel(f"enc{i:02d}_d{d}h{heads}s{seq}", "encoder", params, (1, 8) if d * seq <= 32768 else (1, 2)))
    for i in range(4):
        heads = pick((2, 4, 8))
        d = heads * pick((32, 64))
        seq = pick((32, 64, 128))
        out.append(ZooModel(f"dec{i:02d}_d{d}s{seq}", "decoder",
                            dict(d=d, heads=heads, seq=seq, layers=int(rng.integers(1, 4)), vocab=pick((1000, 4000, 8000)),
                                 act=pick(("gelu", "silu"))), (1, 2)))
    mlp_widths = [(64, 256, 64), (100, 300, 300, 10), (512, 512, 512), (784, 1000, 500, 10), (1024, 4096, 1024),
                  (2048, 2048, 2048, 2048), (3000, 1500, 100), (8192, 1024, 256)]
    for i, widths in enumerate(mlp_widths):
        out.append(ZooModel(f"mlp{i:02d}_{'x'.join(map(str, widths))}", "mlp",
                            dict(widths=widths, act=pick(("relu", "gelu", "silu"))), (1, 8, 32)))
    for kind in ("cnn32", "cnn16", "mlp2", "encoder8"):
        out.append(ZooModel(f"tiny_{kind}", "tiny", dict(kind=kind), (1, 2)))
    return out


def onnx_path(model: ZooModel, cache: str) -> str:
    """The model's ONNX file under `cache`, built once (keyed by name, parameters and ZOO_VERSION)."""
    import hashlib

    import onnx

    key = hashlib.sha256(json.dumps([ZOO_VERSION, model.name, model.params], sort_keys=True).encode()).hexdigest()[:12]
    path = os.path.join(cache, f"{model.name}-{key}.onnx")
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
        proto = model.build()
        onnx.checker.check_model(proto)
        onnx.save(proto, path + ".tmp")
        os.replace(path + ".tmp", path)
    return path


# ----------------------------------------------------------------------------------- measuring
def _ort_session(path: str, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def _time_blocks(engines: dict, feeds: dict, rounds: int, block_ms: float) -> dict:
    """Alternating blocks of back-to-back calls per engine; median seconds per call."""
    calls = {}
    for name, fn in engines.items():  # warm-up, and the calls a block needs
        fn(feeds)
        t = time.perf_counter()
        fn(feeds)
        calls[name] = max(3, int(block_ms / 1e3 / max(time.perf_counter() - t, 1e-6)))
    samples = {name: [] for name in engines}
    for r in range(rounds):
        order = list(engines) if r % 2 == 0 else list(reversed(engines))
        for name in order:
            fn = engines[name]
            for _ in range(calls[name]):
                t = time.perf_counter()
                fn(feeds)
                samples[name].append(time.perf_counter() - t)
    return {name: float(np.median(s)) for name, s in samples.items()}


def _compile(path: str, out: str) -> tuple[float, str]:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "inferx_compiler.cli.compile", path, "--target", "cpu", "-q",
                           "-o", out], capture_output=True, text=True)
    return time.perf_counter() - t, (proc.stderr.strip().splitlines() or ["?"])[-1] if proc.returncode else ""


def _dominant_dispatch(artifact: str, batch: int, threads: int) -> str:
    """The dispatch taking the most of a call at `batch`, with its share and root op."""
    import zipfile

    from inferx_compiler.tuning.profiling import profile_dispatches

    with zipfile.ZipFile(artifact) as z:
        manifest, report = json.loads(z.read("manifest.json")), json.loads(z.read("report.json"))
    function = manifest["entry_function"]
    dims = {d: batch for s in manifest["inputs"] for d in s["shape"] if isinstance(d, str)}
    for f in manifest.get("functions", []):
        if all(f["dims"].get(d) == batch for d in dims) and f["dims"]:
            function, dims = f["name"], dict(f["dims"])
    times = profile_dispatches(artifact, function, dims, threads, 0.5).us_per_call
    if not times:
        return "?"
    from inferx_compiler.tuning.profiling import executable_of

    name, us = max(times.items(), key=lambda kv: kv[1])
    by_name = {d["dispatch"]: d for d in report.get("dispatches", [])}
    info = by_name.get(executable_of(name, list(by_name)), {})
    share = us / sum(times.values())
    what = f"{info['root']} {info.get('loops', '')}" if info else "made by IREE, e.g. a data-tiling relayout"
    return f"{name} {share:.0%} ({what})"


def run_zoo(args) -> dict:
    import iree.runtime as rt

    import inferx_compiler

    rt.flags.parse_flags(f"--task_topology_max_group_count={args.threads}")
    zoo = [m for m in zoo_models(args.seed) if m.family in args.families
           and (not args.models or any(part in m.name for part in args.models))][:args.limit or None]
    work = tempfile.mkdtemp(prefix="inferx-zoo-")
    rows = []
    for i, model in enumerate(zoo, 1):
        path = onnx_path(model, args.cache)
        artifact = os.path.join(args.artifacts or work, model.name + ".ixa")
        row = {"model": model.name, "family": model.family, "params": model.params}
        compile_s, error = (0.0, "") if (args.artifacts and os.path.exists(artifact)) else _compile(path, artifact)
        row["compile_s"] = round(compile_s, 1)
        if error:
            row["error"] = error
            rows.append(row)
            print(f"[{i}/{len(zoo)}] {model.name}: compile failed: {error}", flush=True)
            continue
        ours, theirs = inferx_compiler.load(artifact, device="cpu"), _ort_session(path, args.threads)
        engines = {"inferx": lambda f: ours.run(f), "onnxruntime": lambda f: theirs.run(None, f)}
        row["batches"] = {}
        for batch in model.batches:
            feeds = bench_models.feeds(path, batch)
            got, want = list(ours.run(feeds).values())[0], theirs.run(None, feeds)[0]
            err = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
            entry = {"rel_l2": err}
            if not err <= 1e-3:
                entry["wrong"] = True
            else:
                t = _time_blocks(engines, feeds, args.rounds, args.block_ms)
                entry.update(inferx_ms=1e3 * t["inferx"], ort_ms=1e3 * t["onnxruntime"],
                             ratio=t["onnxruntime"] / t["inferx"])
            row["batches"][batch] = entry
        rows.append(row)
        shown = ", ".join(f"b{b} {e['ratio']:.2f}x ({e['inferx_ms']:.3f} vs {e['ort_ms']:.3f} ms)" if "ratio" in e
                          else f"b{b} WRONG ({e['rel_l2']:.1e})" for b, e in row["batches"].items())
        print(f"[{i}/{len(zoo)}] {model.name}: {shown}", flush=True)
        del ours, theirs
    ratios = [(r["model"], b, e["ratio"]) for r in rows for b, e in r.get("batches", {}).items() if "ratio" in e]
    worst = sorted(ratios, key=lambda t: t[2])[:10]
    dominant = {}
    for name, batch, _ in worst:
        artifact = os.path.join(args.artifacts or work, name + ".ixa")
        try:
            dominant[f"{name} b{batch}"] = _dominant_dispatch(artifact, batch, args.threads)
        except Exception as e:  # a profile is a diagnosis; its failure is reported, not fatal
            dominant[f"{name} b{batch}"] = f"(profile failed: {type(e).__name__}: {e})"
    return {"host": _host(), "threads": args.threads, "seed": args.seed, "rows": rows, "worst": worst,
            "dominant": dominant}


def _host() -> dict:
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    return {"machine": platform.machine(), "cores": os.cpu_count(),
            "isa": [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile") if f in flags]}


def _geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def report(result: dict) -> str:
    """The tables: every model, per-family geometric means, the worst ten with their dispatch."""
    lines = [f"host: {result['host']}, {result['threads']} threads, zoo seed {result['seed']}", "",
             "| model | family | batch | inferx ms | onnxruntime ms | ratio (ort / inferx) | rel L2 |",
             "|---|---|---|---|---|---|---|"]
    by_family = {}
    for row in result["rows"]:
        if "error" in row:
            lines.append(f"| {row['model']} | {row['family']} | | compile failed: {row['error'][:80]} | | | |")
            continue
        for batch, e in row["batches"].items():
            if "ratio" in e:
                by_family.setdefault(row["family"], []).append(e["ratio"])
                lines.append(f"| {row['model']} | {row['family']} | {batch} | {e['inferx_ms']:.3f} | {e['ort_ms']:.3f} "
                             f"| {e['ratio']:.2f} | {e['rel_l2']:.1e} |")
            else:
                lines.append(f"| {row['model']} | {row['family']} | {batch} | wrong | | | {e['rel_l2']:.1e} |")
    lines += ["", "| family | measured | geometric mean ratio | min | max |", "|---|---|---|---|---|"]
    for family, values in by_family.items():
        lines.append(f"| {family} | {len(values)} | {_geomean(values):.2f} | {min(values):.2f} | {max(values):.2f} |")
    every = [v for vs in by_family.values() for v in vs]
    lines.append(f"| all | {len(every)} | {_geomean(every):.2f} | {min(every, default=0):.2f} | {max(every, default=0):.2f} |")
    lines += ["", "Worst ten (the dispatch that takes the most of a call):", "",
              "| model | batch | ratio | dominant dispatch |", "|---|---|---|---|"]
    for name, batch, ratio in result["worst"]:
        lines.append(f"| {name} | {batch} | {ratio:.2f} | {result['dominant'].get(f'{name} b{batch}', '')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", nargs="?", choices=("run", "list"), default="run")
    p.add_argument("--list", action="store_true", help="list the zoo and stop")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--limit", type=int, help="only the first N models")
    p.add_argument("--models", help="comma list: only the models whose name contains one of these")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5, help="blocks per engine")
    p.add_argument("--block-ms", type=float, default=150.0)
    p.add_argument("--cache", default=os.path.join(bench_models.DEFAULT_CACHE, "zoo"))
    p.add_argument("--artifacts", help="keep (and reuse) the artifacts in this folder")
    p.add_argument("--out", help="write results.json and results.md here")
    args = p.parse_args(argv)
    args.families = tuple(f for f in args.families.split(",") if f)
    args.models = tuple(m for m in (args.models or "").split(",") if m)
    unknown = set(args.families) - set(FAMILIES)
    if unknown:
        p.error(f"unknown families {sorted(unknown)}; valid: {', '.join(FAMILIES)}")
    if args.list or args.command == "list":
        for m in zoo_models(args.seed):
            if m.family in args.families:
                print(f"{m.name:34s} {m.family:8s} batches {m.batches} {m.params}")
        return 0
    if args.artifacts:
        os.makedirs(args.artifacts, exist_ok=True)
    result = run_zoo(args)
    text = report(result)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(result, f, indent=1, default=str)
        with open(os.path.join(args.out, "results.md"), "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
