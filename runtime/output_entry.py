"""A module's `$into` function (passes/output_entry.py): results written into caller buffers
and, where the function takes it, the call's transient storage passed in.

An entry built with `transients=true` (static-shape functions only) ends with a `!hal.buffer`
argument in which IREE places every intermediate tensor of the call; its size is a constant
in the function's reflection (`iree.abi.transients.size.constant`). The buffer is allocated
on the first call and kept: calls of one session are serialized, so one buffer per function
serves them all. IREE's Python `FunctionInvoker` cannot pass a HAL buffer, so such an entry
is invoked through a VM argument list.
"""

from __future__ import annotations

from inferx_compiler.errors import ArtifactError

SIZE_CONSTANT = "iree.abi.transients.size.constant"
SIZE_FUNCTION = "iree.abi.transients.size"


class OutputEntry:
    def __init__(self, rt, context, device, function):
        self._rt = rt
        self._context = context
        self._device = device
        self.vm_function = function
        self.invoker = rt.FunctionInvoker(context, device, function)
        reflection = function.reflection
        self.takes_transients = SIZE_FUNCTION in reflection or SIZE_CONSTANT in reflection
        if self.takes_transients and SIZE_CONSTANT not in reflection:
            raise ArtifactError(f"module function '{function.name}' takes transient storage of a size "
                                f"computed per call, which this runtime does not provide")
        self._bytes = int(reflection.get(SIZE_CONSTANT, 0) or 0)
        self._storage = None

    @property
    def storage_bytes(self) -> int:
        """Bytes of transient storage allocated for this function so far."""
        return self._bytes if self._storage is not None else 0

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
            args.push_ref(self.storage())
        return args

    def storage(self):
        """The transient storage (allocated on first use)."""
        if self._storage is None:
            rt = self._rt
            self._storage = self._device.allocator.allocate_buffer(
                memory_type=int(rt.MemoryType.DEVICE_LOCAL), allowed_usage=int(rt.BufferUsage.DEFAULT),
                allocation_size=max(self._bytes, 1))
        return self._storage
