"""inferx-serve: the KServe v2 JSON protocol and Prometheus metrics over a real CPU artifact."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest

from helpers import onnxruntime_outputs, rel_l2, run_clients
from inferx_compiler.cli.common import python_entry
from inferx_compiler.runtime.server import InferenceServer
from inferx_compiler.runtime.service import Service, ServiceOptions

# The CNN's batch-1 call is about 1.5 MFLOP: device `cpu` serves it on local-sync (the caller's
# thread), so its first lane is `cpu:sync#0`.
LANE = "cpu:sync#0"


@pytest.fixture(scope="module")
def server(cnn_artifact):
    service = Service(cnn_artifact[1], ServiceOptions(max_queue_delay_us=5000))
    srv = InferenceServer(service, "cnn", port=0).start()
    yield srv
    srv.shutdown()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def post(url: str, body) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def tensor(name: str, array: np.ndarray, datatype: str = "FP32") -> dict:
    return {"name": name, "shape": list(array.shape), "datatype": datatype, "data": array.ravel().tolist()}


def test_health_and_metadata(server):
    assert get(server.url + "/v2/health/live")[0] == 200
    assert get(server.url + "/v2/health/ready")[0] == 200
    status, body = get(server.url + "/v2/models/cnn")
    meta = json.loads(body)
    assert status == 200 and meta["name"] == "cnn"
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 3, 32, 32]}]
    assert meta["outputs"] == [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}]


@pytest.mark.parametrize("rows", [1, 3])
def test_infer_matches_onnxruntime(server, cnn_artifact, rows):
    x = np.random.default_rng(rows).standard_normal((rows, 3, 32, 32)).astype(np.float32)
    status, body = post(server.url + "/v2/models/cnn/infer", {"id": f"r{rows}", "inputs": [tensor("x", x)]})
    assert status == 200 and body["id"] == f"r{rows}" and body["model_name"] == "cnn"
    out = body["outputs"][0]
    assert out["name"] == "logits" and out["datatype"] == "FP32" and out["shape"] == [rows, 10]
    got = np.asarray(out["data"], np.float32).reshape(out["shape"])
    assert rel_l2(got, onnxruntime_outputs(cnn_artifact[0], {"x": x})["logits"]) <= 1e-4


def test_concurrent_requests_share_batches_and_each_gets_its_own_answer(server, cnn_artifact):
    """32 clients at once: every answer is its own request's (vs onnxruntime), and the batch
    metrics show that requests were batched."""
    before = _samples(get(server.url + "/metrics")[1])
    inputs = [np.full((1, 3, 32, 32), 0.1 * i, np.float32) for i in range(32)]
    results = [None] * 32

    def client(i):
        results[i] = post(server.url + "/v2/models/cnn/infer", {"inputs": [tensor("x", inputs[i])]})

    run_clients(client, 32)
    reference = onnxruntime_outputs(cnn_artifact[0], {"x": np.concatenate(inputs)})["logits"]
    for i, (status, body) in enumerate(results):
        assert status == 200
        got = np.asarray(body["outputs"][0]["data"], np.float32)
        assert rel_l2(got, reference[i]) <= 1e-4
    after = _samples(get(server.url + "/metrics")[1])
    key = ('inferx_requests_total', (("code", "200"), ("model", "cnn")))
    assert after[key] - before.get(key, 0) == 32
    lane = (("lane", LANE), ("model", "cnn"))
    batches = after[("inferx_batches_total", lane)] - before.get(("inferx_batches_total", lane), 0)
    rows = after[("inferx_batch_rows_total", lane)] - before.get(("inferx_batch_rows_total", lane), 0)
    assert rows == 32 and batches < 32


@pytest.mark.parametrize("body, status, message", [
    ({"inputs": [{"name": "x", "shape": [2, 3, 32], "datatype": "FP32", "data": [0.0] * 192}]}, 400,
     "input 'x': expected rank 4"),
    ({"inputs": [{"name": "y", "shape": [1], "datatype": "FP32", "data": [0.0]}]}, 400, "unknown input 'y'"),
    ({"inputs": [{"name": "x", "shape": [1, 3, 32, 32], "datatype": "INT64", "data": [0] * 3072}]}, 400,
     "datatype INT64 but the model takes FP32"),
    ({"inputs": [{"name": "x", "shape": [1, 3, 32, 32], "datatype": "FP32", "data": [0.0] * 5}]}, 400,
     "holds 3072 elements, data has 5"),
    ({"inputs": []}, 400, "missing input(s): x"),
    ({"inputs": [{"name": "x", "shape": [1, 3, 32, 32], "datatype": "FP32"}]}, 400,
     "neither \"data\" nor parameters.binary_data_size"),
    ({"nothing": 1}, 400, "must be a JSON object with an \"inputs\" list"),
    (b"{not json", 400, "not valid JSON"),
])
def test_bad_requests_say_what_is_wrong(server, body, status, message):
    got_status, got = post(server.url + "/v2/models/cnn/infer", body)
    assert got_status == status and message in got["error"]


def _binary_request(arrays: dict, binary_output: bool) -> tuple[bytes, dict]:
    header = {"inputs": [{"name": k, "shape": list(a.shape), "datatype": "FP32",
                          "parameters": {"binary_data_size": a.nbytes}} for k, a in arrays.items()],
              "parameters": {"binary_data_output": binary_output}}
    head = json.dumps(header).encode()
    body = head + b"".join(a.astype("<f4").tobytes() for a in arrays.values())
    return body, {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(head))}


@pytest.mark.parametrize("binary_output", [False, True])
def test_binary_tensor_extension(server, cnn_artifact, binary_output):
    """Inputs as raw bytes after the JSON header; outputs as raw bytes when asked."""
    x = np.random.default_rng(5).standard_normal((2, 3, 32, 32)).astype(np.float32)
    body, headers = _binary_request({"x": x}, binary_output)
    req = urllib.request.Request(server.url + "/v2/models/cnn/infer", data=body, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        payload, header_length = r.read(), r.headers.get("Inference-Header-Content-Length")
    reference = onnxruntime_outputs(cnn_artifact[0], {"x": x})["logits"]
    if binary_output:
        head = json.loads(payload[:int(header_length)])
        out = head["outputs"][0]
        assert out["shape"] == [2, 10] and out["parameters"]["binary_data_size"] == 80 and "data" not in out
        got = np.frombuffer(payload[int(header_length):], "<f4").reshape(2, 10)
    else:
        assert header_length is None
        got = np.asarray(json.loads(payload)["outputs"][0]["data"], np.float32).reshape(2, 10)
    assert rel_l2(got, reference) <= 1e-4


def test_binary_size_mismatch_is_refused(server):
    x = np.zeros((1, 3, 32, 32), np.float32)
    body, headers = _binary_request({"x": x}, False)
    req = urllib.request.Request(server.url + "/v2/models/cnn/infer", data=body[:-4], headers=headers)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 400 and "binary_data_size 12288" in json.loads(e.value.read())["error"]


def test_unknown_model_and_path(server):
    status, body = post(server.url + "/v2/models/other/infer", {"inputs": []})
    assert status == 404 and "unknown model 'other'" in body["error"]
    assert get(server.url + "/v2/nothing")[0] == 404


def test_metrics_are_valid_prometheus_text(server):
    post(server.url + "/v2/models/cnn/infer", {"inputs": [tensor("x", np.zeros((1, 3, 32, 32), np.float32))]})
    status, text = get(server.url + "/metrics")
    assert status == 200
    sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*\})? [-+0-9.eEInf]+$')
    for line in text.splitlines():
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or sample.match(line), line
    samples = _samples(text)
    for family in ("inferx_request_duration_seconds", "inferx_batch_size", "inferx_batch_exec_seconds"):
        buckets = sorted(((float(dict(k)["le"]), v) for (name, k), v in samples.items()
                          if name == family + "_bucket"), key=lambda b: b[0])
        counts = [v for _, v in buckets]
        assert counts == sorted(counts) and buckets[-1][0] == float("inf")  # cumulative, ends at +Inf
        count = sum(v for (name, _), v in samples.items() if name == family + "_count")
        assert count == sum(v for (le, v) in buckets if le == float("inf")) > 0


def test_cli_serves_until_sigterm(cnn_artifact):
    proc = subprocess.Popen(python_entry("inferx_compiler.cli.serve") + [cnn_artifact[1], "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = re.match(r"serving cnn on (http://127\.0\.0\.1:\d+)$", line.strip())
        assert match, line + proc.stderr.read() if proc.poll() is not None else line
        url = match.group(1)
        x = np.ones((1, 3, 32, 32), np.float32)
        status, body = post(url + "/v2/models/cnn/infer", {"inputs": [tensor("x", x)]})
        assert status == 200 and body["outputs"][0]["shape"] == [1, 10]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_cli_refuses_a_missing_artifact(tmp_path):
    proc = subprocess.run(python_entry("inferx_compiler.cli.serve") + [str(tmp_path / "none.ixa"), "--port", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "none.ixa" in proc.stderr and "Traceback" not in proc.stderr


def _samples(text: str) -> dict:
    """{(sample name, sorted label items): value} from Prometheus text."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        head, value = line.rsplit(" ", 1)
        name, _, labels = head.partition("{")
        items = tuple(sorted(re.findall(r'([a-zA-Z_]+)="([^"]*)"', labels)))
        out[(name, items)] = float(value)
    return out


def test_a_model_without_a_batch_dim_is_served_one_request_at_a_time(tmp_path):
    """Static shapes: nothing to batch along, so each request runs alone through the same queue."""
    import onnx
    from onnx import TensorProto, helper

    from inferx_compiler.cli.compile import main as compile_main

    g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["y"])], "static",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "s.onnx")
    assert compile_main([str(tmp_path / "s.onnx"), "--target", "cpu", "-o", str(tmp_path / "s.ixa"), "-q"]) == 0
    service = Service(str(tmp_path / "s.ixa"))
    srv = InferenceServer(service, "s", port=0).start()
    try:
        assert not service.scheduler.lanes[0].batcher.batchable and service.config.max_batch_size == 1
        results = [None] * 8

        def client(i):
            x = np.full((2, 3), float(i), np.float32)
            results[i] = post(srv.url + "/v2/models/s/infer", {"inputs": [tensor("x", x)]})

        run_clients(client, 8)
        for i, (status, body) in enumerate(results):
            assert status == 200 and body["outputs"][0]["shape"] == [2, 3]
            assert body["outputs"][0]["data"] == [2.0 * i] * 6
        status, body = post(srv.url + "/v2/models/s/infer",
                            {"inputs": [tensor("x", np.zeros((1, 3), np.float32))]})
        assert status == 400 and "input 'x'" in body["error"]
    finally:
        srv.shutdown()


def test_cli_workers_share_the_port_and_sum_their_metrics(cnn_artifact):
    """--workers 2: two server processes on one port; /metrics on either counts both."""
    import time

    proc = subprocess.Popen(python_entry("inferx_compiler.cli.serve") + [cnn_artifact[1], "--port", "0",
                                                                         "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = re.match(r"serving cnn on (http://127\.0\.0\.1:\d+) \(2 workers\)$", line.strip())
        assert match, line + (proc.stderr.read() if proc.poll() is not None else "")
        url = match.group(1)
        x = np.ones((1, 3, 32, 32), np.float32)
        results = []

        def client():
            for _ in range(10):  # a new connection each time: the kernel spreads them over the workers
                results.append(post(url + "/v2/models/cnn/infer", {"inputs": [tensor("x", x)]})[0])

        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [200] * 40
        time.sleep(1.0)  # other workers publish their figures every 0.5 s
        samples = _samples(get(url + "/metrics")[1])
        assert samples[("inferx_requests_total", (("code", "200"), ("model", "cnn")))] == 40
        assert samples[("inferx_batch_rows_total", (("lane", LANE), ("model", "cnn")))] >= 40
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0


def test_body_over_the_limit_is_refused(server, monkeypatch):
    import inferx_compiler.runtime.server as server_module

    monkeypatch.setattr(server_module, "MAX_BODY_BYTES", 100)
    status, body = post(server.url + "/v2/models/cnn/infer",
                        {"inputs": [tensor("x", np.zeros((1, 3, 32, 32), np.float32))]})
    assert status == 413 and "over the limit of 100" in body["error"]


def test_serving_on_cpu_sync_instances(cnn_artifact):
    """A server on `cpu:sync` with two model instances: concurrent answers match onnxruntime
    and the lane is named after the device."""
    service = Service(cnn_artifact[1], ServiceOptions(devices=("cpu:sync",), instances=2, max_queue_delay_us=2000))
    srv = InferenceServer(service, "cnn", port=0).start()
    try:
        inputs = [np.random.default_rng(i).standard_normal((1, 3, 32, 32)).astype(np.float32) for i in range(16)]
        answers = [None] * len(inputs)

        def client(i):
            answers[i] = post(srv.url + "/v2/models/cnn/infer", {"inputs": [tensor("x", inputs[i])]})

        run_clients(client, len(inputs))
        reference = onnxruntime_outputs(cnn_artifact[0], {"x": np.concatenate(inputs)})["logits"]
        for i, (status, body) in enumerate(answers):
            assert status == 200
            got = np.asarray(body["outputs"][0]["data"], np.float32).reshape(1, 10)
            assert rel_l2(got, reference[i:i + 1]) <= 1e-4
        assert 'lane="cpu:sync#0"' in get(srv.url + "/metrics")[1]
    finally:
        srv.shutdown()
