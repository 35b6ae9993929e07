"""What each public function of a compiled module does per call, read off IREE's stream-level IR
(the executable-sources phase): dispatches launched, copies made (and their bytes), buffers the
caller passes that the call writes in place (`stream.tensor.import ... consume`, from
`iree.abi.output`: a generation model's KV cache).

This is how a build shows that a decode step writes its cache in place: one entry per function in
report.json's "functions", with `in_place_bytes` (the cache) beside `copy_bytes`. A walk over the
typed IR (op names and constant operands), not over printed text.
"""

from __future__ import annotations


def function_report(module_op) -> dict[str, dict]:
    """{public function name: {"dispatches", "copies", "copy_bytes", "largest_copy_bytes",
    "in_place_bytes"}} (sizes -1 where not a constant)."""
    from iree.compiler import ir

    out = {}
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "util.func" or _private(op):
            continue
        counts = {"dispatches": 0, "copies": 0, "copy_bytes": 0, "largest_copy_bytes": 0, "in_place_bytes": 0}

        def visit(inner):
            if inner.name == "stream.cmd.dispatch":
                counts["dispatches"] += 1
            elif inner.name == "stream.cmd.copy":
                size = _constant(inner.operands[-1])
                counts["copies"] += 1
                counts["copy_bytes"] += max(size, 0)
                counts["largest_copy_bytes"] = max(counts["largest_copy_bytes"], size)
            elif inner.name == "stream.tensor.import" and "consume" in inner.attributes:
                counts["in_place_bytes"] += max(_constant(inner.operands[-1]), 0)
            return ir.WalkResult.ADVANCE

        op.walk(visit)
        out[ir.StringAttr(op.attributes["sym_name"]).value] = counts
    return out


def _private(op) -> bool:
    from iree.compiler import ir

    return "sym_visibility" in op.attributes and ir.StringAttr(op.attributes["sym_visibility"]).value == "private"


def _constant(value) -> int:
    from iree.compiler import ir

    owner = value.owner
    if isinstance(owner, ir.Operation) or hasattr(owner, "name"):
        operation = owner.operation if hasattr(owner, "operation") else owner
        if operation.name == "arith.constant":
            return ir.IntegerAttr(operation.attributes["value"]).value
    return -1
