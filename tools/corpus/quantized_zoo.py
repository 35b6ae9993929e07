"""The quantized zoo: models quantized with onnxruntime's own tools, as its users quantize them.

    python tools/corpus/quantized_zoo.py --list
    python tools/corpus/quantized_zoo.py run --out docs/coverage/quantized-zoo    # results.md/.json
    python tools/corpus/quantized_zoo.py run --models cnn --recipes static-qoperator

Each float model is a small torch module exported with `torch.onnx.export` (seeded weights,
dynamic batch), then quantized by one recipe of `onnxruntime.quantization`:

- `dynamic-u8`, `dynamic-s8`, `dynamic-s8-channel`: `quantize_dynamic` (DynamicQuantizeLinear +
  MatMulInteger / ConvInteger, DynamicQuantizeLSTM), uint8 or int8 weights, per tensor or channel;
- `static-qdq`, `static-qdq-channel`: `quantize_static`, QuantizeLinear/DequantizeLinear pairs;
- `static-qoperator`, `static-qoperator-channel`: `quantize_static` in the QOperator format
  (QLinearConv, QLinearMatMul and the contrib QLinearAdd, QLinearMul, QGemm, QLinearSigmoid,
  QLinearConcat, QLinearSoftmax, QLinearGlobalAveragePool...);
- `nbits4`, `nbits4-asym`: `MatMulNBitsQuantizer`, 4-bit blocks of 32 along K;
- `ort-fused`: the `dynamic-s8` model as onnxruntime's graph optimizer saves it
  (DynamicQuantizeMatMul, Gelu, QuickGelu, SkipLayerNormalization on this zoo).

Per model and recipe: `inferx-compile MODEL --target T` with no flags, then `inferx-run` at two
batch sizes against onnxruntime on the same file. Pass: the relative L2 from onnxruntime run
with or without its graph optimizations (both are onnxruntime's numbers), whichever is nearer,
is at most `TOLERANCE` or onnxruntime's own spread, the distance between those two runs (the
optimizations fuse Q/DQ pairs into integer kernels that round intermediate values differently:
4e-3 to 1.3e-2 apart on this zoo's QDQ models), whichever is larger. Where a value sits on a
rounding boundary, one unit of a quantized tensor flips with the order of a float sum; the
flip then travels through the layers after it.

The reference. On x86 without VNNI (AVX2 only, AVX-512 without VNNI) onnxruntime multiplies
uint8 activations by int8 weights with `vpmaddubsw`, which saturates pairs of products at
int16: its own documentation warns of it (quantization docs, "data type selection"), and on
this zoo's models the saturated results are 5-25% (relative L2) from the exact products that
ONNX defines and that onnxruntime computes on VNNI/AMX hosts. There the reference is the same
model with its int8 weights re-encoded as uint8 (w + 128 with zero point zp + 128: the same
real values exactly), which onnxruntime multiplies without saturation; the table says which
hosts measured which way and gives the unmodified onnxruntime's distance as well.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import _cli, _first_error  # noqa: E402  (the corpus's own helpers)
from transformers_zoo import relative_l2  # noqa: E402

TOLERANCE = 1e-3  # relative L2; see docs/coverage/quantized-zoo/README.md for onnxruntime's own spread
BATCHES = (1, 3)
SEED = 0
CALIBRATION_BATCHES = 8

# Where each integer kernel reads its int8 weight and that weight's zero point (input positions).
INT8_WEIGHT_INPUTS = {
    ("", "MatMulInteger"): (1, 3), ("", "ConvInteger"): (1, 3),
    ("", "QLinearMatMul"): (3, 5), ("", "QLinearConv"): (3, 5),
    ("com.microsoft", "QGemm"): (3, 5), ("com.microsoft", "DynamicQuantizeMatMul"): (1, 3),
    ("com.microsoft", "MatMulIntegerToFloat"): (1, 5), ("com.microsoft", "DynamicQuantizeLSTM"): (1, 9),
    ("", "DequantizeLinear"): (0, 2),
}
DQ_LSTM_RECURRENT = (2, 11)


# -- the float models --------------------------------------------------------------------------

@dataclass(frozen=True)
class FloatModel:
    name: str
    shape: tuple  # example input shape; dim 0 is the dynamic batch
    build: Callable  # () -> torch.nn.Module
    what: str


def _mlp():
    import torch.nn as nn

    return nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 96), nn.GELU(), nn.Linear(96, 32))


def _cnn():
    import torch
    import torch.nn as nn

    class ResidualCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, padding=1)
            self.block = nn.Conv2d(16, 16, 3, padding=1)
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            y = torch.relu(self.stem(x))
            z = torch.relu(self.block(y)) + y
            z = torch.nn.functional.max_pool2d(z, 2)
            z = torch.sigmoid(z) * z
            return self.head(z.mean((2, 3)))
    return ResidualCNN()


def _concat_net():
    import torch
    import torch.nn as nn

    class ConcatNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Conv2d(3, 8, 1)
            self.b = nn.Conv2d(3, 8, 3, padding=1)
            self.c = nn.Conv2d(16, 12, 3, stride=2, padding=1)
            self.fc = nn.Linear(12, 6)

        def forward(self, x):
            y = torch.cat([torch.relu(self.a(x)), torch.relu(self.b(x))], 1)
            y = torch.nn.functional.leaky_relu(self.c(y), 0.1)
            y = torch.nn.functional.avg_pool2d(y, 2)
            return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))
    return ConcatNet()


def _encoder():
    import torch
    import torch.nn as nn

    class EncoderLayer(nn.Module):
        """Post-LN self-attention (4 heads) and a GELU feed-forward, written out."""

        def __init__(self, d: int = 64, heads: int = 4):
            super().__init__()
            self.heads = heads
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ff1, self.ff2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
            y = self.ln1(x + self.out((att @ v).transpose(1, 2).reshape(b, t, d)))
            return self.ln2(y + self.ff2(torch.nn.functional.gelu(self.ff1(y))))
    return EncoderLayer()


def _lstm():
    import torch.nn as nn

    class LastOutput(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(16, 32, batch_first=True)

        def forward(self, x):
            return self.lstm(x)[0]
    return LastOutput()


MODELS = (
    FloatModel("mlp", (2, 8, 64), _mlp, "three MatMuls, ReLU, GELU"),
    FloatModel("cnn", (2, 3, 24, 24), _cnn, "convs, residual Add, MaxPool, x*sigmoid(x), mean, Linear"),
    FloatModel("concat", (2, 3, 24, 24), _concat_net, "two conv branches concatenated, LeakyReLU, AvgPool"),
    FloatModel("encoder", (2, 12, 64), _encoder, "a transformer encoder layer (attention, LayerNorm, FFN)"),
    FloatModel("lstm", (2, 7, 16), _lstm, "one LSTM layer"),
)


def by_name() -> dict[str, FloatModel]:
    return {m.name: m for m in MODELS}


def export_float(model: FloatModel, path: Path) -> None:
    import torch

    torch.manual_seed(SEED)
    module = model.build().eval()
    example = torch.randn(*model.shape)
    torch.onnx.export(module, (example,), str(path), input_names=["x"], output_names=["y"], dynamo=False,
                      opset_version=17, dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})


# -- the recipes -------------------------------------------------------------------------------

def _calibration(model: FloatModel):
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": _input(model, 2, SEED + 100 + k)} for k in range(CALIBRATION_BATCHES)])

        def get_next(self):
            return next(self.batches, None)
    return Reader()


def _dynamic(weight: str, per_channel: bool = False) -> Callable:
    def quantize(model: FloatModel, src: Path, dst: Path) -> None:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(src), str(dst), weight_type=getattr(QuantType, weight), per_channel=per_channel)
    return quantize


def _static(fmt: str, per_channel: bool = False) -> Callable:
    def quantize(model: FloatModel, src: Path, dst: Path) -> None:
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

        quantize_static(str(src), str(dst), _calibration(model), quant_format=getattr(QuantFormat, fmt),
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=per_channel)
    return quantize


def _nbits(symmetric: bool) -> Callable:
    def quantize(model: FloatModel, src: Path, dst: Path) -> None:
        import onnx
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        quantizer = MatMulNBitsQuantizer(onnx.load(str(src)), block_size=32, is_symmetric=symmetric)
        quantizer.process()
        quantizer.model.save_model_to_file(str(dst))
    return quantize


def _ort_fused(model: FloatModel, src: Path, dst: Path) -> None:
    """The dynamic-s8 model as onnxruntime's extended graph optimizations save it."""
    import onnxruntime as ort

    plain = dst.with_name(dst.stem + "-plain.onnx")
    _dynamic("QInt8")(model, src, plain)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(dst)
    ort.InferenceSession(str(plain), options, providers=["CPUExecutionProvider"])


RECIPES: dict[str, Callable] = {
    "dynamic-u8": _dynamic("QUInt8"),
    "dynamic-s8": _dynamic("QInt8"),
    "dynamic-s8-channel": _dynamic("QInt8", per_channel=True),
    "static-qdq": _static("QDQ"),
    "static-qdq-channel": _static("QDQ", per_channel=True),
    "static-qoperator": _static("QOperator"),
    "static-qoperator-channel": _static("QOperator", per_channel=True),
    "nbits4": _nbits(symmetric=True),
    "nbits4-asym": _nbits(symmetric=False),
    "ort-fused": _ort_fused,
}


# -- the reference -----------------------------------------------------------------------------

def saturating_host() -> bool:
    """Whether onnxruntime's uint8 x int8 kernels saturate here: x86 without any VNNI."""
    from inferx_compiler.targets import get_target

    features = set(get_target("cpu").features)
    return "avx2" in features and not features & {"avx512_vnni", "avx_vnni", "amx_int8"}


def reencode_int8_weights(model) -> int:
    """Re-encode, in place, the int8 weight initializers that onnxruntime's integer kernels read
    as uint8: w + 128 with zero point zp + 128 (an absent zero point becomes 128). The real
    values (w - zp) are unchanged exactly. Returns how many weights were re-encoded."""
    from onnx import numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    done: dict[str, str] = {}
    count = 0
    for node in model.graph.node:
        positions = [INT8_WEIGHT_INPUTS.get((node.domain, node.op_type))]
        if node.op_type == "DynamicQuantizeLSTM":
            positions.append(DQ_LSTM_RECURRENT)
        for pos in positions:
            if pos is None or pos[0] >= len(node.input) or node.input[pos[0]] not in inits:
                continue
            weight = inits[node.input[pos[0]]]
            if weight.data_type != 3:  # int8
                continue
            zp_name = node.input[pos[1]] if pos[1] < len(node.input) else ""
            if zp_name and zp_name not in inits:
                continue
            for name, is_zp in ((weight.name, False), (zp_name, True)):
                if not name:
                    continue
                if name not in done:
                    values = numpy_helper.to_array(inits[name]).astype(np.int16) + 128
                    done[name] = f"{name}_as_uint8"
                    model.graph.initializer.append(numpy_helper.from_array(values.astype(np.uint8), done[name]))
                _set_input(node, pos[1] if is_zp else pos[0], done[name])
            if not zp_name:
                shared = "reencoded_zero_point_128"
                if shared not in done:
                    model.graph.initializer.append(numpy_helper.from_array(np.array(128, np.uint8), shared))
                    done[shared] = shared
                _set_input(node, pos[1], shared)
            count += 1
    return count


def _set_input(node, position: int, name: str) -> None:
    while len(node.input) <= position:
        node.input.append("")
    node.input[position] = name


def reference_outputs(path: Path, feeds: dict) -> tuple[dict, np.ndarray, str]:
    """({"optimized": ..., "unoptimized": ...}: onnxruntime's two ways of running the reference
    model, with and without its graph optimizations (which fuse Q/DQ pairs into integer kernels
    and so round differently), onnxruntime's output on the file as is, how the reference model
    was made)."""
    import onnx
    import onnxruntime as ort

    def run(model, level) -> np.ndarray:
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]).run(None, feeds)[0]

    levels = {"optimized": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
              "unoptimized": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}
    as_is = run(str(path), levels["optimized"])
    model, how = str(path), "onnxruntime"
    if saturating_host():
        proto = onnx.load(str(path))
        if reencode_int8_weights(proto):
            model, how = proto.SerializeToString(), "onnxruntime, int8 weights as uint8"
    return {k: run(model, level) for k, level in levels.items()}, as_is, how


def _input(model: FloatModel, batch: int, seed: int) -> np.ndarray:
    return np.random.RandomState(seed).randn(batch, *model.shape[1:]).astype(np.float32)


# -- one case ----------------------------------------------------------------------------------

@dataclass
class Result:
    model: str
    recipe: str
    stage: str = "not run"  # quantize-failed | compile-failed | run-failed | mismatch | match
    detail: str = ""
    ops: list = field(default_factory=list)  # the quantized ops in the file
    reference: str = ""
    worst_rel_l2: float = float("nan")
    onnxruntime_as_is_rel_l2: float = float("nan")  # ours against the unmodified onnxruntime
    onnxruntime_spread: float = float("nan")  # onnxruntime with against without its graph optimizations
    cases: list = field(default_factory=list)  # [batch, rel L2]
    compile_s: float = float("nan")


QUANTIZED_OPS = {"DynamicQuantizeLinear", "MatMulInteger", "ConvInteger", "QuantizeLinear", "DequantizeLinear",
                 "QLinearConv", "QLinearMatMul"}


def quantized_ops(path: Path) -> list[str]:
    import onnx

    nodes = onnx.load(str(path)).graph.node
    return sorted({(f"{n.domain}." if n.domain else "") + n.op_type for n in nodes
                   if n.op_type in QUANTIZED_OPS or n.domain == "com.microsoft"})


def run_one(model: FloatModel, recipe: str, target: str, work: Path) -> Result:
    result = Result(model.name, recipe)
    src, path = work / f"{model.name}.onnx", work / f"{model.name}-{recipe}.onnx"
    if not src.exists():
        export_float(model, src)
    try:
        RECIPES[recipe](model, src, path)
    except Exception as e:  # onnxruntime's tool itself: counted, not ours to fix
        result.stage, result.detail = "quantize-failed", f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
        return result
    result.ops = quantized_ops(path)
    artifact = work / f"{model.name}-{recipe}.ixa"
    t0 = time.monotonic()
    proc = _cli("compile", str(path), "--target", target, "-o", str(artifact), "-q", timeout=900)
    result.compile_s = time.monotonic() - t0
    if proc.returncode != 0:
        result.stage, result.detail = "compile-failed", _first_error(proc.stderr)
        return result
    as_is_errors, spreads = [], []
    for batch in BATCHES:
        feeds = {"x": _input(model, batch, SEED + batch)}
        refs, as_is, result.reference = reference_outputs(path, feeds)
        spreads.append(relative_l2(refs["unoptimized"], refs["optimized"]))
        np.savez(work / "in.npz", **feeds)
        proc = _cli("run", str(artifact), "--inputs", str(work / "in.npz"), "--outputs", str(work / "out.npz"),
                    timeout=300)
        if proc.returncode != 0:
            result.stage, result.detail = "run-failed", f"batch {batch}: {_first_error(proc.stderr)}"
            return result
        (got,) = dict(np.load(work / "out.npz")).values()
        result.cases.append([batch, min(relative_l2(got, ref) for ref in refs.values())])
        as_is_errors.append(relative_l2(got, as_is))
    result.worst_rel_l2 = max(c[1] for c in result.cases)
    result.onnxruntime_as_is_rel_l2 = max(as_is_errors)
    result.onnxruntime_spread = max(spreads)
    result.stage = "match" if result.worst_rel_l2 <= max(TOLERANCE, result.onnxruntime_spread) else "mismatch"
    return result


# -- the table ---------------------------------------------------------------------------------

def markdown(results: list[Result], target: str, host: str) -> str:
    lines = ["| model | recipe | quantized ops | stage | rel. L2 vs reference | reference | onnxruntime's spread | "
             "rel. L2 vs onnxruntime as is | compile s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        err = "" if math.isnan(r.worst_rel_l2) else f"{r.worst_rel_l2:.1e}"
        as_is, spread = ("" if math.isnan(v) else f"{v:.1e}" for v in (r.onnxruntime_as_is_rel_l2, r.onnxruntime_spread))
        secs = "" if math.isnan(r.compile_s) else f"{r.compile_s:.0f}"
        stage = r.stage + (f": {r.detail[:120]}" if r.detail else "")
        lines.append(f"| {r.model} | {r.recipe} | {', '.join(r.ops)} | {stage.replace('|', '/')} | {err} | "
                     f"{r.reference} | {spread} | {as_is} | {secs} |")
    matched = sum(r.stage == "match" for r in results)
    lines += ["", f"{matched} of {len(results)} quantized models compile with no flags for `{target}` and match "
                  f"onnxruntime with or without its graph optimizations (relative L2 <= {TOLERANCE:g} or "
                  f"onnxruntime's own spread, at batch {' and '.join(map(str, BATCHES))}). "
                  f"Host: {host}."]
    return "\n".join(lines)


def host_description() -> str:
    from inferx_compiler.targets import get_target

    features = get_target("cpu").features
    return (f"x86 features {', '.join(features)}; onnxruntime's u8 x s8 kernels "
            f"{'saturate' if saturating_host() else 'are exact'} here")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("command", nargs="?", default="run", choices=["run"])
    p.add_argument("--list", action="store_true", help="print the models and recipes and exit")
    p.add_argument("--models", help="comma-separated names (default: all)")
    p.add_argument("--recipes", help="comma-separated names (default: all)")
    p.add_argument("--target", default="cpu")
    p.add_argument("--out", type=Path, help="folder for results.md and results.json")
    args = p.parse_args(argv)
    if args.list:
        for m in MODELS:
            print(f"{m.name:10} {m.what}")
        print("recipes:", ", ".join(RECIPES))
        return 0
    models = [by_name()[n] for n in args.models.split(",")] if args.models else list(MODELS)
    recipes = args.recipes.split(",") if args.recipes else list(RECIPES)
    unknown = [r for r in recipes if r not in RECIPES]
    if unknown:
        p.error(f"unknown recipe(s) {unknown}; known: {', '.join(RECIPES)}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            for recipe in recipes:
                if model.name == "lstm" and recipe.startswith(("static", "nbits")):
                    continue  # onnxruntime's static and n-bit quantizers leave an LSTM in float
                work = Path(tmp) / model.name
                work.mkdir(exist_ok=True)
                r = run_one(model, recipe, args.target, work)
                results.append(r)
                err = "" if math.isnan(r.worst_rel_l2) else f" rel L2 {r.worst_rel_l2:.1e} ({r.reference})"
                print(f"{model.name:8} {recipe:26} {r.stage}{err} {r.detail[:160]}", flush=True)
    table = markdown(results, args.target, host_description())
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.md").write_text(table + "\n")
        (args.out / "results.json").write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1) + "\n")
    return 0 if all(r.stage == "match" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
