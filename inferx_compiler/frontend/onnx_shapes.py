"""Static dims that onnx's shape inference loses, put back before import.

torch-mlir's ONNX lowerings decide broadcasting from the types it is given: an `Expand` or an
elementwise op whose operand dim is dynamic is lowered as "this dim is not 1" (with a runtime
check), so a dim that is 1 at run time but unknown in the types fails the call ("onnx.Expand
input has a dim that is not statically 1"). onnx's inference (checked with onnx 1.23) loses
such dims through a `Slice` whose starts or ends are computed, although the axes it slices are
constant and every other axis keeps its input size: the TorchScript exporter writes
`position_ids[:, :seq]` that way for every Hugging Face encoder, and the mask that follows is
then expanded to the batch.

The same happens through an `Expand` whose target shape is computed: the exporter writes
`mask.expand(batch, -1, q, kv)` as `Where(Equal(shape, -1), 1, shape)` (GPT-2's causal mask),
onnx cannot evaluate that, and the mask's head dim of 1 is lost before it meets the scores.
`_shape_values` evaluates such small integer tensors symbolically (a dim whose size is unknown
is still some size >= 0, never -1), which is enough to know which entries are 1.

`refine_static_dims` writes those dims into the graph's value_info and infers again, so the
sizes reach the nodes downstream (GatherElements, Expand, ...), until nothing changes.
"""

from __future__ import annotations

from typing import Callable, Optional

import onnx
from onnx import numpy_helper

MAX_ROUNDS = 4


def refine_static_dims(model: onnx.ModelProto, infer: Callable[[onnx.ModelProto], onnx.ModelProto]
                       ) -> tuple[onnx.ModelProto, int]:
    """The model with the static dims put back (a `Slice`'s on axes it does not slice, an
    `Expand`'s where its target shape's entry is known; `infer` is the caller's shape
    inference, run again after each round), and how many dims were set."""
    total = 0
    for _ in range(MAX_ROUNDS):
        count = _refine_slices(model) + _refine_expands(model)
        if not count:
            break
        total += count
        model = infer(model)
    return model, total


def _refine_slices(model: onnx.ModelProto) -> int:
    graph = model.graph
    infos = {vi.name: vi for vi in list(graph.input) + list(graph.value_info) + list(graph.output)}
    values = _shape_values(graph, infos)
    initializers = {i.name: list(i.dims) for i in graph.initializer}
    count = 0
    for node in graph.node:
        if node.op_type != "Slice" or len(node.input) < 4 or not node.input[3]:
            continue
        axes = values.get(node.input[3], ([None], False))[0]
        in_dims = _input_dims(node.input[0], infos, initializers)
        target = infos.get(node.output[0])
        if not all(isinstance(a, int) for a in axes) or in_dims is None or target is None:
            continue
        if not _has_shape(target) or len(target.type.tensor_type.shape.dim) != len(in_dims):
            continue
        sliced = {a % len(in_dims) for a in axes}
        for k, (d_in, d_out) in enumerate(zip(in_dims, target.type.tensor_type.shape.dim)):
            if k in sliced or _static(d_out) is not None:
                continue
            size = _static(d_in)
            if size is not None:
                d_out.dim_value = size
                count += 1
    return count


def _input_dims(name: str, infos: dict, initializers: dict) -> Optional[list]:
    """The static-or-not dims of a value (a list of TensorShapeProto dims), None if unknown."""
    if name in infos and _has_shape(infos[name]):
        return list(infos[name].type.tensor_type.shape.dim)
    if name in initializers:
        shape = onnx.TensorShapeProto()
        for size in initializers[name]:
            shape.dim.add().dim_value = size
        return list(shape.dim)
    return None


def _has_shape(vi: onnx.ValueInfoProto) -> bool:
    return vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape")


def _static(dim) -> Optional[int]:
    return dim.dim_value if dim.HasField("dim_value") and dim.dim_value >= 0 else None


class _Dim:
    """A size not known at compile time: some integer >= 0 (so never -1)."""


_SHAPE_OPS = {"Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Reshape", "Cast", "Identity",
              "ConstantOfShape", "Mul", "Add", "Equal", "Where", "Constant"}
MAX_VALUES = 8


def _shape_values(graph: onnx.GraphProto, infos: dict) -> dict:
    """{name: (entries, is_scalar)} for the small integer tensors computed from shapes and
    constants; an entry is an int/bool, a _Dim, or None (unknown)."""
    values = {}
    for init in graph.initializer:
        array = numpy_helper.to_array(init)
        if array.dtype.kind in "ib" and array.ndim <= 1 and array.size <= MAX_VALUES:
            values[init.name] = (array.reshape(-1).tolist(), array.ndim == 0)
    for node in graph.node:
        if node.op_type in _SHAPE_OPS and node.domain in ("", "ai.onnx"):
            result = _evaluate(node, values, infos)
            if result is not None and len(result[0]) <= MAX_VALUES:
                values[node.output[0]] = result
    return values


def _evaluate(node: onnx.NodeProto, values: dict, infos: dict):
    op, ins = node.op_type, [values.get(i) for i in node.input]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if op == "Constant":
        tensor = attrs.get("value")
        if tensor is None:
            return None
        array = numpy_helper.to_array(tensor)
        return (array.reshape(-1).tolist(), array.ndim == 0) if array.dtype.kind in "ib" and array.size <= MAX_VALUES \
            else None
    if op == "Shape":
        dims = _input_dims(node.input[0], infos, {})
        if dims is None:
            return None
        entries = [_static(d) if _static(d) is not None else _Dim() for d in dims]
        return entries[attrs.get("start", 0):attrs.get("end", len(entries))], False
    if any(v is None for v, name in zip(ins, node.input) if name) and op not in ("ConstantOfShape",):
        return None
    if op in ("Identity", "Cast"):
        return ins[0]
    if op == "Reshape":
        return ins[0][0], False
    if op == "Unsqueeze" and ins[0][1]:
        return ins[0][0], False
    if op == "Squeeze" and len(ins[0][0]) == 1:
        return ins[0][0], True
    if op == "Gather" and ins[1][1] and attrs.get("axis", 0) == 0:
        index = ins[1][0][0]
        entries = ins[0][0]
        return ([entries[index]], True) if isinstance(index, int) and -len(entries) <= index < len(entries) else None
    if op == "Concat":
        return [e for v in ins for e in v[0]], False
    if op == "ConstantOfShape":
        length = ins[0][0] if ins and ins[0] is not None else None
        if not length or not isinstance(length[0], int):
            return None
        fill = numpy_helper.to_array(attrs["value"]).reshape(-1).tolist()[0] if "value" in attrs else 0
        return [fill] * length[0], False
    if op in ("Mul", "Add", "Equal"):
        return _elementwise(op, ins[0], ins[1])
    if op == "Where":
        (cond, _), (a, sa), (b, sb) = ins
        n = max(len(cond), len(a), len(b))
        pick = [_at(a, k) if _at(cond, k) is True else _at(b, k) if _at(cond, k) is False else None for k in range(n)]
        return pick, all(v[1] for v in ins)
    return None


def _at(entries: list, k: int):
    return entries[0] if len(entries) == 1 else entries[k]


def _elementwise(op: str, x, y):
    (a, sa), (b, sb) = x, y
    if len(a) != len(b) and 1 not in (len(a), len(b)):
        return None
    out = []
    for k in range(max(len(a), len(b))):
        p, q = _at(a, k), _at(b, k)
        out.append(_combine(op, p, q))
    return out, sa and sb


def _combine(op: str, p, q):
    known = isinstance(p, (int, bool)) and isinstance(q, (int, bool))
    if op == "Equal":
        if known:
            return p == q
        if isinstance(p, _Dim) and isinstance(q, int) and q < 0 or isinstance(q, _Dim) and isinstance(p, int) and p < 0:
            return False  # a size is never negative
        return None
    if known:
        return p * q if op == "Mul" else p + q
    if op == "Mul" and (p == 1 or q == 1):
        return q if p == 1 else p
    if op == "Add" and (p == 0 or q == 0):
        return q if p == 0 else p
    return None


def _refine_expands(model: onnx.ModelProto) -> int:
    """Expand's output dim is the input's where the target shape's entry is 1 (or the entry
    itself where it is a known size above 1)."""
    graph = model.graph
    infos = {vi.name: vi for vi in list(graph.input) + list(graph.value_info) + list(graph.output)}
    initializers = {i.name: list(i.dims) for i in graph.initializer}
    values = None
    count = 0
    for node in graph.node:
        if node.op_type != "Expand" or node.output[0] not in infos or not _has_shape(infos[node.output[0]]):
            continue
        in_dims = _input_dims(node.input[0], infos, initializers)
        out_dims = infos[node.output[0]].type.tensor_type.shape.dim
        if in_dims is None or all(_static(d) is not None for d in out_dims):
            continue
        values = values if values is not None else _shape_values(graph, infos)
        target = values.get(node.input[1])
        if target is None or len(target[0]) != len(out_dims):
            continue
        offset = len(out_dims) - len(in_dims)
        for k, (entry, d_out) in enumerate(zip(target[0], out_dims)):
            if _static(d_out) is not None or isinstance(entry, bool):
                continue
            size = _static(in_dims[k - offset]) if k >= offset else 1
            if isinstance(entry, int) and entry > 1:
                d_out.dim_value = entry
                count += 1
            elif entry == 1 and size is not None:
                d_out.dim_value = size
                count += 1
    return count
