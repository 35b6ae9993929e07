"""ONNX in: load, check, upgrade old opsets, lift weights out, infer shapes, import.

Weights never pass through MLIR text. Float initializers with at least
`WEIGHT_ELEMENTS_THRESHOLD` elements are lifted out of the graph into extra graph
inputs before import, so the imported module carries only their types; their bytes
go straight from the ONNX file into the artifact's parameter archive, and the IREE
module reads them back as named parameters (see `passes/bind_parameters.py`).
Small constants (shapes, axes, scalars) stay in the graph: lowerings need their values.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import onnx
from onnx import numpy_helper

from inferx_compiler.errors import ModelLoadError, UnsupportedOpsError
from inferx_compiler.log import BuildLog
from inferx_compiler.frontend.onnx_functions import expand_function_ops
from inferx_compiler.frontend.onnx_contrib_ops import decompose_contrib_ops
from inferx_compiler.frontend.onnx_quantized_ops import decompose_quantized_ops
from inferx_compiler.frontend.onnx_narrow_types import widen_narrow_types
from inferx_compiler.frontend.onnx_shapes import refine_static_dims
from inferx_compiler.frontend.onnx_rewrites import (flatten_dynamic_reshapes, drop_zero_gemm_bias, expand_reflect_pads,
                            fold_shape_computations, inline_known_ifs, scale_biasless_gemms,
                            trim_unused_conv_padding)
from inferx_compiler.tensor_spec import TensorSpec

# The opset below which we upgrade before import: torch-mlir's importer misses
# BatchNormalization < 15 and Slice-10/11 forms, which opset 17 fixes.
MIN_IMPORT_OPSET = 17
WEIGHT_ELEMENTS_THRESHOLD = 1024
LOWERABLE_DOMAINS = ("", "ai.onnx")

_FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                onnx.TensorProto.DOUBLE}


@dataclass
class PreparedModel:
    proto: onnx.ModelProto
    name: str
    sha256: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    opset: int = 0
    upgraded_from: Optional[int] = None
    nodes: dict[str, dict] = field(default_factory=dict)  # node name -> op_type/domain/opset
    fixed_inputs: dict = field(default_factory=dict)  # --input-value: name -> {dtype, shape, value}


def load_model(path: str) -> tuple[onnx.ModelProto, str]:
    """Read an ONNX file (with external data beside it); return the proto and its sha256."""
    if not os.path.isfile(path):
        raise ModelLoadError(f"{path}: no such file")
    with open(path, "rb") as f:
        raw = f.read()
    digest = hashlib.sha256(raw).hexdigest()
    try:
        model = onnx.load_model_from_string(raw)
    except Exception as e:  # protobuf raises DecodeError and friends
        raise ModelLoadError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from None
    if not model.HasField("graph") or not model.opset_import:
        raise ModelLoadError(f"{path}: not an ONNX model (no graph or no opset_import)")
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        try:
            onnx.load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
        except Exception as e:
            raise ModelLoadError(f"{path}: cannot load external weight data: {e}") from None
    return model, digest


def fix_input_shapes(model: onnx.ModelProto, shapes: dict, name: str = "model") -> None:
    """Give the named graph inputs these static shapes (dynamic dims take the size given,
    static ones must already have it); refuses unknown inputs and wrong ranks."""
    inputs = {vi.name: vi for vi in model.graph.input
              if vi.name not in {i.name for i in model.graph.initializer}}
    for input_name, shape in shapes.items():
        if input_name not in inputs:
            raise ModelLoadError(f"--input-shape {input_name}: model '{name}' has no input '{input_name}' "
                                 f"(its inputs: {', '.join(inputs)})")
        dims = inputs[input_name].type.tensor_type.shape.dim
        declared = TensorSpec.from_value_info(inputs[input_name])
        if len(dims) != len(shape):
            raise ModelLoadError(f"--input-shape {input_name}: {len(shape)} dims given, but input "
                                 f"'{input_name}' has rank {len(dims)} {declared.format_shape()}")
        for k, (d, size) in enumerate(zip(dims, shape)):
            if d.HasField("dim_value") and d.dim_value >= 0 and d.dim_value != size:  # -1: dynamic
                raise ModelLoadError(f"--input-shape {input_name}: dim {k} of '{input_name}' is {d.dim_value} "
                                     f"in the model {declared.format_shape()}, not {size}")
            d.dim_value = size
    _forget_derived_shapes(model.graph)


def fix_input_values(model: onnx.ModelProto, values: dict, name: str = "model") -> dict:
    """Make the named graph inputs constants with these values (flat, in row-major order), so
    that what depends on them (an `If` on a sample-rate input, a shape computed from a size
    input) is known at compile time. Their dtype and shape are the input's; a 1-D input of
    dynamic length takes the number of values given. Returns what the manifest records:
    {name: {"dtype", "shape", "value"}}."""
    inits = {i.name for i in model.graph.initializer}
    inputs = {vi.name: vi for vi in model.graph.input if vi.name not in inits}
    fixed = {}
    for input_name, flat in values.items():
        if input_name not in inputs:
            raise ModelLoadError(f"--input-value {input_name}: model '{name}' has no input '{input_name}' "
                                 f"(its inputs: {', '.join(inputs)})")
        vi = inputs[input_name]
        spec = TensorSpec.from_value_info(vi)
        if spec.dtype not in _FIXABLE_DTYPES:
            raise ModelLoadError(f"--input-value {input_name}: input '{input_name}' is {spec.dtype}; only "
                                 f"numeric and bool inputs can be fixed")
        shape = list(spec.shape)
        if len(shape) == 1 and isinstance(shape[0], str):
            shape = [len(flat)]
        if any(isinstance(d, str) for d in shape):
            raise ModelLoadError(f"--input-value {input_name}: input '{input_name}' has dynamic dims "
                                 f"{spec.format_shape()}; fix them with --input-shape first")
        if int(np.prod(shape, dtype=np.int64)) != len(flat):
            raise ModelLoadError(f"--input-value {input_name}: {len(flat)} value(s) given, but input "
                                 f"'{input_name}' {spec.format_shape()} holds {int(np.prod(shape, dtype=np.int64))}")
        array = np.array(flat, dtype=np.float64).astype(spec.dtype).reshape(shape)
        if not np.array_equal(array.astype(np.float64).ravel(), np.array(flat, np.float64)):
            raise ModelLoadError(f"--input-value {input_name}: {list(flat)} is not representable as {spec.dtype}")
        model.graph.initializer.append(numpy_helper.from_array(array, input_name))
        model.graph.input.remove(vi)
        fixed[input_name] = {"dtype": spec.dtype, "shape": shape, "value": array.ravel().tolist()}
    if fixed:
        _forget_derived_shapes(model.graph)
    return fixed


_FIXABLE_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                   "float16", "float32", "float64")


def _forget_derived_shapes(graph) -> None:
    """After inputs change shape, the shapes the exporter declared for intermediate values and
    the outputs' dynamic dims are stale: shape inference derives them again."""
    del graph.value_info[:]
    for vi in graph.output:
        for d in vi.type.tensor_type.shape.dim:
            if not (d.HasField("dim_value") and d.dim_value >= 0):
                d.Clear()


def declared_inputs(path: str) -> list[TensorSpec]:
    """The model's inputs as its graph declares them, read without weights or shape
    inference: what option checks before a compile look at."""
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as e:
        raise ModelLoadError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from None
    _name_unnamed_dims(model)
    init_names = {i.name for i in model.graph.initializer}
    return [TensorSpec.from_value_info(vi) for vi in model.graph.input if vi.name not in init_names]


def external_data_files(path: str) -> list[str]:
    """The existing external-data files an ONNX model names (paths beside the model)."""
    from onnx.external_data_helper import ExternalDataInfo

    model = onnx.load(path, load_external_data=False)
    base = os.path.dirname(os.path.abspath(path))
    names = {ExternalDataInfo(t).location for t in model.graph.initializer
             if t.data_location == onnx.TensorProto.EXTERNAL}
    return sorted(p for p in (os.path.join(base, n) for n in names) if os.path.isfile(p))


def default_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in LOWERABLE_DOMAINS:
            return imp.version
    return 0


def prepare(model: onnx.ModelProto, *, name: str, sha256: str, log: BuildLog,
            externalize_weights: bool = True, input_shapes: Optional[dict] = None,
            input_values: Optional[dict] = None) -> PreparedModel:
    """Everything done to the ONNX proto before torch-mlir sees it. `input_shapes`
    ({input: (d0, d1, ...)}, --input-shape) fixes those inputs' shapes first, `input_values`
    ({input: (v0, v1, ...)}, --input-value) makes those inputs constants."""
    _check_structure(model, name)
    if input_shapes:
        fix_input_shapes(model, input_shapes, name)
        log.step("fixed input shapes: " + ", ".join(f"{k}={'x'.join(map(str, v))}" for k, v in input_shapes.items()))
    fixed = fix_input_values(model, input_values, name) if input_values else {}
    if fixed:
        log.step("fixed input values: " + ", ".join(f"{k}={_format_values(v['value'])}" for k, v in fixed.items()))
    name_nodes(model)
    fused = decompose_contrib_ops(model)
    if fused:
        log.step(f"rewrote {len(fused)} onnxruntime fused op(s) (Gelu, SkipLayerNormalization...) in standard ONNX")
    quantized = decompose_quantized_ops(model)
    if quantized:
        log.step(f"rewrote {len(quantized)} quantized op(s) as their dequantize-op-quantize definitions")
    functions = expand_function_ops(model)
    if functions:
        log.step(f"expanded {len(functions)} node(s) of ops torch-mlir cannot lower into their ONNX "
                 f"function bodies")
    narrow_io, widened = widen_narrow_types(model)
    if widened:
        log.step(f"wrote {len(widened)} cast/quantize node(s) of 4-bit, 2-bit or 8-bit float types as "
                 f"arithmetic on float32/int8 containers")
    inlined, folded = _inline_and_fold(model)
    if inlined:
        log.step(f"inlined {len(inlined)} If node(s) whose conditions are known at compile time")
    if folded:
        log.step(f"folded {len(folded)} shape computation node(s) to constants")
    expanded = expand_reflect_pads(model)
    if expanded:
        log.step(f"expanded {len(expanded)} reflect/edge Pad node(s) into gathers and a concat")
    flattened = flatten_dynamic_reshapes(model)
    if flattened:
        log.step(f"wrote {len(flattened)} Reshape(s) to [-1, ...] of several dynamic dims as Flatten")
    trimmed = trim_unused_conv_padding(model)
    if trimmed:
        log.step(f"dropped padding no window reads from {len(trimmed)} strided convolution(s)")
    unbiased = drop_zero_gemm_bias(model)
    if unbiased:
        log.step(f"dropped the all-zero bias of {len(unbiased)} Gemm(s)")
    scaled = scale_biasless_gemms(model)
    if scaled:
        log.step(f"wrote the alpha of {len(scaled)} Gemm(s) without a bias as a Mul after the product")
    _reject_foreign_domains(model)
    weights = _lift_weights(model) if externalize_weights else {}
    if weights:
        total = sum(w.nbytes for w in weights.values())
        log.step(f"lifted {len(weights)} weight tensors ({total / 2**20:.1f} MiB) out of the graph")
    opset = default_opset(model)
    upgraded_from = None
    if opset < MIN_IMPORT_OPSET:
        model = _upgrade_opset(model, opset, log)
        if default_opset(model) != opset:
            upgraded_from, opset = opset, default_opset(model)
    _name_unnamed_dims(model)
    declared = _take_output_shapes(model)
    model = _infer_shapes(model, name)
    for message in _reconcile_output_shapes(model, declared):
        log.warn(message)
    _name_computed_dims(model)
    inputs, outputs = _interface(model, set(weights), narrow_io)
    return PreparedModel(model, name, sha256, inputs, outputs, weights, opset, upgraded_from,
                         _node_index(model), fixed)


def _format_values(values: list) -> str:
    shown = ",".join(str(v) for v in values[:8])
    return shown + (f",... ({len(values)} values)" if len(values) > 8 else "")


def _inline_and_fold(model: onnx.ModelProto, rounds: int = 4) -> tuple[list, list]:
    """Inline the Ifs whose conditions are known and fold shape computations, again while an
    If is left and the last round changed something: folding the shape arithmetic of a branch
    just inlined (a Pad's pads) makes shapes static, and with them nested Ifs' conditions."""
    inlined, folded = [], []
    for _ in range(rounds):
        new_inlined = inline_known_ifs(model)
        if new_inlined:
            name_nodes(model)
        new_folded = fold_shape_computations(model)
        inlined += new_inlined
        folded += new_folded
        if not (new_inlined or new_folded) or not any(n.op_type == "If" for n in model.graph.node):
            break
    return inlined, folded


def specialize(prepared: PreparedModel, dims: dict[str, int]) -> onnx.ModelProto:
    """A copy of the prepared model whose named dynamic dims take fixed sizes (`{"batch": 8}`),
    shapes inferred again: what a static-shape function of the artifact is imported from."""
    model = onnx.ModelProto()
    model.CopyFrom(prepared.proto)
    graph = model.graph
    for vi in list(graph.input) + list(graph.output):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in dims:
                d.dim_value = dims[d.dim_param]  # sets the oneof: dim_param is cleared
    del graph.value_info[:]
    return _infer_shapes(model, prepared.name)


# dim_param spellings that mean "unknown", not a name shared between dims ("?" from some
# exporters, "None"/"-1" from others; PaddlePaddle's exporter writes dim_value -1): each such
# dim is its own symbol.
_PLACEHOLDER_DIM_PARAMS = {"?", "-1", "None", "none", "null", "dynamic"}


def _name_unnamed_dims(model: onnx.ModelProto) -> None:
    """Give each unnamed dynamic input dim its own symbol, `INPUT_dimK` (one per input and
    position: two unnamed dims are never assumed equal), before shape inference, so that
    outputs derived from it carry the same symbol instead of onnx's `unk__N`. Placeholder
    names ("?", "None", ...) count as unnamed."""
    for vi in model.graph.input:
        for k, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value >= 0:  # a size 0 is a size; -1 is "dynamic"
                continue
            if not d.dim_param or d.dim_param.strip() in _PLACEHOLDER_DIM_PARAMS:
                d.dim_param = f"{vi.name}_dim{k}"


def _take_output_shapes(model: onnx.ModelProto) -> dict:
    """Remove the graph outputs' declared shapes (returned by name) so that shape inference
    derives them from the graph: exporters leave stale ones (PaddlePaddle's [-1, 25, 6625]
    for an output that is [1, 80, 6625]; a rank-2 declaration of a rank-3 output)."""
    declared = {}
    for vi in model.graph.output:
        tt = vi.type.tensor_type
        if tt.HasField("shape"):
            declared[vi.name] = onnx.TensorShapeProto.FromString(tt.shape.SerializeToString())
            tt.ClearField("shape")
    return declared


def _reconcile_output_shapes(model: onnx.ModelProto, declared: dict) -> list[str]:
    """Put the declared output shapes back where inference found none, and their dim names
    where inference has no name for a dim; where the two disagree, inference wins and the
    returned messages say so."""
    messages = []
    for vi in model.graph.output:
        old = declared.get(vi.name)
        tt = vi.type.tensor_type
        if old is None:
            continue
        if not tt.HasField("shape"):
            tt.shape.CopyFrom(old)
            continue
        if len(tt.shape.dim) != len(old.dim) or any(
                a.HasField("dim_value") and b.HasField("dim_value") and b.dim_value >= 0 and a.dim_value != b.dim_value
                for a, b in zip(tt.shape.dim, old.dim)):
            messages.append(f"output '{vi.name}' is declared {_format_dims(old)} but the graph computes "
                            f"{_format_dims(tt.shape)}; using the computed shape")
            continue
        for a, b in zip(tt.shape.dim, old.dim):
            if not a.HasField("dim_value") and (not a.dim_param or a.dim_param.startswith("unk__")) and b.dim_param:
                a.dim_param = b.dim_param
    return messages


def _format_dims(shape) -> str:
    return "[" + ", ".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
                           for d in shape.dim) + "]"


def _name_computed_dims(model: onnx.ModelProto) -> None:
    """Output dims no input determines (onnx names them `unk__N`, or leaves them blank) are
    named after the output and position, `OUTPUT_dimK`: the size the model computes."""
    for vi in model.graph.output:
        for k, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value"):
                continue
            if not d.dim_param or d.dim_param.startswith("unk__"):
                d.dim_param = f"{vi.name}_dim{k}"


def _check_structure(model: onnx.ModelProto, name: str) -> None:
    if not model.graph.output:
        raise ModelLoadError(f"model '{name}': the graph has no outputs")
    for vi in list(model.graph.input) + list(model.graph.output):
        if not vi.type.HasField("tensor_type"):
            kind = vi.type.WhichOneof("value") or "untyped"
            raise ModelLoadError(
                f"model '{name}': graph {'input' if vi in model.graph.input else 'output'} "
                f"'{vi.name}' is a {kind}; only tensor inputs and outputs are supported"
            )


def name_nodes(model: onnx.ModelProto) -> None:
    """Give every node a unique name: diagnostics and locations point back to it."""
    seen = set()
    for i, node in enumerate(model.graph.node):
        base = node.name or f"{node.op_type}_{i}"
        candidate = base
        while candidate in seen:
            candidate = f"{base}_{i}"
        node.name = candidate
        seen.add(candidate)


def _opset_for(model: onnx.ModelProto, domain: str) -> Optional[int]:
    for imp in model.opset_import:
        if imp.domain == domain or (domain in LOWERABLE_DOMAINS and imp.domain in LOWERABLE_DOMAINS):
            return imp.version
    return None


def node_record(model: onnx.ModelProto, node: onnx.NodeProto) -> dict:
    """What errors say of a node: name, op_type, domain, opset."""
    return {"name": node.name, "op_type": node.op_type, "domain": node.domain,
            "opset": _opset_for(model, node.domain)}


def foreign_domain_nodes(model: onnx.ModelProto) -> list[dict]:
    """Nodes of operator domains no lowering exists for (com.microsoft, custom ops...)."""
    return [node_record(model, n) for n in model.graph.node if n.domain not in LOWERABLE_DOMAINS]


def _reject_foreign_domains(model: onnx.ModelProto) -> None:
    bad = foreign_domain_nodes(model)
    if bad:
        raise UnsupportedOpsError(bad)


def _lift_weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Move large float initializers (and large float Constant nodes) to graph inputs."""
    graph = model.graph
    _constants_to_initializers(graph)
    lifted: dict[str, np.ndarray] = {}
    kept = []
    for init in graph.initializer:
        n_elems = int(np.prod(init.dims)) if init.dims else 1
        if init.data_type in _FLOAT_TYPES and n_elems >= WEIGHT_ELEMENTS_THRESHOLD:
            lifted[init.name] = numpy_helper.to_array(init)
        else:
            kept.append(init)
    if not lifted:
        return lifted
    # Old exporters list initializers among the inputs too; those entries go.
    user_inputs = [vi for vi in graph.input if vi.name not in lifted]
    del graph.input[:]
    graph.input.extend(user_inputs)
    for name, arr in lifted.items():
        elem = onnx.helper.np_dtype_to_tensor_dtype(arr.dtype) if arr.dtype != object else 1
        graph.input.append(onnx.helper.make_tensor_value_info(name, elem, list(arr.shape)))
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return lifted


def _constants_to_initializers(graph: onnx.GraphProto) -> None:
    keep = []
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in LOWERABLE_DOMAINS and len(node.attribute) == 1 \
                and node.attribute[0].name == "value":
            t = node.attribute[0].t
            n_elems = int(np.prod(t.dims)) if t.dims else 1
            if t.data_type in _FLOAT_TYPES and n_elems >= WEIGHT_ELEMENTS_THRESHOLD:
                init = onnx.TensorProto()
                init.CopyFrom(t)
                init.name = node.output[0]
                graph.initializer.append(init)
                continue
        keep.append(node)
    if len(keep) != len(graph.node):
        del graph.node[:]
        graph.node.extend(keep)


def _upgrade_opset(model: onnx.ModelProto, opset: int, log: BuildLog) -> onnx.ModelProto:
    from onnx import version_converter

    try:
        upgraded = version_converter.convert_version(model, MIN_IMPORT_OPSET)
    except Exception as e:
        log.warn(f"opset {opset} is below {MIN_IMPORT_OPSET} and onnx's version converter failed "
                 f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); importing at opset {opset}")
        return model
    log.step(f"upgraded the model from opset {opset} to opset {MIN_IMPORT_OPSET} (onnx version converter)")
    name_nodes(upgraded)
    return upgraded


def _infer_shapes(model: onnx.ModelProto, name: str) -> onnx.ModelProto:
    """onnx's shape inference, then the static dims it loses put back (onnx_shapes)."""

    def infer(m: onnx.ModelProto) -> onnx.ModelProto:
        try:
            return onnx.shape_inference.infer_shapes(m, data_prop=True)
        except Exception as e:
            raise ModelLoadError(f"model '{name}': ONNX shape inference failed: {e}") from None

    return refine_static_dims(infer(model), infer)[0]


def _interface(model: onnx.ModelProto, weight_names: set[str], narrow_io: dict) -> tuple[list, list]:
    """The specs of the model's inputs and outputs, with the declared dtype of those whose
    values the compiled module carries in a container type (narrow_io)."""
    init_names = {i.name for i in model.graph.initializer}

    def spec(vi) -> TensorSpec:
        s = TensorSpec.from_value_info(vi)
        return dataclasses.replace(s, dtype=narrow_io[s.name]) if s.name in narrow_io else s

    inputs = [spec(vi) for vi in model.graph.input if vi.name not in init_names and vi.name not in weight_names]
    return inputs, [spec(vi) for vi in model.graph.output]


def _node_index(model: onnx.ModelProto) -> dict[str, dict]:
    return {n.name: {"name": n.name, "op_type": n.op_type, "domain": n.domain,
                     "opset": _opset_for(model, n.domain)} for n in model.graph.node}


_SPATIAL_OPS = ("Conv", "ConvTranspose", "MaxPool", "AveragePool")


def dynamic_spatial_nodes(prepared: PreparedModel) -> list[str]:
    """Convolutions and pools whose input has a dynamic spatial dim (after shape inference):
    what IREE 3.13's code generation fails on in some forms, and what --input-shape fixes."""
    graph = prepared.proto.graph
    shapes = {vi.name: vi.type.tensor_type.shape for vi in
              list(graph.input) + list(graph.value_info) + list(graph.output)}
    found = []
    for n in graph.node:
        shape = shapes.get(n.input[0]) if n.op_type in _SPATIAL_OPS and n.input else None
        if shape is not None and any(not d.HasField("dim_value") for d in list(shape.dim)[2:]):
            found.append(n.name)
    return found


def uses_float64(prepared: PreparedModel) -> bool:
    """Whether any tensor of the model (interface, weights, intermediates) is float64."""
    graph = prepared.proto.graph
    infos = list(graph.input) + list(graph.output) + list(graph.value_info)
    if any(vi.type.tensor_type.elem_type == onnx.TensorProto.DOUBLE for vi in infos):
        return True
    if any(t.data_type == onnx.TensorProto.DOUBLE for t in graph.initializer):
        return True
    return any(w.dtype == np.float64 for w in prepared.weights.values())
