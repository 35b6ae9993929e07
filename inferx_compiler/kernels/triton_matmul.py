"""A Hopper (sm_90a) matmul kernel written in Triton and compiled ahead of time, without a GPU.

IREE 3.13's CUDA code is Ampere-class (mma.sync); on an H200 its f16 matmuls run at 60-125
TFLOP/s. The same shapes through this kernel, compiled by Triton for sm_90a (wgmma, software
pipelined cp.async), ran 2.5-4x faster in isolation (docs/bench/2026-12-02-h200-extern/). The
kernel computes, for one output tile and one slice of the reduction,

    out[s, m, n] = init[m, n] (when HAS_INIT) + sum_{k in slice s} a[m, k] * b[k, n]

with f16/bf16 inputs (a stored [M, K] or, A_T, [K, M]; b [K, N] or, B_T, [N, K]), f32
accumulation and f32 output. Slices (split-K, S > 1) are summed by the caller.

This module is the only place that touches Triton's compiler API (checked against
TRITON_VERSION): `compile_kernel(spec)` returns the PTX and the launch parameters IREE's CUDA
HAL needs (threads per workgroup, dynamic shared memory, the kernel's parameter list).
Triton appends two scratch pointers to every kernel's parameters (global and profile scratch);
callers bind them to small dummy buffers.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from typing import Optional

TRITON_VERSION = "3.7.0"  # the version whose compiler API (ASTSource, GPUTarget) this uses
SCRATCH_POINTERS = 2  # global_scratch, profile_scratch: appended by Triton >= 3.3
INPUT_TYPES = {"f16": "fp16", "bf16": "bf16"}


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """One compiled variant: the problem (static) and the tile configuration."""

    m: int
    n: int
    k: int
    element_type: str  # "f16" or "bf16"
    a_transposed: bool = False
    b_transposed: bool = False
    has_init: bool = False
    split: int = 1  # reduction slices (grid's second dimension)
    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    warps: int = 8
    stages: int = 3
    arch: int = 90

    def __post_init__(self):
        if self.element_type not in INPUT_TYPES:
            raise ValueError(f"element type {self.element_type}: the kernel takes {', '.join(INPUT_TYPES)}")
        if self.split < 1 or self.k % self.split or (self.k // self.split) % self.block_k:
            raise ValueError(f"split {self.split} does not cut K={self.k} into multiples of {self.block_k}")

    @property
    def grid(self) -> tuple[int, int, int]:
        tiles = -(-self.m // self.block_m) * -(-self.n // self.block_n)
        return (tiles, self.split, 1)

    @property
    def input_bindings(self) -> int:
        return 3 if self.has_init else 2

    def key(self) -> str:
        text = json.dumps(dataclasses.asdict(self), sort_keys=True) + TRITON_VERSION
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class CompiledKernel:
    spec: KernelSpec
    name: str  # the PTX entry point
    ptx: bytes
    threads: int
    shared_bytes: int
    parameters: int  # pointer parameters of the entry point (bindings IREE must pass)


class TritonUnavailable(RuntimeError):
    pass


def available() -> Optional[str]:
    """None when Triton TRITON_VERSION is importable, else why not."""
    try:
        import triton
    except ImportError:
        return f"Triton is not installed (pip install 'inferx-compiler[hopper]', triton=={TRITON_VERSION})"
    if triton.__version__ != TRITON_VERSION:
        return f"Triton {triton.__version__} is installed; this build needs {TRITON_VERSION}"
    return None


@functools.lru_cache(maxsize=1)
def _kernel_function():
    import triton
    import triton.language as tl

    @triton.jit
    def inferx_matmul(a_ptr, b_ptr, init_ptr, out_ptr,
                      M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, K_SLICE: tl.constexpr,
                      A_T: tl.constexpr, B_T: tl.constexpr, HAS_INIT: tl.constexpr,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
        pid = tl.program_id(0)
        s = tl.program_id(1)
        tiles_m = tl.cdiv(M, BM)
        tiles_n = tl.cdiv(N, BN)
        # grouped order: GROUP row tiles share the columns they read while they are in L2
        per_group = GROUP * tiles_n
        first_m = (pid // per_group) * GROUP
        rows = min(tiles_m - first_m, GROUP)
        pm = first_m + (pid % per_group) % rows
        pn = (pid % per_group) // rows
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = s * K_SLICE + tl.arange(0, BK)
        if A_T:
            a = a_ptr + rk[None, :] * M + rm[:, None]
            a_step = BK * M
        else:
            a = a_ptr + rm[:, None] * K + rk[None, :]
            a_step = BK
        if B_T:
            b = b_ptr + rn[None, :] * K + rk[:, None]
            b_step = BK
        else:
            b = b_ptr + rk[:, None] * N + rn[None, :]
            b_step = BK * N
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(0, K_SLICE, BK):
            av = tl.load(a, mask=rm[:, None] < M, other=0.0)
            bv = tl.load(b, mask=rn[None, :] < N, other=0.0)
            acc = tl.dot(av, bv, acc)
            a += a_step
            b += b_step
        inside = (rm[:, None] < M) & (rn[None, :] < N)
        if HAS_INIT:
            acc += tl.load(init_ptr + rm[:, None] * N + rn[None, :], mask=inside, other=0.0)
        tl.store(out_ptr + s * M * N + rm[:, None] * N + rn[None, :], acc, mask=inside)

    return inferx_matmul


def compile_kernel(spec: KernelSpec, cache_dir: Optional[str] = None) -> CompiledKernel:
    """PTX for `spec`, cached on disk by spec and Triton version ($XDG_CACHE_HOME or ~/.cache,
    inferx/triton/), or in `cache_dir`."""
    why = available()
    if why:
        raise TritonUnavailable(why)
    if cache_dir is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        cache_dir = os.path.join(base, "inferx", "triton")
    path = os.path.join(cache_dir, spec.key() + ".json")
    try:
        with open(path) as f:
            rec = json.load(f)
        return CompiledKernel(spec, rec["name"], rec["ptx"].encode(), rec["threads"], rec["shared"],
                              rec["parameters"])
    except (OSError, ValueError, KeyError):
        pass  # not cached (or unreadable): compile
    kernel = _compile(spec)
    try:  # a cache that cannot be written only costs the next build a compile
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"name": kernel.name, "ptx": kernel.ptx.decode(), "threads": kernel.threads,
                       "shared": kernel.shared_bytes, "parameters": kernel.parameters}, f)
        os.replace(tmp, path)
    except OSError:
        pass
    return kernel


def _compile(spec: KernelSpec) -> CompiledKernel:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    dtype = INPUT_TYPES[spec.element_type]
    signature = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "init_ptr": "*fp32", "out_ptr": "*fp32"}
    constants = dict(M=spec.m, N=spec.n, K=spec.k, K_SLICE=spec.k // spec.split, A_T=spec.a_transposed,
                     B_T=spec.b_transposed, HAS_INIT=spec.has_init, BM=spec.block_m, BN=spec.block_n,
                     BK=spec.block_k, GROUP=8)
    signature.update({name: "constexpr" for name in constants})
    if not spec.has_init:  # the init pointer is not read: a constexpr None drops the parameter
        signature["init_ptr"] = "constexpr"
        constants["init_ptr"] = None
    # IREE's bindings are at least 16-byte aligned (HAL buffer offsets), which lets Triton vectorize
    pointers = [i for i, name in enumerate(signature) if signature[name].startswith("*")]
    attrs = {(i,): [["tt.divisibility", 16]] for i in pointers}
    source = ASTSource(fn=_kernel_function(), signature=signature, constexprs=constants, attrs=attrs)
    # no line info: the PTX would name this file's path, and the artifact must not depend on it
    knobs = triton.knobs.compilation
    saved, knobs.disable_line_info = knobs.disable_line_info, True
    try:
        compiled = triton.compile(source, target=GPUTarget("cuda", spec.arch, 32),
                                  options={"num_warps": spec.warps, "num_stages": spec.stages})
    finally:
        knobs.disable_line_info = saved
    ptx = compiled.asm["ptx"]
    return CompiledKernel(spec, compiled.metadata.name, ptx.encode(), 32 * compiled.metadata.num_warps,
                          compiled.metadata.shared, len(pointers) + SCRATCH_POINTERS)
