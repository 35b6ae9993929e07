"""The weight-only int8/int4 kernel (inferx_compiler/kernels/triton_dequant.py) on a GPU host, per
configuration, against the memory floor and PyTorch fp16 on the same layers.

    python tools/bench/gpu_dequant_sweep.py --out $OUT            # on the GPU host (torch + Triton)

For each row count M and weight kind it builds a chain of LAYERS distinct K x N layers (8 of
4096 x 4096 by default: the MLP's, 69 MB of int4 weights and scales: more than the H200's L2, so
each replay reads them from memory), checks the kernel against float64 on fresh random data,
then times a CUDA graph of the chain's launches (and the split-K sums where S > 1) with device
events, median over replays. The floor is the weight bytes over the device-to-device copy rate
measured in the same run (bytes read plus written). PyTorch fp16 (torch.nn.functional.linear on
f16 weights, graphed the same way) is the peer. The JIT-compiled function is the same source the
builds compile ahead of time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from inferx_compiler.kernels.triton_dequant import DequantSpec, constants, kernel_function  # noqa: E402


def median_ms(torch, fn, replays: int) -> float:
    """Median device time of one call of `fn` (a graph replay), from events around each call."""
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def graphed(torch, body):
    body()  # compile (Triton JIT) and warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    return graph.replay


def copy_rate(torch) -> float:
    """Device-to-device copy, bytes read plus written per second (1 GiB buffers)."""
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    b = torch.empty_like(a)
    ms = median_ms(torch, lambda: b.copy_(a), 20)
    return 2 * a.numel() / (ms * 1e-3)


def make_layers(torch, kind: str, n: int, k: int, group: int, count: int, gen):
    layers = []
    for _ in range(count):
        if kind == "int4":
            q = torch.randint(-8, 8, (n, k), generator=gen, dtype=torch.int8)
            nib = (q & 0x0F).to(torch.uint8)
            packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).view(torch.int8)
            scale = (torch.rand((n, k // group), generator=gen) * 0.02 + 0.01).half()
            deq = q.double() * scale.double().repeat_interleave(group, dim=1)
        else:
            q = torch.randint(-127, 128, (n, k), generator=gen, dtype=torch.int8)
            packed, scale = q, (torch.rand((n,), generator=gen) * 0.002 + 0.001).half()
            deq = q.double() * scale.double()[:, None]
        layers.append((packed.cuda(), scale.cuda(), deq))
    return layers


def check(torch, spec: DequantSpec, layer, gen) -> float:
    """Relative L2 of one launch against float64, on fresh random x and init, NaN-poisoned out."""
    x = torch.randn((spec.m, spec.k), generator=gen).half()
    init = torch.randn((spec.m, spec.n), generator=gen)
    out = torch.full((spec.split, spec.m, spec.n), float("nan"), device="cuda")
    kernel_function(spec)[spec.grid[:2]](x.cuda(), layer[0], layer[1], init.cuda() if spec.has_init else None, out,
                                     **constants(spec), num_warps=spec.warps, num_stages=spec.stages)
    got = out.double().sum(0).cpu()
    ref = x.double() @ layer[2].T + (init.double() if spec.has_init else 0)
    if not torch.isfinite(got).all():
        return float("inf")
    return float((got - ref).norm() / ref.norm())


def kernel_times(torch, replay, calls: int = 20) -> dict:
    """Device time per replay of each kernel the replay launches (torch.profiler, CUPTI), in us."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            replay()
        torch.cuda.synchronize()
    totals = {}
    for event in prof.events():
        if event.device_type.name == "CUDA":
            totals[event.name[:60]] = totals.get(event.name[:60], 0.0) + event.device_time / calls
    return totals


def time_chain(torch, spec: DequantSpec, layers, replays: int, profile: bool = False):
    x = torch.randn((spec.m, spec.k), device="cuda").half()
    outs = [torch.empty((spec.split, spec.m, spec.n), device="cuda") for _ in layers]
    sums = [torch.empty((spec.m, spec.n), device="cuda") for _ in layers]
    grid = spec.grid[:2]
    kernel = kernel_function(spec)
    consts = constants(spec)

    def body():
        for (w, s, _), out, total in zip(layers, outs, sums):
            kernel[grid](x, w, s, None, out, **consts, num_warps=spec.warps, num_stages=spec.stages)
            if spec.split > 1:
                torch.sum(out, dim=0, out=total)

    replay = graphed(torch, body)
    if profile:
        return kernel_times(torch, replay)
    return median_ms(torch, replay, replays)


def time_streaming(torch, layers, replays: int) -> float:
    """A reduction over each layer's stored weight (as f32 words): what reading those bytes takes
    with one PyTorch kernel a layer, the same graph structure."""
    words = [w.view(torch.float32) for w, _, _ in layers]
    sums = [torch.empty((), device="cuda") for _ in layers]

    def body():
        for w, total in zip(words, sums):
            torch.sum(w, dim=(0, 1), out=total)

    return median_ms(torch, graphed(torch, body), replays)


def time_torch_fp16(torch, m: int, n: int, k: int, count: int, replays: int) -> float:
    weights = [torch.randn((n, k), device="cuda").half() for _ in range(count)]
    x = torch.randn((m, k), device="cuda").half()

    def body():
        for w in weights:
            torch.nn.functional.linear(x, w)

    return median_ms(torch, graphed(torch, body), replays)


FORMS = {"dot": (False, True), "wleft": (True, True), "free": (False, False)}  # (w_left, dot)


def configs(m: int, kind: str, quick: bool, only: dict = None):
    """(block_m, block_n, split, warps, stages, block_k, w_left, dot) candidates; `only` replaces
    a field's list (block_n, split, stages, block_k, warps: lists of ints; form: names in FORMS)."""
    only = only or {}
    block_ms = [16] if m <= 16 else [16, 64]
    block_ns = only.get("block_n") or ([64, 128] if quick else [32, 64, 128])
    splits = only.get("split") or ([4, 8] if quick else [1, 2, 4, 8])
    warps = only.get("warps") or ([4] if quick else [4, 8])
    stages = only.get("stages") or ([3] if quick else [2, 3, 4, 6])
    block_ks = only.get("block_k") or ([128, 256] if quick else [128, 256, 512])
    forms = only.get("form") or (["dot", "wleft", "free"] if kind == "int4" and m == 1 else ["dot", "wleft"])
    for form in forms:
        w_left, dot = FORMS[form]
        rows = block_ms if dot else [1]  # the dot-free form: one row a program
        yield from (c + (w_left, dot) for c in itertools.product(rows, block_ns, splits, warps, stages, block_ks))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rows", default="1,8,64")
    parser.add_argument("--kinds", default="int4,int8")
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--group", type=int, default=128)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--replays", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="fewer warps/stages candidates")
    parser.add_argument("--block-n", help="comma list: only these weight rows a program")
    parser.add_argument("--split", help="comma list: only these split-K slice counts")
    parser.add_argument("--stages", help="comma list: only these pipeline depths")
    parser.add_argument("--block-k", help="comma list: only these steps along K")
    parser.add_argument("--warps", help="comma list: only these warp counts")
    parser.add_argument("--form", help="comma list of dot, wleft, free (the dot-free one-row form)")
    parser.add_argument("--programs", help="comma list: the resident-x form on this many programs")
    parser.add_argument("--slow-casts", action="store_true", help="Triton's integer casts, not the PTX widening")
    args = parser.parse_args(argv)
    import torch
    import triton

    os.makedirs(args.out, exist_ok=True)
    gen = torch.Generator().manual_seed(0)
    rate = copy_rate(torch)
    rows = []
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "copy_bytes_per_s": rate, "rows": rows}
    print(f"copy rate {rate / 1e12:.2f} TB/s (read + write)", flush=True)
    for kind in args.kinds.split(","):
        group = args.group if kind == "int4" else 0
        layers = make_layers(torch, kind, args.n, args.k, group, args.layers, gen)
        stream = time_streaming(torch, layers, args.replays)
        print(f"{kind}: reading the stored weights, a reduction a layer: {stream * 1e3:.1f} us", flush=True)
        results.setdefault("streaming_ms", {})[kind] = stream
        for m in map(int, args.rows.split(",")):
            peer = time_torch_fp16(torch, m, args.n, args.k, args.layers, args.replays)
            best = None
            only = {field: [int(v) for v in getattr(args, field).split(",")]
                    for field in ("block_n", "split", "stages", "block_k", "warps") if getattr(args, field)}
            if args.form:
                only["form"] = args.form.split(",")
            programs_list = [int(v) for v in args.programs.split(",")] if args.programs else [0]
            for (bm, bn, split, warps, stages, bk, w_left, dot), programs in itertools.product(
                    configs(m, kind, args.quick, only), programs_list):
                try:
                    spec = DequantSpec(m, args.n, args.k, kind, group, False, split, bm, bn, bk, warps, stages,
                                       fast=not args.slow_casts, w_left=w_left, dot=dot,
                                       programs=programs)
                except ValueError:
                    continue
                try:
                    err = check(torch, spec, layers[0], gen)
                    ms = time_chain(torch, spec, layers, args.replays)
                except Exception as e:  # a configuration Triton cannot build (shared memory)
                    rows.append({"m": m, "kind": kind, "spec": spec.__dict__, "error": str(e)[:200]})
                    continue
                floor = args.layers * spec.weight_bytes / rate * 1e3
                row = {"m": m, "kind": kind, "bm": bm, "bn": bn, "split": split, "warps": warps, "stages": stages,
                       "bk": bk, "w_left": w_left, "dot": dot, "programs": programs, "ms": ms, "floor_ms": floor, "err": err, "torch_fp16_ms": peer}
                rows.append(row)
                if err < 1e-3 and (best is None or ms < best["ms"]):
                    best = row
            ranked = sorted((r for r in rows if r.get("m") == m and r.get("kind") == kind and "ms" in r
                             and r["err"] < 1e-3), key=lambda r: r["ms"])
            for r in ranked[:8]:
                print(f"  {r['ms'] * 1e3:7.1f} us  bm {r['bm']} bn {r['bn']} split {r['split']} warps {r['warps']} "
                      f"stages {r['stages']} bk {r['bk']} w_left {r['w_left']} dot {r['dot']} programs {r['programs']} "
                      f"err {r['err']:.1e}",
                      flush=True)
            if best:
                spec = DequantSpec(m, args.n, args.k, kind, group, False, best["split"], best["bm"], best["bn"],
                                   best["bk"], best["warps"], best["stages"], fast=not args.slow_casts,
                                   w_left=best["w_left"], dot=best["dot"],
                                   programs=best["programs"])
                best["kernel_us"] = time_chain(torch, spec, layers, args.replays, profile=True)
                print(f"  kernels a replay (us): {best['kernel_us']}", flush=True)
                print(f"{kind} M={m}: best {best['ms'] * 1e3:.1f} us (bm {best['bm']} bn {best['bn']} split "
                      f"{best['split']} warps {best['warps']} stages {best['stages']} bk {best['bk']} w_left {best['w_left']} dot {best['dot']}), floor "
                      f"{best['floor_ms'] * 1e3:.1f} us ({best['ms'] / best['floor_ms']:.2f}x), torch fp16 "
                      f"{peer * 1e3:.1f} us, err {best['err']:.1e}", flush=True)
    with open(os.path.join(args.out, "dequant_sweep.json"), "w") as f:
        json.dump(results, f, indent=1)
    bad = [r for r in rows if "err" in r and r["err"] >= 1e-3]
    print(f"{len(rows)} rows, {len(bad)} wrong, {sum('error' in r for r in rows)} failed to build")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
