"""Raw click events as a real log has them, turned into a log's arrays; and joining features by id.

One row per shown result: query id, document id, position, click, optionally a page (session)
id. :func:`event_arrays` checks the rows and returns what :class:`~counterfactual_ltr.logs.clicklog.ClickLog`
is built from: pages in order, the shown (query, document) rows as codes into an
:class:`~counterfactual_ltr.ids.IdTable`, positions as recorded. :func:`join_rows` maps those
rows to the rows of a feature table keyed by the same ids (``ClickLog.with_data``).
"""

from __future__ import annotations

import warnings
import numpy as np

from ..datasets import _frame_column
from ..ids import IdTable, factorize, format_id, frame_of, id_column, match
from .session_checks import cut_pages

__all__ = ["RepeatedDocumentWarning", "RepeatedRowWarning", "check_id_types", "event_arrays", "join_rows", "kept_after_join",
           "missing_features_error", "MissingFeaturesWarning"]


class MissingFeaturesWarning(UserWarning):
    """Shown documents without features were dropped from a log by ``with_data(..., missing=...)``.

    Examples
    --------
    >>> issubclass(MissingFeaturesWarning, UserWarning)
    True
    """


def event_arrays(frame, *, query="query", doc="doc", position="position", click="click", session=None,
                 warn_phantoms: bool = True) -> dict:
    """The arrays of a log from raw events (see :meth:`ClickLog.from_events` for the rules).

    Parameters
    ----------
    frame : pandas DataFrame or mapping of column name to values
        One row per shown result.
    query, doc, position, click : str
        Column names.
    session : str, optional
        The column naming each row's page; without it, pages are cut from runs of rows.
    warn_phantoms : bool, default True
        Warn (``RepeatedRowWarning``) about pages cut from runs that start by repeating a row of
        the page before; a stream that sees pages in pieces checks them itself.

    Returns
    -------
    dict
        ``ids`` (IdTable), ``session_query``, ``offsets``, ``rows``, ``positions``, ``clicks``,
        ``session_ids``.

    Examples
    --------
    >>> arrays = event_arrays({"query": ["a", "a", "b"], "doc": [7, 8, 7], "position": [1, 2, 1],
    ...                        "click": [0, 1, 0]})
    >>> arrays["offsets"].tolist(), arrays["rows"].tolist(), arrays["ids"].doc_ids.tolist()
    ([0, 2, 3], [0, 1, 2], [7, 8, 7])
    """
    frame = frame_of(frame, {"query": query, "doc": doc, "position": position, "click": click,
                              "session": session})
    query_code, query_ids = factorize(id_column(frame, query))
    doc_code, doc_ids = factorize(id_column(frame, doc))
    positions = _frame_column(frame, position)
    clicks = _frame_column(frame, click, as_click=True)
    session_code = session_ids = None
    if session is not None:
        session_code, session_ids = factorize(id_column(frame, session), sort=True)

    def locate(i):
        return f"frame row {frame.index[i]!r}"

    order, offsets = cut_pages(query_code, positions, session_code, locate, names=(query, position))
    if session is None and warn_phantoms:
        _warn_phantom_pages(offsets, query_code, doc_code, positions, query_ids, doc_ids, locate)
    ids, rows = IdTable.from_codes(query_code, query_ids, doc_code, doc_ids)
    rows, query_code = rows[order], query_code[order]
    starts = offsets[:-1]
    return {"ids": ids, "session_query": query_code[starts], "offsets": offsets, "rows": rows,
            "positions": positions[order], "clicks": clicks[order],
            "session_ids": session_ids[session_code[order][starts]] if session is not None
            else np.arange(len(starts), dtype=np.int64)}


class RepeatedRowWarning(UserWarning):
    """Without a page column, a row repeating a (query, document, position) row of the page before starts a page.

    Examples
    --------
    >>> import warnings
    >>> from counterfactual_ltr import ClickLog
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     log = ClickLog.from_events({"query": ["q", "q", "q"], "doc": ["a", "b", "b"], "position": [1, 2, 2],
    ...                                 "click": [0, 1, 1]})
    >>> [w.category.__name__ for w in caught], log.n_sessions
    (['RepeatedRowWarning'], 2)
    """


class RepeatedDocumentWarning(UserWarning):
    """Pages that show one document twice were dropped (or cut to its first showing) by ``ClickLog.with_data`` or ``aggregate_clicks``.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", RepeatedDocumentWarning)      # make such a log an error instead
    ...     pass
    """


def phantom_page_starts(offsets, query_code, doc_code, positions) -> np.ndarray:
    """The rows that start a page (cut from runs of rows) by repeating a row of the page before.

    Only where that is no plausible new result list: the row is the one just before, or the page
    starts after position 1 (a re-issued query showing its page again starts at 1). Such a page is
    more likely a row logged twice than a new result list: it would count the row's click twice,
    on a page that starts at its position. ``offsets`` are the pages' bounds in input order.
    """
    starts = offsets[1:-1]
    if starts.size == 0:
        return starts
    previous = offsets[:-2]
    # A new result list that shows the previous one again starts at position 1 with another row than the
    # previous row; a duplicate is the previous row again, or a page that starts after position 1.
    same_query = query_code[starts] == query_code[previous]
    twice = (doc_code[starts] == doc_code[starts - 1]) & (positions[starts] == positions[starts - 1])
    candidates = starts[same_query & (twice | (positions[starts] > 1))]
    if candidates.size == 0:
        return candidates
    page = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    # A candidate (first row of page p) is a repeat when (p - 1, doc, position) is a row of page p - 1.
    rows = np.stack([page, doc_code, positions]).T.astype(np.int64)
    probes = np.stack([page[candidates] - 1, doc_code[candidates], positions[candidates]]).T.astype(np.int64)
    _, inverse = np.unique(np.concatenate([rows, probes]), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    return candidates[np.isin(inverse[len(rows):], inverse[:len(rows)])]


def phantom_message(count: int, example: str) -> str:
    """The ``RepeatedRowWarning`` text: ``count`` such pages, ``example`` naming one of them."""
    return (f"{count} page(s) cut from runs of rows (no session column) start with a row that repeats a (query, "
            f"document, position) row of the page before, e.g. {example}: such a row is more likely logged twice "
            "than a new page (its click would count twice); drop the duplicates, or name the pages with "
            "session=...")


def phantom_example(i: int, where: str, query_ids, query_code, doc_ids, doc_code, positions) -> str:
    return (f"{where} (query {format_id(query_ids[query_code[i]])}, document {format_id(doc_ids[doc_code[i]])}, "
            f"position {positions[i]})")


def _warn_phantom_pages(offsets, query_code, doc_code, positions, query_ids, doc_ids, locate) -> None:
    """Warn (``RepeatedRowWarning``) when pages cut from runs start by repeating a row (:func:`phantom_page_starts`)."""
    repeated = phantom_page_starts(offsets, query_code, doc_code, positions)
    if repeated.size:
        i = int(repeated[0])
        warnings.warn(phantom_message(repeated.size, phantom_example(i, locate(i), query_ids, query_code, doc_ids,
                                                                     doc_code, positions)),
                      RepeatedRowWarning, stacklevel=4)


def later_showings(item_page: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Mask of the items that show a document its page showed already (rows in page order)."""
    later = np.zeros(len(docs), dtype=bool)
    if len(docs):
        key = item_page.astype(np.int64) * (int(docs.max()) + 1) + docs
        order = np.argsort(key, kind="stable")            # stable: a page's first showing sorts first
        later[order[1:][key[order][1:] == key[order][:-1]]] = True
    return later


def without_repeats(later, keep_items, keep_pages, item_page, how: str):
    """``(keep_items, keep_pages, pages)`` without the pages (or later showings) of ``later``.

    ``how`` is ``"drop_pages"`` (drop every page with a repeat) or ``"keep_first"`` (drop the
    later showings only); ``pages`` are the pages that had a repeat.
    """
    later = later & keep_items
    pages = np.unique(item_page[later])
    if how == "drop_pages":
        keep_pages = keep_pages.copy()
        keep_pages[pages] = False
        keep_items = keep_items & keep_pages[item_page]
    else:
        keep_items = keep_items & ~later
    return keep_items, keep_pages, pages


def repeated_message(n_repeated: int, n_pages: int, named: list, how: str, n_later: int) -> str:
    """The ``RepeatedDocumentWarning`` text (``named``: a few of the pages, by their ids)."""
    done = (f"dropped those {n_repeated} pages" if how == "drop_pages" else
            f"kept each document's first showing (dropped {n_later} rows)")
    return (f"{n_repeated} of {n_pages} pages show a document twice ({', '.join(named)}"
            f"{', ...' if n_repeated > len(named) else ''}): {done}")


def join_rows(keys: tuple, data, missing: str = "raise", check_types: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(data_row, known)``: the row of ``data`` with each (query id, document id) of ``keys``, and which have one.

    Parameters
    ----------
    keys : tuple of two 1-D id arrays
        (query id, document id) of the log's rows.
    data : RankingDataset
        A data set with ``query_keys`` and ``doc_keys`` (see ``RankingDataset.from_frame``), or
        any data set (its qid and row index are then its ids).
    missing : {"raise", "drop_sessions", "drop_rows"}
        What to do when shown documents have no features (the caller drops them).
    check_types : bool, default True
        Refuse ids of another type than the data set's (strings against integers: nothing would
        join) with a message naming both (:func:`check_id_types`); a stream that reads a log in
        parts checks the unknown pairs it gathers instead.

    Returns
    -------
    data_row : int64 array (-1 where unknown), known : bool array

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import RankingDataset
    >>> data = RankingDataset.from_frame({"query": ["q", "q"], "doc": ["a", "b"], "f": [0.0, 1.0]})
    >>> keys = (np.array(["q", "q"], dtype=object), np.array(["b", "c"], dtype=object))
    >>> join_rows(keys, data, missing="drop_rows")[0].tolist()
    [1, -1]
    """
    if missing not in ("raise", "drop_sessions", "drop_rows"):
        raise ValueError(f"missing must be 'raise', 'drop_sessions' or 'drop_rows', got {missing!r}")
    if check_types:
        check_id_types(keys, data)
    data_row = match(keys, (data.query_keys[data.query_index], data.doc_keys))
    known = data_row >= 0
    if not known.all() and missing == "raise":
        unknown = np.flatnonzero(~known)
        raise missing_features_error(unknown.size, keys[0][unknown[:3]], keys[1][unknown[:3]])
    return data_row, known


def _id_kind(ids) -> str | None:
    """``"strings"`` or ``"integers"`` (ids are one or the other, see ``IdTable``), None when there are none."""
    ids = np.asarray(ids)
    if ids.size == 0:
        return None
    if ids.dtype.kind in "US" or (ids.dtype == object and isinstance(ids.flat[0], (str, bytes))):
        return "strings"
    return "integers"


def check_id_types(keys: tuple, data) -> None:
    """A ``ValueError`` when the log's query or document ids (``keys``) are of another type than ``data``'s.

    Parameters
    ----------
    keys : tuple of two 1-D id arrays
        (query id, document id) of some of the log's rows.
    data : RankingDataset
        The data set (feature table) the log is joined to.

    Returns
    -------
    None

    Examples
    --------
    >>> from counterfactual_ltr import RankingDataset
    >>> import numpy as np
    >>> data = RankingDataset.from_frame({"query": [1, 1], "doc": [7, 8], "f": [0.0, 1.0]})
    >>> check_id_types((np.array(["1"], dtype=object), np.array(["7"], dtype=object)), data)
    Traceback (most recent call last):
    ...
    ValueError: the log's query ids are ...
    """
    for what, ours, theirs in (("query", keys[0], data.query_keys), ("document", keys[1], data.doc_keys)):
        _same_id_types(what, ours, theirs)


def _same_id_types(what: str, log_ids, data_ids) -> None:
    """A ``ValueError`` when the log's and the data set's ``what`` ids are of different types (none would match)."""
    ours, theirs = _id_kind(log_ids), _id_kind(data_ids)
    if ours is None or theirs is None or ours == theirs:
        return
    raise ValueError(f"the log's {what} ids are {ours} (e.g. {format_id(np.asarray(log_ids).flat[0])}) but the "
                     f"data set's (the feature table's) are {theirs} (e.g. {format_id(np.asarray(data_ids).flat[0])}): "
                     f"1 and '1' are different ids, so no row would join; read both sides with the same type (a CSV "
                     "column of digits is read as integers, a DataFrame keeps what it holds)")


def missing_features_error(count: int, query_ids, doc_ids) -> ValueError:
    """The error of a join that meets ``count`` distinct shown (query, document) pairs without features.

    Parameters
    ----------
    count : int
        How many distinct pairs have no features.
    query_ids, doc_ids : sequences of ids
        A few of them, for the message.

    Returns
    -------
    ValueError

    Examples
    --------
    >>> print(str(missing_features_error(1, ["q"], [7])).split(";")[0])
    1 shown (query, document) pairs of the log have no features in the data set, e.g. (query 'q', doc 7)
    """
    examples = ", ".join(f"(query {format_id(q)}, doc {format_id(d)})" for q, d in zip(query_ids, doc_ids))
    return ValueError(f"{count} shown (query, document) pairs of the log have no features in the data set, "
                      f"e.g. {examples}; give them features or pass missing='drop_sessions' or 'drop_rows'")


def kept_after_join(item_session: np.ndarray, shown_known: np.ndarray, n_sessions: int,
                    missing: str) -> tuple[np.ndarray, np.ndarray]:
    """``(keep_items, keep_sessions)`` of a join whose shown results ``shown_known`` have features.

    ``"drop_sessions"`` drops every session that shows a document without features;
    ``"drop_rows"`` drops those rows only. Either way a session left without rows is dropped.

    Parameters
    ----------
    item_session : int array (n_items,)
        Session index of every shown result.
    shown_known : bool array (n_items,)
        Whether each shown result has features.
    n_sessions : int
        Number of sessions.
    missing : {"raise", "drop_sessions", "drop_rows"}
        The join's option (``"raise"`` keeps everything: the caller has raised already).

    Returns
    -------
    keep_items : bool array (n_items,), keep_sessions : bool array (n_sessions,)

    Examples
    --------
    >>> import numpy as np
    >>> items, sessions = kept_after_join(np.array([0, 0, 1]), np.array([True, False, True]), 2, "drop_sessions")
    >>> items.tolist(), sessions.tolist()
    ([False, False, True], [False, True])
    """
    keep_items = np.ones(len(item_session), dtype=bool)
    keep_sessions = np.ones(n_sessions, dtype=bool)
    if missing == "raise" or shown_known.all():
        return keep_items, keep_sessions
    lost = np.bincount(item_session, weights=~shown_known, minlength=n_sessions) > 0
    keep_sessions = ~lost if missing == "drop_sessions" else keep_sessions
    keep_items = shown_known & keep_sessions[item_session]
    keep_sessions &= np.bincount(item_session, weights=keep_items, minlength=n_sessions) > 0
    return keep_items, keep_sessions


def warn_dropped(missing: str, n_rows: int, n_sessions: int, total_rows: int, total_sessions: int, *,
                 stacklevel: int = 3) -> None:
    """The warning of a join that dropped shown documents without features."""
    warnings.warn(f"with_data(missing={missing!r}): dropped {n_rows} of {total_rows} shown results and "
                  f"{n_sessions} of {total_sessions} sessions whose documents have no features",
                  MissingFeaturesWarning, stacklevel=stacklevel)
