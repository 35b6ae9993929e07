"""int8/int4 products through our AVX-512 VNNI kernels on this CPU
(inferx_compiler/kernels/u8s8_gemm.c, u8s4_gemm.c), on shapes that reach every edge of them:
rows not a multiple of the register tile, 32- and 64-column workgroup tiles, the static and the
dynamic-batch functions, several products of one shape sharing its executable.
- int8: the same numbers, bit for bit, as IREE's s8 x s8 code (the kernel sums u8 = s8 + 128
  and the rescale takes 128 x the column sums back in s32). The reference build runs with CC
  pointing nowhere, which leaves the products to IREE (the pass's fallback).
- int4: read as stored and scaled per group (not requantized to int8): the numbers of the
  emulation `auto` decides with (calibration.py, which asks the same rule), and closer to the
  group-dequantized weights than the requantized form is."""

from __future__ import annotations

import json
import os
import subprocess
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import inferx_compiler
from e2e_models import _model, _w, random_inputs, transformer_block
from helpers import emulated_output, onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.common import python_entry
from inferx_compiler.kernels import cpu_objects
from inferx_compiler.targets import get_target

pytestmark = [
    pytest.mark.skipif("avx512_vnni" not in get_target("cpu").features, reason="this CPU has no AVX-512 VNNI"),
    pytest.mark.skipif(cpu_objects.c_compiler()[0] is None, reason="no C compiler for the kernel"),
]


def two_projections(seed=11, d_in=64, d_mid=96, d_out=100, seq=13):
    """x [B, 13, 64] -> MatMul 64x96 (a 32-column workgroup tile) -> Relu -> MatMul 96x100 (zero-
    padded to the kernels' 128 columns, 64-column tiles, the extra 28 cut)."""
    rng = np.random.default_rng(seed)
    inits = {"w0": _w(rng, d_in, d_mid), "w1": _w(rng, d_mid, d_out)}
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"], name="proj0"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w1"], ["y"], name="proj1")]
    return _model(nodes, "two_projections", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", seq, d_in])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", seq, d_out])], inits)


def _build(path, out, precision, batches, env=None, group_size=32, extra=(), target="x86-avx512-vnni"):
    # a fixed target, not this host's record: which kernel a product gets does not depend on the
    # machine (x86-avx512-vnni has no AMX; x86-amx is asked for where the AMX kernel is meant)
    proc = subprocess.run(python_entry("inferx_compiler.cli.compile")
                          + [str(path), "--target", target, "--precision", precision, "--group-size", str(group_size),
                             "--batch-sizes", batches, "-o", str(out), "-q", *extra],
                          capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return json.loads(zipfile.ZipFile(out).read("report.json"))


def _kernel_dispatches(report) -> list[str]:
    return [d["dispatch"] for d in report["dispatches"] if d["dispatch"].startswith(("inferx_u8s8_", "inferx_u8s4_"))]


AMX_HERE = "amx_int8" in get_target("cpu").features


@pytest.mark.parametrize("target", ["x86-avx512-vnni", pytest.param(
    "x86-amx", marks=pytest.mark.skipif(not AMX_HERE, reason="this CPU has no AMX (the x86-amx build is "
                                                             "inspected on any host: test_kernels_any_host)"))])
@pytest.mark.parametrize("model_name, precision", [("two_projections", "int8"), ("transformer_block", "int8")])
def test_int8_kernel_matches_iree_s8_code_bit_for_bit(tmp_path, model_name, precision, target):
    model = two_projections() if model_name == "two_projections" else transformer_block(d=64, heads=4, seq=13,
                                                                                           ffn=128)
    path = save(model, tmp_path / "m.onnx")
    kernel, iree = tmp_path / "kernel.ixa", tmp_path / "iree.ixa"
    # (the transformer's softmax stays IREE's in both: our softmax kernel rounds differently)
    no_softmax = ("--disable-pass", "inferx-softmax-kernel")
    report = _build(path, kernel, precision, "1,3", extra=no_softmax, target=target)
    reference = _build(path, iree, precision, "1,3", env={"CC": "/nonexistent/cc"}, extra=no_softmax, target=target)
    used = _kernel_dispatches(report)
    assert used and not _kernel_dispatches(reference)
    assert len(used) == len(set(used))  # one executable per shape
    shapes = [d.rsplit("_", 1)[1].split("x") for d in used]  # (M, N, K); M "D": dynamic rows
    # the static functions' rows (b1: 13, b3: 39: not multiples of 8) and the dynamic function's
    assert {m for m, _, _ in shapes} == {"13", "39", "D"}
    if model_name == "two_projections":
        assert {n for _, n, _ in shapes} == {"96", "128"}  # 32- and 64-column tiles; 100 padded to 128
    for d in report["dispatches"]:
        if d["dispatch"] in used:
            dynamic = d["loops"][0] == -1
            assert d["root"].startswith("inferx_u8s8")
            assert d["flops"] == (-1 if dynamic else 2 * np.prod(d["loops"]))
    decisions = [d["decision"] for d in report["decisions"] if d["pass"] == "inferx-quantize-contractions"]
    assert decisions and all("by the VNNI kernel" in d or "by the AMX kernel" in d for d in decisions)
    # for a target with AMX the products with K a multiple of 64 run on u8s8_amx_gemm.c (the same sums)
    amx = [d for d in used if d.startswith("inferx_u8s8_amx_")]
    assert bool(amx) == (target == "x86-amx")
    manifest = json.loads(zipfile.ZipFile(kernel).read("manifest.json"))
    sources = {"u8s8_amx_gemm.c" if d.startswith("inferx_u8s8_amx_") else "u8s8_gemm.c" for d in used}
    assert set(manifest["compiler"]["c_kernels"]) == sources
    for source, provenance in manifest["compiler"]["c_kernels"].items():  # what a rebuild must match
        assert provenance["object_sha256"] == cpu_objects.build(source).sha256
    assert "c_kernels" not in json.loads(zipfile.ZipFile(iree).read("manifest.json"))["compiler"]
    a, b = inferx_compiler.load(str(kernel)), inferx_compiler.load(str(iree))
    for batch in (1, 3, 2):  # 2: the dynamic function
        feeds = random_inputs(onnx.load(path), batch, seed=batch)
        got, want = a.run(feeds), b.run(feeds)
        for name in want:
            assert np.array_equal(got[name], want[name]), (batch, name)
        ref = onnxruntime_outputs(str(path), feeds)
        name = next(iter(ref))
        assert 1e-4 < rel_l2(got[name], ref[name]) < 0.05  # quantized, not broken


def test_int4_kernel_reads_groups_as_stored(tmp_path):
    path = save(two_projections(), tmp_path / "m.onnx")
    out, requantized = tmp_path / "int4.ixa", tmp_path / "int4_g4.ixa"
    report = _build(path, out, "int4", "1,3")
    used = _kernel_dispatches(report)
    assert {d.rsplit("_", 1)[1] for d in used} == {"13x96x64g32", "13x128x96g32", "39x96x64g32", "39x128x96g32",
                                                   "Dx96x64g32", "Dx128x96g32"}
    assert all(d["root"].startswith("inferx_u8s4") for d in report["dispatches"] if d["dispatch"] in used)
    kernels = json.loads(zipfile.ZipFile(out).read("manifest.json"))["compiler"]["c_kernels"]
    assert list(kernels) == ["u8s4_gemm.c"]
    # groups of 4 (not a multiple of the kernel's 8): requantized to int8, on the u8s8 kernel
    fallback = _build(path, requantized, "int4", "1,3", group_size=4)
    decisions = [d["decision"] for d in fallback["decisions"] if d["pass"] == "inferx-quantize-contractions"]
    assert decisions and all("requantized to int8 at load" in d for d in decisions)
    assert {d.split("_")[1] for d in _kernel_dispatches(fallback)} == {"u8s8"}
    session = inferx_compiler.load(str(out))
    for batch in (1, 3, 2):
        feeds = random_inputs(onnx.load(path), batch, seed=batch)
        got = session.run(feeds)["y"]
        emulated = emulated_output(str(path), "int4", feeds, 32)
        assert rel_l2(got, emulated) < 1e-5, batch  # the kernel computes what auto measured
        assert 1e-2 < rel_l2(got, onnxruntime_outputs(str(path), feeds)["y"]) < 0.3  # int4, not broken


def test_kernel_object_is_cached_and_freestanding():
    first = cpu_objects.build("u8s8_gemm.c")
    again = cpu_objects.build("u8s8_gemm.c")
    assert first == again and os.path.isfile(first.path)
    symbols = subprocess.run(["nm", "-u", first.path], capture_output=True, text=True)
    if symbols.returncode == 0:  # binutils present: nothing left for IREE's linker to resolve
        assert symbols.stdout.strip() == ""


def test_no_c_compiler_is_named(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    command, why = cpu_objects.c_compiler()
    assert command is None and "/nonexistent/cc" in why
    with pytest.raises(cpu_objects.KernelBuildError, match="/nonexistent/cc"):
        cpu_objects.build("u8s8_gemm.c")


def test_unwritable_kernel_cache_is_named(monkeypatch, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("INFERX_KERNEL_CACHE", str(blocked / "kernels"))
    with pytest.raises(cpu_objects.KernelBuildError, match="INFERX_KERNEL_CACHE"):
        cpu_objects.build("u8s8_gemm.c")
