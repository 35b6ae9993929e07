"""Our CPU kernels built on every host, for the targets that have them, and inspected in the
artifact (which dispatches run on which kernel, which objects are linked), whether or not this
machine could run them: the modules that run them (test_f32_kernel, test_vnni_kernel, ...) skip
on hosts without AVX-512, VNNI or AMX, these do not. Each case is also built for x86-avx2, whose
record has none of those features: there IREE's own code takes every op."""

from __future__ import annotations

import pytest

from helpers import artifact_json, save
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.kernels import cpu_objects
from test_amx_kernel import gemm_projections
from test_f32_kernel import f32_chain
from test_pool_kernel import BUCKETS, poolings
from test_softmax_kernel import softmaxes
from test_vnni_kernel import two_projections

pytestmark = pytest.mark.skipif(cpu_objects.c_compiler()[0] is None, reason="no C compiler for the kernels")

# (case, model, target that has the kernel, build flags, dispatch prefix, kernel source)
CASES = [
    ("f32", f32_chain, "x86-avx512", ["--batch-sizes", "1,5"], "inferx_f32_", "f32_gemm.c"),
    ("softmax", softmaxes, "x86-avx512", [], "inferx_softmax_", "softmax_rows.c"),
    ("maxpool", poolings, "x86-avx512", ["--batch-sizes", BUCKETS], "inferx_maxpool_", "maxpool_planes.c"),
    ("vnni", two_projections, "x86-avx512-vnni", ["--precision", "int8", "--batch-sizes", "1"], "inferx_u8s8_",
     "u8s8_gemm.c"),
    ("amx_int8", two_projections, "x86-amx", ["--precision", "int8", "--batch-sizes", "1"], "inferx_u8s8_amx_",
     "u8s8_amx_gemm.c"),
    ("amx_bf16", gemm_projections, "x86-amx", ["--precision", "bf16", "--batch-sizes", "1"], "inferx_bf16_amx_",
     "bf16_amx_gemm.c"),
]


def _build(tmp_path, model, target, flags):
    path = save(model(), tmp_path / "m.onnx")
    out = tmp_path / f"{target}.ixa"
    assert compile_main([str(path), "--target", target, "--no-measure", "-q", "-o", str(out), *flags]) == 0
    return artifact_json(out)


@pytest.mark.parametrize("case,model,target,flags,prefix,source", CASES, ids=[c[0] for c in CASES])
def test_kernel_built_for_its_target_on_any_host(tmp_path, case, model, target, flags, prefix, source):
    manifest, report = _build(tmp_path, model, target, flags)
    ours = [d["dispatch"] for d in report["dispatches"] if d["dispatch"].startswith(prefix)]
    assert ours, f"no {prefix} dispatch in the {target} build: {[d['dispatch'] for d in report['dispatches']]}"
    assert manifest["target"]["name"] == target
    linked = manifest["compiler"].get("c_kernels", {})
    assert source in linked and len(linked[source]["object_sha256"]) == 64, linked


@pytest.mark.parametrize("case,model,flags,prefix", [(c[0], c[1], c[3], c[4]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_no_kernel_for_a_target_without_the_features(tmp_path, case, model, flags, prefix):
    manifest, report = _build(tmp_path, model, "x86-avx2", flags)
    assert not [d["dispatch"] for d in report["dispatches"] if d["dispatch"].startswith("inferx_")]
    assert not manifest["compiler"].get("c_kernels")
