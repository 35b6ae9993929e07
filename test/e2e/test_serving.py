"""Runtime serving on real artifacts: buffer reuse, buckets, multi-lane scheduler, inferx-bench."""

from __future__ import annotations

import json
import subprocess
import zipfile

import numpy as np
import pytest

import inferx_compiler
from helpers import onnxruntime_outputs, rel_l2, run_clients, save
from inferx_compiler.cli.common import python_entry
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.runtime.batching import BatchingConfig, DynamicBatcher, Priority
from inferx_compiler.runtime.bench_inputs import random_feeds
from inferx_compiler.runtime.scheduler import Lane, RoutingPolicy, Scheduler, lane_for_session
from e2e_models import cnn


def test_bucket_latency_table_is_recorded(cnn_artifact):
    manifest = json.loads(zipfile.ZipFile(cnn_artifact[1]).read("manifest.json"))
    buckets = manifest["batch_buckets"]
    assert [b["size"] for b in buckets] == [1, 2, 4, 8]
    assert all(b["measured"] and b["device"] in ("cpu:sync", "cpu:task") and b["latency_ms"] > 0
               for b in buckets)


def test_estimates_when_device_absent(tmp_path):
    path = save(cnn(), tmp_path / "cnn.onnx")
    assert compile_main([path, "--target", "a100", "--batch-sizes", "1,16", "-o", str(tmp_path / "a.ixa"), "-q"]) == 0
    buckets = json.loads(zipfile.ZipFile(tmp_path / "a.ixa").read("manifest.json"))["batch_buckets"]
    assert [b["measured"] for b in buckets] == [False, False]


def test_device_buffers_are_reused(cnn_artifact):
    """Input and output buffers are allocated once per bucket; results are copied out of them."""
    sess = inferx_compiler.load(cnn_artifact[1])
    assert sess.output_buffers  # the artifact has @main$into and the output shape follows the inputs
    feeds = random_feeds(sess.inputs, 4)
    first = sess.run(feeds)
    kept = first["logits"].copy()
    allocated = sess.buffer_allocations
    for seed in range(5):
        sess.run(random_feeds(sess.inputs, 4, seed=seed))
    assert sess.buffer_allocations == allocated  # bucket seen: no new buffers
    np.testing.assert_array_equal(first["logits"], kept)  # later calls did not overwrite it
    sess.run(random_feeds(sess.inputs, 2))
    assert sess.buffer_allocations == allocated + 2  # a new bucket: one input and one output buffer
    again = sess.run(feeds)
    np.testing.assert_array_equal(first["logits"], again["logits"])
    assert rel_l2(again["logits"], onnxruntime_outputs(cnn_artifact[0], feeds)["logits"]) <= 1e-4


def test_module_allocated_outputs_still_work(cnn_artifact):
    """Without the result-storage entry (older artifacts), the module's own result buffers are used."""
    sess = inferx_compiler.load(cnn_artifact[1])
    sess._into_invoker = None
    feeds = random_feeds(sess.inputs, 3)
    got = sess.run(feeds)
    assert not sess.output_buffers and sess.buffer_allocations == 1  # the input buffer only
    assert rel_l2(got["logits"], onnxruntime_outputs(cnn_artifact[0], feeds)["logits"]) <= 1e-4


@pytest.mark.parametrize("how", ["run_batch", "gather", "gather-pipelined"])
def test_batched_results_match_onnxruntime(cnn_artifact, how):
    """Through the plain run_batch path, rows gathered into the session's buffers, and two
    batches in flight (each with its own buffers): every request gets its own rows back."""
    onnx_path, artifact = cnn_artifact
    sess = inferx_compiler.load(artifact)
    config = BatchingConfig(max_batch_size=8, max_queue_delay_us=2000,
                            pipeline_depth=2 if how == "gather-pipelined" else None)
    if how == "run_batch":
        batcher = DynamicBatcher(sess.run, sess.inputs, config, buckets=(1, 2, 4, 8))
    else:
        batcher = DynamicBatcher.for_session(sess, config, buckets=(1, 2, 4, 8))
    requests = [random_feeds(sess.inputs, 1 + i % 3, seed=i) for i in range(60)]
    futures = [batcher.submit(r) for r in requests]
    results = [f.result(timeout=60) for f in futures]
    batcher.close()
    reference = onnxruntime_outputs(onnx_path, {"x": np.concatenate([r["x"] for r in requests])})["logits"]
    start = 0
    for r, got in zip(requests, results):
        rows = r["x"].shape[0]
        assert got["logits"].shape == (rows, 10)
        assert rel_l2(got["logits"], reference[start:start + rows]) <= 1e-4
        start += rows
    assert batcher.stats.mean_batch > 1


def test_scheduler_over_several_cpu_instances(cnn_artifact):
    config = BatchingConfig(max_batch_size=4, max_queue_delay_us=1000)
    lanes = [lane_for_session(inferx_compiler.load(cnn_artifact[1]), config, name=f"cpu#{i}", speed=s)
             for i, s in enumerate((300.0, 200.0, 100.0))]
    sched = Scheduler(lanes)
    one = random_feeds(lanes[0].batcher.inputs, 1)
    big = random_feeds(lanes[0].batcher.inputs, 4)
    assert sched.route(big, priority=Priority.NORMAL).name == "cpu#0"  # large -> fastest
    assert sched.route(one, latency_sensitive=True).name == "cpu#1"  # latency -> next
    assert sched.route(one, priority=Priority.BACKGROUND).name == "cpu#2"  # background -> slowest
    futures = [sched.submit(one, priority=p) for p in (Priority.HIGH, Priority.NORMAL, Priority.BACKGROUND) * 10]
    futures += [sched.submit(big) for _ in range(5)]
    assert all(f.result(timeout=60)["logits"].shape[1] == 10 for f in futures)
    assert sched.routed["cpu#0"] >= 5 and sched.routed["cpu#2"] >= 10
    sched.close()


def test_policy_is_configurable():
    class Dummy:
        queue = []
    lanes = [Lane("a", Dummy(), 1.0), Lane("b", Dummy(), 2.0)]
    policy = RoutingPolicy(large_rows=2)
    sched = Scheduler(lanes, policy=lambda info, ls: ls[0])
    assert sched.route({"x": np.zeros((9, 2))}).name == "a"
    assert Scheduler(lanes, policy=policy).route({"x": np.zeros((2, 2))}).name == "b"


def test_inferx_bench_json(cnn_artifact, capsys):
    from inferx_compiler.cli.bench import main

    assert main([cnn_artifact[1], "--concurrency", "4", "--duration", "0.5", "--warmup", "0.2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    for key in ("throughput_rps", "p50_ms", "p95_ms", "p99_ms", "mean_batch", "padding_waste"):
        assert key in result
    assert result["requests"] > 0 and result["errors"] == 0
    assert main([cnn_artifact[1], "--rate", "50", "--duration", "0.5", "--warmup", "0.1", "--json",
                 "--no-batching"]) == 0
    assert json.loads(capsys.readouterr().out)["mean_batch"] == 1.0


def test_inferx_bench_server_processes(cnn_artifact):
    """--processes 2: two server processes, each with its share of the clients; figures merged."""
    out = subprocess.run(python_entry("inferx_compiler.cli.bench") + [
        cnn_artifact[1], "--processes", "2", "--concurrency", "6", "--duration", "0.5", "--warmup", "0.2",
        "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["processes"] == 2 and result["concurrency"] == 6 and len(result["per_process_rps"]) == 2
    assert result["requests"] > 0 and result["errors"] == 0 and result["mean_batch"] >= 1.0
    assert result["throughput_rps"] == pytest.approx(sum(result["per_process_rps"]))


def test_inferx_bench_cpu_sync_instances(cnn_artifact, capsys):
    """--device cpu:sync --instances 2: one lane, two instances behind its queue."""
    from inferx_compiler.cli.bench import main

    assert main([cnn_artifact[1], "--device", "cpu:sync", "--instances", "2", "--concurrency", "8",
                 "--duration", "0.5", "--warmup", "0.2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["devices"] == ["cpu:sync"] and result["requests"] > 0 and result["errors"] == 0
    assert main([cnn_artifact[1], "--device", "cpu:sync", "--instances", "0", "--duration", "0.1"]) == 2
    assert "Invalid value for '--instances': 0 is not in the range x>=1" in capsys.readouterr().err


def test_inferx_bench_bad_processes(cnn_artifact, capsys):
    from inferx_compiler.cli.bench import main

    assert main([cnn_artifact[1], "--processes", "0", "--duration", "0.1"]) == 2  # usage, before any work
    assert "Invalid value for '--processes': 0 is not in the range x>=1" in capsys.readouterr().err


def test_manifest_names_the_output_entry(cnn_artifact):
    manifest = json.loads(zipfile.ZipFile(cnn_artifact[1]).read("manifest.json"))
    assert manifest["entry_function"] == "main" and manifest["output_entry_function"] == "main$into"


def test_outputs_larger_than_declared_fall_back_to_module_buffers(tmp_path):
    """The ONNX file declares y as [batch, 4] but Concat makes it [2 x batch, 4]: the output buffer
    shaped from the declaration is too small, so the session lets the module allocate instead."""
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["y"], axis=0)], "odd",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "odd.onnx")
    assert compile_main([str(tmp_path / "odd.onnx"), "--target", "cpu", "-o", str(tmp_path / "odd.ixa"), "-q"]) == 0
    sess = inferx_compiler.load(str(tmp_path / "odd.ixa"))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    for _ in range(2):
        np.testing.assert_array_equal(sess.run({"x": x})["y"], np.concatenate([x, x]))


def test_cpu_sync_device_matches_onnxruntime(cnn_artifact):
    """`cpu:sync` (IREE local-sync: the call runs in the caller's thread) gives the same results;
    its bucket latencies are re-measured for it, not taken from the pooled `cpu` build table."""
    from inferx_compiler.runtime.bucket_table import serving_buckets

    sess = inferx_compiler.load(cnn_artifact[1], device="cpu:sync")
    assert sess.device == "cpu:sync"
    feeds = random_feeds(sess.inputs, 3)
    got = sess.run(feeds)
    assert rel_l2(got["logits"], onnxruntime_outputs(cnn_artifact[0], feeds)["logits"]) <= 1e-4
    assert all(b["device"] == "cpu:sync" for b in serving_buckets(sess))


def test_service_with_cpu_sync_instances(cnn_artifact):
    """Two `cpu:sync` instances under one queue: concurrent clients each get their own rows
    (checked against onnxruntime), and both instances ran batches."""
    from inferx_compiler.runtime.service import Service, ServiceOptions

    service = Service(cnn_artifact[1], ServiceOptions(devices=("cpu:sync",), instances=2, max_queue_delay_us=500))
    group = service.instances[0]
    assert len(group) == 2 and group[0] is not group[1]
    calls = [0, 0]
    for i, s in enumerate(group):
        def counting(parts, rows, bucket, slot, s=s, i=i, inner=s.run_gathered):
            calls[i] += 1
            return inner(parts, rows, bucket, slot)
        s.run_gathered = counting
    requests = [random_feeds(service.inputs, 1, seed=i) for i in range(200)]
    results = [None] * len(requests)

    def client(k):
        for i in range(k, len(requests), 8):
            results[i] = service.submit(requests[i]).result(timeout=60)

    run_clients(client, 8)
    service.close()
    reference = onnxruntime_outputs(cnn_artifact[0], {"x": np.concatenate([r["x"] for r in requests])})["logits"]
    got = np.concatenate([r["logits"] for r in results])
    assert rel_l2(got, reference) <= 1e-4
    assert np.allclose(got, reference, rtol=1e-3, atol=1e-4)  # row by row: nobody got another's rows
    assert calls[0] > 0 and calls[1] > 0, calls


def test_bad_device_string_names_the_forms():
    from inferx_compiler.errors import DeviceError
    from inferx_compiler.runtime.devices import parse_device

    assert str(parse_device("cpu:sync")) == "cpu:sync" and parse_device("cpu:sync").driver == "local-sync"
    assert parse_device("cpu:task").driver == "local-task" and str(parse_device("cuda:1")) == "cuda:1"
    assert parse_device("cpu").auto and str(parse_device("cpu")) == "cpu"
    with pytest.raises(DeviceError, match="cpu, cpu:sync, cpu:task, cuda, cuda:N"):
        parse_device("cpu:fast")
