"""`inferx-compile --tune`: measure knobs and dispatch configurations on the build machine.

    1. data tiling: build with IREE's data tiling on and off, time every static-shape function
       end to end (iree-benchmark-module, as many threads as the target has cores, the way the
       artifact will run); keep the faster (it depends on the model: BERT-lite 3.1 vs 5.0 ms
       with it, a small ResNet 1.34 vs 1.12 ms without, one thread).
    2. the data-tiled matmul tile budget (`--iree-llvmcpu-matmul-tile-bytes`, a process-wide
       IREE option: these builds run IREE in a child interpreter): where data tiling won, build
       with the target's budget and TILE_BUDGET_FACTORS times it, time end to end, keep the
       faster (it depends on the model: an 8x4096^2 MLP at batch 64 233 vs 152 ms with 4x
       IREE's default, BERT-base at batch 8 1433 vs 1638 ms, on a 2-core Zen 3).
    3. dispatch configurations: with those choices, build once per candidate index k = 1, 2, ...
       (`inferx-dispatch-config{candidate=k}`: every dispatch the target-width rules model gets
       its k-th proposal); time each dispatch run under host-execution profiling; per dispatch
       signature keep the fastest candidate if it beats IREE's own by MIN_GAIN.
    4. guard: build with the result and time it end to end against the untuned build of step 1;
       when the configurations do not make the whole call MIN_GAIN_E2E faster, they are
       recorded as "IREE's own" (a per-dispatch measurement in a full model can mislead).
All of it goes into the tuning database (tuning_db.py), which the final build reads. K
candidates cost K + 4 builds whatever the number of dispatches. CPU targets only: the build
machine must run the code.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import tempfile

from inferx_compiler.tuning import tuning_db
from inferx_compiler.errors import InferXError, PipelineError
from inferx_compiler.log import BuildLog, progress_bar

MIN_GAIN = 0.05  # a candidate must be this much faster than IREE's choice, per dispatch run
MIN_GAIN_E2E = 0.02  # ... and the tuned build this much faster end to end (also: a tile budget)
TILE_BUDGET_FACTORS = (4,)  # tile budgets tried beside the target's own, as multiples of it
STEPS = 4


@dataclasses.dataclass
class _Build:
    path: str
    result: object  # CompileResult

    def functions(self) -> list[dict]:
        return self.result.manifest.functions


def tune(model_path: str, options, log: BuildLog, db_path: str) -> dict:
    """Measure; merge the findings into the database at `db_path`; returns a summary."""
    from inferx_compiler.frontend.onnx_import import load_model
    from inferx_compiler.build import resolve_build

    target = resolve_build(options).target
    if target.backend != "llvm-cpu" or target.name != "cpu":
        raise InferXError(f"--tune measures on the build machine: it needs --target cpu (or a Hopper GPU "
                          f"target where that GPU is), not '{target.name}'")
    if options.dynamic_only:
        raise InferXError("--tune times the static-shape functions: it cannot be used with --dynamic-only")
    _, model_sha = load_model(model_path)
    key = tuning_db.target_key(target)
    base = dataclasses.replace(options, tuning_db=None, tuning_candidate=0, measure_buckets=False)
    workdir = tempfile.mkdtemp(prefix="inferx-tune-")
    db = tuning_db.load_or_empty(db_path)
    as_read = copy.deepcopy(db)

    builds = {dt: _build(model_path, dataclasses.replace(base, data_tiling=dt), workdir, f"dt-{dt}")
              for dt in (True, False)}
    threads = target.cores or 1
    ms = {dt: _end_to_end_ms(b, threads) for dt, b in builds.items() if b is not None}
    if not ms:
        raise InferXError("--tune: the model builds neither with nor without data tiling")
    data_tiling = min(ms, key=ms.get)
    measured = ", ".join(f"{_on_off(k)} {v:.3f} ms" for k, v in ms.items())
    log.step(f"tune: {progress_bar(1, STEPS)} data tiling {_on_off(data_tiling)} ({measured})")
    chosen = dataclasses.replace(base, data_tiling=data_tiling)
    best, budget_ms = builds[data_tiling], {}
    if data_tiling:
        budget, best, budget_ms = _tune_tile_budget(model_path, chosen, target, builds[True], ms[True],
                                                    workdir, threads, log)
        chosen = dataclasses.replace(chosen, matmul_tile_bytes=budget)
    untuned_ms = budget_ms[chosen.matmul_tile_bytes] if budget_ms else ms[data_tiling]
    reports, times = {0: best.result.dispatches}, {0: _dispatch_times(best)}
    total = 1 + max([d.get("candidates", 0) for d in reports[0]] or [0])
    for k in range(1, total):
        build = _build(model_path, dataclasses.replace(chosen, tuning_candidate=k), workdir, f"candidate-{k}")
        if build is None:
            log.warn(f"tune: candidate {k} does not build; skipped")
            continue
        reports[k], times[k] = build.result.dispatches, _dispatch_times(build)
        log.step(f"tune: {progress_bar(2 + k / total, STEPS)} candidate {k}/{total - 1} timed")
    chosen_configs = _choose(db, key, times, reports)

    guard_db = os.path.join(workdir, "guard.json")
    tuning_db.save(db, guard_db)
    tuned_ms = untuned_ms
    if chosen_configs:
        tuned = _build(model_path, dataclasses.replace(chosen, tuning_db=guard_db), workdir, "tuned")
        tuned_ms = _end_to_end_ms(tuned, threads) if tuned is not None else float("inf")
        if tuned_ms > (1 - MIN_GAIN_E2E) * untuned_ms:
            log.step(f"tune: the configurations do not speed the whole call up ({tuned_ms:.3f} vs "
                     f"{untuned_ms:.3f} ms): IREE's own are kept")
            for sig in chosen_configs:
                entry = tuning_db.lookup(db, key, sig)
                entry.update(config=None, candidate=0, us=entry["iree_us"])
            tuned_ms = untuned_ms
    model_entry = {"data_tiling": data_tiling, "ms": {_on_off(k): round(v, 4) for k, v in ms.items()},
                   "tuned_ms": round(tuned_ms, 4), "configs": len(chosen_configs)}
    if budget_ms:
        model_entry["matmul_tile_bytes"] = chosen.matmul_tile_bytes
        model_entry["tile_bytes_ms"] = {str(b): round(v, 4) for b, v in budget_ms.items()}
    tuning_db.record_model(db, key, model_sha, model_entry)
    tuning_db.save_changes(db_path, as_read, db)
    log.step(f"tune: {progress_bar(STEPS, STEPS)} {ms[data_tiling]:.3f} -> {tuned_ms:.3f} ms per call of the static "
             f"functions ({threads} thread(s)); database {db_path}")
    return {"data_tiling": data_tiling, "ms": ms, "matmul_tile_bytes": chosen.matmul_tile_bytes,
            "tile_bytes_ms": budget_ms, "tuned_ms": tuned_ms, "configs": len(chosen_configs)}


def _tune_tile_budget(model_path: str, options, target, own: _Build, own_ms: float, workdir: str,
                      threads: int, log: BuildLog) -> tuple[int, _Build, dict[int, float]]:
    """(budget, its build, {budget: ms measured}): the fastest over the target's matmul tile
    budget (`own`, measured `own_ms`) and TILE_BUDGET_FACTORS times it; another budget must be
    MIN_GAIN_E2E faster than the best before it."""
    from inferx_compiler.targets import matmul_tile_bytes_for

    own_budget = target.matmul_tile_bytes or matmul_tile_bytes_for(target.l2_bytes)
    times, best = {own_budget: own_ms}, (own_budget, own)
    for factor in TILE_BUDGET_FACTORS:
        budget = own_budget * factor
        build = _build(model_path, dataclasses.replace(options, matmul_tile_bytes=budget), workdir, f"tiles-{budget}")
        if build is None:
            log.warn(f"tune: matmul tile budget {budget // 1024} KiB does not build; skipped")
            continue
        times[budget] = _end_to_end_ms(build, threads)
        if times[budget] <= (1 - MIN_GAIN_E2E) * times[best[0]]:
            best = (budget, build)
    measured = ", ".join(f"{b // 1024} KiB {v:.3f} ms" for b, v in times.items())
    log.step(f"tune: {progress_bar(2, STEPS)} matmul tile budget {best[0] // 1024} KiB ({measured})")
    return best[0], best[1], times


def _build(model_path: str, options, workdir: str, name: str):
    from inferx_compiler.driver import compile_onnx_file, write_result

    try:
        result = compile_onnx_file(model_path, options, BuildLog(quiet=True))
    except PipelineError:
        return None
    path = os.path.join(workdir, f"{name}.ixa")
    write_result(result, path)
    return _Build(path, result)


def _end_to_end_ms(build: _Build, threads: int) -> float:
    from inferx_compiler.tuning.profiling import benchmark_function

    return sum(benchmark_function(build.path, f["name"], f["dims"], threads=threads) for f in build.functions())


def _dispatch_times(build: _Build) -> dict[str, float]:
    """Signature -> mean us per dispatch run, over every static-shape function."""
    from inferx_compiler.tuning.profiling import executable_of, profile_dispatches

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
