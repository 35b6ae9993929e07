"""inferx-heatmap: the latency quantile per (model version, input-length bin) from a Prometheus
scrape (interpolated within histogram buckets, as histogram_quantile) or a benchmark JSON
(exact, numpy percentile), drawn as a PNG and printed as a table."""

from __future__ import annotations

import json
import math
import re
import subprocess
import urllib.request

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from inferx_compiler.cli.common import python_entry
from inferx_compiler.cli.heatmap import main
from inferx_compiler.runtime.heatmap import BINS, histogram_quantile, input_length_bin, load_table

BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
LABELS = ("model", "model_version", "input_length_bin")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# -- the binning rule -------------------------------------------------------------------------

@pytest.mark.parametrize("n, name", [(1, "tiny"), (128, "tiny"), (129, "small"), (512, "small"), (513, "large"),
                                     (2048, "large"), (2049, "xlarge"), (10 ** 6, "xlarge"), (np.int64(300), "small")])
def test_input_length_bin(n, name):
    assert input_length_bin(n) == name


@pytest.mark.parametrize("n", [0, -3, 1.5, "12", True, None])
def test_input_length_bin_refuses_non_lengths(n):
    with pytest.raises(ValueError):
        input_length_bin(n)


# -- histogram_quantile -----------------------------------------------------------------------

def test_histogram_quantile_edge_cases():
    inf = float("inf")
    assert histogram_quantile(0.5, [(1.0, 2), (inf, 4)]) == 1.0  # rank in +Inf: the largest finite bound
    assert histogram_quantile(0.25, [(1.0, 2), (inf, 4)]) == 0.5  # first bucket: from 0
    assert histogram_quantile(0.5, [(2.0, 4), (1.0, 2), (inf, 4)]) == 1.0  # order does not matter
    assert math.isnan(histogram_quantile(0.5, [(1.0, 0), (inf, 0)]))  # no observations
    assert math.isnan(histogram_quantile(0.5, [(1.0, 3), (2.0, 4)]))  # no +Inf bucket
    assert histogram_quantile(0.75, [(1.0, 2), (inf, 2), (1.0, 2), (inf, 2)]) == 0.75  # same le summed


# -- scrape -----------------------------------------------------------------------------------

def _scrape() -> bytes:
    """A scrape made by prometheus_client itself, with these observations (seconds):

    model a, version 1,  tiny:   10 x 0.005, 8 x 0.015, 2 x 0.3
    model b, version 1,  tiny:   20 x 0.04
    model a, version 2,  small:  0.06, 0.07, 0.08, 0.15
    model a, version 2,  xlarge: 3 x 0.7, 1 x 3.0 (beyond the last finite bucket)
    model a, version 10, large:  0.012
    """
    registry = CollectorRegistry()
    latency = Histogram("inference_latency_seconds", "Inference latency", LABELS, buckets=BUCKETS, registry=registry)
    Counter("inference_requests_total", "requests", ("model", "model_version", "status"),
            registry=registry).labels("a", "1", "200").inc(55)
    for labels, values in [(("a", "1", "tiny"), [0.005] * 10 + [0.015] * 8 + [0.3] * 2),
                           (("b", "1", "tiny"), [0.04] * 20),
                           (("a", "2", "small"), [0.06, 0.07, 0.08, 0.15]),
                           (("a", "2", "xlarge"), [0.7] * 3 + [3.0]),
                           (("a", "10", "large"), [0.012])]:
        for v in values:
            latency.labels(*labels).observe(v)
    return generate_latest(registry)


# Hand computation, rank = q * count, interpolated inside the bucket that reaches it:
#   a+b/1/tiny  q=.95: 40 obs, rank 38; cumulative .01:10 .02:18 .05:38 -> .02 + .03 * (38-18)/20 = .05
#   a/1/tiny    q=.95: 20 obs, rank 19; .2:18 .5:20                    -> .2 + .3 * (19-18)/2   = .35
#   b/1/tiny    q=.95: 20 obs, rank 19; .02:0 .05:20                   -> .02 + .03 * 19/20     = .0485
#   a/2/small   q=.95: 4 obs, rank 3.8; .1:3 .2:4                      -> .1 + .1 * (3.8-3)/1   = .18
#   a/2/xlarge  q=.95: 4 obs, rank 3.8; 1.0:3 +Inf:4: in +Inf          -> 1.0 (the largest finite bound)
#   a/10/large  q=.95: 1 obs, rank .95; .01:0 .02:1                    -> .01 + .01 * .95       = .0195
#   a/1/tiny    q=.5:  rank 10; .01:10                                 -> 0 + .01 * 10/10       = .01
EXPECTED_ALL = {("1", "tiny"): 0.05, ("2", "small"): 0.18, ("2", "xlarge"): 1.0, ("10", "large"): 0.0195}
EXPECTED_A = {("1", "tiny"): 0.35, ("2", "small"): 0.18, ("2", "xlarge"): 1.0, ("10", "large"): 0.0195}
EXPECTED_B = {("1", "tiny"): 0.0485}


def _printed_table(text: str) -> dict:
    """{(version, bin): ms or None} from the table the command prints."""
    cells, header = {}, None
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["version"]:
            header = words[1:]
            continue
        if header is None or not words:
            continue
        found = re.findall(r"(?:>=)?([0-9.]+) \(n=\d+\)|(n/a)", line[len(words[0]):])
        assert len(found) == len(header), line
        for b, (number, na) in zip(header, found):
            cells[(words[0], b)] = None if na else float(number)
    return cells


def _check_png(path) -> None:
    from PIL import Image

    data = path.read_bytes()
    assert len(data) > 1000 and data[:8] == PNG_SIGNATURE
    with Image.open(path) as image:
        image.verify()  # checks the chunks' structure and CRCs
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size[0] > 100 and image.size[1] > 100


@pytest.mark.parametrize("model, expected", [(None, EXPECTED_ALL), ("a", EXPECTED_A), ("b", EXPECTED_B)])
def test_scrape_p95_per_cell_matches_the_hand_computation(tmp_path, capsys, model, expected):
    scrape = tmp_path / "scrape.txt"
    scrape.write_bytes(_scrape())
    out = tmp_path / "heatmap.png"
    argv = [str(scrape), "-o", str(out)] + (["--model", model] if model else [])
    assert main(argv) == 0
    printed = capsys.readouterr().out
    _check_png(out)

    table = load_table(scrape.read_text(), model=model)
    assert table.versions == sorted({v for v, _ in expected}, key=int)  # 1, 2, 10: numeric order
    for version in table.versions:
        for b in BINS:
            want = expected.get((version, b))
            got = table.value(version, b)
            if want is None:
                assert math.isnan(got), (version, b)
            else:
                assert got == pytest.approx(want, rel=1e-9), (version, b)
    cells = _printed_table(printed)
    assert set(cells) == {(v, b) for v in table.versions for b in BINS}
    for key, ms in cells.items():
        assert (ms is None) == (key not in expected) and (ms is None or ms == pytest.approx(expected[key] * 1e3, abs=1e-3))
    assert (">=1000.000" in printed) == (("2", "xlarge") in expected)  # beyond the buckets: a lower bound
    assert f"model {model or 'all models (a, b, summed)'}" in printed.splitlines()[0]


def test_scrape_other_quantile(tmp_path):
    scrape = tmp_path / "scrape.txt"
    scrape.write_bytes(_scrape())
    table = load_table(scrape.read_text(), model="a", quantile=0.5)
    assert table.value("1", "tiny") == pytest.approx(0.01)
    assert table.counts[("1", "tiny")] == 20


def test_openmetrics_scrape(tmp_path, capsys):
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    registry = CollectorRegistry()
    latency = Histogram("inference_latency_seconds", "latency", LABELS, buckets=BUCKETS, registry=registry)
    for v in [0.005] * 10 + [0.015] * 8 + [0.3] * 2:
        latency.labels("a", "1", "tiny").observe(v)
    path = tmp_path / "scrape.om"
    path.write_bytes(generate_openmetrics(registry))
    assert path.read_text().rstrip().endswith("# EOF")
    assert main([str(path), "-o", str(tmp_path / "h.png")]) == 0
    assert _printed_table(capsys.readouterr().out)[("1", "tiny")] == pytest.approx(350.0)


# -- benchmark JSON ---------------------------------------------------------------------------

RANGES = {"tiny": (1, 128), "small": (129, 512), "large": (513, 2048), "xlarge": (2049, 10000)}


def _bench(rng) -> tuple[dict, dict]:
    """A benchmark JSON and, per (version, bin), the latencies it holds (bins chosen first,
    lengths drawn inside them, boundaries included; one cell given as a precomputed bin)."""
    requests, by_cell = [], {}
    for version, bins in [("1", ["tiny", "small", "large"]), ("3", ["small", "xlarge"]), ("12", ["tiny"])]:
        for b in bins:
            low, high = RANGES[b]
            lengths = [low, high] + rng.integers(low, high + 1, size=int(rng.integers(5, 40))).tolist()
            for n in lengths:
                latency = float(rng.lognormal(-4.0 + bins.index(b), 0.5))
                by_cell.setdefault((version, b), []).append(latency)
                if version == "12":
                    requests.append({"model_version": 12, "input_length_bin": b, "latency_s": latency})
                else:
                    requests.append({"model_version": version, "input_length": n, "latency_s": latency})
    order = rng.permutation(len(requests))
    return {"model": "bert", "requests": [requests[i] for i in order]}, by_cell


@pytest.mark.parametrize("quantile", [0.95, 0.5])
def test_bench_json_quantile_is_numpys_percentile(tmp_path, capsys, quantile):
    data, by_cell = _bench(np.random.default_rng(7))
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "bench.png"
    assert main([str(path), "-o", str(out), "--quantile", str(quantile), "--title", "nightly run"]) == 0
    printed = capsys.readouterr().out
    _check_png(out)
    table = load_table(path.read_text(), quantile=quantile)
    assert table.versions == ["1", "3", "12"] and table.model == "bert"
    for (version, b), latencies in by_cell.items():
        assert table.value(version, b) == pytest.approx(float(np.percentile(latencies, quantile * 100)), rel=1e-12)
        assert table.counts[(version, b)] == len(latencies)
    cells = _printed_table(printed)
    for key, ms in cells.items():
        if key in by_cell:
            assert ms == pytest.approx(np.percentile(by_cell[key], quantile * 100) * 1e3, abs=1e-3)
        else:
            assert ms is None
    assert printed.splitlines()[0] == "nightly run, model bert"


def test_bench_model_filter(tmp_path, capsys):
    data = {"requests": [{"model": "a", "model_version": "1", "input_length": 5, "latency_s": 0.010},
                         {"model": "a", "model_version": "1", "input_length": 6, "latency_s": 0.030},
                         {"model": "b", "model_version": "1", "input_length": 7, "latency_s": 9.0}]}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    assert main([str(path), "-o", str(tmp_path / "a.png"), "--model", "a"]) == 0
    assert _printed_table(capsys.readouterr().out)[("1", "tiny")] == pytest.approx(np.percentile([10, 30], 95))


def test_the_picture(tmp_path):
    """Draws; look at it with an image viewer when changing the drawing code."""
    scrape = tmp_path / "scrape.txt"
    scrape.write_bytes(_scrape())
    assert main([str(scrape), "-o", str(tmp_path / "heatmap.png"), "--model", "a"]) == 0
    _check_png(tmp_path / "heatmap.png")


# -- bad input --------------------------------------------------------------------------------

def _empty_histogram_scrape() -> bytes:
    registry = CollectorRegistry()
    Histogram("inference_latency_seconds", "latency", LABELS, buckets=BUCKETS, registry=registry).labels("a", "1", "tiny")
    return generate_latest(registry)


def _counter_only_scrape() -> bytes:
    registry = CollectorRegistry()
    Counter("inference_requests_total", "requests", ("model",), registry=registry).labels("a").inc()
    return generate_latest(registry)


BAD_INPUTS = {
    "unknown format": (b"hello world, this is not a scrape\n", "not a Prometheus text scrape"),
    "binary file": (PNG_SIGNATURE + bytes(range(256)), "not a text file"),
    "no such metric": (_counter_only_scrape(), "no inference_latency_seconds histogram"),
    "empty file": (b"", "no inference_latency_seconds histogram"),
    "no observations": (_empty_histogram_scrape(), "has no observations"),
    "unknown model": (_scrape(), "no inference_latency_seconds samples for model 'zzz' (models in the scrape: a, b)"),
    "bad JSON": (b'{"requests": [', "not valid JSON"),
    "JSON without requests": (b'{"runs": []}', 'must be an object with a "requests" list'),
    "request without latency": (json.dumps({"requests": [
        {"model_version": "1", "input_length": 3, "latency_s": 0.1},
        {"model_version": "1", "input_length": 3}]}).encode(), 'requests[1]: needs "model_version" and "latency_s"'),
    "bad length": (json.dumps({"requests": [{"model_version": "1", "input_length": 0, "latency_s": 0.1}]}).encode(),
                   "requests[0]: input length must be >= 1"),
    "bad bin": (json.dumps({"requests": [{"model_version": "1", "input_length_bin": "huge", "latency_s": 0.1}]}).encode(),
                'requests[0]: "input_length_bin" must be one of tiny, small, large, xlarge'),
}


@pytest.mark.parametrize("what", sorted(BAD_INPUTS))
def test_bad_input_exits_1_with_a_message_and_no_traceback(tmp_path, what):
    content, message = BAD_INPUTS[what]
    path = tmp_path / "input"
    path.write_bytes(content)
    out = tmp_path / "out.png"
    argv = [str(path), "-o", str(out)] + (["--model", "zzz"] if what == "unknown model" else [])
    proc = subprocess.run(python_entry("inferx_compiler.cli.heatmap") + argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: ") and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not out.exists()


def test_usage_errors_exit_2(tmp_path):
    assert main([str(tmp_path / "missing.txt"), "-o", str(tmp_path / "x.png")]) == 2
    scrape = tmp_path / "scrape.txt"
    scrape.write_bytes(_scrape())
    assert main([str(scrape)]) == 2  # -o is required
    assert main([str(scrape), "-o", str(tmp_path / "x.png"), "--quantile", "1.5"]) == 2


def test_unwritable_output_exits_1(tmp_path, capsys):
    scrape = tmp_path / "scrape.txt"
    scrape.write_bytes(_scrape())
    assert main([str(scrape), "-o", str(tmp_path / "no" / "such" / "dir.png")]) == 1
    assert "cannot write" in capsys.readouterr().err


# -- a real server's scrape -------------------------------------------------------------------

def test_heatmap_of_a_real_servers_scrape(served_mlp, tmp_path, capsys):
    """inferx-serve's own /metrics after 20 requests: one finite cell per version and bin it saw."""
    body = json.dumps({"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}]}).encode()
    for _ in range(20):
        req = urllib.request.Request(served_mlp + "/v2/models/mlp/infer", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200
    with urllib.request.urlopen(served_mlp + "/metrics", timeout=30) as r:
        text = r.read().decode()
    scrape = tmp_path / "scrape.txt"
    scrape.write_text(text)
    assert main([str(scrape), "-o", str(tmp_path / "served.png"), "--model", "mlp"]) == 0
    _check_png(tmp_path / "served.png")
    table = load_table(text, model="mlp")
    finite = {key: table.counts[key] for key, v in table.cells.items() if math.isfinite(v)}
    assert finite and sum(finite.values()) >= 20
    assert all(0 < table.cells[key] < 10 for key in finite)
