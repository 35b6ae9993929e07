"""`--tune` for Hopper targets (inferx_compiler/tuning/cuda_tuning.py): the build-machine half and the
database's way into the build.

No GPU here: `--tune-prepare` is checked for the forms and candidates it writes (each candidate a
function of a CUDA module, its configuration forced on the matmul), the choice of winners from
measurements for its rules, and a build with a database for the kernels the database names. The
measuring half runs on the H200 (docs/bench/2026-12-02-h200-tune/: every candidate's output is
checked against IREE's own code there before it is timed).
"""

from __future__ import annotations

import json
import os
import zipfile

import pytest

from e2e_models import mlp
from helpers import save
from inferx_compiler.tuning import cuda_tuning
from inferx_compiler.tuning import tuning_db
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.cli.tune import main as tune_main

pytest.importorskip("triton")

# 64 rows: the b64 function's two layers take the kernel (b1 is a matrix-vector shape)
LAYERS = {"inferx-hopper-matmul|64x1024x256|f16|AB", "inferx-hopper-matmul|64x640x1024|f16|AB"}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return save(mlp(d_in=256, hidden=1024, d_out=640), tmp_path_factory.mktemp("tune") / "mlp.onnx")


@pytest.fixture(scope="module")
def prepared(model, tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("prepared"))
    assert compile_main([model, "--target", "h200", "--precision", "fp16", "--batch-sizes", "1,64",
                         "--tune-prepare", directory, "-q"]) == 0
    return directory


def _index(directory: str) -> dict:
    with open(os.path.join(directory, "index.json")) as f:
        return json.load(f)


def test_prepare_writes_a_module_of_candidates_per_form(prepared):
    import iree.runtime as rt

    index = _index(prepared)
    assert index["target"] == "h200" and index["target_key"] == "h200:sm_90"
    assert {f["signature"] for f in index["forms"]} == LAYERS
    for form in index["forms"]:
        candidates = form["candidates"]
        assert candidates[0] == "iree" and form["rule"] in candidates and len(set(candidates)) == len(candidates)
        assert "64x64" in candidates and "128x256" not in candidates  # no tile twice the 64 rows
        with open(os.path.join(prepared, form["vmfb"]), "rb") as f:
            data = f.read()
        names = rt.VmModule.copy_buffer(rt.VmInstance(), data).function_names
        assert {f"c{i}" for i in range(len(candidates))} <= set(names), names
        # one sm_90a kernel per Triton candidate (IREE's own code is the first function)
        assert data.count(b".target sm_90a") == len(candidates) - 1


def test_prepare_adds_only_new_forms_and_keeps_its_target(model, prepared, capfd):
    before = _index(prepared)
    assert compile_main([model, "--target", "h200", "--precision", "fp16", "--batch-sizes", "64",
                         "--tune-prepare", prepared]) == 0
    assert _index(prepared) == before
    assert "0 new matmul form(s)" in capfd.readouterr().err
    assert compile_main([model, "--target", "h100", "--precision", "fp16", "--batch-sizes", "64",
                         "--tune-prepare", prepared]) != 0
    assert "holds measurements prepared for 'h200', not 'h100'" in capfd.readouterr().err


def _measured(form: dict, us: dict) -> dict:
    return {**form, "us": us, "errors": {c: 0.0 for c in us}}


def test_record_keeps_the_rule_unless_a_candidate_is_clearly_faster(prepared):
    forms = {f["signature"]: f for f in _index(prepared)["forms"]}
    first, second = (forms[s] for s in sorted(LAYERS))
    rule1, rule2 = first["rule"], second["rule"]
    other1 = next(c for c in first["candidates"] if c not in ("iree", rule1))
    db = tuning_db.empty()
    changed = cuda_tuning.record(db, "h200:sm_90", [
        _measured(first, {"iree": 20.0, rule1: 10.0, other1: 9.7}),  # 3% faster: within the noise margin
        _measured(second, {"iree": 7.0, rule2: 10.0}),  # IREE's own code 30% faster
    ])
    entries = db["entries"]["h200:sm_90"]
    assert entries[first["signature"]]["config"] == rule1 and entries[first["signature"]]["us"] == 10.0
    assert entries[second["signature"]]["config"] == "iree" and changed == [second["signature"]]
    assert entries[second["signature"]]["measured"] == {"iree": 7.0, rule2: 10.0}
    # a candidate whose output was wrong is absent from "us" and cannot win
    db = tuning_db.empty()
    cuda_tuning.record(db, "h200:sm_90", [_measured(first, {"iree": 20.0, rule1: 10.0})])
    assert db["entries"]["h200:sm_90"][first["signature"]]["config"] == rule1


def test_the_table_marks_picks_that_differ_from_the_rule(prepared):
    forms = {f["signature"]: f for f in _index(prepared)["forms"]}
    first, second = (forms[s] for s in sorted(LAYERS))
    db = tuning_db.empty()
    cuda_tuning.record(db, "h200:sm_90", [_measured(first, {"iree": 20.0, first["rule"]: 10.0}),
                                          _measured(second, {"iree": 7.0, second["rule"]: 10.0})])
    rows = cuda_tuning.format_table(db, "h200:sm_90", sorted(LAYERS)).splitlines()[2:]
    assert rows[0] == f"| 64x1024x256 f16 | AB | {first['rule']} | 10.0 | {first['rule']} | 10.0 | 20.0 | 2 |"
    assert rows[1] == f"| 64x640x1024 f16 | AB | {second['rule']} | 10.0 | **iree** | 7.0 | 7.0 | 2 |"


def _report(artifact: str) -> dict:
    with zipfile.ZipFile(artifact) as z:
        return {"report": json.loads(z.read("report.json")), "manifest": json.loads(z.read("manifest.json"))}


def test_a_database_entry_reaches_the_kernel_and_the_manifest(model, prepared, tmp_path):
    forms = {f["signature"]: f for f in _index(prepared)["forms"]}
    hidden = forms["inferx-hopper-matmul|64x1024x256|f16|AB"]
    pick = next(c for c in ("64x32", "64x16") if c != hidden["rule"])
    db = tuning_db.empty()
    cuda_tuning.record(db, "h200:sm_90", [_measured(hidden, {"iree": 30.0, hidden["rule"]: 10.0, pick: 5.0})])
    path = str(tmp_path / "h200.tuning.json")
    tuning_db.save(db, path)
    out = str(tmp_path / "tuned.ixa")
    assert compile_main([model, "--target", "h200", "--precision", "fp16", "--batch-sizes", "64", "--no-measure",
                         "--tuning-db", path, "-o", out, "-q"]) == 0
    built = _report(out)
    kernels = {tuple(d["loops"]): d for d in built["report"]["dispatches"]
               if d["root"] == "inferx_matmul (Triton, sm_90a)"}
    tuned, untouched = kernels[(64, 1024, 256)], kernels[(64, 640, 1024)]
    assert tuned["config_source"] == "tuned (inferx-hopper-matmul)"
    assert tuned["config"].startswith(f"tile {pick}x"), tuned
    assert untouched["config_source"] == "rule (inferx-hopper-matmul)"
    assert built["manifest"]["tuning_db"]["entries_used"] == 1
    assert built["manifest"]["tuning_db"]["sha256"] == tuning_db_sha(path)


@pytest.mark.parametrize("tuned_ms, kept", [(0.90, True), (0.99, False)], ids=["faster", "within-2%"])
def test_guard_keeps_picks_only_when_the_model_gets_faster(model, prepared, tmp_path, tuned_ms, kept):
    from inferx_compiler.log import BuildLog
    from inferx_compiler.options import CompileOptions

    forms = {f["signature"]: f for f in _index(prepared)["forms"]}
    hidden = forms["inferx-hopper-matmul|64x1024x256|f16|AB"]
    pick = next(c for c in ("64x32", "64x16") if c != hidden["rule"])
    db = tuning_db.empty()
    changed = cuda_tuning.record(db, "h200:sm_90", [_measured(hidden, {hidden["rule"]: 10.0, pick: 5.0})])
    path = str(tmp_path / "db.json")
    tuning_db.save(db, path)
    timed = {}

    def timer(builds):  # stands in for the GPU: checks what it is given, answers the figures
        for name, artifact in builds.items():
            timed[name] = _report(artifact)["manifest"].get("tuning_db")
        return {"rule": 1.0, "tuned": tuned_ms}

    options = CompileOptions(target="h200", precision="fp16", batch_sizes=(64,), measure_buckets=False)
    assert cuda_tuning.guard(model, options, BuildLog(quiet=True), path, str(tmp_path), changed, timer) is kept
    assert timed["rule"] is None and timed["tuned"]["entries_used"] >= 1  # the two builds the guard compares
    entry = tuning_db.load(path)["entries"]["h200:sm_90"][hidden["signature"]]
    assert entry["config"] == (pick if kept else hidden["rule"])
    assert ("guard" in entry) is not kept
    (model_entry,) = tuning_db.load(path)["models"]["h200:sm_90"].values()
    assert model_entry == {"hopper_rule_ms": 1.0, "hopper_tuned_ms": tuned_ms, "hopper_kept": kept}


def test_end_to_end_timing_calls_every_static_function(tmp_path):
    """The guard's clock, run on CPU builds here (on the GPU host it loads them on "cuda")."""
    path = save(mlp(d_in=32, hidden=64, d_out=8), tmp_path / "small.onnx")
    builds = {}
    for name in ("a", "b"):
        builds[name] = str(tmp_path / f"{name}.ixa")
        assert compile_main([path, "--target", "cpu", "--batch-sizes", "1,4", "--no-measure", "-o", builds[name],
                             "-q"]) == 0
    ms = cuda_tuning.end_to_end_ms(builds, device="cpu")
    assert set(ms) == {"a", "b"} and all(0 < v < 1000 for v in ms.values()), ms


def tuning_db_sha(path: str) -> str:
    import hashlib

    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _has_cuda() -> bool:
    import iree.runtime as rt

    try:
        rt.get_device("cuda")
        return True
    except Exception:
        return False


@pytest.mark.skipif(_has_cuda(), reason="this machine has a CUDA device")
def test_measuring_without_a_gpu_is_a_clear_error(model, prepared, tmp_path, capfd):
    assert tune_main([prepared, "--tuning-db", str(tmp_path / "db.json")]) != 0
    err = capfd.readouterr().err
    assert "measuring the Hopper kernels needs the GPU: no 'cuda' device here" in err and "Traceback" not in err
    assert not os.path.exists(tmp_path / "db.json")
    out = tmp_path / "m.ixa"
    assert compile_main([model, "--target", "h200", "--precision", "fp16", "--tune", "-o", str(out)]) != 0
    assert "--tune-prepare DIR" in capfd.readouterr().err and not out.exists()


def test_a_prepared_directory_missing_a_module_is_named(prepared, tmp_path, capfd):
    import shutil

    copy = tmp_path / "partial"
    shutil.copytree(prepared, copy)
    gone = _index(prepared)["forms"][0]["vmfb"]
    os.remove(copy / gone)
    assert tune_main([str(copy), "--tuning-db", str(tmp_path / "db.json")]) != 0
    err = capfd.readouterr().err
    assert f"1 prepared module(s) missing ({gone} first)" in err and "Traceback" not in err


def test_an_fp32_build_has_nothing_to_tune(model, tmp_path, capfd):
    assert compile_main([model, "--target", "h200", "--batch-sizes", "64", "--tune-prepare", str(tmp_path / "d")]) == 0
    assert "no matmul of this build takes the h200's sm_90a kernels" in capfd.readouterr().err
    assert _index(str(tmp_path / "d"))["forms"] == []


def test_bad_tune_requests(model, tmp_path, capfd):
    assert tune_main([str(tmp_path), "--tuning-db", str(tmp_path / "db.json")]) != 0
    assert "no index.json (prepare it with inferx-compile --tune-prepare" in capfd.readouterr().err
    assert compile_main([model, "--target", "h200", "--tune", "--tune-prepare", str(tmp_path)]) != 0
    assert "give one of them" in capfd.readouterr().err
    assert compile_main([model, "--target", "cpu", "--tune-prepare", str(tmp_path / "x")]) != 0
    assert "needs a Hopper target (h100, h200), not 'cpu'" in capfd.readouterr().err
