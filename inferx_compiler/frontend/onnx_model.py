"""The ONNX frontend: a prepared ONNX model (onnx_import.py) through torch-mlir's importer.

The driver calls it in three steps (imported.py's Frontend): the model in the torch dialect,
lowered to linalg, and imported again at each static batch size.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from inferx_compiler.frontend import graph_lowering, onnx_import
from inferx_compiler.frontend.imported import ImportedModel
from inferx_compiler.frontend.specialization import Specialization
from inferx_compiler.log import BuildLog


@dataclasses.dataclass
class OnnxFrontend:
    prepared: onnx_import.PreparedModel
    source: str = "onnx"

    def import_module(self, context, log: BuildLog) -> ImportedModel:
        prepared = self.prepared
        module_op = graph_lowering.import_onnx(prepared, context)
        log.step(f"imported {len(prepared.nodes)} ONNX nodes (opset {prepared.opset})")
        graph_lowering.convert_onnx_ops(module_op, prepared, log)
        info = {"name": prepared.name, "source": "onnx", "sha256": prepared.sha256, "opset": prepared.opset,
                "upgraded_from_opset": prepared.upgraded_from}
        if prepared.fixed_inputs:  # --input-value: the runtime accepts these inputs only at these values
            info["fixed_inputs"] = prepared.fixed_inputs
        keys = graph_lowering.trailing_parameter_keys(len(prepared.inputs), list(prepared.weights))
        return ImportedModel(module_op, prepared.inputs, prepared.outputs, prepared.weights, keys, info,
                             uses_float64=onnx_import.uses_float64(prepared), onnx=prepared)

    def lower(self, model: ImportedModel, log: BuildLog) -> None:
        graph_lowering.lower_to_linalg(model.module_op, graph_lowering.TORCH_TO_LINALG, log, self.prepared)
        graph_lowering.mark_parameter_args(model.module_op, model.parameter_keys)

    def import_static(self, model: ImportedModel, spec: Specialization, log: BuildLog) -> Any:
        proto = onnx_import.specialize(self.prepared, dict(spec.dims))
        static = dataclasses.replace(self.prepared, proto=proto)
        other = graph_lowering.import_onnx(static, model.module_op.context)
        graph_lowering.convert_onnx_ops(other, static, log)
        graph_lowering.lower_to_linalg(other, graph_lowering.TORCH_TO_LINALG, log, static)
        graph_lowering.mark_parameter_args(other, model.parameter_keys)
        return other
