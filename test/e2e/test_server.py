"""inferx-serve: the Open Inference Protocol (KServe v2 / Triton) over HTTP and gRPC, driven by
stock tritonclient (HTTP and gRPC, with and without versions, JSON and binary tensors) and
compared with onnxruntime; /metrics parsed with prometheus_client's parser; every bad request
followed by a good one on the same connection; the CLI, --model-repository and --workers."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

import numpy as np
import pytest

from helpers import onnxruntime_outputs, rel_l2, run_clients
from inferx_compiler.cli.common import python_entry
from inferx_compiler.runtime.batching import BatchingConfig, DynamicBatcher
from inferx_compiler.runtime.repository import ModelRepository, ModelVersion, length_rule
from inferx_compiler.runtime.scheduler import Lane, Scheduler
from inferx_compiler.runtime.server import InferenceServer
from inferx_compiler.runtime.service import Service, ServiceOptions
from inferx_compiler.tensor_spec import TensorSpec

grpcclient = pytest.importorskip("tritonclient.grpc")
httpclient = pytest.importorskip("tritonclient.http")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

MAX_BODY = 1 << 20  # the fixture server's body limit (the CNN's largest request here is ~0.6 MB)


class PyModel:
    """A Service-like model over a real DynamicBatcher running Python code: y = 2 x for x of
    shape [batch, seq]. A batch holding the value 666 fails; while `gate` is clear every batch
    waits (queue full, queue timeouts, draining at shutdown)."""

    def __init__(self, max_batch_size: int = 4, max_queue_size: int = 4096):
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Semaphore(0)  # released as each batch starts running
        self.inputs = [TensorSpec("x", "float32", ("batch", "seq"))]
        self.outputs = [TensorSpec("y", "float32", ("batch", "seq"))]
        config = BatchingConfig(max_batch_size=max_batch_size, max_queue_delay_us=500, max_queue_size=max_queue_size)
        self.batcher = DynamicBatcher(self._run, self.inputs, config, name="py")
        self.scheduler = Scheduler([Lane("py#0", self.batcher, 1.0)])
        self.config = self.batcher.config
        self.instances = [[SimpleNamespace(device="cpu")]]
        self.artifact = "python"

    def _run(self, feeds: dict) -> dict:
        self.entered.release()
        self.gate.wait(60)
        x = feeds["x"]
        if (x == 666).any():
            raise RuntimeError("poisoned batch")
        return {"y": x * 2}

    def close(self) -> None:
        self.gate.set()
        self.scheduler.close()

    def wait_running(self) -> None:
        """Until a batch has started (and, with the gate clear, is held)."""
        assert self.entered.acquire(timeout=30), "no batch started"


@pytest.fixture(scope="module")
def cnn_services(cnn_artifact):
    """The CNN twice, as versions 1 and 2 of model `cnn` (the same weights)."""
    opts = ServiceOptions(max_queue_delay_us=5000)
    return [Service(cnn_artifact[1], opts), Service(cnn_artifact[1], opts)]


@pytest.fixture(scope="module")
def server(cnn_services):
    py, pyq = PyModel(), PyModel(max_queue_size=1)
    repo = ModelRepository([ModelVersion("cnn", "1", "cnn.ixa", cnn_services[0]),
                            ModelVersion("cnn", "2", "cnn.ixa", cnn_services[1]),
                            ModelVersion("py", "1", "python", py), ModelVersion("pyq", "1", "python", pyq)])
    srv = InferenceServer(repo, port=0, grpc_port=0, max_body_bytes=MAX_BODY, read_timeout_s=1.0).start()
    srv.py, srv.pyq = py, pyq
    yield srv
    srv.shutdown()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def post(url: str, body, headers: dict | None = None) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers=headers or {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def tensor(name: str, array: np.ndarray, datatype: str = "FP32") -> dict:
    return {"name": name, "shape": list(array.shape), "datatype": datatype, "data": array.ravel().tolist()}


def cnn_input(rows: int = 1, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 3, 32, 32)).astype(np.float32)


def metric_samples(url: str) -> dict:
    """{(sample name, sorted label items): value}, parsed by prometheus_client's parser."""
    out = {}
    for family in text_string_to_metric_families(get(url + "/metrics")[1]):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def families(url: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(get(url + "/metrics")[1])}


# -- health, metadata, repository ------------------------------------------------------------
def test_health_and_server_metadata(server):
    assert get(server.url + "/v2/health/live") == (200, '{"live": true}')
    assert get(server.url + "/v2/health/ready")[0] == 200
    status, body = get(server.url + "/v2")
    meta = json.loads(body)
    assert status == 200 and meta["name"] == "inferx" and meta["version"]
    assert {"binary_tensor_data", "model_repository"} <= set(meta["extensions"])


@pytest.mark.parametrize("path", ["/v2/models/cnn", "/v2/models/cnn/versions/1", "/v2/models/cnn/versions/2"])
def test_model_metadata_with_and_without_versions(server, path):
    status, body = get(server.url + path)
    meta = json.loads(body)
    assert status == 200 and meta["name"] == "cnn" and meta["platform"] == "inferx"
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 3, 32, 32]}]
    assert meta["outputs"] == [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}]
    assert meta["versions"] == (["1", "2"] if path.endswith("cnn") else [path[-1]])
    assert get(server.url + path + "/ready") == (200, json.dumps({"name": "cnn", "ready": True}))


def test_unknown_model_version_and_path(server):
    status, body = get(server.url + "/v2/models/cnn/versions/3")
    assert status == 404 and "model 'cnn' has no version '3' (it has: 1, 2)" in json.loads(body)["error"]
    assert get(server.url + "/v2/models/other/ready")[0] == 404
    status, body = get(server.url + "/v2/nothing")
    assert status == 404 and json.loads(body) == {"error": "no such path: /v2/nothing"}


def test_repository_index_and_refused_load(server):
    status, index = post(server.url + "/v2/repository/index", {})
    assert status == 200 and [(m["name"], m["version"], m["state"]) for m in index] == [
        ("cnn", "1", "READY"), ("cnn", "2", "READY"), ("py", "1", "READY"), ("pyq", "1", "READY")]
    status, body = post(server.url + "/v2/repository/models/cnn/load", {})
    assert status == 400 and "does not load or unload models" in body["error"]


def test_openapi_document_marks_every_endpoint(server):
    from inferx_compiler.runtime.http_app import ENDPOINTS

    status, body = get(server.url + "/openapi.json")
    doc = json.loads(body)
    assert status == 200 and doc["openapi"].startswith("3.")
    operations = [(path, method, op) for path, item in doc["paths"].items() for method, op in item.items()]
    assert {(p, m.upper()) for p, m, _ in operations} == {(p, m) for m, p, *_ in ENDPOINTS}
    assert all(op["x-stability"] in ("stable", "preview") for _, _, op in operations)
    assert doc["paths"]["/v2/models/{name}/versions/{version}/infer"]["post"]["x-stability"] == "stable"


# -- inference: JSON, binary, versions, tritonclient ----------------------------------------------
@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("version", [None, "1", "2"])
def test_infer_json_matches_onnxruntime(server, cnn_artifact, rows, version):
    x = cnn_input(rows, rows)
    path = "/v2/models/cnn" + (f"/versions/{version}" if version else "") + "/infer"
    status, body = post(server.url + path, {"id": f"r{rows}", "inputs": [tensor("x", x)]})
    assert status == 200 and body["id"] == f"r{rows}" and body["model_name"] == "cnn"
    assert body["model_version"] == (version or "2")  # no version: the highest
    out = body["outputs"][0]
    assert out["name"] == "logits" and out["datatype"] == "FP32" and out["shape"] == [rows, 10]
    got = np.asarray(out["data"], np.float32).reshape(out["shape"])
    assert rel_l2(got, onnxruntime_outputs(cnn_artifact[0], {"x": x})["logits"]) <= 1e-4


def _binary_request(arrays: dict, binary_output: bool) -> tuple[bytes, dict]:
    header = {"inputs": [{"name": k, "shape": list(a.shape), "datatype": "FP32",
                          "parameters": {"binary_data_size": a.nbytes}} for k, a in arrays.items()],
              "parameters": {"binary_data_output": binary_output}}
    head = json.dumps(header).encode()
    body = head + b"".join(a.astype("<f4").tobytes() for a in arrays.values())
    return body, {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(head))}


@pytest.mark.parametrize("binary_output", [False, True])
def test_binary_tensor_extension(server, cnn_artifact, binary_output):
    x = cnn_input(2, 5)
    body, headers = _binary_request({"x": x}, binary_output)
    req = urllib.request.Request(server.url + "/v2/models/cnn/versions/1/infer", data=body, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        payload, header_length = r.read(), r.headers.get("Inference-Header-Content-Length")
    reference = onnxruntime_outputs(cnn_artifact[0], {"x": x})["logits"]
    if binary_output:
        out = json.loads(payload[:int(header_length)])["outputs"][0]
        assert out["shape"] == [2, 10] and out["parameters"]["binary_data_size"] == 80 and "data" not in out
        got = np.frombuffer(payload[int(header_length):], "<f4").reshape(2, 10)
    else:
        assert header_length is None
        got = np.asarray(json.loads(payload)["outputs"][0]["data"], np.float32).reshape(2, 10)
    assert rel_l2(got, reference) <= 1e-4


@pytest.mark.parametrize("version", ["", "1", "2"])
@pytest.mark.parametrize("binary", [False, True])
def test_tritonclient_http(server, cnn_artifact, version, binary):
    client = httpclient.InferenceServerClient(server.url[len("http://"):])
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("cnn", version)
    assert "binary_tensor_data" in client.get_server_metadata()["extensions"]
    assert client.get_model_metadata("cnn", version)["inputs"][0]["shape"] == [-1, 3, 32, 32]
    assert client.get_model_config("cnn", version)["max_batch_size"] == 8
    assert {(m["name"], m["version"]) for m in client.get_model_repository_index()} >= {("cnn", "1"), ("cnn", "2")}
    x = cnn_input(3, 7)
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    out = httpclient.InferRequestedOutput("logits", binary_data=binary)
    result = client.infer("cnn", [inp], model_version=version, outputs=[out], request_id="abc")
    assert result.get_response()["model_version"] == (version or "2") and result.get_response()["id"] == "abc"
    assert rel_l2(result.as_numpy("logits"), onnxruntime_outputs(cnn_artifact[0], {"x": x})["logits"]) <= 1e-4
    client.close()


@pytest.mark.parametrize("version", ["", "1", "2"])
def test_tritonclient_grpc(server, cnn_artifact, version):
    client = grpcclient.InferenceServerClient(server.grpc_address)
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("cnn", version) and not client.is_model_ready("cnn", "9")
    assert "binary_tensor_data" in client.get_server_metadata().extensions
    meta = client.get_model_metadata("cnn", version)
    assert meta.name == "cnn" and list(meta.inputs[0].shape) == [-1, 3, 32, 32]
    config = client.get_model_config("cnn", version).config
    assert config.max_batch_size == 8 and list(config.input[0].dims) == [3, 32, 32]
    assert {(m.name, m.version) for m in client.get_model_repository_index().models} >= {("cnn", "1"), ("cnn", "2")}
    x = cnn_input(2, 9)
    inp = grpcclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    result = client.infer("cnn", [inp], model_version=version, outputs=[grpcclient.InferRequestedOutput("logits")],
                          request_id="g1")
    response = result.get_response()
    assert response.model_version == (version or "2") and response.id == "g1"
    assert rel_l2(result.as_numpy("logits"), onnxruntime_outputs(cnn_artifact[0], {"x": x})["logits"]) <= 1e-4
    client.close()


def _stream(client, requests: list[dict], timeout: float = 60, one_by_one: bool = False) -> list:
    """Send `requests` (async_stream_infer keyword sets) on one stream, all at once or each
    after the previous answer; the (result, error) pairs in the order they came back."""
    import queue

    answers, out = queue.Queue(), []
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        for kwargs in requests:
            client.async_stream_infer(**kwargs)
            if one_by_one:
                out.append(answers.get(timeout=timeout))
        return out + [answers.get(timeout=timeout) for _ in range(len(requests) - len(out))]
    finally:
        client.stop_stream()


def test_grpc_stream_answers_in_order_and_batches(server, cnn_artifact):
    """tritonclient's stream (ModelStreamInfer): 24 requests sent without waiting are answered
    in order, each with its own outputs (vs onnxruntime), and served together: fewer batches
    than requests."""
    labels = (("model", "cnn"), ("model_version", "2"))
    before = metric_samples(server.url)
    client = grpcclient.InferenceServerClient(server.grpc_address)
    inputs = [cnn_input(1 + i % 2, 300 + i) for i in range(24)]
    requests = []
    for i, x in enumerate(inputs):
        inp = grpcclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        requests.append(dict(model_name="cnn", inputs=[inp], request_id=f"s{i}", model_version="2" if i % 3 else ""))
    answers = _stream(client, requests)
    reference = onnxruntime_outputs(cnn_artifact[0], {"x": np.concatenate(inputs)})["logits"]
    row = 0
    for i, (result, error) in enumerate(answers):
        assert error is None, error
        response = result.get_response()
        assert response.id == f"s{i}" and response.model_version == "2"
        rows = inputs[i].shape[0]
        assert rel_l2(result.as_numpy("logits"), reference[row:row + rows]) <= 1e-4
        row += rows
    client.close()
    after = metric_samples(server.url)
    delta = lambda name: after[(name, labels)] - before.get((name, labels), 0)  # noqa: E731
    assert delta("inference_batch_size_sum") == row and delta("inference_batch_size_count") < 24


def test_grpc_stream_refusals_answer_in_the_stream(server):
    """A refused request answers an error in its place and the stream goes on (a failing batch
    too); the empty-final-response flag marks the answer final."""
    client = grpcclient.InferenceServerClient(server.grpc_address)

    def x(name="x", shape=(1, 2), value=1.0):
        t = grpcclient.InferInput(name, list(shape), "FP32")
        t.set_data_from_numpy(np.full(shape, value, np.float32))
        return t

    answers = _stream(client, [
        dict(model_name="py", inputs=[x()], request_id="a"),
        dict(model_name="nope", inputs=[x()], request_id="b"),
        dict(model_name="py", inputs=[x(name="z")], request_id="c"),
        dict(model_name="py", model_version="4", inputs=[x()], request_id="d"),
        dict(model_name="py", inputs=[x(value=666.0)], request_id="e"),
        dict(model_name="py", inputs=[x(value=3.0)], request_id="f", enable_empty_final_response=True),
    ], one_by_one=True)  # one at a time: the poisoned request must not share a batch with the others
    errors = [None if e is None else e.message() for _, e in answers]
    assert errors[0] is None and answers[0][0].as_numpy("y").tolist() == [[2.0, 2.0]]
    assert "unknown model 'nope'" in errors[1]
    assert "unknown input 'z'" in errors[2]
    assert "has no version '4'" in errors[3]
    assert "poisoned batch" in errors[4]
    result = answers[5][0]
    assert errors[5] is None and result.as_numpy("y").tolist() == [[6.0, 6.0]]
    response = result.get_response()
    assert response.id == "f" and response.parameters["triton_final_response"].bool_param
    assert "triton_final_response" not in answers[0][0].get_response().parameters
    client.close()


def test_grpc_typed_contents(server):
    """Values in InferTensorContents (not raw_input_contents) are read too."""
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as pbg
    import grpc

    with grpc.insecure_channel(server.grpc_address) as channel:
        stub = pbg.GRPCInferenceServiceStub(channel)
        request = pb.ModelInferRequest(model_name="py")
        request.inputs.add(name="x", datatype="FP32", shape=[1, 3]).contents.fp32_contents.extend([1.0, 2.0, 3.0])
        response = stub.ModelInfer(request, timeout=30)
    assert np.frombuffer(response.raw_output_contents[0], "<f4").tolist() == [2.0, 4.0, 6.0]


def test_concurrent_requests_share_batches(server, cnn_artifact):
    """32 clients at once: every answer is its own request's (vs onnxruntime), and the batch
    size histogram shows that requests were batched."""
    labels = (("model", "cnn"), ("model_version", "1"))
    before = metric_samples(server.url)
    inputs = [cnn_input(1, 100 + i) for i in range(32)]
    results = [None] * 32

    def client(i):
        results[i] = post(server.url + "/v2/models/cnn/versions/1/infer", {"inputs": [tensor("x", inputs[i])]})

    run_clients(client, 32)
    reference = onnxruntime_outputs(cnn_artifact[0], {"x": np.concatenate(inputs)})["logits"]
    for i, (status, body) in enumerate(results):
        assert status == 200
        assert rel_l2(np.asarray(body["outputs"][0]["data"], np.float32), reference[i]) <= 1e-4
    after = metric_samples(server.url)
    delta = lambda name: after[(name, labels)] - before.get((name, labels), 0)  # noqa: E731
    assert delta("inference_batch_size_sum") == 32 and delta("inference_batch_size_count") < 32
    assert delta("inference_queue_delay_seconds_count") == 32
    key = ("inference_requests_total", labels + (("status", "200"),))
    assert after[key] - before.get(key, 0) == 32


# -- bad requests: the right status, and the connection goes on ----------------------------------
def _x(rows=1, datatype="FP32", value=0.0):
    return {"name": "x", "shape": [rows, 3, 32, 32], "datatype": datatype, "data": [value] * (rows * 3072)}


BAD_REQUESTS = [
    ("POST", "/v2/models/other/infer", {"inputs": []}, 404, "unknown model 'other'"),
    ("POST", "/v2/models/cnn/versions/7/infer", {"inputs": [_x()]}, 404, "has no version '7'"),
    ("POST", "/v2/models/cnn/infer", b"{not json", 400, "not valid JSON"),
    ("POST", "/v2/models/cnn/infer", {"nothing": 1}, 400, 'must be a JSON object with an "inputs" list'),
    ("POST", "/v2/models/cnn/infer", {"inputs": [{**_x(), "name": "y"}]}, 400, "unknown input 'y'"),
    ("POST", "/v2/models/cnn/infer", {"inputs": [_x(), _x()]}, 400, "input 'x' is given more than once"),
    ("POST", "/v2/models/cnn/infer", {"inputs": [_x(datatype="INT64", value=0)]}, 400,
     "datatype INT64 but the model takes FP32"),
    ("POST", "/v2/models/cnn/infer", {"inputs": [{**_x(), "shape": [2, 3, 32]}]}, 400, "holds 192 elements"),
    ("POST", "/v2/models/cnn/infer", {"inputs": [{**_x(), "shape": [1, 3, 32, 16, 2]}]}, 400,
     "input 'x': expected rank 4"),
    ("POST", "/v2/models/cnn/infer", {"inputs": [{**_x(), "data": [0.0] * 5}]}, 400, "holds 3072 elements, data has 5"),
    ("POST", "/v2/models/cnn/infer", {"inputs": [{k: v for k, v in _x().items() if k != "data"}]}, 400,
     'neither "data" nor parameters.binary_data_size'),
    ("POST", "/v2/models/cnn/infer", {"inputs": []}, 400, "missing input(s): x"),
    ("POST", "/v2/models/cnn/infer", {"inputs": [_x()], "outputs": [{"name": "nope"}]}, 400, "unknown output 'nope'"),
    ("POST", "/v2/models/cnn/infer", {"inputs": [_x(rows=9)]}, 400,
     "the request has 9 rows, more than the model's max batch size 8"),
    ("POST", "/v2/models/cnn/infer", b"x" * (MAX_BODY + 10), 413, f"over the limit of {MAX_BODY}"),
    ("GET", "/v2/models/cnn/infer", None, 405, "GET is not allowed"),
    ("GET", "/v2/nothing/here", None, 404, "no such path"),
]


def test_bad_requests_then_a_good_one_on_the_same_connection(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    good = json.dumps({"inputs": [_x()]}).encode()
    before = metric_samples(server.url)
    conn.request("POST", "/v2/models/cnn/infer", good, {"Content-Type": "application/json"})
    assert conn.getresponse().read() and conn.sock is not None
    local = conn.sock.getsockname()
    for method, path, body, status, message in BAD_REQUESTS:
        data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request(method, path, data, {"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = json.loads(response.read())
        assert response.status == status and message in payload["error"], (path, payload)
        conn.request("POST", "/v2/models/cnn/infer", good, {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200 and json.loads(response.read())["outputs"][0]["shape"] == [1, 10]
        assert conn.sock is not None and conn.sock.getsockname() == local, f"connection lost after {path}"
    conn.close()
    after = metric_samples(server.url)

    def count(model, version, status):
        key = ("inference_requests_total", (("model", model), ("model_version", version), ("status", status)))
        return after.get(key, 0) - before.get(key, 0)

    assert count("", "", "404") == 1 and count("cnn", "", "404") == 1  # unknown names: bounded labels
    assert count("cnn", "2", "400") == 12 and count("cnn", "2", "413") == 1
    assert count("cnn", "2", "200") == len(BAD_REQUESTS) + 1


def test_grpc_bad_requests_then_a_good_one(server):
    import grpc

    client = grpcclient.InferenceServerClient(server.grpc_address)

    def infer(model="cnn", version="", inputs=None, outputs=None):
        return client.infer(model, inputs, model_version=version, outputs=outputs)

    def x(name="x", shape=(1, 3, 32, 32), datatype="FP32", dtype=np.float32):
        t = grpcclient.InferInput(name, list(shape), datatype)
        t.set_data_from_numpy(np.zeros(shape, dtype))
        return t

    cases = [
        (dict(model="other", inputs=[x()]), grpc.StatusCode.NOT_FOUND, "unknown model 'other'"),
        (dict(version="7", inputs=[x()]), grpc.StatusCode.NOT_FOUND, "has no version '7'"),
        (dict(inputs=[x(name="y")]), grpc.StatusCode.INVALID_ARGUMENT, "unknown input 'y'"),
        (dict(inputs=[x(), x()]), grpc.StatusCode.INVALID_ARGUMENT, "given more than once"),
        (dict(inputs=[x(datatype="INT64", dtype=np.int64)]), grpc.StatusCode.INVALID_ARGUMENT,
         "datatype INT64 but the model takes FP32"),
        (dict(inputs=[x(shape=(1, 3, 32, 16, 2))]), grpc.StatusCode.INVALID_ARGUMENT, "expected rank 4"),
        (dict(inputs=[x(shape=(9, 3, 32, 32))]), grpc.StatusCode.INVALID_ARGUMENT, "max batch size 8"),
        (dict(inputs=[x()], outputs=[grpcclient.InferRequestedOutput("nope")]), grpc.StatusCode.INVALID_ARGUMENT,
         "unknown output 'nope'"),
    ]
    for kwargs, code, message in cases:
        with pytest.raises(InferenceServerException) as e:
            infer(**kwargs)
        assert e.value.status() == str(code) and message in e.value.message(), kwargs
        assert infer(inputs=[x()]).as_numpy("logits").shape == (1, 10)
    client.close()


def _py_request(conn, model="py", value=1.0, timeout_us=None):
    doc = {"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [value, value]}]}
    if timeout_us:
        doc["parameters"] = {"timeout": timeout_us}
    conn.request("POST", f"/v2/models/{model}/infer", json.dumps(doc).encode())
    r = conn.getresponse()
    return r.status, json.loads(r.read())


def wait_until(condition, what: str, timeout_s: float = 30) -> None:
    """Until `condition()` holds (polled: what it reads has no event to wait on); fails after
    `timeout_s` naming `what`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def _in_flight(server, model: str) -> int:
    return int(metric_samples(server.url).get(("inference_in_flight", (("model", model),)), 0))


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return True
    return False


def _drain(semaphore) -> None:
    """Forget the batches that started before this test."""
    while semaphore.acquire(blocking=False):
        pass


def _hold(server, model, results, **kw):
    """A request from its own connection, in a thread; its (status, body) lands in `results`."""
    def run():
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        results.append(_py_request(conn, model, **kw))
        conn.close()

    t = threading.Thread(target=run)
    t.start()
    return t


def test_failing_batch_answers_500_to_its_own_requests_only(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    assert _py_request(conn, value=3.0) == (200, {"model_name": "py", "model_version": "1", "outputs": [
        {"name": "y", "datatype": "FP32", "shape": [1, 2], "data": [6.0, 6.0]}]})
    server.py.gate.clear()  # one poisoned request, then good ones queued behind it in other batches
    _drain(server.py.entered)
    results = []
    threads = [_hold(server, "py", results, value=666.0)]
    server.py.wait_running()
    threads += [_hold(server, "py", results, value=1.0) for _ in range(3)]
    wait_until(lambda: _in_flight(server, "py") == 4, "the three good requests received")
    server.py.gate.set()
    for t in threads:
        t.join()
    assert sorted(s for s, _ in results) == [200, 200, 200, 500]
    assert [b["error"] for s, b in results if s == 500] == ["RuntimeError: poisoned batch"]
    status, body = _py_request(conn, value=666.0)
    assert status == 500 and "poisoned batch" in body["error"]
    assert _py_request(conn)[0] == 200  # the same connection goes on
    conn.close()
    client = grpcclient.InferenceServerClient(server.grpc_address)
    inp = grpcclient.InferInput("x", [1, 2], "FP32")
    inp.set_data_from_numpy(np.full((1, 2), 666.0, np.float32))
    with pytest.raises(InferenceServerException) as e:
        client.infer("py", [inp])
    assert e.value.status() == "StatusCode.INTERNAL" and "poisoned batch" in e.value.message()
    inp.set_data_from_numpy(np.ones((1, 2), np.float32))
    assert client.infer("py", [inp]).as_numpy("y").tolist() == [[2.0, 2.0]]
    client.close()


def test_queue_full_answers_503(server):
    """Model `pyq` queues one request at most: while one runs (held) and one waits, the next
    is refused with 503, then the same connection is served again; gRPC answers UNAVAILABLE."""
    pyq = server.pyq
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    pyq.gate.clear()
    _drain(pyq.entered)
    results = []
    threads = [_hold(server, "pyq", results)]
    pyq.wait_running()  # the first runs (held)
    threads.append(_hold(server, "pyq", results))
    wait_until(lambda: _in_flight(server, "pyq") == 2, "the second request queued")  # the queue is full
    status, body = _py_request(conn, "pyq")
    assert status == 503 and "queue full (1 requests waiting)" in body["error"]
    client = grpcclient.InferenceServerClient(server.grpc_address)
    inp = grpcclient.InferInput("x", [1, 2], "FP32")
    inp.set_data_from_numpy(np.ones((1, 2), np.float32))
    with pytest.raises(InferenceServerException) as e:
        client.infer("pyq", [inp])
    assert e.value.status() == "StatusCode.UNAVAILABLE"
    assert metric_samples(server.url)[("inference_in_flight", (("model", "pyq"),))] == 2
    pyq.gate.set()
    for t in threads:
        t.join()
    assert [s for s, _ in results] == [200, 200]
    assert _py_request(conn, "pyq")[0] == 200
    assert client.infer("pyq", [inp]).as_numpy("y").tolist() == [[2.0, 2.0]]
    client.close()
    conn.close()


def test_queue_timeout_answers_504(server):
    """A request whose parameters.timeout (microseconds) passes while it waits in the queue
    answers 504; the server's --queue-timeout-ms default is the same check."""
    py = server.py
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    py.gate.clear()
    _drain(py.entered)
    results = []
    threads = [_hold(server, "py", results)]
    py.wait_running()
    threads.append(_hold(server, "py", results, timeout_us=1))  # past its timeout once it is received
    # (it may be answered at once, or wait for the first to finish: past its timeout either way)
    wait_until(lambda: _in_flight(server, "py") == 2 or results, "the second request received")
    py.gate.set()
    for t in threads:
        t.join()
    statuses = sorted(s for s, _ in results)
    assert statuses == [200, 504], results
    assert "past its timeout" in [b for s, b in results if s == 504][0]["error"]
    assert _py_request(conn)[0] == 200
    status, body = _py_request(conn, timeout_us=-5)
    assert status == 400 and "parameter 'timeout'" in body["error"]
    conn.close()


def test_slow_body_gets_408_and_other_clients_go_on(server):
    """A client that stops sending its body is answered 408 after the read timeout (1 s here)
    and disconnected; meanwhile other requests are served."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(b"POST /v2/models/py/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"inputs\": ")
    status, _ = post(server.url + "/v2/models/py/infer",
                     {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]})
    assert status == 200
    started = time.monotonic()
    data = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    sock.close()
    assert data.startswith(b"HTTP/1.1 408") and b"did not arrive within 1 s" in data
    assert time.monotonic() - started < 5


# -- metrics ---------------------------------------------------------------------------------------
def test_metrics_families_and_labels(server):
    """The five families, parsed by prometheus_client, with exactly their label names; input
    length bins from the model's sequence dim."""
    for seq, expected in ((4, "tiny"), (200, "small"), (1000, "large"), (3000, "xlarge")):
        status, _ = post(server.url + "/v2/models/py/infer",
                         {"inputs": [{"name": "x", "shape": [1, seq], "datatype": "FP32", "data": [0.5] * seq}]})
        assert status == 200
    fams = families(server.url)
    want = {"inference_latency_seconds": ("histogram", {"model", "model_version", "input_length_bin"}),
            "inference_queue_delay_seconds": ("histogram", {"model", "model_version"}),
            "inference_batch_size": ("histogram", {"model", "model_version"}),
            "inference_requests": ("counter", {"model", "model_version", "status"}),
            "inference_in_flight": ("gauge", {"model"})}
    for name, (kind, labels) in want.items():
        family = fams[name]
        assert family.type == kind and family.samples, name
        for s in family.samples:
            assert set(s.labels) - {"le"} == labels, (name, s.labels)
    bins = {s.labels["input_length_bin"] for s in fams["inference_latency_seconds"].samples
            if s.labels["model"] == "py"}
    assert bins == {"tiny", "small", "large", "xlarge"}
    cnn_bins = {s.labels["input_length_bin"] for s in fams["inference_latency_seconds"].samples
                if s.labels["model"] == "cnn"}
    assert cnn_bins == {"xlarge"}  # no dynamic non-batch dim: elements per row (3 x 32 x 32)
    for s in fams["inference_latency_seconds"].samples:
        if s.name.endswith("_bucket") and s.labels["le"] == "+Inf":
            count = [c for c in fams["inference_latency_seconds"].samples if c.name.endswith("_count")
                     and {k: v for k, v in c.labels.items()} == {k: v for k, v in s.labels.items() if k != "le"}]
            assert count and count[0].value == s.value


def test_input_length_rule():
    from inferx_compiler.runtime.heatmap import input_length_bin

    assert [input_length_bin(n) for n in (1, 128, 129, 512, 513, 2048, 2049)] == \
        ["tiny", "tiny", "small", "small", "large", "large", "xlarge"]
    specs = [TensorSpec("mask", "int64", ("batch", "n")), TensorSpec("ids", "int64", ("batch", "seq_len"))]
    assert length_rule(specs, True) == ("dim", "ids", 1)  # a name that says sequence wins
    assert length_rule([TensorSpec("x", "float32", ("batch", 8, "w"))], True) == ("dim", "x", 2)
    assert length_rule([TensorSpec("x", "float32", ("batch", 3, 4))], True) == ("row", "x")


# -- shutdown --------------------------------------------------------------------------------------
def test_shutdown_drains_in_flight_requests():
    """Requests received before the stop are answered (HTTP and gRPC), new connections are
    refused, readiness turns false, then the server stops."""
    py = PyModel()
    srv = InferenceServer(py, "py", port=0, grpc_port=0).start()
    py.gate.clear()
    answers = []

    def http_client(i):
        answers.append(post(srv.url + "/v2/models/py/infer",
                            {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [float(i)]}]})[0])

    def grpc_client(i):
        client = grpcclient.InferenceServerClient(srv.grpc_address)
        inp = grpcclient.InferInput("x", [1, 1], "FP32")
        inp.set_data_from_numpy(np.ones((1, 1), np.float32))
        answers.append(200 if client.infer("py", [inp]).as_numpy("y").tolist() == [[2.0]] else 0)
        client.close()

    threads = [threading.Thread(target=http_client, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=grpc_client, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    # all six received: one batch held in the model, the others queued behind it
    wait_until(lambda: _in_flight(srv, "py") == 6, "six requests in flight")
    stopper = threading.Thread(target=srv.shutdown)
    stopper.start()
    wait_until(lambda: srv.core.draining, "the server draining")
    assert not srv.core.ready()
    wait_until(lambda: _refused(srv.port), "the listener closed")
    py.gate.set()
    for t in threads:
        t.join(30)
    stopper.join(30)
    assert not stopper.is_alive() and sorted(answers) == [200] * 6


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
        status, body = post(srv.url + "/v2/models/s/infer", {"inputs": [tensor("x", np.zeros((1, 3), np.float32))]})
        assert status == 400 and "input 'x'" in body["error"]
        assert json.loads(get(srv.url + "/v2/models/s/config")[1])["max_batch_size"] == 0
    finally:
        srv.shutdown()


# -- the CLI ---------------------------------------------------------------------------------------
def _start_cli(args: list[str], workers: int = 1):
    proc = subprocess.Popen(python_entry("inferx_compiler.cli.serve") + args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    suffix = rf" \({workers} workers\)" if workers > 1 else ""
    match = re.match(rf"serving (\S+) on (http://127\.0\.0\.1:\d+) and grpc://(127\.0\.0\.1:\d+){suffix}$",
                     line.strip())
    if not match:
        proc.kill()
        raise AssertionError(line + proc.stderr.read())
    return proc, match.group(1), match.group(2), match.group(3)


def _stop_cli(proc) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=90) == 0, proc.stderr.read()


def test_cli_serves_http_and_grpc_until_sigterm(cnn_artifact):
    proc, names, url, grpc_address = _start_cli([cnn_artifact[1], "--port", "0", "--grpc-port", "0"])
    try:
        assert names == "cnn"
        x = cnn_input(1, 3)
        reference = onnxruntime_outputs(cnn_artifact[0], {"x": x})["logits"]
        status, body = post(url + "/v2/models/cnn/versions/1/infer", {"inputs": [tensor("x", x)]})
        assert status == 200 and rel_l2(np.asarray(body["outputs"][0]["data"], np.float32), reference[0]) <= 1e-4
        client = grpcclient.InferenceServerClient(grpc_address)
        inp = grpcclient.InferInput("x", [1, 3, 32, 32], "FP32")
        inp.set_data_from_numpy(x)
        assert rel_l2(client.infer("cnn", [inp], model_version="1").as_numpy("logits"), reference) <= 1e-4
        client.close()
    finally:
        _stop_cli(proc)


def test_cli_model_repository_serves_models_and_versions(cnn_artifact, tmp_path):
    repo = tmp_path / "models"
    for name, version in (("cnn", "1"), ("cnn", "3"), ("other", "1")):
        (repo / name / version).mkdir(parents=True)
        shutil.copy(cnn_artifact[1], repo / name / version / "model.ixa")
    (repo / "cnn" / "notes").mkdir()  # not a version: ignored, as Triton does
    proc, names, url, grpc_address = _start_cli(["--model-repository", str(repo), "--port", "0", "--grpc-port", "0"])
    try:
        assert names == "cnn,other"
        assert json.loads(get(url + "/v2/models/cnn")[1])["versions"] == ["1", "3"]
        x = cnn_input(1, 4)
        status, body = post(url + "/v2/models/cnn/infer", {"inputs": [tensor("x", x)]})
        assert status == 200 and body["model_version"] == "3"
        assert post(url + "/v2/models/other/versions/1/infer", {"inputs": [tensor("x", x)]})[0] == 200
        assert post(url + "/v2/models/cnn/versions/2/infer", {"inputs": [tensor("x", x)]})[0] == 404
        client = grpcclient.InferenceServerClient(grpc_address)
        assert [(m.name, m.version) for m in client.get_model_repository_index().models] == [
            ("cnn", "1"), ("cnn", "3"), ("other", "1")]
        client.close()
    finally:
        _stop_cli(proc)


def test_cli_workers_share_both_ports_and_their_metrics(cnn_artifact):
    """--workers 2: two processes on both ports; /metrics on either counts every request
    (prometheus_client's multiprocess mode)."""
    proc, _, url, grpc_address = _start_cli([cnn_artifact[1], "--port", "0", "--grpc-port", "0", "--workers", "2"],
                                            workers=2)
    try:
        x = cnn_input(1, 5)
        results = []

        def client():
            for _ in range(10):  # a new connection each time: the kernel spreads them over the workers
                results.append(post(url + "/v2/models/cnn/infer", {"inputs": [tensor("x", x)]})[0])

        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for _ in range(10):
            c = grpcclient.InferenceServerClient(grpc_address)
            inp = grpcclient.InferInput("x", [1, 3, 32, 32], "FP32")
            inp.set_data_from_numpy(x)
            results.append(200 if c.infer("cnn", [inp]).as_numpy("logits").shape == (1, 10) else 0)
            c.close()
        assert results == [200] * 50
        samples = metric_samples(url)
        labels = (("model", "cnn"), ("model_version", "1"))
        assert samples[("inference_requests_total", labels + (("status", "200"),))] == 50
        assert samples[("inference_batch_size_sum", labels)] == 50
        assert samples[("inference_in_flight", (("model", "cnn"),))] == 0
    finally:
        _stop_cli(proc)


def test_cli_refuses_a_missing_artifact_and_no_models(tmp_path):
    proc = subprocess.run(python_entry("inferx_compiler.cli.serve") + [str(tmp_path / "none.ixa"), "--port", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "none.ixa" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(python_entry("inferx_compiler.cli.serve") + ["--port", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "--model-repository" in proc.stderr and "Traceback" not in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = subprocess.run(python_entry("inferx_compiler.cli.serve") + ["--model-repository", str(tmp_path / "empty")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "no models in it" in proc.stderr


def test_serving_on_cpu_sync_instances(cnn_artifact):
    """A server on `cpu:sync` with two model instances: concurrent answers match onnxruntime."""
    service = Service(cnn_artifact[1], ServiceOptions(devices=("cpu:sync",), instances=2, max_queue_delay_us=2000))
    srv = InferenceServer(service, "cnn", port=0).start()
    try:
        inputs = [cnn_input(1, 200 + i) for i in range(16)]
        answers = [None] * len(inputs)

        def client(i):
            answers[i] = post(srv.url + "/v2/models/cnn/infer", {"inputs": [tensor("x", inputs[i])]})

        run_clients(client, len(inputs))
        reference = onnxruntime_outputs(cnn_artifact[0], {"x": np.concatenate(inputs)})["logits"]
        for i, (status, body) in enumerate(answers):
            assert status == 200
            got = np.asarray(body["outputs"][0]["data"], np.float32).reshape(1, 10)
            assert rel_l2(got, reference[i:i + 1]) <= 1e-4
    finally:
        srv.shutdown()
