"""Click logs: which documents were shown, where, and which were clicked.

A :class:`ClickLog` records sessions (query instances). It stores, flat and
back to back, the data-set rows shown in each session in position order and
a click flag per shown row; features stay in the :class:`RankingDataset`, so
a log of millions of sessions costs about five bytes per shown document.
Propensities are not stored: a propensity model turns positions into
propensities when the log is used (see :mod:`counterfactual_ltr.propensity`).

A log is usable as ``X`` in scikit-learn model selection: ``len(log)`` is
the number of sessions, ``log[indices]`` selects sessions (sharing the data
set, copying no features) and ``log.groups`` gives each session's query id
for ``GroupKFold``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._segments import check_offsets, offsets_from_lengths, segment_gather, segment_ids
from .datasets import RankingDataset
from .propensity import as_propensity_model, check_propensities, is_affine

__all__ = ["ClickLog", "ClickAggregate"]

FRAME_COLUMNS = ("session", "qid", "doc", "position", "click")


@dataclass(frozen=True)
class ClickAggregate:
    """Clicks summed per data-set row: what propensity-weighted training needs.

    The candidate set of a query is the same in every session, so the
    propensity-weighted objectives depend on the log only through the summed
    IPS weight of each (query, document). Training on this costs the same
    whatever the number of sessions.

    Attributes
    ----------
    data : RankingDataset
    weights : array (n_docs,)
        ``sum over clicks on the row of 1 / propensity`` (0 if never clicked).
    click_counts : array (n_docs,)
        Number of clicks on each row.
    queries : array
        Indices of the queries with at least one click, ascending.
    n_sessions, n_clicks : int
    """

    data: RankingDataset
    weights: np.ndarray
    click_counts: np.ndarray
    queries: np.ndarray
    n_sessions: int
    n_clicks: int


class ClickLog:
    """Logged sessions over a :class:`RankingDataset`.

    Parameters
    ----------
    data : RankingDataset
        The data set whose rows the log refers to.
    session_query : array (n_sessions,)
        Query index (0 .. data.n_queries - 1) of every session.
    session_offsets : array (n_sessions + 1,)
        Items of session ``i`` are ``session_offsets[i]:session_offsets[i+1]``.
    docs : array (n_items,)
        Data-set row shown at each item, in position order (first = position 1).
    clicks : array (n_items,)
        Whether the shown row was clicked.
    session_ids : array (n_sessions,), optional
        Identifiers kept through selection and round trips (default 0..n-1).
    logging_policy : object with ``position_probabilities(data)``, optional
        How likely the logger was to show each row at each position (see
        :mod:`counterfactual_ltr.logging_policy`); the policy-aware estimator
        needs it. Simulated logs carry it; for a real log, give it here.

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import RankingDataset
    >>> data = RankingDataset(np.eye(3), [1, 0, 1], [5, 5, 5])
    >>> log = ClickLog(data, [0, 0], [0, 3, 6], [2, 0, 1, 0, 2, 1], [0, 1, 0, 1, 0, 0])
    >>> len(log), log.n_clicks, log.positions.tolist()
    (2, 2, [1, 2, 3, 1, 2, 3])
    >>> log.aggregate().weights.tolist()   # clicked at position 2 (1/q = 2) and 1 (1/q = 1)
    [3.0, 0.0, 0.0]
    """

    def __init__(self, data: RankingDataset, session_query, session_offsets, docs, clicks, session_ids=None, *,
                 logging_policy=None):
        if not isinstance(data, RankingDataset):
            raise ValueError(f"data must be a RankingDataset, got {type(data).__name__}")
        docs = np.asarray(docs)
        clicks = np.asarray(clicks)
        session_query = np.asarray(session_query)
        if docs.ndim != 1 or clicks.shape != docs.shape:
            raise ValueError(f"docs and clicks must be 1-D of equal length, got {docs.shape} and {clicks.shape}")
        offsets = check_offsets(session_offsets, len(docs))
        n_sessions = len(offsets) - 1
        if session_query.shape != (n_sessions,):
            raise ValueError(f"session_query has shape {session_query.shape}, expected ({n_sessions},) (mismatched lengths)")
        if docs.size and not np.issubdtype(docs.dtype, np.integer):
            raise ValueError("docs must hold integer data-set row indices")
        bad = np.flatnonzero((docs < 0) | (docs >= data.n_docs))
        if bad.size:
            raise ValueError(f"item {bad[0]} references row {docs[bad[0]]}, which is missing from the data set "
                             f"({data.n_docs} rows)")
        if session_query.size and (session_query.min() < 0 or session_query.max() >= data.n_queries):
            raise ValueError(f"session_query holds a query index outside [0, {data.n_queries})")
        item_session = segment_ids(offsets)
        wrong = np.flatnonzero(data.query_index[docs] != session_query[item_session])
        if wrong.size:
            i = wrong[0]
            raise ValueError(f"session {item_session[i]} shows row {docs[i]}, which is not a document of its "
                             f"query (query index {session_query[item_session[i]]})")
        key = item_session.astype(np.int64) * data.n_docs + docs
        if np.unique(key).size != key.size:
            raise ValueError("a session shows the same row twice")
        if clicks.dtype != bool:
            if not np.all((clicks == 0) | (clicks == 1)):
                raise ValueError("clicks must be 0/1 or boolean")
            clicks = clicks.astype(bool)
        if session_ids is None:
            session_ids = np.arange(n_sessions, dtype=np.int64)
        session_ids = np.asarray(session_ids, dtype=np.int64)
        if session_ids.shape != (n_sessions,):
            raise ValueError(f"session_ids has shape {session_ids.shape}, expected ({n_sessions},)")
        self.data = data
        self.session_query = session_query.astype(np.int32 if data.n_queries < 2**31 else np.int64)
        self.session_offsets = offsets
        self.docs = docs.astype(np.int32 if data.n_docs < 2**31 else np.int64)
        self.clicks = clicks
        self.session_ids = session_ids
        if logging_policy is not None and not callable(getattr(logging_policy, "position_probabilities", None)):
            raise ValueError(f"logging_policy must have a position_probabilities(data) method, got "
                             f"{type(logging_policy).__name__}")
        self.logging_policy = logging_policy

    # ----------------------------------------------------------- sizes
    @property
    def n_sessions(self) -> int:
        return len(self.session_offsets) - 1

    @property
    def n_items(self) -> int:
        return len(self.docs)

    @property
    def n_clicks(self) -> int:
        return int(np.count_nonzero(self.clicks))

    @property
    def shape(self) -> tuple[int]:
        """``(n_sessions,)``: lets scikit-learn count and index sessions."""
        return (self.n_sessions,)

    def __len__(self) -> int:
        return self.n_sessions

    @property
    def nbytes(self) -> int:
        """Memory held by the log's own arrays (the data set is shared, not counted)."""
        return sum(a.nbytes for a in (self.session_query, self.session_offsets, self.docs, self.clicks, self.session_ids))

    def __repr__(self) -> str:
        return (f"ClickLog(n_sessions={self.n_sessions}, n_items={self.n_items}, n_clicks={self.n_clicks}, "
                f"data={self.data!r})")

    # ------------------------------------------------------ derived arrays
    @property
    def item_session(self) -> np.ndarray:
        """Session index (0 .. n_sessions - 1) of every item."""
        return segment_ids(self.session_offsets)

    @property
    def positions(self) -> np.ndarray:
        """1-based position of every item in its session."""
        return (np.arange(self.n_items) - np.repeat(self.session_offsets[:-1], np.diff(self.session_offsets)) + 1)

    @property
    def groups(self) -> np.ndarray:
        """Query id of every session: the ``groups`` for ``GroupKFold``."""
        return self.data.query_ids[self.session_query]

    def propensities(self, propensity=None) -> np.ndarray:
        """Propensity of every item under ``propensity`` (default: position-based, eta=1).

        An affine (trust-bias) model has no single propensity per item: use
        :func:`counterfactual_ltr.propensity.affine_parts` with :attr:`positions`.
        """
        model = as_propensity_model(propensity)
        if is_affine(model):
            raise ValueError(f"{model!r} is a trust-bias (affine) click model: this computation divides clicks by "
                             "a propensity and cannot apply its affine correction")
        return check_propensities(model(self.positions), "propensities from the propensity model")

    # ----------------------------------------------------------- selection
    def __getitem__(self, key) -> "ClickLog":
        """Sessions selected by an index array, boolean mask, slice or int (scikit-learn's ``X[idx, ...]`` too)."""
        if isinstance(key, tuple):
            if len(key) == 2 and key[1] is Ellipsis:
                key = key[0]
            else:
                raise IndexError("a click log is indexed by sessions only")
        index = np.arange(self.n_sessions)[key]
        index = np.atleast_1d(index)
        items = segment_gather(self.session_offsets, index)
        lengths = np.diff(self.session_offsets)[index]
        return ClickLog(self.data, self.session_query[index], offsets_from_lengths(lengths), self.docs[items],
                        self.clicks[items], self.session_ids[index], logging_policy=self.logging_policy)

    # ---------------------------------------------------------- aggregation
    def aggregate(self, propensity=None) -> ClickAggregate:
        """Sum ``1 / propensity`` of the clicks per data-set row (see :class:`ClickAggregate`)."""
        clicked = np.flatnonzero(self.clicks)
        q = self.propensities(propensity)[clicked]
        rows = self.docs[clicked]
        n = self.data.n_docs
        weights = np.bincount(rows, weights=1.0 / q, minlength=n)
        counts = np.bincount(rows, minlength=n)
        queries = np.unique(self.data.query_index[rows])
        return ClickAggregate(self.data, weights, counts, queries, self.n_sessions, int(clicked.size))

    # ------------------------------------------------------------- frames
    def to_frame(self):
        """One row per shown document: ``session, qid, doc, position, click`` (pandas DataFrame)."""
        import pandas as pd

        sessions = self.item_session
        return pd.DataFrame({
            "session": self.session_ids[sessions],
            "qid": self.data.qid[self.docs],
            "doc": self.docs.astype(np.int64),
            "position": self.positions.astype(np.int32),
            "click": self.clicks,
        })

    @classmethod
    def from_frame(cls, frame, data: RankingDataset, *, logging_policy=None) -> "ClickLog":
        """Rebuild a log from a frame with columns ``session, qid, doc, position, click``.

        Rows may come in any order; within a session the positions must be
        ``1..n`` without gaps, and ``qid`` must match the data set's qid of ``doc``.
        The rebuilt log holds the sessions sorted by their ``session`` id, so a
        frame from ``to_frame()`` round-trips exactly. The frame holds no
        logging policy: give it as ``logging_policy`` (see :class:`ClickLog`).
        """
        missing = [c for c in FRAME_COLUMNS if c not in frame.columns]
        if missing:
            raise ValueError(f"the frame lacks the columns {missing}")
        if len(frame) == 0:
            raise ValueError("the frame has no rows")
        arrays = {}
        for c in FRAME_COLUMNS:
            col = frame[c].to_numpy()
            if c != "click" and not np.issubdtype(col.dtype, np.integer):
                raise ValueError(f"column {c!r} must hold integers, got dtype {col.dtype}")
            arrays[c] = col
        order = np.lexsort((arrays["position"], arrays["session"]))
        session, doc = arrays["session"][order], arrays["doc"][order]
        position, click, qid = arrays["position"][order], arrays["click"][order], arrays["qid"][order]
        starts = np.flatnonzero(np.r_[True, session[1:] != session[:-1]])
        offsets = np.r_[starts, len(session)].astype(np.int64)
        expected = np.arange(len(session)) - np.repeat(starts, np.diff(offsets)) + 1
        bad = np.flatnonzero(position != expected)
        if bad.size:
            raise ValueError(f"session {session[bad[0]]}: positions must run 1..n without gaps or repeats "
                             f"(found {position[bad[0]]} where {expected[bad[0]]} was expected)")
        if doc.min() < 0 or doc.max() >= data.n_docs:
            raise ValueError(f"column 'doc' references rows missing from the data set ({data.n_docs} rows)")
        wrong = np.flatnonzero(data.qid[doc] != qid)
        if wrong.size:
            raise ValueError(f"row {doc[wrong[0]]} has qid {data.qid[doc[wrong[0]]]} in the data set but "
                             f"{qid[wrong[0]]} in the frame")
        return cls(data, data.query_index[doc[starts]], offsets, doc, click, session_ids=session[starts],
                   logging_policy=logging_policy)

    def to_parquet(self, path) -> None:
        """Write the frame of :meth:`to_frame` to a Parquet file."""
        self.to_frame().to_parquet(path, index=False)

    @classmethod
    def read_parquet(cls, path, data: RankingDataset, *, logging_policy=None) -> "ClickLog":
        """Read a log written by :meth:`to_parquet` (or any frame with the same columns)."""
        import pandas as pd

        return cls.from_frame(pd.read_parquet(path), data, logging_policy=logging_policy)

    def equals(self, other: "ClickLog") -> bool:
        """Same sessions, shown rows, positions and clicks (and the same data set object)."""
        return (other.data is self.data and np.array_equal(self.session_ids, other.session_ids)
                and np.array_equal(self.session_offsets, other.session_offsets)
                and np.array_equal(self.docs, other.docs) and np.array_equal(self.clicks, other.clicks)
                and np.array_equal(self.session_query, other.session_query))
