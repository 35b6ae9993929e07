"""Sessions on IREE's CPU worker pool make their calls from a thread of lowered priority
(runtime/call_thread.py): IREE's waiting thread spins for the whole call and would otherwise
take a core from the workers. Checked on real sessions: which thread runs the module, at what
nice value, that errors still reach the caller, and that sync sessions keep the caller's thread."""

from __future__ import annotations

import os
import select
import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferx_compiler
from helpers import save
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.runtime.call_thread import CallThread, call_nice


def _nice_of(native_id: int) -> int:
    """A thread's nice value from /proc (field 19 of its stat line)."""
    with open(f"/proc/self/task/{native_id}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    root = tmp_path_factory.mktemp("call_thread")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])],
                          [numpy_helper.from_array(np.eye(64, 32, dtype=np.float32), "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = save(model, root / "mm.onnx")
    out = str(root / "mm.ixa")
    assert compile_main([path, "--target", "cpu", "-o", out, "-q"]) == 0
    return out


def _spy(sess):
    """Record the thread each of the session's calls runs on (wrapping its CallThread)."""
    seen = []
    call = sess._call

    class Spy:
        nice = call.nice

        def __call__(self, fn, *args):
            def recorded(*a):
                seen.append((threading.current_thread().name, threading.get_native_id()))
                return fn(*a)
            return call(recorded, *args)

    sess._call = Spy()
    return seen


def test_pool_sessions_call_from_a_thread_of_lower_priority(artifact, monkeypatch):
    monkeypatch.delenv("INFERX_CALL_NICE", raising=False)
    sess = inferx_compiler.load(artifact, device="cpu:task")
    seen = _spy(sess)
    x = np.arange(2 * 64, dtype=np.float32).reshape(2, 64)
    for _ in range(2):  # the first call (checked path) and the call plan's
        np.testing.assert_array_equal(sess.run({"x": x})["y"], x[:, :32])
    assert len(seen) == 2 and {name for name, _ in seen} == {"inferx-call"}
    caller = _nice_of(threading.get_native_id())
    assert _nice_of(seen[0][1]) == min(19, caller + call_nice()) > caller
    assert _nice_of(threading.get_native_id()) == caller  # the caller's own priority untouched


def test_sync_sessions_and_nice_zero_keep_the_callers_thread(artifact, monkeypatch):
    x = {"x": np.ones((1, 64), np.float32)}
    sess = inferx_compiler.load(artifact, device="cpu:sync")
    seen_sync = _spy(sess)
    sess.run(x)
    monkeypatch.setenv("INFERX_CALL_NICE", "0")
    pool = inferx_compiler.load(artifact, device="cpu:task")
    seen_pool = _spy(pool)
    pool.run(x)
    assert [name for name, _ in seen_sync + seen_pool] == [threading.current_thread().name] * 2


def test_errors_reach_the_caller_and_the_thread_goes_on():
    call = CallThread(3)

    def fail():
        raise ValueError("results do not fit")

    with pytest.raises(ValueError, match="results do not fit"):
        call(fail)
    assert call(lambda a, b: a + b, 2, 3) == 5
    call.stop()


def test_the_nice_value_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("INFERX_CALL_NICE", "12")
    assert call_nice() == 12
    monkeypatch.setenv("INFERX_CALL_NICE", "40")
    assert call_nice() == 19
    monkeypatch.setenv("INFERX_CALL_NICE", "fast")
    assert call_nice() == 5
    assert os.getpriority(os.PRIO_PROCESS, 0) >= 0


def test_a_forked_child_starts_a_thread_of_its_own():
    """A server that loads its sessions and then forks its workers: the parent's call thread does
    not exist in the child, which must not wait for it (a hang before the pid check)."""
    call = CallThread(3)
    assert call(lambda: 1) == 1  # the parent's thread started
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one call, its answer through the pipe, exit without cleanup
        try:
            os.write(write, str(call(lambda: 40 + 2)).encode())
        finally:
            os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], 30)
    assert ready, "the forked child's call did not return"
    assert os.read(read, 16) == b"42"
    os.waitpid(pid, 0)
    call.stop()
