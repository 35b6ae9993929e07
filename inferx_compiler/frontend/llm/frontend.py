"""The LLM frontend: a Hugging Face folder or GGUF file -> our decoder's entry points in MLIR.

For the driver (imported.py's Frontend): `import_module` exports each entry point (prefill at
each chunk length, decode at each batch size) with torch.export and imports them all into one
module through torch-mlir's FX importer, the KV cache tied in place (export.py); `lower` takes it
to linalg and tags the weight arguments as parameters. The entries are static-shape already:
there are no static-shape functions to add.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from inferx_compiler.errors import ModelLoadError
from inferx_compiler.frontend import graph_lowering
from inferx_compiler.frontend.imported import ImportedModel
from inferx_compiler.frontend.llm.export import EntrySpec, export_entry, import_entries, tag_parameters
from inferx_compiler.frontend.llm.source import LlmSource
from inferx_compiler.frontend.llm.weights import expected_names
from inferx_compiler.log import BuildLog

GENERATION_FORMAT = 1  # the manifest's "generation" record


@dataclasses.dataclass(frozen=True)
class GenerationShapes:
    """The compiled entry points: prefill chunks of `prefill_lengths` tokens and decode steps, at
    each of `batch_sizes`, over a cache of `max_seq` rows per sequence (max_seq - 1 usable)."""

    prefill_lengths: tuple[int, ...] = (32, 128)
    batch_sizes: tuple[int, ...] = (1,)
    max_seq: int = 512
    logits: bool = False  # also entries that return logits (references, tests)

    def __post_init__(self):
        if not self.prefill_lengths or not self.batch_sizes or min(self.prefill_lengths + self.batch_sizes) < 1:
            raise ModelLoadError("--prefill-lengths and --batch-sizes need at least one positive size each")
        if self.max_seq < max(self.prefill_lengths) + 1:
            raise ModelLoadError(f"--max-seq {self.max_seq} must exceed the longest prefill chunk "
                                 f"({max(self.prefill_lengths)}): one cache row is the scratch row")

    def entries(self) -> list[EntrySpec]:
        out = []
        for b in sorted(set(self.batch_sizes)):
            out += [EntrySpec("prefill", b, t) for t in sorted(set(self.prefill_lengths))]
            out += [EntrySpec("decode", b, output="greedy"), EntrySpec("decode", b, output="sample")]
            if self.logits:
                out += [EntrySpec("prefill", b, min(self.prefill_lengths), output="logits"),
                        EntrySpec("decode", b, output="logits")]
        return out


@dataclasses.dataclass
class LlmFrontend:
    model: LlmSource
    shapes: GenerationShapes
    source: str = "llm"

    def import_module(self, context, log: BuildLog) -> ImportedModel:
        cfg = self.model.config
        if self.shapes.max_seq - 1 > cfg.max_positions:
            log.warn(f"--max-seq {self.shapes.max_seq} exceeds the model's max_position_embeddings "
                     f"({cfg.max_positions}): positions past it were never trained")
        log.step(f"reading the weights of {self.model.path} ({self.model.kind})")
        weights = self.model.read_weights()
        rope_freqs = weights.pop("rope_freqs", None)
        names = expected_names(cfg)
        entries = self.shapes.entries()
        programs = {}
        for i, entry in enumerate(entries, 1):
            programs[entry.name] = (export_entry(cfg, entry, self.shapes.max_seq, rope_freqs), names)
            log.step(f"exported {entry.name} ({i}/{len(entries)}) with torch.export")
        module_op = import_entries(programs, context)
        log.step(f"imported {len(entries)} entry points through torch-mlir's FX importer")
        info = {"name": _model_name(self.model), "source": self.model.kind, "sha256": self.model.sha256(),
                "opset": None, "upgraded_from_opset": None}
        generation = {"format": GENERATION_FORMAT, "config": cfg.to_dict(), "max_seq": self.shapes.max_seq,
                      "entries": [e.to_json() for e in entries], "cache": {
                          "layout": ["layers", "kv", "batch", "kv_heads", "max_seq", "head_dim"],
                          "dtype": "float32", "scratch_row": self.shapes.max_seq - 1},
                      "chat_template": self.model.chat_template, "tokenizer": TOKENIZER_MEMBER,
                      "weights_from": self.model.kind, "notes": list(self.model.notes)}
        model = ImportedModel(module_op, [], [], {k: np.ascontiguousarray(weights[k], np.float32) for k in names},
                              {}, info, generation=generation,
                              members={TOKENIZER_MEMBER: self.model.tokenizer_json.encode()})
        return model

    def lower(self, model: ImportedModel, log: BuildLog) -> None:
        graph_lowering.lower_to_linalg(model.module_op, graph_lowering.FX_TORCH_TO_LINALG, log)
        names = expected_names(self.model.config)
        for func_op in _functions(model.module_op):
            tag_parameters(func_op, names)

    def import_static(self, model: ImportedModel, spec, log: BuildLog) -> Any:
        raise ModelLoadError("a generation model's entry points are static already")


TOKENIZER_MEMBER = "tokenizer.json"


def _functions(module_op) -> list:
    return [op.operation for op in module_op.regions[0].blocks[0].operations
            if op.operation.name == "func.func"]


def _model_name(model: LlmSource) -> str:
    import os

    base = os.path.basename(os.path.normpath(model.path))
    return base[:-5] if base.endswith(".gguf") else base
