"""A Hopper (sm_90a) matmul kernel written in Triton and compiled ahead of time, without a GPU.

IREE 3.13's CUDA code is Ampere-class (mma.sync); on an H200 its f16 matmuls run at 60-125
TFLOP/s. The same shapes through this kernel, compiled by Triton for sm_90a (wgmma, software
pipelined cp.async), ran several times faster in isolation (docs/levers/hopper-matmul.md). The
kernel computes, for one output tile and one slice of the reduction,

    out[s, m, n] = init[m, n] (when HAS_INIT) + sum_{k in slice s} a[m, k] * b[k, n]

with f16/bf16 inputs (a stored [M, K] or, A_T, [K, M]; b [K, N] or, B_T, [N, K]), f32
accumulation and f32 output. Slices (split-K, S > 1) are summed by the caller. With one slice
the kernel can instead finish the elementwise work that follows the product (an `Epilogue`:
bias, activation, residual, cast, and the reshapes and transposes of the result, as loads,
expressions and a store at computed offsets), so that no second kernel reads the product back.
The kernel's source is generated per spec (`kernel_source`).

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
POINTER_TYPES = {"f32": "fp32", **INPUT_TYPES}  # epilogue operands and the fused output


@dataclasses.dataclass(frozen=True)
class Offsets:
    """Where output point (m, n) of the matmul lies in another tensor, as an element offset:
    the sum of ((m // div) % size) * mult over `rows` plus the same of n over `cols`. Any
    reshape or transpose of the [M, N] product, and any broadcast of a smaller tensor over it,
    has this form."""

    rows: tuple = ()  # ((div, size, mult), ...)
    cols: tuple = ()


@dataclasses.dataclass(frozen=True)
class EpilogueInput:
    element_type: str  # f32, f16 or bf16
    offsets: Offsets


@dataclasses.dataclass(frozen=True)
class Epilogue:
    """Elementwise work fused after the product: `body` computes, per output point, from "acc"
    (the f32 product) and "x<i>" (inputs[i] there) named values, one (name, op, args) step at a
    time (ops: EPILOGUE_OPS; "const" args are a float literal and its type); `result` is stored as
    `element_type` at `offsets` of the output."""

    inputs: tuple  # EpilogueInput, ...
    body: tuple  # (name, op, (arg, ...)), ...
    result: str
    element_type: str
    offsets: Offsets


class TileGrid:
    """The launch grid of a kernel spec with m, n, block_m, block_n and split: the output's
    tiles along the first axis, split-K slices along the second."""

    @property
    def grid(self) -> tuple[int, int, int]:
        tiles = -(-self.m // self.block_m) * -(-self.n // self.block_n)
        return (tiles, self.split, 1)


@dataclasses.dataclass(frozen=True)
class KernelSpec(TileGrid):
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
    epilogue: Optional[Epilogue] = None  # None: the f32 slices are stored as [S, M, N]
    tma: bool = False  # operand tiles through TMA descriptors made on the device (see _TMA_LOOP)

    def __post_init__(self):
        if self.element_type not in INPUT_TYPES:
            raise ValueError(f"element type {self.element_type}: the kernel takes {', '.join(INPUT_TYPES)}")
        if self.split < 1 or self.k % self.split or (self.k // self.split) % self.block_k:
            raise ValueError(f"split {self.split} does not cut K={self.k} into multiples of {self.block_k}")
        if self.epilogue is not None and self.split != 1:
            raise ValueError("an epilogue needs the whole reduction in one slice (split 1)")

    @property
    def input_bindings(self) -> int:
        return 2 + self.has_init + (len(self.epilogue.inputs) if self.epilogue else 0)

    @property
    def outputs(self) -> int:
        return 1

    @property
    def tiles(self) -> int:
        return self.grid[0]

    def key(self) -> str:
        return _key(self)


def _key(spec) -> str:
    """Names the compiled kernel (and its PTX cache entry): the spec, Triton's version and the
    generated source, so that a change to the templates is never served stale PTX."""
    text = spec_to_json(spec) + TRITON_VERSION + kernel_source(spec)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_SHARED_BY_SIBLINGS = ("m", "n", "k", "element_type", "a_transposed", "b_transposed", "has_init", "block_m", "block_n",
                       "block_k", "warps", "stages", "arch", "tma")


@dataclasses.dataclass(frozen=True)
class GroupSpec:
    """Sibling matmuls that read the same A (the query, key and value projections of one input):
    one kernel whose grid is the members' tiles one after the other; each member keeps its own
    B, init and epilogue and writes its own output. One launch instead of several, and together
    their tiles fill the SMs where each alone would not. The members share the problem's shape,
    element type, operand layouts and tile configuration (so one main loop, one set of shared-
    memory buffers, serves them all), and have one slice each."""

    members: tuple  # KernelSpec, ...

    def __post_init__(self):
        if len(self.members) < 2:
            raise ValueError("a group needs at least two matmuls")
        first = self.members[0]
        for member in self.members[1:]:
            differ = [f for f in _SHARED_BY_SIBLINGS if getattr(member, f) != getattr(first, f)]
            if differ:
                raise ValueError(f"grouped matmuls differ in {', '.join(differ)}")
        if any(member.split != 1 for member in self.members):
            raise ValueError("grouped matmuls take the whole reduction in one slice (split 1)")

    def __getattr__(self, name):  # the shared fields (m, k, element_type, block_m, ...)
        if name in _SHARED_BY_SIBLINGS:
            return getattr(self.members[0], name)
        raise AttributeError(name)

    @property
    def total_n(self) -> int:
        return sum(member.n for member in self.members)

    @property
    def split(self) -> int:
        return 1

    @property
    def grid(self) -> tuple[int, int, int]:
        return (sum(member.tiles for member in self.members), 1, 1)

    @property
    def input_bindings(self) -> int:  # a once, then each member's own
        return 1 + sum(member.input_bindings - 1 for member in self.members)

    @property
    def outputs(self) -> int:
        return len(self.members)

    def key(self) -> str:
        return _key(self)


@dataclasses.dataclass(frozen=True)
class CompiledKernel:
    spec: KernelSpec
    name: str  # the PTX entry point
    ptx: bytes
    threads: int
    shared_bytes: int
    parameters: int  # pointer parameters of the entry point (bindings IREE must pass)
    scratch_bytes: tuple = (16, 16)  # the global and profile scratch buffers the launch must bind


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


_GRID_POSITION = '''\
    pid = tl.program_id(0)
    s = tl.program_id(1)
'''

_TILE = '''\
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
'''

# Operand tiles through pointers (cp.async, software pipelined by Triton).
_POINTER_LOOP = '''\
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
'''

# Operand tiles loaded by the TMA unit: descriptors made on the device (tl.make_tensor_descriptor),
# which Triton writes into the global scratch buffer, one per program (CompiledKernel.scratch_bytes
# sizes it for the grid); out-of-range rows and columns read as zeros. Needs every operand's row
# pitch to be a multiple of 16 bytes.
_TMA_LOOP = '''\
    if A_T:
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[K, M], strides=[M, 1], block_shape=[BK, BM])
    else:
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    if B_T:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kk in range(s * K_SLICE, (s + 1) * K_SLICE, BK):
        if A_T:
            av = a_desc.load([kk, pm * BM]).T
        else:
            av = a_desc.load([pm * BM, kk])
        if B_T:
            bv = b_desc.load([pn * BN, kk]).T
        else:
            bv = b_desc.load([kk, pn * BN])
        acc = tl.dot(av, bv, acc)
'''

_INIT = '''\
    inside = (rm[:, None] < M) & (rn[None, :] < N)
    if HAS_INIT:
        acc += tl.load(init_ptr + rm[:, None] * N + rn[None, :], mask=inside, other=0.0)
'''

_PLAIN_STORE = "    tl.store(out_ptr + s * M * N + rm[:, None] * N + rn[None, :], acc, mask=inside)\n"

_TL_TYPES = {"f32": "tl.float32", "f16": "tl.float16", "bf16": "tl.bfloat16"}
_BINARY = {"add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}",
           "max": "tl.maximum({0}, {1})", "min": "tl.minimum({0}, {1})", "select": "tl.where({0}, {1}, {2})",
           "cmp:ogt": "{0} > {1}", "cmp:oge": "{0} >= {1}", "cmp:olt": "{0} < {1}", "cmp:ole": "{0} <= {1}",
           "cmp:oeq": "{0} == {1}", "cmp:une": "{0} != {1}",
           # unordered: true where either side is NaN, which the opposite ordered test is not
           "cmp:ugt": "~({0} <= {1})", "cmp:uge": "~({0} < {1})", "cmp:ult": "~({0} >= {1})",
           "cmp:ule": "~({0} > {1})"}
_UNARY = {"neg": "-{0}", "erf": "tl.math.erf({0})", "exp": "tl.exp({0})", "sqrt": "tl.sqrt({0})",
          "rsqrt": "tl.rsqrt({0})", "log": "tl.log({0})", "abs": "tl.abs({0})",
          # tanh without libdevice (the interpreter has none): 1 - 2 / (e^2x + 1), exact at +-inf
          "tanh": "1.0 - 2.0 / (tl.exp(2.0 * {0}) + 1.0)"}
_CASTS = {f"cast:{t}": f"{{0}}.to({tl})" for t, tl in _TL_TYPES.items()}
EPILOGUE_OPS = frozenset(_BINARY) | frozenset(_UNARY) | frozenset(_CASTS) | {"const"}


def _offset(terms, var: str, extent: int) -> str:
    """Python/Triton text for sum(((var // div) % size) * mult) over `terms`."""
    parts = []
    for div, size, mult in terms:
        x = var if div == 1 else f"({var} // {div})"
        if div * size < extent:
            x = f"({x} % {size})"
        parts.append(x if mult == 1 else f"{x} * {mult}")
    return " + ".join(parts) if parts else ""


def _address(ptr: str, offsets: Offsets, spec) -> tuple[str, str]:
    """(pointer expression, mask) for a tile of the tensor at `offsets`, broadcast to [BM, BN]."""
    rows, cols = _offset(offsets.rows, "rm", spec.m), _offset(offsets.cols, "rn", spec.n)
    if rows and cols:
        return f"{ptr} + ({rows})[:, None] + ({cols})[None, :]", "inside"
    if rows:
        return f"{ptr} + ({rows})[:, None]", "rm[:, None] < M"
    if cols:
        return f"{ptr} + ({cols})[None, :]", "rn[None, :] < N"
    return ptr, ""


def epilogue_loads(spec, prefix: str = "") -> str:
    """The lines loading `spec.epilogue`'s inputs x<i> (through `prefix`x<i>_ptr, over the tile's
    rows `rm` and columns `rn`, masked by `inside`)."""
    lines = []
    for i, operand in enumerate(spec.epilogue.inputs):
        pointer, mask = _address(f"{prefix}x{i}_ptr", operand.offsets, spec)
        lines.append(f"x{i} = tl.load({pointer}, mask={mask}, other=0.0)" if mask else f"x{i} = tl.load({pointer})")
    return "".join(f"    {line}\n" for line in lines)


def epilogue_code(spec, prefix: str = "", inputs_loaded: bool = False) -> str:
    """The kernel's lines after its main loop for `spec.epilogue`: it reads `acc` (the f32 tile
    over rows `rm`, columns `rn`, masked by `inside`) and the pointers `prefix`x<i>_ptr (unless
    `inputs_loaded`: epilogue_loads ran earlier), and stores the result through `prefix`out_ptr."""
    ep = spec.epilogue
    lines = []
    for name, op, args in ep.body:
        if op == "const":  # (literal, element type)
            literal = args[0] if args[1] == "f32" else f"tl.full([], {args[0]}, {_TL_TYPES[args[1]]})"
            lines.append(f"{name} = {literal}")
        else:
            template = _BINARY.get(op) or _UNARY.get(op) or _CASTS[op]
            lines.append(f"{name} = " + template.format(*args))
    pointer, mask = _address(f"{prefix}out_ptr", ep.offsets, spec)
    if not ep.offsets.rows:  # one row (M = 1): the tile's padding rows are masked, the pointer spans them
        pointer += " + rm[:, None] * 0"
    lines.append(f"tl.store({pointer}, ({ep.result}).to({_TL_TYPES[ep.element_type]}), mask=inside)")
    body = "".join(f"    {line}\n" for line in lines)
    return body if inputs_loaded else epilogue_loads(spec, prefix) + body


_CONSTANTS = ("M", "N", "K", "K_SLICE", "A_T", "B_T", "HAS_INIT", "BM", "BN", "BK", "GROUP")


def _parameters(spec: KernelSpec, prefix: str = "") -> list[str]:
    """The kernel's pointer parameters for one matmul: a, b, init, the epilogue's inputs, out."""
    inputs = [f"{prefix}x{i}_ptr" for i in range(len(spec.epilogue.inputs))] if spec.epilogue else []
    return [f"{prefix}a_ptr", f"{prefix}b_ptr", f"{prefix}init_ptr", *inputs, f"{prefix}out_ptr"]


def kernel_source(spec) -> str:
    """The @triton.jit function's source for `spec`: the matmul main loop, then either the plain
    f32 store of the slice or the fused epilogue (its loads, expressions and store). For a
    GroupSpec, the loop reads the B of the member that owns the program's tile, and each
    member's epilogue is one branch after it; the shared sizes are constexpr globals."""
    if isinstance(spec, GroupSpec):
        return _group_source(spec)
    head = (f"def inferx_matmul({', '.join(_parameters(spec))}, "
            + ", ".join(f"{c}: tl.constexpr" for c in _CONSTANTS) + "):\n")
    return head + _GRID_POSITION + _loop(spec) + _body_end(spec)


def _loop(spec: KernelSpec) -> str:
    """The tile's position, the main loop (through TMA descriptors or pointers), the init."""
    return _TILE + (_TMA_LOOP if spec.tma else _POINTER_LOOP) + _INIT


def _body_end(spec: KernelSpec, prefix: str = "") -> str:
    """The code after the main loop: the epilogue, or the plain store of the f32 slice (its
    pointers named `prefix`x<i>_ptr, `prefix`out_ptr)."""
    if spec.epilogue:
        return epilogue_code(spec, prefix)
    return _PLAIN_STORE.replace("out_ptr", f"{prefix}out_ptr")


def _group_source(group: GroupSpec) -> str:
    """One main loop for every member (they differ in B only: one set of shared-memory buffers),
    then the member's own epilogue and store. The tiles of member i are programs
    [i * T, (i + 1) * T) of the grid."""
    first = group.members[0]
    globals_ = "".join(f"{name} = tl.constexpr({value!r})\n" for name, value in constants(first).items())
    lines = [f"def inferx_matmul({', '.join(_group_pointers(group))}):",
             f"    member = tl.program_id(0) // {first.tiles}",
             f"    pid = tl.program_id(0) % {first.tiles}",
             "    s = 0"]
    lines += _by_member(group, lambda i, member: [f"b_ptr = m{i}_b_ptr"]
                        + ([f"init_ptr = m{i}_init_ptr"] if member.has_init else []))
    lines.append(_loop(first).rstrip("\n"))
    lines += _by_member(group, lambda i, member: _body_end(member, f"m{i}_").rstrip("\n").split("\n"))
    return globals_ + "\n\n" + "\n".join(lines) + "\n"


def _by_member(group: GroupSpec, body) -> list[str]:
    """if member == 0: body(0) / elif ...: / else: body(last), indented into the kernel."""
    lines = []
    for i, member in enumerate(group.members):
        last = i == len(group.members) - 1
        lines.append("    else:" if last else f"    {'if' if i == 0 else 'elif'} member == {i}:")
        lines += [f"        {line.strip()}" if not line.startswith("    ") else f"    {line}" for line in body(i, member)]
    return lines


def _group_pointers(group: GroupSpec) -> list[str]:
    """The grouped kernel's pointer parameters, in IREE's binding order: a, each member's inputs
    (b, init where read, epilogue inputs), then each member's output."""
    inputs, outputs = ["a_ptr"], []
    for i, member in enumerate(group.members):
        own = _parameters(member, f"m{i}_")
        inputs += [p for p in own[1:-1] if p != f"m{i}_init_ptr" or member.has_init]
        outputs.append(own[-1])
    return inputs + outputs


@functools.lru_cache(maxsize=64)
def kernel_function(spec: KernelSpec):
    """The @triton.jit function for `spec` (its source generated; see kernel_source)."""
    return jit_from_source(kernel_source(spec), "inferx_matmul", f"inferx-matmul-{spec.key()}")


def jit_from_source(source: str, entry: str, tag: str, globals_: Optional[dict] = None):
    """The @triton.jit function `entry` defined by `source`. The source is registered with
    linecache under a name of its own (<tag>), which is how Triton reads it."""
    import linecache

    import triton
    import triton.language as tl

    filename = f"<{tag}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace = {"tl": tl, "triton": triton, "__name__": "inferx_compiler.kernels.generated", **(globals_ or {})}
    exec(compile(source, filename, "exec"), namespace)
    return triton.jit(namespace[entry])


def constants(spec) -> dict:
    """The kernel's constexpr arguments for `spec` (a group's kernel takes none: they are literals
    in its source)."""
    if isinstance(spec, GroupSpec):
        return {}
    return dict(M=spec.m, N=spec.n, K=spec.k, K_SLICE=spec.k // spec.split, A_T=spec.a_transposed,
                B_T=spec.b_transposed, HAS_INIT=spec.has_init, BM=spec.block_m, BN=spec.block_n,
                BK=spec.block_k, GROUP=8)


def spec_to_json(spec: KernelSpec) -> str:
    return json.dumps(dataclasses.asdict(spec), sort_keys=True)


def spec_from_json(text: str):
    fields = json.loads(text)
    if "members" in fields:
        return GroupSpec(tuple(_kernel_spec(member) for member in fields["members"]))
    return _kernel_spec(fields)


def _kernel_spec(fields: dict) -> KernelSpec:
    epilogue = fields.pop("epilogue")
    if epilogue is not None:
        def offsets(o):
            return Offsets(tuple(map(tuple, o["rows"])), tuple(map(tuple, o["cols"])))

        epilogue = Epilogue(tuple(EpilogueInput(i["element_type"], offsets(i["offsets"])) for i in epilogue["inputs"]),
                            tuple((name, op, tuple(args)) for name, op, args in epilogue["body"]),
                            epilogue["result"], epilogue["element_type"], offsets(epilogue["offsets"]))
    return KernelSpec(**fields, epilogue=epilogue)


def compile_kernel(spec: KernelSpec, cache_dir: Optional[str] = None) -> CompiledKernel:
    """PTX for `spec`, cached on disk by spec and Triton version ($XDG_CACHE_HOME or ~/.cache,
    inferx/triton/), or in `cache_dir`."""
    return compile_cached(spec, lambda: kernel_function(spec), *_signature(spec), cache_dir)


def compile_cached(spec, function, signature: dict, constexprs: dict, cache_dir: Optional[str] = None) -> CompiledKernel:
    """PTX for any kernel spec (it has key(), grid, warps, stages and arch): `function()` gives
    its @triton.jit function, compiled with `signature` and `constexprs`; cached on disk by
    spec.key() ($XDG_CACHE_HOME or ~/.cache, inferx/triton/, or `cache_dir`)."""
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
                              rec["parameters"], tuple(rec.get("scratch", (16, 16))))
    except (OSError, ValueError, KeyError):
        pass  # not cached (or unreadable): compile
    kernel = _compile(spec, function(), signature, constexprs)
    try:  # a cache that cannot be written only costs the next build a compile
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"name": kernel.name, "ptx": kernel.ptx.decode(), "threads": kernel.threads,
                       "shared": kernel.shared_bytes, "parameters": kernel.parameters,
                       "scratch": list(kernel.scratch_bytes)}, f)
        os.replace(tmp, path)
    except OSError:
        pass
    return kernel


def _pointer_types(spec: KernelSpec, prefix: str = "") -> dict:
    """Triton's type for each of _parameters(spec, prefix)."""
    dtype = INPUT_TYPES[spec.element_type]
    inputs = spec.epilogue.inputs if spec.epilogue else ()
    out = POINTER_TYPES[spec.epilogue.element_type] if spec.epilogue else "fp32"
    types = [f"*{dtype}", f"*{dtype}", "*fp32", *(f"*{POINTER_TYPES[x.element_type]}" for x in inputs), f"*{out}"]
    return dict(zip(_parameters(spec, prefix), types))


def _signature(spec) -> tuple[dict, dict]:
    """(Triton signature, constexprs) of the matmul kernel for `spec`."""
    if isinstance(spec, GroupSpec):
        types = {"a_ptr": f"*{INPUT_TYPES[spec.element_type]}"}
        for i, member in enumerate(spec.members):
            types.update(_pointer_types(member, f"m{i}_"))
        return {name: types[name] for name in _group_pointers(spec)}, {}
    signature = _pointer_types(spec)
    constants_ = constants(spec)
    signature.update({name: "constexpr" for name in constants_})
    if not spec.has_init:  # the init pointer is not read: a constexpr None drops the parameter
        signature["init_ptr"] = "constexpr"
        constants_["init_ptr"] = None
    return signature, constants_


def compile_options(spec) -> dict:
    """Triton's compile (or JIT launch) options for `spec`: warps, stages and, where the spec
    sets one, a register budget (maxnreg)."""
    options = {"num_warps": spec.warps, "num_stages": spec.stages}
    if getattr(spec, "max_registers", 0):
        options["maxnreg"] = spec.max_registers
    return options


def _compile(spec, function, signature: dict, constants_: dict) -> CompiledKernel:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from inferx_compiler.internals import triton_without_line_info

    # IREE's bindings are at least 16-byte aligned (HAL buffer offsets), which lets Triton vectorize
    pointers = [i for i, name in enumerate(signature) if signature[name].startswith("*")]
    attrs = {(i,): [["tt.divisibility", 16]] for i in pointers}
    source = ASTSource(fn=function, signature=signature, constexprs=constants_, attrs=attrs)
    # no line info: the PTX would name this file's path, and the artifact must not depend on it
    with triton_without_line_info():
        compiled = triton.compile(source, target=GPUTarget("cuda", spec.arch, 32),
                                  options=compile_options(spec))
    ptx = compiled.asm["ptx"]
    programs = spec.grid[0] * spec.grid[1] * spec.grid[2] * compiled.metadata.num_ctas
    scratch = tuple(max(16, programs * size) for size in (compiled.metadata.global_scratch_size,
                                                          compiled.metadata.profile_scratch_size))
    return CompiledKernel(spec, compiled.metadata.name, ptx.encode(), 32 * compiled.metadata.num_warps,
                          compiled.metadata.shared, len(pointers) + SCRATCH_POINTERS, scratch)
