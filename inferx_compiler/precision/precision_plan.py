"""The precision plan: which precision each layer of a model computes in, and why.

A layer is an ONNX contraction with a stored weight (MatMul or Gemm whose right-hand input is an
initializer; Conv is listed and stays fp32 in integer modes). The plan is decided once per build:

    fp32 / fp16 / bf16   one precision everywhere (fp16/bf16: f16/bf16 inputs, f32 accumulation)
    int8 / int4          every MatMul/Gemm layer; int8: weights per output column, int4: in groups
                         of --group-size along K; activations quantized per row at run time
    auto                 per layer, the cheapest precision the target computes well such that the
                         model's error stays within --accuracy-budget (calibration.py measures it);
                         without calibration data, the weight-statistics rule below
    --precision-plan F   a plan written by an earlier build (--emit-plan), replayed as it is

The plan is JSON (PLAN_FORMAT); it goes into the artifact's manifest and, replayed, gives a
byte-identical artifact. The compiler consumes it as the module attribute `inferx.precision_plan`
(layer -> IR precision), read by `inferx-annotate-precision{from-plan=true}`.

Rule without calibration data (`auto`, a warning says so): a layer whose weight has outliers
(max |w| over the standard deviation of w above OUTLIER_RATIO_FP32) stays fp32, above
OUTLIER_RATIO_INT8 gets int8, otherwise the cheapest candidate; the first and the last layer
never go below int8 (they see the raw input and produce the output). The candidates are the
target's (`candidates`), per layer (`layer_candidates`: on CPUs, int4 only where the rows are
not tokens).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Optional

import numpy as np

from inferx_compiler.errors import InferXError
from inferx_compiler.targets import Target

PLAN_FORMAT = "inferx-precision-plan/1"
# user-facing precision -> the IR's (inferx.precision values)
IR_PRECISION = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", "int8": "i8", "int4": "i4"}
WEIGHT_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8, "int4": 4}
INTEGER = ("int8", "int4")
OUTLIER_RATIO_FP32 = 60.0
OUTLIER_RATIO_INT8 = 20.0
LAYER_OPS = ("MatMul", "Gemm", "Conv")


class PrecisionError(InferXError):
    """A precision request this build cannot honour (mode, target, plan file, budget)."""


@dataclass
class Layer:
    layer: str  # ONNX node name
    op: str  # ONNX op type
    weight: str  # initializer name (parameter key)
    shape: list[int]  # the weight's shape
    precision: str = "fp32"
    transposed: bool = False  # Gemm transB=1: the layer reads W^T
    sensitivity: dict = field(default_factory=dict)  # precision -> model error with this layer alone lowered
    outlier_ratio: float = 0.0  # max |w| / std(w)
    activation: dict = field(default_factory=dict)  # input statistics from calibration (calibration.py)
    # the input has a sequence dim (rank 3 or more: rows are batch x tokens): a compute-bound
    # product, where the CPU's int4 kernel is slower than its int8 one
    token_rows: bool = False

    def bytes_at(self, precision: str, group_size: int) -> int:
        elems = int(np.prod(self.shape))
        n = self.shape[0] if self.transposed else self.shape[-1]
        if precision == "int8":
            return elems + 4 * n
        if precision == "int4":
            return (elems + 1) // 2 + 4 * (elems // max(group_size, 1))
        return elems * WEIGHT_BITS[precision] // 8

    @property
    def quantizable(self) -> bool:
        return self.op in ("MatMul", "Gemm") and len(self.shape) == 2


@dataclass
class PrecisionPlan:
    mode: str
    target: str
    group_size: int = 128
    layers: list[Layer] = field(default_factory=list)
    accuracy_budget: Optional[float] = None
    calibration: Optional[dict] = None  # samples, held-out samples, measured errors
    notes: list[str] = field(default_factory=list)

    def ir_plan(self) -> dict[str, str]:
        """layer -> IR precision, for the module attribute."""
        return {l.layer: IR_PRECISION[l.precision] for l in self.layers}

    def precisions(self) -> set[str]:
        return {l.precision for l in self.layers}

    def to_json(self) -> dict:
        return {"format": PLAN_FORMAT, "mode": self.mode, "target": self.target,
                "group_size": self.group_size, "accuracy_budget": self.accuracy_budget,
                "calibration": self.calibration, "notes": list(self.notes),
                "layers": [_layer_json(l, self.group_size) for l in self.layers]}

    def table(self) -> str:
        return format_table(self)


def stored_sensitivity(value: float) -> float:
    """A measured sensitivity as the plan file stores it (4 significant digits)."""
    return float(f"{value:.4g}")


def _layer_json(layer: Layer, group_size: int) -> dict:
    d = asdict(layer)
    d["outlier_ratio"] = round(float(layer.outlier_ratio), 3)
    d["sensitivity"] = {k: stored_sensitivity(v) for k, v in sorted(layer.sensitivity.items())}
    d["bytes_fp32"] = layer.bytes_at("fp32", group_size)
    d["bytes"] = layer.bytes_at(layer.precision, group_size)
    return d


# -- layers of a model ---------------------------------------------------------------------------

def model_layers(proto, weights: dict[str, np.ndarray]) -> list[Layer]:
    """The contractions with a stored weight, in graph order, with their weight statistics."""
    layers = []
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim)
             for vi in list(proto.graph.input) + list(proto.graph.value_info) if vi.type.HasField("tensor_type")}
    for node in proto.graph.node:
        if node.op_type not in LAYER_OPS or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        weight = node.input[1]
        if weight not in weights:
            continue
        attrs = {a.name: a for a in node.attribute}
        if node.op_type == "Gemm" and attrs.get("transA") is not None and attrs["transA"].i:
            continue
        w = weights[weight]
        transposed = node.op_type == "Gemm" and attrs.get("transB") is not None and bool(attrs["transB"].i)
        std = float(np.std(w)) or 1.0
        layers.append(Layer(node.name, node.op_type, weight, list(w.shape), transposed=transposed,
                            outlier_ratio=float(np.abs(w).max()) / std,
                            token_rows=ranks.get(node.input[0], 2) >= 3))
    return layers


# -- what the target computes well --------------------------------------------------------------

def candidates(target: Target) -> list[str]:
    """Precisions `auto` may choose on this target, cheapest first (fp32 always last)."""
    if target.backend == "llvm-cpu":
        low = ["int4", "int8"]
        if "bf16" in target.native_dtypes:
            low.append("bf16")
        if "f16" in target.native_dtypes and target.arch not in ("generic",):
            low.append("fp16")
        return low + ["fp32"]
    if target.backend == "cuda":
        return ["fp16", "fp32"]
    return ["fp32"]


def layer_candidates(target: Target, layer: Layer) -> list[str]:
    """candidates(target) for one layer: on CPUs a layer whose rows are tokens leaves int4 out (a
    compute-bound product: the u8 x s4 kernel sums per group and ran BERT-base slower than int8,
    docs/levers/cpu-precision-kernels.md; int4's gain, bytes, matters where the weight is
    streamed, as in an MLP's batch rows)."""
    options = candidates(target)
    if target.backend == "llvm-cpu" and layer.token_rows:
        return [p for p in options if p != "int4"]
    return options


def check_precision(precision: str, target: Target) -> None:
    """A precision the target cannot run is refused before any work."""
    if precision == "fp8":
        raise PrecisionError(
            "--precision fp8: not built. IREE 3.13 does not lower FP8 (f8E4M3FN) to NVPTX "
            "(iree-org/iree#24625) and no CPU target computes it; use fp16 or bf16 on GPUs")
    if precision in INTEGER and target.backend not in ("llvm-cpu", "cuda"):
        raise PrecisionError(
            f"--precision {precision} on target '{target.name}': no executable backend to build "
            f"integer layers for ({target.route_note})")


# -- plans ----------------------------------------------------------------------------------------

def uniform_plan(mode: str, target: Target, layers: list[Layer], group_size: int) -> PrecisionPlan:
    plan = PrecisionPlan(mode, target.name, group_size, layers)
    for layer in layers:
        layer.precision = form_for(mode, layer, group_size)
    skipped = [l.layer for l in layers if l.precision != mode]
    if skipped and mode != "fp32":
        plan.notes.append(f"kept fp32 (no {mode} form for them): " + ", ".join(skipped[:10])
                          + (" ..." if len(skipped) > 10 else ""))
    return plan


def form_for(precision: str, layer: Layer, group_size: int) -> str:
    """The precision itself, or the nearest this layer has a form for: fp32 for integer precisions
    on a non-quantizable layer (Conv), int8 for int4 groups that do not divide K."""
    if precision in INTEGER and not layer.quantizable:
        return "fp32"
    k = layer.shape[1] if layer.transposed else layer.shape[0]
    if precision == "int4" and k % group_size:
        return "int8"
    return precision


def rule_plan(target: Target, layers: list[Layer], group_size: int) -> PrecisionPlan:
    """`auto` without calibration data: the weight-statistics rule of the module docstring."""
    plan = PrecisionPlan("auto", target.name, group_size, layers)
    plan.notes.append("no calibration data: rule-based plan from weight statistics "
                      f"(max|w|/std > {OUTLIER_RATIO_FP32:g}: fp32, > {OUTLIER_RATIO_INT8:g}: int8)")
    quantizable = [l for l in layers if l.quantizable]
    ends = {quantizable[0].layer, quantizable[-1].layer} if quantizable else set()
    for layer in layers:
        if layer.outlier_ratio > OUTLIER_RATIO_FP32:
            choice = "fp32"
        else:
            choice = layer_candidates(target, layer)[0]
            if (layer.outlier_ratio > OUTLIER_RATIO_INT8 or layer.layer in ends) and choice == "int4":
                choice = "int8"
        layer.precision = form_for(choice, layer, group_size)
    return plan


def load_plan(path: str, target: Target, layers: list[Layer]) -> PrecisionPlan:
    """A plan file (--precision-plan), checked against this model and target."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise PrecisionError(f"--precision-plan {path}: cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise PrecisionError(f"--precision-plan {path}: not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
        raise PrecisionError(f"--precision-plan {path}: not a precision plan (expected \"format\": "
                             f"\"{PLAN_FORMAT}\")")
    by_name = {l.layer: l for l in layers}
    chosen = {}
    for entry in data.get("layers", []):
        name, precision = entry.get("layer"), entry.get("precision")
        if name not in by_name:
            raise PrecisionError(f"--precision-plan {path}: layer '{name}' is not a weight layer of this "
                                 f"model (its layers: {', '.join(list(by_name)[:6])} ...)")
        if precision not in IR_PRECISION:
            raise PrecisionError(f"--precision-plan {path}: layer '{name}' has precision '{precision}'; "
                                 f"valid: {', '.join(IR_PRECISION)}")
        check_precision(precision, target)
        chosen[name] = entry
    group_size = int(data.get("group_size") or 128)
    for layer in layers:
        entry = chosen.get(layer.layer, {})
        layer.precision = entry.get("precision", "fp32")
        layer.sensitivity = dict(entry.get("sensitivity", {}))
        layer.activation = dict(entry.get("activation", {}))
        if layer.precision != form_for(layer.precision, layer, group_size):
            raise PrecisionError(f"--precision-plan {path}: layer '{layer.layer}' ({layer.op}, weight "
                                 f"{layer.shape}) has no {layer.precision} form")
    plan = PrecisionPlan(data.get("mode", "plan"), target.name, group_size, layers,
                         data.get("accuracy_budget"), data.get("calibration"), list(data.get("notes", [])))
    return plan


# -- reports ---------------------------------------------------------------------------------------

def format_table(plan: PrecisionPlan) -> str:
    shown = sorted({p for l in plan.layers for p in l.sensitivity})
    head = f"{'layer':28s} {'op':6s} {'weight':>12s} {'w max/std':>9s} {'x chan':>7s} {'precision':9s} " + \
        "".join(f"{'err@' + p:>11s}" for p in shown) + f" {'MiB fp32':>9s} {'MiB':>8s}"
    rows = [head, "-" * len(head)]
    for l in plan.layers:
        # printed from the stored value (4 digits), so that a replayed plan prints the same table:
        # rounding the measured value to 3 digits can differ from rounding its 4-digit form
        sens = "".join(f"{stored_sensitivity(l.sensitivity[p]):11.2e}" if p in l.sensitivity else f"{'-':>11s}"
                       for p in shown)
        chan = f"{l.activation['channel_outlier']:7.1f}" if "channel_outlier" in l.activation else f"{'-':>7s}"
        rows.append(f"{l.layer[:28]:28s} {l.op:6s} {'x'.join(map(str, l.shape)):>12s} {l.outlier_ratio:9.1f} "
                    f"{chan} {l.precision:9s} {sens} "
                    f"{l.bytes_at('fp32', plan.group_size) / 2**20:9.2f} "
                    f"{l.bytes_at(l.precision, plan.group_size) / 2**20:8.2f}")
    before = sum(l.bytes_at("fp32", plan.group_size) for l in plan.layers)
    after = sum(l.bytes_at(l.precision, plan.group_size) for l in plan.layers)
    counts = ", ".join(f"{sum(l.precision == p for l in plan.layers)} {p}"
                       for p in IR_PRECISION if any(l.precision == p for l in plan.layers))
    rows.append(f"{len(plan.layers)} layers ({counts}); weights {before / 2**20:.1f} -> {after / 2**20:.1f} MiB")
    if plan.calibration:
        c = plan.calibration
        rows.append(f"measured error (relative L2 against fp32): calibration {c.get('error', float('nan')):.2e}, "
                    f"held-out {c.get('held_out_error', float('nan')):.2e} "
                    f"({c.get('samples')} + {c.get('held_out')} samples)")
    return "\n".join(rows)


CHART_COLOURS = {"fp32": "#4c72b0", "bf16": "#55a868", "fp16": "#8fd18f", "int8": "#dd8452", "int4": "#c44e52"}


def write_chart(plan: PrecisionPlan, path: str) -> None:
    """A PNG: per layer, its precision (bar colour, weight bits as height) and sensitivity."""
    fig = chart_figure(plan)
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)


def chart_figure(plan: PrecisionPlan):
    """The plan's chart as a matplotlib Figure (write_chart saves it)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise PrecisionError("--plan-chart needs matplotlib: pip install 'inferx-compiler[plot]'") from None
    colours = CHART_COLOURS
    n = len(plan.layers)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(6, 0.22 * n + 2), 6), sharex=True)
    xs = list(range(n))
    top.bar(xs, [WEIGHT_BITS[l.precision] for l in plan.layers],
            color=[colours[l.precision] for l in plan.layers])
    top.set_ylabel("weight bits")
    top.set_title(f"precision plan ({plan.mode}, target {plan.target})")
    # one patch per precision in the plan, in its bars' colour (handles taken from empty bars
    # carried no colour: every entry showed the default blue)
    top.legend(handles=[Patch(facecolor=c, label=p) for p, c in colours.items() if p in plan.precisions()],
               loc="upper right", fontsize=8)
    shown = sorted({p for l in plan.layers for p in l.sensitivity})
    for p in shown:
        bottom.semilogy(xs, [max(l.sensitivity.get(p, np.nan), 1e-9) for l in plan.layers], "o-",
                        color=colours.get(p, "k"), label=f"error with this layer alone at {p}", ms=3)
    if plan.accuracy_budget:
        bottom.axhline(plan.accuracy_budget, color="k", ls="--", lw=0.8, label="budget")
    bottom.set_ylabel("model error (rel. L2)")
    if shown:
        bottom.legend(fontsize=8)
    else:
        bottom.text(0.5, 0.5, "no calibration data: no measured sensitivity", ha="center",
                    transform=bottom.transAxes)
    bottom.set_xticks(xs)
    bottom.set_xticklabels([l.layer for l in plan.layers], rotation=90, fontsize=6)
    fig.tight_layout()
    return fig
