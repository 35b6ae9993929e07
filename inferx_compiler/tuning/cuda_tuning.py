"""`--tune` for Hopper GPU targets: measure inferx-hopper-matmul's kernel configurations on the GPU.

The pass picks a tile and split-K factor per matmul by a rule fitted on a few shapes; the fastest
configuration of a given shape is a measurement. Three steps, which can run on two machines
(the build machine has the compiler and Triton, the GPU host only needs iree-base-runtime):

    prepare   (compiler)  lower the model as the build would, up to the pass; collect the matmul
                          forms it would take (shape, element type, operand layouts; sibling
                          groups as the one matmul of their summed width the rule sees); per
                          distinct form write one module with a function per candidate
                          configuration (hopper_matmul.tuning_candidates: IREE's own code, the
                          tiles, split-K), and DIR/index.json. A function computes the product
                          for C copies of the right operand (the weights), enough copies to
                          hold twice the GPU's L2 cache: each product streams its weights from
                          memory as it does in the model (one weight matrix repeated stays in
                          the L2: a first version measured so and picked narrow tiles that were
                          slower in BERT, docs/levers/tuning.md).
    measure   (GPU)       per form: seeded random inputs on the device, each function's output
                          checked against IREE's own (relative L2 within MAX_ERROR, else the
                          candidate is rejected), then WARMUP calls and ROUNDS timed ones; a
                          candidate's time is the median call over C (the call's own cost is
                          shared by the copies: about a microsecond per product).
    record                per signature, in the tuning database under the target's key: the
                          fastest candidate if it beats the rule's pick by MIN_GAIN, else the
                          rule's pick; with every candidate's time (tuning_db.py).
    guard     (--tune, where compiler and GPU are one machine) the model built with and
                          without the new picks, timed end to end; picks that do not make the
                          call MIN_GAIN_E2E faster go back to the rule's.

`inferx-compile M --target h200 --tune` does all three where a CUDA device is present, then
builds with the database. Elsewhere: `inferx-compile M --target h200 --tune-prepare DIR` here,
`inferx-tune measure DIR --tuning-db DB` on the GPU host, `inferx-compile M --target h200
--tuning-db DB` here again. Builds read the database through `inferx-hopper-matmul{tuning-db=}`.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import statistics
import time

from inferx_compiler.tuning import tuning_db
from inferx_compiler.errors import InferXError
from inferx_compiler.log import BuildLog, progress_bar

MIN_COPIES, MAX_COPIES = 8, 64  # weight copies per candidate function (see the module doc)
WARMUP, ROUNDS = 3, 15
MIN_GAIN = 0.05  # a measured configuration must be this much faster than the rule's pick
MIN_GAIN_E2E = 0.02  # ... and the model's call with the measured picks this much faster (guard())
E2E_ROUNDS = 15
MAX_ERROR = 1e-2  # relative L2 against IREE's own code (both accumulate in f32: ~1e-6 apart)
INDEX = "index.json"
INDEX_FORMAT = "inferx-cuda-tuning"


# ----------------------------------------------------------------------------- prepare (compiler)
def prepare(model_path: str, options, log: BuildLog, directory: str) -> list[dict]:
    """Write DIR/index.json and one module per new matmul form of this model (forms already in
    DIR's index, from another model, are kept and not rebuilt); returns the index's forms."""
    from inferx_compiler.build import resolve_build

    target = resolve_build(options).target
    _check_target(target)
    os.makedirs(directory, exist_ok=True)
    index = _load_index(directory, target)
    known = {f["signature"] for f in index["forms"]}
    found = model_forms(model_path, options, target)
    if not found:
        log.warn(f"tune: no matmul of this build takes the {target.name}'s sm_90a kernels (they take static "
                 f"f16/bf16 matmuls: --precision fp16 or bf16, with --batch-sizes for models with a "
                 f"dynamic batch); nothing to measure")
    forms = [f for f in found if _signature(f) not in known]
    log.step(f"tune: {len(forms)} new matmul form(s) for the {target.name}'s kernels "
             f"({len(known)} already prepared in {directory})")
    for i, form in enumerate(forms, 1):
        index["forms"].append(_prepare_form(form, target, directory, log))
        _save_index(directory, index)
        log.step(f"tune: {_bar(i, len(forms))} prepared {_signature(form)} "
                 f"({len(index['forms'][-1]['candidates'])} candidates)")
    _save_index(directory, index)
    return index["forms"]


def model_forms(model_path: str, options, target) -> list:
    """The distinct MatmulForms inferx-hopper-matmul would look up for this build."""
    from iree.compiler import ir

    from inferx_compiler.build_plan import iree_input_pipeline
    from inferx_compiler.driver import compile_onnx_file
    from inferx_compiler.passes.hopper_matmul import HopperMatmul
    from inferx_compiler.passes.infra.pipeline import run_pipeline

    before = dataclasses.replace(options, emit="linalg", tuning_db=None,
                                 disabled_passes=tuple(options.disabled_passes) + (
                                     "inferx-hopper-matmul", "inferx-split-reduction"))
    result = compile_onnx_file(model_path, before, BuildLog(quiet=True))
    with ir.Context():
        module = ir.Module.parse(result.output).operation  # carries the build's inferx.target
        run_pipeline(module, iree_input_pipeline(result.build), "iree", stage="iree-input")
        hopper = HopperMatmul(group=result.build.runs("inferx-hopper-group"))
        return hopper.tuning_forms(module)


def _prepare_form(form, target, directory: str, log: BuildLog) -> dict:
    from inferx_compiler.backend import iree_backend
    from inferx_compiler.build import Build
    from inferx_compiler.build_plan import iree_flags
    from inferx_compiler.options import CompileOptions
    from inferx_compiler.passes.hopper_matmul import tuning_candidates

    sig = _signature(form)
    candidates = tuning_candidates(form, target.cores or 1)
    name = f"form_{form.m}x{form.n}x{form.k}_{hashlib.sha256(sig.encode()).hexdigest()[:8]}"
    flags = iree_flags(Build(request=CompileOptions(target=target.name), target=target))
    copies = weight_copies(form, target)
    pipeline = (f"builtin.module(inferx-set-target{{target={target.name}}},"
                f"inferx-hopper-matmul{{group=false}},inferx-split-reduction)")
    result = iree_backend.compile_module(_module_text(form, candidates, copies).encode(), flags, input_pipeline=pipeline,
                                         dispatch_pipeline="builtin.module(inferx-dispatch-report)",
                                         log=BuildLog(quiet=True))
    with open(os.path.join(directory, name + ".vmfb"), "wb") as f:
        f.write(result.vmfb)
    return {"signature": sig, "form": dataclasses.asdict(form), "vmfb": name + ".vmfb",
            "candidates": candidates, "rule": _rule(form, target), "copies": copies}


def weight_copies(form, target) -> int:
    """How many right operands a candidate's function multiplies: twice the L2 in bytes."""
    weight_bytes = form.k * form.n * 2
    l2 = target.l2_bytes or 50 * 2**20
    return max(MIN_COPIES, min(MAX_COPIES, -(-2 * l2 // weight_bytes)))


def _module_text(form, candidates: list[str], copies: int) -> str:
    """One function per candidate: the zero-initialized matmul of `form` by each of `copies`
    right operands, with its configuration forced on the op (hopper_matmul.CONFIG_ATTR)."""
    from inferx_compiler.passes.hopper_matmul import CONFIG_ATTR

    et = form.element_type
    a = f"tensor<{form.k}x{form.m}x{et}>" if form.a_transposed else f"tensor<{form.m}x{form.k}x{et}>"
    b = f"tensor<{form.n}x{form.k}x{et}>" if form.b_transposed else f"tensor<{form.k}x{form.n}x{et}>"
    out = f"tensor<{form.m}x{form.n}xf32>"
    maps = ", ".join(f"affine_map<(m, n, k) -> ({e})>" for e in (
        "k, m" if form.a_transposed else "m, k", "n, k" if form.b_transposed else "k, n", "m, n"))
    functions = []
    for i, config in enumerate(candidates):
        products = "".join(f"""
  %y{j} = linalg.matmul indexing_maps = [{maps}] {{{CONFIG_ATTR} = "{config}"}}
         ins(%a, %b{j} : {a}, {b}) outs(%init : {out}) -> {out}""" for j in range(copies))
        arguments = ", ".join(f"%b{j}: {b}" for j in range(copies))
        results = ", ".join(f"%y{j}" for j in range(copies))
        functions.append(f"""
func.func @c{i}(%a: {a}, {arguments}) -> ({", ".join([out] * copies)}) {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : {out}
  %init = linalg.fill ins(%zero : f32) outs(%empty : {out}) -> {out}{products}
  return {results} : {", ".join([out] * copies)}
}}""")
    return "".join(functions) + "\n"


def _rule(form, target) -> str:
    from inferx_compiler.passes.hopper_matmul import rule_config, spell_config

    return spell_config(rule_config(form, target.cores or 1))


# ----------------------------------------------------------------------------- measure (GPU host)
def measure(directory: str, log: BuildLog, device_uri: str = "cuda") -> list[dict]:
    """Time every candidate of DIR's index on the GPU; needs only iree-base-runtime and numpy.
    Returns one record per form: its index entry plus "us" {config: us per dispatch} and
    "errors" {config: relative L2 against IREE's own code}."""
    import numpy as np

    index = _load_index(directory, None)
    if not index["forms"]:
        raise InferXError(f"{directory}: no prepared matmul forms (run inferx-compile --tune-prepare first)")
    missing = [f["vmfb"] for f in index["forms"] if not os.path.exists(os.path.join(directory, f["vmfb"]))]
    if missing:
        raise InferXError(f"{directory}: {len(missing)} prepared module(s) missing ({missing[0]} first); "
                          "copy the whole directory, or prepare it again")
    device = _device(device_uri)
    records = []
    for i, entry in enumerate(index["forms"], 1):
        staged = [_to_device(device, x) for x in _inputs(entry, np)]
        functions = _load_functions(device, os.path.join(directory, entry["vmfb"]), len(entry["candidates"]))
        us, errors, reference = {}, {}, None
        for config, fn in zip(entry["candidates"], functions):
            out = np.asarray(fn(*staged)[-1].to_host(), dtype=np.float64)
            if reference is None:  # candidates[0] is IREE's own code
                reference = out
            errors[config] = float(np.linalg.norm(out - reference) / max(np.linalg.norm(reference), 1e-30))
            if not errors[config] <= MAX_ERROR:
                log.warn(f"tune: {entry['signature']} {config}: output off by {errors[config]:.2e} "
                         f"(relative L2 against IREE's): rejected")
                continue
            us[config] = _time(fn, staged) / entry["copies"]
        records.append({**entry, "us": us, "errors": errors})
        best = min(us, key=us.get)
        log.step(f"tune: {_bar(i, len(index['forms']))} {entry['signature']}: fastest {best} "
                 f"{us[best]:.1f} us, rule's {entry['rule']} {us.get(entry['rule'], float('nan')):.1f} us")
    return records


def _device(uri: str):
    try:
        import iree.runtime as rt
    except ImportError:
        raise InferXError("measuring needs iree-base-runtime (pip install iree-base-runtime)") from None
    try:
        return rt.get_device(uri)
    except Exception as e:  # (the runtime raises ValueError/RuntimeError by driver)
        raise InferXError(f"measuring the Hopper kernels needs the GPU: no '{uri}' device here "
                          f"({str(e).splitlines()[0]}); prepare with `inferx-compile MODEL --target T "
                          "--tune-prepare DIR` on the build machine and run `inferx-tune DIR --tuning-db DB` "
                          "where the GPU is") from None


def _inputs(entry: dict, np) -> list:
    """The operands, host side: A, then `copies` right operands (f16, or bf16 bits as uint16)."""
    from inferx_compiler.precision.weight_casts import cast

    form = entry["form"]
    m, n, k = form["m"], form["n"], form["k"]
    rng = np.random.default_rng(0)
    shapes = [(k, m) if form["a_transposed"] else (m, k), (n, k) if form["b_transposed"] else (k, n)]
    arrays = [cast(rng.standard_normal(s).astype(np.float32) / 8, form["element_type"]) for s in shapes]
    # the same values in every copy: what matters is that each copy is its own memory
    return arrays[:1] + arrays[1:] * entry["copies"]


def _to_device(device, x):
    """uint16 arrays are bf16 bits (weight_casts.cast)."""
    import iree.runtime as rt
    import numpy as np

    if x.dtype == np.uint16:
        return rt.asdevicearray(device, x, implicit_host_transfer=True, element_type=rt.HalElementType.BFLOAT_16)
    return rt.asdevicearray(device, x)


def _load_functions(device, path: str, count: int) -> list:
    import iree.runtime as rt

    config = rt.Config(device=device)
    context = rt.SystemContext(config=config)
    with open(path, "rb") as f:
        context.add_vm_module(rt.VmModule.copy_buffer(config.vm_instance, f.read()))
    module = context.modules.module
    return [module[f"c{i}"] for i in range(count)]


def _time(fn, staged) -> float:
    """Median microseconds of one synchronous call (the function waits for its dispatches)."""
    for _ in range(WARMUP):
        fn(*staged)
    samples = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        fn(*staged)
        samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


# ----------------------------------------------------------------------------- record
def record(db: dict, target_key: str, records: list[dict]) -> list[str]:
    """Merge measurements into the database; returns the signatures whose pick is not the rule's."""
    changed = []
    for rec in records:
        us = rec["us"]
        rule = rec["rule"]
        rule_us = us.get(rule)
        best = min(us, key=us.get)
        keep = rule if rule_us is not None and us[best] > (1 - MIN_GAIN) * rule_us else best
        form = rec["form"]
        tuning_db.record(db, target_key, rec["signature"], {
            "config": keep, "us": round(us[keep], 2), "rule": rule,
            "rule_us": round(rule_us, 2) if rule_us is not None else None,
            "iree_us": round(us["iree"], 2) if "iree" in us else None,
            "measured": {c: round(t, 2) for c, t in sorted(us.items())},
            "summary": f"matmul {form['m']}x{form['n']}x{form['k']} {form['element_type']}"})
        if keep != rule:
            changed.append(rec["signature"])
    return changed


def format_table(db: dict, target_key: str, signatures: list[str]) -> str:
    """A markdown table of the database's entries for `signatures`: the rule's pick and the kept
    one with their times, IREE's own code, and how many candidates were timed."""
    lines = ["| matmul | layouts | rule | us | kept | us | IREE us | timed |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for sig in signatures:
        e = tuning_db.lookup(db, target_key, sig)
        _, shape, element, layouts = sig.split("|")
        mark = "**" if e["config"] != e["rule"] else ""
        iree = f"{e['iree_us']:.1f}" if e.get("iree_us") is not None else "-"
        rule_us = f"{e['rule_us']:.1f}" if e.get("rule_us") is not None else "-"
        lines.append(f"| {shape} {element} | {layouts} | {e['rule']} | {rule_us} | {mark}{e['config']}{mark} | "
                     f"{e['us']:.1f} | {iree} | {len(e.get('measured', {}))} |")
    return "\n".join(lines)


def measure_into(directory: str, db_path: str, log: BuildLog, device_uri: str = "cuda") -> dict:
    """measure + record into the database file at `db_path` (created if missing); prints the
    table of what was measured."""
    index = _load_index(directory, None)
    records = measure(directory, log, device_uri)
    db = tuning_db.load_or_empty(db_path)
    as_read = copy.deepcopy(db)
    changed = record(db, index["target_key"], records)
    db = tuning_db.save_changes(db_path, as_read, db)
    if not log.quiet:
        print(format_table(db, index["target_key"], [r["signature"] for r in records]))
    log.step(f"tune: {len(records)} form(s) measured, {len(changed)} differ from the rule's pick; "
             f"database {db_path}")
    return {"forms": len(records), "changed": changed}


def tune(model_path: str, options, log: BuildLog, db_path: str, workdir: str) -> dict:
    """All of it on this machine (it must have the GPU): prepare into `workdir`, measure, record,
    then the end-to-end guard for this model (guard())."""
    from inferx_compiler.build import resolve_build

    _check_target(resolve_build(options).target)
    _device("cuda")  # fail before the builds when there is no GPU here
    prepare(model_path, options, log, workdir)
    summary = measure_into(workdir, db_path, log)
    if summary["changed"]:
        summary["kept"] = guard(model_path, options, log, db_path, workdir, summary["changed"])
    return summary


def guard(model_path: str, options, log: BuildLog, db_path: str, workdir: str, changed: list[str],
          timer=None) -> bool:
    """Build the model with and without the database, time both calls on the GPU (interleaved
    rounds, medians, every static-shape function); unless the database's build is MIN_GAIN_E2E
    faster, the picks in `changed` go back to the rule's, with the figures in the entry (a
    product timed alone does not always predict the model: ResNet-50 b8's im2col products,
    docs/performance-notes.md). Returns whether the picks were kept."""
    from inferx_compiler.build import resolve_build
    from inferx_compiler.frontend.onnx_import import load_model

    timer = timer or end_to_end_ms
    builds = {name: _build_artifact(model_path, dataclasses.replace(options, tuning_db=db), workdir, name)
              for name, db in (("rule", None), ("tuned", db_path))}
    ms = timer(builds)
    kept = ms["tuned"] <= (1 - MIN_GAIN_E2E) * ms["rule"]
    db = tuning_db.load(db_path)
    as_read = copy.deepcopy(db)
    key = tuning_db.target_key(resolve_build(options).target)
    _, model_sha = load_model(model_path)
    tuning_db.record_model(db, key, model_sha, {"hopper_rule_ms": round(ms["rule"], 4),
                                                "hopper_tuned_ms": round(ms["tuned"], 4), "hopper_kept": kept})
    if not kept:
        for sig in changed:
            entry = tuning_db.lookup(db, key, sig)
            entry.update(config=entry["rule"], us=entry["rule_us"],
                         guard=f"not faster end to end ({ms['tuned']:.3f} vs {ms['rule']:.3f} ms)")
    tuning_db.save_changes(db_path, as_read, db)
    log.step(f"tune: end to end {ms['rule']:.3f} ms with the rule's tiles, {ms['tuned']:.3f} with the measured "
             f"ones: {'kept' if kept else 'the rule kept'}")
    return kept


def _build_artifact(model_path: str, options, workdir: str, name: str) -> str:
    from inferx_compiler.driver import compile_onnx_file, write_result

    path = os.path.join(workdir, f"{name}.ixa")
    write_result(compile_onnx_file(model_path, options, BuildLog(quiet=True)), path)
    return path


def end_to_end_ms(builds: dict[str, str], device: str = "cuda") -> dict[str, float]:
    """Median ms of a call of every static-shape function, per build, interleaved rounds."""
    from inferx_compiler.runtime.bench_inputs import random_feeds
    from inferx_compiler.runtime.session import load

    sessions = {name: load(path, device=device) for name, path in builds.items()}
    calls = {}
    for name, sess in sessions.items():
        dims = [f["dims"] for f in sess.artifact.manifest.functions] or [{}]
        feeds = [random_feeds(sess.inputs, next(iter(d.values()), 1), d) for d in dims]
        calls[name] = (lambda s=sess, fs=feeds: [s.run(f) for f in fs])
    samples: dict = {name: [] for name in sessions}
    for _ in range(WARMUP):
        for call in calls.values():
            call()
    for r in range(E2E_ROUNDS):
        for name in (list(calls) if r % 2 == 0 else list(reversed(calls))):
            t0 = time.perf_counter()
            calls[name]()
            samples[name].append((time.perf_counter() - t0) * 1e3)
    return {name: statistics.median(v) for name, v in samples.items()}


# ----------------------------------------------------------------------------- helpers
def _check_target(target) -> None:
    from inferx_compiler.targets import HOPPER_ARCHS

    if target.backend != "cuda" or target.arch not in HOPPER_ARCHS:
        raise InferXError(f"--tune for GPU targets measures inferx-hopper-matmul's kernels: it needs a Hopper "
                          f"target (h100, h200), not '{target.name}'")


def _signature(form) -> str:
    from inferx_compiler.passes.hopper_matmul import form_signature

    return form_signature(form)


def _load_index(directory: str, target) -> dict:
    path = os.path.join(directory, INDEX)
    if not os.path.exists(path):
        if target is None:
            raise InferXError(f"{directory}: no {INDEX} (prepare it with inferx-compile --tune-prepare {directory})")
        return {"format": INDEX_FORMAT, "target": target.name, "target_key": tuning_db.target_key(target),
                "forms": []}
    with open(path) as f:
        index = json.load(f)
    if index.get("format") != INDEX_FORMAT:
        raise InferXError(f"{path}: not an inferx CUDA tuning index")
    if target is not None and index["target"] != target.name:
        raise InferXError(f"{directory} holds measurements prepared for '{index['target']}', not "
                          f"'{target.name}': use another directory")
    return index


def _save_index(directory: str, index: dict) -> None:
    path = os.path.join(directory, INDEX)
    with open(path + ".partial", "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    os.replace(path + ".partial", path)


def _bar(done: int, total: int) -> str:
    return f"{progress_bar(done, total)} {done}/{total}"
