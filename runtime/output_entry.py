"""A module's `$into` function (passes/output_entry.py): results written into caller buffers
and, where the function takes it, the call's transient storage passed in.

An entry built with `transients=true` ends with a `!hal.buffer` argument in which IREE places
every intermediate tensor of the call; its size is in the function's reflection
(`iree.abi.transients.size.constant`, or the function named by `iree.abi.transients.size`,
which takes the entry's own arguments). The buffer is allocated on the first call and kept
(a larger one allocated when a call needs more): calls of one session are serialized, so one
buffer per function serves them all. IREE's Python `FunctionInvoker` cannot pass a HAL
buffer, so such an entry is invoked through a VM argument list.
"""

from __future__ import annotations

SIZE_CONSTANT = "iree.abi.transients.size.constant"
SIZE_FUNCTION = "iree.abi.transients.size"


class OutputEntry:
    def __init__(self, rt, context, device, module, function):
        self._rt = rt
        self._context = context
        self._device = device
        self.vm_function = function
        self.invoker = rt.FunctionInvoker(context, device, function)
        reflection = function.reflection
        self.takes_transients = SIZE_FUNCTION in reflection or SIZE_CONSTANT in reflection
        self._constant = int(reflection.get(SIZE_CONSTANT, 0) or 0)
        name = reflection.get(SIZE_FUNCTION)
        self._size_function = module.lookup_function(name) if name else None
        self._storage = None
        self._storage_bytes = -1

    @property
    def storage_bytes(self) -> int:
        """Bytes of transient storage allocated for this function so far."""
        return max(self._storage_bytes, 0)

    def __call__(self, *views):
        """Invoke on buffer views (inputs, then outputs); the results as the invoker gives them."""
        if not self.takes_transients:
            return self.invoker(*views)
        args = self.arguments(views)
        results = self._rt.VmVariantList(len(views))
        self._context.invoke(self.vm_function, args, results)
        from iree.runtime.array_interop import DeviceArray

        arrays = tuple(DeviceArray(self._device, results.get_as_object(i, self._rt.HalBufferView))
                       for i in range(results.size))
        return arrays[0] if len(arrays) == 1 else arrays

    def arguments(self, views) -> "object":
        """The VM argument list for these buffer views, the transient storage last (when taken)."""
        args = self._rt.VmVariantList(len(views) + 1)
        for view in views:
            args.push_ref(view)
        if self.takes_transients:
            args.push_ref(self.storage(views))
        return args

    def storage(self, views):
        """The transient storage for a call on these views (allocated, or grown, as needed)."""
        needed = self._constant if self._constant > 0 else self._measured(views)
        if needed > self._storage_bytes:
            rt = self._rt
            self._storage = self._device.allocator.allocate_buffer(
                memory_type=int(rt.MemoryType.DEVICE_LOCAL), allowed_usage=int(rt.BufferUsage.DEFAULT),
                allocation_size=max(needed, 1))
            self._storage_bytes = needed
        return self._storage

    def _measured(self, views) -> int:
        """The size function's answer for these arguments (0 without one)."""
        if self._size_function is None:
            return 0
        if self._storage is None:  # the size function takes the storage argument too: any buffer
            self._storage = self._device.allocator.allocate_buffer(
                memory_type=int(self._rt.MemoryType.DEVICE_LOCAL),
                allowed_usage=int(self._rt.BufferUsage.DEFAULT), allocation_size=1)
            self._storage_bytes = 0
        args = self._rt.VmVariantList(len(views) + 1)
        for view in views:
            args.push_ref(view)
        args.push_ref(self._storage)
        result = self._rt.VmVariantList(1)
        self._context.invoke(self._size_function, args, result)
        return int(result.get_variant(0))
