"""The models a server serves: names × versions, each version a `Service` (session, batcher
lanes, scheduler) of one artifact.

Two ways to fill it:
  * artifacts on the command line: each is model NAME (its file name without .ixa), version "1";
  * a model repository directory in Triton's layout, DIR/NAME/VERSION/model.ixa, with VERSION a
    positive integer (other entries are ignored, as Triton does): every model, every version.
A request without a version gets the model's highest version (Triton's default policy).

Input length (the `input_length_bin` metric label): elements along the model's sequence dim —
the first dynamic non-batch dim whose name says sequence (contains "seq", "len" or "token"),
else its first dynamic non-batch dim (inputs in order, then axes); a model with neither (every
non-batch dim static: an image model, say) counts the elements of one row of its first input
(the product of its non-batch dims), which is the same for every request.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Optional, Sequence

from inferx_compiler.errors import InferXError
from inferx_compiler.runtime.kserve import RequestError, datatype_of

MODEL_FILE = "model.ixa"
_SEQUENCE_NAME = re.compile(r"seq|len|token", re.IGNORECASE)


@dataclass
class ModelVersion:
    name: str
    version: str
    path: str
    service: object  # runtime.service.Service
    length_rule: tuple = field(init=False)  # ("dim", input, axis) or ("row", input)

    def __post_init__(self):
        self.inputs = list(self.service.inputs)
        self.outputs = list(self.service.outputs)
        self.output_names = [s.name for s in self.outputs]
        self.by_name = {s.name: s for s in self.inputs}
        self.batchable = bool(self.service.scheduler.lanes[0].batcher.batchable)
        self.max_batch_size = int(self.service.config.max_batch_size) if self.batchable else 0
        self.length_rule = length_rule(self.inputs, self.batchable)

    def request_length(self, feeds: dict) -> int:
        """The request's length for `input_length_bin` (see the module's docstring)."""
        kind, name = self.length_rule[0], self.length_rule[1]
        array = feeds.get(name)
        if array is None:
            return 0
        if kind == "dim":
            axis = self.length_rule[2]
            return int(array.shape[axis]) if array.ndim > axis else 0
        return math.prod(array.shape[1:] if self.batchable else array.shape)

    def metadata(self, versions: list[str]) -> dict:
        return {"name": self.name, "versions": versions, "platform": "inferx",
                "inputs": [tensor_metadata(s) for s in self.inputs],
                "outputs": [tensor_metadata(s) for s in self.outputs]}

    def config(self) -> dict:
        """Triton's model configuration, as far as it applies (max_batch_size 0: the model has
        no batch dim; dims then include every dim)."""
        cut = 1 if self.batchable else 0
        config = self.service.config

        def io(spec) -> dict:
            return {"name": spec.name, "data_type": "TYPE_" + ("STRING" if datatype_of(spec.dtype) == "BYTES"
                                                               else datatype_of(spec.dtype)),
                    "dims": [d if isinstance(d, int) else -1 for d in spec.shape[cut:]]}

        doc = {"name": self.name, "platform": "inferx", "backend": "inferx", "version_policy": {"latest": {"num_versions": 1}},
               "max_batch_size": self.max_batch_size, "input": [io(s) for s in self.inputs],
               "output": [io(s) for s in self.outputs]}
        if self.batchable:
            doc["dynamic_batching"] = {"preferred_batch_size": list(config.preferred_batch_sizes),
                                       "max_queue_delay_microseconds": config.max_queue_delay_us}
        doc["instance_group"] = [{"count": len(group), "kind": "KIND_GPU" if group[0].device.startswith("cuda")
                                  else "KIND_CPU"} for group in self.service.instances]
        return doc


def tensor_metadata(spec) -> dict:
    return {"name": spec.name, "datatype": datatype_of(spec.dtype),
            "shape": [d if isinstance(d, int) else -1 for d in spec.shape]}


def length_rule(inputs, batchable: bool) -> tuple:
    first_batch_axis = 1 if batchable else 0
    dynamic = [(s.name, axis, d) for s in inputs for axis, d in enumerate(s.shape)
               if axis >= first_batch_axis and isinstance(d, str)]
    for name, axis, dim in dynamic:
        if _SEQUENCE_NAME.search(dim):
            return ("dim", name, axis)
    if dynamic:
        return ("dim", dynamic[0][0], dynamic[0][1])
    return ("row", inputs[0].name) if inputs else ("row", "")


class ModelRepository:
    """The KServe models by name and version. A --model-repository's generation artifacts (LLMs)
    are not KServe models: `generation_entries` lists them, (name, version, path) of each name's
    highest version, for the server's generation engines (runtime/llm_models.py)."""

    def __init__(self, models: Sequence[ModelVersion]):
        self.generation_entries: list[tuple[str, str, str]] = []
        self._models: dict[str, dict[str, ModelVersion]] = {}
        for m in models:
            if m.version in self._models.setdefault(m.name, {}):
                raise InferXError(f"model '{m.name}' version {m.version} is given twice")
            self._models[m.name][m.version] = m
        self._latest = {n: max(vs, key=int) for n, vs in self._models.items()}

    @classmethod
    def load(cls, artifacts: Sequence[str] = (), *, name: Optional[str] = None, directory: Optional[str] = None,
             options=None) -> "ModelRepository":
        """Load every artifact (model NAME = file stem or `name`, version 1) and every
        DIR/NAME/VERSION/model.ixa of `directory`."""
        from inferx_compiler.runtime.service import Service, ServiceOptions

        entries = [(name or os.path.splitext(os.path.basename(a))[0], "1", a) for a in artifacts]
        if name and len(artifacts) > 1:
            raise InferXError("--name applies to one artifact; give several models in a --model-repository")
        generation: list[tuple[str, str, str]] = []
        if directory is not None:
            found = scan_directory(directory)
            if not found:
                raise InferXError(f"{directory}: no models in it (expected NAME/VERSION/{MODEL_FILE}, VERSION a "
                                  f"positive integer)")
            generation = [e for e in found if is_generation_artifact(e[2])]  # served by their engines
            entries += [e for e in found if e not in generation]
        seen = set()
        for n, v, path in entries:
            if (n, v) in seen:
                raise InferXError(f"model '{n}' version {v} is given twice ({path})")
            seen.add((n, v))
        loaded: list[ModelVersion] = []
        try:
            for n, v, path in entries:
                loaded.append(ModelVersion(n, v, path, Service(path, options or ServiceOptions())))
        except BaseException:
            for m in loaded:
                m.service.close()
            raise
        repository = cls(loaded)
        repository.generation_entries = latest_versions(generation)
        return repository

    @classmethod
    def single(cls, service, name: str, version: str = "1") -> "ModelRepository":
        return cls([ModelVersion(name, version, getattr(service, "artifact", ""), service)])

    def names(self) -> list[str]:
        return sorted(self._models)

    def versions(self, name: str) -> list[str]:
        return sorted(self._models.get(name, {}), key=int)

    def all(self) -> list[ModelVersion]:
        return [self._models[n][v] for n in self.names() for v in self.versions(n)]

    def get(self, name: str, version: Optional[str] = None) -> ModelVersion:
        """The model's `version` (None or "": its highest); RequestError 404 when absent."""
        versions = self._models.get(name)
        if versions is None:
            raise RequestError(f"unknown model '{name}' (this server has: {', '.join(self.names()) or 'none'})",
                               HTTPStatus.NOT_FOUND)
        if not version:
            return versions[self._latest[name]]
        model = versions.get(str(version))
        if model is None:
            raise RequestError(f"model '{name}' has no version '{version}' (it has: "
                               f"{', '.join(self.versions(name))})", HTTPStatus.NOT_FOUND)
        return model

    def find(self, name: str, version: Optional[str] = None) -> Optional[ModelVersion]:
        try:
            return self.get(name, version)
        except RequestError:
            return None

    def index(self) -> list[dict]:
        """The repository index (Triton's): every model version, with its state."""
        return [{"name": m.name, "version": m.version, "state": "READY", "reason": ""} for m in self.all()]

    def close(self) -> None:
        """Stop every model's batchers; queued requests still run."""
        for m in self.all():
            m.service.close()


def is_generation_artifact(path: str) -> bool:
    """Whether the artifact at `path` is a generation model (its manifest has a generation record)."""
    import json
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            return bool(json.loads(z.read("manifest.json")).get("generation"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return False  # not ours to judge here: loading it as a KServe model says what is wrong


def latest_versions(entries: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The highest version of each name."""
    best: dict[str, tuple[str, str, str]] = {}
    for name, version, path in entries:
        if name not in best or int(version) > int(best[name][1]):
            best[name] = (name, version, path)
    return [best[n] for n in sorted(best)]


def scan_directory(directory: str) -> list[tuple[str, str, str]]:
    """(name, version, path) of every DIR/NAME/VERSION/model.ixa."""
    if not os.path.isdir(directory):
        raise InferXError(f"{directory}: not a directory")
    found = []
    for name in sorted(os.listdir(directory)):
        model_dir = os.path.join(directory, name)
        if name.startswith(".") or not os.path.isdir(model_dir):
            continue
        for version in sorted(os.listdir(model_dir)):
            path = os.path.join(model_dir, version, MODEL_FILE)
            if version.isdigit() and int(version) > 0 and os.path.isfile(path):
                found.append((name, str(int(version)), path))
    return found
