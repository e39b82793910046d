"""Click logs on disk: Parquet or CSV files with the columns of :meth:`ClickLog.to_frame`.

Written with page checksums (Parquet) and a digest of the columns' content (in a Parquet file's
metadata, in a ``.digest`` file beside a CSV file), and verified when read: a file changed after it
was written is a ``ValueError`` naming it (see :mod:`counterfactual_ltr.logs.log_integrity`, which also
says what happens to files without a digest: yours load as they are).

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

from .log_integrity import LOG_SUFFIXES, log_kind, read_log_frame, write_log_frame

__all__ = ["read_click_log", "write_click_log", "LOG_SUFFIXES"]

_kind = log_kind   # the name cli.py checks an output name with


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
    log_kind(path)
    write_log_frame(log.to_frame(), path)


def read_click_log(path, data=None, *, query="query", doc="doc", position="position", click="click",
                   session=None):
    """Read a click log from a Parquet or CSV file: over ``data``, or raw (see :meth:`ClickLog.from_events`).

    Parameters
    ----------
    path : str or path-like
        With ``data``: a file with the columns ``session, qid, doc, position, click``; ``doc``
        is the row of ``data`` shown (:meth:`ClickLog.from_frame`). Without: raw events, one
        row per shown result, with the columns named by the options below.
    data : RankingDataset, optional
        The data set the log refers to; None for a raw log (join features later with
        :meth:`ClickLog.with_data`).
    query, doc, position, click : str
        Raw log only: the columns of query id, document id, position and click. In a CSV file
        that no digest describes, the id columns (and ``session``) are read as text and made
        integers only where every value is an integer written plainly (``"00123"`` stays a
        string; see :func:`~counterfactual_ltr.ids.ids_from_text`).
    session : str, optional
        Raw log only: the column naming each result page (see :meth:`ClickLog.from_events`).

    Returns
    -------
    ClickLog

    Raises
    ------
    ValueError
        Naming the file, when it cannot be read, does not match its digest, or does not
        describe a log over ``data``.

    Examples
    --------
    See the module docstring.
    """
    from .clicklog import ClickLog

    where = os.fspath(path)
    log_kind(where)
    if not os.path.exists(where):
        raise FileNotFoundError(f"{where}: no such file")
    id_columns = [c for c in (query, doc, session) if c is not None] if data is None else []
    frame = read_log_frame([where], ids=id_columns)
    try:
        if data is None:
            return ClickLog.from_events(frame, query=query, doc=doc, position=position, click=click, session=session)
        return ClickLog.from_frame(frame, data)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where}: {err}") from None
