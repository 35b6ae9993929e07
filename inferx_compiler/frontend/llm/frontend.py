"""The LLM frontend: a Hugging Face folder or GGUF file -> our decoder's entry points in MLIR.

For the driver (imported.py's Frontend): `import_module` exports each entry point (prefill at
each chunk length, decode at each batch size) with torch.export and imports them all into one
module through torch-mlir's FX importer, the KV cache tied in place (export.py); `lower` takes it
to linalg and tags the weight arguments as parameters. The entries are static-shape already:
there are no static-shape functions to add.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

import numpy as np

from inferx_compiler.errors import ModelLoadError
from inferx_compiler.frontend import graph_lowering
from inferx_compiler.frontend.imported import ImportedModel
from inferx_compiler.frontend.llm import kernel_calls
from inferx_compiler.frontend.llm.decoder import CacheGeometry
from inferx_compiler.frontend.llm.export import EntrySpec, export_entry, import_entries, tag_parameters
from inferx_compiler.frontend.llm.source import LlmSource
from inferx_compiler.frontend.llm.weights import expected_names, hf_name
from inferx_compiler.log import BuildLog

GENERATION_FORMAT = 1  # the manifest's "generation" record


@dataclasses.dataclass(frozen=True)
class GenerationShapes:
    """The compiled entry points: prefill chunks of `prefill_lengths` tokens and decode steps, at
    each of `batch_sizes`, for sequences of up to `max_seq` positions, over one KV cache of
    `kv_blocks` blocks of `kv_block_size` rows (block 0 the scratch block; default: enough for
    every sequence of the largest batch at max_seq)."""

    prefill_lengths: tuple[int, ...] = (32, 128)
    batch_sizes: tuple[int, ...] = (1,)
    max_seq: int = 512
    logits: bool = False  # also entries that return logits (references, tests)
    sampling: bool = True  # False: greedy entries only (no sampler compiled; --greedy-only)
    kv_block_size: int = 16
    kv_blocks: Optional[int] = None
    prefill_batch_sizes: Optional[tuple[int, ...]] = None  # default: batch_sizes
    kv_int8: bool = False  # the KV cache in int8 with a power-of-two scale a row (decoder.quantize_rows)

    @property
    def prefill_batches(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.prefill_batch_sizes or self.batch_sizes)))

    def __post_init__(self):
        if not self.prefill_lengths or not self.batch_sizes or min(self.prefill_lengths + self.batch_sizes) < 1:
            raise ModelLoadError("--prefill-lengths and --batch-sizes need at least one positive size each")
        if self.max_seq < max(self.prefill_lengths):
            raise ModelLoadError(f"--max-seq {self.max_seq} must be at least the longest prefill chunk "
                                 f"({max(self.prefill_lengths)})")
        if self.kv_block_size < 1:
            raise ModelLoadError(f"--kv-block-size must be >= 1, got {self.kv_block_size}")
        if self.kv_blocks is not None and self.kv_blocks < 2:
            raise ModelLoadError(f"--kv-blocks must be >= 2 (block 0 is the scratch block), got {self.kv_blocks}")

    @property
    def cache(self) -> CacheGeometry:
        width = -(-self.max_seq // self.kv_block_size)
        blocks = self.kv_blocks if self.kv_blocks is not None else 1 + max(self.batch_sizes) * width
        return CacheGeometry(blocks=blocks, block_size=self.kv_block_size, table_width=width, int8=self.kv_int8)

    def entries(self) -> list[EntrySpec]:
        out = []
        for b in sorted(set(self.batch_sizes) | set(self.prefill_batches)):
            first = "sample" if self.sampling else "greedy"
            if b in self.prefill_batches:
                out += [EntrySpec("prefill", b, t, output=first) for t in sorted(set(self.prefill_lengths))]
            if b not in self.batch_sizes:
                continue
            out += [EntrySpec("decode", b, output="greedy")]
            if self.sampling:
                out += [EntrySpec("decode", b, output="sample")]
            if self.logits:
                if b in self.prefill_batches:
                    out += [EntrySpec("prefill", b, min(self.prefill_lengths), output="logits")]
                out += [EntrySpec("decode", b, output="logits")]
        return out


DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
WEIGHT_ONLY = ("int8", "int4")  # weight-only on the projections, over the target's float dtype


def model_dtype(precision: str, target) -> str:
    """The decoder's dtype (activations, KV cache, the weights left in float) for --precision:
    fp32/fp16/bf16 as named; int8/int4 quantize the projections' weights only, over fp16 on GPUs
    and fp32 on CPUs (where the products run on int8 sums over dynamically quantized rows)."""
    from inferx_compiler.precision.precision_plan import PrecisionError

    if precision in DTYPES:
        return DTYPES[precision]
    if precision in WEIGHT_ONLY:
        return "float16" if target.backend == "cuda" else "float32"
    raise PrecisionError(f"--precision {precision}: generation models build at "
                         f"{', '.join(list(DTYPES) + list(WEIGHT_ONLY))}")
WEIGHT_MODES = ("copy", "reference")


@dataclasses.dataclass
class LlmFrontend:
    """`dtype`: the weights', activations' and cache's element type (norms and softmax compute in
    float32, as transformers does). `weights`: "copy" (converted into the artifact's parameter
    archive) or "reference" (a Hugging Face folder's safetensors files, read at load time where
    they are: copying gigabytes into the artifact would be waste; the manifest names each file,
    with its sha256 when it exists at build time, and every tensor's shape and dtype)."""

    model: LlmSource
    shapes: GenerationShapes
    dtype: str = "float32"
    weights: str = "copy"
    quantization: Optional[dict] = None  # {"kind": int8|int4, "group_size"}: weight-only projections
    source: str = "llm"
    # paged_attention.KernelAttention: decode steps attend through our kernel (CUDA builds)
    kernel_attention: Optional[object] = None

    def import_module(self, context, log: BuildLog) -> ImportedModel:
        cfg = self.model.config
        if self.shapes.max_seq > cfg.max_positions:
            log.warn(f"--max-seq {self.shapes.max_seq} exceeds the model's max_position_embeddings "
                     f"({cfg.max_positions}): positions past it were never trained")
        names = expected_names(cfg)
        if self.weights == "reference":
            weights, rope_freqs, keys, record = {}, None, [hf_name(n) for n in names], self._referenced(names, log)
        else:
            log.step(f"reading the weights of {self.model.path} ({self.model.kind})")
            weights = self.model.read_weights()
            rope_freqs = weights.pop("rope_freqs", None)
            keys = names
            weights = {k: _as_dtype(weights[k], self.dtype) for k in names}
            record = {"mode": "copy", "from": self.model.kind, "dtype": self.dtype}
        entries = self.shapes.entries()
        torch_dtype = getattr(__import__("torch"), self.dtype)
        geometry = self.shapes.cache
        programs = {}
        for i, entry in enumerate(entries, 1):
            programs[entry.name] = (export_entry(cfg, entry, geometry, rope_freqs, torch_dtype,
                                                 self.kernel_attention), keys)
            log.step(f"exported {entry.name} ({i}/{len(entries)}) with torch.export")
        module_op = import_entries(programs, context)
        log.step(f"imported {len(entries)} entry points through torch-mlir's FX importer")
        info = {"name": _model_name(self.model), "source": self.model.kind, "sha256": self.model.sha256(),
                "opset": None, "upgraded_from_opset": None}
        generation = {"format": GENERATION_FORMAT, "config": cfg.to_dict(), "max_seq": self.shapes.max_seq,
                      "dtype": self.dtype, "entries": [e.to_json() for e in entries], "cache": {
                          "layout": ["layers", "kv", "blocks", "kv_heads", "block_size", "head_dim"],
                          "dtype": "int8" if geometry.int8 else self.dtype, "blocks": geometry.blocks,
                          "block_size": geometry.block_size, "table_width": geometry.table_width,
                          "scratch_block": 0, "row": cfg.head_dim + (1 if geometry.int8 else 0),
                          **({"scale": "a power of two per (position, head): 2^e, e the row's last element"}
                             if geometry.int8 else {})},
                      "chat_template": self.model.chat_template, "tokenizer": TOKENIZER_MEMBER,
                      "weights": record, "quantization": self.quantization,
                      "attention": ("inferx paged-attention kernels (Triton): decode and prefill"
                                    if self.kernel_attention else "compiled by IREE"),
                      "notes": list(self.model.notes)}
        self._keys = keys
        return ImportedModel(module_op, [], [], weights, {}, info, generation=generation,
                             members={TOKENIZER_MEMBER: self.model.tokenizer_json.encode()})

    def _referenced(self, names: list[str], log: BuildLog) -> dict:
        """The manifest's record of referenced weights; refuses files whose tensors do not match."""
        from inferx_compiler.artifact import safetensors
        from inferx_compiler.frontend.llm.weights import expected_shapes

        if self.model.kind != "huggingface":
            raise ModelLoadError(f"{self.model.path}: --weights reference takes a Hugging Face folder's safetensors "
                                 f"files (a GGUF file's quantized tensors are converted: --weights copy)")
        shapes = expected_shapes(self.model.config)
        tensors = {hf_name(n): {"shape": list(shapes[n]), "dtype": self.dtype} for n in names}
        found = safetensors.tensors(self.model.files)
        if found:
            for key, want in tensors.items():
                got = found.get(key)
                if got is None or got[0] != want["dtype"] or list(got[1]) != want["shape"]:
                    raise ModelLoadError(f"{self.model.path}: tensor {key} is {got or 'missing'}; the build reads "
                                         f"{want['dtype']} {want['shape']} (--precision sets the dtype)")
        else:
            log.warn(f"{self.model.path} holds no safetensors files yet: the artifact expects them at load time "
                     f"(tensor names, shapes and {self.dtype} recorded; no sha256)")
        files = [{"name": os.path.basename(p), "bytes": os.path.getsize(p), "sha256": sha256_file(p)}
                 for p in self.model.files]
        return {"mode": "reference", "format": "safetensors", "dtype": self.dtype, "files": files,
                "tensors": tensors, "why": "the weights stay in the model folder's safetensors files, read in place "
                                           "at load time: a copy into the artifact would double gigabytes"}

    def lower(self, model: ImportedModel, log: BuildLog) -> None:
        if kernel_calls.to_calls(model.module_op):
            kernel_calls.lower(model.module_op, graph_lowering.FX_TORCH_TO_LINALG, log)
        else:
            graph_lowering.lower_to_linalg(model.module_op, graph_lowering.FX_TORCH_TO_LINALG, log)
        for func_op in _functions(model.module_op):
            tag_parameters(func_op, self._keys)

    def import_static(self, model: ImportedModel, spec, log: BuildLog) -> Any:
        raise ModelLoadError("a generation model's entry points are static already")


TOKENIZER_MEMBER = "tokenizer.json"


def _as_dtype(array: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        import ml_dtypes

        return np.ascontiguousarray(array, dtype=ml_dtypes.bfloat16)
    return np.ascontiguousarray(array, dtype=dtype)


def sha256_file(path: str) -> str:
    from inferx_compiler.artifact.archive import sha256_file as digest

    return digest(path)


def _functions(module_op) -> list:
    """The entry points (not the declarations of our kernels' calls, which have no body)."""
    return [op.operation for op in module_op.regions[0].blocks[0].operations
            if op.operation.name == "func.func" and len(op.operation.regions[0].blocks)]


def _model_name(model: LlmSource) -> str:
    import os

    base = os.path.basename(os.path.normpath(model.path))
    return base[:-5] if base.endswith(".gguf") else base
