"""Every docstring example of both packages runs (as a user would paste it), and every public name has
numpydoc sections: Parameters (when it takes any), Returns (functions) and an example."""

import doctest
import importlib
import inspect
import pkgutil
import types

import pytest

import click_sim
import counterfactual_ltr


def _modules():
    names = []
    for package in (counterfactual_ltr, click_sim):
        names.append(package.__name__)
        names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
                  if not m.name.endswith("__main__")]
    return sorted(names)


MODULES = _modules()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    # The module's own names are in scope (doctest's convention) but not the modules it imported:
    # an example that uses ``np`` must import it, as a reader pasting it would.
    globs = {k: v for k, v in vars(module).items() if not isinstance(v, types.ModuleType)}
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    for test in doctest.DocTestFinder().find(module, name, globs=globs):
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)


# evaluation.py is being rewritten by issue 13 (new estimators and the report); its docstrings get their
# sections there, so this branch leaves the file alone. Remove the exemption when that lands.
SECTIONS_PENDING: set[str] = set()


def _public_objects():
    for name in MODULES:
        if name in SECTIONS_PENDING:
            continue
        module = importlib.import_module(name)
        if name.rsplit(".", 1)[-1].startswith("_") and name.rsplit(".", 1)[-1] != "__init__":
            continue
        for attr in getattr(module, "__all__", ()):
            obj = getattr(module, attr)
            if getattr(obj, "__module__", None) == name and (inspect.isfunction(obj) or inspect.isclass(obj)):
                yield f"{name}.{attr}", obj


def _missing_sections(obj) -> list:
    doc = inspect.getdoc(obj) or ""
    missing = [] if (">>>" in doc or "Examples\n" in doc) else ["an example"]
    try:
        params = [p for p in inspect.signature(obj).parameters if p not in ("self", "args", "kwargs")]
    except (TypeError, ValueError):
        params = []
    if params and "Parameters\n----" not in doc:
        missing.append("Parameters")
    if inspect.isfunction(obj) and "Returns\n----" not in doc and "Yields\n----" not in doc:
        missing.append("Returns")
    return missing


def test_public_names_have_numpydoc_sections():
    lacking = {name: missing for name, obj in _public_objects() if (missing := _missing_sections(obj))}
    assert not lacking, "\n".join(f"{name}: lacks {', '.join(m)}" for name, m in lacking.items())


def test_estimators_fit_and_predict_have_docstrings():
    from counterfactual_ltr import estimators

    for name in ("RankSVM", "SVMPropRank", "SVMPropDCG", "SVMPropRBP", "SLAMRanker", "DeepPropDCG"):
        cls = getattr(estimators, name)
        for method in ("fit", "predict", "score"):
            doc = inspect.getdoc(getattr(cls, method)) or ""
            assert "Parameters\n----" in doc and "Returns\n----" in doc, f"{name}.{method}"
