"""ONNX-level rewrites before import, where torch-mlir lacks a lowering.

`inline_known_ifs`: an `If` whose condition is known at compile time (computed from constants
and static shapes, e.g. `If(Equal(Shape(x)[1], 1))` as exporters write for optional squeezes)
is replaced by the nodes of the branch it takes, so that only data-dependent control flow
reaches torch-mlir (whose onnx-to-torch leaves some nested `If`s illegal). The branch's nodes
keep their names (diagnostics still point at them); its outputs reach the `If`'s outputs
through Identity nodes. Conditions computed from shapes inside a data-dependent branch are
known only where onnx's shape inference makes those shapes static there (not yet the case for
Silero VAD's decoder).

The constant evaluation covers the small integer/bool computations that feed conditions
(Shape, Gather, Slice, Equal, Cast, Not, arithmetic...), through onnx's reference
implementation, on tensors of at most `MAX_FOLD_ELEMENTS` elements.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import onnx
from onnx import numpy_helper

MAX_FOLD_ELEMENTS = 4096
_FOLDABLE = {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Not", "And", "Or", "Xor",
             "Cast", "Gather", "Slice", "Concat", "Squeeze", "Unsqueeze", "Reshape", "Add", "Sub", "Mul",
             "Div", "Mod", "Neg", "Abs", "Min", "Max", "Size", "ConstantOfShape", "Range", "Identity",
             "ReduceProd", "ReduceSum", "Where", "Expand", "Flatten", "Transpose"}


def inline_known_ifs(model: onnx.ModelProto) -> list[str]:
    """Inline every If whose condition is known; returns the names of the Ifs inlined. (One
    round; onnx_frontend repeats it, with shape folding, while nested Ifs become known.)"""
    if not _has_if(model.graph):
        return []
    inlined: list[str] = []
    _inline_in_graph(model.graph, {}, _static_shapes(model), _default_opset(model), inlined)
    return inlined


def fold_shape_computations(model: onnx.ModelProto) -> list[str]:
    """Replace top-level nodes whose integer or bool outputs are known at compile time (shape
    arithmetic: Shape -> Gather -> Concat -> a Pad's pads or a Reshape's shape) by Constant
    nodes, so that lowerings see constant operands instead of computations over dynamic
    values (torch-mlir and IREE mis-size some Pads and Reshapes fed by them). Returns the names
    of the nodes folded. Float computations are left alone."""
    inferred = _inferred_shapes(model)
    shapes = {name: dims for name, dims in inferred.items() if None not in dims}
    opset = _default_opset(model)
    graph = model.graph
    known = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    shape_values: dict[str, tuple] = {}  # Shape outputs of partly dynamic shapes: None where dynamic
    folded, out = [], []
    for node in graph.node:
        value = _constant_value(node, known, shapes, opset) if node.op_type != "Constant" else None
        if value is None:
            value = _static_dims_picked(node, known, shape_values)
            if value is not None:
                known[node.output[0]] = value[0]
        if node.op_type == "Shape" and node.input[0] in inferred:
            shape_values[node.output[0]] = _shape_slice(node, inferred[node.input[0]])
        if value is not None and _shape_like(value) and len(value) == len(node.output):
            out += [onnx.helper.make_node("Constant", [], [name], name=f"{node.name}/folded{k}" if k else node.name,
                                          value=numpy_helper.from_array(np.asarray(v), name))
                    for k, (name, v) in enumerate(zip(node.output, value))]
            folded.append(node.name)
        else:
            out.append(node)
        _fold(node, known, shapes, opset)
    del graph.node[:]
    graph.node.extend(out)
    return folded


def trim_unused_conv_padding(model: onnx.ModelProto) -> list[str]:
    """Drop trailing padding a strided Conv never reads. With input size n, pads (b, e), kernel
    extent k and stride s, the last (n + b + e - k) % s padded elements fall outside every
    window; IREE 3.13 fuses the pad into the convolution and its verifier then rejects the
    operand ("inferred ... dimension #2 to be 4, but found 3"). Ending the padding earlier
    computes the same values. Needs the spatial sizes static (the batch may be dynamic);
    returns the nodes rewritten."""
    shapes = _inferred_shapes(model)
    rewritten = []
    for node in model.graph.node:
        shape = shapes.get(node.input[0]) if node.op_type == "Conv" else None
        if shape is None or len(shape) < 3 or None in shape[2:]:
            continue
        attrs = {a.name: a for a in node.attribute}
        if "auto_pad" in attrs and attrs["auto_pad"].s not in (b"", b"NOTSET"):
            continue
        spatial = shape[2:]
        pads = list(attrs["pads"].ints) if "pads" in attrs else [0] * (2 * len(spatial))
        kernel = _kernel_shape(node, attrs, shapes)
        if kernel is None or len(kernel) != len(spatial):
            continue
        strides = list(attrs["strides"].ints) if "strides" in attrs else [1] * len(spatial)
        dilations = list(attrs["dilations"].ints) if "dilations" in attrs else [1] * len(spatial)
        trimmed = list(pads)
        for i, n in enumerate(spatial):
            extent = (kernel[i] - 1) * dilations[i] + 1
            unused = (n + pads[i] + pads[i + len(spatial)] - extent) % strides[i]
            trimmed[i + len(spatial)] -= min(unused, pads[i + len(spatial)])
        if trimmed != pads:
            node.attribute.remove(attrs["pads"]) if "pads" in attrs else None
            node.attribute.append(onnx.helper.make_attribute("pads", trimmed))
            rewritten.append(node.name)
    return rewritten


def drop_zero_gemm_bias(model: onnx.ModelProto) -> list[str]:
    """Drop a Gemm's C input where it is an initializer (or Constant) of zeros and beta finite:
    alpha A B + beta 0 is alpha A B (a zero's sign aside). Exporters write such biases for a
    bias-free projection (a tied LM head); IREE adds them in a dispatch of their own over the
    whole result (GPT-2's 128x50257 logits: 2 ms a call). Returns the Gemms rewritten."""
    constants = {i.name: i for i in model.graph.initializer}
    constants.update({n.output[0]: a.t for n in model.graph.node if n.op_type == "Constant"
                      for a in n.attribute if a.name == "value"})
    for i in model.graph.input:  # an initializer a graph input of its name overrides is no constant
        constants.pop(i.name, None)
    rewritten = []
    for node in model.graph.node:
        if node.op_type != "Gemm" or len(node.input) < 3 or node.input[2] not in constants:
            continue
        beta = next((a.f for a in node.attribute if a.name == "beta"), 1.0)
        bias = numpy_helper.to_array(constants[node.input[2]])
        if np.isfinite(beta) and bias.dtype.kind == "f" and not np.any(bias):
            del node.input[2]
            rewritten.append(node.name)
    return rewritten


def scale_biasless_gemms(model: onnx.ModelProto) -> list[str]:
    """A Gemm without C whose alpha is not 1 becomes Gemm(alpha=1) then Mul(alpha): torch-mlir's
    Gemm lowering (the version in versions.py) turns a two-input Gemm into a plain matrix
    product and drops alpha (a 0.5 gave twice onnxruntime's values). The product then scaled
    is what ONNX defines, so the values do not change. Returns the Gemms rewritten."""
    rewritten, nodes = [], []
    for node in model.graph.node:
        nodes.append(node)
        alpha = next((a for a in node.attribute if a.name == "alpha"), None)
        if node.op_type != "Gemm" or (len(node.input) > 2 and node.input[2]) or alpha is None or alpha.f == 1.0:
            continue
        out = node.output[0]  # (unique in the graph, where node names may be empty)
        scale = numpy_helper.from_array(np.array(alpha.f, np.float32), f"{out}/alpha")
        nodes.append(onnx.helper.make_node("Constant", [], [scale.name], name=scale.name, value=scale))
        nodes.append(onnx.helper.make_node("Mul", [f"{out}/unscaled", scale.name], [out], name=f"{out}/scale"))
        node.output[0] = f"{out}/unscaled"
        node.attribute.remove(alpha)
        rewritten.append(node.name)
    if rewritten:
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    return rewritten


def expand_reflect_pads(model: onnx.ModelProto) -> list[str]:
    """Pad(mode=reflect|edge) with constant pads over axes of static size becomes, per padded
    axis, Concat(Gather(x, mirrored indices), x, Gather(x, mirrored indices)): IREE 3.13's
    lowering of a reflect pad fails in code generation ("... to be greater than or equal to
    128, but found 113": Silero VAD's STFT framing); gathers and a concat compile. Same values."""
    shapes = _inferred_shapes(model)
    graph = model.graph
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    constants.update({n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in graph.node
                      if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"})
    return replace_nodes(graph, lambda node: _expand_pad(node, shapes, constants, graph))


def flatten_dynamic_reshapes(model: onnx.ModelProto) -> list[str]:
    """Reshape(x, [-1, t1..tk]) where x's trailing dims from some axis are static and hold
    t1*..*tk elements and its leading dims two or more dynamic ones becomes Flatten(x, axis)
    (then a Reshape of the 2-D result, which has one dynamic dim, where the trailing dims are
    not t1..tk already). torch-mlir's lowering of such a view (the version in versions.py)
    mis-sizes the -1: [?, ?, 64] -> [-1, 64] was cast to [?, 1, 64] (calls failed, 'mismatched
    size for broadcast'), [?, ?, 4, 16] -> [-1, 64] gave [batch, 64] (silently wrong values).
    GPT-2 writes both in every layer (Conv1D's `x.view(-1, x.size(-1))`, the heads merged).
    Same values. Returns the Reshapes rewritten."""
    shapes = _inferred_shapes(model)
    graph = model.graph
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    constants.update({n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in graph.node
                      if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"})
    for i in graph.input:
        constants.pop(i.name, None)
    return replace_nodes(graph, lambda node: _flatten_reshape(node, shapes, constants))


def _flatten_reshape(node: onnx.NodeProto, shapes: dict, constants: dict):
    if node.op_type != "Reshape" or node.input[1] not in constants or node.input[0] not in shapes:
        return None
    target = [int(v) for v in np.asarray(constants[node.input[1]]).reshape(-1)]
    dims = list(shapes[node.input[0]])
    if len(target) < 2 or target[0] != -1 or any(t <= 0 for t in target[1:]):
        return None
    axis = _trailing_axis(dims, int(np.prod(target[1:])))
    if axis is None or sum(d is None for d in dims[:axis]) < 2:
        return None
    if target[1:] == dims[axis:] and len(target) == 2:
        return [onnx.helper.make_node("Flatten", [node.input[0]], list(node.output), name=node.name, axis=axis)]
    flat = f"{node.output[0]}/flat"
    return [onnx.helper.make_node("Flatten", [node.input[0]], [flat], name=f"{node.name}/flatten", axis=axis),
            onnx.helper.make_node("Reshape", [flat, node.input[1]], list(node.output), name=node.name)]


def _trailing_axis(dims: list, size: int):
    """The axis from which x's trailing dims are static and hold `size` elements, if any."""
    product = 1
    for axis in range(len(dims) - 1, 0, -1):
        if dims[axis] is None:
            return None
        product *= dims[axis]
        if product == size:
            return axis
        if product > size:
            return None
    return None


def replace_nodes(graph: onnx.GraphProto, rewrite) -> list[str]:
    """Replace, in order, each node for which `rewrite(node)` returns a node list (None: keep
    the node); returns the names of the nodes replaced."""
    rewritten, out = [], []
    for node in graph.node:
        replacement = rewrite(node)
        if replacement is None:
            out.append(node)
        else:
            out += replacement
            rewritten.append(node.name)
    del graph.node[:]
    graph.node.extend(out)
    return rewritten


def _expand_pad(node: onnx.NodeProto, shapes: dict, constants: dict, graph: onnx.GraphProto):
    mode = next((a.s.decode() for a in node.attribute if a.name == "mode"), "constant")
    if node.op_type != "Pad" or mode not in ("reflect", "edge") or len(node.input) < 2 or len(node.input) > 3:
        return None
    shape, pads = shapes.get(node.input[0]), constants.get(node.input[1])
    if shape is None or pads is None or pads.size != 2 * len(shape) or (pads < 0).any():
        return None
    rank, nodes, current = len(shape), [], node.input[0]
    for axis in range(rank):
        before, after = int(pads[axis]), int(pads[axis + rank])
        if not before and not after:
            continue
        n = shape[axis]
        if n is None or (mode == "reflect" and max(before, after) >= n):
            return None
        left = list(range(before, 0, -1)) if mode == "reflect" else [0] * before
        right = list(range(n - 2, n - 2 - after, -1)) if mode == "reflect" else [n - 1] * after
        parts = []
        for side, indices in (("left", left), ("right", right)):
            if not indices:
                continue
            idx = f"{node.name}/{side}{axis}_indices"
            graph.initializer.append(numpy_helper.from_array(np.array(indices, np.int64), idx))
            parts.append((side, onnx.helper.make_node("Gather", [current, idx], [f"{node.name}/{side}{axis}"],
                                                      name=f"{node.name}/{side}{axis}", axis=axis)))
        inputs = [p.output[0] for s_, p in parts if s_ == "left"] + [current] + \
                 [p.output[0] for s_, p in parts if s_ == "right"]
        result = f"{node.name}/axis{axis}"
        nodes += [p for _, p in parts]
        nodes.append(onnx.helper.make_node("Concat", inputs, [result], name=f"{node.name}/concat{axis}", axis=axis))
        current = result
    if not nodes:
        return None
    nodes.append(onnx.helper.make_node("Identity", [current], [node.output[0]], name=node.name))
    return nodes


def _kernel_shape(node: onnx.NodeProto, attrs: dict, shapes: dict):
    if "kernel_shape" in attrs:
        return list(attrs["kernel_shape"].ints)
    weight = shapes.get(node.input[1]) if len(node.input) > 1 else None
    return list(weight[2:]) if weight and None not in weight[2:] else None


def _shape_like(values: list) -> bool:
    return all(v is not None and np.asarray(v).dtype.kind in "iub" and np.asarray(v).size <= MAX_FOLD_ELEMENTS
               for v in values)


def _has_if(graph: onnx.GraphProto) -> bool:
    return any(n.op_type == "If" or any(a.type == onnx.AttributeProto.GRAPH and _has_if(a.g) for a in n.attribute)
               for n in graph.node)


def _default_opset(model: onnx.ModelProto) -> int:
    return next((i.version for i in model.opset_import if i.domain in ("", "ai.onnx")), 17)


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Every value with a fully static shape, subgraphs included, after shape inference."""
    return {name: dims for name, dims in _inferred_shapes(model).items() if None not in dims}


def _inferred_shapes(model: onnx.ModelProto) -> dict[str, tuple]:
    """Every value's shape after shape inference, subgraphs included; None for a dim not
    known statically."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:
        inferred = model
    shapes: dict[str, tuple] = {}

    def collect(graph):
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            if vi.type.tensor_type.HasField("shape"):
                shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None
                                        for d in vi.type.tensor_type.shape.dim)
        for n in graph.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    collect(a.g)

    collect(inferred.graph)
    return shapes


def _inline_in_graph(graph: onnx.GraphProto, outer: dict, shapes: dict, opset: int, inlined: list) -> None:
    known = dict(outer)
    known.update({i.name: numpy_helper.to_array(i) for i in graph.initializer})
    nodes = list(graph.node)
    out: list[onnx.NodeProto] = []
    i = 0
    while i < len(nodes):
        node = nodes[i]
        i += 1
        cond = known.get(node.input[0]) if node.op_type == "If" and node.input else None
        if cond is not None and cond.size == 1:
            branch = _attribute_graph(node, "then_branch" if bool(cond.reshape(())) else "else_branch")
            nodes[i:i] = _branch_nodes(branch, node, graph)  # evaluated next, in order
            inlined.append(node.name)
            continue
        if node.op_type == "If":
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    _inline_in_graph(a.g, known, shapes, opset, inlined)
        _fold(node, known, shapes, opset)
        out.append(node)
    del graph.node[:]
    graph.node.extend(out)


def _attribute_graph(node: onnx.NodeProto, name: str) -> onnx.GraphProto:
    return next(a.g for a in node.attribute if a.name == name)


def _branch_nodes(branch: onnx.GraphProto, node: onnx.NodeProto, parent: onnx.GraphProto) -> list:
    """The branch's nodes, then an Identity per output onto the If's output names."""
    parent.initializer.extend(branch.initializer)
    copies = [onnx.NodeProto.FromString(n.SerializeToString()) for n in branch.node]
    for k, (src, dst) in enumerate(zip(branch.output, node.output)):
        if dst:
            copies.append(onnx.helper.make_node("Identity", [src.name], [dst], name=f"{node.name}/out{k}"))
    return copies


def _shape_slice(node: onnx.NodeProto, dims: tuple) -> tuple:
    attrs = {a.name: a.i for a in node.attribute}
    return tuple(dims[attrs.get("start", 0):attrs.get("end", len(dims))])


def _static_dims_picked(node: onnx.NodeProto, known: dict, shape_values: dict) -> Optional[list]:
    """The value of a Gather or Slice of Shape(x) that picks only static dims of x, though
    others of x are dynamic; None otherwise."""
    if node.op_type == "Gather":
        return _static_dims_gathered(node, known, shape_values)
    if node.op_type == "Slice":
        return _static_dims_sliced(node, known, shape_values)
    return None


def _static_dims_gathered(node: onnx.NodeProto, known: dict, shape_values: dict) -> Optional[list]:
    """Gather(Shape(x), indices) (Swin's window partition reads H and W of a [batch, H, W, C]
    tensor whose batch is dynamic)."""
    if node.input[0] not in shape_values or node.input[1] not in known:
        return None
    if any(a.name == "axis" and a.i != 0 for a in node.attribute):
        return None
    dims, indices = shape_values[node.input[0]], np.asarray(known[node.input[1]])
    if not np.issubdtype(indices.dtype, np.integer) or indices.size > len(dims):
        return None
    picked = [dims[int(i)] if -len(dims) <= int(i) < len(dims) else None for i in indices.reshape(-1)]
    if None in picked:
        return None
    return [np.array(picked, np.int64).reshape(indices.shape)]


def _static_dims_sliced(node: onnx.NodeProto, known: dict, shape_values: dict) -> Optional[list]:
    """Slice(Shape(x), starts, ends[, axes, steps]) with constant bounds whose dims are static
    (GPT-2's Conv1D reads `x.size(-1)` as Shape -> Slice[-1:])."""
    if node.input[0] not in shape_values or any(t and t not in known for t in node.input[1:]):
        return None
    bounds = [np.asarray(known[t]).reshape(-1).tolist() if t else None for t in list(node.input[1:]) + [None] * 4]
    starts, ends, axes, steps = bounds[:4]
    if len(starts) != 1 or (axes and axes != [0]):
        return None
    dims = list(shape_values[node.input[0]])
    picked = dims[slice(starts[0], ends[0], steps[0] if steps else 1)]
    if not picked or None in picked:
        return None
    return [np.array(picked, np.int64)]


def _fold(node: onnx.NodeProto, known: dict, shapes: dict, opset: int) -> None:
    """Record the node's outputs in `known` when they can be computed now."""
    value = _constant_value(node, known, shapes, opset)
    if value is not None:
        for name, v in zip(node.output, value):
            if name and v is not None and np.asarray(v).size <= MAX_FOLD_ELEMENTS:
                known[name] = np.asarray(v)


def _constant_value(node: onnx.NodeProto, known: dict, shapes: dict, opset: int) -> Optional[list]:
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Constant":
        return _run(node, {}, opset)
    if node.op_type == "Shape" and node.input[0] in shapes:
        attrs = {a.name: a.i for a in node.attribute}
        dims = shapes[node.input[0]]
        return [np.array(dims[attrs.get("start", 0):attrs.get("end", len(dims))], np.int64)]
    if node.op_type == "Size" and node.input[0] in shapes:
        return [np.array(int(np.prod(shapes[node.input[0]])), np.int64)]
    inputs = [t for t in node.input if t]
    if node.op_type in _FOLDABLE and inputs and all(t in known for t in inputs):
        if all(np.asarray(known[t]).size <= MAX_FOLD_ELEMENTS for t in inputs):
            return _run(node, known, opset)
    return None


def _run(node: onnx.NodeProto, known: dict, opset: int) -> Optional[list]:
    """One node through onnx's reference implementation; None when it cannot run."""
    from onnx.reference import ReferenceEvaluator

    feeds = {t: known[t] for t in node.input if t}
    try:
        graph = onnx.helper.make_graph(
            [node], "fold", [onnx.helper.make_tensor_value_info(t, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                             for t, v in feeds.items()],
            [onnx.helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in node.output if o])
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        return list(ReferenceEvaluator(model).run(None, feeds))
    except Exception:
        return None
