"""The server's Prometheus metrics, through prometheus_client (its multiprocess mode when
several worker processes share the ports).

    inference_latency_seconds{model, model_version, input_length_bin}   histogram: request received ->
                                                                        answer ready, successful requests
    inference_queue_delay_seconds{model, model_version}                 histogram: queued -> batch formed
    inference_batch_size{model, model_version}                          histogram: request rows per batch run
    inference_requests_total{model, model_version, status}              counter: every infer request,
                                                                        by HTTP status code ("200", "400",
                                                                        ...; gRPC: the equivalent code)
    inference_in_flight{model}                                          gauge: infer requests being served
                                                                        (exact when idle and for this
                                                                        process's scrape; other workers'
                                                                        at most 64 changes old)

Requests for a model (or version) the server does not have count under model="" (or
model_version=""), so a client cannot grow the label set. `input_length_bin` is tiny (1-128
elements), small (129-512), large (513-2048) or xlarge (above), of the request's length as
`ModelVersion.request_length` defines it (the sequence dim; see repository.py).

Multiprocess mode: PROMETHEUS_MULTIPROC_DIR must be set before prometheus_client is imported
(the CLI sets it before starting the workers); every worker writes its own files there, any
worker's /metrics reads them all, the parent calls `mark_process_dead` for each worker that
ends and removes the directory.
"""

from __future__ import annotations

import os
import threading
from typing import Optional

LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
                   10.0)
QUEUE_DELAY_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5,
                       1.0, 5.0)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
IN_FLIGHT_PUBLISH_EVERY = 64

class ServingMetrics:
    """The five families, in their own registry (several servers may live in one process,
    as in tests), or in prometheus_client's multiprocess files (`multiprocess=True`)."""

    def __init__(self, multiprocess: bool = False):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        try:
            from prometheus_client import disable_created_metrics

            disable_created_metrics()  # no *_created series: counters and histograms only
        except ImportError:  # older prometheus_client
            pass
        self.multiprocess = multiprocess
        if multiprocess and not os.environ.get(MULTIPROC_ENV):
            raise RuntimeError(f"multiprocess metrics need {MULTIPROC_ENV} set before prometheus_client is imported")
        # multiprocess: the values go to files, a scrape collects them into a fresh registry
        self.registry = None if multiprocess else CollectorRegistry(auto_describe=True)
        reg = {"registry": self.registry}
        self.latency = Histogram("inference_latency_seconds",
                                 "Time from receiving an inference request to its answer being ready "
                                 "(successful requests).", ("model", "model_version", "input_length_bin"),
                                 buckets=LATENCY_BUCKETS, **reg)
        self.queue_delay = Histogram("inference_queue_delay_seconds",
                                     "Time a request waited in the batch queue before its batch was formed.",
                                     ("model", "model_version"), buckets=QUEUE_DELAY_BUCKETS, **reg)
        self.batch_size = Histogram("inference_batch_size", "Request rows per batch run.",
                                    ("model", "model_version"), buckets=BATCH_SIZE_BUCKETS, **reg)
        self.requests = Counter("inference_requests", "Inference requests answered, by HTTP status code "
                                "(gRPC: the equivalent HTTP code).", ("model", "model_version", "status"), **reg)
        gauge_kw = {"multiprocess_mode": "livesum"} if multiprocess else {}
        self.in_flight = Gauge("inference_in_flight", "Inference requests being served.", ("model",),
                               **gauge_kw, **reg)
        self._children: dict = {}
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}
        self._changes = 0

    # -- children cached by label values: a labels() lookup costs more than the update -------
    def _child(self, metric, *values):
        key = (id(metric),) + values
        child = self._children.get(key)
        if child is None:
            with self._lock:
                child = self._children.get(key)
                if child is None:
                    child = self._children[key] = metric.labels(*values)
        return child

    # -- in flight: counted here, written to the gauge when a model goes idle, every
    # IN_FLIGHT_PUBLISH_EVERY changes and at every scrape of this process (two gauge updates a
    # request were a tenth of a trivial request's cost). Called from the serving loop's thread.
    def request_started(self, model: str) -> None:
        self._in_flight_changed(model, 1)

    def request_finished(self, model: str) -> None:
        self._in_flight_changed(model, -1)

    def _in_flight_changed(self, model: str, delta: int) -> None:
        count = self._in_flight[model] = self._in_flight.get(model, 0) + delta
        self._changes += 1
        if count == 0 or self._changes >= IN_FLIGHT_PUBLISH_EVERY:
            self._publish_in_flight()

    def _publish_in_flight(self) -> None:
        self._changes = 0
        for model, count in list(self._in_flight.items()):
            self._child(self.in_flight, model).set(count)

    def observe_request(self, model: str, version: str, status: int, seconds: Optional[float],
                        length_bin: Optional[str]) -> None:
        self._child(self.requests, model, version, str(status)).inc()
        if status == 200 and seconds is not None and length_bin is not None:
            self._child(self.latency, model, version, length_bin).observe(seconds)

    def batch_observer(self, model: str, version: str):
        """A `DynamicBatcher.batch_observer`: batch size and each request's queue delay."""
        size = self._child(self.batch_size, model, version)
        delay = self._child(self.queue_delay, model, version)

        def observe(batch, now: float) -> None:
            try:
                size.observe(batch.rows)
                for r in batch.requests:
                    delay.observe(max(0.0, now - r.enqueued))
            except Exception:  # noqa: BLE001 - metrics never fail a batch
                pass

        return observe

    def render(self) -> tuple[bytes, str]:
        """The /metrics body (text format 0.0.4) and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

        self._publish_in_flight()
        if self.multiprocess:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def mark_process_dead(pid: int) -> None:
    """A worker ended: drop its live gauge files (multiprocess mode)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)


TOKEN_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5)
REQUEST_LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)


class GenerationMetrics:
    """The generation models' families, in the server's registry (one process: `inferx-serve
    --model` runs no workers):

        generation_time_to_first_token_seconds{model, model_version, input_length_bin}  histogram
        generation_time_per_output_token_seconds{model, model_version, input_length_bin}  histogram:
                                                  (end - first token) / (tokens - 1), per request
        generation_e2e_latency_seconds{model, model_version, input_length_bin}    histogram
        generation_requests_running{model}, generation_requests_waiting{model}    gauges
        generation_kv_blocks_in_use{model}                                        gauge
        generation_prefix_cache_hit_rate{model}                                   gauge: hits / lookups of
                                                                                  full prompt blocks
        generation_requests_total{model, finish_reason}, generation_tokens_total{model, kind}   counters

    `input_length_bin` bins the prompt's tokens as heatmap.input_length_bin does."""

    def __init__(self, registry, models):
        from prometheus_client import Counter, Gauge, Histogram

        from inferx_compiler.runtime.heatmap import input_length_bin

        self._bin = input_length_bin
        labels = ("model", "model_version", "input_length_bin")
        reg = {"registry": registry}
        self.ttft = Histogram("generation_time_to_first_token_seconds", "Time from a generation request's arrival "
                              "to its first token.", labels, buckets=TOKEN_LATENCY_BUCKETS + (5.0, 10.0), **reg)
        self.tpot = Histogram("generation_time_per_output_token_seconds", "Time per output token after the "
                              "first, per request.", labels, buckets=TOKEN_LATENCY_BUCKETS, **reg)
        self.e2e = Histogram("generation_e2e_latency_seconds", "Time from a generation request's arrival to its "
                             "last token.", labels, buckets=REQUEST_LATENCY_BUCKETS, **reg)
        self.requests = Counter("generation_requests", "Generation requests finished, by finish reason.",
                                ("model", "finish_reason"), **reg)
        self.tokens = Counter("generation_tokens", "Tokens: prompt (read) and completion (generated).",
                              ("model", "kind"), **reg)
        gauges = {"generation_requests_running": ("Requests in the decode batch.", lambda e: e.running),
                  "generation_requests_waiting": ("Requests waiting for the decode batch.", lambda e: e.waiting),
                  "generation_kv_blocks_in_use": ("KV cache blocks sequences hold.", lambda e: e.pool.in_use),
                  "generation_prefix_cache_hit_rate": ("Full prompt blocks found in the prefix cache / looked "
                                                       "up.", lambda e: e.pool.hit_rate)}
        for name, (doc, read) in gauges.items():
            gauge = Gauge(name, doc, ("model",), **reg)
            for m in models.all():
                gauge.labels(m.name).set_function(lambda read=read, engine=m.engine: read(engine))
        models.on_finished.append(self.observe)

    def observe(self, model, request) -> None:
        t = request.times
        self.requests.labels(model.name, request.finish_reason).inc()
        self.tokens.labels(model.name, "prompt").inc(len(request.prompt))
        self.tokens.labels(model.name, "completion").inc(len(request.output))
        if t.first_token is None or t.finished is None:
            return
        labels = (model.name, "1", self._bin(max(1, len(request.prompt))))
        self.ttft.labels(*labels).observe(t.first_token - t.arrived)
        self.e2e.labels(*labels).observe(t.finished - t.arrived)
        if len(request.output) > 1:
            self.tpot.labels(*labels).observe((t.finished - t.first_token) / (len(request.output) - 1))
