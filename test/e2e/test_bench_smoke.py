"""Smoke test of the benchmark harness (tools/bench): it runs end to end; no timing assertions."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "bench")


def _load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(BENCH, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # (dataclasses look their module up)
    sys.path.insert(0, os.path.abspath(BENCH))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(os.path.abspath(BENCH))
    return mod


def test_models_build_and_are_deterministic():
    import onnx
    from onnx import numpy_helper

    models = _load("models")
    for name in ("tiny", "mlp_lite", "bert_lite", "gpt2_lite", "resnet_lite"):
        m = models.build(name)
        onnx.checker.check_model(m)
        dims = [d.dim_param for d in m.graph.input[0].type.tensor_type.shape.dim]
        assert dims[0] == "batch", name
    a, b = models.build("tiny"), models.build("tiny")
    for x, y in zip(a.graph.initializer, b.graph.initializer):
        assert (numpy_helper.to_array(x) == numpy_helper.to_array(y)).all()


def test_report_marks_wrong_answers_and_writes_png(tmp_path):
    report = _load("report")
    rows = [
        {"model": "m", "batch": 1, "system": "inferx-fp32", "status": "ok", "rel_l2": 1e-7, "median_ms": 2.0,
         "min_ms": 1.9, "max_ms": 2.5, "best_peer": "ort", "x_best_peer": 2.0, "compile_s": 1.0,
         "peak_rss_mib": 300.0, "artifact_bytes": 1000},
        {"model": "m", "batch": 1, "system": "ort", "status": "ok", "rel_l2": 0.0, "median_ms": 1.0,
         "min_ms": 0.9, "max_ms": 1.1, "best_peer": "ort", "x_best_peer": 1.0},
        {"model": "m", "batch": 1, "system": "iree", "status": "wrong", "rel_l2": 0.41, "samples_ms": []},
    ]
    doc = {"date": "d", "mode": "smoke", "machine": {"threads": 2}, "rows": rows, "complete": True}
    md = report.markdown(doc)
    assert "WRONG (rel L2 4.1e-01)" in md and "2.00×" in md
    png = tmp_path / "c.png"
    report._numpy_chart([("m b1", r["system"], r.get("x_best_peer"), r["status"]) for r in rows], "t", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_harness_smoke_run(tmp_path):
    systems = "inferx-fp32,iree,ort,ort-int8"
    if importlib.util.find_spec("torch") is not None:
        systems += ",torch"
    out = tmp_path / "out"
    cmd = [sys.executable, os.path.join(BENCH, "run.py"), "--smoke", "--cache", str(tmp_path / "cache"),
           "--out", str(out), "--systems", systems, "--batches", "2", "--rounds", "2", "--gap-ms", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    assert doc["complete"] and doc["machine"]["threads"] == 2
    by = {r["system"]: r for r in doc["rows"]}
    assert set(by) == set(systems.split(","))
    for name in ("inferx-fp32", "iree", "ort"):
        r = by[name]
        assert r["status"] == "ok", r
        assert r["rel_l2"] <= 1e-4 and len(r["samples_ms"]) == 2 and r["min_ms"] <= r["median_ms"] <= r["max_ms"]
        assert r["x_best_peer"] > 0
    for name in ("inferx-fp32", "iree", "ort-int8"):
        assert by[name]["compile_s"] > 0 and by[name]["artifact_bytes"] > 0
    assert by["inferx-fp32"]["peak_rss_mib"] > 10
    assert (out / "results.md").read_text().startswith("# inferx benchmark")
    assert (out / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", ["tiny"])
def test_prepare_gpu_weight_rebuild_is_exact(name):
    """gpu.py rebuilds weights on the GPU host from the seed; the digests must be reproducible."""
    models = _load("models")
    sys.path.insert(0, os.path.abspath(BENCH))
    try:
        prep = _load("prepare_gpu")
    finally:
        sys.path.remove(os.path.abspath(BENCH))
    assert prep.weight_digests(models.build(name)) == prep.weight_digests(models.build(name))


def _serving_figures():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "serving_figures.py")
    spec = importlib.util.spec_from_file_location("serving_figures", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _step(processes, clients, rps, p99=1.0, bound=2.0):
    return {"processes": processes, "clients_per_process": clients, "concurrency": processes * clients,
            "throughput_rps": rps, "p50_ms": p99 / 2, "p99_ms": p99, "mean_batch": 8.0,
            "median_batch_exec_ms": 0.5, "p99_bound_static_ms": bound, "p99_bound_in_run_ms": bound,
            "within_static_bound": p99 <= bound, "within_in_run_bound": p99 <= bound}


def test_serving_figures_knee_is_the_fewest_clients_near_the_best():
    """Saturation = the step with the fewest clients in all within 90% of the best throughput;
    past it, more clients only add queueing."""
    sf = _serving_figures()
    steps = [_step(1, 8, 500), _step(1, 16, 950), _step(1, 32, 1000, p99=9.0),
             _step(4, 8, 960), _step(4, 16, 990)]
    assert (sf.knee(steps)["processes"], sf.knee(steps)["clients_per_process"]) == (1, 16)
    steps.append(_step(4, 32, 4000))
    assert sf.knee(steps)["concurrency"] == 128  # the only step within 90% of 4000


def test_serving_figures_redo_rewrites_the_report(tmp_path):
    """--redo recomputes the saturation point from a saved JSON (string keys, as json writes
    them) and rewrites the markdown and the plot beside it."""
    sf = _serving_figures()
    result = {"artifact": "m.ixa", "device": "cpu:sync", "instances": 1,
              "config": {"max_batch_size": 16, "max_queue_delay_us": 100, "preferred_batch_sizes": [16]},
              "static": {"8": {"exec_ms": 1.0, "rows_per_s": 8000.0}}, "best_static_batch": 8,
              "static_by_processes": {"1": 7000.0},
              "load_sweep": {"1": [_step(1, 8, 4000), _step(1, 16, 7500, p99=1.5), _step(1, 32, 7600, p99=4.0)]},
              "p99_budget_ms": 10.0,
              "max_rate_within_budget": {"batching": 5000.0, "no_batching": 2000.0,
                                         "batching_processes": 1, "no_batching_processes": 1}}
    overhead = {"device": "cpu:sync", "overhead_us": 15.0, "direct_run_us": 30.0, "through_batcher_us": 45.0,
                "future_overhead_us": 100.0, "batcher_alone_noop_model_us": 70.0, "cpu_workers": None}
    path = tmp_path / "serving_cpu-sync.json"
    path.write_text(json.dumps({"results": [result], "overhead": overhead}))
    assert sf.redo(str(path)) == 0
    doc = json.loads(path.read_text())["results"][0]
    assert doc["saturation"]["clients_per_process"] == 16 and doc["processes"] == 1
    assert abs(doc["saturation_vs_static_same_processes"] - 7500 / 7000) < 1e-9
    md = (tmp_path / "serving_cpu-sync.md").read_text()
    assert "| m.ixa | 1 × 16 * | 7500 |" in md and "yes / yes" in md
    assert (tmp_path / "serving_cpu-sync.png").read_bytes()[:4] == b"\x89PNG"


def test_the_zoo_is_varied_valid_and_seeded():
    """tools/bench/zoo.py: at least 40 models over every family, each a valid ONNX graph with a
    dynamic batch dim that onnxruntime runs at batch 2; the same seed gives the same weights."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    zoo = _load("zoo")
    models = _load("models")
    listed = zoo.zoo_models(0)
    assert len(listed) >= 40 and {m.family for m in listed} == set(zoo.FAMILIES)
    assert len({m.name for m in listed}) == len(listed)
    conv = [m.params for m in listed if m.family == "conv"]
    assert {p["block"] for p in conv} == {"plain", "residual", "dwsep", "grouped", "concat"}
    assert any(w % 16 for p in conv for w in p["widths"]) and {p["stem_k"] for p in conv} >= {3, 5, 7}
    assert any(not p["bn_folded"] for p in conv) and any(p["dilation"] > 1 for p in conv)
    for m in listed:
        if m.family in ("tiny", "decoder") or m.name in ("conv03_grouped_16", "conv12_dwsep_16", "enc09_d128h1s16"):
            proto = m.build()
            onnx.checker.check_model(proto)
            assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch", m.name
            session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
            feeds = models.feeds(proto, 2)
            assert session.run(None, feeds)[0].shape[0] == 2, m.name
    a, b = zoo.zoo_models(0)[0].build(), zoo.zoo_models(0)[0].build()
    assert all((numpy_helper.to_array(x) == numpy_helper.to_array(y)).all()
               for x, y in zip(a.graph.initializer, b.graph.initializer))
    assert [m.params for m in zoo.zoo_models(1)] != [m.params for m in listed]


def test_the_zoo_runner_measures_and_reports(tmp_path):
    """One tiny zoo model through the runner: compiled with default flags, checked against
    onnxruntime, timed, profiled, written as tables (no timing asserted)."""
    out = tmp_path / "zoo"
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "run.py"), "--zoo", "--families", "tiny", "--limit", "1",
                           "--rounds", "1", "--block-ms", "5", "--cache", str(tmp_path / "cache"), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((out / "results.json").read_text())
    row = result["rows"][0]
    assert row["model"] == "tiny_cnn32" and "error" not in row
    for entry in row["batches"].values():
        assert entry["rel_l2"] < 1e-3 and entry["inferx_ms"] > 0 and entry["ort_ms"] > 0
    table = (out / "results.md").read_text()
    assert "| tiny | 2 |" in table and "geometric mean" in table
    worst = table.split("Worst ten")[1]  # each with the dispatch that takes the most of a call
    assert re.search(r"\| tiny_cnn32 \| [12] \| [0-9.]+ \| \S+ \d+% \(", worst), worst
