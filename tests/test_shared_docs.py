"""Shared docstring text (``counterfactual_ltr._docs``) is filled everywhere: no ``{name}`` line is left."""

import importlib
import inspect
import re

import pytest

from counterfactual_ltr._docs import fill_text
from test_doctests import MODULES

_PLACEHOLDER = re.compile(r"^[ \t]*\{\w+(?:, *\w+)*\}[ \t]*$", re.M)


def _docstrings(module):
    for name, obj in vars(module).items():
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj) or inspect.isclass(obj):
            yield name, obj.__doc__
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                member = getattr(member, "__func__", getattr(member, "fget", member))
                if inspect.isfunction(member):
                    yield f"{name}.{attr}", member.__doc__


@pytest.mark.parametrize("name", MODULES)
def test_no_docstring_keeps_a_placeholder(name):
    module = importlib.import_module(name)
    left = [where for where, doc in _docstrings(module) if doc and _PLACEHOLDER.search(doc)]
    assert not left, f"unfilled {{name}} lines (a missing @doc decorator?) in {left}"


def test_fill_text_sets_a_shared_section_off_and_names_a_missing_block():
    assert fill_text("    {a, r}\n", {"a": "a : int", "r": "Returns\n-------\nint"}) == \
        "    a : int\n\n    Returns\n    -------\n    int\n"
    with pytest.raises(KeyError, match="no shared text"):
        fill_text("    {b}\n", {"a": "a : int"})
