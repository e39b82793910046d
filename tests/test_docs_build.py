"""The documentation site builds: warnings are errors, every reference to the project's names resolves
(nitpicky), and every gallery example runs (sphinx-gallery executes them at build time).

One slow test, so that pytest-xdist packs the build among the other tests instead of CI running it
after them. It needs the ``docs`` extra (``pip install ".[docs]"``) and skips without it, saying so;
``CLTR_REQUIRE_DOCS=1`` (set by ``.ci/run``) turns that skip into a failure, so CI cannot pass without
building the site. The pages are written to a temporary folder; the generated sources
(``docs/api/generated``, ``docs/auto_examples``, ignored by git) are made anew in the working tree.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

DOCS = REPO / "docs"
NEEDS = ("sphinx", "numpydoc", "sphinx_gallery", "pydata_sphinx_theme", "myst_parser")


@pytest.mark.slow
def test_the_site_builds_without_a_warning_and_runs_its_examples(tmp_path):
    missing = [name for name in NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        message = f"the docs extra is not installed (missing {missing}): pip install \".[docs]\""
        if os.environ.get("CLTR_REQUIRE_DOCS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    for generated in ("api/generated", "auto_examples"):       # stale pages of an earlier build must not hide an error
        shutil.rmtree(DOCS / generated, ignore_errors=True)
    out = tmp_path / "html"
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
                           "-d", str(tmp_path / "doctrees"), str(DOCS), str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"sphinx failed (exit {done.returncode}):\n{done.stderr[-6000:]}"
    assert (out / "index.html").is_file() and (out / "api" / "index.html").is_file()
    examples = sorted((REPO / "examples").glob("plot_*.py"))
    built = [out / "auto_examples" / f"{example.stem}.html" for example in examples]
    assert examples and all(page.is_file() for page in built), [p.name for p in built if not p.is_file()]
