"""Device strings (`cpu`, `cpu:sync`, `cpu:task`, `cuda`, `cuda:N`) -> IREE HAL devices, checked
against the target.

`cpu:task` is IREE's local-task driver: a pool of worker threads, one call spread over the cores.
`cpu:sync` is local-sync: a call runs in the calling thread, one core per call, with no worker
to wake. `cpu` (the default) picks one of them from the artifact's work per call
(`choose_cpu_executor`): waking the pool costs more than a small call's work. Serving on a small machine, one `cpu:sync` model instance per core (each run by its own
batch thread) beats one pooled `cpu` session: no cross-thread wake-up per call (on the 2-core CI VM a
direct b1 call after an idle gap: p99 3.9 ms pooled vs 0.16 ms in the caller's thread) and no
barrier between workers inside a call (encoder b16, two callers: 11,300 vs 5,600 rows/s).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from inferx_compiler.errors import DeviceError

_BACKEND_DEVICE_KINDS = {"llvm-cpu": "cpu", "cuda": "cuda"}


@dataclass(frozen=True)
class DeviceSpec:
    kind: str  # cpu | cuda
    index: int = 0
    sync: bool = False  # cpu only: IREE local-sync, calls run in the calling thread
    auto: bool = False  # cpu only: sync or task still to be chosen for an artifact

    @property
    def driver(self) -> str:
        if self.kind == "cuda":
            return "cuda"
        return "local-sync" if self.sync else "local-task"

    @property
    def executor(self) -> str:
        """What a measured latency depends on besides the model: cpu:task, cpu:sync or cuda."""
        if self.kind == "cpu":
            return "cpu" if self.auto else "cpu:sync" if self.sync else "cpu:task"
        return self.kind

    def __str__(self) -> str:
        if self.kind == "cpu":
            return self.executor
        return f"{self.kind}:{self.index}"


def parse_device(text: str) -> DeviceSpec:
    kind, _, qualifier = text.strip().partition(":")
    if kind == "cpu" and qualifier in ("", "0"):
        return DeviceSpec("cpu", auto=True)
    if kind == "cpu" and qualifier in ("sync", "task"):
        return DeviceSpec("cpu", sync=qualifier == "sync")
    if kind == "cuda" and (qualifier == "" or qualifier.isdigit()):
        return DeviceSpec("cuda", int(qualifier or 0))
    raise DeviceError(f"bad device '{text}'; valid forms: cpu, cpu:sync, cpu:task, cuda, cuda:N")


# A call of at most this many FLOPs runs in the caller's thread under `cpu` (about 0.3 ms of
# one core here): measured 2026-12-01 on this 2-core AVX2 VM (single calls, quiet machine).
SYNC_MAX_FLOPS = 20_000_000


def choose_cpu_executor(spec: DeviceSpec, call_flops: int | None) -> DeviceSpec:
    """Resolve `cpu` for an artifact: local-sync when a call is small (`call_flops`, the work of
    its largest static-shape function; None when unknown), the worker pool otherwise."""
    if spec.kind != "cpu" or not spec.auto:
        return spec
    small = call_flops is not None and 0 <= call_flops <= SYNC_MAX_FLOPS
    return DeviceSpec("cpu", sync=small)


def default_device_for(backend: str) -> str:
    return _BACKEND_DEVICE_KINDS.get(backend, "cpu")


def check_compatible(spec: DeviceSpec, backend: str, target_name: str) -> None:
    want = _BACKEND_DEVICE_KINDS.get(backend)
    if want is None:
        raise DeviceError(f"artifact for target '{target_name}' holds no executable module; "
                          f"it cannot run on any device")
    if want != spec.kind:
        raise DeviceError(f"artifact was compiled for target '{target_name}' ({backend}) and runs on "
                          f"'{want}' devices, not on '{spec}'")


@functools.lru_cache(maxsize=None)
def hal_device(spec: DeviceSpec):
    """One HAL device per spec for the whole process (sessions share it)."""
    import iree.runtime as rt

    if spec.kind == "cpu" and not spec.sync:
        _configure_cpu_executor(rt)
    try:
        driver = rt.get_driver(spec.driver)
    except Exception as e:
        raise DeviceError(f"device '{spec}': IREE driver '{spec.driver}' is not available ({e})") from None
    if spec.kind == "cpu":
        return driver.create_default_device()
    infos = driver.query_available_devices()
    if spec.index >= len(infos):
        raise DeviceError(f"device '{spec}' not present: {len(infos)} CUDA device(s) found")
    return driver.create_device(infos[spec.index]["device_id"])


_cpu_executor: dict = {}  # the flags IREE's CPU executor was created with (process-wide)


def configure_cpu(workers: int | None = None) -> None:
    """Set how many worker threads IREE's CPU executor runs (default: one per core). Must be
    called before the first CPU session is loaded: the executor is created once per process.
    On a small machine, serving under load runs best with a core left to the front end's
    Python threads (the workers then never wait at a barrier for a descheduled peer)."""
    flags = _cpu_flags(workers)
    if _cpu_executor and _cpu_executor["flags"] != flags:
        raise DeviceError(f"the CPU executor already runs with {' '.join(_cpu_executor['flags'])}; "
                          f"configure_cpu() must come before the first CPU session is loaded")
    _cpu_executor["pending"] = flags


def _cpu_flags(workers: int | None) -> list[str]:
    import os

    flags = os.environ.get("INFERX_CPU_TASK_FLAGS", "--task_worker_spin_us=0").split()
    workers = workers or int(os.environ.get("INFERX_CPU_WORKERS", "0") or 0)
    if workers < 0:
        raise DeviceError(f"CPU workers must be >= 1, got {workers}")
    if workers:
        flags.append(f"--task_topology_max_group_count={workers}")
    return flags


def _configure_cpu_executor(rt) -> None:
    """IREE's CPU workers spin before sleeping; next to the batcher's Python threads on a
    small machine that spinning steals the cores and stretches tail latency (p99 60 ms
    -> 12 ms on 2 cores at 600 req/s with it off). INFERX_CPU_TASK_FLAGS overrides;
    INFERX_CPU_WORKERS or configure_cpu() set the worker count."""
    if "flags" in _cpu_executor:
        return
    flags = _cpu_executor.pop("pending", None) or _cpu_flags(None)
    if flags:
        rt.flags.parse_flags(*flags)
    _cpu_executor["flags"] = flags


_thread_state = __import__("threading").local()


def bind_thread_to_device(spec: DeviceSpec) -> None:
    """Make the device's CUDA context current on the calling thread (once per thread).

    IREE's CUDA HAL uses the device's primary context but makes it current only on the
    thread that created the device; a batcher's worker thread reading results back would
    otherwise fail with CUDA_ERROR_INVALID_CONTEXT. CPU devices need nothing.
    """
    if spec.kind != "cuda":
        return
    bound = getattr(_thread_state, "bound", None)
    if bound is None:
        bound = _thread_state.bound = set()
    if spec.index in bound:
        return
    import ctypes

    lib = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    for call, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(dev), spec.index)),
                       ("cuDevicePrimaryCtxRetain", (ctypes.byref(ctx), dev)),
                       ("cuCtxSetCurrent", (ctx,))):
        status = getattr(lib, call)(*args)
        if status != 0:
            raise DeviceError(f"device '{spec}': {call} failed with CUDA error {status}")
    bound.add(spec.index)
