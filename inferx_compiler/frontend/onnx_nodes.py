"""From MLIR back to the ONNX model: which nodes an op, a diagnostic or a failure comes from.

The ONNX importer gives every op the name location of its node (`loc("conv_3")`; nodes
without names get one in onnx_frontend). Lowerings keep them, fuse them (`loc(fused[...])`)
or wrap them (`callsite`), and IREE carries them into its dispatches, so any later
diagnostic can be traced to the nodes a user sees in Netron. Works on the location classes
of both MLIR bindings (torch-mlir's and IREE's), through their public attributes.
"""

from __future__ import annotations

from typing import Iterable


def nodes_named(names: Iterable[str], node_index: dict[str, dict]) -> list[dict]:
    """The ONNX nodes among `names` (node_index: name -> {name, op_type, domain, opset})."""
    seen, nodes = set(), []
    for name in names:
        node = node_index.get(name)
        if node is not None and name not in seen:
            seen.add(name)
            nodes.append(node)
    return nodes


def describe_node(node: dict) -> str:
    return (f"node '{node['name']}' (op_type={node['op_type']}, domain={node['domain'] or 'ai.onnx'}, "
            f"opset={node['opset']})")


MAX_NODES_NAMED = 8


def attribute_failure(error, node_index: dict[str, dict], what: str = "failed"):
    """The PipelineError again, its message led by the ONNX nodes its diagnostics point at
    (`error.nodes` lists them); unchanged when they point at none or it names them already."""
    if error.nodes:
        return error
    nodes = nodes_named(error.location_names, node_index)
    if not nodes:
        return error
    listed = "; ".join(describe_node(n) for n in nodes[:MAX_NODES_NAMED])
    if len(nodes) > MAX_NODES_NAMED:
        listed += f"; and {len(nodes) - MAX_NODES_NAMED} more"
    plural = "s" if len(nodes) > 1 else ""
    attributed = error.with_detail(f"ONNX {listed}{' ' if not plural else ': these nodes '}{what}:\n{error.detail}")
    attributed.nodes = nodes
    return attributed
