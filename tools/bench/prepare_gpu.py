"""Compile, on this (CPU) host, every CUDA module tools/bench/gpu.py runs on the H200, WITHOUT weights.

    PYTHONPATH=<inferx layout> python tools/bench/prepare_gpu.py [--out build/bench-gpu] [--quick]
                                    [--models mlp,bert,gpt2,resnet50] [--runtime-wheel]

Why no weights: the device call carries at most 64 MiB, and the full models' weights are
~1.5 GB. Every weight is a pure function of (model name, seed) in tools/bench/models.py, so
gpu.py rebuilds the ONNX model on the device with the same numpy seed and rebuilds:
  * for inferx: weights.irpa with inferx's own writer (inferx_compiler.artifact.archive.
    write_parameter_archive, the same lifting rule: float initializers >= 1024 elements, in
    initializer order), checks its sha256 against the one the manifest records, and re-assembles
    the byte-identical .ixa with inferx_compiler.artifact.archive.write_artifact (checked by sha256);
  * for plain IREE: an in-memory iree.runtime.ParameterIndex (scope "model") holding the ONNX
    initializers under the keys the importer externalized here (recorded, with each tensor's
    sha256, in bench.json).
A mismatch (e.g. a numpy whose Generator stream differs) is reported and those rows are not run.

What it writes in --out (all small):
  bench.json                    models, batches, weight keys + sha256, artifact records, compile stats
  NAME.inferx-fp32.ixa-noweights  the .ixa minus weights.irpa (manifest, module.vmfb, report.json)
  NAME.inferx-fp16.ixa-noweights  (--precision fp16, --target h200)
  NAME.iree-fp32.vmfb, NAME.iree-f16.vmfb   plain IREE CUDA (sm_80 PTX, JIT-compiled by the driver)
  whl/iree_base_runtime-3.13.0-cp312-...whl   with --runtime-wheel (pip download, ~15 MB)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

from inferx_compiler.cli.common import python_entry

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402
import run as cpu_run  # noqa: E402

CUDA_FLAGS = ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"]
F16_FLAGS = ["--iree-global-opt-demote-contraction-inputs-type=f16",
             "--iree-global-opt-demote-contraction-inputs-operations=all"]
INFERX_PRECISIONS = ("fp32", "fp16")
# Extra inferx builds measured beside the defaults: system name -> (precision, extra flags, models).
# The same-run "before" of the passes: fp16-before leaves out inferx-split-reduction and
# inferx-unbroadcast-matmul, fp16-nosplit only the split (so the two gains can be told apart).
_BEFORE = ["--disable-pass", "inferx-split-reduction", "--disable-pass", "inferx-unbroadcast-matmul"]
INFERX_VARIANTS = {"inferx-fp16-before": ("fp16", _BEFORE, ("mlp", "bert", "gpt2", "resnet50", "mlp_lite",
                                                            "bert_lite", "gpt2_lite", "resnet_lite")),
                   "inferx-fp16-nosplit": ("fp16", _BEFORE[:2], ("bert", "gpt2", "bert_lite", "gpt2_lite")),
                   "inferx-fp32-nosplit": ("fp32", _BEFORE[:2], ("mlp", "bert", "gpt2", "mlp_lite", "bert_lite",
                                                                "gpt2_lite")),
                   # the CUDA configuration rules (window copies) left out
                   "inferx-fp16-norule": ("fp16", ["--disable-pass", "inferx-dispatch-config"],
                                          ("resnet50", "resnet_lite")),
                   # IREE's own Ampere-class matmuls instead of the sm_90a Triton kernels
                   "inferx-fp16-nohopper": ("fp16", ["--disable-pass", "inferx-hopper-matmul"],
                                            ("mlp", "bert", "gpt2", "resnet50", "mlp_lite", "bert_lite",
                                             "gpt2_lite", "resnet_lite")),
                   # the sm_90a kernels without their fused epilogues (IREE runs them after the product)
                   "inferx-fp16-noepilogue": ("fp16", ["--disable-pass", "inferx-hopper-epilogue"],
                                              ("mlp", "bert", "gpt2", "resnet50", "mlp_lite", "bert_lite",
                                               "gpt2_lite", "resnet_lite")),
                   # a kernel per matmul instead of one for the siblings reading the same input (q, k, v)
                   "inferx-fp16-nogroup": ("fp16", ["--disable-pass", "inferx-hopper-group"],
                                           ("mlp", "bert", "gpt2", "resnet50", "mlp_lite", "bert_lite",
                                            "gpt2_lite", "resnet_lite")),
                   # IREE's default optimization level (O0) instead of the CUDA targets' O2
                   "inferx-fp16-o0": ("fp16", ["--iree-flag=--iree-opt-level=O0"],
                                      ("mlp", "bert", "gpt2", "resnet50", "mlp_lite", "bert_lite",
                                       "gpt2_lite", "resnet_lite")),
                   "inferx-fp32-o0": ("fp32", ["--iree-flag=--iree-opt-level=O0"],
                                      ("mlp", "bert", "resnet50", "mlp_lite", "bert_lite", "resnet_lite")),
                   "inferx-int8-o0": ("int8", ["--iree-flag=--iree-opt-level=O0"], ("mlp", "bert", "mlp_lite",
                                                                                      "bert_lite")),
                   # the weights stored f32 and truncated at load, as before inferx-narrow-parameters
                   "inferx-fp16-wide": ("fp16", ["--disable-pass", "inferx-narrow-parameters"],
                                        ("mlp", "bert", "gpt2", "resnet50", "mlp_lite", "bert_lite", "gpt2_lite",
                                         "resnet_lite")),
                   # bf16 matmul inputs (f32 accumulation; the sm_90a kernels take bf16 too)
                   "inferx-bf16": ("bf16", [], ("mlp", "bert", "gpt2", "resnet50", "mlp_lite", "bert_lite",
                                               "gpt2_lite", "resnet_lite")),
                   # weight-only integer layers (f16 activations, dequantization fused in the matmul)
                   "inferx-int8": ("int8", [], ("mlp", "bert", "mlp_lite", "bert_lite")),
                   "inferx-int4": ("int4", [], ("mlp", "bert", "mlp_lite", "bert_lite")),
                   # the same with IREE's dequantize-and-matmul instead of our weight-only kernel
                   "inferx-int8-iree": ("int8", ["--disable-pass", "inferx-dequant-matvec"], ("mlp", "mlp_lite")),
                   "inferx-int4-iree": ("int4", ["--disable-pass", "inferx-dequant-matvec"], ("mlp", "mlp_lite"))}
LIMIT_BYTES = 45 * 2**20  # leave room under the 64 MiB carry limit for the runtime wheel


def sha256_bytes(b) -> str:
    return hashlib.sha256(b).hexdigest()


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def weight_digests(model) -> dict:
    """sha256 of every float initializer's little-endian bytes, by name (what both sides compare)."""
    from onnx import numpy_helper

    return {i.name: sha256_bytes(np.ascontiguousarray(numpy_helper.to_array(i)).tobytes())
            for i in model.graph.initializer if i.data_type in (1, 10, 11, 16)}


def strip_weights(ixa, out):
    """Copy the .ixa's members except weights.irpa into a stored zip; return the manifest."""
    with zipfile.ZipFile(ixa) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            if info.filename != "weights.irpa":
                dst.writestr(info.filename, src.read(info.filename))
        return json.loads(src.read("manifest.json"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(HERE, "..", "..", "build", "bench-gpu"))
    p.add_argument("--models", help="comma list (default: the full set, or the quick set with --quick)")
    p.add_argument("--quick", action="store_true", help="the small models (a dry run of the whole path)")
    p.add_argument("--target", default="h200")
    p.add_argument("--cache", default=os.environ.get("INFERX_BENCH_CACHE", models.DEFAULT_CACHE))
    p.add_argument("--only", help="comma list of systems to build (default: every inferx and IREE build)")
    p.add_argument("--runtime-wheel", action="store_true",
                   help="pip download the cp312 iree-base-runtime 3.13.0 wheel into OUT/whl")
    p.add_argument("--tuning-db", help="also build inferx-fp16-tuned: --precision fp16 with this tuning database "
                                       "(written by inferx-tune on the GPU host)")
    a = p.parse_args(argv)
    if a.tuning_db:
        INFERX_VARIANTS["inferx-fp16-tuned"] = ("fp16", ["--tuning-db", os.path.abspath(a.tuning_db)],
                                                tuple(models.MODELS))
    names = a.models.split(",") if a.models else (models.QUICK if a.quick else models.FULL)
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    bench_path = os.path.join(out, "bench.json")
    bench = {"target": a.target, "cuda_flags": CUDA_FLAGS, "f16_flags": F16_FLAGS, "gen_version": models.GEN_VERSION,
             "models": {}}
    if os.path.exists(bench_path):
        with open(bench_path) as f:
            old = json.load(f)
        if old.get("target") == a.target:
            bench["models"] = old.get("models", {})
    for name in names:
        onnx_path = models.path(name, a.cache)
        import onnx

        model = onnx.load(onnx_path)
        entry = {"spec": models.MODELS[name][1], "batches": list(models.MODELS[name][2]),
                 "onnx": os.path.basename(onnx_path), "weight_bytes": models.weight_bytes(name, model),
                 "weights_sha256": weight_digests(model), "systems": {}}
        if a.only:  # the other systems' records stay (their files are still in OUT)
            entry["systems"] = dict(bench["models"].get(name, {}).get("systems", {}))
        del model
        with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp, open(os.path.join(out, f"{name}.log"), "w") as logf:
            builds = [(f"inferx-{prec}", prec, []) for prec in INFERX_PRECISIONS]
            builds += [(sysname, prec, extra) for sysname, (prec, extra, only) in INFERX_VARIANTS.items()
                       if name in only]
            wanted = set(a.only.split(",")) if a.only else None
            builds = [b for b in builds if wanted is None or b[0] in wanted]
            for sysname, prec, extra in builds:
                ixa = os.path.join(tmp, f"{name}.{sysname}.ixa")
                # Each benchmark batch gets a static-shape function (the batcher's buckets).
                sizes = ",".join(str(b) for b in entry["batches"])
                cmd = python_entry("inferx_compiler.cli.compile") + [onnx_path, "--target", a.target,
                       "--precision", prec, "--batch-sizes", sizes, "--no-measure", *extra, "-o", ixa, "-q"]
                cpu_run.log(f"{name}: {sysname} (inferx-compile --target {a.target} --precision {prec})")
                wall, rss, rc = cpu_run.measured(cmd, logf)
                rec = {"compile_s": wall, "peak_rss_mib": rss, "ok": rc == 0, "command": cmd[1:]}
                if rc == 0:
                    dst = f"{name}.{sysname}.ixa-noweights"
                    manifest = strip_weights(ixa, os.path.join(out, dst))
                    rec.update(file=dst, artifact_bytes=os.path.getsize(ixa), ixa_sha256=sha256_file(ixa),
                               weights_member_sha256=manifest["members"].get("weights.irpa"))
                else:
                    rec["error"] = cpu_run._tail(logf.name)
                entry["systems"][sysname] = rec
            mlir, irpa = os.path.join(tmp, "m.mlir"), os.path.join(tmp, "m.irpa")
            imp = [cpu_run._tool("iree-import-onnx"), onnx_path, "-o", mlir, "--externalize-params",
                   "--num-elements-threshold", "1024", "--params-scope", "model", "--save-params-to", irpa]
            cpu_run.log(f"{name}: iree-import-onnx")
            w0, r0, rc = cpu_run.measured(imp, logf)
            keys = []
            if rc == 0:
                import iree.runtime as rt

                idx = rt.ParameterIndex()
                idx.load(irpa)
                keys = [k for k, _ in idx.items()]
                del idx
            entry["iree_param_keys"] = keys
            for sysname, flags in (("iree-fp32", CUDA_FLAGS), ("iree-f16", CUDA_FLAGS + F16_FLAGS)):
                if wanted is not None and sysname not in wanted:
                    continue
                rec = {"import_s": w0, "import_peak_rss_mib": r0, "ok": False}
                if rc == 0:
                    vmfb = f"{name}.{sysname}.vmfb"
                    cmd = [cpu_run._tool("iree-compile"), mlir, *flags, "-o", os.path.join(out, vmfb)]
                    cpu_run.log(f"{name}: {sysname} (iree-compile {' '.join(flags)})")
                    w1, r1, rc1 = cpu_run.measured(cmd, logf)
                    rec.update(compile_s=w0 + w1, iree_compile_s=w1, peak_rss_mib=max(r0, r1), ok=rc1 == 0,
                               file=vmfb, iree_flags=flags,
                               artifact_bytes=(os.path.getsize(os.path.join(out, vmfb)) if rc1 == 0 else None))
                    if rc1:
                        rec["error"] = cpu_run._tail(logf.name)
                else:
                    rec["error"] = "iree-import-onnx failed: " + cpu_run._tail(logf.name)
                entry["systems"][sysname] = rec
        bench["models"][name] = entry
        with open(bench_path, "w") as f:
            json.dump(bench, f, indent=1)
        for s, r in entry["systems"].items():
            cpu_run.log(f"{name}: {s:10s} {'ok' if r['ok'] else 'FAILED'} "
                        f"{r.get('compile_s') or 0:.1f} s  {r.get('peak_rss_mib') or 0:.0f} MiB")
    if a.runtime_wheel:
        wdir = os.path.join(out, "whl")
        os.makedirs(wdir, exist_ok=True)
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                               "--python-version", "3.12", "--implementation", "cp",
                               "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                               "-d", wdir, "iree-base-runtime==3.13.0"])
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs)
    print(f"{out}: {total / 2**20:.1f} MiB" + ("  (over the budget: carry fewer models per call)" if total > LIMIT_BYTES + 20 * 2**20 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
