"""The decode paged-attention kernel alone on a GPU: correctness against torch, time against
PyTorch's SDPA on the same keys and values, and the bytes' floor.

Run on the device machine (Triton JIT-compiles the kernel there; the inferx wheel on the path):

    python3 tools/bench/gpu_paged_attention.py --json $OUT/paged_attention.json

Per shape: a cache of random fp16 values in randomly permuted blocks of 16 rows, random queries
(fresh draws per check, outputs poisoned with NaN first), the two launches' output (the splits
with the step's own key and value, then their combine) against a float64 softmax over the
gathered keys (relative L2); then medians (triton.testing.do_bench) of the two launches, of torch SDPA over a contiguous [B, H, context, D] copy
of the same keys and values (enable_gqa: what transformers' static cache attends to, without
its masked tail), and the floor: the keys and values read once at the measured copy rate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

SHAPES = [  # (batch, heads, kv heads, head_dim, context, window)
    (1, 32, 8, 128, 2048, 0), (8, 32, 8, 128, 2048, 0), (32, 32, 8, 128, 2048, 0),
    (1, 32, 8, 128, 512, 0), (4, 9, 3, 64, 700, 0), (2, 14, 2, 64, 300, 96), (3, 32, 32, 128, 1000, 0),
]
BLOCK = 16
# cpu: the checks only, in Triton's interpreter (TRITON_INTERPRET=1), to try the script here
DEVICE = os.environ.get("PAGED_BENCH_DEVICE", "cuda")


def copy_rate() -> float:
    """Bytes a second of a 1 GiB device-to-device copy (read + write counted)."""
    import torch
    import triton

    a = torch.empty(1 << 29, dtype=torch.float16, device="cuda")
    b = torch.empty_like(a)
    ms = triton.testing.do_bench(lambda: b.copy_(a), return_mode="median")
    return 2 * a.numel() * 2 / (ms * 1e-3)


def case(batch, heads, kv_heads, head_dim, context, window, sms, rate):
    import torch
    import torch.nn.functional as F
    import triton

    from inferx_compiler.frontend.llm.paged_attention import KernelAttention, partials_reference
    from inferx_compiler.kernels.triton_paged_attention import (CombineSpec, PagedAttentionSpec, combine_kernel,
                                                                kernel_function)

    dev = DEVICE
    width = -(-(context + 1) // BLOCK)
    blocks = 1 + batch * width
    layers = 2
    gen = torch.Generator(device=dev).manual_seed(batch * 1000 + context)
    cache = torch.randn(layers, 2, blocks, kv_heads, BLOCK, head_dim, generator=gen, device=dev).half()
    table = (1 + torch.randperm(blocks - 1, generator=torch.Generator().manual_seed(context))[: batch * width]).view(
        batch, width).to(dev)
    start = torch.full((batch,), context, dtype=torch.int64, device=dev)
    start[0] = max(1, context // 3)  # a ragged batch: the first sequence shorter
    layer = torch.tensor([1], dtype=torch.int32, device=dev)
    splits = KernelAttention(sms).splits(batch, kv_heads, width * BLOCK)
    spec = PagedAttentionSpec(batch, kv_heads, heads // kv_heads, head_dim, BLOCK, width, blocks, layers, splits,
                              window)
    kernel, combine = kernel_function(), kernel_function(combine_kernel)
    cspec = CombineSpec.of(spec)
    acc = torch.full((batch, heads, splits, head_dim), float("nan"), device=dev)
    stats = torch.full((batch, heads, splits, 2), float("nan"), device=dev)
    q = (torch.randn(batch, heads, head_dim, generator=gen, device=dev) / head_dim ** 0.5).half()
    k_new = torch.randn(batch, kv_heads, 1, head_dim, generator=gen, device=dev).half()
    v_new = torch.randn(batch, kv_heads, 1, head_dim, generator=gen, device=dev).half()

    out = torch.full_like(q, float("nan"))

    def run():
        kernel[spec.grid[:2]](q, k_new, v_new, cache, table, start, layer, acc, stats, **spec.constants(),
                              num_warps=spec.warps, num_stages=spec.stages)
        combine[cspec.grid[:1]](acc, stats, out, **cspec.constants(), num_warps=cspec.warps)

    run()
    if dev == "cuda":
        torch.cuda.synchronize()
    ref = _reference(q, cache, table, start, 1, k_new, v_new, window)
    rel = float((out.double() - ref).norm() / ref.norm())
    racc, rstats = partials_reference(q, k_new, v_new, cache, table, start, layer, splits, window)
    stats_err = float((stats - rstats).abs().max())
    row = dict(batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim, context=context, window=window,
               splits=splits, rel_l2=rel, stats_max_err=stats_err, nan=bool(torch.isnan(out).any()))
    if dev != "cuda":
        return row
    ms_kernel = triton.testing.do_bench(run, return_mode="median")
    g = heads // kv_heads
    keys = torch.randn(batch, kv_heads, context, head_dim, generator=gen, device=dev).half()
    values = torch.randn_like(keys)
    q4 = q.view(batch, heads, 1, head_dim)
    ms_sdpa = triton.testing.do_bench(lambda: F.scaled_dot_product_attention(q4, keys, values, enable_gqa=g > 1),
                                      return_mode="median")
    read = 2 * int(start.sum()) * kv_heads * head_dim * 2
    row.update(kernel_us=1e3 * ms_kernel, sdpa_us=1e3 * ms_sdpa,
               floor_us=1e6 * read / rate)
    return row


PREFILL_SHAPES = [  # (batch, heads, kv heads, head_dim, chunk, start, window)
    (1, 32, 8, 128, 512, 0, 0), (1, 32, 8, 128, 512, 1536, 0), (1, 32, 8, 128, 128, 1920, 0), (2, 14, 2, 64, 100, 40, 32),
]


def prefill_case(batch, heads, kv_heads, head_dim, length, first, window, rate):
    """The prefill kernel against the decoder's attention (prefill_reference) and, for time, torch
    SDPA (causal) over a contiguous copy of the same keys (cache + chunk)."""
    import torch
    import torch.nn.functional as F
    import triton

    from inferx_compiler.frontend.llm.paged_attention import prefill_reference
    from inferx_compiler.kernels.triton_prefill_attention import PrefillAttentionSpec, kernel_function

    dev = DEVICE
    width = -(-(first + length) // BLOCK)
    blocks = 1 + batch * width
    gen = torch.Generator(device=dev).manual_seed(length + first)
    cache = torch.randn(2, 2, blocks, kv_heads, BLOCK, head_dim, generator=gen, device=dev).half()
    table = (1 + torch.randperm(blocks - 1, generator=torch.Generator().manual_seed(first))[: batch * width]).view(
        batch, width).to(dev)
    start = torch.full((batch,), first, dtype=torch.int64, device=dev)
    layer = torch.tensor([1], dtype=torch.int32, device=dev)
    q = (torch.randn(batch, heads, length, head_dim, generator=gen, device=dev) / head_dim ** 0.5).half()
    k = torch.randn(batch, kv_heads, length, head_dim, generator=gen, device=dev).half()
    v = torch.randn_like(k)
    spec = PrefillAttentionSpec(batch, length, kv_heads, heads // kv_heads, head_dim, BLOCK, width, blocks, 2, window)
    out = torch.full_like(q, float("nan"))
    kernel = kernel_function()

    def run():
        kernel[spec.grid[:2]](q, k, v, cache, table, start, layer, out, **spec.constants(), num_warps=spec.warps,
                              num_stages=spec.stages)

    run()
    ref = prefill_reference(q, k, v, cache, table, start, layer, window).float()
    rel = float((out.float() - ref).norm() / ref.norm())
    row = dict(kind="prefill", batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim, chunk=length,
               start=first, window=window, rel_l2=rel, nan=bool(torch.isnan(out).any()))
    if dev != "cuda":
        return row
    ms = triton.testing.do_bench(run, return_mode="median")
    keys = torch.randn(batch, heads, first + length, head_dim, generator=gen, device=dev).half()
    mask = torch.ones(length, first + length, dtype=torch.bool, device=dev).tril(first)
    ms_sdpa = triton.testing.do_bench(lambda: F.scaled_dot_product_attention(q, keys, keys, attn_mask=mask),
                                      return_mode="median")
    flops = 4 * batch * heads * length * (first + length / 2) * head_dim
    row.update(kernel_us=1e3 * ms, sdpa_masked_us=1e3 * ms_sdpa, tflops=flops / (ms * 1e-3) / 1e12)
    return row


def _reference(q, cache, table, start, layer, k_new, v_new, window):
    """float64 softmax attention of each query over its visible cached keys and its own new key."""
    import torch

    from inferx_compiler.frontend.llm.attention import read_blocks

    B, H, D = q.shape
    kvh = cache.shape[3]
    g = H // kvh
    keys = torch.cat([read_blocks(cache[layer, 0], table).double(), k_new.double()], dim=2)  # [B, kvh, P+1, D]
    values = torch.cat([read_blocks(cache[layer, 1], table).double(), v_new.double()], dim=2)
    P = keys.shape[2] - 1
    scores = torch.matmul(q.double().view(B, kvh, g, D), keys.transpose(-1, -2))  # [B, kvh, g, P+1]
    pos = torch.arange(P, device=q.device)[None, :]
    visible = pos < start[:, None]
    if window:
        visible &= pos > start[:, None] - window
    visible = torch.cat([visible, torch.ones(B, 1, dtype=torch.bool, device=q.device)], dim=1)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    return torch.matmul(torch.softmax(scores, -1), values).reshape(B, H, D)


def main(argv=None) -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", required=True)
    a = ap.parse_args(argv)
    if DEVICE != "cuda":  # the checks only
        for shape in SHAPES[3:]:
            print(case(*shape, 132, 1.0), flush=True)
        for shape in PREFILL_SHAPES[3:]:
            print(prefill_case(*shape, 1.0), flush=True)
        return 0
    props = torch.cuda.get_device_properties(0)
    rate = copy_rate()
    rows = []
    print(f"{props.name}, {props.multi_processor_count} SMs, copy rate {rate / 1e12:.2f} TB/s", flush=True)
    print("   B  H/kvh   D  ctx  win split   rel_l2  kernels us  sdpa us  floor us", flush=True)
    for shape in SHAPES:
        r = case(*shape, props.multi_processor_count, rate)
        rows.append(r)
        print(f"{r['batch']:4d} {r['heads']:3d}/{r['kv_heads']:<3d} {r['head_dim']:3d} {r['context']:4d} {r['window']:4d} "
              f"{r['splits']:5d} {r['rel_l2']:8.1e} {r['kernel_us']:11.1f} {r['sdpa_us']:8.1f} {r['floor_us']:9.1f}",
              flush=True)
    print("prefill:  B  H/kvh   D chunk start win   rel_l2  kernel us  sdpa(masked) us  TFLOP/s", flush=True)
    for shape in PREFILL_SHAPES:
        r = prefill_case(*shape, rate)
        rows.append(r)
        print(f"        {r['batch']:3d} {r['heads']:3d}/{r['kv_heads']:<3d} {r['head_dim']:3d} {r['chunk']:5d} {r['start']:5d} "
              f"{r['window']:3d} {r['rel_l2']:8.1e} {r['kernel_us']:10.1f} {r['sdpa_masked_us']:16.1f} "
              f"{r['tflops']:8.1f}", flush=True)
    with open(a.json, "w") as f:
        json.dump({"gpu": props.name, "sms": props.multi_processor_count, "copy_rate": rate, "torch": torch.__version__,
                   "rows": rows}, f, indent=1)
    bad = [r for r in rows if not r["rel_l2"] < 2e-3 or r["nan"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
