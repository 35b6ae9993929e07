"""The tuning database: measured dispatch configurations, keyed by (target, dispatch signature).

    {"format": "inferx-tuning-db", "version": 1,
     "entries": {"<target key>": {"<signature>": {"config": "#iree_codegen.compilation_info<...>"
                                                            | null (IREE's own was fastest),
                                                  "us": 12.5, "iree_us": 15.1, "candidate": 2,
                                                  "summary": "linalg.generic 64x3x3x56x56 f32"}}},
     "models": {"<target key>": {"<model sha256>": {"data_tiling": true, "ms": {"on": 3.1, "off": 4.9},
                                                   "matmul_tile_bytes": 1048576,
                                                   "tile_bytes_ms": {"262144": 3.1, "1048576": 2.9},
                                                   "tuned_ms": 2.9, "configs": 0}}}}

Dispatch entries are keyed by what a dispatch computes, so they serve any model that has the
same dispatch; model entries hold the whole-build knobs measured for one model (data tiling and,
where it is on, the data-tiled matmul tile budget).

`inferx-compile --tune --tuning-db FILE` measures candidates on the build machine and writes
the winners; later builds with `--tuning-db FILE` read them (`inferx-dispatch-config` attaches
them). The file's sha256 is recorded in the manifest, so a tuned build is reproducible from its
database. JSON is written sorted, so the same measurements give the same bytes.
"""

from __future__ import annotations

import json
import os
import platform
from typing import Optional

from inferx_compiler.errors import InferXError

FORMAT = "inferx-tuning-db"
VERSION = 1


def target_key(target) -> str:
    """What a measurement is valid for: the target, and for the host `cpu` the CPU model too."""
    if target.name == "cpu":
        return f"cpu:{_cpu_model()}:{target.vector_bits}b"
    return f"{target.name}:{target.arch}"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def empty() -> dict:
    return {"format": FORMAT, "version": VERSION, "entries": {}}


def load(path: str) -> dict:
    if not os.path.exists(path):
        raise InferXError(f"--tuning-db {path}: no such file (write one with --tune)")
    try:
        with open(path) as f:
            db = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise InferXError(f"--tuning-db {path}: not a tuning database ({e})") from None
    if db.get("format") != FORMAT or db.get("version") != VERSION:
        raise InferXError(f"--tuning-db {path}: not an inferx tuning database of version {VERSION} "
                          f"(format={db.get('format')!r}, version={db.get('version')!r})")
    return db


def load_or_empty(path: str) -> dict:
    return load(path) if os.path.exists(path) else empty()


def save_changes(path: str, before: dict, after: dict) -> dict:
    """Write to the database at `path` the entries `after` (a tuner's copy) changed since
    `before` (its copy as first read), under an exclusive lock on `path`.lock, over what the file
    holds now: two tuners that share a database (two models tuned at once) both keep their
    entries, where a plain read-modify-write lost the first one's. Returns the merged database."""
    import fcntl

    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            merged = load_or_empty(path)
            for table in ("entries", "models"):
                for key, rows in after.get(table, {}).items():
                    old = before.get(table, {}).get(key, {})
                    for name, entry in rows.items():
                        if old.get(name) != entry:
                            merged.setdefault(table, {}).setdefault(key, {})[name] = entry
            save(merged, path)
            return merged
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def save(db: dict, path: str) -> None:
    tmp = path + ".partial"
    with open(tmp, "w") as f:
        json.dump(db, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def lookup(db: dict, target_key_: str, signature: str) -> Optional[dict]:
    return db.get("entries", {}).get(target_key_, {}).get(signature)


def record(db: dict, target_key_: str, signature: str, entry: dict) -> None:
    db.setdefault("entries", {}).setdefault(target_key_, {})[signature] = entry


def lookup_model(db: dict, target_key_: str, model_sha256: str) -> Optional[dict]:
    return db.get("models", {}).get(target_key_, {}).get(model_sha256)


def record_model(db: dict, target_key_: str, model_sha256: str, entry: dict) -> None:
    db.setdefault("models", {}).setdefault(target_key_, {})[model_sha256] = entry
