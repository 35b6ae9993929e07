"""Standard ONNX ops that torch-mlir cannot lower, replaced by their ONNX function bodies.

ONNX defines several newer ops as functions of older ones (the schema's function body, or a
body built for the node's attributes and input types: a "context-dependent function"). The
torch-mlir importer (20261001) has no lowering for some of them (`Attention` of opsets 23-24,
`RMSNormalization`, `RotaryEmbedding`, `NegativeLogLikelihoodLoss`, ...), while it lowers every
op their bodies use. `expand_function_ops` replaces each such node by its body before import:
what onnx's `*_expanded` conformance cases run, with the same numbers. The body's nodes are
named `NODE/...` and its internal values `NODE/...`, so diagnostics still name the original
node.

Only ops listed in `EXPANDED_OPS` are expanded (the others keep torch-mlir's own lowering,
usually one fused op), and only where every input type is known after shape inference and
the body holds no subgraph. The bodies come from the installed onnx package's schemas
(public `onnx.defs` API; checked against onnx 1.23.2).
"""

from __future__ import annotations

from typing import Optional

import onnx
import onnx.defs

# torch-mlir 20261001 fails to legalize these; each one's function body lowers (measured on
# the ONNX backend cases: the `_expanded` twin of every failing case passes).
EXPANDED_OPS = frozenset({"Attention", "RMSNormalization", "RotaryEmbedding", "NegativeLogLikelihoodLoss",
                          "SoftmaxCrossEntropyLoss", "CausalConvWithState", "Swish"})
_STANDARD_DOMAINS = ("", "ai.onnx")


def expand_function_ops(model: onnx.ModelProto) -> list[str]:
    """Replace, in the main graph, each node of an `EXPANDED_OPS` op by its ONNX function
    body, again in the bodies (SoftmaxCrossEntropyLoss's holds a NegativeLogLikelihoodLoss),
    at most MAX_DEPTH levels; returns the names of the nodes replaced."""
    expanded = []
    for _ in range(MAX_DEPTH):
        level = _expand_once(model)
        if not level:
            break
        expanded += level
    return expanded


MAX_DEPTH = 4


def _expand_once(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    if not any(_listed(n) for n in graph.node):
        return []
    opset = next((i.version for i in model.opset_import if i.domain in _STANDARD_DOMAINS), 0)
    types = _value_types(model)
    expanded, nodes = [], []
    for node in graph.node:
        body = _function_body(node, opset, types) if _listed(node) else None
        if body is None:
            nodes.append(node)
            continue
        nodes += _inlined(node, body)
        expanded.append(node.name)
    if expanded:
        del graph.node[:]
        graph.node.extend(nodes)
    return expanded


def _listed(node: onnx.NodeProto) -> bool:
    return node.op_type in EXPANDED_OPS and node.domain in _STANDARD_DOMAINS


def _value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Every main-graph value's type after shape inference (initializers included)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:
        inferred = model
    g = inferred.graph
    types = {vi.name: vi.type for vi in list(g.input) + list(g.value_info) + list(g.output)}
    for init in g.initializer:
        types.setdefault(init.name, onnx.helper.make_tensor_type_proto(init.data_type, list(init.dims)))
    return types


def _function_body(node: onnx.NodeProto, opset: int, types: dict) -> Optional[onnx.FunctionProto]:
    """The node's function body at the model's opset, or None (no body, an input type not
    known, a body that needs a newer opset than the model's or holds subgraphs)."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        return None
    body = onnx.FunctionProto()
    if schema.has_context_dependent_function:
        if any(name and name not in types for name in node.input):
            return None
        input_types = [(types[name] if name else onnx.TypeProto()).SerializeToString() for name in node.input]
        try:
            body.ParseFromString(schema.get_context_dependent_function(node.SerializeToString(), input_types))
        except Exception:
            return None
    elif schema.has_function:
        body.CopyFrom(schema.function_body)
    else:
        return None
    needs = max((i.version for i in body.opset_import if i.domain in _STANDARD_DOMAINS), default=0)
    if needs > opset or any(_has_subgraph(n) for n in body.node):
        return None
    return body


def _has_subgraph(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def _inlined(node: onnx.NodeProto, body: onnx.FunctionProto) -> list[onnx.NodeProto]:
    """The body's nodes with the function's inputs and outputs renamed to the node's (an
    absent optional input to ""), its other values prefixed with the node's name, and
    attribute references resolved against the node's attributes (or the body's defaults)."""
    names = {formal: (node.input[i] if i < len(node.input) else "") for i, formal in enumerate(body.input)}
    names.update({formal: node.output[i] for i, formal in enumerate(body.output)
                  if i < len(node.output) and node.output[i]})
    given = {a.name: a for a in node.attribute}
    defaults = {a.name: a for a in body.attribute_proto}

    def rename(value: str) -> str:
        if not value:
            return ""
        return names.setdefault(value, f"{node.name}/{value}")

    out = []
    for k, inner in enumerate(body.node):
        copy = onnx.NodeProto()
        copy.CopyFrom(inner)
        copy.name = f"{node.name}/{inner.name or f'{inner.op_type}_{k}'}"
        copy.input[:] = [rename(v) for v in inner.input]
        copy.output[:] = [rename(v) for v in inner.output]
        del copy.attribute[:]
        for a in inner.attribute:
            if not a.ref_attr_name:
                copy.attribute.append(a)
                continue
            source = given.get(a.ref_attr_name) or defaults.get(a.ref_attr_name)
            if source is not None:
                resolved = onnx.AttributeProto()
                resolved.CopyFrom(source)
                resolved.name = a.name
                copy.attribute.append(resolved)
        out.append(copy)
    return out
