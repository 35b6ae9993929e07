"""The `.ixa` artifact: one zip file, byte-reproducible.

Members, in this order:
    manifest.json   what the artifact is (see `Manifest`), with each member's sha256
    module.vmfb     the IREE VM module (or module.mlir for targets with no executable)
    weights.irpa    the weights as an IREE parameter archive, scope "model" (optional)
    report.json     per-dispatch inventory from the dispatch passes

Reproducible: fixed timestamps and permissions, sorted JSON, no paths, deflate at a fixed level.
The weights member is stored (not compressed) and its data starts on a 4 KiB boundary, so the
runtime maps it in place; the others are deflated (format version 2; version 1, every member
stored, is still read): a BERT-base int8 artifact's module and report went from 0.95 MB to 0.41
(its weights are 85.4 MB), which made it smaller than onnxruntime's int8 model file.
`unzip model.ixa` then `iree-run-module --module=module.vmfb --parameters=model=weights.irpa`
runs it with upstream tools.

Integrity (checked when the runtime opens an artifact to run it, `open_for_running`):
    - every member the manifest lists in `members` must be in the zip, and nothing else
      besides manifest.json; each one's sha256 must match (hashed from the memory map,
      no copies). manifest.json cannot list its own hash, so it is not covered: the check
      catches corruption and accidental edits, not a deliberate forgery (no signature).
    - `compiler["iree-base-compiler"]`, the IREE that wrote module.vmfb, must equal the
      installed IREE runtime's version: IREE does not promise that a vmfb from one release
      runs on another.
The `verify` setting (`load(..., verify=...)`, else $INFERX_VERIFY_ARTIFACT) relaxes this;
see `VerifyPolicy`.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
import tempfile
import warnings
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from inferx_compiler.errors import ArtifactError
from inferx_compiler.tensor_spec import TensorSpec
from inferx_compiler.versions import installed_iree_runtime

FORMAT = "inferx-artifact"
FORMAT_VERSION = 2  # written; 1 (every member stored) is read too
READ_FORMAT_VERSIONS = (1, 2)
_DEFLATE_LEVEL = 9  # fixed: the deflated bytes, and so the artifact, are reproducible
MANIFEST = "manifest.json"
MODULE_VMFB = "module.vmfb"
MODULE_MLIR = "module.mlir"
WEIGHTS = "weights.irpa"
REPORT = "report.json"
PARAMETER_SCOPE = "model"
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_ALIGN = 4096
_ALIGN_EXTRA_ID = 0xD935  # the id zipalign uses for padding extra fields
VERIFY_ENV = "INFERX_VERIFY_ARTIFACT"
VERIFY_LEVELS = ("all", "skip-weights", "none")
IGNORE_IREE_VERSION = "ignore-iree-version"
_HASH_CHUNK = 16 << 20
_HASH_PREFIX = 12  # hex digits of a sha256 shown in messages
_IREE_COMPILER = "iree-base-compiler"


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
    # generation models (LLMs): the decoder's configuration, its prefill/decode entry points, the
    # KV cache layout, the tokenizer member and chat template (frontend/llm/frontend.py)
    generation: Optional[dict] = None
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
            "tuning_db": self.tuning_db, "generation": self.generation,
            "members": self.members, "notes": self.notes,
        }

    @classmethod
    def from_json(cls, d: dict, path: str = "artifact") -> "Manifest":
        """Parse a manifest read from `path` (named in errors); refuses other formats and versions."""
        if d.get("format") != FORMAT:
            raise ArtifactError(f"{path}: not an inferx artifact manifest (format={d.get('format')!r})")
        if d.get("format_version") not in READ_FORMAT_VERSIONS:
            from inferx_compiler.versions import __version__

            raise ArtifactError(
                f"{path}: artifact format version {d.get('format_version')} is not supported by this "
                f"inferx-compiler {__version__} (it reads format versions "
                f"{', '.join(map(str, READ_FORMAT_VERSIONS))}); rebuild the "
                f"artifact with it: {rebuild_command(d.get('target'), path)}")
        return cls(model=d["model"], target=d["target"], compiler=d["compiler"],
                   iree_flags=d["iree_flags"], pipeline=d["pipeline"],
                   inputs=[TensorSpec.from_json(s) for s in d["inputs"]],
                   outputs=[TensorSpec.from_json(s) for s in d["outputs"]],
                   entry_function=d["entry_function"], output_entry_function=d.get("output_entry_function"),
                   executable=d["executable"],
                   module=d["module"], weights=d.get("weights"),
                   precision_plan=d.get("precision_plan"), batch_buckets=d.get("batch_buckets"),
                   functions=d.get("functions", []), tuning_db=d.get("tuning_db"),
                   generation=d.get("generation"), members=d.get("members", {}),
                   notes=d.get("notes", []))


def rebuild_command(target, out: str = "OUT") -> str:
    """The command that rebuilds an artifact for `target` (a manifest's target dict)."""
    name = target.get("name") if isinstance(target, dict) else None
    return f"inferx-compile MODEL --target {name or 'TARGET'} -o {out}"


def write_parameter_archive(weights: dict[str, np.ndarray], path: str) -> None:
    import iree.runtime as rt

    index = rt.ParameterIndex()
    for key, array in weights.items():
        index.add_buffer(key, np.ascontiguousarray(array))
    index.create_archive_file(path)


def sha256_file(path: str) -> str:
    """A file's sha256, read in 4 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def write_artifact(out_path: str, manifest: Manifest, module_bytes: bytes,
                   weights: dict[str, np.ndarray], report: dict, extra_members: Optional[dict] = None) -> None:
    """Write the artifact atomically (temp file in the same folder, then rename). `extra_members`:
    name -> bytes of further members (a generation model's tokenizer.json)."""
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
        for name, data in sorted((extra_members or {}).items()):
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(data)
            members.append((name, path))
        manifest.members = {name: sha256_file(p) for name, p in members}
        manifest_bytes = json.dumps(manifest.to_json(), indent=1, sort_keys=True).encode()
        partial = out_path + ".partial"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED) as zf:
            _write_member(zf, MANIFEST, data=manifest_bytes)
            for name, path in members:
                if name == WEIGHTS:
                    _write_member(zf, name, path=path, align=True)
                else:
                    with open(path, "rb") as f:
                        _write_member(zf, name, data=f.read())
        os.replace(partial, out_path)


def _write_member(zf: zipfile.ZipFile, name: str, *, data: bytes = None, path: str = None,
                  align: bool = False) -> None:
    """`data` deflated, or the file at `path` stored (`align`: its data on a 4 KiB boundary)."""
    info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    info.create_system = 3
    if align:
        header_end = zf.fp.tell() + 30 + len(name.encode())
        pad = (-(header_end + 4)) % _ALIGN
        info.extra = struct.pack("<HH", _ALIGN_EXTRA_ID, pad) + b"\0" * pad
    if data is not None:
        zf.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=_DEFLATE_LEVEL)
        return
    info.file_size = os.path.getsize(path)
    with open(path, "rb") as src, zf.open(info, "w", force_zip64=info.file_size > 2**31) as dst:
        for chunk in iter(lambda: src.read(1 << 22), b""):
            dst.write(chunk)


class _DamagedMember(ArtifactError):
    """A deflated member that does not decompress; `problem` says which (without the path)."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.problem = problem


class ArtifactVerificationWarning(UserWarning):
    """An artifact was run with part of its integrity check skipped (see `VerifyPolicy`)."""


@dataclass(frozen=True)
class VerifyPolicy:
    """How much the runtime checks an artifact before running it (module docstring: what).

    Written as a string: one level, optionally joined with ",ignore-iree-version":
        all            hash every member (the default)
        skip-weights   hash every member but the weights: for very large weights, where
                       hashing costs about 0.8 s per GB (a 100 MB weights member: 80 ms from
                       the page cache, 90-190 ms just after evicting the file from it; about
                       1.2 GB/s on one core of the 2-core Xeon VM this was built on, which has
                       SHA extensions; slower without them). A process hashes an unchanged file
                       once: further loads of it (serving instances) reuse the result.
        none           hash nothing
    Every level refuses members missing from the zip or not in the manifest (no hashing
    needed); members left unhashed are named in an `ArtifactVerificationWarning`.
    "ignore-iree-version" runs a module compiled by another IREE release than the installed
    runtime, with a warning: for a runtime known to read it (a source build of the same
    release, whose version string differs); a module IREE cannot read then fails when loaded.
    The caller's `verify` wins; without one, $INFERX_VERIFY_ARTIFACT; without it, "all".
    """

    level: str = "all"
    ignore_iree_version: bool = False

    @classmethod
    def parse(cls, spec: Optional[str] = None) -> "VerifyPolicy":
        """The policy the caller's `spec` names, else $INFERX_VERIFY_ARTIFACT's, else the default."""
        source = "verify"
        if spec is None:
            spec, source = os.environ.get(VERIFY_ENV) or "all", VERIFY_ENV
        words = [w.strip() for w in spec.split(",") if w.strip()]
        levels = [w for w in words if w in VERIFY_LEVELS]
        unknown = [w for w in words if w not in VERIFY_LEVELS and w != IGNORE_IREE_VERSION]
        if unknown or len(levels) > 1:
            raise ArtifactError(
                f"{source}={spec!r}: expected one of {', '.join(VERIFY_LEVELS)}, optionally followed "
                f"by ',{IGNORE_IREE_VERSION}'")
        return cls(levels[0] if levels else "all", IGNORE_IREE_VERSION in words)


# (device, inode, size, mtime, ctime) of an artifact file -> members whose sha256 matched, so
# a file loaded again unchanged (serving instances: one load each) is not hashed again. A write
# in place within one file-timestamp tick (a few ms) of a check goes unseen; a write in place
# after a load is not seen by that load either, which runs from the mapped file.
_VERIFIED: dict[tuple, frozenset] = {}


def open_for_running(path: str, verify: Optional[str] = None) -> "Artifact":
    """Open an artifact to run it: refuse it if its IREE version differs from the installed
    runtime's or its members differ from the manifest, as `verify` (see `VerifyPolicy`) says."""
    policy = VerifyPolicy.parse(verify)
    artifact = Artifact(path)
    try:
        artifact.check_iree_version(policy.ignore_iree_version)
        artifact.verify_members(policy.level)
    except BaseException:
        artifact.close()  # a refused artifact leaves no open file behind
        raise
    return artifact


def _sha256_view(view: memoryview) -> str:
    """sha256 of a member's bytes, fed from the memory map in slices (no copies)."""
    h = hashlib.sha256()
    for start in range(0, len(view), _HASH_CHUNK):
        h.update(view[start:start + _HASH_CHUNK])
    return h.hexdigest()


class Artifact:
    """A read-only view of an `.ixa` file; members are served from one memory map."""

    def __init__(self, path: str):
        self.path = path
        if not os.path.isfile(path):
            raise ArtifactError(f"{path}: no such artifact file")
        self._file = open(path, "rb")  # one open file: the zip directory, the map and its identity agree
        try:
            self._zip = zipfile.ZipFile(self._file)
            self.manifest = Manifest.from_json(json.loads(self._zip.read(MANIFEST)), path)
        except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as e:
            self._file.close()
            raise ArtifactError(f"{path}: not an inferx artifact ({e})") from None
        except ArtifactError:
            self._file.close()
            raise
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        self._inflated: dict[str, bytes] = {}  # deflated members, decompressed

    def member_view(self, name: str) -> memoryview:
        """A stored member's bytes, zero-copy from the memory map; a deflated member's,
        decompressed (once: kept for the artifact's life)."""
        try:
            info = self._zip.getinfo(name)
        except KeyError:
            raise ArtifactError(f"{self.path}: artifact has no member '{name}'") from None
        if info.compress_type != zipfile.ZIP_STORED:
            if name not in self._inflated:
                try:
                    self._inflated[name] = self._zip.read(name)
                except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as e:
                    raise _DamagedMember(self.path, f"member '{name}' is damaged: it does not decompress "
                                                    f"to the bytes that were stored ({e})") from None
            return memoryview(self._inflated[name])
        offset = info.header_offset
        name_len, extra_len = struct.unpack("<HH", self._map[offset + 26:offset + 30])
        start = offset + 30 + name_len + extra_len
        return memoryview(self._map)[start:start + info.file_size]

    def read(self, name: str) -> bytes:
        return bytes(self.member_view(name))

    def close(self) -> None:
        """Release the file and, once no view of it is held, the map."""
        try:
            self._map.close()
        except BufferError:
            pass  # a view is still out there: the map goes with the last of them
        self._zip.close()
        self._file.close()

    @property
    def report(self) -> dict:
        return json.loads(self.read(REPORT))

    def rebuild_hint(self) -> str:
        """The command that rebuilds this artifact."""
        return rebuild_command(self.manifest.target, self.path)

    def check_iree_version(self, ignore: bool = False) -> None:
        """Refuse a module compiled by another IREE release than the installed runtime (warn
        instead when `ignore`)."""
        built = self.manifest.compiler.get(_IREE_COMPILER)
        installed = installed_iree_runtime()
        if not self.manifest.executable or built == installed:
            return
        if built in (None, "not installed"):
            warnings.warn(f"{self.path}: the manifest records no IREE compiler version; "
                          f"cannot check that IREE runtime {installed} reads its module",
                          ArtifactVerificationWarning, stacklevel=3)
            return
        message = (f"{self.path}: {self.manifest.module} was compiled by IREE {built} ({_IREE_COMPILER}) "
                   f"but the installed IREE runtime is {installed}, and IREE does not guarantee that "
                   f"a module from one release runs on another")
        if ignore:
            warnings.warn(f"{message}; running it anyway ({IGNORE_IREE_VERSION})",
                          ArtifactVerificationWarning, stacklevel=3)
            return
        raise ArtifactError(
            f"{message}. Rebuild it with this installation ({self.rebuild_hint()}), or install "
            f"the runtime it was built for (pip install iree-base-runtime=={built}); to try it "
            f"anyway: {VERIFY_ENV}={IGNORE_IREE_VERSION}")

    def verify_members(self, level: str = "all") -> None:
        """Refuse the artifact unless its members are exactly the manifest's and (at `level`,
        see `VerifyPolicy`) each one's sha256 matches; warn naming the members not hashed."""
        skipped = self._unhashed_members(level)
        problems = self._member_list_problems()
        if not problems:
            problems = self._hash_problems([n for n in sorted(self.manifest.members) if n not in skipped])
        if problems:
            raise ArtifactError(
                f"{self.path}: the artifact is corrupt or was modified after it was built:\n"
                + "".join(f"  {p}\n" for p in problems)
                + f"Rebuild it ({self.rebuild_hint()}) or download it again.")
        if skipped:
            warnings.warn(f"{self.path}: integrity not checked for member(s) {', '.join(sorted(skipped))} "
                          f"({VERIFY_ENV}/verify={level})", ArtifactVerificationWarning, stacklevel=3)

    def _unhashed_members(self, level: str) -> set[str]:
        """The listed members that `level` leaves unhashed."""
        if level == "none":
            return set(self.manifest.members)
        if level == "skip-weights" and self.manifest.weights:
            return {self.manifest.weights["member"]} & set(self.manifest.members)
        return set()

    def _member_list_problems(self) -> list[str]:
        """Members listed but absent, present but not listed, or stored twice."""
        names = Counter(self._zip.namelist())
        listed = set(self.manifest.members)
        present = set(names) - {MANIFEST}
        return ([f"member '{n}' is listed in the manifest but missing from the zip" for n in sorted(listed - present)]
                + [f"member '{n}' is in the zip but not listed in the manifest" for n in sorted(present - listed)]
                + [f"member '{n}' is stored {c} times" for n, c in sorted(names.items()) if c > 1])

    def _hash_problems(self, names: list[str]) -> list[str]:
        """Of these members, the ones whose sha256 differs from the manifest's."""
        identity = self._file_identity()
        done = _VERIFIED.get(identity, frozenset())
        problems, ok = [], set()
        for name in names:
            if name in done:
                continue
            expected = str(self.manifest.members[name])
            try:
                actual = _sha256_view(self.member_view(name))
            except _DamagedMember as e:
                problems.append(e.problem)
                continue
            if actual == expected:
                ok.add(name)
            else:
                problems.append(f"member '{name}': sha256 {actual[:_HASH_PREFIX]}... but the manifest "
                                f"expects {expected[:_HASH_PREFIX]}...")
        _VERIFIED[identity] = done | ok
        return problems

    def _file_identity(self) -> tuple:
        """What changes when the open file is replaced or written to."""
        st = os.fstat(self._file.fileno())
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
