"""ServingMetrics' in-flight gauge: counted per request, written to prometheus_client when a
model goes idle, every IN_FLIGHT_PUBLISH_EVERY changes, and before every scrape."""

from __future__ import annotations

from inferx_compiler.runtime.serving_metrics import IN_FLIGHT_PUBLISH_EVERY, ServingMetrics


def gauge(metrics: ServingMetrics, model: str):
    return metrics.registry.get_sample_value("inference_in_flight", {"model": model})


def test_in_flight_is_exact_when_idle_and_at_a_scrape():
    m = ServingMetrics()
    for _ in range(3):
        m.request_started("a")
    assert gauge(m, "a") in (None, 0.0)  # not written yet: no request of "a" has finished
    body, _ = m.render()
    assert b'inference_in_flight{model="a"} 3.0' in body
    for _ in range(3):
        m.request_finished("a")
    assert gauge(m, "a") == 0.0  # idle: written at once, without a scrape


def test_in_flight_is_written_while_busy():
    m = ServingMetrics()
    for _ in range(IN_FLIGHT_PUBLISH_EVERY - 1):
        m.request_started("b")
    assert gauge(m, "b") in (None, 0.0)
    m.request_started("b")  # the IN_FLIGHT_PUBLISH_EVERY-th change: written, never idle
    assert gauge(m, "b") == IN_FLIGHT_PUBLISH_EVERY
