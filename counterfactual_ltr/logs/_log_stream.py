"""Logs streamed in batches, checked session by session without holding the log.

:func:`~counterfactual_ltr.logs.aggregate.aggregate_clicks` reads a log larger than memory in batches
(one file after another, or one Dask task per file or partition). Every complete session goes
through :func:`~counterfactual_ltr.logs.session_checks.check_sessions`, the check
:meth:`ClickLog.from_frame` runs, before it is counted. Two ways, chosen by the data:

* **Grouped logs** (every writer of this library writes each session's rows together, in
  position order): a session's rows may run across batches and files; the rows of the last
  (possibly unfinished) session of a batch wait for the next one. Sessions are checked as
  soon as they are complete, and their ids are kept as ranges of consecutive ids (a
  simulated log's ids are one range per file) to find a session that appears twice.
* **Other logs** (rows in any order, as ``from_frame`` accepts): when a session id comes
  back after its rows ended, the grouped pass stops and the rows are spread by a hash of
  their session over temporary files of about one batch each, every file then checked and
  counted whole. Memory stays at about one batch; the disk holds the needed columns once.

A session counted twice, positions that do not run ``1..n``, a row shown twice, a session
mixing queries are errors in both ways, with ``from_frame``'s messages and the file named.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

import numpy as np

from .session_checks import FRAME_COLUMNS, SESSION_COLUMNS, check_sessions, frame_arrays

__all__ = ["NotGrouped", "Summary", "summarise", "fold", "bucketed"]

_COLUMNS = FRAME_COLUMNS + SESSION_COLUMNS
_STORED = _COLUMNS + ("source",)       # the bucket files' columns: the log's and the index of the row's file


class NotGrouped(Exception):
    """A session's rows are not together in the stream: the grouped pass cannot check it."""


@dataclass
class Summary:
    """What a stretch of the stream (a file, a partition) gives: its complete sessions reduced, and its edges.

    ``head`` holds the rows of its first session and ``tail`` those of its last (``None`` when
    it holds one session): either may continue in the neighbouring stretch, so they are checked
    when the stretches are put together (:func:`fold`).
    """

    reduced: object = None
    ranges: list = field(default_factory=list)
    n_sessions: int = 0
    head: dict | None = None
    tail: dict | None = None


def _take(rows: dict, start: int, stop: int) -> dict:
    return {n: v[start:stop] for n, v in rows.items() if n != "where"} | {"where": rows["where"]}


def _concat(a: dict, b: dict) -> dict:
    names = [n for n in _COLUMNS if n in a or n in b]
    out = {}
    for n in names:
        if n in a and n in b:
            out[n] = np.concatenate([a[n], b[n]])
        else:   # a column only one stretch has (a file with a logger column next to one without): 0 elsewhere
            out[n] = np.concatenate([a.get(n, np.zeros(len(a["session"]), np.int64)),
                                     b.get(n, np.zeros(len(b["session"]), np.int64))])
    return out | {"where": a["where"]}


def _id_ranges(ids: np.ndarray) -> np.ndarray:
    """``(k, 2)`` half-open ranges ``[start, stop)`` covering the distinct ``ids`` (NotGrouped on a repeat)."""
    if ids.size > 1 and not np.all(ids[1:] > ids[:-1]):    # (a writer's ids increase: no sort needed)
        ids = np.sort(ids)
        if np.any(ids[1:] == ids[:-1]):
            raise NotGrouped
    breaks = np.flatnonzero(np.diff(ids) != 1) + 1
    starts = ids[np.r_[0, breaks]] if ids.size else ids
    stops = ids[np.r_[breaks - 1, ids.size - 1]] + 1 if ids.size else ids
    return np.column_stack([starts, stops])


def _check(data, rows: dict, reduce, combine, acc, where: str):
    """Check complete sessions (grouped, any order within a session), reduce them; ``(acc, ranges, count)``."""
    try:
        checked = check_sessions(data, rows)
    except ValueError:
        # Rows of a session out of position order (sorted here), or sessions that look complete but
        # continue further on in a log whose rows are not grouped: only the pass over whole sessions
        # can tell a bad session from a split one.
        session = rows["session"]
        run = np.cumsum(np.r_[True, session[1:] != session[:-1]])
        order = np.lexsort((rows["position"], run))
        rows = {n: (v[order] if n != "where" else v) for n, v in rows.items()}
        try:
            checked = check_sessions(data, rows)
        except ValueError:
            raise NotGrouped from None
    acc = combine(acc, reduce(rows))
    return acc, _id_ranges(checked["session_ids"]), checked["session_ids"].size


def summarise(batches, data, reduce, combine) -> Summary:
    """Stream ``(frame, where)`` batches of one stretch: check and reduce its complete sessions, keep its edges.

    Parameters
    ----------
    batches : iterable of (pandas DataFrame, str)
        The rows in stream order, with where they come from (for messages).
    data : RankingDataset
        The data set the log refers to.
    reduce : callable
        ``reduce(rows) -> value`` of checked complete sessions (dict of sorted arrays).
    combine : callable
        ``combine(a, b)`` of two reduced values (``a`` may be None).

    Returns
    -------
    Summary

    Raises
    ------
    NotGrouped
        A session id comes back in the stretch after its rows ended.
    ValueError
        A bad column or session, naming where.
    """
    out = Summary()
    pending = None                     # rows of the last session seen, which the next batch may continue

    def complete(rows, where):         # complete sessions (their first may be the stretch's head)
        nonlocal out
        if out.head is None:
            first_end = int(np.flatnonzero(np.r_[rows["session"][1:] != rows["session"][:-1], True])[0]) + 1
            out.head = _take(rows, 0, first_end)
            rows = _take(rows, first_end, len(rows["session"]))
        if len(rows["session"]):
            out.reduced, ranges, n = _check(data, rows, reduce, combine, out.reduced, where)
            out.ranges.append(ranges)
            out.n_sessions += n

    for frame, where in batches:
        try:
            rows = frame_arrays(frame) | {"where": where}
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        session = rows["session"]
        if not len(session):
            continue
        starts = np.flatnonzero(np.r_[True, session[1:] != session[:-1]])
        ids = session[starts]
        if ids.size > 1 and not np.all(ids[1:] > ids[:-1]) and np.unique(ids).size != ids.size:
            raise NotGrouped
        first = 0
        if pending is not None:
            if pending["session"][0] == ids[0]:     # the pending session goes on: only its rows are copied
                end = starts[1] if starts.size > 1 else len(session)
                pending = _concat(pending, _take(rows, 0, end))
                if starts.size == 1:
                    continue
                first = 1
            complete(pending, pending["where"])
        if starts[first] < starts[-1]:
            complete(_take(rows, starts[first], starts[-1]), where)
        pending = _take(rows, starts[-1], len(session))
    if out.head is None:
        out.head = pending
    else:
        out.tail = pending
    return out


def fold(summaries, data, reduce, combine):
    """Join the stretches in stream order: check the sessions at their edges, and that no session came twice.

    Returns ``(reduced, n_sessions)``: ``reduced`` of the edge sessions only (the stretches'
    own are in their summaries), and the number of sessions of the whole stream.
    Raises :class:`NotGrouped` when a session id appears in two places.
    """
    acc, ranges, n = None, [r for s in summaries for r in s.ranges], sum(s.n_sessions for s in summaries)
    pending = None

    def close(rows):
        nonlocal acc, n
        acc, r, k = _check(data, rows, reduce, combine, acc, rows["where"])
        ranges.append(r)
        n += k

    for s in summaries:
        if s.head is None:
            continue
        first = s.head
        if pending is not None and pending["session"][0] == first["session"][0]:
            first = _concat(pending, first)
        elif pending is not None:
            close(pending)
        if s.tail is not None:
            close(first)
            pending = s.tail
        else:
            pending = first
    if pending is not None:
        close(pending)
    if ranges:
        r = np.concatenate(ranges)
        r = r[np.argsort(r[:, 0], kind="stable")]
        if np.any(r[1:, 0] < r[:-1, 1]):
            raise NotGrouped
    return acc, n


def bucketed(batches, data, reduce, combine, *, n_buckets: int, where: str):
    """Rows in any order: spread by a hash of their session over temporary files, each checked and reduced whole.

    Returns ``(reduced, n_sessions)``; messages name the file (or partition) a bad session's row
    came from, or ``where``.
    """
    bits = max(0, int(np.ceil(np.log2(max(n_buckets, 1)))))
    places = []
    with tempfile.TemporaryDirectory(prefix="cltr_sessions_") as tmp:
        files = [os.path.join(tmp, f"{k}.bin") for k in range(1 << bits)]
        for frame, place in batches:
            try:
                rows = frame_arrays(frame)
            except ValueError as err:
                raise ValueError(f"{place}: {err}") from None
            place = place.split(" (batch ")[0]
            if not places or places[-1] != place:
                places.append(place)
            rows["source"] = np.full(len(rows["session"]), len(places) - 1)
            table = np.column_stack([rows.get(c, np.zeros(len(rows["session"]), np.int64)).astype(np.int64)
                                     for c in _STORED])
            bucket = (rows["session"].astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits) \
                if bits else np.zeros(len(table), np.uint64)
            order = np.argsort(bucket, kind="stable")
            bounds = np.searchsorted(bucket[order], np.arange((1 << bits) + 1))
            for k in np.flatnonzero(np.diff(bounds)):
                with open(files[k], "ab") as fh:
                    fh.write(np.ascontiguousarray(table[order[bounds[k]:bounds[k + 1]]]).tobytes())
        acc, n = None, 0
        for path in files:
            if not os.path.exists(path):
                continue
            table = np.fromfile(path, dtype=np.int64).reshape(-1, len(_STORED))
            table = table[np.lexsort((table[:, 3], table[:, 0]))]
            rows = {c: table[:, k] for k, c in enumerate(_STORED)}
            rows["click"] = rows["click"].astype(bool)
            try:
                checked = check_sessions(data, rows, locate=lambda i: f"in {places[rows['source'][i]]}")
            except ValueError as err:
                raise ValueError(f"{where}: {err}") from None
            acc = combine(acc, reduce(rows))
            n += checked["session_ids"].size
    return acc, n
