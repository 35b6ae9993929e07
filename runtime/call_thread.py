"""Device calls on IREE's CPU worker pool made from a thread of lower scheduling priority.

IREE 3.13's local-task driver has the thread that waits for a call spin until the call is done
(a `pause` loop in its runtime library: `top -H` shows the calling Python thread at 100% of a
core for the whole call, py-spy finds it inside `VmContext.invoke`). With a worker per core that
spinning thread takes a core's share from a worker, and the scheduler hands the cores round in
ticks: on the 2-core Xeon the int4 MLP at batch 1 took 2.67 ms a call (median) and 5.55 at the
90th percentile, in 4 ms steps, against 2.16 / 2.73 with calls made from a thread at nice +5
(one process, the same artifact; docs/performance-notes.md). So a session on the worker pool
makes its calls from a thread of its own whose nice value is raised (the caller blocks meanwhile, in the kernel), and
the workers win the cores whenever they have work. A nice value can only be raised without
privileges, which is why the caller's own thread is not lowered and raised again around calls.

INFERX_CALL_NICE sets the value (default 5; 0 runs calls in the caller's thread as before).
"""

from __future__ import annotations

import os
import queue
import threading

DEFAULT_NICE = 5


def call_nice() -> int:
    """How much the call thread's nice value is raised (INFERX_CALL_NICE, default DEFAULT_NICE, at
    most 19; 0: no call thread, calls from the caller's own)."""
    text = os.environ.get("INFERX_CALL_NICE", "").strip()
    try:
        return max(0, min(19, int(text))) if text else DEFAULT_NICE
    except ValueError:
        return DEFAULT_NICE


def lower_own_priority(nice: int) -> bool:
    """Raise this thread's nice value by `nice` (Linux: per thread); False where not possible."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + nice)
        return True
    except (AttributeError, OSError):
        return False


class CallThread:
    """Runs `fn(*args)` on one thread of lowered priority and hands back its result or raises its
    exception in the caller; started on first use (again in a forked child, where the parent's
    thread does not exist), stopped by `stop()` (or with the process)."""

    def __init__(self, nice: int):
        self.nice = nice
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0  # the process the thread was started in
        self._start_lock = threading.Lock()

    def __call__(self, fn, *args):
        if self.nice <= 0 or threading.current_thread() is self._thread:
            return fn(*args)
        if self._thread is None or self._pid != os.getpid():
            self._start()
        done, outcome = threading.Event(), []
        self._jobs.put((fn, args, outcome, done))
        done.wait()
        ok, value = outcome[0]
        if ok:
            return value
        raise value

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None or self._pid != os.getpid():
                self._jobs, self._pid = queue.SimpleQueue(), os.getpid()
                ready = threading.Event()
                self._thread = threading.Thread(target=self._serve, args=(ready,), name="inferx-call",
                                                daemon=True)
                self._thread.start()
                ready.wait()

    def _serve(self, ready: threading.Event) -> None:
        lower_own_priority(self.nice)
        ready.set()
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, outcome, done = job
            try:
                outcome.append((True, fn(*args)))
            except BaseException as e:  # noqa: BLE001 (handed to the caller, raised there)
                outcome.append((False, e))
            # nothing of the call stays referenced from this thread's frame (a module's context
            # held here past the session would outlive the interpreter's shutdown)
            del job, fn, args, outcome
            done.set()

    def stop(self) -> None:
        if self._thread is not None:
            self._jobs.put(None)
