"""Prometheus text format by hand: per-bucket counts (`BucketCounts`, the batcher's statistics
in batching.py) and a small registry (a counter, a gauge and a histogram are a few lines each).

The server's /metrics no longer comes from here: `serving_metrics.py` uses prometheus_client
(and its multiprocess mode for --workers). This module stays for the batcher's in-process
statistics and for code that wants Prometheus text without that dependency.

    registry = Registry()
    requests = registry.counter("inferx_requests_total", "Requests answered.", ("model", "code"))
    requests.inc(model="cnn", code="200")
    latency = registry.histogram("inferx_request_duration_seconds", "...", ("model",), LATENCY_BUCKETS)
    latency.observe(0.0031, model="cnn")
    registry.render()  # Prometheus text

Values that live elsewhere are read at render time through `Registry.collector(fn)`: `fn()`
yields (name, kind, help, [(sample name, labels, value)]) families; `merge_families` adds up
several processes' families.
"""

from __future__ import annotations

import bisect
import math
import threading
from typing import Callable, Iterable

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str, label_names: tuple[str, ...]):
        self.name, self.help, self.label_names = name, help_text, tuple(label_names)
        self._lock = threading.Lock()
        self._series: dict[tuple, object] = {}

    def _key(self, labels: dict) -> tuple:
        if set(labels) != set(self.label_names):
            raise ValueError(f"metric {self.name} takes labels {self.label_names}, got {tuple(labels)}")
        return tuple(str(labels[n]) for n in self.label_names)


class Counter(_Metric):
    kind = "counter"

    def inc(self, amount: float = 1.0, **labels) -> None:
        key = self._key(labels)
        with self._lock:
            self._series[key] = self._series.get(key, 0.0) + amount

    def samples(self) -> list[tuple[str, dict, float]]:
        with self._lock:
            return [(self.name, dict(zip(self.label_names, k)), v) for k, v in self._series.items()]


class Gauge(Counter):
    kind = "gauge"

    def set(self, value: float, **labels) -> None:
        key = self._key(labels)
        with self._lock:
            self._series[key] = float(value)


class BucketCounts:
    """Observations counted per upper bound (the last count: above every bound), and their sum."""

    def __init__(self, bounds: Iterable[float]):
        self.bounds = tuple(sorted(bounds))
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += times
        self.total += value * times

    def samples(self, name: str, labels: dict) -> list:
        return histogram_samples(name, labels, self.bounds, list(self.counts), self.total)


class Histogram(_Metric):
    kind = "histogram"

    def __init__(self, name: str, help_text: str, label_names: tuple[str, ...], buckets: Iterable[float]):
        super().__init__(name, help_text, label_names)
        self.buckets = tuple(sorted(buckets))

    def observe(self, value: float, **labels) -> None:
        key = self._key(labels)
        with self._lock:
            counts = self._series.get(key)
            if counts is None:
                counts = self._series[key] = BucketCounts(self.buckets)
            counts.observe(value)

    def samples(self) -> list[tuple[str, dict, float]]:
        with self._lock:
            return [s for key, counts in self._series.items()
                    for s in counts.samples(self.name, dict(zip(self.label_names, key)))]


def histogram_samples(name: str, labels: dict, bounds: tuple, counts: list[int], total: float) -> list:
    """_bucket (cumulative, with +Inf), _sum and _count samples from per-bucket counts
    (len(bounds) + 1 of them, the last for values above every bound)."""
    out, running = [], 0
    for bound, count in zip(list(bounds) + [math.inf], counts):
        running += count
        out.append((f"{name}_bucket", {**labels, "le": _format_value(bound)}, running))
    out.append((f"{name}_sum", labels, total))
    out.append((f"{name}_count", labels, running))
    return out


class Registry:
    def __init__(self):
        self._metrics: list[_Metric] = []
        self._collectors: list[Callable[[], Iterable]] = []

    def counter(self, name: str, help_text: str, labels: tuple[str, ...] = ()) -> Counter:
        return self._add(Counter(name, help_text, labels))

    def gauge(self, name: str, help_text: str, labels: tuple[str, ...] = ()) -> Gauge:
        return self._add(Gauge(name, help_text, labels))

    def histogram(self, name: str, help_text: str, labels: tuple[str, ...], buckets: Iterable[float]) -> Histogram:
        return self._add(Histogram(name, help_text, labels, buckets))

    def collector(self, fn: Callable[[], Iterable]) -> None:
        """`fn()` yields (name, kind, help, samples) with samples [(sample name, labels, value)]."""
        self._collectors.append(fn)

    def _add(self, metric):
        self._metrics.append(metric)
        return metric

    def families(self) -> list:
        """Every family now: [(name, kind, help, [(sample name, labels, value)])]."""
        families = [(m.name, m.kind, m.help, m.samples()) for m in self._metrics]
        for fn in self._collectors:
            families += list(fn())
        return families

    def render(self) -> str:
        return render_families(self.families())


def render_families(families: list) -> str:
    lines = []
    for name, kind, help_text, samples in families:
        lines.append(f"# HELP {name} {_escape_help(help_text)}")
        lines.append(f"# TYPE {name} {kind}")
        lines += [f"{sample}{_format_labels(labels)} {_format_value(value)}" for sample, labels, value in samples]
    return "\n".join(lines) + "\n"


def merge_families(snapshots: list[list]) -> list:
    """Several processes' families as one: samples with the same name and labels add up
    (counters, histogram buckets, sums and counts; gauges too: queue lengths add)."""
    merged: dict[str, tuple] = {}
    for families in snapshots:
        for name, kind, help_text, samples in families:
            _, _, _, acc = merged.setdefault(name, (name, kind, help_text, {}))
            for sample, labels, value in samples:
                key = (sample, tuple(sorted(labels.items())))
                acc[key] = acc.get(key, 0) + value
    return [(name, kind, help_text, [(sample, dict(labels), value) for (sample, labels), value in acc.items()])
            for name, kind, help_text, acc in merged.values()]


def _format_labels(labels: dict) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape_label(str(v))}"' for k, v in labels.items())
    return "{" + inner + "}"


def _format_value(value: float) -> str:
    if value == math.inf:
        return "+Inf"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
