"""The decoder's entry points as MLIR: torch.export, torch-mlir's FX importer, the cache tied.

  1. `export_entry`: torch.export of `Prefill`/`Decode` wrapped in `WeightsAsInputs`, so every
     weight is a function argument (tagged `inferx.parameter` after import: the IREE input
     stage binds them to the artifact's parameter archive, as for every model). The model is
     built on the meta device: exporting touches no weight memory.
  2. `import_entries`: torch-mlir's FX importer, `FxImporter.import_program(prog, func_name=...)`,
     the mutation-aware import; the cache, which the entry mutates, arrives as a `!torch.tensor`
     argument with `torch.copy.to_vtensor` / `torch.overwrite.tensor.contents`.
  3. `tie_mutated_arguments`: torch-mlir's linalg pipeline cannot legalize those two ops, so each
     mutated argument becomes a value argument plus an extra result with its new contents, and
     the argument gets `{iree.abi.output = N : index}`: IREE's ABI then makes the caller's buffer
     the storage of result N. The cache is written in place: one scatter dispatch a step, no copy
     of the cache (the dispatch report shows it).
Checked against torch 2.13.0 and torch-mlir 20261001.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from inferx_compiler.dialects.inferx import PARAMETER_ATTR
from inferx_compiler.errors import ModelLoadError
from inferx_compiler.frontend.llm.config import DecoderConfig
from inferx_compiler.frontend.llm.decoder import CacheGeometry, Decode, LlamaDecoder, Prefill, cache_shape, param_name
from inferx_compiler.frontend.llm.weights import expected_names, expected_shapes

CACHE_OUTPUT_ATTR = "iree.abi.output"


@dataclass(frozen=True)
class EntrySpec:
    """One static-shape entry point: 'prefill' (batch x chunk length) or 'decode' (batch)."""

    kind: str
    batch: int
    length: int = 1
    # what it returns: "sample" (ids sampled on the device: temperature, top-k, top-p, seed),
    # "greedy" (the argmax ids, no sampling inputs), "logits" (references, tests)
    output: str = "sample"

    @property
    def name(self) -> str:
        base = f"decode_b{self.batch}" if self.kind == "decode" else f"prefill_b{self.batch}_t{self.length}"
        suffix = {"sample": "_sample" if self.kind == "decode" else "", "greedy": "", "logits": "_logits"}
        return base + suffix[self.output]

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "batch": self.batch, "length": self.length,
                "output": self.output}


class WeightsAsInputs(nn.Module):
    """forward(*user_inputs, *weights): runs `entry` with the weights bound by functional_call.

    The wrapped entry is held outside the module tree (not a submodule), so torch.export sees no
    parameters at all and every weight becomes a user input, in `names` order."""

    def __init__(self, entry: nn.Module, names: list[str], n_user: int):
        super().__init__()
        self.__dict__["_entry"] = entry  # not registered: its (meta) parameters must not be lifted
        self.names = [f"model.{param_name(n)}" for n in names]
        self.n_user = n_user

    def forward(self, *args):
        user, weights = args[: self.n_user], args[self.n_user:]
        return torch.func.functional_call(self._entry, dict(zip(self.names, weights)), user, strict=False)


def user_inputs(cfg: DecoderConfig, spec: EntrySpec, geometry: CacheGeometry, dtype=torch.float32) -> tuple:
    """Example user inputs of an entry (their shapes and dtypes are the entry's)."""
    B, T = spec.batch, spec.length
    i64 = dict(dtype=torch.int64)
    # never read (export traces with fake tensors): empty, so a server-sized cache costs no memory
    cache = torch.empty(cache_shape(cfg, geometry.blocks, geometry.block_size, geometry.int8),
                        dtype=torch.int8 if geometry.int8 else dtype)
    table = torch.zeros(B, geometry.table_width, **i64)
    if spec.kind == "decode":
        user = (torch.zeros(B, 1, **i64), torch.zeros(B, **i64), table, cache)
    else:
        user = (torch.zeros(B, T, **i64), torch.zeros(B, **i64), torch.full((B,), T, **i64), table, cache)
    if spec.output == "sample":  # the sampler's inputs: temperature, top_k, top_p, seed
        user += (torch.zeros(B), torch.zeros(B, **i64), torch.ones(B), torch.zeros(B, **i64))
    return user


def export_entry(cfg: DecoderConfig, spec: EntrySpec, geometry: CacheGeometry, rope_freqs=None,
                 dtype=torch.float32, kernel_attention=None):
    """torch.export one entry point with weights, activations and cache in `dtype`; returns the
    decomposed ExportedProgram. `kernel_attention` (paged_attention.KernelAttention): decode
    steps attend through our kernel's op."""
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    with torch.device("meta"):
        model = LlamaDecoder(cfg, rope_freqs, device="meta", dtype=dtype, kernel_attention=kernel_attention).eval()
    entry = (Decode if spec.kind == "decode" else Prefill)(model, output=spec.output)
    user = user_inputs(cfg, spec, geometry, dtype)
    shapes = expected_shapes(cfg)
    weights = tuple(torch.empty(shapes[n], dtype=dtype) for n in expected_names(cfg))  # never read: faked
    try:
        program = torch.export.export(WeightsAsInputs(entry, expected_names(cfg), len(user)), user + weights,
                                      strict=False)
    except Exception as e:
        raise ModelLoadError(f"torch.export failed for the {cfg.family} decoder's {spec.name}: {e}") from None
    return program.run_decompositions(get_decomposition_table())


def import_entries(programs: dict, context) -> object:
    """Import ExportedPrograms into one torch-mlir module (one function each, by name), with each
    mutated argument tied to a result and each weight argument tagged with its parameter key.
    Returns the module's Operation."""
    from torch_mlir.extras.fx_importer import FxImporter

    importer = FxImporter(context=context)
    for name, (program, weight_names) in programs.items():
        func_op = importer.import_program(program, func_name=name)
        tie_mutated_arguments(func_op)
        tag_parameters(func_op, weight_names)
    return importer.module_op


def tie_mutated_arguments(func_op) -> list[tuple[int, int]]:
    """Each mutated `!torch.tensor` argument -> a value argument + an extra result, the argument
    marked `iree.abi.output = <result index>`. Returns [(argument, result)]."""
    from torch_mlir import ir
    from torch_mlir.dialects import func as func_d

    op = func_op.operation
    block = op.regions[0].blocks[0]
    ret = next(o for o in block.operations if o.operation.name == "func.return")
    n_results = len(ret.operands)
    tied, new_values = [], []
    with op.context, op.location:
        for i, arg in enumerate(block.arguments):
            if not str(arg.type).startswith("!torch.tensor"):
                continue
            users = [u.owner for u in arg.uses]
            copies = [u for u in users if u.name == "torch.copy.to_vtensor"]
            writes = [u for u in users if u.name == "torch.overwrite.tensor.contents"]
            if len(copies) + len(writes) != len(users) or len(writes) != 1 or not copies:
                raise ModelLoadError(f"argument {i} of @{_name(op)}: a mutated input must be read, then written "
                                     f"once; got {[u.name for u in users]}")
            _check_reads_before_write(block, arg, i, op)
            arg.set_type(copies[0].result.type)
            for c in copies:
                c.result.replace_all_uses_with(arg)
                c.erase()
            new_values.append(writes[0].operands[0])
            writes[0].erase()
            tied.append((i, n_results + len(tied)))
        with ir.InsertionPoint(ret):
            func_d.ReturnOp(list(ret.operands) + new_values)
        ret.erase()
        ins = [a.type for a in block.arguments]
        new_ret = next(o for o in block.operations if o.operation.name == "func.return")
        outs = [v.type for v in new_ret.operands]
        op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(ins, outs))
        attrs = {a: ir.DictAttr.get({CACHE_OUTPUT_ATTR: ir.IntegerAttr.get(ir.IndexType.get(), r)})
                 for a, r in tied}
        op.attributes["arg_attrs"] = ir.ArrayAttr.get([attrs.get(i, ir.DictAttr.get({})) for i in range(len(ins))])
    return tied


def tag_parameters(func_op, weight_names: list[str]) -> None:
    """The trailing arguments (the weights, in `weight_names` order) get `inferx.parameter`."""
    from torch_mlir import ir

    op = func_op.operation
    attrs = list(ir.ArrayAttr(op.attributes["arg_attrs"]))
    first = len(attrs) - len(weight_names)
    with op.context:
        for i, key in enumerate(weight_names):
            attrs[first + i] = ir.DictAttr.get({PARAMETER_ATTR: ir.StringAttr.get(key)})
        op.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def _name(op) -> str:
    from torch_mlir import ir

    return ir.StringAttr(op.attributes["sym_name"]).value


def _check_reads_before_write(block, arg, index: int, op) -> None:
    """Every read of `arg` must precede its overwrite: a read after it would see the new contents,
    which the plain value argument substituted for it does not hold."""
    written = False
    for o in block.operations:
        o = o.operation
        if o.name == "torch.overwrite.tensor.contents" and o.operands[1] == arg:
            written = True
        elif o.name == "torch.copy.to_vtensor" and o.operands[0] == arg and written:
            raise ModelLoadError(f"argument {index} of @{_name(op)} is read again after it is overwritten")
