"""The checks of logged sessions, shared by the log in memory and the streamed aggregate.

A click log is a set of sessions; each shows documents of one query at positions ``1..n``.
:func:`check_sessions` checks rows sorted by ``(session, position)`` the one way every path
does: :meth:`ClickLog.from_frame` on a whole frame, :func:`~counterfactual_ltr.logs.aggregate.aggregate_clicks`
on each batch of complete sessions it streams (so a duplicated session, positions starting at 2
or a row shown twice are errors there too, not clicks counted twice or weighted by the wrong
position). Id and code columns are checked against the range of the type they are stored in
(``logger`` and ``intervention`` are int32: ``2**32`` is an error, not logger 0).
"""

from __future__ import annotations

import numpy as np

from ..datasets import RankingDataset, _frame_column

__all__ = ["FRAME_COLUMNS", "SESSION_COLUMNS", "frame_arrays", "check_sessions", "first_repeated_item", "cut_pages",
           "check_session_codes"]

#: Columns every log frame holds, one row per shown document.
FRAME_COLUMNS = ("session", "qid", "doc", "position", "click")
#: Optional per-session columns: absent from a user's frame, they default to 0 (one logger, no intervention).
SESSION_COLUMNS = ("logger", "intervention")
_INT32 = np.iinfo(np.int32)


def frame_arrays(frame, names=None) -> dict:
    """The log columns of a pandas frame as arrays (int64; ``click`` bool), checked by ``_frame_column``.

    Parameters
    ----------
    frame : pandas DataFrame
        With the :data:`FRAME_COLUMNS` (and optionally the :data:`SESSION_COLUMNS`).
    names : sequence of str, optional
        The columns to read (default: the frame columns and the session columns it has).

    Returns
    -------
    dict of column name -> array

    Examples
    --------
    >>> import pandas as pd
    >>> arrays = frame_arrays(pd.DataFrame({"session": [1], "qid": [5], "doc": [0], "position": [1],
    ...                                     "click": [1]}))
    >>> arrays["click"].dtype, sorted(arrays)
    (dtype('bool'), ['click', 'doc', 'position', 'qid', 'session'])
    """
    if names is None:
        names = FRAME_COLUMNS + tuple(c for c in SESSION_COLUMNS if c in frame.columns)
    return {name: _frame_column(frame, name) for name in names}


def check_session_codes(logger, intervention, lengths, session_ids) -> tuple[np.ndarray, np.ndarray]:
    """Per-session ``logger`` and ``intervention`` codes checked against int32 and their meaning; as int32.

    ``logger`` must be an index >= 0; ``intervention`` 0 (none), ``k >= 2`` (positions 1 and ``k``
    swapped, ``k`` at most the session's length) or ``-n`` (top ``n`` shuffled, ``n`` at most its length).

    Parameters
    ----------
    logger, intervention : int arrays (n_sessions,)
        The codes of every session.
    lengths : int array (n_sessions,)
        Shown documents per session.
    session_ids : array (n_sessions,)
        Names of the sessions in messages.

    Returns
    -------
    logger, intervention : int32 arrays

    Examples
    --------
    >>> check_session_codes([0, 2**32], [0, 0], [3, 3], [7, 8])
    Traceback (most recent call last):
    ...
    ValueError: session 8 has logger 4294967296, beyond the int32 range loggers are stored in
    """
    logger, intervention, lengths = (np.asarray(a, dtype=np.int64) for a in (logger, intervention, lengths))
    for name, values in (("logger", logger), ("intervention", intervention)):
        bad = np.flatnonzero((values < _INT32.min) | (values > _INT32.max))
        if bad.size:
            raise ValueError(f"session {session_ids[bad[0]]} has {name} {values[bad[0]]}, beyond the int32 range "
                             f"{name}s are stored in")
    bad = np.flatnonzero(logger < 0)
    if bad.size:
        raise ValueError(f"logger must hold indices >= 0; session {session_ids[bad[0]]} holds {logger[bad[0]]}")
    bad = np.flatnonzero((intervention == 1) | (intervention > lengths) | (-intervention > lengths))
    if bad.size:
        raise ValueError(f"session {session_ids[bad[0]]} has intervention code {intervention[bad[0]]}, which does not "
                         f"fit its {lengths[bad[0]]} shown documents (0 none, k >= 2 swap of 1 and k, -n shuffle)")
    return logger.astype(np.int32), intervention.astype(np.int32)


def first_repeated_item(data, session_query, item_session, docs):
    """Index of the first item whose row already appeared earlier in its session, or ``None``.

    Every item's row lies in its session's query (checked before), so the row's place inside the
    query, ``docs - query start``, is a small integer. Give each session a slot range as long as its
    query and mark the slots: a repeat marks one slot twice. Linear time, no sort (a sort of the
    session/row keys dominated simulating large logs).

    Parameters
    ----------
    data : RankingDataset
        The data set.
    session_query : int array (n_sessions,)
        Query index of every session.
    item_session : int array (n_items,)
        Session index of every item.
    docs : int array (n_items,)
        Data-set row of every item.

    Returns
    -------
    int or None

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import RankingDataset
    >>> data = RankingDataset(np.eye(3), [1, 0, 1], [5, 5, 5])
    >>> first_repeated_item(data, np.array([0, 0]), np.array([0, 0, 1, 1]), np.array([2, 0, 1, 1]))
    3
    """
    n_items = len(docs)
    if n_items == 0:
        return None
    span = data.query_lengths[session_query]
    total = int(span.sum())
    local = docs - data.query_offsets[:-1][session_query[item_session]]
    if total <= 8 * n_items + 1024:
        key = (np.cumsum(span) - span)[item_session] + local
        seen = np.zeros(total, dtype=bool)
        seen[key] = True
        if np.count_nonzero(seen) == n_items:
            return None
    else:
        # Sessions much shorter than their queries: slots would cost too much memory, sort instead.
        key = item_session.astype(np.int64) * int(data.query_lengths.max()) + local
    # (Only reached with a repeat, or for very short sessions.) A stable sort puts each repeat after
    # its first occurrence; the smallest such item index is the first repeat in item order.
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    same = np.flatnonzero(sorted_key[1:] == sorted_key[:-1])
    return int(order[same + 1].min()) if same.size else None


def check_sessions(data: RankingDataset, rows: dict, locate=None, session_column=None) -> dict:
    """Check rows sorted by ``(session, position)``: complete sessions of one query, positions ``1..n``.

    Parameters
    ----------
    data : RankingDataset
        The data set whose rows ``doc`` refers to.
    rows : dict of arrays
        ``session, qid, doc, position`` (and optionally ``logger``, ``intervention``), sorted by
        session and, within it, by position; every session complete.
    locate : callable, optional
        ``locate(i) -> str``: where sorted row ``i`` came from, for messages (e.g. a frame row).
    session_column : callable, optional
        ``session_column(name) -> sorted array or None``: how to read ``logger`` and
        ``intervention`` once the rows' queries are checked (default: from ``rows``).

    Returns
    -------
    dict
        ``offsets`` (n_sessions + 1 row offsets), ``session_ids``, ``session_query``, and
        ``logger``, ``intervention`` (int32 per session, 0 where the column is absent).

    Raises
    ------
    ValueError
        Naming the session: positions not ``1..n`` (a gap, a repeat, a duplicated session), a
        row missing from the data set or of another qid, a session mixing queries, a per-session
        column varying within a session, a row shown twice, a code beyond its type's range.

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import RankingDataset
    >>> data = RankingDataset(np.eye(3), [1, 0, 1], [5, 5, 5])
    >>> rows = {"session": np.array([7, 7]), "qid": np.array([5, 5]), "doc": np.array([2, 0]),
    ...         "position": np.array([2, 3])}
    >>> check_sessions(data, rows)
    Traceback (most recent call last):
    ...
    ValueError: session 7: positions must run 1..n without gaps or repeats (found 2 where 1 was expected)
    """
    locate = locate or (lambda i: None)

    def at(i, paren=False):   # ", where" or " (where)" after the value it locates; nothing without a locator
        where = locate(i)
        return "" if not where else f" ({where})" if paren else f", {where}"

    session, doc, position, qid = rows["session"], rows["doc"], rows["position"], rows["qid"]
    # Rows are compared with the row before them (no per-session repeat of values): a row that
    # starts a session must be at position 1, any other one place after the row before it.
    is_start = np.r_[True, session[1:] != session[:-1]]
    starts = np.flatnonzero(is_start)
    offsets = np.r_[starts, len(session)].astype(np.int64)
    lengths = np.diff(offsets)
    expected = np.where(is_start, 1, np.r_[0, position[:-1]] + 1)
    bad = np.flatnonzero(position != expected)
    if bad.size:
        raise ValueError(f"session {session[bad[0]]}: positions must run 1..n without gaps or repeats "
                         f"(found {position[bad[0]]} where {expected[bad[0]]} was expected{at(bad[0])})")
    bad = np.flatnonzero((doc < 0) | (doc >= data.n_docs))
    if bad.size:
        raise ValueError(f"column 'doc' holds {doc[bad[0]]}{at(bad[0], True)}, a row missing from the data "
                         f"set ({data.n_docs} rows)")
    wrong = np.flatnonzero(data.qid[doc] != qid)
    if wrong.size:
        raise ValueError(f"row {doc[wrong[0]]} has qid {data.qid[doc[wrong[0]]]} in the data set but "
                         f"{qid[wrong[0]]} in the log{at(wrong[0], True)}")
    mixed = np.flatnonzero(~is_start[1:] & (qid[1:] != qid[:-1])) + 1
    if mixed.size:
        raise ValueError(f"session {session[mixed[0]]} mixes queries: qid {qid[mixed[0]]}{at(mixed[0], True)} "
                         f"after qid {qid[mixed[0] - 1]}")
    codes = {}
    for name in SESSION_COLUMNS:
        col = rows.get(name) if session_column is None else session_column(name)
        if col is None:
            codes[name] = np.zeros(len(starts), dtype=np.int64)
            continue
        varies = np.flatnonzero(~is_start[1:] & (col[1:] != col[:-1])) + 1
        if varies.size:
            raise ValueError(f"column {name!r} must be constant within a session; session {session[varies[0]]} "
                             f"holds several values")
        codes[name] = col[starts]
    session_ids = session[starts]
    logger, intervention = check_session_codes(codes["logger"], codes["intervention"], lengths, session_ids)
    session_query = data.query_index[doc[starts]]
    repeated = first_repeated_item(data, session_query, np.cumsum(is_start) - 1, doc)
    if repeated is not None:
        raise ValueError(f"session {session[repeated]} shows row {doc[repeated]} twice{at(repeated, True)} "
                         "(a session shows each row at most once)")
    return {"offsets": offsets, "session_ids": session_ids, "session_query": session_query, "logger": logger,
            "intervention": intervention}


def cut_pages(query, position, session=None, locate=None, names=("query", "position")) -> tuple[np.ndarray, np.ndarray]:
    """``(order, offsets)`` of raw events: the rows of each page (result list), in position order.

    With ``session`` (a code per row naming its page), rows are sorted by (session, position), in
    any input order. Without it, pages are runs of consecutive rows: a new page starts at a row
    whose query differs from the row before or whose position is not larger than the row before's.
    Positions are as recorded (1-based, gaps allowed: a missing position was not shown).

    Parameters
    ----------
    query : int array (n_rows,)
        Query code of every row.
    position : int64 array (n_rows,)
        Recorded position of every row.
    session : int array (n_rows,), optional
        Page code of every row (codes sorted like the page ids).
    locate : callable, optional
        ``locate(i) -> str``: where input row ``i`` came from, for messages.
    names : tuple of two str
        The names of the query and position columns in messages.

    Returns
    -------
    order : int64 array (n_rows,)
        Input rows in page order.
    offsets : int64 array (n_pages + 1,)
        Rows ``order[offsets[p]:offsets[p + 1]]`` form page ``p``.

    Raises
    ------
    ValueError
        Naming the column and a row: a position below 1, a position repeated on a page, a page
        whose rows carry two queries.

    Examples
    --------
    >>> import numpy as np
    >>> order, offsets = cut_pages(np.array([0, 0, 0, 1]), np.array([1, 3, 1, 2]))
    >>> order.tolist(), offsets.tolist()
    ([0, 1, 2, 3], [0, 2, 3, 4])
    """
    locate = locate or (lambda i: f"row {i}")
    query_name, position_name = names
    position = np.asarray(position)
    bad = np.flatnonzero(position < 1)
    if bad.size:
        raise ValueError(f"column {position_name!r} must hold 1-based positions (>= 1); {locate(bad[0])} holds "
                         f"{position[bad[0]]}")
    if session is None:
        order = np.arange(len(position))
        start = np.r_[True, (query[1:] != query[:-1]) | (position[1:] <= position[:-1])]
    else:
        order = np.lexsort((position, session))
        page, position, query = session[order], position[order], query[order]
        start = np.r_[True, page[1:] != page[:-1]]
        same = np.flatnonzero(~start[1:] & (position[1:] == position[:-1])) + 1
        if same.size:
            i = same[0]
            raise ValueError(f"column {position_name!r}: a page holds position {position[i]} twice "
                             f"({locate(order[i - 1])} and {locate(order[i])})")
        mixed = np.flatnonzero(~start[1:] & (query[1:] != query[:-1])) + 1
        if mixed.size:
            i = mixed[0]
            raise ValueError(f"column {query_name!r}: a page's rows carry two queries ({locate(order[i - 1])} and "
                             f"{locate(order[i])})")
    return order.astype(np.int64), np.r_[np.flatnonzero(start), len(position)].astype(np.int64)
