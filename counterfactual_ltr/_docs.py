"""Shared numpydoc text: a parameter that many functions take is described once.

A docstring names shared blocks by a line that holds nothing but ``{name}`` or ``{name, other, ...}``;
:func:`fill_doc` replaces that line, at import time, by the blocks ``table[name]`` one after the
other, indented as the placeholder was; a block that opens a numpydoc section (a heading over
dashes, e.g. a shared Returns section) is set off by a blank line. So ``help()``, doctest and
numpydoc read the complete docstring, and the source holds each description once. Only whole-line
placeholders are replaced: braces anywhere else (LaTeX, ``{"mean", "sum"}``) stay as written. An
unknown name is an error at import, not a hole in the docs.

Examples
--------
>>> @fill_doc({"x": "x : float\\n    The input."})
... def f(x):
...     '''Identity.
...
...     Parameters
...     ----------
...     {x}
...     '''
>>> print(f.__doc__.strip())
Identity.
<BLANKLINE>
    Parameters
    ----------
    x : float
        The input.
"""

from __future__ import annotations

import re
import textwrap

__all__ = ["fill_doc", "fill_text", "COMMON", "common_doc"]

_PLACEHOLDER = re.compile(r"^([ \t]*)\{(\w+(?:, *\w+)*)\}[ \t]*$", re.M)
_SECTION = re.compile(r"[^\n]+\n-+(\n|$)")


def fill_text(doc: str, table: dict) -> str:
    """``doc`` with every whole-line ``{name, ...}`` replaced by the ``table`` blocks, indented as the placeholder.

    Parameters
    ----------
    doc : str
        A docstring.
    table : dict of str to str
        Shared blocks, written from column 0 (their own relative indentation is kept).

    Returns
    -------
    str

    Examples
    --------
    >>> fill_text("Parameters\\n    {a, b}\\n", {"a": "a : int\\n    A count.", "b": "b : str"})
    'Parameters\\n    a : int\\n        A count.\\n    b : str\\n'
    >>> print(fill_text("{b, r}", {"b": "b : str", "r": "Returns\\n-------\\nint"}))
    b : str
    <BLANKLINE>
    Returns
    -------
    int
    """
    def blocks(match):
        indent, names = match.groups()
        missing = [n.strip() for n in names.split(",") if n.strip() not in table]
        if missing:
            raise KeyError(f"docstring placeholder {{{names}}}: no shared text for {missing} (known: {sorted(table)})")
        text = ""
        for name in names.split(","):
            block = textwrap.dedent(table[name.strip()]).strip("\n")
            if text:   # a block that opens a section (a heading over dashes) is set off by a blank line
                text += "\n\n" if _SECTION.match(block) else "\n"
            text += block
        return textwrap.indent(text, indent)

    return _PLACEHOLDER.sub(blocks, doc)


def fill_doc(table: dict):
    """Decorator: fill the ``{name}`` lines of a function's or class's docstring from ``table``.

    Parameters
    ----------
    table : dict of str to str
        Shared blocks (see :func:`fill_text`).

    Returns
    -------
    callable
        The decorator; it returns the object itself, with ``__doc__`` filled.

    Examples
    --------
    >>> @fill_doc({"n": "n : int\\n    How many."})
    ... def g(n):
    ...     '''Parameters
    ...     ----------
    ...     {n}
    ...     '''
    >>> "How many." in g.__doc__
    True
    """
    def decorate(obj):
        if obj.__doc__:
            obj.__doc__ = fill_text(obj.__doc__, table)
        return obj

    return decorate


#: Sections that modules of several packages share (e.g. a scorer of feature rows).
COMMON = {
    "feature_rows_scores": "Parameters\n----------\nX : array of shape (n_docs, n_features)\n    Feature rows.\n\n"
                           "Returns\n-------\nndarray of shape (n_docs,)",
}

#: decorator filling a docstring's ``{name, ...}`` lines from :data:`COMMON`
common_doc = fill_doc(COMMON)
