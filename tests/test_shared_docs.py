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


_AT = re.compile(r"\S*\w@\w\S*")


def test_no_docstring_text_renders_as_an_email_link():
    """``NDCG@10`` in running text is an e-mail address to reStructuredText (a ``mailto:`` link on the API
    pages): such names are written as literals (double backticks), where it leaves them alone."""
    from docutils.core import publish_parts

    found = set()
    for name in MODULES:
        module = importlib.import_module(name)
        for where, doc in [(name, module.__doc__), *_docstrings(module)]:
            text = re.sub(r"``.*?``", " ", doc or "", flags=re.S)     # literals are never linked
            found |= {(where, token) for token in _AT.findall(text)}
    linked = sorted((where, token) for where, token in found
                    if "mailto:" in publish_parts(token, writer_name="html")["body"])
    assert not linked, f"write these as ``literals``: {linked}"
