"""The package's import graph, read from the source files (imports inside functions included).

Module names are the installed ones: the user's folders `passes/`, `runtime/` and `dialects/`
are `inferx_compiler.passes`, `.runtime` and `.dialects` (pyproject.toml's package-dir).
"""

from __future__ import annotations

import ast
import os
from typing import Iterable

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOLDERS = {"inferx_compiler": "inferx_compiler", "passes": "inferx_compiler.passes",
           "runtime": "inferx_compiler.runtime", "dialects": "inferx_compiler.dialects"}


def module_files() -> dict[str, str]:
    """Installed module name -> source path, for every module of the package."""
    found = {}
    for folder, package in FOLDERS.items():
        for dirpath, dirnames, filenames in os.walk(os.path.join(REPO, folder)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            rel = os.path.relpath(dirpath, os.path.join(REPO, folder))
            parts = [package] + ([] if rel == "." else rel.split(os.sep))
            for name in filenames:
                if name.endswith(".py"):
                    stem = name[:-3]
                    found[".".join(parts + ([] if stem == "__init__" else [stem]))] = os.path.join(dirpath, name)
    return found


def imports_of(module: str, path: str, known: set[str]) -> set[str]:
    """The package modules `module` imports anywhere in its file (top level or in functions)."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(_known_prefix(alias.name, known) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if full in known else _known_prefix(base, known))
    out.discard(None)
    out.discard(module)
    return out


def _known_prefix(name: str, known: set[str]):
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {m: imports_of(m, p, known) for m, p in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def within(module: str, packages: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)
