"""`inferx-compile --tune`: measure knobs and dispatch configurations on the build machine.

    1. data tiling: build with IREE's data tiling on and off, time every static-shape function
       end to end (iree-benchmark-module, as many threads as the target has cores, the way the
       artifact will run); keep the faster (it depends on the model: BERT-lite 3.1 vs 5.0 ms
       with it, a small ResNet 1.34 vs 1.12 ms without, one thread).
    2. dispatch configurations: with that choice, build once per candidate index k = 1, 2, ...
       (`inferx-dispatch-config{candidate=k}`: every dispatch the target-width rules model gets
       its k-th proposal); time each dispatch run under host-execution profiling; per dispatch
       signature keep the fastest candidate if it beats IREE's own by MIN_GAIN.
    3. guard: build with the result and time it end to end against the untuned build of step 1;
       when the configurations do not make the whole call MIN_GAIN_E2E faster, they are
       recorded as "IREE's own" (a per-dispatch measurement in a full model can mislead).
All of it goes into the tuning database (tuning_db.py), which the final build reads. K
candidates cost K + 3 builds whatever the number of dispatches. CPU targets only: the build
machine must run the code.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

from . import tuning_db
from .errors import InferXError, PipelineError
from .log import BuildLog

MIN_GAIN = 0.05  # a candidate must be this much faster than IREE's choice, per dispatch run
MIN_GAIN_E2E = 0.02  # ... and the tuned build this much faster end to end


@dataclasses.dataclass
class _Build:
    path: str
    result: object  # CompileResult

    def functions(self) -> list[dict]:
        return self.result.manifest.functions


def tune(model_path: str, options, log: BuildLog, db_path: str) -> dict:
    """Measure; merge the findings into the database at `db_path`; returns a summary."""
    from .onnx_frontend import load_model
    from .targets import get_target

    target = get_target(options.target)
    if target.backend != "llvm-cpu" or target.name != "cpu":
        raise InferXError(f"--tune measures on the build machine: it needs --target cpu, not '{target.name}'")
    if options.dynamic_only:
        raise InferXError("--tune times the static-shape functions: it cannot be used with --dynamic-only")
    _, model_sha = load_model(model_path)
    key = tuning_db.target_key(target)
    base = dataclasses.replace(options, tuning_db=None, tuning_candidate=0, measure_buckets=False)
    workdir = tempfile.mkdtemp(prefix="inferx-tune-")
    db = tuning_db.load_or_empty(db_path)

    builds = {dt: _build(model_path, dataclasses.replace(base, data_tiling=dt), workdir, f"dt-{dt}")
              for dt in (True, False)}
    threads = target.cores or 1
    ms = {dt: _end_to_end_ms(b, threads) for dt, b in builds.items() if b is not None}
    if not ms:
        raise InferXError("--tune: the model builds neither with nor without data tiling")
    data_tiling = min(ms, key=ms.get)
    measured = ", ".join(f"{_on_off(k)} {v:.3f} ms" for k, v in ms.items())
    log.step(f"tune: {_bar(1, 3)} data tiling {_on_off(data_tiling)} ({measured})")
    chosen = dataclasses.replace(base, data_tiling=data_tiling)
    reports, times = {0: builds[data_tiling].result.dispatches}, {0: _dispatch_times(builds[data_tiling])}
    total = 1 + max([d.get("candidates", 0) for d in reports[0]] or [0])
    for k in range(1, total):
        build = _build(model_path, dataclasses.replace(chosen, tuning_candidate=k), workdir, f"candidate-{k}")
        if build is None:
            log.warn(f"tune: candidate {k} does not build; skipped")
            continue
        reports[k], times[k] = build.result.dispatches, _dispatch_times(build)
        log.step(f"tune: {_bar(1 + k / total, 3)} candidate {k}/{total - 1} timed")
    chosen_configs = _choose(db, key, times, reports)

    guard_db = os.path.join(workdir, "guard.json")
    tuning_db.save(db, guard_db)
    tuned_ms = ms[data_tiling]
    if chosen_configs:
        tuned = _build(model_path, dataclasses.replace(chosen, tuning_db=guard_db), workdir, "tuned")
        tuned_ms = _end_to_end_ms(tuned, threads) if tuned is not None else float("inf")
        if tuned_ms > (1 - MIN_GAIN_E2E) * ms[data_tiling]:
            log.step(f"tune: the configurations do not speed the whole call up ({tuned_ms:.3f} vs "
                     f"{ms[data_tiling]:.3f} ms): IREE's own are kept")
            for sig in chosen_configs:
                entry = tuning_db.lookup(db, key, sig)
                entry.update(config=None, candidate=0, us=entry["iree_us"])
            tuned_ms = ms[data_tiling]
    tuning_db.record_model(db, key, model_sha, {
        "data_tiling": data_tiling, "ms": {_on_off(k): round(v, 4) for k, v in ms.items()},
        "tuned_ms": round(tuned_ms, 4), "configs": len(chosen_configs)})
    tuning_db.save(db, db_path)
    log.step(f"tune: {_bar(3, 3)} {ms[data_tiling]:.3f} -> {tuned_ms:.3f} ms per call of the static "
             f"functions ({threads} thread(s)); database {db_path}")
    return {"data_tiling": data_tiling, "ms": ms, "tuned_ms": tuned_ms, "configs": len(chosen_configs)}


def _build(model_path: str, options, workdir: str, name: str):
    from .driver import compile_onnx_file, write_result

    try:
        result = compile_onnx_file(model_path, options, BuildLog(quiet=True))
    except PipelineError:
        return None
    path = os.path.join(workdir, f"{name}.ixa")
    write_result(result, path)
    return _Build(path, result)


def _end_to_end_ms(build: _Build, threads: int) -> float:
    from .profiling import benchmark_function

    return sum(benchmark_function(build.path, f["name"], f["dims"], threads=threads) for f in build.functions())


def _dispatch_times(build: _Build) -> dict[str, float]:
    """Signature -> mean us per dispatch run, over every static-shape function."""
    from .profiling import executable_of, profile_dispatches

    signatures = {d["dispatch"]: d.get("signature", "") for d in build.result.dispatches}
    times: dict[str, float] = {}
    for fn in build.functions():
        profiled = profile_dispatches(build.path, fn["name"], fn["dims"], threads=1)
        for export, us in profiled.us_per_run.items():
            sig = signatures.get(executable_of(export, list(signatures)), "")
            if sig:
                times[sig] = max(times.get(sig, 0.0), us)
    return times


def _on_off(flag: bool) -> str:
    return "on" if flag else "off"


def _bar(done: float, total: int, width: int = 20) -> str:
    filled = int(width * done / max(total, 1))
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _choose(db: dict, key: str, measured: dict[int, dict[str, float]], reports: dict[int, list]) -> list[str]:
    """Record per signature the fastest measured configuration; returns those that beat IREE."""
    configs = {k: {d.get("signature"): d.get("config") for d in rows} for k, rows in reports.items()}
    summaries = {d.get("signature"): f"{d['root']} {d['loops']} {d['element_type']}" for d in reports[0]}
    tunable = {d.get("signature") for d in reports[0] if d.get("candidates")}
    kept = []
    for sig in sorted(s for s in tunable if s in measured[0]):
        iree_us = measured[0][sig]
        best_k, best_us = 0, iree_us
        for k in measured:
            if k and sig in measured[k] and configs[k].get(sig) and measured[k][sig] < best_us:
                best_k, best_us = k, measured[k][sig]
        keep = bool(best_k) and best_us <= (1 - MIN_GAIN) * iree_us
        tuning_db.record(db, key, sig, {
            "config": configs[best_k][sig] if keep else None, "candidate": best_k if keep else 0,
            "us": round(best_us if keep else iree_us, 2), "iree_us": round(iree_us, 2),
            "summary": summaries.get(sig, "")})
        if keep:
            kept.append(sig)
    return kept
