"""inferx-dequant-chain: consecutive one-row int4 layers on CUDA targets in one persistent kernel
(inferx_compiler/kernels/triton_chain.py) instead of a launch a layer.

Runs in IREE's context after inferx-quantize-contractions, which gives each one-row int4 layer
(an MLP at batch 1) a dispatch of its own to our Triton kernel (passes/dequant_matvec.py), the
layer's bias, activation and f16 cast finished in it. Such a layer reads its packed weight once
and does little else, so a chain of them costs its launches more than its reading: on an H200
the 8x4096^2 MLP's eight kernels took 55 us in the model against 16.5 us of weight bytes at the
copy rate, and eight launches that only read those bytes already take 33 us (one launch: 19.5;
docs/bench/2026-12-04-h200-int4-row/). This pass finds chains of such dispatches, each one's
f16 result read only by the next as its input, and replaces every chain of at least two by

    %zero = flow.tensor.splat %c0 : tensor<1xi32>                  (the grid barrier's counter)
    %r:5 = flow.dispatch @inferx_dequant_chain_...(x, w0, s0, e0..., w1, ..., %zero)
           -> (%zero, tensor<1xNxT>, tensor<Sxf16>, scratch, scratch)      (result 0 tied to %zero)

one launch on PROGRAMS_PER_SM programs a SM, all resident at once, that meet at a grid-wide
barrier between layers and load their next tile's weights before they wait. Where the chain's
first input is the f16 cast of an f32 value used nowhere else, the kernel reads the f32 value
and casts it (one dispatch fewer). Intermediate results live in the kernel's f16 scratch.

Declined, with a remark at the chain's first layer: a chain the kernel cannot hold (a layer
whose tile of weight rows a program exceeds triton_chain.MAX_TILE_BYTES, K not a power-of-two
number of groups), and every chain of a function but its longest: two persistent kernels that
IREE ran at once could each hold SMs the other's programs wait for. Spelled
`inferx-dequant-chain{target=h200}`.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from .base import TargetedPass
from .dequant_matvec import ENTRY as LAYER_ENTRY
from .dequant_matvec import SPEC_ATTR, declined, triton_arch
from .extern_dispatch import ExternalKernel, declare, dispatch
from .func_util import public_functions
from .remarks import remark

# Measured on the GPU (tools/bench/gpu_chain_sweep.py): programs a SM and warps a program.
PROGRAMS_PER_SM = 4
WARPS = 4
MIN_LAYERS = 2


@dataclasses.dataclass(frozen=True)
class Layer:
    """One dispatch of the one-row kernel: the op and the DequantSpec its export records."""

    op: object
    spec: object


@dataclasses.dataclass(frozen=True)
class DequantChain(TargetedPass):
    """Fuses chains of one-row int4 dispatches (inferx-quantize-contractions') into one persistent kernel."""

    name: ClassVar[str] = "inferx-dequant-chain"
    level: ClassVar[str] = "iree"
    summary: ClassVar[str] = "one-row int4 layer chains (an MLP at batch 1) in one persistent CUDA kernel"

    def run(self, module) -> None:
        target = self.target_record()
        if target.backend != "cuda" or declined(target):
            return
        specs = recorded_specs(module)
        if not specs:
            return
        for func_op in public_functions(module):
            chains = sorted(find_chains(func_op, specs), key=len, reverse=True)
            for chain in chains[1:]:
                remark(self.name, chain[0].op, f"declined: a chain of {len(chain)} layers, but this function's "
                       f"longest ({len(chains[0])} layers) takes the one persistent launch it may have")
            if chains:
                self._fuse(module, chains[0])
        erase_unreferenced(module, set(specs))

    def _fuse(self, module, chain: list) -> None:
        from inferx_compiler.kernels import triton_chain

        target = self.target_record()
        cast = f32_source(chain[0].op.operands[0])
        try:
            spec = triton_chain.ChainSpec(
                tuple(triton_chain.ChainLayer(l.spec.n, l.spec.k, l.spec.group, l.spec.epilogue) for l in chain),
                PROGRAMS_PER_SM * (target.cores or 1), "f32" if cast is not None else "f16", warps=WARPS,
                arch=triton_arch(target.arch), max_registers=triton_chain.registers_for(PROGRAMS_PER_SM, WARPS))
        except ValueError as e:
            remark(self.name, chain[0].op, f"declined: a chain of {len(chain)} layers: {e}")
            return
        kernel = _external(triton_chain.compile_kernel(spec))
        declare(module, kernel)
        remark(self.name, chain[0].op, f"{len(chain)} int4 layers in one launch (Triton, {spec.programs} programs, "
               f"a grid barrier between layers" + (", the input's f16 cast in it)" if cast is not None else ")"))
        replace_chain(chain, kernel, spec, cast)


def recorded_specs(module) -> dict:
    """Executable symbol -> DequantSpec, for the one-row int4 kernels (x resident, an epilogue)
    whose exports record their spec."""
    from iree.compiler import ir

    from inferx_compiler.kernels.triton_dequant import spec_from_json

    found = {}
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name != "hal.executable.source":
            continue
        for export in op.regions[0].blocks[0].operations:
            if SPEC_ATTR not in export.attributes:
                continue
            record = ir.DictAttr(export.attributes[SPEC_ATTR])
            if ir.StringAttr(record["kernel"]).value != LAYER_ENTRY:
                continue
            spec = spec_from_json(ir.StringAttr(record["spec"]).value)
            if spec.kind == "int4" and spec.m == 1 and spec.programs and spec.epilogue is not None:
                found[ir.StringAttr(op.attributes["sym_name"]).value] = spec
    return found


def find_chains(func_op, specs: dict) -> list:
    """Maximal runs of dispatches to the kernels in `specs` in which each one's result is read
    only by the next, as its input (operand 0); runs of at least MIN_LAYERS."""
    layers = {}
    for op in func_op.regions[0].blocks[0].operations:
        if op.operation.name == "flow.dispatch":
            spec = specs.get(_callee(op))
            if spec is not None:
                layers[op] = Layer(op, spec)
    following = {}
    for op, layer in layers.items():
        uses = list(op.results[0].uses)
        if len(uses) == 1 and uses[0].operand_number == 0 and uses[0].owner in layers:
            following[op] = layers[uses[0].owner]
    chains = []
    heads = set(layers) - {next_layer.op for next_layer in following.values()}
    for op in layers:  # block order
        if op not in heads:
            continue
        chain = [layers[op]]
        while chain[-1].op in following:
            chain.append(following[chain[-1].op])
        if len(chain) >= MIN_LAYERS:
            chains.append(chain)
    return chains


def erase_unreferenced(module, names: set) -> None:
    """Erase the executables named in `names` that no dispatch calls any longer."""
    from iree.compiler import ir

    from .linalg_analysis import collect

    called = {_callee(op) for op in collect(module, lambda o: o.name == "flow.dispatch")}
    for op in list(module.regions[0].blocks[0].operations):
        if (op.operation.name == "hal.executable.source"
                and ir.StringAttr(op.attributes["sym_name"]).value in names - called):
            op.operation.erase()


def _callee(op) -> str:
    from iree.compiler import ir

    entries = ir.ArrayAttr(op.attributes["entry_points"])
    return ir.SymbolRefAttr(entries[0]).value[0]


def f32_source(x16) -> Optional[object]:
    """The f32 value whose f16 cast `x16` is, where the cast (a one-input linalg.generic that
    only truncates) has no other use; else None."""
    from .iree_ir import defining_op

    cast = defining_op(x16, ("linalg.generic",))
    if cast is None or len(list(x16.uses)) != 1 or len(cast.operands) != 2:
        return None
    body = [o.operation.name for o in cast.regions[0].blocks[0].operations]
    source = cast.operands[0]
    if body != ["arith.truncf", "linalg.yield"] or str(source.type.element_type) != "f32":
        return None
    if list(source.type.shape) != list(x16.type.shape):
        return None
    return source


def replace_chain(chain: list, kernel: ExternalKernel, spec, f32_input) -> None:
    """One dispatch to `kernel` before the chain's last layer: its inputs (the f32 source of the
    first input's cast where `f32_input` is given), every layer's weight, scales and epilogue
    inputs, then the zeroed counter it writes in place; the last layer's result replaces the
    chain's, and the layers' dispatches (and the absorbed cast) are erased."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, flow

    from .extern_dispatch import scratch_types

    last = chain[-1].op
    first_input = chain[0].op.operands[0]
    cast = first_input.owner if f32_input is not None else None
    arguments = [f32_input if f32_input is not None else first_input]
    for layer in chain:
        arguments += list(layer.op.operands)[1:]
    with ir.InsertionPoint(last), last.location:
        i32 = ir.IntegerType.get_signless(32)
        zero = arith.constant(i32, 0)
        counter_t = ir.RankedTensorType.get([1], i32)
        counter = flow.TensorSplatOp(counter_t, zero, []).result
        act_t = ir.RankedTensorType.get([spec.scratch_elements], ir.F16Type.get())
        types = [counter_t, last.results[0].type, act_t] + scratch_types(kernel, 3)
        results = dispatch(kernel, arguments + [counter], types, tied=((0, len(arguments)),))
    last.results[0].replace_all_uses_with(results[1])
    for layer in reversed(chain):
        layer.op.erase()
    if cast is not None:
        cast.erase()


def _external(compiled) -> ExternalKernel:
    from .dispatch_config import CONFIG_ATTR
    from .dispatch_report import REPORT_ATTR

    spec = compiled.spec.chain
    layers = spec.layers
    name = f"inferx_dequant_chain_{len(layers)}x{layers[0].n}x{layers[0].k}_{spec.key()[:8]}"
    report = {"root": f"inferx_dequant_chain (Triton, sm_{spec.arch})", "kind": "contraction",
              "element_type": "int4", "loops": [1, sum(l.n for l in layers), layers[0].k],
              "flops": sum(2 * l.n * l.k for l in layers), "linalg_ops": 0,
              "fused": ["dequantization", f"{len(layers)} layers"] + (["f16 cast"] if spec.x_type == "f32" else [])}
    config = {"source": "rule (inferx-dequant-chain)",
              "signature": f"weight-only int4 chain of {len(layers)}: "
                           + ", ".join(f"1x{l.n}x{l.k}" for l in layers),
              "config": f"{spec.programs} programs, {spec.warps} warps, rows a program "
                        + "/".join(str(spec.block_n(i)) for i in range(len(layers)))
                        + f", at most {spec.max_registers} registers, grid barrier", "candidates": 0}
    read = spec.input_bindings
    return ExternalKernel(name, compiled.name, compiled.ptx, spec.grid, compiled.threads, compiled.shared_bytes,
                          read_only=read, written=compiled.parameters - read,
                          annotations=((REPORT_ATTR, report), (CONFIG_ATTR, config)),
                          scratch_bytes=compiled.scratch_bytes)
