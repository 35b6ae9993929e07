"""Calibration: measure what lowering each layer costs in accuracy, and pick precisions by it.

Data (`--calibration DATA.npz|DIR`): arrays keyed by ONNX input name, batched along the first
dim; a directory's .npz files are read in name order and joined. The last quarter of the samples
(at least one, when there are two or more) is held out: the plan is searched on the rest and
checked on them.

Measurement runs the model in onnxruntime with each lowered layer *emulated* as the compiled code
computes it (the same numpy quantizers, quantization.py): its weight replaced by the
fake-quantized weight (int8 per column, int4 in groups, f16/bf16 rounding), its activation
rounded as the compiled code rounds it (int8 per row, asymmetric, for the CPU's integer layers, f16 for the
GPU's weight-only ones; f16/bf16 for those).
One onnxruntime session serves every measurement: weights are graph inputs, and each layer's
activation rounding is blended in by a 0/1 gate input. Error is the relative L2 of all float
outputs against the fp32 model's.

    statistics             per layer, its input activations over the calibration data (largest
                           magnitude, RMS, dominant-channel ratio), beside the weight statistics
                           of precision_plan.model_layers (max |w| / std)

    sensitivity(layer, p)  the model's error with that layer alone at p
    auto                   every layer at its cheapest candidate whose sensitivity alone is within
                           budget; while the error (calibration and held-out samples) is over
                           budget, the layer with the largest sensitivity at its current
                           precision moves one step up
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from inferx_compiler.precision import quantization
from inferx_compiler.precision.precision_plan import INTEGER, Layer, PrecisionError, PrecisionPlan, candidates, form_for, layer_candidates
from inferx_compiler.targets import Target

CHUNK_ROWS = 8  # samples per onnxruntime call


# -- data ----------------------------------------------------------------------------------------

def load_calibration(path: str, inputs) -> dict[str, np.ndarray]:
    """The calibration arrays, checked against the model's inputs (names, dtypes, shapes)."""
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*.npz")))
        if not files:
            raise PrecisionError(f"--calibration {path}: the directory holds no .npz files")
    elif os.path.isfile(path):
        files = [path]
    else:
        raise PrecisionError(f"--calibration {path}: no such file or directory")
    parts = [_read_npz(f, inputs) for f in files]
    return {spec.name: np.concatenate([p[spec.name] for p in parts]) for spec in inputs}


def _read_npz(path: str, inputs) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError) as e:
        raise PrecisionError(f"--calibration {path}: not a readable .npz file ({e})") from None
    names = [s.name for s in inputs]
    missing = [n for n in names if n not in arrays]
    extra = [k for k in arrays if k not in names]
    if missing or extra:
        raise PrecisionError(f"--calibration {path}: arrays must be keyed by the model's input names "
                             f"({', '.join(names)}); missing: {', '.join(missing) or '-'}; "
                             f"unknown: {', '.join(extra) or '-'}")
    rows = None
    for spec in inputs:
        a = arrays[spec.name]
        want = spec.dtype
        if a.dtype.name != want:
            raise PrecisionError(f"--calibration {path}: input '{spec.name}' is {a.dtype}, the model "
                                 f"takes {want}")
        shape = list(spec.shape)
        if a.ndim != len(shape) or any(isinstance(d, int) and d != s for d, s in zip(shape[1:], a.shape[1:])):
            raise PrecisionError(f"--calibration {path}: input '{spec.name}' has shape {list(a.shape)}, "
                                 f"the model takes {_shape_text(shape)} (samples along the first dim)")
        if rows is not None and a.shape[0] != rows:
            raise PrecisionError(f"--calibration {path}: inputs have different sample counts "
                                 f"({rows} and {a.shape[0]} for '{spec.name}')")
        rows = a.shape[0]
    if not rows:
        raise PrecisionError(f"--calibration {path}: holds no samples")
    return arrays


def _shape_text(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def split_held_out(data: dict[str, np.ndarray]) -> tuple[dict, dict]:
    n = len(next(iter(data.values())))
    held = max(1, n // 4) if n >= 2 else 0
    if held == 0:
        return data, data
    return ({k: v[:n - held] for k, v in data.items()}, {k: v[n - held:] for k, v in data.items()})


# -- emulation -------------------------------------------------------------------------------------

def emulated_weight(w: np.ndarray, precision: str, layer: Layer, group_size: int,
                    gpu: bool = False, target: Optional[Target] = None) -> np.ndarray:
    """The weight as the compiled layer computes with it. `target`: the build's CPU target, which
    decides whether int4 runs on our u8s4 kernel (group-scaled) or requantized to int8."""
    if precision == "fp32":
        return w
    if precision == "fp16":
        return w.astype(np.float16).astype(np.float32)
    if precision == "bf16":
        return _round_bf16(w)
    scheme = quantization.WeightScheme(precision, group_size if precision == "int4" else 0, layer.transposed, gpu)
    groups = False
    if precision == "int4" and not gpu and target is not None:
        from inferx_compiler.kernels import cpu_objects

        k, n = (w.shape[1], w.shape[0]) if layer.transposed else w.shape
        groups = cpu_objects.vnni_kernel_declined(target, k, n, group_size) is None
    return quantization.fake_quantize(w, scheme, int4_groups=groups)


def _round_bf16(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def _layer_weight(index: int) -> str:
    return f"__inferx_weight_{index}"


def _gate(kind: str, index: int) -> str:
    return f"__inferx_gate_{kind}_{index}"


def emulation_model(proto, layers: list[Layer], opset: int, kinds: set[str]):
    """A copy of the prepared model (weights as inputs) with, before each layer's activation
    input, `x + gate * (round(x) - x)` for each rounding kind ("int8" per row, "fp16", "bf16"),
    and each layer reading its weight through an input of its own (`_layer_weight(i)`): a weight
    tied to other uses (GPT-2's embedding table is also its lm_head) is lowered only where the
    layer reads it, as in the compiled code."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.ModelProto()
    model.CopyFrom(proto)
    graph = model.graph
    by_name = {n.name: n for n in graph.node}
    new_nodes = {}
    consts = [helper.make_tensor(name, TensorProto.FLOAT, [], [value]) for name, value in
              (("__inferx_tiny", 1e-30), ("__inferx_0", 0.0), ("__inferx_127", 127.0),
               ("__inferx_128", 128.0), ("__inferx_m128", -128.0), ("__inferx_255", 255.0))]
    graph.initializer.extend(consts)
    for i, layer in enumerate(layers):
        node = by_name[layer.layer]
        x = node.input[0]
        nodes, current = [], x
        for kind in sorted(kinds):
            rounded = _rounding_nodes(kind, x, f"__inferx_{i}_{kind}", opset, nodes)
            gate = _gate(kind, i)
            graph.input.append(helper.make_tensor_value_info(gate, TensorProto.FLOAT, []))
            p = f"__inferx_{i}_{kind}_mix"
            nodes += [helper.make_node("Sub", [rounded, x], [p + "_d"]),
                      helper.make_node("Mul", [p + "_d", gate], [p + "_g"]),
                      helper.make_node("Add", [current, p + "_g"], [p])]
            current = p
        node.input[0] = current
        typed = next(vi for vi in graph.input if vi.name == layer.weight)
        alias = onnx.ValueInfoProto()
        alias.CopyFrom(typed)
        alias.name = _layer_weight(i)
        graph.input.append(alias)
        node.input[1] = alias.name
        new_nodes[node.name] = nodes
    ordered = []
    for node in graph.node:
        ordered += new_nodes.get(node.name, [])
        ordered.append(node)
    del graph.node[:]
    graph.node.extend(ordered)
    return model


def _rounding_nodes(kind: str, x: str, p: str, opset: int, nodes: list) -> str:
    from onnx import TensorProto, helper

    if kind in ("fp16", "bf16"):
        to = TensorProto.FLOAT16 if kind == "fp16" else TensorProto.BFLOAT16
        nodes += [helper.make_node("Cast", [x], [p + "_lo"], to=to),
                  helper.make_node("Cast", [p + "_lo"], [p], to=TensorProto.FLOAT)]
        return p
    # int8 per row, asymmetric, as inferx-quantize-contractions computes it on CPUs:
    # step = max(max(x, 0) - min(x, 0), tiny) / 255, zp = round(-min / step) - 128,
    # q = clamp(round(x / step) + zp, -128, 127), x' = (q - zp) * step
    if opset >= 18:
        nodes.append(helper.make_node("Constant", [], [p + "_axes"],
                                      value=helper.make_tensor(p + "_axes_v", TensorProto.INT64, [1], [-1])))
        reduce = lambda op, src, dst: helper.make_node(op, [src, p + "_axes"], [dst], keepdims=1)  # noqa: E731
    else:
        reduce = lambda op, src, dst: helper.make_node(op, [src], [dst], axes=[-1], keepdims=1)  # noqa: E731
    nodes += [reduce("ReduceMax", x, p + "_hi0"), reduce("ReduceMin", x, p + "_lo0"),
              helper.make_node("Max", [p + "_hi0", "__inferx_0"], [p + "_hi"]),
              helper.make_node("Min", [p + "_lo0", "__inferx_0"], [p + "_lo"]),
              helper.make_node("Sub", [p + "_hi", p + "_lo"], [p + "_w"]),
              helper.make_node("Max", [p + "_w", "__inferx_tiny"], [p + "_ws"]),
              helper.make_node("Div", [p + "_ws", "__inferx_255"], [p + "_step"]),
              helper.make_node("Neg", [p + "_lo"], [p + "_nlo"]),
              helper.make_node("Div", [p + "_nlo", p + "_step"], [p + "_z0"]),
              helper.make_node("Round", [p + "_z0"], [p + "_z1"]),
              helper.make_node("Sub", [p + "_z1", "__inferx_128"], [p + "_zp"]),
              helper.make_node("Div", [x, p + "_step"], [p + "_xs"]),
              helper.make_node("Round", [p + "_xs"], [p + "_xr"]),
              helper.make_node("Add", [p + "_xr", p + "_zp"], [p + "_q0"]),
              helper.make_node("Max", [p + "_q0", "__inferx_m128"], [p + "_q1"]),
              helper.make_node("Min", [p + "_q1", "__inferx_127"], [p + "_q"]),
              helper.make_node("Sub", [p + "_q", p + "_zp"], [p + "_c"]),
              helper.make_node("Mul", [p + "_c", p + "_step"], [p])]
    return p


def activation_statistics(prepared, layers: list[Layer], weights, data) -> None:
    """Each layer's input activations over the calibration data, from the fp32 model: the largest
    magnitude, the RMS, and how far the largest channel stands out (largest channel max over the
    median channel max): a layer whose input has one dominant channel loses the other channels
    when its activations are quantized per row."""
    import onnx
    import onnxruntime as ort

    model = onnx.ModelProto()
    model.CopyFrom(prepared.proto)
    graph = model.graph
    typed = {vi.name: vi for vi in list(graph.value_info) + list(graph.input) + list(graph.output)}
    by_name = {n.name: n for n in graph.node}
    wanted = []
    for layer in layers:
        name = by_name[layer.layer].input[0]
        if name in typed and name not in wanted:
            wanted.append(name)
            if name not in {o.name for o in graph.output}:
                graph.output.append(typed[name])
    if not wanted:
        return
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    n = len(next(iter(data.values())))
    stats = {w: [0.0, 0.0, 0, None] for w in wanted}  # absmax, sum of squares, count, channel maxima
    for start in range(0, n, CHUNK_ROWS):
        feeds = dict(weights)
        feeds.update({k: v[start:start + CHUNK_ROWS] for k, v in data.items()})
        for name, value in zip(wanted, session.run(wanted, feeds)):
            a = np.abs(np.asarray(value, np.float64))
            st = stats[name]
            st[0] = max(st[0], float(a.max()) if a.size else 0.0)
            st[1] += float(np.sum(a * a))
            st[2] += a.size
            channel = a.reshape(-1, a.shape[-1]).max(axis=0) if a.ndim else a.reshape(1)
            st[3] = channel if st[3] is None else np.maximum(st[3], channel)
    for layer in layers:
        st = stats.get(by_name[layer.layer].input[0])
        if st is None or not st[2]:
            continue
        rms = float(np.sqrt(st[1] / st[2]))
        median = float(np.median(st[3])) or 1e-30
        layer.activation = {"absmax": round(st[0], 6), "rms": round(rms, 6),
                            "channel_outlier": round(float(st[3].max()) / median, 3)}


def _activation_kind(precision: str, gpu: bool = False) -> Optional[str]:
    """How the compiled layer rounds its activations: int8 per row (CPU integer layers), f16
    (GPU weight-only integer layers and fp16), bf16, or not at all (fp32)."""
    if precision in INTEGER:
        return "fp16" if gpu else "int8"
    return precision if precision in ("fp16", "bf16") else None


@dataclass
class Emulator:
    """One onnxruntime session; `error(assignment)` runs the model with layers lowered as assigned."""

    session: object
    layers: list[Layer]
    weights: dict[str, np.ndarray]
    kinds: set
    group_size: int
    data: dict[str, np.ndarray]
    held_out: dict[str, np.ndarray]
    reference: list
    reference_held: list
    cache: dict
    gpu: bool = False  # integer layers in the GPU's weight-only form
    target: Optional[Target] = None  # the build's target (CPU int4: our kernel's form or not)

    @classmethod
    def build(cls, prepared, layers, weights, kinds, group_size, data, held_out, gpu: bool = False,
              target: Optional[Target] = None):
        import onnxruntime as ort

        model = emulation_model(prepared.proto, layers, prepared.opset, kinds)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        e = cls(session, layers, weights, kinds, group_size, data, held_out, [], [], {}, gpu, target)
        fp32 = {l.layer: "fp32" for l in layers}
        e.reference = e.outputs(fp32, data)
        e.reference_held = e.outputs(fp32, held_out)
        return e

    def _weights_for(self, assignment: dict[str, str]) -> dict[str, np.ndarray]:
        feeds = dict(self.weights)
        for i, layer in enumerate(self.layers):
            p = assignment.get(layer.layer, "fp32")
            feeds[_layer_weight(i)] = self.weights[layer.weight]
            if p != "fp32":
                key = (layer.weight, p, layer.transposed)
                if key not in self.cache:
                    self.cache[key] = emulated_weight(self.weights[layer.weight], p, layer, self.group_size,
                                                      self.gpu, self.target)
                feeds[_layer_weight(i)] = self.cache[key]
            for kind in self.kinds:
                feeds[_gate(kind, i)] = np.array(1.0 if _activation_kind(p, self.gpu) == kind else 0.0,
                                                 np.float32)
        return feeds

    def outputs(self, assignment, data) -> list:
        weights = self._weights_for(assignment)
        n = len(next(iter(data.values())))
        outs = []
        for start in range(0, n, CHUNK_ROWS):
            feeds = dict(weights)
            feeds.update({k: v[start:start + CHUNK_ROWS] for k, v in data.items()})
            outs.append([np.asarray(o, np.float64) for o in self.session.run(None, feeds)
                         if np.issubdtype(np.asarray(o).dtype, np.floating)])
        return outs

    def error(self, assignment: dict[str, str], held_out: bool = False) -> float:
        reference = self.reference_held if held_out else self.reference
        got = self.outputs(assignment, self.held_out if held_out else self.data)
        return relative_l2(reference, got)


def relative_l2(reference: list, got: list) -> float:
    num = sum(float(np.sum((g - r) ** 2)) for rc, gc in zip(reference, got) for r, g in zip(rc, gc))
    den = sum(float(np.sum(r ** 2)) for rc in reference for r in rc)
    return float(np.sqrt(num / den)) if den > 0 else float(np.sqrt(num))


# -- decisions ------------------------------------------------------------------------------------

def measure_sensitivity(emulator: Emulator, options_of: Callable[[Layer], list],
                        progress: Callable[[str], None]) -> None:
    """layer.sensitivity[p] for every layer and every candidate p in options_of(layer)."""
    total = sum(1 for l in emulator.layers for p in options_of(l) if p != "fp32")
    done = 0
    for layer in emulator.layers:
        for p in options_of(layer):
            if p == "fp32":
                continue
            done += 1
            fitted = form_for(p, layer, emulator.group_size)
            if fitted != p:
                continue
            layer.sensitivity[p] = emulator.error({layer.layer: p})
            progress(f"sensitivity {done}/{total}: {layer.layer} at {p}: {layer.sensitivity[p]:.2e}")


def search(emulator: Emulator, options_of: Callable[[Layer], list], budget: float,
           progress: Callable[[str], None]) -> tuple[dict[str, str], float, float]:
    """The cheapest assignment within budget (greedy promotion); returns it and its errors.
    options_of(layer): that layer's candidates, cheapest first."""

    def ladder(layer):
        """The layer's candidates, cheapest first: those it has a form for and whose error alone
        is within budget (a layer over budget on its own cannot be part of a plan within it)."""
        return [p for p in options_of(layer) if form_for(p, layer, emulator.group_size) == p
                and (p == "fp32" or layer.sensitivity.get(p, 0.0) <= budget)] or ["fp32"]

    assignment = {l.layer: ladder(l)[0] for l in emulator.layers}
    while True:
        err = emulator.error(assignment)
        held = emulator.error(assignment, held_out=True)
        lowered = [l for l in emulator.layers if assignment[l.layer] != "fp32"]
        progress(f"plan with {len(lowered)} lowered layers: error {err:.2e} (held-out {held:.2e}), "
                 f"budget {budget:.2e}")
        if max(err, held) <= budget or not lowered:
            return assignment, err, held
        worst = max(lowered, key=lambda l: l.sensitivity.get(assignment[l.layer], 0.0))
        steps = ladder(worst)
        assignment[worst.layer] = steps[steps.index(assignment[worst.layer]) + 1]


def calibrated_plan(plan: PrecisionPlan, prepared, weights, target: Target, data, budget: float,
                    log, fixed: Optional[str] = None) -> PrecisionPlan:
    """Measure sensitivities; for `auto` choose precisions within budget; for a fixed mode check
    it against the budget (a clear error naming the layers that would have to stay higher)."""
    options = candidates(target) if fixed is None else [fixed] + (["int8"] if fixed == "int4" else []) + ["fp32"]
    # auto: each layer's own candidates (on CPUs no int4 for token rows); a fixed mode: its own
    options_of = (lambda layer: layer_candidates(target, layer)) if fixed is None else (lambda layer: options)
    calibration, held_out = split_held_out(data)
    gpu = target.backend == "cuda"
    kinds = {k for k in (_activation_kind(p, gpu) for p in options) if k}
    n_cal, n_held = len(next(iter(calibration.values()))), len(next(iter(held_out.values())))
    log.step(f"calibrating on {n_cal} samples ({n_held} held out); emulating {len(plan.layers)} layers "
             f"at {', '.join(p for p in options if p != 'fp32')} in onnxruntime")
    activation_statistics(prepared, plan.layers, weights, calibration)
    emulator = Emulator.build(prepared, plan.layers, weights, kinds, plan.group_size, calibration, held_out, gpu,
                              target)
    measure_sensitivity(emulator, options_of, log.step)
    if fixed is not None:
        assignment = {l.layer: l.precision for l in plan.layers}
        err, held = emulator.error(assignment), emulator.error(assignment, held_out=True)
        if budget is not None and max(err, held) > budget:
            keep, err2, held2 = search(emulator, options_of, budget, lambda m: None)
            higher = [f"{k} ({v})" for k, v in keep.items() if v != assignment[k]]
            raise PrecisionError(
                f"--precision {fixed} misses --accuracy-budget {budget:g}: error {max(err, held):.3g} on the "
                f"calibration data. Within budget ({max(err2, held2):.3g}) these layers would have to stay "
                f"higher: {', '.join(higher[:12])}{' ...' if len(higher) > 12 else ''}; "
                f"use --precision auto to build that plan")
    else:
        assignment, err, held = search(emulator, options_of, budget, log.step)
        if max(err, held) > budget:
            raise PrecisionError(f"--accuracy-budget {budget:g} cannot be met: error {max(err, held):.3g} "
                                 f"with every layer at fp32")
    for layer in plan.layers:
        layer.precision = assignment[layer.layer]
    plan.accuracy_budget = budget
    plan.calibration = {"samples": n_cal, "held_out": n_held, "error": round(err, 6),
                        "held_out_error": round(held, 6), "method": "onnxruntime emulation"}
    if n_held == n_cal and n_cal == 1:
        plan.notes.append("one calibration sample: the held-out check reuses it")
    return plan
