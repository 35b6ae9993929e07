"""The one place that reaches into dependencies' private internals, each checked against the
version it was written for.

- iree-base-compiler 3.13.0: `iree.compiler.api` exposes no way to stop or resume a compile at a
  phase (`--compile-to`/`--compile-from`) on an `Invocation`, nor IREE's process-wide LLVM
  options (`ireeCompilerSetupGlobalCL`); the C API has both, reached through the package's
  private ctypes handle (`ctypes_dl._dylib`), an invocation's private pointer (`_inv_p`) and the
  private `_initializeGlobalCL`.
- triton 3.7.0 (the `hopper` extra): `triton.compile` writes line info naming the kernel's source
  path into the PTX unless the process-wide `triton.knobs.compilation.disable_line_info` is set;
  artifacts must not depend on where the package is installed, so it is set around each compile.

A version other than the one written for fails here, with a message that names the package and
what to install, instead of an AttributeError deep inside a build.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from importlib import metadata
from typing import Callable, Iterator

from inferx_compiler.errors import InferXError

IREE_COMPILER_VERSION = "3.13.0"
TRITON_VERSION = "3.7.0"


class DependencyVersionError(InferXError):
    """A dependency whose internals we use is at a version they were not checked against."""


def installed_version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def check_version(distribution: str, written_for: str, what: str,
                  version_of: Callable[[str], str] = installed_version) -> None:
    found = version_of(distribution)
    if found != written_for:
        raise DependencyVersionError(
            f"inferx-compiler uses {distribution}'s internals ({what}), written for {written_for}; "
            f"this environment has {found}. Install {distribution}=={written_for} "
            f"(pyproject.toml pins it).")


# ---------------------------------------------------------------------------- IREE's compiler
_IREE_INTERNALS = "ctypes_dl._dylib, Invocation._inv_p, api._initializeGlobalCL"
_phase_lock = threading.Lock()
_phase_functions: tuple | None = None


def _iree_phase_functions():
    global _phase_functions
    with _phase_lock:
        if _phase_functions is None:
            check_version("iree-base-compiler", IREE_COMPILER_VERSION, _IREE_INTERNALS)
            from iree.compiler.api import ctypes_dl

            lib = ctypes_dl._dylib  # initialized by the first Session
            functions = (lib.ireeCompilerInvocationSetCompileToPhase, lib.ireeCompilerInvocationSetCompileFromPhase)
            for fn in functions:
                fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
                fn.restype = None
            _phase_functions = functions
        return _phase_functions


def set_compile_phases(invocation, compile_to: str | None, compile_from: str | None) -> None:
    """`--compile-to` / `--compile-from` on an `iree.compiler.api.Invocation` (a Session must
    exist: it loads the library)."""
    set_to, set_from = _iree_phase_functions()
    if compile_to:
        set_to(invocation._inv_p, compile_to.encode())
    if compile_from:
        set_from(invocation._inv_p, compile_from.encode())


def initialize_global_options(program: str, *flags: str) -> None:
    """IREE's process-wide LLVM command-line options (once per process: iree_global_options)."""
    check_version("iree-base-compiler", IREE_COMPILER_VERSION, _IREE_INTERNALS)
    from iree.compiler.api import _initializeGlobalCL

    _initializeGlobalCL(program, *flags)


# ---------------------------------------------------------------------------- Triton
_triton_lock = threading.Lock()


@contextlib.contextmanager
def triton_without_line_info() -> Iterator[None]:
    """Around `triton.compile`: PTX without line info (no source paths in artifacts). The knob is
    process-wide; the lock keeps two compiles of this process from restoring it under each other."""
    check_version("triton", TRITON_VERSION, "triton.knobs.compilation.disable_line_info")
    import triton

    knobs = triton.knobs.compilation
    with _triton_lock:
        saved, knobs.disable_line_info = knobs.disable_line_info, True
        try:
            yield
        finally:
            knobs.disable_line_info = saved
