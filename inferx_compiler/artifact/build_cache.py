"""The build cache (`--cache-dir DIR`, or `INFERX_CACHE_DIR`): an artifact built before from
the same inputs is copied instead of rebuilt.

The key is a sha256 over everything a build reads:
  - the model file's bytes and those of the external-data files it names;
  - the build options (target, precision, flags, batch sizes, passes, ...), spelled as JSON;
  - the target record (vector width, IREE flags of the target table);
  - the bytes of the tuning database, precision plan and calibration data the build uses;
  - the compiler stack: pip versions of inferx-compiler, IREE, torch-mlir and onnx, and a
    digest of inferx's own source files (an edited checkout gets new keys).
Builds are byte-reproducible, so a cache hit gives the bytes a fresh build would.
Builds that are not reproducible are never cached: those that measure bucket latencies on
this machine (`--batch-sizes` without `--no-measure` where the target's device is present)
and `--tune` builds (they measure too).

Layout: DIR/v1/KEY[:2]/KEY.ixa, with KEY.json beside it (what went into the key). Entries
are written atomically (a temp file, then a rename), so concurrent builds never see half an
artifact, and checked against their manifest's sha256 before use (a damaged entry is dropped
and rebuilt); delete the folder to clear the cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Optional

from inferx_compiler.artifact.archive import sha256_file
from inferx_compiler.options import CompileOptions
from inferx_compiler.build import resolve_build
from inferx_compiler.versions import stack_versions

LAYOUT = "v1"
ENV_VAR = "INFERX_CACHE_DIR"
# Options that do not change the artifact's bytes, or that are keyed by content instead.
_NOT_KEYED = {"plan", "tuning_db", "calibration", "precision_plan_file", "measure_buckets"}


def sha256_path(path: str) -> str:
    """A file's sha256, or a directory's: over its files' relative names and contents."""
    if os.path.isfile(path):
        return sha256_file(path)
    h = hashlib.sha256()
    for file in sorted(p for p in Path(path).rglob("*") if p.is_file()):
        h.update(str(file.relative_to(path)).encode() + b"\0" + sha256_file(str(file)).encode())
    return h.hexdigest()


@lru_cache(maxsize=None)
def inferx_source_digest() -> str:
    """sha256 over the installed inferx package's Python sources (passes and runtime included)."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for file in sorted(root.rglob("*.py")):
        h.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes())
    for name in ("passes", "dialects", "runtime"):  # a source checkout keeps these beside the package
        sibling = root.parent / name
        if sibling.is_dir() and not (root / name).is_dir():
            for file in sorted(sibling.rglob("*.py")):
                h.update(str(file.relative_to(root.parent)).encode() + b"\0" + file.read_bytes())
    return h.hexdigest()


def key_inputs(model_path: str, options: CompileOptions) -> dict:
    """Everything the cache key covers, as JSON-able data (stored beside each entry)."""
    from inferx_compiler.frontend.onnx_import import external_data_files

    fields = {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name not in _NOT_KEYED}
    return {
        "layout": LAYOUT,
        "model": sha256_file(model_path),
        "external_data": [sha256_file(p) for p in external_data_files(model_path)],
        "options": {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(fields.items())},
        "target": resolve_build(options).target.to_json(),
        "tuning_db": sha256_file(options.tuning_db) if options.tuning_db else None,
        "precision_plan": sha256_file(options.precision_plan_file) if options.precision_plan_file else None,
        "calibration": sha256_path(options.calibration) if options.calibration else None,
        "stack": stack_versions(),
        "inferx_sources": inferx_source_digest(),
    }


def cache_key(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


class BuildCache:
    def __init__(self, directory: str):
        self.root = Path(directory).expanduser() / LAYOUT

    def entry(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.ixa"

    def lookup(self, key: str) -> Optional[Path]:
        path = self.entry(key)
        return path if path.is_file() else None

    def store(self, key: str, artifact: str, inputs: dict) -> Path:
        """Copy a fresh artifact in (atomically), with the key's inputs beside it."""
        path = self.entry(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_copy(artifact, path)
        meta = json.dumps(inputs, indent=1, sort_keys=True).encode()
        _atomic_write(path.with_suffix(".json"), meta)
        return path

    def fetch(self, key: str, out_path: str) -> bool:
        """Copy the cached artifact to out_path; False on a miss. An entry whose members no
        longer match their manifest's sha256 (a damaged cache) is removed and counts as a miss."""
        path = self.lookup(key)
        if path is None or not _intact(path):
            return False
        _atomic_copy(str(path), Path(out_path))
        return True


def _intact(path: Path) -> bool:
    from inferx_compiler.artifact.archive import Artifact
    from inferx_compiler.errors import ArtifactError

    try:
        Artifact(str(path)).verify_members("all")
        return True
    except ArtifactError:
        path.unlink(missing_ok=True)
        return False


def _atomic_copy(src: str, dest: Path) -> None:
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=dest.name + ".", suffix=".partial", dir=dest.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    except BaseException:
        os.unlink(tmp)
        raise


def _atomic_write(dest: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=dest.name + ".", suffix=".partial", dir=dest.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, dest)
