"""Measure compiler variants of one model against onnxruntime, interleaved, in one run.

    python tools/bench/knobs.py resnet_lite --batch 1 \
        --variant base= \
        --variant o2='--iree-flag=--iree-opt-level=O2' \
        --variant noconv='--no-conv-strategy'

Each variant is a list of extra `inferx-compile` arguments (shell-split); `--artifact NAME=PATH`
adds an artifact built elsewhere (e.g. by the code before a change: a before/after of a pass
in one run). Every variant is
compiled in a child process (`inferx-compile --target cpu`), checked against onnxruntime
fp32 (relative L2 <= --tol) and then timed with onnxruntime in interleaved rounds, the order
rotated each round; the table gives the median, min-max, the ratio to onnxruntime and the
dispatch count of the artifact. This is how the target table's IREE knobs and the pass
decisions are chosen: a knob goes in only where it moves this figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402
from run import Runners, rel_l2  # noqa: E402
from inferx_compiler.cli.common import python_entry  # noqa: E402


def compile_variant(onnx_path: str, name: str, extra: list[str], workdir: str, target: str) -> dict:
    out = os.path.join(workdir, f"{name}.ixa")
    cmd = python_entry("inferx_compiler.cli.compile") + [onnx_path, "--target", target, "-o", out,
                                                          "-q", *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    info = {"variant": name, "args": extra, "compile_s": time.perf_counter() - t0, "path": out,
            "ok": proc.returncode == 0, "log": (proc.stdout + proc.stderr)[-2000:]}
    if info["ok"]:
        with zipfile.ZipFile(out) as z:
            info["dispatches"] = len(json.loads(z.read("report.json"))["dispatches"])
    return info


def prebuilt(name: str, path: str) -> dict:
    info = {"variant": name, "args": [], "compile_s": 0.0, "path": path, "ok": os.path.isfile(path),
            "log": f"{path}: no such artifact"}
    if info["ok"]:
        with zipfile.ZipFile(path) as z:
            info["dispatches"] = len(json.loads(z.read("report.json"))["dispatches"])
    return info


@contextlib.contextmanager
def _session_env(settings: list[str], name: str):
    """The environment with variant `name`'s --session-env settings, restored after."""
    mine = [rest.partition("=") for variant, _, rest in (s.partition("=") for s in settings) if variant == name]
    saved = {var: os.environ.get(var) for var, _, _ in mine}
    os.environ.update({var: value for var, _, value in mine})
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a tools/bench/models.py name or an .onnx path")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS")
    p.add_argument("--artifact", action="append", default=[], metavar="NAME=PATH",
                   help="a prebuilt .ixa of this model, timed like a variant")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--target", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--session-env", action="append", default=[], metavar="NAME=VAR=VALUE",
                   help="set VAR=VALUE in the environment while variant NAME's session loads (a runtime "
                        "setting such as INFERX_CALL_NICE: the same artifact under two names, two settings)")
    p.add_argument("--gap-ms", type=float, default=20.0,
                   help="pause after each variant's calls in a round (as tools/bench/run.py): the one before's "
                        "spinning workers (onnxruntime's spin after a call) go idle first")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--device", default="cpu")
    p.add_argument("--cache", default=os.environ.get("INFERX_BENCH_CACHE", models.DEFAULT_CACHE))
    p.add_argument("--json", help="write every sample here")
    args = p.parse_args(argv)
    if not args.variant and not args.artifact:
        p.error("give at least one --variant or --artifact")

    onnx_path = args.model if args.model.endswith(".onnx") else models.path(args.model, args.cache)
    stem = os.path.splitext(os.path.basename(onnx_path))[0]
    workdir = os.path.join(args.cache, "knobs", stem)
    os.makedirs(workdir, exist_ok=True)
    variants = []
    for spec in args.variant:
        name, _, rest = spec.partition("=")
        variants.append((name, shlex.split(rest)))

    import iree.runtime as rt

    rt.flags.parse_flags(f"--task_topology_max_group_count={args.threads}")
    runners = Runners(args.threads)
    feeds = models.feeds(onnx_path, args.batch)
    ref = runners.ort(onnx_path)(feeds)
    calls = {"ort": runners.ort(onnx_path)}
    infos = {}
    builds = [(name, lambda name=name, extra=extra: compile_variant(onnx_path, name, extra, workdir, args.target))
              for name, extra in variants]
    builds += [(name, lambda name=name, path=path: prebuilt(name, path))
               for name, _, path in (a.partition("=") for a in args.artifact)]
    for name, build in builds:
        info = build()
        infos[name] = info
        print(f"{name}: built in {info['compile_s']:.1f}s ok={info['ok']} "
              f"dispatches={info.get('dispatches')}", flush=True)
        if not info["ok"]:
            print(info["log"], file=sys.stderr)
            continue
        import inferx_compiler

        with _session_env(args.session_env, name):
            sess = inferx_compiler.load(info["path"], device=args.device)
        fn = (lambda s: lambda f: list(s.run(f).values()))(sess)
        err = max(rel_l2(g, r) for g, r in zip(fn(feeds), ref))
        info["rel_l2"] = err
        if err > args.tol:
            print(f"{name}: WRONG (rel L2 {err:.2e}), not timed", flush=True)
            continue
        calls[name] = fn

    samples = {k: [] for k in calls}
    order = list(calls)
    for k in order:
        for _ in range(2):
            calls[k](feeds)
    for r in range(args.rounds):
        rot = order[r % len(order):] + order[:r % len(order)]
        for k in rot:
            for _ in range(args.iters):
                t0 = time.perf_counter()
                calls[k](feeds)
                samples[k].append((time.perf_counter() - t0) * 1e3)
            if args.gap_ms:
                time.sleep(args.gap_ms / 1e3)
    ort_med = float(np.median(samples["ort"]))
    print(f"\n{stem} batch {args.batch}, {args.threads} threads, load {os.getloadavg()[0]:.1f}")
    print("| variant | median ms | min-max | ÷ ort | dispatches | rel L2 | compile s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for k in order:
        s = samples[k]
        med = float(np.median(s))
        info = infos.get(k, {})
        print(f"| {k} | {med:.3f} | {min(s):.3f}-{max(s):.3f} | {med / ort_med:.2f} | "
              f"{info.get('dispatches', '')} | {info.get('rel_l2', 0):.1e} | {info.get('compile_s', 0):.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": stem, "batch": args.batch, "samples": samples,
                       "variants": {k: {kk: vv for kk, vv in v.items() if kk != "log"} for k, v in infos.items()}},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
