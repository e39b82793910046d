"""Every docstring example of both packages runs (as a user would paste it), and every public name has
numpydoc sections: Parameters (when it takes any), Returns (functions) and an example."""

import doctest
import importlib
import inspect
import pkgutil
import re
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


def _documented_parameters(doc: str) -> dict:
    """Names of the numpydoc Parameters section -> whether a description follows (``a, b : type`` names two)."""
    section = re.search(r"^Parameters\n-+\n(.*?)(?=^\w[\w ]*\n-+\n|\Z)", doc, re.S | re.M)
    lines = section.group(1).splitlines() if section else []
    found = {}
    for i, line in enumerate(lines):
        if line and not line[0].isspace():
            described = i + 1 < len(lines) and lines[i + 1].startswith(" ")
            for name in line.split(" : ")[0].split(","):
                found[name.strip().lstrip("*")] = described
    return found


def _public_callables():
    """Every public function and class of both packages (wherever defined), and their public methods."""
    seen = set()
    for name in MODULES:
        if name.rsplit(".", 1)[-1].startswith("_"):
            continue
        for attr in getattr(importlib.import_module(name), "__all__", ()):
            obj = getattr(importlib.import_module(name), attr)
            home = getattr(obj, "__module__", "") or ""
            if id(obj) in seen or not home.startswith(("counterfactual_ltr", "click_sim")) \
                    or not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            seen.add(id(obj))
            yield f"{home}.{obj.__qualname__}", obj
            if inspect.isclass(obj):
                for method_name, method in vars(obj).items():
                    method = getattr(method, "__func__", method)
                    if not method_name.startswith("_") and inspect.isfunction(method):
                        yield f"{home}.{method.__qualname__}", method


def test_every_public_parameter_is_documented():
    """Each parameter of a public function, class (its constructor) or method is named in its Parameters section,
    with a description."""
    lacking = []
    for name, obj in _public_callables():
        try:
            params = [p for p in inspect.signature(obj).parameters if p not in ("self", "cls")]
        except ValueError:  # an exception class: no signature of its own
            continue
        documented = _documented_parameters(inspect.getdoc(obj) or "")
        missing = [p for p in params if p not in documented]
        bare = [p for p in params if documented.get(p) is False]
        if missing or bare:
            lacking.append(f"{name}: undocumented {missing}, without a description {bare}")
    assert not lacking, "\n".join(lacking)


def test_parameter_sections_are_read_as_numpydoc():
    doc = ("Summary.\n\nParameters\n----------\na, b : int\n    Two.\nc : str\nd\n    Four.\n\n"
           "Returns\n-------\nx : int\n    Not a parameter.\n")
    assert _documented_parameters(doc) == {"a": True, "b": True, "c": False, "d": True}
