"""The `.ixa` artifact: one zip file (stored, not compressed), byte-reproducible.

Members, in this order:
    manifest.json   what the artifact is (see `Manifest`), with each member's sha256
    module.vmfb     the IREE VM module (or module.mlir for targets with no executable)
    weights.irpa    the weights as an IREE parameter archive, scope "model" (optional)
    report.json     per-dispatch inventory from the dispatch passes

Reproducible: fixed timestamps and permissions, sorted JSON, no paths. The weights
member's data starts on a 4 KiB boundary so the runtime maps it in place.
`unzip model.ixa` then `iree-run-module --module=module.vmfb --parameters=model=weights.irpa`
runs it with upstream tools.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
import tempfile
import zipfile
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .errors import ArtifactError
from .tensor_spec import TensorSpec

FORMAT = "inferx-artifact"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
MODULE_VMFB = "module.vmfb"
MODULE_MLIR = "module.mlir"
WEIGHTS = "weights.irpa"
REPORT = "report.json"
PARAMETER_SCOPE = "model"
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_ALIGN = 4096
_ALIGN_EXTRA_ID = 0xD935  # the id zipalign uses for padding extra fields


@dataclass
class Manifest:
    model: dict
    target: dict
    compiler: dict
    iree_flags: list[str]
    pipeline: dict
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    entry_function: str = "main"
    # entry_function with caller-provided result buffers (iree.abi.output), when the module has one
    output_entry_function: Optional[str] = None
    executable: bool = True
    module: str = MODULE_VMFB
    weights: Optional[dict] = None
    precision_plan: Optional[dict] = None
    batch_buckets: Optional[list] = None  # [{"size", "latency_ms", "measured", "device"}]
    # static-shape functions beside entry_function: [{"name", "output_entry", "dims": {dim: size}}]
    functions: list = field(default_factory=list)
    tuning_db: Optional[dict] = None  # {"sha256", "entries_used"} when built from a tuning database
    members: dict = field(default_factory=dict)  # member -> sha256
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION,
            "model": self.model, "target": self.target, "compiler": self.compiler,
            "iree_flags": self.iree_flags, "pipeline": self.pipeline,
            "entry_function": self.entry_function, "output_entry_function": self.output_entry_function,
            "executable": self.executable,
            "module": self.module,
            "inputs": [s.to_json() for s in self.inputs],
            "outputs": [s.to_json() for s in self.outputs],
            "weights": self.weights, "precision_plan": self.precision_plan,
            "batch_buckets": self.batch_buckets, "functions": self.functions,
            "tuning_db": self.tuning_db,
            "members": self.members, "notes": self.notes,
        }

    @classmethod
    def from_json(cls, d: dict) -> "Manifest":
        if d.get("format") != FORMAT:
            raise ArtifactError(f"not an inferx artifact manifest (format={d.get('format')!r})")
        if d.get("format_version") != FORMAT_VERSION:
            raise ArtifactError(
                f"artifact format version {d.get('format_version')} is not supported by this "
                f"inferx-compiler (reads version {FORMAT_VERSION}); rebuild the artifact")
        return cls(model=d["model"], target=d["target"], compiler=d["compiler"],
                   iree_flags=d["iree_flags"], pipeline=d["pipeline"],
                   inputs=[TensorSpec.from_json(s) for s in d["inputs"]],
                   outputs=[TensorSpec.from_json(s) for s in d["outputs"]],
                   entry_function=d["entry_function"], output_entry_function=d.get("output_entry_function"),
                   executable=d["executable"],
                   module=d["module"], weights=d.get("weights"),
                   precision_plan=d.get("precision_plan"), batch_buckets=d.get("batch_buckets"),
                   functions=d.get("functions", []), tuning_db=d.get("tuning_db"),
                   members=d.get("members", {}),
                   notes=d.get("notes", []))


def write_parameter_archive(weights: dict[str, np.ndarray], path: str) -> None:
    import iree.runtime as rt

    index = rt.ParameterIndex()
    for key, array in weights.items():
        index.add_buffer(key, np.ascontiguousarray(array))
    index.create_archive_file(path)


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def write_artifact(out_path: str, manifest: Manifest, module_bytes: bytes,
                   weights: dict[str, np.ndarray], report: dict) -> None:
    """Write the artifact atomically (temp file in the same folder, then rename)."""
    out_dir = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="inferx-artifact-") as tmp:
        members: list[tuple[str, str]] = []  # (member name, file path)
        module_path = os.path.join(tmp, manifest.module)
        with open(module_path, "wb") as f:
            f.write(module_bytes)
        members.append((manifest.module, module_path))
        if weights:
            irpa = os.path.join(tmp, WEIGHTS)
            write_parameter_archive(weights, irpa)
            members.append((WEIGHTS, irpa))
            manifest.weights = {"member": WEIGHTS, "format": "irpa", "scope": PARAMETER_SCOPE,
                                "count": len(weights),
                                "bytes": int(sum(w.nbytes for w in weights.values())),
                                "keys": list(weights)}
        report_path = os.path.join(tmp, REPORT)
        with open(report_path, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
        members.append((REPORT, report_path))
        manifest.members = {name: _sha256_file(p) for name, p in members}
        manifest_bytes = json.dumps(manifest.to_json(), indent=1, sort_keys=True).encode()
        partial = out_path + ".partial"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED) as zf:
            _write_member(zf, MANIFEST, data=manifest_bytes)
            for name, path in members:
                _write_member(zf, name, path=path, align=(name == WEIGHTS))
        os.replace(partial, out_path)


def _write_member(zf: zipfile.ZipFile, name: str, *, data: bytes = None, path: str = None,
                  align: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    info.create_system = 3
    if align:
        header_end = zf.fp.tell() + 30 + len(name.encode())
        pad = (-(header_end + 4)) % _ALIGN
        info.extra = struct.pack("<HH", _ALIGN_EXTRA_ID, pad) + b"\0" * pad
    if data is not None:
        zf.writestr(info, data)
        return
    info.file_size = os.path.getsize(path)
    with open(path, "rb") as src, zf.open(info, "w", force_zip64=info.file_size > 2**31) as dst:
        for chunk in iter(lambda: src.read(1 << 22), b""):
            dst.write(chunk)


class Artifact:
    """A read-only view of an `.ixa` file; members are served from one memory map."""

    def __init__(self, path: str):
        self.path = path
        if not os.path.isfile(path):
            raise ArtifactError(f"{path}: no such artifact file")
        try:
            self._zip = zipfile.ZipFile(path)
            self.manifest = Manifest.from_json(json.loads(self._zip.read(MANIFEST)))
        except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as e:
            raise ArtifactError(f"{path}: not an inferx artifact ({e})") from None
        self._file = open(path, "rb")
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)

    def member_view(self, name: str) -> memoryview:
        """Zero-copy view of a stored member's bytes."""
        try:
            info = self._zip.getinfo(name)
        except KeyError:
            raise ArtifactError(f"{self.path}: artifact has no member '{name}'") from None
        offset = info.header_offset
        name_len, extra_len = struct.unpack("<HH", self._map[offset + 26:offset + 30])
        start = offset + 30 + name_len + extra_len
        return memoryview(self._map)[start:start + info.file_size]

    def read(self, name: str) -> bytes:
        return bytes(self.member_view(name))

    @property
    def report(self) -> dict:
        return json.loads(self.read(REPORT))
