"""--tune, --tuning-db and --explain end to end: measured choices, reproducible tuned builds."""

from __future__ import annotations

import hashlib
import json
import zipfile

import onnx
import pytest

import inferx_compiler
from e2e_models import random_inputs, small_conv_zoo
from helpers import onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.kernels import cpu_objects
from inferx_compiler.targets import get_target


def _member(artifact: str, name: str) -> dict:
    with zipfile.ZipFile(artifact) as z:
        return json.loads(z.read(name))


def _check_numbers(onnx_path: str, artifact: str) -> None:
    feeds = random_inputs(onnx.load(onnx_path), 1, seed=7)
    got = inferx_compiler.load(artifact, device="cpu").run(feeds)["y"]
    assert rel_l2(got, onnxruntime_outputs(onnx_path, feeds)["y"]) <= 1e-4


# The small conv zoo with a batch-2 function: its transposes (to CNHW and back) are dispatches the CPU
# rules propose configurations for (at batch 1 every copy is fused into IREE's packing).
ZOO_BATCHES = ("--batch-sizes", "1,2", "--no-measure")
# On an Intel core with AVX-512 and a C compiler the zoo's 3x3-and-larger convolutions (off
# NCHWc's blocks, or small) go to our f32 kernel's convolution entry (inferx-conv-strategy "kernel")
KERNEL_HERE = get_target("cpu").f32_kernel and cpu_objects.c_compiler()[0] is not None


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    root = tmp_path_factory.mktemp("tune")
    onnx_path = save(small_conv_zoo(), root / "zoo.onnx")
    db, out = str(root / "zoo.tuning.json"), str(root / "tuned.ixa")
    assert compile_main([onnx_path, "--target", "cpu", *ZOO_BATCHES, "--tune", "--tuning-db", db, "-o", out, "-q"]) == 0
    return root, onnx_path, db, out


def test_tune_writes_a_database_and_a_correct_artifact(tuned):
    root, onnx_path, db_path, artifact = tuned
    db = json.load(open(db_path))
    assert db["format"] == "inferx-tuning-db" and db["version"] == 1
    (key, models), = db["models"].items()
    sha = hashlib.sha256(open(onnx_path, "rb").read()).hexdigest()
    model = models[sha]
    assert isinstance(model["data_tiling"], bool) and set(model["ms"]) == {"on", "off"}
    assert model["ms"]["on" if model["data_tiling"] else "off"] == min(model["ms"].values())
    assert ("matmul_tile_bytes" in model) == model["data_tiling"]  # a budget matters to data-tiled builds only
    entries = db["entries"][key]
    assert entries, "the zoo's batch-2 transposes are tunable"
    for entry in entries.values():
        assert entry["iree_us"] > 0 and entry["us"] <= entry["iree_us"]
        assert (entry["config"] is None) == (entry["candidate"] == 0)
    manifest = _member(artifact, "manifest.json")
    assert manifest["tuning_db"]["sha256"] == hashlib.sha256(open(db_path, "rb").read()).hexdigest()
    flags = manifest["iree_flags"]
    assert f"--iree-opt-data-tiling={'true' if model['data_tiling'] else 'false'}" in flags
    _check_numbers(onnx_path, artifact)


def test_tuned_build_is_byte_identical_from_its_database(tuned):
    root, onnx_path, db_path, artifact = tuned
    again = str(root / "again.ixa")
    assert compile_main([onnx_path, "--target", "cpu", *ZOO_BATCHES, "--tuning-db", db_path, "-o", again,
                         "-q"]) == 0
    assert open(again, "rb").read() == open(artifact, "rb").read()


def test_database_configuration_reaches_the_code(tuned, tmp_path):
    """A database entry for a dispatch is attached (source 'tuned') and the numbers stay right."""
    root, onnx_path, _, _ = tuned
    from inferx_compiler.driver import CompileOptions, compile_onnx_file
    from inferx_compiler.log import BuildLog
    from inferx_compiler.tuning import tuning_db
    from inferx_compiler.targets import get_target

    trial = compile_onnx_file(onnx_path, CompileOptions(target="cpu", tuning_candidate=1, data_tiling=True,
                                                        batch_sizes=(1, 2),
                                                        measure_buckets=False), BuildLog(quiet=True))
    picked = next(d for d in trial.dispatches if d.get("config_source") == "candidate 1")
    db = tuning_db.empty()
    tuning_db.record(db, tuning_db.target_key(get_target("cpu")), picked["signature"],
                     {"config": picked["config"], "candidate": 1, "us": 1.0, "iree_us": 2.0, "summary": ""})
    db_path = str(tmp_path / "one.json")
    tuning_db.save(db, db_path)
    out = str(tmp_path / "one.ixa")
    assert compile_main([onnx_path, "--target", "cpu", *ZOO_BATCHES, "--tuning-db", db_path, "-o", out, "-q"]) == 0
    rows = [d for d in _member(out, "report.json")["dispatches"] if d.get("signature") == picked["signature"]]
    assert rows and all(d["config_source"] == "tuned" and d["config"] == picked["config"] for d in rows)
    _check_numbers(onnx_path, out)


def test_explain_prints_decisions_and_dispatches(tuned, capfd):
    root, onnx_path, db_path, _ = tuned
    report = root / "report.json"
    assert compile_main([onnx_path, "--target", "cpu", *ZOO_BATCHES, "--explain", "-q", "--tuning-db", db_path,
                         "--report", str(report), "-o", str(root / "explained.ixa")]) == 0
    written = json.loads(report.read_text())
    assert written["compile_seconds"] > 0 and written["dispatches"] and written["decisions"]
    assert all("root" in d and "config_source" in d for d in written["dispatches"] if not d["dispatch"].startswith("_"))
    out = capfd.readouterr().out
    stem = "kernel" if KERNEL_HERE else "im2col"
    assert "Pass decisions (per ONNX node):" in out and f"| main$b1 | stem7x7_s2 | inferx-conv-strategy | {stem}" in out
    assert "Dispatches (" in out and "| config from |" in out
    assert ("dilation (2, 2), 16->16 channels" if KERNEL_HERE
            else "| main$b1 | c3x3_dilated | inferx-conv-strategy | im2col: 3x3 stride (1, 1)") in out


def test_tune_needs_the_build_machine_target(tmp_path, capfd):
    path = save(small_conv_zoo(), tmp_path / "z.onnx")
    assert compile_main([path, "--target", "x86-avx2", "--tune", "-o", str(tmp_path / "z.ixa")]) != 0
    assert "--tune measures on the build machine: it needs --target cpu" in capfd.readouterr().err
    assert compile_main([path, "--target", "a100", "--tune", "-o", str(tmp_path / "z.ixa")]) != 0
    assert "it needs a Hopper target (h100, h200), not 'a100'" in capfd.readouterr().err


def test_missing_tuning_database_is_an_error(tmp_path, capfd):
    path = save(small_conv_zoo(), tmp_path / "z.onnx")
    assert compile_main([path, "--target", "cpu", "--tuning-db", str(tmp_path / "none.json"),
                         "-o", str(tmp_path / "z.ixa")]) != 0
    assert "no such file (write one with --tune)" in capfd.readouterr().err


@pytest.mark.parametrize("wider_wins", [True, False], ids=["4x-budget-faster", "own-budget-faster"])
def test_tune_keeps_the_faster_matmul_tile_budget(tmp_path, monkeypatch, wider_wins):
    """Where data tiling wins, --tune times the target's matmul tile budget and 4x it and keeps
    the faster: in the database, in the artifact's IREE flags (a build with another budget runs
    IREE in a child interpreter), and in a rebuild from the database. The end-to-end timer is a
    stand-in that decides (real times on a shared machine would make the choice a coin toss);
    the builds, the database and the numbers are real."""
    import os

    from inferx_compiler.tuning import cpu_tuning as tuning
    from inferx_compiler.targets import matmul_tile_bytes_for
    from e2e_models import wide_mlp

    timed = []

    def stand_in_ms(build, threads):
        name = os.path.basename(build.path)
        timed.append(name)
        if name.startswith("dt-"):
            return 10.0 if name == "dt-True.ixa" else 20.0
        if name.startswith("tiles-"):
            return 5.0 if wider_wins else 15.0
        return 100.0  # the guard build: dispatch configurations never win here

    monkeypatch.setattr(tuning, "_end_to_end_ms", stand_in_ms)
    monkeypatch.setenv("INFERX_CLI_CHILD", "1")  # the CLI in this process, where the stand-in is
    target = get_target("cpu")
    own = target.matmul_tile_bytes or matmul_tile_bytes_for(target.l2_bytes)
    expected = 4 * own if wider_wins else own
    onnx_path = save(wide_mlp(width=128, layers=2), tmp_path / "w.onnx")
    db_path, out = str(tmp_path / "w.tuning.json"), str(tmp_path / "w.ixa")
    assert compile_main([onnx_path, "--target", "cpu", "--tune", "--tuning-db", db_path, "-o", out, "-q"]) == 0
    assert f"tiles-{4 * own}.ixa" in timed
    (model,), = [list(m.values()) for m in json.load(open(db_path))["models"].values()]
    assert model["data_tiling"] is True and model["matmul_tile_bytes"] == expected
    assert model["tile_bytes_ms"] == {str(own): 10.0, str(4 * own): 5.0 if wider_wins else 15.0}
    flags = _member(out, "manifest.json")["iree_flags"]
    assert [f for f in flags if "matmul-tile-bytes" in f] == [f"--iree-llvmcpu-matmul-tile-bytes={expected}"]
    _check_numbers(onnx_path, out)
    again = str(tmp_path / "again.ixa")
    assert compile_main([onnx_path, "--target", "cpu", "--tuning-db", db_path, "-o", again, "-q"]) == 0
    assert open(again, "rb").read() == open(out, "rb").read()


def test_two_tuners_sharing_a_database_both_keep_their_entries(tmp_path):
    """Each tuner reads the database, measures for minutes, then writes: only what it changed,
    over what the file holds by then (it used to write back its whole copy, dropping the entries
    another tuner had written meanwhile)."""
    import copy

    from inferx_compiler.tuning import tuning_db

    path = str(tmp_path / "db.json")
    tuning_db.record(first := tuning_db.empty(), "cpu-key", "shared", {"config": "a"})
    tuning_db.save(first, path)
    a, b = tuning_db.load(path), tuning_db.load(path)  # both start from the same file
    a0, b0 = copy.deepcopy(a), copy.deepcopy(b)
    tuning_db.record(a, "cpu-key", "matmul-a", {"config": "from a"})
    tuning_db.record_model(a, "cpu-key", "model-a", {"data_tiling": True})
    tuning_db.record(b, "cpu-key", "matmul-b", {"config": "from b"})
    tuning_db.record(b, "cpu-key", "shared", {"config": "b measured again"})
    tuning_db.save_changes(path, a0, a)
    tuning_db.save_changes(path, b0, b)
    merged = tuning_db.load(path)
    assert tuning_db.lookup(merged, "cpu-key", "matmul-a") == {"config": "from a"}
    assert tuning_db.lookup(merged, "cpu-key", "matmul-b") == {"config": "from b"}
    assert tuning_db.lookup(merged, "cpu-key", "shared") == {"config": "b measured again"}
    assert tuning_db.lookup_model(merged, "cpu-key", "model-a") == {"data_tiling": True}
