"""PyTorch in: torch.export -> torch-mlir's FX importer -> the same pipeline as ONNX.

With a dynamic batch dim (`dynamic_shapes`), the driver asks for the module again at each static
batch (batch 1 by default; see specialization.py): it is exported at that batch.

Parameters, buffers and lifted constants are placeholders of the exported graph; they
are imported as entry arguments tagged `inferx.parameter` (never as MLIR literals) and
their bytes go to the artifact's parameter archive, exactly like lifted ONNX weights.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import numpy as np

from inferx_compiler.errors import InferXError, ModelLoadError
from inferx_compiler.frontend import graph_lowering
from inferx_compiler.frontend.imported import ImportedModel
from inferx_compiler.frontend.specialization import Specialization
from inferx_compiler.log import BuildLog
from inferx_compiler.tensor_spec import TensorSpec


def require_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise InferXError("compiling a PyTorch module needs torch: pip install 'inferx-compiler[torch]'") from None


@dataclasses.dataclass
class TorchFrontend:
    """A torch.nn.Module with example inputs (and optional dynamic_shapes), for the driver."""

    module: Any
    example_inputs: tuple
    dynamic_shapes: Any = None
    source: str = "torch"

    def import_module(self, context, log: BuildLog) -> ImportedModel:
        require_torch()
        program = _export(self.module, tuple(self.example_inputs), self.dynamic_shapes)
        module_op, inputs, outputs, weights, keys = _import(program, context, log)
        info = {"name": type(self.module).__name__, "source": "torch", "sha256": _state_digest(weights),
                "opset": None, "upgraded_from_opset": None}
        uses_f64 = any(s.dtype == "float64" for s in inputs + outputs) or any(
            w.dtype == np.float64 for w in weights.values())
        return ImportedModel(module_op, inputs, outputs, weights, keys, info, uses_float64=uses_f64)

    def lower(self, model: ImportedModel, log: BuildLog) -> None:
        graph_lowering.lower_to_linalg(model.module_op, graph_lowering.FX_TORCH_TO_LINALG, log)
        graph_lowering.mark_parameter_args(model.module_op, model.parameter_keys)

    def import_static(self, model: ImportedModel, spec: Specialization, log: BuildLog) -> Any:
        size = dict(spec.dims)[next(iter(dict(spec.dims)))]
        static = _export(self.module, _at_batch(tuple(self.example_inputs), size), None)
        other, *_ = _import(static, model.module_op.context, BuildLog(quiet=True))
        graph_lowering.lower_to_linalg(other, graph_lowering.FX_TORCH_TO_LINALG, log)
        graph_lowering.mark_parameter_args(other, model.parameter_keys)
        return other


def _at_batch(example_inputs: tuple, size: int) -> tuple:
    """The example inputs with `size` rows (the first row repeated): a static-shape export."""
    return tuple(x[:1].repeat(size, *([1] * (x.dim() - 1))) for x in example_inputs)


def _export(module, example_inputs, dynamic_shapes):
    import torch

    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    module = module.eval()
    try:
        program = torch.export.export(module, example_inputs, dynamic_shapes=dynamic_shapes, strict=False)
    except Exception as e:
        raise ModelLoadError(f"torch.export failed for {type(module).__name__}: {e}") from None
    return program.run_decompositions(get_decomposition_table())


def _import(program, ctx, log: BuildLog):
    """Import the functional graph; return the module, interface specs and weights."""
    from torch.export.graph_signature import InputKind

    from torch_mlir.extras.fx_importer import FxImporter

    importer = FxImporter(context=ctx)
    importer.import_graph_module(program.graph_module, func_name="main")
    module_op = importer.module_op
    graph_lowering.rename_entry(module_op)
    placeholders = [n for n in program.graph_module.graph.nodes if n.op == "placeholder"]
    state = dict(program.state_dict)
    state.update(getattr(program, "constants", {}) or {})
    inputs, weights, keys = [], {}, {}
    for index, (spec, node) in enumerate(zip(program.graph_signature.input_specs, placeholders)):
        if spec.kind == InputKind.USER_INPUT:
            inputs.append(_spec_from_meta(node.name, node.meta["val"]))
        else:
            key = spec.target
            weights[key] = _to_numpy(state[key])
            keys[index] = key
    out_node = next(n for n in program.graph_module.graph.nodes if n.op == "output")
    outputs = [_spec_from_meta(f"output_{i}", v.meta["val"]) for i, v in enumerate(out_node.args[0])]
    log.step(f"imported {type(program).__name__} with {len(inputs)} inputs and {len(weights)} weights "
             f"through torch-mlir's FX importer")
    return module_op, inputs, outputs, weights, keys


def _spec_from_meta(name: str, val) -> TensorSpec:
    import torch

    dims = []
    for d in val.shape:
        dims.append(int(d) if isinstance(d, int) or not isinstance(d, torch.SymInt) else str(d))
    dtype = str(val.dtype).removeprefix("torch.")
    return TensorSpec(name, "bool" if dtype == "bool" else np.dtype(dtype).name if dtype != "bfloat16" else dtype,
                      tuple(dims))


def _to_numpy(t) -> np.ndarray:
    import torch

    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _state_digest(weights: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for key in sorted(weights):
        h.update(key.encode())
        h.update(np.ascontiguousarray(weights[key]).tobytes())
    return h.hexdigest()
