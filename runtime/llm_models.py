"""The generation models a server holds: each a GenerationSession with its Engine, by name.

`inferx-serve --model PATH` takes a generation artifact (.ixa), or a Hugging Face folder or a
GGUF file, which the command compiles first (cli/serve.py: the runtime never imports the
compiler).
Each model finishes its requests through one engine thread (llm_engine.py); the metrics and the
per-request JSON log line are written when a request ends (`on_finished`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from inferx_compiler.errors import InputValidationError

LOG = logging.getLogger("inferx.generation")


@dataclass
class GenerationModel:
    name: str
    path: str
    session: object  # GenerationSession
    engine: object  # Engine
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def context_length(self) -> int:
        return self.session.max_seq


class GenerationModels:
    """Models by name; `close()` stops their engines."""

    def __init__(self, models: Sequence[GenerationModel] = ()):
        self._models = {m.name: m for m in models}
        self.on_finished: list[Callable[[GenerationModel, object], None]] = []
        for m in models:
            m.engine.listeners.append(lambda r, m=m: self._finished(m, r))

    def __bool__(self) -> bool:
        return bool(self._models)

    def names(self) -> list[str]:
        return sorted(self._models)

    def all(self) -> list[GenerationModel]:
        return [self._models[n] for n in self.names()]

    def find(self, name: Optional[str]) -> Optional[GenerationModel]:
        if name is None and len(self._models) == 1:
            return next(iter(self._models.values()))
        return self._models.get(name)

    def close(self) -> None:
        for m in self._models.values():
            m.engine.stop()

    def _finished(self, model: GenerationModel, request) -> None:
        for callback in self.on_finished:
            callback(model, request)
        LOG.info(json.dumps(request_log_record(model.name, request)))

    @classmethod
    def load(cls, artifacts: Sequence[str], *, names: Optional[Sequence[str]] = None, device: Optional[str] = None,
             max_batch: Optional[int] = None, kv_blocks: Optional[int] = None,
             prefix_caching: bool = True) -> "GenerationModels":
        """Load each generation artifact and start its engine; names (default: file stems) unique."""
        from inferx_compiler.runtime.generation import GenerationSession
        from inferx_compiler.runtime.llm_engine import Engine

        models = []
        try:
            for i, artifact in enumerate(artifacts):
                name = names[i] if names else model_name(artifact)
                if any(m.name == name for m in models):
                    raise InputValidationError(f"two generation models are named '{name}' ({artifact})")
                session = GenerationSession(artifact, device=device)
                engine = Engine(session, max_batch=max_batch, kv_blocks=kv_blocks,
                                prefix_caching=prefix_caching).start()
                models.append(GenerationModel(name, artifact, session, engine))
        except BaseException:
            for m in models:
                m.engine.stop()
            raise
        return cls(models)


def log_requests_to(stream) -> None:
    """Write the per-request JSON lines to `stream` (the server's stderr), one a line."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    LOG.handlers[:] = [handler]
    LOG.setLevel(logging.INFO)
    LOG.propagate = False


def model_name(path: str) -> str:
    base = os.path.basename(os.path.normpath(path))
    for suffix in (".ixa", ".gguf"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def request_log_record(model: str, r) -> dict:
    """The one JSON line a finished request logs."""
    t = r.times
    return {"event": "generation_request", "id": r.id, "model": model, "prompt_tokens": len(r.prompt),
            "completion_tokens": len(r.output), "cached_tokens": r.cached_tokens, "preemptions": r.preemptions,
            "finish_reason": r.finish_reason, "error": r.error,
            "time_to_first_token_s": None if t.first_token is None else round(t.first_token - t.arrived, 6),
            "e2e_s": None if t.finished is None else round(t.finished - t.arrived, 6)}
