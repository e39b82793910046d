"""The library's packages import each other in one direction only, and never the experiment scripts.

``FLOORS`` is the package-level order of ``docs/architecture.md``: a module may import modules of
its own package (or top-level module) and of packages on lower floors, never one beside or above it.

The graph is read from the source (AST), so an import hidden inside a function counts as much as
one at the top of a module: a cycle that only works because one side imports late is still a cycle
a reader has to untangle. ``from package import name`` is an edge to ``package.name`` when that is
a module, else to ``package`` (its ``__init__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGES = ("counterfactual_ltr", "click_sim")


def _module_files() -> dict[str, Path]:
    files = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


def _imported_modules(tree: ast.AST, module: str, is_package: bool, files) -> list[tuple[str, int]]:
    """Every module an ``import`` anywhere in ``tree`` loads (its top-level name when outside), with its line."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module
            # ``from pkg import name``: the module ``pkg.name`` if there is one, else ``pkg`` itself
            found += [(f"{base}.{a.name}" if f"{base}.{a.name}" in files else base, node.lineno) for a in node.names]
    return found


def import_graph() -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """``(edges, outside)``: module -> {imported library module: line}, and module -> {other top-level name: line}."""
    files = _module_files()
    edges: dict[str, dict[str, int]] = {m: {} for m in files}
    outside: dict[str, dict[str, int]] = {m: {} for m in files}
    for module, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        for name, line in _imported_modules(tree, module, path.name == "__init__.py", files):
            if name in files:
                if name != module:
                    edges[module].setdefault(name, line)
            elif name.split(".")[0] not in PACKAGES:
                outside[module].setdefault(name.split(".")[0], line)
    return edges, outside


def find_cycle(edges: dict[str, dict[str, int]]) -> list[str] | None:
    """One cycle of the graph as a closed path ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}     # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_imports_are_read_at_every_depth_and_resolved_to_modules():
    source = """
import numpy as np
from .datasets import RankingDataset
from . import estimators, __version__
from ..b import c

def f():
    from .metrics import ndcg
"""
    files = {"pkg.sub", "pkg.sub.datasets", "pkg.sub.estimators", "pkg.sub.metrics", "pkg.b.c"}
    found = _imported_modules(ast.parse(source), "pkg.sub.mod", False, files)
    assert [name for name, _ in found] == ["numpy", "pkg.sub.datasets", "pkg.sub.estimators", "pkg.sub",
                                           "pkg.b.c", "pkg.sub.metrics"]
    edges, _ = import_graph()
    assert "counterfactual_ltr.estimators" in edges["counterfactual_ltr.model_files.persistence"]    # inside a function


def test_find_cycle_names_the_modules_in_order():
    assert find_cycle({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": 1}, "b": {"c": 1}, "c": {}}) is None


def test_no_import_cycles_in_the_library():
    edges, _ = import_graph()
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(
        f"{a} (line {edges[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_the_library_never_imports_the_experiments():
    _, outside = import_graph()
    found = {m: names["experiments"] for m, names in outside.items() if "experiments" in names}
    assert not found, f"library modules importing experiments (module: line): {found}"


# The package-level order, bottom first: each entry a sub-package or a top-level module of the library.
FLOORS = [
    ("_moved",),
    ("_segments", "_validation", "_linalg", "_progress", "_version", "_docs", "ids", "distributed"),
    ("datasets", "metrics", "models", "model_selection"),
    ("examination",),
    ("logs",),
    ("propensity",),
    ("surrogates",),
    ("solvers",),
    ("evaluation",),
    ("estimators",),
    ("online",),
    ("learner_choice",),
    ("model_files",),
    ("export",),
    ("cli",),
    ("__main__", "counterfactual_ltr"),
]


def _node(module: str) -> str:
    """The floor entry a module belongs to: its sub-package, or itself when it is a top-level module."""
    parts = module.split(".")
    return "counterfactual_ltr" if len(parts) == 1 else parts[1]


def test_every_library_module_has_a_floor():
    edges, _ = import_graph()
    placed = {name for floor in FLOORS for name in floor}
    unplaced = sorted({_node(m) for m in edges if m.startswith("counterfactual_ltr")} - placed)
    assert not unplaced, f"modules or packages missing from FLOORS (add them to docs/architecture.md too): {unplaced}"


def test_packages_import_only_downwards():
    floor_of = {name: k for k, floor in enumerate(FLOORS) for name in floor}
    edges, _ = import_graph()
    upward = []
    for module, targets in edges.items():
        if not module.startswith("counterfactual_ltr"):
            continue
        for target, line in targets.items():
            a, b = _node(module), _node(target)
            if target.startswith("counterfactual_ltr") and a != b and floor_of[b] >= floor_of[a]:
                upward.append(f"{module} (line {line}) imports {target}: floor {floor_of[a]} -> {floor_of[b]}")
    assert not upward, "imports beside or above their own floor:\n" + "\n".join(upward)


def test_the_library_imports_new_paths_only():
    from counterfactual_ltr._moved import MOVED

    edges, _ = import_graph()
    old = {m: [t for t in targets if t in MOVED] for m, targets in edges.items() if m.startswith("counterfactual_ltr")}
    assert not {m: t for m, t in old.items() if t}, "library modules importing a moved module by its old path"
