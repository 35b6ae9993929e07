"""What a frontend hands the driver, and what every frontend provides.

A frontend (ONNX, PyTorch, the LLM inputs) turns a user's model into MLIR in the graph context
and says what the model's interface is; it never calls back into the driver. The driver holds
the one build loop: import, target record, precision plan, lowering, the static-shape
functions (specialization.py), then IREE.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

import numpy as np

from inferx_compiler.frontend.specialization import Specialization
from inferx_compiler.tensor_spec import TensorSpec


@dataclass
class ImportedModel:
    module_op: Any  # builtin.module in the graph (torch-mlir) context, entry function @main
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    weights: dict[str, np.ndarray]  # parameter key -> stored value
    parameter_keys: dict[int, str]  # entry argument index -> parameter key
    model_info: dict  # the manifest's "model": name, source, sha256, opset...
    uses_float64: bool = False  # the model computes in float64 (IREE must not demote it)
    onnx: Any = None  # onnx_import.PreparedModel for ONNX models (precision plans, node names)
    notes: list[str] = field(default_factory=list)  # warnings the driver repeats on failure
    generation: Optional[dict] = None  # generation models: config, entries, cache (the manifest's record)
    members: dict = field(default_factory=dict)  # extra artifact members: name -> bytes (a tokenizer)


class Frontend(Protocol):
    """The three steps the driver asks of a frontend."""

    source: str  # "onnx", "torch": the manifest's model.source and the pipeline's import stage

    def import_module(self, context, log) -> ImportedModel:
        """The model in the torch dialect (what --emit torch writes)."""

    def lower(self, model: ImportedModel, log) -> None:
        """Torch dialect -> linalg on tensors, in place, weights as tagged entry arguments."""

    def import_static(self, model: ImportedModel, spec: Specialization, log) -> Optional[Any]:
        """The entry function again with `spec`'s dims fixed, lowered to linalg, in a module of
        `model`'s context (its weight arguments tagged with the same keys)."""
