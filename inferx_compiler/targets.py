"""The target table: one record per target, read by the passes and the driver.

Target knowledge is data. A `Target` says what the hardware is (arch, vector width
per dtype, memory sizes, dtypes it computes natively) and how IREE reaches it
(`iree_flags()` builds the flags from the record; no per-target flag strings live
anywhere else).

Hopper (h100, h200): IREE 3.13 has no sm_90 entry in its known-target table. We ship
the route that compiles for sm_80 and embeds PTX, which the CUDA driver JIT-compiles
for sm_90 at module load. It was checked on an H200 (results identical to the CPU
build; see README). Declaring an sm_90 target inside the module produces PTX with
`.target sm_90` but the very same Ampere-class code (mma.sync, no wgmma/TMA), measured
at the same speed, so the simpler and upstream-reproducible route is the one shipped.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
from dataclasses import dataclass
from typing import Optional

from inferx_compiler.errors import TargetError

_DTYPE_BITS = {"f64": 64, "f32": 32, "f16": 16, "bf16": 16, "f8": 8, "i64": 64,
               "i32": 32, "i16": 16, "i8": 8, "i4": 4}


# CUDA architectures with Hopper's instructions (wgmma), which IREE 3.13 does not generate
HOPPER_ARCHS = ("sm_90", "sm_90a")


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    backend: str  # "llvm-cpu", "cuda" or "none"
    arch: str  # LLVM CPU name or CUDA SM the hardware is
    vector_bits: int  # native SIMD register width (CPU) or widest per-thread load (GPU)
    native_dtypes: tuple[str, ...]  # dtypes the compute units take natively
    triple: Optional[str] = None  # LLVM triple for CPU targets (None: host)
    cpu_features: Optional[str] = None
    cuda_target: Optional[str] = None  # what IREE is asked to build (--iree-cuda-target)
    memory_bytes: Optional[int] = None  # device memory (GPU) / typical RAM (SoC)
    shared_memory_bytes: Optional[int] = None  # per workgroup (GPU)
    l2_bytes: Optional[int] = None
    subgroup_size: Optional[int] = None
    runtime_driver: Optional[str] = None  # iree.runtime driver that runs its modules
    peak_gflops: Optional[float] = None  # dense f32 (CPU) / f16 tensor-core (GPU) rate, for estimates
    bandwidth_gbs: Optional[float] = None  # memory bandwidth, for estimates
    route_note: str = ""
    features: tuple[str, ...] = ()  # ISA features passes decide on (avx2, fma, avx512f, avx512_bf16, ...)
    cores: Optional[int] = None  # CPU cores a call is spread over (CPU) / SMs (GPU)
    l1_bytes: Optional[int] = None  # per-core L1 data cache (CPU)
    # 3x3 stride-1 convolutions through IREE's Winograd F(6,3). Off everywhere: with weights as
    # parameters IREE transforms the filters on every call (3.5x slower than im2col on ResNet-50;
    # docs/levers/conv-strategy.md).
    winograd: bool = False
    # IREE's NCHWc data-tiled convolutions with its `conv_nchwc` f32 microkernel (16x16 channel
    # blocks; IREE 3.13 has it for AVX-512 only). inferx-conv-strategy leaves 3x3-and-larger
    # convolutions whose channel counts are multiples of 16 to it, faster there than im2col +
    # matmul (docs/levers/conv-strategy.md).
    conv_microkernel: bool = False
    # Operand bytes of one workgroup tile of IREE's data-tiled matmuls
    # (`--iree-llvmcpu-matmul-tile-bytes`; None: `matmul_tile_bytes_for` the record's per-core L2).
    # IREE's tiles keep the whole reduction dim, so at its default 256 KiB a 4096-deep f32 weight is
    # streamed once per 16 rows. 1 MiB where the L2 holds it (the MLP at batch 64 faster, the rest
    # level), else 256 KiB (1 MiB cost BERT on a 512 KiB L2): docs/levers/data-tiling.md.
    # `--iree-flag=--iree-llvmcpu-matmul-tile-bytes=N` sets it per build.
    matmul_tile_bytes: Optional[int] = None
    # IREE's optimization level (`--iree-opt-level`) for builds whose contractions are all f16/bf16
    # (None: IREE 3.13's default, O0, as for every other build). O2 adds aggressive dispatch fusion
    # (a layer norm in one kernel), fp reassociation and matmul generalization: O2 on CUDA targets,
    # as fast or faster there on every model; not for int8/fp32 builds (wrong weight-only int8 outputs, slower
    # fp32) nor on CPU (slower on BERT). docs/levers/hopper-matmul.md.
    half_precision_opt_level: Optional[str] = None
    # inferx-f32-matmul: f32 matmuls against weights on our AVX-512 kernel (f32_gemm.c), the weight
    # on the right (projections) or on the left (convolutions, their bias, residual and ReLU in the
    # kernel). On where it was measured faster: AVX-512 cores of the AMX generation (two 512-bit
    # FMA units; IREE's mmt4d reaches half their rate), i.e. the host's flags have avx512f and
    # amx_tile, and the records of such cores; off on AVX-512 cores without AMX (a Zen 4 measured
    # 0-12% slower with it) and on AVX2. Decided by instruction sets, never by vendor.
    # docs/levers/f32-kernel.md.
    f32_kernel: bool = False

    @property
    def executable(self) -> bool:
        return self.backend != "none"

    def vector_width(self, dtype: str) -> int:
        """Elements of `dtype` per vector register / widest access."""
        bits = _DTYPE_BITS[dtype]
        return max(1, self.vector_bits // bits)

    def iree_flags(self) -> list[str]:
        """The IREE compiler flags this target implies (deterministic order)."""
        if self.backend == "llvm-cpu":
            flags = [
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
            ]
            if self.triple:
                flags.append(f"--iree-llvmcpu-target-triple={self.triple}")
            flags.append(f"--iree-llvmcpu-target-cpu={self.arch if self.triple else 'host'}")
            if self.cpu_features:
                flags.append(f"--iree-llvmcpu-target-cpu-features={self.cpu_features}")
            # IREE 3.13 embeds DWARF whose bytes vary from process to process when ops carry
            # name-only locations (ours do: ONNX node names); without it builds are reproducible.
            flags.append("--iree-llvmcpu-debug-symbols=false")
            # Data tiling (packed, target-width matmul layouts; weights packed once at load) is
            # off by default in IREE 3.13 for llvm-cpu; on, BERT-base runs about 4x faster
            # (docs/levers/data-tiling.md). (The driver builds again without it where IREE's data
            # tiling fails.)
            flags.append("--iree-opt-data-tiling=true")
            # Which op families data tiling annotates: a process-wide *list* option (naming only
            # `convolution` would silently drop matmuls). The same list for every CPU target, so
            # that builds for several CPU targets can share a process; convolutions get packed
            # layouts only where IREE has conv tiles for the ISA (AVX-512 f32), and only the
            # convolutions inferx-conv-strategy leaves as convolutions reach it.
            flags += [f"--iree-dispatch-creation-experimental-set-data-tiling-ops={op}"
                      for op in DATA_TILING_OPS]
            if self.conv_microkernel:
                flags.append("--iree-llvmcpu-enable-ukernels=mmt4d,conv_nchwc")
            # f32 reductions reassociated (IREE 3.13's default: not): a row's max or sum then runs
            # in vector lanes with one horizontal step at its end, not a scalar chain per 16 values
            # (a softmax alone about 2x faster; docs/levers/cpu-math-kernels.md). Sums in another
            # order: results agree to f32 rounding.
            flags.append("--iree-llvmcpu-reassociate-fp-reductions=true")
            # IREE's aggressive dispatch fusion (part of its O2; off at 3.13's default O0): a
            # quantized transformer's dequantization, GELU and quantization in fewer dispatches
            # (docs/levers/cpu-math-kernels.md). Some layer norms then exceed IREE's stack limit in
            # code generation (GPT-2's): the driver builds those again without it
            # (`driver._compile_with_fallback`).
            flags.append(AGGRESSIVE_FUSION_FLAG)
            # A process-wide IREE option: always set, so that one build's value never carries
            # into the next build of the process (a different one is refused there).
            tile_bytes = self.matmul_tile_bytes or matmul_tile_bytes_for(self.l2_bytes)
            flags.append(f"--{MATMUL_TILE_BYTES_OPTION}={tile_bytes}")
            return flags
        if self.backend == "cuda":
            return ["--iree-hal-target-device=cuda", f"--iree-cuda-target={self.cuda_target}"]
        raise TargetError(
            f"target '{self.name}' has no IREE backend: {self.route_note or 'nothing to compile to'}"
        )

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["executable"] = self.executable
        d["vector_width"] = {dt: self.vector_width(dt) for dt in ("f32", "f16", "i8")}
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Target":
        """The record `to_json` wrote (a manifest's "target"): the resolved target as built,
        not the table's entry of that name on this machine."""
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in fields}
        return cls(**values)


AGGRESSIVE_FUSION_FLAG = "--iree-dispatch-creation-enable-aggressive-fusion=true"
MATMUL_TILE_BYTES_OPTION = "iree-llvmcpu-matmul-tile-bytes"  # the data-tiled matmul tile budget (process-wide)
IREE_MATMUL_TILE_BYTES = 256 * 1024  # IREE 3.13's default for it
DATA_TILING_OPS = ("matmul", "scaled_matmul", "convolution")

_X86_FEATURES = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")


LARGE_L2_TILE_BYTES = 1 << 20  # the budget where the per-core L2 holds it


def matmul_tile_bytes_for(l2_bytes: Optional[int]) -> int:
    """The data-tiled matmul tile budget for a CPU with this per-core L2 (Target.matmul_tile_bytes
    says why; docs/levers/data-tiling.md the figures): 1 MiB from 1 MiB of L2 on, else IREE's default."""
    return LARGE_L2_TILE_BYTES if (l2_bytes or 0) >= LARGE_L2_TILE_BYTES else IREE_MATMUL_TILE_BYTES


def _host_cpu() -> Target:
    """The machine compiling: x86-64 with AVX-512 if present, AVX2 otherwise, or aarch64."""
    machine = platform.machine().lower()
    flags = _cpu_flags()
    features = ("neon",) if machine in ("aarch64", "arm64") else tuple(f for f in _X86_FEATURES if f in flags)
    if machine in ("aarch64", "arm64"):
        bits, arch, dtypes = 128, "host", ("f32", "f16", "i8")
    elif "avx512f" in flags:
        bits, arch = 512, "host"
        dtypes = ("f32", "bf16", "i8") if "avx512_bf16" in flags else ("f32", "i8")
    else:
        bits, arch, dtypes = 256, "host", ("f32", "i8")
    l1, l2 = _cache_bytes(1), _cache_bytes(2)
    return Target(
        name="cpu", description=f"this machine's CPU ({machine}, {bits}-bit vectors)",
        backend="llvm-cpu", arch=arch, vector_bits=bits, native_dtypes=dtypes,
        runtime_driver="local-task", peak_gflops=180.0 if bits == 512 else 90.0, bandwidth_gbs=30.0,
        conv_microkernel=machine in ("x86_64", "amd64") and "avx512f" in flags,
        f32_kernel="avx512f" in flags and "amx_tile" in flags,
        route_note="compiled for the host CPU (--iree-llvmcpu-target-cpu=host): run it where it was built",
        features=features, cores=os.cpu_count() or 1, l1_bytes=l1 or 32 * 1024, l2_bytes=l2 or 512 * 1024,
    )


def _cache_bytes(level: int) -> Optional[int]:
    """This machine's per-core data (or unified) cache size at `level`, from sysfs."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for index in sorted(os.listdir(base)):
            folder = os.path.join(base, index)
            with open(os.path.join(folder, "level")) as f:
                if int(f.read()) != level:
                    continue
            with open(os.path.join(folder, "type")) as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(os.path.join(folder, "size")) as f:
                text = f.read().strip()
            scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1], 1)
            return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        return None
    return None


def _cpuinfo(field: str) -> str:
    """The value of the first `field` line of /proc/cpuinfo ("" where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":", 1)[0].strip() == field:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _cpu_flags() -> set[str]:
    return set(_cpuinfo("flags").split())


_AMPERE_SMEM = 166 * 1024
_HOPPER_SMEM = 227 * 1024

_STATIC_TARGETS = (
    Target("x86-avx2", "x86-64 with AVX2/FMA (Haswell and newer)", "llvm-cpu", "haswell", 256,
           ("f32", "i8"), triple="x86_64-unknown-linux-gnu", runtime_driver="local-task",
           peak_gflops=100.0, bandwidth_gbs=20.0, features=("avx2", "fma"), cores=4,
           l1_bytes=32 * 1024, l2_bytes=256 * 1024),
    Target("x86-avx512", "x86-64 with AVX-512 (Skylake-SP / Cascade Lake and newer)", "llvm-cpu",
           "skylake-avx512", 512, ("f32", "i8"), triple="x86_64-unknown-linux-gnu",
           runtime_driver="local-task", peak_gflops=180.0, bandwidth_gbs=30.0,
           features=("avx2", "fma", "avx512f"), cores=4, l1_bytes=32 * 1024, l2_bytes=1024 * 1024,
           conv_microkernel=True, f32_kernel=True),
    Target("x86-avx512-vnni", "x86-64 with AVX-512 and VNNI (Cascade Lake, Ice Lake, Sapphire Rapids, Zen 4 "
           "and newer)", "llvm-cpu", "cascadelake", 512, ("f32", "i8"), triple="x86_64-unknown-linux-gnu",
           runtime_driver="local-task", peak_gflops=180.0, bandwidth_gbs=30.0,
           features=("avx2", "fma", "avx512f", "avx512_vnni"), cores=4, l1_bytes=32 * 1024,
           l2_bytes=1024 * 1024, conv_microkernel=True),
    Target("x86-amx", "x86-64 with AVX-512 (bf16, VNNI) and AMX (Sapphire Rapids, Emerald Rapids, Granite "
           "Rapids)", "llvm-cpu", "sapphirerapids", 512, ("f32", "bf16", "i8"), triple="x86_64-unknown-linux-gnu",
           runtime_driver="local-task", peak_gflops=180.0, bandwidth_gbs=30.0,
           features=("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8"),
           cores=4,
           l1_bytes=48 * 1024, l2_bytes=2 * 1024 * 1024, conv_microkernel=True, f32_kernel=True),
    Target("aarch64", "64-bit Arm with NEON (Armv8-A)", "llvm-cpu", "generic", 128,
           ("f32", "f16", "i8"), triple="aarch64-unknown-linux-gnu", cpu_features="+neon",
           runtime_driver="local-task", peak_gflops=50.0, bandwidth_gbs=20.0, features=("neon",),
           cores=4, l1_bytes=64 * 1024, l2_bytes=512 * 1024),
    Target("a100", "NVIDIA A100 (Ampere, sm_80)", "cuda", "sm_80", 128,
           ("f32", "tf32", "f16", "bf16", "i8"), cuda_target="sm_80",
           memory_bytes=80 * 2**30, shared_memory_bytes=_AMPERE_SMEM, l2_bytes=40 * 2**20,
           subgroup_size=32, runtime_driver="cuda", peak_gflops=312_000.0, bandwidth_gbs=1_935.0, cores=108,
           half_precision_opt_level="O2"),
    Target("h100", "NVIDIA H100 (Hopper, sm_90)", "cuda", "sm_90", 128,
           ("f32", "tf32", "f16", "bf16", "f8e4m3", "f8e5m2", "i8"), cuda_target="sm_80",
           memory_bytes=80 * 2**30, shared_memory_bytes=_HOPPER_SMEM, l2_bytes=50 * 2**20,
           subgroup_size=32, runtime_driver="cuda", peak_gflops=989_000.0, bandwidth_gbs=3_350.0, cores=132,
           half_precision_opt_level="O2",
           route_note="IREE 3.13 knows no sm_90: sm_80 PTX, JIT-compiled by the driver for sm_90"),
    Target("h200", "NVIDIA H200 (Hopper, sm_90, 141 GB HBM3e)", "cuda", "sm_90", 128,
           ("f32", "tf32", "f16", "bf16", "f8e4m3", "f8e5m2", "i8"), cuda_target="sm_80",
           memory_bytes=141 * 10**9, shared_memory_bytes=_HOPPER_SMEM, l2_bytes=50 * 2**20,
           subgroup_size=32, runtime_driver="cuda", peak_gflops=989_000.0, bandwidth_gbs=4_190.0, cores=132,
           half_precision_opt_level="O2",
           route_note="IREE 3.13 knows no sm_90: sm_80 PTX, JIT-compiled by the driver for sm_90 "
                      "(verified on an H200)"),
    Target("orin", "NVIDIA Jetson Orin GPU (Ampere, sm_87)", "cuda", "sm_87", 128,
           ("f32", "f16", "bf16", "i8"), cuda_target="sm_87", memory_bytes=64 * 2**30,
           shared_memory_bytes=_AMPERE_SMEM, l2_bytes=4 * 2**20, subgroup_size=32,
           runtime_driver="cuda", peak_gflops=42_000.0, bandwidth_gbs=204.0, cores=16,
           half_precision_opt_level="O2"),
    Target("orin-cpu", "NVIDIA Jetson Orin CPU (Arm Cortex-A78AE, NEON)", "llvm-cpu",
           "cortex-a78ae", 128, ("f32", "f16", "i8"), triple="aarch64-unknown-linux-gnu",
           runtime_driver="local-task", peak_gflops=100.0, bandwidth_gbs=100.0, features=("neon",),
           cores=12, l1_bytes=64 * 1024, l2_bytes=256 * 1024),
    Target("ascend910b", "Huawei Ascend 910B (Da Vinci cube + 256-element INT16 vector unit)",
           "none", "ascend910b", 4096, ("f16", "bf16", "i8"), memory_bytes=64 * 2**30,
           route_note="no public IREE backend exists for Ascend: the artifact holds the optimized "
                      "MLIR only, no executable"),
)


@functools.lru_cache(maxsize=None)
def all_targets() -> dict[str, Target]:
    table = {t.name: t for t in (_host_cpu(),) + _STATIC_TARGETS}
    return table


def get_target(name: str) -> Target:
    table = all_targets()
    if name not in table:
        raise TargetError(
            f"unknown target '{name}'; valid targets: {', '.join(table)}"
        )
    return table[name]


def format_target_table() -> str:
    rows = [("name", "backend", "arch", "vector", "executable", "description")]
    for t in all_targets().values():
        rows.append((t.name, t.backend, t.arch, f"{t.vector_bits}b", "yes" if t.executable else "no",
                     t.description + (f" — {t.route_note}" if t.route_note else "")))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    out = []
    for r in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5])
    return "\n".join(out)
