"""Load an artifact on a device and run it: names in, names out, like onnxruntime."""

from __future__ import annotations

import threading
import weakref

import numpy as np

from inferx_compiler.artifact.archive import open_for_running
from inferx_compiler.errors import ArtifactError
from inferx_compiler.tensor_spec import NARROW_CONTAINERS, TensorSpec, numpy_dtype
from inferx_compiler.runtime.buffers import StagingBuffers, concat_padded, write_rows
from inferx_compiler.runtime.call_thread import CallThread, call_nice
from inferx_compiler.runtime.output_entry import OutputEntry
from inferx_compiler.runtime.parameters import parameters_module
from inferx_compiler.runtime.devices import (bind_thread_to_device, check_compatible, choose_cpu_executor, default_device_for,
                      hal_device, parse_device)
from inferx_compiler.runtime.validation import strip_fixed_inputs, validate_feeds


class InferenceSession:
    """One artifact loaded on one device; keeps its VM context between calls."""

    def __init__(self, path, device: str | None = None, verify: str | None = None):
        import iree.runtime as rt

        # (a path, or an Artifact open_for_running returned: load() opens it once)
        self.artifact = open_for_running(path, verify) if isinstance(path, str) else path
        m = self.artifact.manifest
        backend = m.target.get("backend", "none")
        requested = parse_device(device or default_device_for(backend))
        check_compatible(requested, backend if m.executable else "none", m.target.get("name", "?"))
        self.device_spec = choose_cpu_executor(requested, _call_flops(m))
        self._device = hal_device(self.device_spec)
        self._instance = rt.VmInstance()
        modules = [rt.create_hal_module(self._instance, self._device)]
        if m.weights:
            modules.append(parameters_module(rt, self._instance, self.artifact, self))
        self._module = rt.VmModule.copy_buffer(self._instance, self.artifact.member_view(m.module))
        modules.append(self._module)
        self._context = rt.VmContext(self._instance, modules=modules)
        # --input-value: inputs built in as constants; run() accepts them at those values only
        self.fixed_inputs = {name: np.array(f["value"], numpy_dtype(f["dtype"])).reshape(f["shape"])
                             for name, f in (m.model.get("fixed_inputs") or {}).items()}
        self._invoker = self._function_invoker(rt, m.entry_function, required=True)
        self._into_invoker = self._output_entry(rt, m.output_entry_function)
        # Static-shape functions (specialization.py): (dims, invoker, output-entry invoker).
        self._static = [(f["dims"], self._function_invoker(rt, f["name"], required=True),
                         self._output_entry(rt, f.get("output_entry"))) for f in m.functions]
        self._chosen: dict[tuple, tuple] = {}  # input shapes -> (invoker, output-entry invoker)
        self._plans: dict[tuple, CallPlan | None] = {}  # input signature -> call plan (None: none)
        self._gathered_plans: dict[int, CallPlan | None] = {}  # id(staging entry) -> plan, for run_gathered
        self._staging = StagingBuffers(self._device)
        self._lock = threading.Lock()  # one invocation at a time; run()'s staging buffers are shared
        # calls on the worker pool from a thread of lower priority (call_thread.py: the waiting thread spins)
        pool = self.device_spec.kind == "cpu" and not self.device_spec.sync
        self._call = CallThread(call_nice() if pool else 0)
        weakref.finalize(self, self._call.stop)

    def _function_invoker(self, rt, name: str, required: bool = False):
        fn = self._module.lookup_function(name) if name else None
        if fn is None:
            if required:
                raise ArtifactError(f"{self.artifact.path}: module has no function '{name}'")
            return None
        return rt.FunctionInvoker(self._context, self._device, fn)

    def _output_entry(self, rt, name: str | None) -> OutputEntry | None:
        """The entry that writes results into caller buffers (and takes the call's transient
        storage), when the module has one and every output's dtype can be stored by the caller."""
        if not all(s.dtype in STORABLE_DTYPES for s in self.outputs):
            return None
        fn = self._module.lookup_function(name) if name else None
        return None if fn is None else OutputEntry(rt, self._context, self._device, fn)

    def _invokers_for(self, shapes: list[tuple]) -> tuple:
        """(invoker, output-entry invoker) of the function that runs inputs of these shapes: a
        static-shape function whose fixed dims match, else the dynamic entry function."""
        key = tuple(shapes)
        chosen = self._chosen.get(key)
        if chosen is None:
            values = self._dim_values(shapes)
            chosen = next(((inv, into) for dims, inv, into in self._static
                           if all(values.get(d) == size for d, size in dims.items())),
                          (self._invoker, self._into_invoker))
            self._chosen[key] = chosen
        return chosen

    def function_for(self, shapes: list[tuple]) -> str:
        """The name of the module function that runs inputs of these shapes."""
        invoker = self._invokers_for(shapes)[0]
        if invoker is self._invoker:
            return self.artifact.manifest.entry_function
        index = [inv for _, inv, _ in self._static].index(invoker)
        return self.artifact.manifest.functions[index]["name"]

    @property
    def inputs(self) -> list[TensorSpec]:
        return self.artifact.manifest.inputs

    @property
    def outputs(self) -> list[TensorSpec]:
        return self.artifact.manifest.outputs

    @property
    def output_buffers(self) -> bool:
        """Whether results land in buffers this session allocated once per shape (the module's
        `@main$into` entry), rather than in buffers the module allocates on every call."""
        return self._into_invoker is not None

    @property
    def buffer_allocations(self) -> int:
        """Device buffers this session has allocated for inputs and outputs so far."""
        return self._staging.allocations

    @property
    def transient_bytes(self) -> int:
        """Bytes of storage this session holds for its calls' intermediate tensors (allocated on
        a function's first call and reused; 0 for modules whose entries do not take it)."""
        entries = [self._into_invoker] + [into for _, _, into in self._static]
        return sum(e.storage_bytes for e in entries if e is not None)

    @property
    def device(self) -> str:
        return str(self.device_spec)

    def get_inputs(self):
        return self.inputs

    def get_outputs(self):
        return self.outputs

    def run(self, feeds: dict) -> dict[str, np.ndarray]:
        if self.fixed_inputs:
            feeds = strip_fixed_inputs(feeds, self.fixed_inputs)
        key = _signature(feeds) if type(feeds) is dict else None
        plan = self._plans.get(key)
        if plan is not None:
            result = self._run_plan(plan, key, feeds)
            if result is not None:
                return result
        return self._run_checked(feeds)

    def _run_plan(self, plan: "CallPlan", key: tuple, feeds: dict) -> dict[str, np.ndarray] | None:
        try:
            return plan.run(feeds)
        except ValueError:
            # The results do not fit the output buffers shaped from the manifest (a model whose
            # declared output shape is not what it computes): no plan for this signature; the
            # general path lets the module allocate the results.
            self._plans[key] = None
            return None

    def _run_checked(self, feeds: dict) -> dict[str, np.ndarray]:
        """The first call of an input signature: validate, then run through a call plan made
        for it (later calls of the signature take the plan directly), or the general path."""
        arrays = list(validate_feeds(feeds, self.inputs).values())
        bind_thread_to_device(self.device_spec)
        plan = self._make_plan(feeds, arrays)
        if plan is not None:
            result = self._run_plan(plan, _signature(feeds), feeds)
            if result is not None:
                return result
        shapes = [a.shape for a in arrays]
        if any(a.dtype == np.bool_ for a in arrays):  # i1 tensors: let the invoker convert them
            with self._lock:
                return self._collect(self._call(self._invokers_for(shapes)[0], *arrays))
        entry = self._staging.entry([(a.shape, a.dtype) for a in arrays], slot=0,
                                    outputs=self._output_signature(shapes))
        with self._lock:  # run()'s buffers (slot 0) are shared by every caller
            for view, a in zip(entry.host_views, arrays):
                np.copyto(view, a)
            return self._invoke(entry, shapes)

    def _make_plan(self, feeds: dict, arrays: list[np.ndarray]):
        """A call plan for this signature when results can land in reused output buffers."""
        key = _signature(feeds)
        if key is None or key in self._plans or any(a.dtype == np.bool_ for a in arrays) or not self._plans_fit():
            return None
        shapes = [a.shape for a in arrays]
        outputs = self._output_signature(shapes)
        if outputs is None:
            return None
        entry = self._staging.entry([(a.shape, a.dtype) for a in arrays], slot=0, outputs=outputs)
        plan = self._entry_plan(entry, shapes)
        if plan is not None:
            self._plans[key] = plan
        return plan

    def _plans_fit(self) -> bool:
        """Whether call plans serve this session: not on GPUs (the plan's mapped host views would
        be read before the copy), not with narrow inputs (their conversion to the container is
        what the plan skips)."""
        return self.device_spec.kind == "cpu" and not any(s.dtype in NARROW_CONTAINERS for s in self.inputs)

    def call_device(self, arrays: list) -> list:
        """Run the module function for these inputs' shapes on device-resident arrays (IREE
        DeviceArrays or buffer views, in input order) as they are: no validation, no copies;
        returns the module's results (device arrays). For benchmarks and callers that keep
        their tensors on the device."""
        invoker = self._invokers_for([tuple(a.shape) for a in arrays])[0]
        with self._lock:
            return self._call(invoker, *arrays)

    def run_gathered(self, parts: list[list[np.ndarray]], rows: int, bucket: int,
                     slot: int = 0) -> dict[str, np.ndarray]:
        """Run one batch made of several requests: `parts[i]` lists input i's arrays (already
        validated, same non-batch shape) in batch order, `rows` rows in all. They are written
        straight into reused input buffers of this bucket and `slot`, padded to `bucket` rows by
        repeating the last row (no intermediate concatenation). Different slots are written
        concurrently (one writer per slot); runs on the device are serialized."""
        if any(s.dtype == "bool" for s in self.inputs):
            return self.run({s.name: concat_padded(p, rows, bucket) for s, p in zip(self.inputs, parts)})
        signature = [((bucket,) + p[0].shape[1:], p[0].dtype) for p in parts]
        bind_thread_to_device(self.device_spec)
        outputs = self._output_signature([shape for shape, _ in signature])
        entry = self._staging.entry(signature, slot=slot + 1, outputs=outputs)  # slot 0 is run()'s
        for view, arrays in zip(entry.host_views, parts):
            write_rows(view, arrays, rows)
        shapes = [shape for shape, _ in signature]
        with self._lock:
            plan = self._gathered_plans.get(id(entry), False)
            if plan is False:
                plan = self._gathered_plans[id(entry)] = self._entry_plan(entry, shapes)
            if plan is not None:
                try:
                    return plan.invoke()
                except ValueError:  # results that do not fit the buffers: as in _run_plan
                    self._gathered_plans[id(entry)] = None
            return self._invoke(entry, shapes)

    def _entry_plan(self, entry, shapes: list[tuple]) -> "CallPlan | None":
        """A call plan over a staging entry's buffers, where results land in its output buffers
        (None where plans do not fit, or the entry or the module has no output storage)."""
        if entry.output_views is None or not self._plans_fit():
            return None
        into_invoker = self._invokers_for(shapes)[1]
        return None if into_invoker is None else CallPlan(self, entry, into_invoker, [s.name for s in self.inputs])

    def _invoke(self, entry, shapes: list[tuple]) -> dict[str, np.ndarray]:
        """Run on an entry's input buffers (the caller holds self._lock) through the function
        for these shapes. With output buffers, results land in them and are copied out (the
        next call on the entry overwrites them); without, the module allocates them."""
        invoker, into_invoker = self._invokers_for(shapes)
        if entry.output_views is not None and into_invoker is not None:
            try:
                results = self._collect(self._call(into_invoker, *entry.buffer_views, *entry.output_views))
                return {name: np.array(arr, copy=True) for name, arr in results.items()}
            except ValueError:
                # The results did not fit the buffers shaped from the manifest (a model whose
                # declared output shape is not what it computes): let the module allocate them
                # for this shape from now on. If that fails too, its error is the one raised.
                entry.output_views = None
        return self._collect(self._call(invoker, *entry.buffer_views))

    def _dim_values(self, input_shapes: list[tuple]) -> dict:
        """Named dynamic dim -> its size in these input shapes."""
        dims = {}
        for spec, shape in zip(self.inputs, input_shapes):
            for want, got in zip(spec.shape, shape):
                if isinstance(want, str):
                    dims[want] = got
        return dims

    def _output_signature(self, input_shapes: list[tuple]) -> list[tuple] | None:
        """Each output's (shape, dtype) for inputs of these shapes, when the manifest fixes them
        (static dims, or dims named after an input's dim); None otherwise, or without the entry."""
        if self._invokers_for(input_shapes)[1] is None:
            return None
        dims = self._dim_values(input_shapes)
        signature = []
        for spec in self.outputs:
            shape = tuple(d if isinstance(d, int) else dims.get(d) for d in spec.shape)
            if any(d is None for d in shape):
                return None
            signature.append((shape, np.dtype(spec.dtype)))
        return signature

    def _collect(self, results) -> dict[str, np.ndarray]:
        if not isinstance(results, (tuple, list)):
            results = (results,)
        if len(results) != len(self.outputs):
            raise ArtifactError(f"module returned {len(results)} results, manifest lists {len(self.outputs)}")
        return {spec.name: _to_numpy(r, spec) for spec, r in zip(self.outputs, results)}


def _call_flops(manifest) -> int | None:
    """The work of one call at the largest static batch the artifact was built for (None when
    the build did not count it). The batch sizes a build names are the ones it serves: the pool
    costs a small call ~40 us more than the calling thread, while one thread alone runs a large
    call at half the cores (examples/encoder.onnx built for 1,4, this 2-core VM, tools/bench/
    knobs.py: b1 median 0.22 ms sync vs 0.26 pool; b4 fastest calls 0.81 sync vs 0.49 pool,
    medians 0.86 vs 0.85 and 1.39 vs 0.67 in two noisy runs)."""
    counted = [f["flops"] for f in manifest.functions if f.get("flops", -1) >= 0]
    return max(counted) if counted else None


def _signature(feeds: dict):
    """(name, shape, dtype) of every feed, or None when a value is not a numpy array."""
    try:
        return tuple((k, v.shape, v.dtype) for k, v in feeds.items() if type(v) is np.ndarray) \
            if all(type(v) is np.ndarray for v in feeds.values()) else None
    except AttributeError:
        return None


class CallPlan:
    """The fast path of `run()` for one input signature already validated, and of
    `run_gathered()` for one bucket and slot: inputs are written into mapped, reused input
    buffers, the module's `$into` entry is invoked through a prebuilt argument list, and results
    are copied out of mapped, reused output buffers. No device allocation, no argument
    marshalling per call (trivial model on this CPU: about 10 us a call vs 59 us through the
    general path; onnxruntime 9 us)."""

    def __init__(self, session: "InferenceSession", entry, into_invoker, input_names: list[str]):
        import iree.runtime as rt

        self._session = session
        self._entry = entry
        self._names = input_names
        self._outputs = [(spec.name, view) for spec, view in zip(session.outputs, entry.output_host_views)]
        self._context = session._context
        self._function = into_invoker.vm_function
        self._args = into_invoker.arguments(list(entry.buffer_views) + list(entry.output_views))
        self._vm_list = rt.VmVariantList

    def run(self, feeds: dict) -> dict[str, np.ndarray]:
        with self._session._lock:
            for view, name in zip(self._entry.host_views, self._names):
                np.copyto(view, feeds[name])
            return self.invoke()

    def invoke(self) -> dict[str, np.ndarray]:
        """Run on what the entry's input buffers hold (the caller holds the session's lock);
        copies of the outputs."""
        self._session._call(self._context.invoke, self._function, self._args, self._vm_list(len(self._outputs)))
        return {name: view.copy() for name, view in self._outputs}


# Output dtypes a caller-side buffer can hold exactly as IREE writes them (bool, bfloat16 and
# unsigned outputs come back through the module's own buffers and the conversions below).
STORABLE_DTYPES = frozenset({"float16", "float32", "float64", "int8", "int16", "int32", "int64"})


def _to_numpy(result, spec: TensorSpec) -> np.ndarray:
    arr = result.to_host() if hasattr(result, "to_host") else np.asarray(result)
    if arr.dtype.name == spec.dtype or spec.dtype == "bfloat16":
        return arr
    if spec.dtype in NARROW_CONTAINERS:  # the module's container values are all representable
        return arr.astype(numpy_dtype(spec.dtype))
    if spec.dtype == "bool":
        return arr.astype(np.bool_)
    want = np.dtype(spec.dtype)
    if want.itemsize == arr.dtype.itemsize and want.kind in "iu" and arr.dtype.kind in "iu":
        return arr.view(want)  # IREE hands unsigned integers back as signless (signed) ones
    return arr


def load(path: str, device: str | None = None, verify: str | None = None, weights: str | None = None):
    """Load an `.ixa` artifact on `device` ("cpu", "cpu:sync", "cpu:task", "cuda", "cuda:N";
    default from its target). `cpu:task` spreads a call over a pool of worker threads;
    `cpu:sync` runs it in the calling thread; `cpu` picks one from the artifact's work per call
    (see devices.py).

    The artifact is refused (ArtifactError) when a member's sha256 differs from its manifest's,
    a member is missing or extra, or its module was compiled by another IREE release than the
    installed runtime. `verify` ("all", "skip-weights", "none", optionally with
    ",ignore-iree-version"; default $INFERX_VERIFY_ARTIFACT, else "all") relaxes that, with
    a warning naming what was not checked: see inferx_compiler.artifact.archive.VerifyPolicy.

    A generation model (an LLM: manifest `generation`) loads as a GenerationSession, whose
    `generate()` streams text (generation.py)."""
    artifact = open_for_running(path, verify)
    if artifact.manifest.generation:
        from inferx_compiler.runtime.generation import GenerationSession

        return GenerationSession(artifact, device, weights=weights)
    return InferenceSession(artifact, device)
