"""Progress bars (tqdm) for the long loops: simulation passes, grid search, CCP iterations, epochs.

The library is silent by default, so that cross-validation inside a notebook
does not print a bar per fit. The ``cltr`` command and the experiment scripts
turn bars on (unless ``--quiet``); tqdm itself hides them when stderr is not
a terminal. A Python user can do the same with :func:`show_progress`.

Examples
--------
>>> with show_progress(False):
...     list(progress(range(3), desc="silent"))
[0, 1, 2]
"""

from __future__ import annotations

import contextlib

__all__ = ["show_progress", "progress", "progress_enabled"]

# False: no bars; None: bars when stderr is a terminal (tqdm's ``disable=None``); True: always.
_STATE: list = [False]


@contextlib.contextmanager
def show_progress(enabled: bool | None = None):
    """Show progress bars inside the ``with`` block.

    Parameters
    ----------
    enabled : bool or None, default None
        ``None``: bars only when stderr is a terminal; ``True``: always;
        ``False``: never.

    Examples
    --------
    >>> with show_progress(False):
    ...     progress_enabled()
    False
    """
    previous = _STATE[0]
    _STATE[0] = enabled
    try:
        yield
    finally:
        _STATE[0] = previous


def progress_enabled() -> bool | None:
    """The current setting (see :func:`show_progress`).

    Returns
    -------
    bool or None

    Examples
    --------
    >>> progress_enabled()
    False
    """
    return _STATE[0]


def progress(iterable=None, **kwargs):
    """``tqdm(iterable, **kwargs)`` when bars are on, else a plain object with tqdm's methods.

    Parameters
    ----------
    iterable : iterable, optional
    **kwargs
        Passed to ``tqdm`` (``desc``, ``total``, ``unit``, ``leave``).

    Returns
    -------
    tqdm or a silent stand-in (iterates like ``iterable``, ``update``/``close``/
    ``set_postfix_str`` do nothing).

    Examples
    --------
    >>> bar = progress(total=2)
    >>> bar.update(1); bar.close()
    """
    state = _STATE[0]
    if state is False:
        return _Silent(iterable)
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is a dependency, but a bar is never worth a crash
        return _Silent(iterable)
    return tqdm(iterable, disable=None if state is None else False, **kwargs)


class _Silent:
    """What :func:`progress` returns when bars are off."""

    def __init__(self, iterable):
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable)

    def update(self, n=1):
        pass

    def set_postfix_str(self, *args, **kwargs):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
