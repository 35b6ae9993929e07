"""The serving options `inferx-bench` and `inferx-serve` share: devices, batching, instances,
CPU workers; parsed into one `ServiceOptions`."""

from __future__ import annotations

import argparse


def add_serving_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", action="append", default=None,
                   help="device to serve on: cpu, cpu:sync, cuda, cuda:N (repeat for several lanes under one "
                        "scheduler)")
    p.add_argument("--no-batching", action="store_true", help="run every request alone")
    p.add_argument("--max-batch-size", type=int, default=None)
    p.add_argument("--max-queue-delay-us", type=int, default=None)
    p.add_argument("--pipeline-depth", type=int, default=None,
                   help="batches in flight per device (default 2 on GPUs, 1 on CPUs)")
    p.add_argument("--instances", type=int, default=None,
                   help="model instances per device sharing its queue, one batch running on each "
                        "(default: one per core for cpu:sync, else 1)")
    p.add_argument("--cpu-workers", type=int, default=None,
                   help="IREE CPU worker threads (default one per core; on a small machine, one core "
                        "fewer leaves room for the serving threads)")


def service_options(args: argparse.Namespace, **extra):
    """The ServiceOptions the parsed serving arguments ask for (`extra`: tool-specific fields)."""
    from inferx_compiler.runtime.service import ServiceOptions

    return ServiceOptions(devices=args.device or (None,), batching=not args.no_batching,
                          max_batch_size=args.max_batch_size, max_queue_delay_us=args.max_queue_delay_us,
                          pipeline_depth=args.pipeline_depth, cpu_workers=args.cpu_workers,
                          instances=args.instances, **extra)
