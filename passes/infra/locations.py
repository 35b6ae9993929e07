"""The names in an MLIR location: `loc("conv_3")`, fused (`loc(fused[...])`) or wrapped
(`callsite`). The ONNX importer names every op after its node and IREE carries the names into
its dispatches, so a diagnostic at any stage can be traced back to the model
(frontend/onnx_nodes.py maps names to nodes). Works on the location classes of both MLIR
bindings (torch-mlir's and IREE's), through their public attributes.
"""

from __future__ import annotations


def location_names(loc) -> list[str]:
    """Every name in a location, outermost first, without repeats."""
    names: list[str] = []
    _collect(loc, names)
    return names


def _collect(loc, names: list[str]) -> None:
    kind = type(loc).__name__
    if kind == "Location":  # diagnostics of an MLIRError carry the untyped class
        loc = loc.from_attr(loc.attr, loc.context)
        kind = type(loc).__name__
    if kind == "NameLoc":
        if loc.name_str and loc.name_str not in names:
            names.append(loc.name_str)
        _collect(loc.child_loc, names)
    elif kind == "FusedLoc":
        for sub in loc.locations:
            _collect(sub, names)
    elif kind == "CallSiteLoc":
        _collect(loc.callee, names)
        _collect(loc.caller, names)
