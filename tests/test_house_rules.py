"""The house rules of docs/architecture.md that a reader relies on: short functions, short module docstrings.

A function over ~100 lines must say in its docstring why it cannot be split (the word "unsplit"
and a reason); a module docstring over ~60 lines belongs in docs/ notes instead.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("counterfactual_ltr", "click_sim")
MAX_FUNCTION_LINES = 100
MAX_MODULE_DOC_LINES = 60


def _sources():
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", list(_sources()), ids=lambda p: str(p.relative_to(ROOT)))
def test_functions_and_module_docstrings_are_short(path):
    tree = ast.parse(path.read_text())
    problems = []
    doc = ast.get_docstring(tree, clean=False) or ""
    if doc.count("\n") > MAX_MODULE_DOC_LINES:
        problems.append(f"module docstring of {doc.count(chr(10))} lines (at most {MAX_MODULE_DOC_LINES}: "
                        "measurements and history go to docs/)")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES and "unsplit" not in (ast.get_docstring(node) or ""):
                problems.append(f"{node.name} (line {node.lineno}) has {length} lines")
    assert not problems, f"{path.relative_to(ROOT)}: " + "; ".join(problems)
