"""Every parameter of the public estimators is documented in the numpydoc Parameters section of their own class."""

import inspect
import re

import pytest

from counterfactual_ltr import estimators

ESTIMATORS = [getattr(estimators, name) for name in estimators.__all__ if inspect.isclass(getattr(estimators, name))]


def _documented(cls) -> set:
    doc = cls.__doc__ or ""           # the class's own docstring, not an inherited one
    section = re.search(r"\n\s*Parameters\n\s*-+\n(.*?)(?:\n\s*\n\s*[A-Z][A-Za-z ]+\n\s*-+\n|\Z)", doc, re.S)
    assert section, f"{cls.__name__} has no Parameters section"
    names = set()
    for line in section.group(1).splitlines():
        match = re.match(r"^    ([A-Za-z_][\w, ]*?)\s*:", line)   # "    name : type" or "    a, b : type"
        if match:
            names |= {n.strip() for n in match.group(1).split(",")}
    return names


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_init_parameter_is_documented_on_the_class(cls):
    params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    missing = [p for p in params if p not in _documented(cls)]
    assert not missing, f"{cls.__name__}: {missing} not in its Parameters section"
