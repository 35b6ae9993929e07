"""Input and output buffers allocated once per shape signature and reused on every later call.

A batch bucket (e.g. all inputs at batch 8) maps to one set of host-visible,
device-visible HAL buffers, mapped for the session's lifetime. A call copies the host
arrays into the input mappings and hands the same buffer views to the module; when the
module has an entry with caller-provided result storage (`@main$into`) and the output
shapes follow from the input shapes, the results land in output buffers of the same entry.
No device buffer is allocated per call for a shape already seen.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np


@dataclass
class _Staged:
    host_views: list  # writable numpy views of the mapped input buffers
    buffer_views: list  # input HalBufferViews handed to the module
    mappings: list  # keep the MappedMemory objects alive
    output_views: list | None = None  # output HalBufferViews (result storage), if any
    output_host_views: list | None = None  # numpy views of the output buffers' mappings
    output_mappings: list | None = None


class StagingBuffers:
    def __init__(self, device):
        self._device = device
        self._entries: dict[tuple, _Staged] = {}
        self._lock = threading.Lock()
        self.allocations = 0  # number of buffers ever allocated (tests read it)

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, signature: list[tuple], slot: int = 0, outputs: list[tuple] | None = None) -> _Staged:
        """The buffers for inputs of these (shape, dtype)s in `slot` (separate buffers for
        callers that fill them concurrently), plus output buffers of the (shape, dtype)s in
        `outputs` when given; allocated on first use."""
        key = (slot,) + tuple((tuple(shape), np.dtype(dtype).str) for shape, dtype in signature)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = self._allocate(signature)
                if outputs is not None:
                    staged = self._allocate(outputs)
                    entry.output_views = staged.buffer_views
                    entry.output_host_views, entry.output_mappings = staged.host_views, staged.mappings
        return entry

    def _allocate(self, signature: list[tuple]) -> _Staged:
        import iree.runtime as rt
        from iree.runtime.array_interop import map_dtype_to_element_type

        memory = int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE)
        usage = int(rt.BufferUsage.DEFAULT | rt.BufferUsage.MAPPING)
        host_views, buffer_views, mappings = [], [], []
        for shape, dtype in signature:
            shape, dtype = list(shape), np.dtype(dtype)
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            buf = self._device.allocator.allocate_buffer(
                memory_type=memory, allowed_usage=usage, allocation_size=max(nbytes, 1))
            self.allocations += 1
            mapping = buf.map()
            host_views.append(mapping.asarray(shape, dtype))
            buffer_views.append(rt.HalBufferView(buf, shape, map_dtype_to_element_type(dtype)))
            mappings.append(mapping)
        return _Staged(host_views, buffer_views, mappings)


def write_rows(view: np.ndarray, arrays: list[np.ndarray], rows: int) -> None:
    """Fill `view` (a bucket's rows) with the arrays' `rows` rows in order, then repeat the last
    row to the end (padding to the bucket)."""
    if len(arrays) == 1:
        np.copyto(view[:rows], arrays[0])
    else:
        np.concatenate(arrays, axis=0, out=view[:rows])
    if rows < view.shape[0]:
        view[rows:] = view[rows - 1]


def concat_padded(arrays: list[np.ndarray], rows: int, bucket: int) -> np.ndarray:
    """The arrays concatenated along the batch dim and padded to `bucket` rows (a new array)."""
    out = np.empty((bucket,) + arrays[0].shape[1:], arrays[0].dtype)
    write_rows(out, arrays, rows)
    return out
