"""Per-kernel GPU times of any callable, read through CUPTI (torch.profiler).

IREE 3.13's CUDA HAL has no dispatch profiling ("CUDA HAL-native profiling is not implemented"),
but CUPTI's activity records cover every kernel launched in the process, whoever launched it:
IREE's HAL (streams or CUDA graphs), cuBLAS, inductor. So the same measurement serves plain IREE,
inferx and PyTorch, and tells apart the two ways a call is slow:

  gpu_busy_ms   kernel time per call (sum of kernel durations; overlapping kernels counted twice)
  span_ms       first kernel start to last kernel end, per call (the GPU's view of the call)
  kernels       kernels per call (IREE: dispatches; a memcpy/memset is not a kernel)

A wall time well above span_ms is host-side cost (launches, VM, synchronization); span_ms well
above gpu_busy_ms is the GPU idling between kernels (launch-bound); gpu_busy_ms itself is the
kernels' quality.
"""

from __future__ import annotations

import collections
import re


def _short(name: str) -> str:
    """A kernel name a table can hold: IREE's `main$async_dispatch_12_matmul_128x768x768_f16xf16xf32`
    keeps its dispatch part; C++ names lose template arguments."""
    name = re.sub(r"^.*?(dispatch_\d+)", r"\1", name)
    name = re.sub(r"<.*>", "<>", name)
    return name[:90]


def profile_kernels(call, calls: int = 20, top: int = 8) -> dict:
    """Run `call()` `calls` times under CUPTI and return per-call kernel figures (see module doc)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA" and not _is_copy(e.name)]
    if not kernels:
        return {"kernels": 0, "note": "CUPTI recorded no kernel (profiler unavailable here?)"}
    kernels.sort(key=lambda e: e.time_range.start)
    per_kernel = collections.defaultdict(lambda: [0, 0.0])
    for e in kernels:
        rec = per_kernel[_short(e.name)]
        rec[0] += 1
        rec[1] += e.time_range.elapsed_us()
    busy_us = sum(r[1] for r in per_kernel.values())
    n = len(kernels)
    per_call = n // calls
    spans = []
    if per_call and n == per_call * calls:  # calls are separable: same kernel count every call
        for i in range(calls):
            chunk = kernels[i * per_call:(i + 1) * per_call]
            spans.append(max(e.time_range.end for e in chunk) - chunk[0].time_range.start)
    ranked = sorted(per_kernel.items(), key=lambda kv: -kv[1][1])[:top]
    return {
        "kernels": n / calls,
        "gpu_busy_ms": busy_us / calls / 1e3,
        "span_ms": (sorted(spans)[len(spans) // 2] / 1e3) if spans else None,
        "top": [{"kernel": k, "per_call": c / calls, "ms_per_call": us / calls / 1e3, "share": us / busy_us}
                for k, (c, us) in ranked],
    }


def _is_copy(name: str) -> bool:
    return name.startswith(("Memcpy", "Memset", "[memcpy", "[memset")) or "memcpy" in name.lower()[:12]


def markdown(rows) -> str:
    """The per-call kernel table for rows carrying `kernel_profile`, then each row's top kernels."""
    rows = [r for r in rows if r.get("kernel_profile", {}).get("kernels")]
    if not rows:
        return ""
    out = ["", "## GPU kernels per call (CUPTI via torch.profiler; tools/bench/gpu_kernels.py)", "",
           "| model | batch | system | wall ms (dev median) | GPU span ms | kernel busy ms | kernels/call | host+gaps ms |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        kp = r["kernel_profile"]
        wall = r.get("median_ms")
        span = kp.get("span_ms")
        gap = f"{wall - kp['gpu_busy_ms']:.3f}" if wall is not None else "-"
        out.append(f"| {r['model']} | {r['batch']} | {r['system']} | {wall:.3f} | "
                   f"{span:.3f} | {kp['gpu_busy_ms']:.3f} | {kp['kernels']:.0f} | {gap} |"
                   if wall is not None and span is not None else
                   f"| {r['model']} | {r['batch']} | {r['system']} | - | - | {kp['gpu_busy_ms']:.3f} | {kp['kernels']:.0f} | - |")
    for r in rows:
        out += ["", f"### {r['model']} b{r['batch']} {r['system']}: top kernels", "",
                "| kernel | per call | ms per call | share of busy |", "| --- | --- | --- | --- |"]
        out += [f"| `{t['kernel']}` | {t['per_call']:.0f} | {t['ms_per_call']:.3f} | {t['share']:.0%} |"
                for t in r["kernel_profile"]["top"]]
    return "\n".join(out) + "\n"
