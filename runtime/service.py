"""One artifact served on one or several devices: a session, a batcher lane per device, one
scheduler; the batching configuration derived from the artifact's bucket table unless
overridden. `inferx-bench` and `inferx-serve` both stand on this.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from inferx_compiler.tensor_spec import TensorSpec
from inferx_compiler.runtime.batching import BatchingConfig
from inferx_compiler.runtime.scheduler import Scheduler


@dataclass(frozen=True)
class ServiceOptions:
    devices: Sequence[Optional[str]] = (None,)  # None: the artifact's target kind
    batching: bool = True  # False: every request runs alone (same queue and worker)
    rows_per_request: int = 1  # without batching: the batch a request runs at
    max_batch_size: Optional[int] = None
    max_queue_delay_us: Optional[int] = None
    pipeline_depth: Optional[int] = None
    cpu_workers: Optional[int] = None
    # Model instances per device (Triton's instance_group count): sessions sharing the device's
    # queue, one batch running on each at once. None: one per core for `cpu:sync` (a call runs
    # in its caller's thread), one elsewhere (`cpu` and GPUs spread a call over the device).
    instances: Optional[int] = None


class Service:
    def __init__(self, artifact: str, options: ServiceOptions = ServiceOptions()):
        from inferx_compiler.runtime.scheduler import lane_for_sessions

        if options.cpu_workers is not None:
            from inferx_compiler.runtime.devices import configure_cpu

            configure_cpu(options.cpu_workers)
        self.artifact = artifact
        self.instances = [load_instances(artifact, d, options.instances) for d in (options.devices or (None,))]
        self.sessions = [group[0] for group in self.instances]  # one per device
        requested = batching_config(self.sessions[0], options)
        lanes = [lane_for_sessions(group, requested, name=f"{group[0].device}#{i}")
                 for i, group in enumerate(self.instances)]
        self.scheduler = Scheduler(lanes)
        self.config = lanes[0].batcher.config  # as in force (a model that cannot batch runs requests alone)

    @property
    def inputs(self) -> list[TensorSpec]:
        return self.sessions[0].inputs

    @property
    def outputs(self) -> list[TensorSpec]:
        return self.sessions[0].outputs

    @property
    def devices(self) -> list[str]:
        return [s.device for s in self.sessions]

    def run(self, feeds: dict) -> dict:
        return self.scheduler.run(feeds)

    def submit(self, feeds: dict):
        return self.scheduler.submit(feeds)

    def stats(self) -> dict:
        """Batching figures summed over the lanes."""
        lanes = [lane.batcher.stats for lane in self.scheduler.lanes]
        rows, batches = sum(s.rows for s in lanes), sum(s.batches for s in lanes)
        padded = sum(s.padded_rows for s in lanes)
        def across(values, reduce) -> float:
            return float(reduce(values)) if batches else float("nan")

        return {**batch_figures(rows, batches, padded),
                "median_batch_exec_ms": across([s.exec_ms(50) for s in lanes], np.nanmedian),
                "p99_batch_exec_ms": across([s.exec_ms(99) for s in lanes], np.nanmax),
                "median_batch_service_ms": across([s.service_ms(50) for s in lanes], np.nanmedian),
                "routed": dict(self.scheduler.routed)}

    def close(self) -> None:
        self.scheduler.close()


def load_instances(artifact: str, device: Optional[str], requested: Optional[int]) -> list:
    """The sessions serving one device: the artifact loaded once per model instance."""
    from inferx_compiler.runtime.session import load

    first = load(artifact, device=device)
    return [first] + [load(artifact, device=first.device)
                      for _ in range(instance_count(first.device_spec, requested) - 1)]


def instance_count(spec, requested: Optional[int]) -> int:
    """Model instances on a device: as requested, else one per core for `cpu:sync`, else one."""
    import os

    if requested is not None:
        if requested < 1:
            from inferx_compiler.errors import InputValidationError

            raise InputValidationError(f"instances must be >= 1, got {requested}")
        return requested
    return (os.cpu_count() or 1) if spec.sync else 1


def batch_figures(rows: int, batches: int, padded_rows: int) -> dict:
    """rows, batches, padded_rows, mean_batch and padding_waste from the three counts."""
    return {"rows": rows, "batches": batches, "padded_rows": padded_rows,
            "mean_batch": rows / batches if batches else 0.0,
            "padding_waste": padded_rows / (rows + padded_rows) if rows + padded_rows else 0.0}


def batching_config(session, options: ServiceOptions) -> BatchingConfig:
    """Defaults from the artifact's bucket table (re-measured on this device when they are
    estimates), then the options' overrides."""
    from inferx_compiler.runtime.bucket_table import default_batching, serving_buckets

    buckets = serving_buckets(session)
    config = default_batching(buckets)[0] if buckets else BatchingConfig()
    if not options.batching:  # same queue and worker, one request per run
        config = BatchingConfig(max_batch_size=max(1, options.rows_per_request), max_queue_delay_us=0,
                                max_queue_size=config.max_queue_size)
    overrides = {}
    if options.max_batch_size and options.batching:
        overrides["max_batch_size"] = options.max_batch_size
        overrides["preferred_batch_sizes"] = tuple(s for s in config.preferred_batch_sizes
                                                   if s <= options.max_batch_size)
    if options.max_queue_delay_us is not None and options.batching:
        overrides["max_queue_delay_us"] = options.max_queue_delay_us
    if options.pipeline_depth is not None:
        overrides["pipeline_depth"] = options.pipeline_depth
    return dataclasses.replace(config, **overrides) if overrides else config
