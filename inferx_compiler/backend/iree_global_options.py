"""IREE options that are process-wide LLVM command-line options, not session flags.

IREE 3.13 registers a few options only with LLVM's global command line: a compiler
`Session` answers `option not found` for them (`Session.set_flags`), while `iree-compile`
accepts them. They can be set once per process through the embedding API's
`ireeCompilerSetupGlobalCL`, which the Python package exposes only as the private
`iree.compiler.api._initializeGlobalCL` (reached through inferx_compiler/internals.py, which
checks the version it was written for).

Global options stick for the life of the process, and IREE takes them once per process.
`apply()` sets them on the first build and refuses a different value (or a new option) later;
`conflicts()` says so beforehand, and the IREE half of such a build runs in a fresh child
interpreter instead (iree_backend), so that a process can build for CPU targets whose records
choose different values (e.g. the matmul tile budget from each target's L2 cache).
"""

from __future__ import annotations

import threading

from inferx_compiler.errors import PipelineError

# Options IREE 3.13 knows only globally (each checked: Session.set_flags rejects it, and
# iree-compile takes it). A flag of another name goes to the session, which validates it.
GLOBAL_OPTIONS = frozenset({
    "iree-dispatch-creation-experimental-set-data-tiling-ops",
    "iree-llvmcpu-number-of-threads",
    "iree-dispatch-creation-block-matmul-producer-fusion",
    "iree-llvmcpu-matmul-tile-bytes",
})

_lock = threading.Lock()
_applied: dict[str, tuple[str, ...]] = {}  # option name -> values (list options repeat)


def option_name(flag: str) -> str:
    return flag.lstrip("-").split("=", 1)[0]


def is_global(flag: str) -> bool:
    return option_name(flag) in GLOBAL_OPTIONS


def split(flags: list[str]) -> tuple[list[str], list[str]]:
    """(session flags, global flags), each in the given order."""
    session = [f for f in flags if not is_global(f)]
    return session, [f for f in flags if is_global(f)]


def _grouped(flags: list[str]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for f in flags:
        _, _, value = f.partition("=")
        out.setdefault(option_name(f), []).append(value)
    return {k: tuple(v) for k, v in out.items()}


def conflicts(flags: list[str]) -> list[str]:
    """The global options among `flags` this process cannot take any more: set already to other
    values, or new after IREE's one-time global setup. Empty when `apply(flags)` would succeed."""
    wanted = _grouped([f for f in flags if is_global(f)])
    with _lock:
        if not _applied:
            return []
        return sorted(name for name, values in wanted.items() if _applied.get(name) != values)


def apply(flags: list[str]) -> None:
    """Set these global options for this process (a no-op for those already set alike)."""
    if not flags:
        return
    wanted = _grouped(flags)
    with _lock:
        for name, values in wanted.items():
            if name in _applied and _applied[name] != values:
                raise PipelineError(
                    f"IREE's process-wide option --{name} is already set to "
                    f"{', '.join(_applied[name])} in this process; this build needs "
                    f"{', '.join(values)}. Build in a new process (inferx-compile does).")
        fresh = [f for f in flags if option_name(f) not in _applied]
        if not fresh:
            return
        from inferx_compiler.internals import initialize_global_options

        initialize_global_options("inferx-compile", *fresh)
        for name, values in wanted.items():
            _applied.setdefault(name, values)


def applied() -> dict[str, tuple[str, ...]]:
    with _lock:
        return dict(_applied)
