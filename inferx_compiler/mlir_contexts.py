"""The two MLIR worlds: torch-mlir's bindings (graph level) and IREE's (input/dispatch level).

A pass declares which world it runs in with `level`: "graph" passes see torch-mlir's
context (where the `inferx` dialect lives), "iree" passes see IREE's context (where
flow/hal/util exist). A module crosses from the first to the second once, as bytecode.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from types import ModuleType

GRAPH = "graph"
IREE = "iree"
LEVELS = (GRAPH, IREE)


@dataclass(frozen=True)
class Bindings:
    level: str
    ir: ModuleType
    PassManager: type


def bindings(level: str) -> Bindings:
    if level == GRAPH:
        from torch_mlir import ir
        from torch_mlir.passmanager import PassManager
    elif level == IREE:
        from iree.compiler import ir
        from iree.compiler.passmanager import PassManager
    else:
        raise ValueError(f"unknown pass level '{level}'; valid levels: {', '.join(LEVELS)}")
    return Bindings(level, ir, PassManager)


def bindings_of(op) -> Bindings:
    """The bindings an op (or module, attribute) was made by: IREE's or torch-mlir's."""
    return bindings(IREE if type(op).__module__.startswith("iree.") else GRAPH)


def new_graph_context():
    """A torch-mlir context with the torch dialect registered and `inferx` loaded."""
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d

    from inferx_compiler.dialects import load_inferx_dialect

    ctx = ir.Context()
    torch_d.register_dialect(ctx)
    with ctx:
        load_inferx_dialect()
    return ctx


def new_iree_context():
    """A context with every IREE dialect registered (no compiler session needed)."""
    from iree.compiler import ir

    return ir.Context()


def new_context(level: str):
    return new_graph_context() if level == GRAPH else new_iree_context()


def module_to_bytecode(module_op) -> bytes:
    buf = io.BytesIO()
    module_op.write_bytecode(buf)
    return buf.getvalue()
