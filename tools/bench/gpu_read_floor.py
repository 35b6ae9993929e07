"""What reading a chain of weight layers costs on a GPU host with nothing else to do: the floor
the int4 matrix-vector kernel is measured against, in launches of the same shape.

    python tools/bench/gpu_read_floor.py --out $OUT        # on the GPU host (torch + Triton)

For LAYERS buffers of BYTES each (8 x 8 MiB by default: the 8x4096^2 MLP's int4 weights) it times,
as CUDA graph replays (device events, median):
  - one read kernel a layer (each program sums its slice of 16-byte words into one value), for
    several programs-per-launch counts: the cost of streaming each layer in a launch of its own;
  - one read kernel over all layers at once (the same bytes, one launch);
  - an empty kernel a layer: the launch cost inside a graph.
The difference between the first and the second is what the chain's launch boundaries cost.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_dequant_sweep import graphed, median_ms  # noqa: E402  (CUDA-graph replays timed with events)


def _median_us(torch, fn, replays: int) -> float:
    return 1e3 * median_ms(torch, fn, replays)


def kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def read_sum(src, out, WORDS_PER_PROGRAM: tl.constexpr, BLOCK: tl.constexpr):
        """Each program sums WORDS_PER_PROGRAM int32 words (BLOCK at a time) into out[pid]."""
        pid = tl.program_id(0)
        base = pid * WORDS_PER_PROGRAM
        acc = tl.zeros((BLOCK,), dtype=tl.int32)
        for i in range(0, WORDS_PER_PROGRAM, BLOCK):
            acc += tl.load(src + base + i + tl.arange(0, BLOCK))
        tl.store(out + pid, tl.sum(acc))

    @triton.jit
    def empty(out):
        tl.store(out + tl.program_id(0), 0)

    return read_sum, empty


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--bytes", type=int, default=8 << 20)
    parser.add_argument("--programs", default="128,256,512,1024,2048,4096")
    parser.add_argument("--replays", type=int, default=100)
    args = parser.parse_args(argv)
    import torch

    read_sum, empty = kernels()
    words = args.bytes // 4
    layers = [torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32, device="cuda")
              for _ in range(args.layers)]
    whole = torch.cat(layers)
    results = {"device": torch.cuda.get_device_name(), "layers": args.layers, "bytes": args.bytes, "rows": []}
    for programs in map(int, args.programs.split(",")):
        per_program = words // programs
        block = min(1024, per_program & -per_program)  # a power of two that divides a program's share
        if per_program * programs != words or block < 128:
            continue
        outs = [torch.empty(programs, dtype=torch.int32, device="cuda") for _ in layers]

        def chain():
            for src, out in zip(layers, outs):
                read_sum[(programs,)](src, out, per_program, block, num_warps=4)

        total = torch.empty(programs * args.layers, dtype=torch.int32, device="cuda")

        def at_once():
            read_sum[(programs * args.layers,)](whole, total, per_program, block, num_warps=4)

        chain_us = _median_us(torch, graphed(torch, chain), args.replays)
        once_us = _median_us(torch, graphed(torch, at_once), args.replays)
        results["rows"].append({"programs": programs, "chain_us": chain_us, "at_once_us": once_us})
        print(f"{programs:5d} programs a layer: chain of {args.layers} launches {chain_us:6.1f} us "
              f"({args.layers * args.bytes / chain_us / 1e6:.2f} TB/s), one launch {once_us:6.1f} us "
              f"({args.layers * args.bytes / once_us / 1e6:.2f} TB/s)", flush=True)
    sink = torch.empty(1024, dtype=torch.int32, device="cuda")

    def launches():
        for _ in layers:
            empty[(132,)](sink)

    results["empty_chain_us"] = _median_us(torch, graphed(torch, launches), args.replays)
    print(f"{args.layers} empty launches: {results['empty_chain_us']:.1f} us", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "read_floor.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
