"""What rewrites of one ONNX node into others share: a builder of the new nodes, a view of the
node replaced, and the facts about the graph's tensors a rewrite reads.

Names derive from the node replaced (`<node>/<Op>_<k>`), so that a diagnostic raised later
about one of the new nodes still names the model's own node.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from inferx_compiler.errors import ModelLoadError

F32 = TensorProto.FLOAT


class NodeBuilder:
    """New nodes that replace `node`, in order."""

    def __init__(self, node: onnx.NodeProto):
        self.node = node
        self.nodes: list[onnx.NodeProto] = []

    def op(self, op_type: str, inputs: list, output: Optional[str] = None, **attrs) -> str:
        """Append one node of the default domain; returns its (first) output."""
        name = f"{self.node.name}/{op_type}_{len(self.nodes)}"
        out = output or name
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=name, **attrs))
        return out

    def op_n(self, op_type: str, inputs: list, count: int, **attrs) -> list[str]:
        """Append one node with `count` outputs; returns them."""
        name = f"{self.node.name}/{op_type}_{len(self.nodes)}"
        outs = [f"{name}:{k}" for k in range(count)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, **attrs))
        return outs

    def const(self, value, dtype=np.float32) -> str:
        arr = np.asarray(value, dtype=dtype)
        name = f"{self.node.name}/const_{len(self.nodes)}"
        self.nodes.append(helper.make_node("Constant", [], [name], name=name,
                                           value=numpy_helper.from_array(arr, name)))
        return name

    def f32(self, x: str, elem_type: Optional[int]) -> str:
        return x if elem_type == F32 else self.op("Cast", [x], to=F32)


class NodeView:
    """A node's inputs by position ('' or missing: absent) and attributes by name."""

    def __init__(self, node: onnx.NodeProto):
        self.proto = node
        self.name = node.name
        self.inputs = list(node.input)
        self.outputs = list(node.output)
        self.attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}

    def input(self, k: int) -> Optional[str]:
        return self.inputs[k] if k < len(self.inputs) and self.inputs[k] else None

    def attr(self, name: str, default=None):
        value = self.attrs.get(name, default)
        return value.decode() if isinstance(value, bytes) else value

    def refuse(self, why: str) -> ModelLoadError:
        domain = self.proto.domain or "ai.onnx"
        return ModelLoadError(f"node '{self.name}' (op_type={self.proto.op_type}, domain={domain}): {why}")


class GraphFacts:
    """Element types, static shapes and initializer values of the model's tensors."""

    def __init__(self, model: onnx.ModelProto):
        try:
            inferred = onnx.shape_inference.infer_shapes(model).graph
        except Exception:  # noqa: BLE001 - facts are best effort; rewrites needing one refuse
            inferred = model.graph
        self.types: dict[str, int] = {}
        self.ranks: dict[str, int] = {}
        for vi in list(inferred.input) + list(inferred.value_info) + list(inferred.output):
            t = vi.type.tensor_type
            if t.elem_type:
                self.types[vi.name] = t.elem_type
            if t.HasField("shape"):
                self.ranks[vi.name] = len(t.shape.dim)
        self.graph = model.graph
        self.initializers = {i.name: i for i in model.graph.initializer}
        for name, init in self.initializers.items():
            self.types[name] = init.data_type
            self.ranks[name] = len(init.dims)
        self.opset = next((i.version for i in model.opset_import if i.domain in ("", "ai.onnx")), 0)

    def constant(self, name: Optional[str]) -> Optional[np.ndarray]:
        init = self.initializers.get(name) if name else None
        return None if init is None else numpy_helper.to_array(init)

    def add_initializer(self, array: np.ndarray, name: str) -> str:
        self.graph.initializer.append(numpy_helper.from_array(array, name))
        self.initializers[name] = self.graph.initializer[-1]
        return name
