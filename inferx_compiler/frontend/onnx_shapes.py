"""Static dims that onnx's shape inference loses, put back before import.

torch-mlir's ONNX lowerings decide broadcasting from the types it is given: an `Expand` or an
elementwise op whose operand dim is dynamic is lowered as "this dim is not 1" (with a runtime
check), so a dim that is 1 at run time but unknown in the types fails the call ("onnx.Expand
input has a dim that is not statically 1"). onnx's inference (checked with onnx 1.23) loses
such dims through a `Slice` whose starts or ends are computed, although the axes it slices are
constant and every other axis keeps its input size: the TorchScript exporter writes
`position_ids[:, :seq]` that way for every Hugging Face encoder, and the mask that follows is
then expanded to the batch.

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
    """The model with the dims of `Slice` outputs on axes it does not slice made static where
    the input's are (`infer` is the caller's shape inference, run again after each round), and
    how many dims were set."""
    total = 0
    for _ in range(MAX_ROUNDS):
        count = _refine_slices(model)
        if not count:
            break
        total += count
        model = infer(model)
    return model, total


def _refine_slices(model: onnx.ModelProto) -> int:
    graph = model.graph
    infos = {vi.name: vi for vi in list(graph.input) + list(graph.value_info) + list(graph.output)}
    constants = _constant_ints(graph)
    initializers = {i.name: list(i.dims) for i in graph.initializer}
    count = 0
    for node in graph.node:
        if node.op_type != "Slice" or len(node.input) < 4 or not node.input[3]:
            continue
        axes = constants.get(node.input[3])
        in_dims = _input_dims(node.input[0], infos, initializers)
        target = infos.get(node.output[0])
        if axes is None or in_dims is None:
            continue
        if target is None:
            continue
        if not _has_shape(target) or len(target.type.tensor_type.shape.dim) != len(in_dims):
            continue
        sliced = {int(a) % len(in_dims) for a in axes}
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


def _constant_ints(graph: onnx.GraphProto) -> dict:
    values = {i.name: numpy_helper.to_array(i).reshape(-1).tolist()
              for i in graph.initializer if i.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32)}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            array = numpy_helper.to_array(node.attribute[0].t)
            if array.dtype.kind == "i":
                values[node.output[0]] = array.reshape(-1).tolist()
    return values


def _has_shape(vi: onnx.ValueInfoProto) -> bool:
    return vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape")


def _static(dim) -> Optional[int]:
    return dim.dim_value if dim.HasField("dim_value") and dim.dim_value >= 0 else None
