"""Click logs on disk: Parquet or CSV files with the columns of :meth:`ClickLog.to_frame`.

Examples
--------
>>> import os, tempfile
>>> from click_sim import make_ranking, simulate_clicks
>>> data = make_ranking(n_queries=10, random_state=0)
>>> log = simulate_clicks(data, data.X[:, 0], n_passes=2, random_state=0)
>>> path = os.path.join(tempfile.mkdtemp(), "log.csv")
>>> write_click_log(log, path)
>>> read_click_log(path, data).equals(log)
True
"""

from __future__ import annotations

import os

__all__ = ["read_click_log", "write_click_log", "LOG_SUFFIXES"]

#: File name endings understood as Parquet and as CSV (compressed CSV by pandas' inference).
LOG_SUFFIXES = {"parquet": (".parquet", ".pq"), "csv": (".csv", ".csv.gz", ".csv.bz2", ".csv.zip", ".csv.xz")}


def _kind(path) -> str:
    name = os.fspath(path).lower()
    for kind, suffixes in LOG_SUFFIXES.items():
        if name.endswith(suffixes):
            return kind
    allowed = ", ".join(s for suffixes in LOG_SUFFIXES.values() for s in suffixes)
    raise ValueError(f"{os.fspath(path)}: unknown click-log file type (expected one of {allowed})")


def write_click_log(log, path) -> None:
    """Write ``log.to_frame()`` to a Parquet or CSV file, chosen by the file name's ending.

    Parameters
    ----------
    log : ClickLog
        The log to write.
    path : str or path-like
        Ending in ``.parquet``/``.pq`` (Parquet) or ``.csv`` (optionally ``.gz``, ``.bz2``,
        ``.zip``, ``.xz``).

    Returns
    -------
    None

    Examples
    --------
    See the module docstring.
    """
    kind = _kind(path)
    frame = log.to_frame()
    if kind == "parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)


def read_click_log(path, data):
    """Read a click log over ``data`` from a Parquet or CSV file (see :meth:`ClickLog.from_frame`).

    Parameters
    ----------
    path : str or path-like
        A file with the columns ``session, qid, doc, position, click``; ``doc`` is the
        row of ``data`` shown.
    data : RankingDataset
        The data set the log refers to.

    Returns
    -------
    ClickLog

    Raises
    ------
    ValueError
        Naming the file, when it cannot be read or does not describe a log over ``data``.

    Examples
    --------
    See the module docstring.
    """
    import pandas as pd

    from .clicklog import ClickLog

    kind = _kind(path)
    where = os.fspath(path)
    try:
        frame = pd.read_parquet(path) if kind == "parquet" else pd.read_csv(path)
    except (OSError, ValueError) as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise ValueError(f"{where}: cannot be read as {kind} ({str(err).splitlines()[0] if str(err) else err!r})") \
            from None
    try:
        return ClickLog.from_frame(frame, data)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where}: {err}") from None
