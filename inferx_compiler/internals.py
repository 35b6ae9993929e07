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

- torch-mlir 20261001: its Python bindings register the `torch` dialect but not `torch_c`
  (TorchConversion), whose `to_builtin_tensor` / `from_builtin_tensor` ops bridge a torch value
  and a builtin tensor; running the linalg pipeline once on an empty module loads it into a
  context (`load_torch_conversion`). The bindings have no builder for `!torch.vtensor` types
  either: `builtin_tensor_type` reads one from its printed form. And the linalg pipeline's last
  pass (the backend contract) rejects calls, which our kernels' ops are until IREE's context
  replaces them: `without_backend_contract` drops that pass from the registered pipeline.

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


TORCH_MLIR_VERSION = "20261001"
BACKEND_CONTRACT_PASS = "torch-verify-linalg-on-tensors-backend-contract"
# torch's element types (vtensor) -> the builtin ones the linalg pipeline gives them
_TORCH_ELEMENT_TYPES = {"si64": "i64", "si32": "i32", "si16": "i16", "si8": "i8", "ui8": "i8"}


def load_torch_conversion(context) -> None:
    """Load torch-mlir's `torch_c` dialect into `context` (the graph context)."""
    check_version("torch-mlir", TORCH_MLIR_VERSION, "the torch_c dialect, loaded by a pipeline run")
    from torch_mlir import ir
    from torch_mlir.passmanager import PassManager

    if context.is_registered_operation("torch_c.to_builtin_tensor"):
        return
    with context, ir.Location.unknown():
        PassManager.parse("builtin.module(torch-backend-to-linalg-on-tensors-backend-pipeline)").run(
            ir.Module.create().operation)


def builtin_tensor_type(torch_type):
    """!torch.vtensor<[2,8],f16> -> tensor<2x8xf16> (static shapes; the linalg pipeline's types)."""
    from torch_mlir import ir

    text = str(torch_type)
    prefix = "!torch.vtensor<["
    if not text.startswith(prefix) or "?" in text:
        raise ValueError(f"{text}: not a static-shape value tensor")
    dims, element = text[len(prefix):-1].rsplit("],", 1)
    shape = [int(d) for d in dims.split(",")] if dims else []
    return ir.RankedTensorType.get(shape, ir.Type.parse(_TORCH_ELEMENT_TYPES.get(element, element)))


def without_backend_contract(pipeline: str, context) -> str:
    """`pipeline` (a textual pipeline naming torch-mlir's registered ones) expanded, with its
    backend-contract verification left out."""
    check_version("torch-mlir", TORCH_MLIR_VERSION, "the linalg pipeline's pass list")
    from torch_mlir.passmanager import PassManager

    expanded = str(PassManager.parse(pipeline, context=context))
    passes = [p for p in _top_level(expanded[len("builtin.module("):-1]) if p != BACKEND_CONTRACT_PASS]
    return "builtin.module(" + ",".join(passes) + ")"


def _top_level(text: str) -> list[str]:
    from inferx_compiler.passes.infra.pipeline import split_top_level

    return split_top_level(text)
