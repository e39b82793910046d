"""Every import path the README, the docs (the user guide included) or a test names keeps working, old (moved)
paths included."""

from __future__ import annotations

import importlib
import re

import pytest

from conftest import REPO

from counterfactual_ltr._moved import MOVED


def _documented_paths() -> list[str]:
    texts = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "docs" / "guide").glob("*.md")),
             *sorted((REPO / "tests").glob("test_*.py"))]
    found = set()
    for path in texts:
        found |= set(re.findall(r"\bcounterfactual_ltr(?:\.[A-Za-z_]\w*)+", path.read_text()))
    return sorted(found)


def _resolve(dotted: str):
    """The object ``dotted`` names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ModuleNotFoundError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_the_docs_name_paths():
    assert len(_documented_paths()) > 50


@pytest.mark.parametrize("dotted", _documented_paths())
def test_documented_path_resolves(dotted):
    assert _resolve(dotted) is not None


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_is_the_module_at_its_new_path(old):
    new = importlib.import_module(MOVED[old])
    assert importlib.import_module(old) is new
    package, _, name = old.rpartition(".")
    assert getattr(importlib.import_module(package), name) is new
    exec(f"from {package} import {name} as imported", globals())
    assert imported is new                                     # noqa: F821


@pytest.mark.slow      # a Python process importing the benchmark and its dependencies: 5-12 s
def test_an_old_experiment_path_runs_as_a_module():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "experiments.bench_solvers", "--help"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "--quick" in out.stdout, out.stderr
    import experiments.papers.table3 as new
    import experiments.table3 as old
    assert old is new
