"""Latency heatmaps: a latency quantile (P95 by default) per (model version, input-length bin).

Two sources, told apart by their first character:

* a Prometheus text scrape of the server's `/metrics` (or an OpenMetrics one, ending in
  `# EOF`): the quantile of the `inference_latency_seconds` histogram is computed from its
  cumulative `_bucket` counts the way Prometheus' `histogram_quantile` does (linear
  interpolation inside the bucket that holds the rank), after summing the buckets over every
  other label (`model`, instance, ...) unless a model is chosen;
* a benchmark JSON, `{"model": "NAME" (optional), "requests": [{"model_version": "1",
  "input_length": 300, "latency_s": 0.0123}, ...]}` (a request may carry `"input_length_bin"`
  instead of `"input_length"`, and its own `"model"`): the exact quantile of each cell's
  latencies (numpy's `percentile`, linear method).

The binning rule is `input_length_bin`; the server labels `inference_latency_seconds` with it,
so both sources put a request in the same column.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from typing import Iterable, Optional

import numpy as np

from inferx_compiler.errors import InferXError

LATENCY_METRIC = "inference_latency_seconds"
# the histograms labelled by model_version and input_length_bin that a scrape may hold, and what
# a title calls each (the generation ones: serving_metrics.GenerationMetrics)
METRICS = {LATENCY_METRIC: "inference latency",
           "generation_time_to_first_token_seconds": "time to first token",
           "generation_time_per_output_token_seconds": "time per output token",
           "generation_e2e_latency_seconds": "generation latency"}

# (inclusive upper bound of the input length, bin name), in order; longer inputs are "xlarge".
BIN_UPPER_BOUNDS = ((128, "tiny"), (512, "small"), (2048, "large"))
BINS = ("tiny", "small", "large", "xlarge")


class HeatmapError(InferXError):
    """An input that is neither a usable scrape nor a usable benchmark JSON (exit code 1)."""


def input_length_bin(n: int) -> str:
    """The `input_length_bin` label of a request whose input holds `n` elements along the
    sequence dimension:

        tiny    1 - 128
        small   129 - 512
        large   513 - 2048
        xlarge  more than 2048

    (bounds inclusive). `n` must be a whole number >= 1, else ValueError. The server labels
    `inference_latency_seconds` with this, and `inferx-heatmap` bins benchmark requests with it.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"input length must be a whole number, got {n!r}")
    if n < 1:
        raise ValueError(f"input length must be >= 1, got {n}")
    for upper, name in BIN_UPPER_BOUNDS:
        if n <= upper:
            return name
    return "xlarge"


@dataclass
class LatencyTable:
    """`cells[(version, bin)]`: the quantile in seconds (NaN: no observation);
    `counts[(version, bin)]`: how many observations it came from; `at_least`: the cells whose
    rank fell in a histogram's +Inf bucket, where the value is the largest finite bucket bound
    and the true quantile is at least that."""

    quantile: float
    source: str                      # "scrape" or "benchmark"
    model: str                       # the model named in the title
    versions: list = field(default_factory=list)
    cells: dict = field(default_factory=dict)
    metric: str = LATENCY_METRIC
    counts: dict = field(default_factory=dict)
    at_least: set = field(default_factory=set)

    def value(self, version: str, bin_name: str) -> float:
        return self.cells.get((version, bin_name), math.nan)

    def matrix_ms(self) -> np.ndarray:
        """rows: versions; columns: BINS; milliseconds, NaN where empty."""
        return np.array([[self.value(v, b) * 1e3 for b in BINS] for v in self.versions], dtype=float)


def quantile_label(q: float) -> str:
    return f"P{q * 100:g}"


# -- Prometheus histograms --------------------------------------------------------------------

def histogram_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float:
    """The q-quantile of a histogram given as (upper bound `le`, cumulative count) pairs, as
    Prometheus' `histogram_quantile` computes it: find the first bucket whose cumulative count
    reaches rank = q * total, interpolate linearly between its lower and upper bound (the lower
    bound of the first bucket is 0 when its upper bound is positive); a rank that falls in the
    +Inf bucket returns the largest finite bound. NaN when there are no observations or no
    +Inf bucket."""
    return _histogram_quantile(q, buckets)[0]


def _histogram_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> tuple[float, bool]:
    """(histogram_quantile, whether the rank fell in the +Inf bucket: the true quantile is then
    at least the value returned)."""
    if math.isnan(q):
        return math.nan, False
    if q < 0:
        return -math.inf, False
    if q > 1:
        return math.inf, False
    merged: dict[float, float] = {}
    for le, count in buckets:
        merged[float(le)] = merged.get(float(le), 0.0) + float(count)
    bounds = sorted(merged)
    if not bounds or not math.isinf(bounds[-1]) or len(bounds) < 2:
        return math.nan, False
    counts = [merged[le] for le in bounds]
    for i in range(1, len(counts)):  # cumulative counts never decrease (Prometheus forces this too)
        counts[i] = max(counts[i], counts[i - 1])
    total = counts[-1]
    if total == 0:
        return math.nan, False
    rank = q * total
    b = next((i for i in range(len(bounds) - 1) if counts[i] >= rank), len(bounds) - 1)
    if b == len(bounds) - 1:
        return bounds[-2], True
    if b == 0 and bounds[0] <= 0:
        return bounds[0], False
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (end - start) * (rank / count), False


def _parse_scrape(text: str) -> list:
    if text.rstrip().endswith("# EOF"):
        from prometheus_client.openmetrics.parser import text_string_to_metric_families
    else:
        from prometheus_client.parser import text_string_to_metric_families
    try:
        return list(text_string_to_metric_families(text))
    except Exception as e:  # the parser raises ValueError (and the odd IndexError/KeyError) on bad text
        raise HeatmapError(f"not a Prometheus text scrape ({e}) nor a benchmark JSON "
                           f"(which starts with '{{')") from None


def table_from_scrape(text: str, model: Optional[str] = None, quantile: float = 0.95,
                      metric: str = LATENCY_METRIC) -> LatencyTable:
    """The quantile of histogram `metric` per (model_version, input_length_bin) from a Prometheus
    text scrape."""
    samples = [s for family in _parse_scrape(text) for s in family.samples
               if s.name == metric + "_bucket"]
    if not samples:
        raise HeatmapError(f"the scrape holds no {metric} histogram "
                           f"(no {metric}_bucket samples)")
    missing = sorted({label for s in samples for label in ("model_version", "input_length_bin", "le")
                      if label not in s.labels})
    if missing:
        raise HeatmapError(f"{metric}_bucket samples lack the label(s) {', '.join(missing)}")
    models = sorted({s.labels.get("model", "") for s in samples})
    if model is not None:
        samples = [s for s in samples if s.labels.get("model") == model]
        if not samples:
            raise HeatmapError(f"no {metric} samples for model '{model}' "
                               f"(models in the scrape: {', '.join(m or '(none)' for m in models)})")
    unknown = sorted({s.labels["input_length_bin"] for s in samples} - set(BINS))
    if unknown:
        print(f"warning: ignored {metric} series with input_length_bin "
              f"{', '.join(unknown)} (not one of {', '.join(BINS)})", file=sys.stderr)
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for s in samples:
        if s.labels["input_length_bin"] in BINS:
            key = (s.labels["model_version"], s.labels["input_length_bin"])
            groups.setdefault(key, []).append((float(s.labels["le"]), float(s.value)))
    table = LatencyTable(quantile, "scrape", model or _models_title(models), metric=metric)
    for key, buckets in groups.items():
        total = sum(count for le, count in buckets if math.isinf(le))
        table.counts[key] = int(total)
        table.cells[key], clamped = _histogram_quantile(quantile, buckets)
        if clamped:
            table.at_least.add(key)
    table.versions = _sorted_versions({v for v, _ in groups})
    return table


def _models_title(models: list) -> str:
    named = [m for m in models if m]
    if len(named) == 1:
        return named[0]
    return "all models" + (f" ({', '.join(named)}, summed)" if named else "")


# -- benchmark JSON ---------------------------------------------------------------------------

def table_from_bench(data, model: Optional[str] = None, quantile: float = 0.95) -> LatencyTable:
    """The exact quantile (numpy percentile, linear) per (model_version, bin) of a benchmark JSON."""
    if not isinstance(data, dict) or not isinstance(data.get("requests"), list):
        raise HeatmapError('a benchmark JSON must be an object with a "requests" list')
    default_model = data.get("model")
    latencies: dict[tuple[str, str], list[float]] = {}
    seen_models = set()
    for i, r in enumerate(data["requests"]):
        where = f"requests[{i}]"
        if not isinstance(r, dict):
            raise HeatmapError(f"{where}: expected an object, got {type(r).__name__}")
        request_model = r.get("model", default_model)
        seen_models.add(request_model)
        if model is not None and request_model != model:
            continue
        if "model_version" not in r or "latency_s" not in r:
            raise HeatmapError(f'{where}: needs "model_version" and "latency_s"')
        latency = r["latency_s"]
        if isinstance(latency, bool) or not isinstance(latency, (int, float)) or not math.isfinite(latency) \
                or latency < 0:
            raise HeatmapError(f'{where}: "latency_s" must be a finite number >= 0, got {latency!r}')
        latencies.setdefault((str(r["model_version"]), _request_bin(r, where)), []).append(float(latency))
    if not latencies:
        if model is not None:
            named = sorted(str(m) for m in seen_models if m is not None)
            raise HeatmapError(f"no benchmark requests for model '{model}' "
                               f"(models in the file: {', '.join(named) or 'none named'})")
        raise HeatmapError("the benchmark JSON holds no requests")
    named = sorted(str(m) for m in seen_models if m is not None)
    title_model = model or (named[0] if len(named) == 1 else _models_title(named))
    table = LatencyTable(quantile, "benchmark", title_model)
    for key, values in latencies.items():
        table.counts[key] = len(values)
        table.cells[key] = float(np.percentile(values, quantile * 100))
    table.versions = _sorted_versions({v for v, _ in latencies})
    return table


def _request_bin(r: dict, where: str) -> str:
    if "input_length" in r:
        try:
            return input_length_bin(r["input_length"])
        except ValueError as e:
            raise HeatmapError(f"{where}: {e}") from None
    if r.get("input_length_bin") in BINS:
        return r["input_length_bin"]
    if "input_length_bin" in r:
        raise HeatmapError(f'{where}: "input_length_bin" must be one of {", ".join(BINS)}, '
                           f'got {r["input_length_bin"]!r}')
    raise HeatmapError(f'{where}: needs "input_length" or "input_length_bin"')


def _sorted_versions(versions: set) -> list:
    """Numeric versions in numeric order, then any others alphabetically."""
    return sorted(versions, key=lambda v: (0, int(v), "") if v.isdigit() else (1, 0, v))


# -- either source ----------------------------------------------------------------------------

def load_table(text: str, model: Optional[str] = None, quantile: float = 0.95,
               metric: str = LATENCY_METRIC) -> LatencyTable:
    """A benchmark JSON (text starting with '{') or else a Prometheus text scrape (its histogram
    `metric`, one of METRICS)."""
    if metric not in METRICS:
        raise HeatmapError(f"--metric {metric}: valid: {', '.join(METRICS)}")
    if not 0 <= quantile <= 1:
        raise HeatmapError(f"the quantile must lie in [0, 1], got {quantile}")
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise HeatmapError(f"not valid JSON: {e}") from None
        table = table_from_bench(data, model, quantile)
    else:
        table = table_from_scrape(text, model, quantile, metric)
    if not any(math.isfinite(v) for v in table.cells.values()):
        raise HeatmapError(f"{table.metric} has no observations"
                           + (f" for model '{model}'" if model else "") + " (every count is 0)")
    return table


def read_source(path: str) -> str:
    """The text of `path` ('-': standard input)."""
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError:
        raise HeatmapError(f"{path}: not a text file (expected a Prometheus scrape or a benchmark JSON)") from None
    except OSError as e:
        raise HeatmapError(f"{path}: cannot read ({e.strerror or e})") from None


def default_title(table: LatencyTable) -> str:
    return f"{quantile_label(table.quantile)} {METRICS.get(table.metric, table.metric)}, model {table.model}"


def chart_title(table: LatencyTable, title: Optional[str] = None) -> str:
    """`title` (default: default_title), with a line naming the model when the title does not."""
    if not title:
        return default_title(table)
    return title if table.model in title else f"{title}\nmodel {table.model}"


def format_table(table: LatencyTable, title: Optional[str] = None) -> str:
    """The table as text: a row per version, a column per bin, milliseconds ('n/a': empty)."""
    label = quantile_label(table.quantile)
    head = chart_title(table, title).replace("\n", ", ")
    width = max(9, *(len(v) for v in table.versions), len("version"))
    lines = [head, f"({label} in ms from the {table.source}; n: observations"
             + ("; >=: beyond the largest finite bucket)" if table.at_least else ")"),
             f"{'version':<{width}}" + "".join(f"{b:>18}" for b in BINS)]
    for v in table.versions:
        row = f"{v:<{width}}"
        for b in BINS:
            value = table.value(v, b)
            cell = "n/a"
            if math.isfinite(value):
                mark = ">=" if (v, b) in table.at_least else ""
                cell = f"{mark}{value * 1e3:.3f} (n={table.counts.get((v, b), 0)})"
            row += f"{cell:>18}"
        lines.append(row)
    return "\n".join(lines)


def draw_heatmap(table: LatencyTable, path: str, title: Optional[str] = None) -> None:
    """A PNG: versions down, bins across (tiny, small, large, xlarge), each cell annotated with
    its quantile in ms (grey and 'n/a' where empty), a colorbar, and a title naming the model."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise HeatmapError("inferx-heatmap needs matplotlib: pip install 'inferx-compiler[plot]'") from None
    values = table.matrix_ms()
    masked = np.ma.masked_invalid(values)
    cmap = plt.get_cmap("viridis").with_extremes(bad="#d9d9d9")  # empty cells: grey
    rows = len(table.versions)
    fig, ax = plt.subplots(figsize=(7.5, max(2.6, 0.7 * rows + 1.8)))
    finite = values[np.isfinite(values)]
    low, high = float(finite.min()), float(finite.max())
    if low == high:
        low, high = low * 0.9, high * 1.1 + 1e-9
    image = ax.imshow(masked, cmap=cmap, vmin=low, vmax=high, aspect="auto")
    label = quantile_label(table.quantile)
    fig.colorbar(image, ax=ax).set_label(f"{label} latency (ms)")
    ax.set_xticks(range(len(BINS)))
    ax.set_xticklabels([f"{b}\n{_bin_range(b)}" for b in BINS])
    ax.set_yticks(range(rows))
    ax.set_yticklabels(table.versions)
    ax.set_xlabel("input length bin (elements along the sequence dim)")
    ax.set_ylabel("model version")
    for r, version in enumerate(table.versions):
        for c, b in enumerate(BINS):
            value = values[r, c]
            if not math.isfinite(value):
                ax.text(c, r, "n/a", ha="center", va="center", color="#555555", fontsize=10)
                continue
            rgba = image.cmap(image.norm(value))
            luminance = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2]
            mark = "\u2265" if (version, b) in table.at_least else ""
            ax.text(c, r, f"{mark}{_ms(value)} ms\nn={table.counts.get((version, b), 0)}", ha="center",
                    va="center", fontsize=9, color="black" if luminance > 0.5 else "white")
    ax.set_title(chart_title(table, title))
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise HeatmapError(f"{path}: cannot write ({e.strerror or e})") from None
    except ValueError as e:  # an extension matplotlib cannot write, e.g. out.xyz
        raise HeatmapError(f"{path}: {e}") from None
    finally:
        plt.close(fig)


def _ms(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _bin_range(name: str) -> str:
    lower = 1
    for upper, bin_name in BIN_UPPER_BOUNDS:
        if bin_name == name:
            return f"{lower}-{upper}"
        lower = upper + 1
    return f">{BIN_UPPER_BOUNDS[-1][0]}"
