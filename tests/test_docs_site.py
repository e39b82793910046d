"""The documentation site's API reference lists every public name (fast: reads text, builds nothing).

``docs/api/index.rst`` holds the autosummary tables of ``counterfactual_ltr.__all__`` and
``click_sim.__all__``; a name added to ``__all__`` but not to those tables would be missing from
the site's front door of the API, so these tests name it. The full build (``python -m sphinx -W -n
-b html docs docs/_build/html``) is the slow test of ``tests/test_docs_build.py``.
"""

from __future__ import annotations

import re

import click_sim
import counterfactual_ltr
from conftest import REPO

API_INDEX = REPO / "docs" / "api" / "index.rst"


def _autosummary_entries(text: str) -> set[str]:
    """The names listed in the ``.. autosummary::`` blocks of an rst text."""
    names = set()
    for block in re.findall(r"^\.\. autosummary::\n((?:[ \t]+.*\n|[ \t]*\n)+)", text, flags=re.M):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith(":"):
                names.add(line)
    return names


def test_every_exported_name_is_in_the_api_reference():
    text = API_INDEX.read_text()
    listed = {name.rsplit(".", 1)[-1] for name in _autosummary_entries(text)}
    missing = [name for name in counterfactual_ltr.__all__ if name not in listed and name != "__version__"]
    assert not missing, f"add to docs/api/index.rst: {missing}"
    assert "counterfactual_ltr.__version__" in text


def test_every_click_sim_name_is_in_the_api_reference():
    listed = {name.rsplit(".", 1)[-1] for name in _autosummary_entries(API_INDEX.read_text())}
    reexported = {"RankingDataset", "binarize", "ClickLog"}      # documented with counterfactual_ltr's
    missing = [name for name in click_sim.__all__ if name not in listed | reexported]
    assert not missing, f"add to docs/api/index.rst: {missing}"


def test_the_site_has_its_pages_and_examples():
    docs = REPO / "docs"
    for page in ("conf.py", "index.rst", "notes.rst", "results.md", "api/modules.rst", "guide/index.md"):
        assert (docs / page).is_file(), page
    notes = (docs / "notes.rst").read_text()
    for note in sorted(docs.glob("*.md")):
        assert note.stem in notes or note.stem in ("results",), f"{note.name} is not in docs/notes.rst"
    examples = sorted((REPO / "examples").glob("plot_*.py"))
    assert len(examples) >= 3
    for example in examples:
        assert example.read_text().startswith('"""'), f"{example.name}: sphinx-gallery needs a docstring title"


def test_the_results_page_is_what_the_results_files_give():
    """``docs/guide/results.md`` holds what ``python -m experiments._readme`` makes of ``results/*.json``:
    a figure edited by hand there, or a result re-run without regenerating the page, fails here."""
    from experiments import _readme

    assert _readme.RESULTS_PAGE.read_text() == _readme.generated_page(), \
        "docs/guide/results.md is out of date: run python -m experiments._readme"


def test_moved_scripts_are_named_by_their_current_module_path():
    from experiments._readme import current_paths

    assert current_paths("python -m experiments.table3 --quick") == "python -m experiments.papers.table3 --quick"
    assert current_paths("interactions (experiments.bench_trees)") == "interactions (experiments.benchmarks.bench_trees)"
    assert current_paths("python -m experiments._readme") == "python -m experiments._readme"


def test_the_propensities_page_names_every_method_of_estimate_propensities():
    from counterfactual_ltr.propensity.estimation import CASCADE_METHODS, METHODS

    page = (REPO / "docs" / "guide" / "propensities.md").read_text(encoding="utf-8")
    missing = [m for m in (*METHODS, *CASCADE_METHODS, "auto") if f'`"{m}"`' not in page]
    assert not missing, f"docs/guide/propensities.md never names the methods {missing}"
