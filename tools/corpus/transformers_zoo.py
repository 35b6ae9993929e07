"""The transformers zoo: models exported from Hugging Face transformers the way users export them.

    python tools/corpus/transformers_zoo.py --list
    python tools/corpus/transformers_zoo.py run --sizes small --routes torchscript,dynamo \
        --out docs/coverage/transformers-zoo         # results.md, results.json
    python tools/corpus/transformers_zoo.py run --models bert,llama --sizes small

Each model is built from its transformers config class with seeded random weights (nothing is
downloaded), wrapped so that its tensors are positional, and exported with `torch.onnx.export`
along both routes users take: the TorchScript exporter (`dynamo=False`, `dynamic_axes`) and the
dynamo exporter (`dynamo=True`, `dynamic_shapes` with `torch.export.Dim`). Batch and sequence
are dynamic (vision and audio models: batch only, their length is fixed by the architecture).

Sizes: `small` (2 layers, width 64) and `default` (the config class's defaults; where those
exceed --max-params, e.g. Llama's 7B, the default width, heads and vocabulary with only as
many layers as fit, said in the table's `size` column).

Per model, size and route: `inferx-compile MODEL --target T` with no flags, then `inferx-run` at
two batch sizes and two lengths, each against onnxruntime on the same file and inputs. Pass:
relative L2 (||ours - ort|| / ||ort||, worst output) <= 1e-4 at fp32 for all four.
Token inputs: seeded ids; the attention mask pads the tail of all but the first sequence.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import _check, _cli, _error_class, _first_error  # noqa: E402  (the corpus's own helpers)

TOLERANCE = 1e-4  # relative L2 at fp32
ROUTES = ("torchscript", "dynamo")
SIZES = ("small", "default")
MAX_PARAMS = 450_000_000
SEED = 0

TEXT = ("input_ids", "attention_mask")


@dataclass(frozen=True)
class ZooModel:
    """One transformers architecture: how to configure, build and feed it."""

    name: str
    family: str  # text-encoder | vision | audio | decoder
    config: str  # transformers config class
    small: dict  # overrides of the config for the small size
    build: Callable  # config -> torch.nn.Module (eval mode applied by the caller)
    output: str  # the output field exported (last_hidden_state, logits, ...)
    inputs: tuple = TEXT
    lengths: dict = field(default_factory=lambda: {"small": (8, 13), "default": (16, 48)})
    batches: tuple = (1, 3)
    default: dict = field(default_factory=dict)  # overrides even at the default size

    def make_config(self, size: str):
        import transformers

        cls = getattr(transformers, self.config)
        if size == "small":
            return cls(**self.small)
        config = cls(**self.default)
        layers = _layers_that_fit(cls, self.default, self.build)
        if layers is not None:
            _set_layers(config, layers)
        return config


def _vision_small(**extra) -> dict:
    return dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, **extra)


def _text_small(**extra) -> dict:
    return _vision_small(vocab_size=1000, **extra)


def _transformers_class(name: str):
    import transformers

    return getattr(transformers, name)


def _model(class_name: str) -> Callable:
    return lambda config: _transformers_class(class_name)(config)


def _whisper_encoder(config):
    return _transformers_class("WhisperModel")(config).get_encoder()


def _bart_encoder(config):
    return _transformers_class("BartModel")(config).get_encoder()


ZOO: tuple[ZooModel, ...] = (
    ZooModel("bert", "text-encoder", "BertConfig", _text_small(), _model("BertModel"), "last_hidden_state"),
    ZooModel("roberta", "text-encoder", "RobertaConfig", _text_small(), _model("RobertaModel"),
             "last_hidden_state"),
    ZooModel("distilbert", "text-encoder", "DistilBertConfig",
             dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=1000),
             _model("DistilBertModel"), "last_hidden_state"),
    ZooModel("albert", "text-encoder", "AlbertConfig", _text_small(embedding_size=32),
             _model("AlbertModel"), "last_hidden_state"),
    ZooModel("electra", "text-encoder", "ElectraConfig", _text_small(embedding_size=32),
             _model("ElectraModel"), "last_hidden_state"),
    ZooModel("deberta-v2", "text-encoder", "DebertaV2Config", _text_small(), _model("DebertaV2Model"),
             "last_hidden_state"),
    ZooModel("vit", "vision", "ViTConfig", _vision_small(image_size=32, patch_size=8),
             _model("ViTModel"), "last_hidden_state", inputs=("pixel_values",)),
    ZooModel("deit", "vision", "DeiTConfig", _vision_small(image_size=32, patch_size=8),
             _model("DeiTModel"), "last_hidden_state", inputs=("pixel_values",)),
    ZooModel("swin", "vision", "SwinConfig",
             dict(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
             _model("SwinModel"), "last_hidden_state", inputs=("pixel_values",)),
    ZooModel("convnext", "vision", "ConvNextConfig",
             dict(image_size=32, hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
             _model("ConvNextModel"), "last_hidden_state", inputs=("pixel_values",)),
    ZooModel("clip-vision", "vision", "CLIPVisionConfig", _vision_small(image_size=32, patch_size=8), _model("CLIPVisionModel"), "last_hidden_state", inputs=("pixel_values",)),
    ZooModel("clip-text", "text-encoder", "CLIPTextConfig", _text_small(max_position_embeddings=32),
             _model("CLIPTextModel"), "last_hidden_state"),
    ZooModel("whisper-encoder", "audio", "WhisperConfig",
             dict(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128,
                  decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=128, num_mel_bins=16,
                  max_source_positions=32, vocab_size=1000, pad_token_id=1, bos_token_id=0,
                  eos_token_id=0, decoder_start_token_id=0),
             _whisper_encoder, "last_hidden_state", inputs=("input_features",)),
    ZooModel("t5-encoder", "text-encoder", "T5Config",
             dict(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=1000),
             _model("T5EncoderModel"), "last_hidden_state"),
    ZooModel("bart-encoder", "text-encoder", "BartConfig",
             dict(d_model=64, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=1000),
             _bart_encoder, "last_hidden_state"),
    ZooModel("gpt2", "decoder", "GPT2Config", dict(n_embd=64, n_layer=2, n_head=4, vocab_size=1000),
             _model("GPT2LMHeadModel"), "logits"),
    ZooModel("gpt-neo", "decoder", "GPTNeoConfig",
             dict(hidden_size=64, num_layers=2, num_heads=4, vocab_size=1000, window_size=8,
                  attention_types=[[["global", "local"], 1]]),
             _model("GPTNeoForCausalLM"), "logits"),
    ZooModel("llama", "decoder", "LlamaConfig", _text_small(num_key_value_heads=2),
             _model("LlamaForCausalLM"), "logits"),
    ZooModel("mistral", "decoder", "MistralConfig", _text_small(num_key_value_heads=2, sliding_window=8),
             _model("MistralForCausalLM"), "logits"),
    ZooModel("qwen2", "decoder", "Qwen2Config", _text_small(num_key_value_heads=2),
             _model("Qwen2ForCausalLM"), "logits"),
    ZooModel("phi", "decoder", "PhiConfig", _text_small(), _model("PhiForCausalLM"), "logits"),
)

for _m in ZOO:  # vision and audio: the architecture fixes the length
    if _m.family in ("vision", "audio"):
        object.__setattr__(_m, "lengths", {"small": (None,), "default": (None,)})


def by_name() -> dict[str, ZooModel]:
    return {m.name: m for m in ZOO}


# -- sizes ---------------------------------------------------------------------------------

def _set_layers(config, layers: int) -> None:
    config.num_hidden_layers = layers
    if hasattr(config, "attention_types"):  # GPT-Neo lists one attention kind per layer
        config.attention_types = [[["global"], layers]]
        config.attention_layers = ["global"] * layers


def _meta_params(cls, overrides: dict, build: Callable, layers: int | None) -> int:
    import torch

    config = cls(**overrides)
    if layers is not None:
        _set_layers(config, layers)
    with torch.device("meta"):
        model = build(config)
    return sum(p.numel() for p in model.parameters())


def _layers_that_fit(cls, overrides: dict, build: Callable) -> int | None:
    """None when the default config fits --max-params, else the most layers that do (>= 1)."""
    if _meta_params(cls, overrides, build, None) <= MAX_PARAMS:
        return None
    one, two = (_meta_params(cls, overrides, build, n) for n in (1, 2))
    per_layer, rest = two - one, 2 * one - two
    return max(1, (MAX_PARAMS - rest) // max(per_layer, 1))


def size_label(model: ZooModel, size: str) -> str:
    if size == "small":
        return "small"
    config = model.make_config("default")
    import transformers

    default_layers = getattr(transformers, model.config)(**model.default).num_hidden_layers
    layers = config.num_hidden_layers
    return "default" if layers == default_layers else f"default width, {layers} of {default_layers} layers"


# -- export --------------------------------------------------------------------------------

def _positional(model, names: tuple, output: str):
    import torch

    class Positional(torch.nn.Module):
        """The model with positional tensor arguments and one tensor out: how users export it."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            kwargs = dict(zip(names, tensors))
            if output == "logits":
                kwargs["use_cache"] = False
            return getattr(self.model(**kwargs, return_dict=True), output)

    return Positional().eval()


def example_feeds(model: ZooModel, config, batch: int, length: int | None, seed: int) -> dict:
    """Seeded inputs as numpy arrays (token ids, a right-padded mask, pixels or mel features)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in model.inputs:
        if name == "input_ids":
            feeds[name] = rng.integers(0, config.vocab_size, (batch, length)).astype(np.int64)
        elif name == "attention_mask":
            mask = np.ones((batch, length), np.int64)
            for b in range(1, batch):
                mask[b, length - min(b * 2, length - 1):] = 0
            feeds[name] = mask
        elif name == "pixel_values":
            feeds[name] = rng.standard_normal((batch, 3, config.image_size, config.image_size)).astype(np.float32)
        elif name == "input_features":
            frames = 2 * config.max_source_positions
            feeds[name] = rng.standard_normal((batch, config.num_mel_bins, frames)).astype(np.float32)
    return feeds


def export(model: ZooModel, size: str, route: str, path: Path) -> None:
    """Write MODEL at SIZE to PATH through ROUTE (the dynamo route may add PATH.data)."""
    import torch

    torch.manual_seed(SEED)
    config = model.make_config(size)
    module = _positional(model.build(config).eval(), model.inputs, model.output)
    length = None if model.lengths[size][0] is None else max(model.lengths[size]) - 3
    args = tuple(torch.from_numpy(a) for a in example_feeds(model, config, 2, length, SEED).values())
    names = list(model.inputs)
    dims = {0: "batch"} if length is None else {0: "batch", 1: "sequence"}
    with torch.no_grad():
        if route == "torchscript":
            torch.onnx.export(module, args, str(path), input_names=names, output_names=[model.output],
                              dynamic_axes={n: dims for n in names}, dynamo=False, opset_version=17)
        else:
            batch = torch.export.Dim("batch", min=1, max=64)
            seq = torch.export.Dim("sequence", min=2, max=_max_length(config))
            shapes = {n: ({0: batch} if length is None else {0: batch, 1: seq}) for n in names}
            program = torch.onnx.export(module, args, input_names=names, output_names=[model.output],
                                        dynamic_shapes={"tensors": tuple(shapes[n] for n in names)},
                                        dynamo=True)
            program.save(str(path), external_data=_weights_bytes(module) > 1_500_000_000)


def _max_length(config) -> int:
    for key in ("max_position_embeddings", "n_positions"):
        value = getattr(config, key, None)
        if value:
            return min(int(value), 4096)
    return 4096


def _weights_bytes(module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


# -- one run -------------------------------------------------------------------------------

@dataclass
class Result:
    model: str
    family: str
    size: str
    route: str
    stage: str = "not run"  # export-failed | reference-failed | compile-failed | run-failed | mismatch | match
    error_class: str = ""
    detail: str = ""
    worst_rel_l2: float = float("nan")
    cases: list = field(default_factory=list)  # [batch, length, rel L2]
    export_s: float = float("nan")
    compile_s: float = float("nan")
    params: int = 0


def relative_l2(got: np.ndarray, ref: np.ndarray) -> float:
    if got.shape != ref.shape:
        return float("inf")
    ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
    return float(np.linalg.norm(got64 - ref64) / max(np.linalg.norm(ref64), 1e-30))


def run_one(model: ZooModel, size: str, route: str, target: str, work: Path) -> Result:
    import torch

    result = Result(model.name, model.family, size_label(model, size), route)
    path = work / f"{model.name}-{size}-{route}.onnx"
    t0 = time.monotonic()
    try:
        export(model, size, route, path)
    except Exception as e:  # the exporter's own failure: not ours to fix, but counted
        result.stage, result.error_class = "export-failed", f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
        return result
    result.export_s = time.monotonic() - t0
    config = model.make_config(size)
    with torch.device("meta"):
        result.params = sum(p.numel() for p in model.build(config).parameters())
    artifact = work / "model.ixa"
    t0 = time.monotonic()
    try:
        proc = _cli("compile", str(path), "--target", target, "-o", str(artifact), "-q", timeout=1800)
    except subprocess.TimeoutExpired:
        result.stage, result.error_class = "compile-failed", "timeout after 1800 s"
        return result
    result.compile_s = time.monotonic() - t0
    if proc.returncode != 0:
        result.stage, result.detail = "compile-failed", _first_error(proc.stderr)
        result.error_class = _error_class(_check(path, target, {}), result.detail)
        return result
    _compare(result, model, config, size, path, artifact, work)
    return result


def _compare(result: Result, model: ZooModel, config, size: str, path: Path, artifact: Path, work: Path) -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch in model.batches:
        for length in model.lengths[size]:
            feeds = example_feeds(model, config, batch, length, SEED + batch)
            try:
                (ref,) = session.run(None, feeds)
            except Exception as e:  # the exported file itself does not take these shapes
                result.stage = "reference-failed"
                result.error_class = f"onnxruntime at batch {batch}, length {length}: {str(e).splitlines()[0][:100]}"
                return
            np.savez(work / "in.npz", **feeds)
            proc = _cli("run", str(artifact), "--inputs", str(work / "in.npz"), "--outputs", str(work / "out.npz"),
                        timeout=900)
            if proc.returncode != 0:
                result.stage, result.detail = "run-failed", _first_error(proc.stderr)
                result.error_class = f"batch {batch}, length {length}: {result.detail[:100]}"
                return
            (got,) = dict(np.load(work / "out.npz")).values()
            result.cases.append([batch, length, relative_l2(got, ref)])
    result.worst_rel_l2 = max(c[2] for c in result.cases)
    result.stage = "match" if result.worst_rel_l2 <= TOLERANCE else "mismatch"
    if result.stage == "mismatch":
        result.error_class = "numerics"


# -- the table -----------------------------------------------------------------------------

def markdown(results: list[Result], target: str) -> str:
    lines = ["| model | family | size | route | stage | error class | worst rel. L2 | export s | compile s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        err = "" if math.isnan(r.worst_rel_l2) else f"{r.worst_rel_l2:.1e}"
        secs = ["" if math.isnan(s) else f"{s:.0f}" for s in (r.export_s, r.compile_s)]
        lines.append(f"| {r.model} | {r.family} | {r.size} | {r.route} | {r.stage} | "
                     f"{r.error_class.replace('|', '/')} | {err} | {secs[0]} | {secs[1]} |")
    lines += ["", "| family | route | match / total |", "| --- | --- | --- |"]
    for family in sorted({r.family for r in results}):
        for route in ROUTES:
            group = [r for r in results if r.family == family and r.route == route]
            if group:
                lines.append(f"| {family} | {route} | {sum(r.stage == 'match' for r in group)} / {len(group)} |")
    matched = sum(r.stage == "match" for r in results)
    lines += ["", f"{matched} of {len(results)} exports compile with no flags for `{target}` and match onnxruntime "
                  f"(relative L2 <= {TOLERANCE:g} at two batch sizes and two lengths)."]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("command", nargs="?", default="run", choices=["run"])
    p.add_argument("--list", action="store_true", help="print the models and exit")
    p.add_argument("--models", help="comma-separated names (default: all)")
    p.add_argument("--sizes", default="small", help=f"comma-separated from {','.join(SIZES)}")
    p.add_argument("--routes", default=",".join(ROUTES), help=f"comma-separated from {','.join(ROUTES)}")
    p.add_argument("--target", default="cpu")
    p.add_argument("--out", type=Path, help="write results.md and results.json into this folder")
    args = p.parse_args(argv)
    if args.list:
        for m in ZOO:
            print(f"{m.name:16s} {m.family:13s} {m.config:18s} inputs {','.join(m.inputs)}")
        return 0
    zoo = by_name()
    names = args.models.split(",") if args.models else list(zoo)
    sizes, routes = args.sizes.split(","), args.routes.split(",")
    for what, given, known in (("model", names, zoo), ("size", sizes, SIZES), ("route", routes, ROUTES)):
        unknown = sorted(set(given) - set(known))
        if unknown:
            p.error(f"unknown {what}(s) {', '.join(unknown)}; known: {', '.join(known)}")
    results = []
    runs = [(zoo[n], s, r) for s in sizes for n in names for r in routes]
    with tempfile.TemporaryDirectory(prefix="inferx-tzoo-") as tmp:
        for i, (model, size, route) in enumerate(runs, 1):
            print(f"[{i}/{len(runs)}] {model.name} {size} {route}", file=sys.stderr, flush=True)
            work = Path(tmp) / f"{i}"
            work.mkdir()
            result = run_one(model, size, route, args.target, work)
            print(f"    {result.stage} {result.error_class} "
                  f"{'' if math.isnan(result.worst_rel_l2) else f'{result.worst_rel_l2:.1e}'}", file=sys.stderr, flush=True)
            results.append(result)
            subprocess.run(["rm", "-rf", str(work)], check=False)
    table = markdown(results, args.target)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.md").write_text(table + "\n")
        (args.out / "results.json").write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
