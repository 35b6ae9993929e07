"""The one-launch int4 chain (tools/bench/chain_kernel.py, an experiment) on a GPU host, against the
launch-a-layer kernel builds use, PyTorch fp16 and the memory floor, same run.

    python tools/bench/gpu_chain_sweep.py --out $OUT            # on the GPU host (torch + Triton)

It builds LAYERS distinct K x N int4 layers (8 of 4096 x 4096 in groups of 128 by default: the
8x4096^2 MLP's 69 MB, more than the H200's L2) with the MLP's epilogue (bias, erf GELU, the f16
cast; the last layer's result f32), checks every configuration against float64 (the f16
rounding of each intermediate included) on fresh data, then times CUDA-graph replays (device
events, median) of:
  - chain: the counter's fill and the one launch, for each programs-a-SM, warps and prefetch choice;
  - layers: one launch a layer of the one-row kernel with the same epilogue, configured as
    passes/support/dequant_matvec.py configures it for builds, with each --forms entry's overrides (its
    kernel time too). The JIT here is the host's Triton: on a device with another version than
    builds use (3.6 against 3.7 on 2026-12-06) forms can rank differently than in the model;
  - torch-fp16: torch.nn.functional.linear + bias + GELU on f16 weights, a layer at a time;
and the kernel time a replay (CUPTI) of the best chain and of the layers. The floor is the weight
bytes over the device-to-device copy rate measured in the same run (read plus write).
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_dequant_sweep import copy_rate, graphed, kernel_times, median_ms  # noqa: E402

import chain_kernel as triton_chain  # noqa: E402  (the experiment's kernel, beside this file)
from inferx_compiler.kernels import triton_dequant  # noqa: E402
from inferx_compiler.kernels.triton_matmul import Epilogue, EpilogueInput, Offsets, compile_options  # noqa: E402


def gelu_epilogue(n: int, out_type: str) -> Epilogue:
    """erf GELU of (acc + bias), stored as `out_type` (the MLP's layer as the planner finds it)."""
    body = (("v0", "add", ("acc", "x0")), ("c", "const", ("0.7071067811865476", "f32")), ("v1", "mul", ("v0", "c")),
            ("v2", "erf", ("v1",)), ("one", "const", ("1.0", "f32")), ("v3", "add", ("v2", "one")),
            ("half", "const", ("0.5", "f32")), ("v4", "mul", ("v0", "half")), ("v5", "mul", ("v4", "v3")),
            ("v6", f"cast:{out_type}", ("v5",)))
    return Epilogue((EpilogueInput("f32", Offsets((), ((1, n, 1),))),), body, "v6", out_type,
                    Offsets((), ((1, n, 1),)))


def make_layers(torch, n: int, k: int, group: int, count: int, gen):
    """(packed [N, K/2] int8, scales [N, K/G] f16, bias [N] f32) on the device, and the float64
    dequantized weight on the host, a layer."""
    layers = []
    for _ in range(count):
        q = torch.randint(-7, 8, (n, k), generator=gen, dtype=torch.int8)  # zero mean: -7..7
        nib = (q & 0x0F).to(torch.uint8)
        packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).view(torch.int8)
        # scales that keep each layer's gain near one (int4 values' spread ~4.3, K terms): a chain whose
        # activations neither die out nor blow up, so that its error measures the arithmetic
        scale = ((torch.rand((n, k // group), generator=gen) * 0.5 + 0.75) * (1.5 / (4.3 * math.sqrt(k)))).half()
        bias = torch.randn((n,), generator=gen) * 0.1
        deq = q.double() * scale.double().repeat_interleave(group, dim=1)
        layers.append((packed.cuda(), scale.cuda(), bias.cuda(), deq, bias.double()))
    return layers


def reference(torch, x, layers):
    h = x.double()
    for i, (_, _, _, deq, bias) in enumerate(layers):
        v = h @ deq.T + bias
        h = 0.5 * v * (1 + torch.erf(v / math.sqrt(2)))
        if i < len(layers) - 1:
            h = h.half().double()
    return h


def chain_spec(layers, n, k, group, per_sm, sms, warps, prefetch, barrier="one", words=False):
    specs = tuple(triton_chain.ChainLayer(n, k, group, gelu_epilogue(n, "f32" if i == len(layers) - 1 else "f16"))
                  for i in range(len(layers)))
    return triton_chain.ChainSpec(specs, per_sm * sms, "f16", warps=warps, prefetch=prefetch,
                                  max_registers=triton_chain.registers_for(per_sm, warps), barrier=barrier,
                                  words=words)


def chain_runner(torch, spec, layers, x):
    bar = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.full((1, spec.layers[-1].n), float("nan"), device="cuda")
    act = torch.empty(spec.scratch_elements, dtype=torch.float16, device="cuda")
    args = [x] + [t for w, s, b, _, _ in layers for t in (w, s, b)]
    kernel = triton_chain.kernel_function(spec)

    def body():
        bar.zero_()
        kernel[spec.grid](*args, bar, out, act, num_warps=spec.warps, num_stages=1, maxnreg=spec.max_registers)

    return body, out


def apply_form(spec, text: str):
    """`spec` (the build's one-row DequantSpec) with the overrides of a layer form: a
    comma-separated list (`words=1,block_n=8,programs=tiles`; values are Python literals, booleans
    as 0/1, `programs=tiles` one tile a program); "build" or "" leaves it as builds make it."""
    import dataclasses

    form = {}
    for item in filter(None, text.split(",")):
        if item == "build":
            continue
        key, value = item.split("=")
        form[key] = value if value == "tiles" else ast.literal_eval(value)
        if isinstance(getattr(spec, key), bool):
            form[key] = bool(form[key])
    if form.get("programs") == "tiles":
        form["programs"] = -(-spec.n // form.get("block_n", spec.block_n))
    return dataclasses.replace(spec, **form)


def layers_runner(torch, layers, n, k, group, sms, x, form: str = ""):
    """One launch a layer, configured as builds configure it (dequant_matvec.matvec_spec), with
    the overrides of the layer form `form` (apply_form)."""
    from passes.dequant_matvec import matvec_spec

    specs = [apply_form(matvec_spec(1, n, k, "int4", group, sms, 90,
                                    gelu_epilogue(n, "f32" if i == len(layers) - 1 else "f16")), form)
             for i in range(len(layers))]
    outs = [torch.empty((1, n), dtype=torch.float16 if i < len(layers) - 1 else torch.float32, device="cuda")
            for i in range(len(layers))]

    def body():
        h = x
        for spec, (w, s, b, _, _), out in zip(specs, layers, outs):
            triton_dequant.kernel_function(spec)[spec.grid[:2]](h, w, s, None, b, out, **triton_dequant.constants(spec),
                                                                **compile_options(spec))
            h = out

    return body, outs[-1], specs[0]


def torch_runner(torch, n, k, count, x):
    weights = [(torch.randn((n, k), device="cuda") * 0.01).half() for _ in range(count)]
    biases = [torch.randn((n,), device="cuda").half() for _ in range(count)]

    def body():
        h = x
        for w, b in zip(weights, biases):
            h = torch.nn.functional.gelu(torch.nn.functional.linear(h, w, b))

    return body


def rel_err(torch, got, ref) -> float:
    got = got.double().cpu()
    if not torch.isfinite(got).all():
        return float("inf")
    return float((got - ref).norm() / ref.norm())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--group", type=int, default=128)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--replays", type=int, default=100)
    parser.add_argument("--per-sm", default="1,2,3,4", help="programs a SM of the chain (comma list; empty: no chain)")
    parser.add_argument("--warps", default="4,8")
    parser.add_argument("--prefetch", default="1,0")
    parser.add_argument("--forms", default="build", help="semicolon list of layer-kernel forms, each a comma list of "
                        "DequantSpec overrides of the build's spec (e.g. 'build;words=1,max_registers=128;"
                        "words=1,block_n=8,programs=tiles')")
    parser.add_argument("--chain-words", default="0", help="comma list: the chain's products on bytes (0) or words (1)")
    parser.add_argument("--barrier", default="one", help="comma list of one, fence, all, none (none: a timing "
                        "diagnostic)")
    args = parser.parse_args(argv)
    import torch
    import triton

    n = k = args.n
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gen = torch.Generator().manual_seed(0)
    rate = copy_rate(torch)
    layers = make_layers(torch, n, k, args.group, args.layers, gen)
    x = torch.randn((1, k), generator=gen).half()
    ref = reference(torch, x, layers)
    x = x.cuda()
    weight_bytes = sum(w.numel() + 2 * s.numel() for w, s, _, _, _ in layers)
    floor_us = weight_bytes / rate * 1e6
    results = {"device": torch.cuda.get_device_name(), "sms": sms, "torch": torch.__version__,
               "triton": triton.__version__, "copy_bytes_per_s": rate, "weight_bytes": weight_bytes,
               "floor_us": floor_us, "rows": []}
    print(f"{torch.cuda.get_device_name()}, {sms} SMs, Triton {triton.__version__}: copy {rate / 1e12:.2f} TB/s, "
          f"{weight_bytes / 1e6:.1f} MB of weights and scales: floor {floor_us:.1f} us", flush=True)

    for text in args.forms.split(";"):
        try:
            body, out, spec = layers_runner(torch, layers, n, k, args.group, sms, x, text)
            body()
            torch.cuda.synchronize()
            replay = graphed(torch, body)
        except Exception as e:  # a form Triton cannot build
            results["rows"].append({"system": "layers", "form": text, "error": str(e)[:300]})
            print(f"layers, form {text!r}: failed: {str(e)[:300]}", flush=True)
            continue
        layers_row = {"system": "layers", "form": text, "spec": str(spec), "err": rel_err(torch, out, ref),
                      "us": 1e3 * median_ms(torch, replay, args.replays), "kernel_us": kernel_times(torch, replay)}
        results["rows"].append(layers_row)
        kernel = sum(layers_row["kernel_us"].values())
        print(f"layers (a launch each), form {text!r}: {layers_row['us']:.1f} us a replay, {kernel:.1f} us in kernels "
              f"({kernel / floor_us:.2f}x floor), err {layers_row['err']:.1e}", flush=True)
    torch_us = 1e3 * median_ms(torch, graphed(torch, torch_runner(torch, n, k, args.layers, x)), args.replays)
    results["rows"].append({"system": "torch-fp16", "us": torch_us})
    print(f"torch fp16 linear+GELU a layer: {torch_us:.1f} us", flush=True)

    best = None
    for per_sm, warps, prefetch, barrier, words in itertools.product(
            [int(v) for v in args.per_sm.split(",") if v], map(int, args.warps.split(",")),
            map(int, args.prefetch.split(",")), args.barrier.split(","), map(int, args.chain_words.split(","))):
        try:
            spec = chain_spec(layers, n, k, args.group, per_sm, sms, warps, bool(prefetch), barrier, bool(words))
        except ValueError as e:
            print(f"  {per_sm} a SM, {warps} warps, prefetch {prefetch}, barrier {barrier}: {e}", flush=True)
            continue
        try:
            body, out = chain_runner(torch, spec, layers, x)
            body()
            torch.cuda.synchronize()
            err = rel_err(torch, out, ref)
            replay = graphed(torch, body)
            us = 1e3 * median_ms(torch, replay, args.replays)
        except Exception as e:  # a configuration Triton cannot build
            results["rows"].append({"system": "chain", "per_sm": per_sm, "warps": warps, "prefetch": prefetch,
                                    "barrier": barrier, "error": str(e)[:300]})
            print(f"  {per_sm} a SM, {warps} warps, prefetch {prefetch}, barrier {barrier}: failed: {str(e)[:300]}", flush=True)
            continue
        row = {"system": "chain", "per_sm": per_sm, "programs": spec.programs, "warps": warps, "prefetch": prefetch,
               "barrier": barrier, "words": words, "block_n": spec.block_n(0), "us": us, "err": err}
        results["rows"].append(row)
        print(f"  chain {per_sm} a SM ({spec.programs} programs, {spec.block_n(0)} rows each), {warps} warps, "
              f"prefetch {prefetch}, barrier {barrier}, words {words}: {us:.1f} us ({us / floor_us:.2f}x floor), err {err:.1e}", flush=True)
        if err < 2e-3 and barrier != "none" and (best is None or us < best[0]["us"]):
            best = (row, replay)
    if best:
        row, replay = best
        row["kernel_us"] = kernel_times(torch, replay)
        kernel = sum(v for name, v in row["kernel_us"].items() if "chain" in name)
        print(f"best chain: {row['us']:.1f} us a replay, {kernel:.1f} us in the kernel ({kernel / floor_us:.2f}x the "
              f"floor)", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "chain_sweep.json"), "w") as f:
        json.dump(results, f, indent=1)
    wrong = [r for r in results["rows"] if r.get("err", 0) >= 2e-3 and r.get("barrier") != "none"]
    print(f"{len(results['rows'])} rows, {len(wrong)} wrong")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
