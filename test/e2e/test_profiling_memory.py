"""The dispatch profiler runs iree-benchmark-module with glibc keeping freed memory
(inferx_compiler.tuning.profiling.KEEP_FREED_MEMORY): IREE allocates a call's intermediates afresh
each call, and a block past glibc's mmap threshold was mapped anew every time, its page faults
charged to the first dispatch writing it. These tests check that the setting does keep a large
freed block for the next allocation (on this C library) and that the profiler passes it."""

import subprocess
import sys

import pytest

from inferx_compiler.tuning import profiling

# Allocate, touch and free a 64 MiB block 12 times; print the minor page faults of the last 10.
CHURN = """
import ctypes, resource
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 64 << 20
def churn():
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    libc.free(p)
churn(); churn()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    churn()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(env) -> int:
    out = subprocess.run([sys.executable, "-c", CHURN], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_the_setting_keeps_a_freed_block_for_the_next_call():
    import os

    plain = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    pages = 10 * (64 << 20) // 4096
    if _faults(plain) < pages // 2:
        pytest.skip("this C library reuses a freed 64 MiB block by itself")
    assert _faults(profiling._benchmark_env()) < pages // 20


def test_the_benchmark_command_runs_with_it(monkeypatch):
    seen = {}

    def run(cmd, capture_output, text, env):
        seen[cmd[0]] = env
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(profiling.subprocess, "run", run)
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    profiling._run(["/opt/iree/iree-benchmark-module", "--function=main"], "timing")
    profiling._run(["/opt/iree/iree-profile", "statistics"], "reading")
    tunables = seen["/opt/iree/iree-benchmark-module"]["GLIBC_TUNABLES"].split(":")
    assert tunables[0] == "glibc.malloc.arena_max=2"  # the caller's own settings kept
    assert "glibc.malloc.mmap_max=0" in tunables
    assert seen["/opt/iree/iree-profile"] is None  # other tools run with the plain environment
