"""Where the shared data lives: one variable, ``CLTR_DATA``, names the folder that holds ``MQ2008/``
and ``real-logs/``.

Every documented example reads its data through it (``data_path("MQ2008/Fold1/train.txt")`` in
Python, ``"$CLTR_DATA/MQ2008/Fold1/train.txt"`` on the command line), and so do the experiment
scripts (``experiments._common.shared_data_dir``), so an example runs the same from any folder.
Without ``CLTR_DATA`` the folder is ``../shared/data`` beside the source checkout the package runs
from, else ``../shared/data`` beside the current folder (the root of a clone next to ``shared/``).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["data_dir", "data_path"]

#: The environment variable naming the data folder.
ENV = "CLTR_DATA"

_CHECKOUT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """The data folder: ``$CLTR_DATA``, else the first existing ``../shared/data`` (see the module).

    The folder is returned whether or not it exists; :func:`data_path` checks.

    Returns
    -------
    pathlib.Path
        The folder that holds (or should hold) ``MQ2008/`` and ``real-logs/``.

    Examples
    --------
    >>> from click_sim import data_dir
    >>> data_dir().name == "data" or "CLTR_DATA" in __import__("os").environ
    True
    """
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    beside_checkout = _CHECKOUT.parent / "shared" / "data"
    candidates = [beside_checkout] if (_CHECKOUT / "pyproject.toml").is_file() else []
    candidates.append(Path.cwd().parent / "shared" / "data")
    return next((path for path in candidates if path.is_dir()), candidates[0])


def data_path(*parts: str | os.PathLike) -> Path:
    """The path of a shared data file or folder, ``data_dir() / parts``, checked to exist.

    Parameters
    ----------
    *parts : str or path-like
        The path inside the data folder, whole (``"MQ2008/Fold1/train.txt"``) or in pieces
        (``"MQ2008", "Fold1", "train.txt"``).

    Returns
    -------
    pathlib.Path
        The existing path.

    Raises
    ------
    FileNotFoundError
        When it does not exist, saying where it was looked for and how to set ``CLTR_DATA``.

    Examples
    --------
    >>> from click_sim import data_path
    >>> data_path("MQ2008/Fold1/train.txt")        # doctest: +SKIP
    PosixPath('/path/to/shared/data/MQ2008/Fold1/train.txt')
    >>> data_path("no-such-folder/file.txt")
    Traceback (most recent call last):
    ...
    FileNotFoundError: no-such-folder/file.txt not found under ...: export CLTR_DATA=/path/to/shared/data (the folder that holds MQ2008/ and real-logs/)
    """
    root = data_dir()
    path = root.joinpath(*parts)
    if not path.exists():
        where = "CLTR_DATA" if os.environ.get(ENV) else "the default (CLTR_DATA unset)"
        raise FileNotFoundError(
            f"{Path(*parts).as_posix()} not found under {root}, {where}: export CLTR_DATA=/path/to/shared/data "
            "(the folder that holds MQ2008/ and real-logs/)")
    return path
