"""What a generation model comes as: a Hugging Face folder or a llama.cpp GGUF file.

`open_source(path)` reads the configuration and tokenizer and says how to read the weights, and
refuses, before anything is compiled, what the decoder cannot run (naming the field): another
architecture, a GGUF tensor type it cannot convert, a missing file.

  * folder: config.json (architectures Llama/Mistral/Qwen2), *.safetensors, tokenizer.json (and
    tokenizer_config.json / chat_template.jinja for the chat template);
  * GGUF: `general.architecture`, the `{arch}.*` keys, tensors F32/F16/BF16/Q8_0/Q4_0/Q4_1, and the
    tokenizer from its `tokenizer.ggml.*` keys, turned into a tokenizer.json at build time with
    transformers' GGUF reader (`AutoTokenizer.from_pretrained(folder, gguf_file=...)`), so that the
    artifact's tokenizer is the one transformers users get.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from inferx_compiler.errors import ModelLoadError
from inferx_compiler.frontend.llm.config import DecoderConfig, from_gguf, from_hf_config, gguf_field, open_gguf
from inferx_compiler.frontend.llm.weights import GGUF_DEQUANTIZABLE, load_gguf, load_safetensors


@dataclass
class LlmSource:
    path: str
    kind: str  # "huggingface" | "gguf"
    config: DecoderConfig
    read_weights: Callable[[], dict]  # canonical name -> float32 array
    tokenizer_json: str  # the `tokenizers` library's serialized tokenizer
    chat_template: Optional[str]
    files: list[str] = field(default_factory=list)  # what the weights are read from (hashed)
    notes: list[str] = field(default_factory=list)

    def sha256(self) -> str:
        """One digest of the weight files and the configuration (the manifest's model.sha256)."""
        h = hashlib.sha256(json.dumps(self.config.to_dict(), sort_keys=True, default=str).encode())
        for path in self.files:
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 22), b""):
                    h.update(chunk)
        return h.hexdigest()


def is_llm_source(path: str) -> bool:
    """A GGUF file, or a folder with a config.json (a Hugging Face model folder)."""
    return path.endswith(".gguf") or (os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json")))


def open_source(path: str) -> LlmSource:
    if not os.path.exists(path):
        raise ModelLoadError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        return _huggingface_folder(path)
    if path.endswith(".gguf"):
        return _gguf_file(path)
    raise ModelLoadError(f"{path}: not a generation model (give a Hugging Face folder with config.json, or a .gguf)")


def _huggingface_folder(path: str) -> LlmSource:
    config = from_hf_config(path)
    files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".safetensors"))
    tokenizer = os.path.join(path, "tokenizer.json")
    if not os.path.isfile(tokenizer):
        raise ModelLoadError(f"{path}: no tokenizer.json (the fast tokenizer file) in the folder")
    with open(tokenizer) as f:
        tokenizer_json = f.read()
    return LlmSource(path, "huggingface", config, lambda: load_safetensors(files, config), tokenizer_json,
                     _folder_chat_template(path), files)


def _folder_chat_template(path: str) -> Optional[str]:
    jinja = os.path.join(path, "chat_template.jinja")
    if os.path.isfile(jinja):
        with open(jinja) as f:
            return f.read()
    settings = os.path.join(path, "tokenizer_config.json")
    if os.path.isfile(settings):
        with open(settings) as f:
            template = json.load(f).get("chat_template")
        return template if isinstance(template, str) else None
    return None


def _gguf_file(path: str) -> LlmSource:
    reader = open_gguf(path)
    config = from_gguf(reader)
    for t in reader.tensors:  # refused before anything is converted or compiled
        if t.tensor_type.name not in GGUF_DEQUANTIZABLE:
            raise ModelLoadError(f"{path}: tensor {t.name!r} has type {t.tensor_type.name}; supported: "
                                 f"{', '.join(GGUF_DEQUANTIZABLE)}")
    types = sorted({t.tensor_type.name for t in reader.tensors})
    notes = [f"GGUF tensor types {', '.join(types)}: converted to float32 at build time"]
    return LlmSource(path, "gguf", config, lambda: load_gguf(reader, config), _gguf_tokenizer(path),
                     gguf_field(reader, "tokenizer.chat_template", None), [path], notes)


def _gguf_tokenizer(path: str) -> str:
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ModelLoadError(f"{path}: reading a GGUF file's tokenizer needs transformers at build time: "
                             f"pip install 'inferx-compiler[llm]'") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(path)),
                                                  gguf_file=os.path.basename(path))
    except Exception as e:
        raise ModelLoadError(f"{path}: transformers cannot read its tokenizer (tokenizer.ggml.model): "
                             f"{type(e).__name__}: {e}") from None
    return tokenizer.backend_tokenizer.to_str()


def weights_as(weights: dict, dtype) -> dict:
    """The weights in the precision the build stores them at (float32 or float16)."""
    return {k: np.ascontiguousarray(v, dtype=dtype) for k, v in weights.items()}
