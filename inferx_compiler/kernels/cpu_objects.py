"""Our C kernels for CPU targets, compiled into object files that IREE links into a dispatch's
embedded ELF (the llvm-cpu counterpart of the Triton-built PTX for Hopper).

IREE 3.13 links `#hal.executable.object<{path = "k.o"}>` objects into the executable library of
the `stream.executable` that carries them (samples/custom_dispatch/cpu/embedded). Only by path:
an object given as inline `data` is written to an empty temporary file (checked in 3.13's
LLVMCPUTarget.cpp: the temporary is created, the data never written), so the object must exist
on disk while IREE builds; it is kept in a cache directory keyed by the source, the compiler and
its flags. The source is built freestanding (no libc, no stack protector, position independent),
since nothing else is linked into IREE's ELF.

The compiler is `$CC`, else the first of cc, gcc, clang on PATH, and must target x86-64 (a build
machine of another architecture, or without a C compiler, leaves the work to IREE's code: the
pass that wanted the kernel says so in a remark).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from typing import Optional

from inferx_compiler.errors import InferXError

HERE = os.path.dirname(os.path.abspath(__file__))
FREESTANDING = ("-O3", "-std=c11", "-ffreestanding", "-fno-builtin", "-fno-stack-protector", "-fPIC", "-fno-plt",
                "-fno-asynchronous-unwind-tables", "-fvisibility=hidden", "-fno-exceptions")
# ISA flags per kernel source
_VNNI = ("-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni")
SOURCES = {"u8s8_gemm.c": _VNNI, "u8s4_gemm.c": _VNNI, "bf16_amx_gemm.c": ("-mavx512f", "-mamx-tile", "-mamx-bf16"),
           "u8s8_amx_gemm.c": ("-mavx512f", "-mamx-tile", "-mamx-int8"), "f32_gemm.c": ("-mavx512f", "-mprfchw"),
           "softmax_rows.c": ("-mavx512f",), "maxpool_planes.c": ("-mavx512f",)}
F32_K_BLOCK_MAX = 256  # f32_gemm.c's KC_MAX: the largest K block its packed weight and row buffer take
F32_HELD_FLOATS = 48 * 1024  # f32_gemm.c's HELD_FLOATS: the left entry's held-panel buffer (floats)
F32_K_BLOCK_MIN = 64  # a smaller block reloads the accumulators too often


class KernelBuildError(InferXError):
    """A kernel source could not be compiled for the build's target."""


@dataclasses.dataclass(frozen=True)
class KernelObject:
    path: str  # the object file (in the cache)
    sha256: str  # of the object file
    compiler: str  # the compiler's first version line


def cache_root() -> str:
    """$INFERX_KERNEL_CACHE, else $XDG_CACHE_HOME/inferx/kernels, else ~/.cache/inferx/kernels."""
    return os.environ.get("INFERX_KERNEL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "inferx", "kernels")


def cache_dir() -> str:
    root = cache_root()
    os.makedirs(root, exist_ok=True)
    return root


def c_compiler() -> tuple[Optional[list[str]], str]:
    """(the C compiler's command, its version line), or (None, why there is none usable). Probed
    once per ($CC, PATH): the passes ask for every product they take."""
    return _probe_compiler(os.environ.get("CC"), os.environ.get("PATH"))


@functools.lru_cache(maxsize=8)
def _probe_compiler(cc: Optional[str], path: Optional[str]) -> tuple[Optional[list[str]], str]:
    if cc:
        command = shlex.split(cc)
        if shutil.which(command[0], path=path) is None:
            return None, f"CC={cc!r} is not an executable on PATH"
    else:
        found = next((c for c in ("cc", "gcc", "clang") if shutil.which(c, path=path)), None)
        if found is None:
            return None, "no C compiler (cc, gcc or clang) on PATH; set CC"
        command = [found]
    try:
        machine = subprocess.run(command + ["-dumpmachine"], capture_output=True, text=True, timeout=60).stdout
        version = subprocess.run(command + ["--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"the C compiler {command[0]} does not run ({e})"
    if not machine.startswith("x86_64"):
        return None, f"the C compiler {command[0]} targets {machine.strip() or 'an unknown machine'}, not x86-64"
    return command, (version.splitlines() or [command[0]])[0]


def build(source: str) -> KernelObject:
    """The object file of `source` (a file name in SOURCES), compiled once and cached.
    KernelBuildError names what failed (no compiler, a compile error, an unwritable cache)."""
    return _cached(source)


def build_generated(text: str, stem: str, like: str) -> KernelObject:
    """The object file of generated C `text` (which may include this folder's sources), compiled
    once and cached with the flags of source `like` (a SOURCES name); errors as build's."""
    return _cached(like, text.encode(), stem)


def _cached(source: str, generated: Optional[bytes] = None, stem: Optional[str] = None) -> KernelObject:
    try:
        return _build(source, generated, stem)
    except OSError as e:
        raise KernelBuildError(f"cannot build {stem or source} in the kernel cache {e.filename or cache_root()!r}: "
                               f"{e.strerror or e} (set INFERX_KERNEL_CACHE to a writable folder)") from None


def _build(source: str, generated: Optional[bytes] = None, stem: Optional[str] = None) -> KernelObject:
    command, version = c_compiler()
    if command is None:
        raise KernelBuildError(version)
    path = os.path.join(HERE, source)
    with open(path, "rb") as f:
        text = (generated + b"\0" if generated is not None else b"") + f.read()
    for header in sorted(h for h in os.listdir(HERE) if h.endswith(".h")):  # what the sources include
        with open(os.path.join(HERE, header), "rb") as f:
            text += b"\0" + f.read()
    flags = list(FREESTANDING) + list(SOURCES[source]) + (["-I", HERE] if generated is not None else [])
    key = hashlib.sha256(b"\0".join([text, version.encode(), " ".join(command + flags).encode()])).hexdigest()[:24]
    out = os.path.join(cache_dir(), f"{stem or os.path.splitext(source)[0]}-{key}.o")
    if not os.path.isfile(out):
        if generated is not None:  # the generated text, kept beside its object
            path = out[:-2] + ".c"
            fd, tmp = tempfile.mkstemp(suffix=".c", dir=os.path.dirname(out))
            with os.fdopen(fd, "wb") as f:
                f.write(generated)
            os.replace(tmp, path)
        fd, tmp = tempfile.mkstemp(suffix=".o", dir=os.path.dirname(out))
        os.close(fd)
        proc = subprocess.run(command + flags + ["-c", path, "-o", tmp], capture_output=True, text=True)
        if proc.returncode != 0:
            os.unlink(tmp)
            raise KernelBuildError(f"{command[0]} failed on {source}: {proc.stderr.strip()[-2000:]}")
        os.replace(tmp, out)  # atomic: concurrent builds see the whole object or none
    with open(out, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return KernelObject(out, digest, version)


def vnni_kernel_declined(target, k: int, n: int, group: int = 0) -> Optional[str]:
    """Why our VNNI kernels cannot take a product with a [K, N] weight on `target` (None: they
    can): u8s8 for int8, u8s4 for int4 in groups of `group` along K. Any N: the weights are
    zero-padded to the kernels' 32 columns at load and the extra columns cut. The pass that rewrites the
    products and the calibration that emulates them both ask here, so they agree."""
    if target.backend != "llvm-cpu" or "avx512_vnni" not in target.features:
        return f"target '{target.name}' has no AVX-512 VNNI"
    if k % 4:
        return f"K={k} is not a multiple of 4"
    if group and group % 8:
        return f"int4 groups of {group} are not a multiple of 8"
    if k * 255 * 128 >= 2**31:
        return f"K={k}: its s32 sums could overflow"
    command, why = c_compiler()
    return None if command is not None else why


def int8_amx_declined(target, k: int) -> Optional[str]:
    """Why an int8 product the VNNI kernel takes cannot run on AMX instead (u8s8_amx_gemm.c: the
    same operands and sums, 16384 multiply-adds an instruction), or None."""
    if "amx_int8" not in target.features:
        return f"target '{target.name}' has no AMX (amx_int8)"
    if k % 64:
        return f"K={k} is not a multiple of 64 (the AMX tile's int8 depth)"
    return None


def bf16_amx_declined(target, k: int) -> Optional[str]:
    """Why our AMX kernel (bf16_amx_gemm.c) cannot take a bf16 product with a [K, N] weight on
    `target` (None: it can). Any N: the weight is zero-padded to the kernel's columns at load."""
    if target.backend != "llvm-cpu" or "amx_bf16" not in target.features:
        return f"target '{target.name}' has no AMX (amx_bf16)"
    if k % 32:
        return f"K={k} is not a multiple of 32 (the AMX tile's bf16 depth)"
    command, why = c_compiler()
    return None if command is not None else why


def f32_k_block(k: int) -> Optional[int]:
    """The K block of f32_gemm.c's packed weight for a K-deep product: K itself up to 256, else
    its largest divisor from 64 to 256 (the layout has whole blocks); None when there is none."""
    if k <= F32_K_BLOCK_MAX:
        return k
    return next((d for d in range(F32_K_BLOCK_MAX, F32_K_BLOCK_MIN - 1, -1) if k % d == 0), None)


def f32_kernel_declined(target, k: int) -> Optional[str]:
    """Why our AVX-512 f32 kernel (f32_gemm.c) does not take an f32 product with a K-deep weight on
    `target` (None: it does): no AVX-512, a record that leaves f32 matmuls to IREE
    (Target.f32_kernel), no K block, no C compiler."""
    if target.backend != "llvm-cpu" or "avx512f" not in target.features:
        return f"target '{target.name}' has no AVX-512"
    if not target.f32_kernel:
        return (f"target '{target.name}' leaves f32 matmuls to IREE, whose mmt4d measured as fast there "
                f"(Target.f32_kernel)")
    if f32_k_block(k) is None:
        return (f"K={k} has no divisor from {F32_K_BLOCK_MIN} to {F32_K_BLOCK_MAX} "
                f"(the kernel's packed weight is in whole K blocks)")
    command, why = c_compiler()
    return None if command is not None else why
