"""The serving options `inferx-bench` and `inferx-serve` share: devices, batching, instances,
CPU workers; a click decorator (`@serving_options`) adds them to a command, and
`service_options(args)` turns the parsed values into one `ServiceOptions`."""

from __future__ import annotations

from typing import Callable

import click


def _devices(ctx, param, value):
    """click callback: every --device is a device string the runtime knows."""
    from inferx_compiler.errors import DeviceError
    from inferx_compiler.runtime.devices import parse_device

    for text in value:
        try:
            parse_device(text)
        except DeviceError as e:
            raise click.BadParameter(str(e), ctx=ctx, param=param) from None
    return value


_OPTIONS = [
    click.option("--device", multiple=True, callback=_devices, metavar="DEVICE",
                 help="device to serve on: cpu, cpu:sync, cpu:task, cuda, cuda:N (repeat for several "
                      "lanes under one scheduler; default: the artifact's target kind)"),
    click.option("--no-batching", is_flag=True, help="run every request alone"),
    click.option("--max-batch-size", type=click.IntRange(min=1), metavar="N",
                 help="largest batch formed (default: from the artifact's bucket table)"),
    click.option("--max-queue-delay-us", type=click.IntRange(min=0), metavar="US",
                 help="longest a request waits for a batch to fill (default: from the artifact's "
                      "bucket table)"),
    click.option("--pipeline-depth", type=click.IntRange(min=1), metavar="N",
                 help="batches in flight per device (default 2 on GPUs, 1 on CPUs)"),
    click.option("--instances", type=click.IntRange(min=1), metavar="N",
                 help="model instances per device sharing its queue, one batch running on each "
                      "(default: one per core for cpu:sync, else 1)"),
    click.option("--cpu-workers", type=click.IntRange(min=1), metavar="N",
                 help="IREE CPU worker threads (default one per core; on a small machine, one core "
                      "fewer leaves room for the serving threads)"),
]


def serving_options(command: Callable) -> Callable:
    """click decorator: add the shared serving options, in this order, where it stands among the
    command's own decorators."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def service_options(args, **extra):
    """The ServiceOptions the parsed serving options ask for (`args`: the command's namespace;
    `extra`: tool-specific fields)."""
    from inferx_compiler.runtime.service import ServiceOptions

    return ServiceOptions(devices=tuple(args.device or ()) or (None,), batching=not args.no_batching,
                          max_batch_size=args.max_batch_size, max_queue_delay_us=args.max_queue_delay_us,
                          pipeline_depth=args.pipeline_depth, cpu_workers=args.cpu_workers,
                          instances=args.instances, **extra)
