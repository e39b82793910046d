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

import os

import warnings

import numpy as np

from .._segments import check_offsets, offsets_from_lengths, segment_gather, segment_ids
from .aggregate import ClickAggregate, count_table
from ..datasets import RankingDataset, _check_integer
from ..ids import IdTable, as_dataframe, format_id
from .raw_events import RepeatedDocumentWarning, event_arrays, join_rows, kept_after_join, later_showings, \
    repeated_message, warn_dropped, without_repeats
from .log_integrity import read_log_frame, write_log_frame
from .session_checks import FRAME_COLUMNS, check_session_codes, check_sessions, first_repeated_item, \
    frame_arrays
from ..examination.propensity_models import as_propensity_model, checked_item_propensities, is_affine, \
    is_session_dependent, propensities_at, warn_if_extrapolated

__all__ = ["ClickLog", "ClickAggregate", "RepeatedDocumentWarning"]



def _index_array(values, name: str) -> np.ndarray:
    """A 1-D array of integer indices (an empty list is fine); ``ValueError`` for anything else."""
    arr = np.asarray(values)
    if arr.size == 0:
        return arr.astype(np.int64).ravel()
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must hold integer indices, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.unsignedinteger) and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} holds {arr.max()}, beyond the 64-bit signed range")
    return arr.astype(np.int64, copy=False)


def _check_clicks(clicks, name: str, unit: str) -> np.ndarray:
    """Clicks as a bool array: booleans, or numbers that are exactly 0 or 1 (``ValueError`` naming the first other)."""
    clicks = np.asarray(clicks)
    if clicks.dtype == bool:
        return clicks
    if clicks.size == 0:
        return clicks.astype(bool)
    if not np.issubdtype(clicks.dtype, np.number) or np.iscomplexobj(clicks):
        raise ValueError(f"{name} must be boolean or 0/1 numbers, got dtype {clicks.dtype}")
    bad = np.flatnonzero(~((clicks == 0) | (clicks == 1)))
    if bad.size:
        raise ValueError(f"{name} must be 0/1 or boolean; {unit} {bad[0]} holds {clicks.ravel()[bad[0]]}")
    return clicks.astype(bool)


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
    logger : array (n_sessions,), optional
        Which logging ranker served each session (index >= 0; default 0: one logger).
    intervention : array (n_sessions,), optional
        Randomisation applied to the session: 0 none (default), ``k >= 2`` the
        documents at positions 1 and ``k`` were swapped, ``-n`` the top ``n``
        were shuffled (see ``click_sim.SwapIntervention`` and ``TopNShuffle``).
    logging_policy : object with ``position_probabilities(data)``, optional
        How likely the logger was to show each row at each position (see
        :mod:`counterfactual_ltr.examination.logging_policy`); the policy-aware estimator
        needs it. Simulated logs of one logger without interventions carry it;
        for a real log, give it here.
    positions : int array (n_items,), optional
        The recorded position of every item (>= 1, increasing within a session, gaps where a
        position was not shown); default ``1..n`` in every session.
    ids : IdTable, optional
        For a log without a data set (``data=None``, see :meth:`from_events`): the table of its
        (query, document) rows and their original ids, which ``docs`` and ``session_query``
        refer to.

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

    def __init__(self, data: RankingDataset | None, session_query, session_offsets, docs, clicks, session_ids=None,
                 *, logger=None, intervention=None, logging_policy=None, positions=None, ids: IdTable | None = None):
        if data is None:
            if not isinstance(ids, IdTable):
                raise ValueError("a log without a data set needs ids (an IdTable); see ClickLog.from_events")
        elif not isinstance(data, RankingDataset):
            raise ValueError(f"data must be a RankingDataset, got {type(data).__name__}")
        elif ids is not None:
            raise ValueError("give data or ids, not both (a log over a data set takes its ids from it)")
        table = data if data is not None else ids
        docs = _index_array(docs, "docs")
        clicks = _check_clicks(clicks, "clicks", "item")
        session_query = _index_array(session_query, "session_query")
        if docs.ndim != 1 or clicks.shape != docs.shape:
            raise ValueError(f"docs and clicks must be 1-D of equal length, got {docs.shape} and {clicks.shape}")
        if np.asarray(session_offsets).dtype.kind not in "iuf":
            raise ValueError(f"session_offsets must hold integers, got dtype {np.asarray(session_offsets).dtype}")
        try:
            offsets = check_offsets(session_offsets, len(docs))
        except ValueError as err:  # the shared check speaks of queries; here the segments are sessions
            raise ValueError(str(err).replace("query_offsets", "session_offsets").replace("query ", "session ")
                             .replace("n_queries", "n_sessions").replace("documents", "items")) from None
        n_sessions = len(offsets) - 1
        if session_query.shape != (n_sessions,):
            raise ValueError(f"session_query has shape {session_query.shape}, expected ({n_sessions},) (mismatched lengths)")
        bad = np.flatnonzero((docs < 0) | (docs >= table.n_docs))
        if bad.size:
            raise ValueError(f"item {bad[0]} references row {docs[bad[0]]}, which is missing from the data set "
                             f"({table.n_docs} rows)")
        bad = np.flatnonzero((session_query < 0) | (session_query >= table.n_queries))
        if bad.size:
            raise ValueError(f"session_query[{bad[0]}] = {session_query[bad[0]]} is not a query index "
                             f"in [0, {table.n_queries})")
        item_session = segment_ids(offsets)
        item_query = session_query[item_session]
        wrong = np.flatnonzero(table.query_index[docs] != item_query)
        if wrong.size:
            i = wrong[0]
            raise ValueError(f"session {item_session[i]} shows row {docs[i]}, which is not a document of its "
                             f"query (query index {session_query[item_session[i]]})")
        # A raw log may show a document twice on a page (real logs do); learners' logs may not.
        repeated = first_repeated_item(data, session_query, item_session, docs) if data is not None else None
        if repeated is not None:
            raise ValueError(f"session {item_session[repeated]} shows row {docs[repeated]} twice "
                             "(a session shows each row at most once)")
        if session_ids is None:
            session_ids = np.arange(n_sessions, dtype=np.int64)
        session_ids = _check_integer(session_ids, "session_ids") if data is not None else np.asarray(session_ids)
        if session_ids.shape != (n_sessions,):
            raise ValueError(f"session_ids has shape {session_ids.shape}, expected ({n_sessions},)")
        logger, intervention = check_session_codes(_session_column(logger, "logger", n_sessions),
                                                   _session_column(intervention, "intervention", n_sessions),
                                                   np.diff(offsets), np.arange(n_sessions))
        self.data = data
        self.ids = ids
        self._positions = _check_positions(positions, offsets)
        self.session_query = session_query.astype(np.int32 if table.n_queries < 2**31 else np.int64)
        self.session_offsets = offsets
        self.docs = docs.astype(np.int32 if table.n_docs < 2**31 else np.int64)
        self.clicks = clicks
        self.session_ids = session_ids
        self.logger = logger
        self.intervention = intervention
        if logging_policy is not None and not callable(getattr(logging_policy, "position_probabilities", None)):
            raise ValueError(f"logging_policy must have a position_probabilities(data) method, got "
                             f"{type(logging_policy).__name__}")
        self.logging_policy = logging_policy
        self._counts = None         # the count table, kept once the log is frozen (see frozen())

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
        return sum(a.nbytes for a in (self.session_query, self.session_offsets, self.docs, self.clicks, self.session_ids,
                                      self.logger, self.intervention)) \
            + (0 if self._positions is None else self._positions.nbytes)

    def __repr__(self) -> str:
        return (f"ClickLog(n_sessions={self.n_sessions}, n_items={self.n_items}, n_clicks={self.n_clicks}, "
                f"{'data' if self.data is not None else 'ids'}={self._table!r})")

    # ------------------------------------------------------------------ ids
    @property
    def _table(self):
        return self.data if self.data is not None else self.ids

    @property
    def n_queries(self) -> int:
        """Number of queries (of the data set, or distinct in the log without one)."""
        return self._table.n_queries

    @property
    def n_rows(self) -> int:
        """Number of (query, document) rows the log's ``docs`` refer to."""
        return self._table.n_docs

    @property
    def row_query(self) -> np.ndarray:
        """Query index of every row."""
        return self._table.query_index

    @property
    def query_ids(self) -> np.ndarray:
        """The id of each query index as given: the log's own ids, or the data set's ``query_keys``."""
        return self.ids.query_ids if self.data is None else self.data.query_keys

    @property
    def doc_ids(self) -> np.ndarray:
        """The document id of each row as given: the log's own ids, or the data set's ``doc_keys``.

        A data set read from a LETOR file has no document ids: its row index is the id.
        """
        return self.ids.doc_ids if self.data is None else self.data.doc_keys

    def row_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """``(query id, document id)`` of every row, the keys :meth:`with_data` joins by."""
        return self.query_ids[self.row_query], self.doc_ids

    def _need_data(self, what: str):
        if self.data is None:
            raise ValueError(f"{what} needs document features: this log has none; join a feature table with "
                             "log.with_data(RankingDataset.from_frame(...))")

    # ------------------------------------------------------ derived arrays
    @property
    def item_session(self) -> np.ndarray:
        """Session index (0 .. n_sessions - 1) of every item."""
        return segment_ids(self.session_offsets)

    @property
    def positions(self) -> np.ndarray:
        """1-based position of every item in its session (as recorded: gaps where a position was not shown)."""
        if self._positions is not None:
            return self._positions
        return (np.arange(self.n_items) - np.repeat(self.session_offsets[:-1], np.diff(self.session_offsets)) + 1)

    @property
    def groups(self) -> np.ndarray:
        """Query id of every session: the ``groups`` for ``GroupKFold``."""
        return self.query_ids[self.session_query]

    def propensities(self, propensity=None) -> np.ndarray:
        """Propensity of every item under ``propensity`` (default: position-based, eta=1).

        An affine (trust-bias) model has no single propensity per item: use
        :func:`counterfactual_ltr.propensity.affine_parts` with :attr:`positions`.

        Parameters
        ----------
        propensity : None, float or propensity model, default None
            Examination model (``None``: ``eta = 1``; a number: its ``eta``).

        Returns
        -------
        ndarray of float64, shape (n_items,)
        """
        model = as_propensity_model(propensity)
        if is_session_dependent(model):
            return checked_item_propensities(model, self)
        if is_affine(model):
            raise ValueError(f"{model!r} is a trust-bias (affine) click model: this computation divides clicks by "
                             "a propensity and cannot apply its affine correction")
        warn_if_extrapolated(model, int(self.positions[self.clicks].max(initial=0)))
        return propensities_at(model, self.positions)

    # ----------------------------------------------------------- selection
    def __getitem__(self, key) -> "ClickLog":
        """Sessions selected by an index array, boolean mask, slice or int (scikit-learn's ``X[idx, ...]`` too)."""
        if isinstance(key, tuple):
            if len(key) == 2 and key[1] is Ellipsis:
                key = key[0]
            else:
                raise IndexError("a click log is indexed by sessions only")
        try:
            index = np.arange(self.n_sessions)[key]
        except IndexError as err:
            raise IndexError(f"cannot select sessions {key!r:.60} of a log of {self.n_sessions} sessions: "
                             f"{err}") from None
        index = np.atleast_1d(index)
        items = segment_gather(self.session_offsets, index)
        lengths = np.diff(self.session_offsets)[index]
        return ClickLog(self.data, self.session_query[index], offsets_from_lengths(lengths), self.docs[items],
                        self.clicks[items], self.session_ids[index], logger=self.logger[index],
                        intervention=self.intervention[index], logging_policy=self.logging_policy,
                        positions=None if self._positions is None else self._positions[items], ids=self.ids)

    def frozen(self) -> "ClickLog":
        """This log with its arrays read-only, so that it keeps its count table between aggregates.

        Every learner fitted on the log counts its clicks and impressions per ``(doc, position)``
        (:meth:`aggregate`); a frozen log counts once, however many learners and grid values are
        fitted on it (what :func:`~counterfactual_ltr.learner_choice.select_learner` does with its folds).
        Writing to a frozen log's arrays raises ``ValueError``.

        Returns
        -------
        ClickLog
            ``self``.

        Examples
        --------
        >>> from click_sim import make_ranking, simulate_clicks
        >>> data = make_ranking(n_queries=5, random_state=0)
        >>> log = simulate_clicks(data, data.X[:, 0], n_passes=2, random_state=0)[:4].frozen()
        >>> log.aggregate().n_clicks == log.aggregate(2.0).n_clicks == log.n_clicks
        True
        """
        for array in (self.docs, self.clicks, self.session_offsets, self.session_query, self.positions):
            array.setflags(write=False)
        if self._counts is None:
            self._counts = count_table(self.docs, self.positions, self.clicks)
        return self

    # ---------------------------------------------------------- aggregation
    def aggregate(self, propensity=None) -> ClickAggregate:
        """Clicks and impressions counted per ``(doc, position)``, weighted by ``1 / propensity`` per row.

        See :class:`ClickAggregate`; :func:`counterfactual_ltr.logs.aggregate.aggregate_clicks`
        gives the identical aggregate from the log's Parquet files.

        Parameters
        ----------
        propensity : None, float or propensity model, default None
            Examination model of the weights (``None``: ``eta = 1``; a number:
            its ``eta``; a session-dependent model such as ``CascadePropensity``: each click weighted by
            ``1 /`` its own propensity); :meth:`ClickAggregate.reweight` changes it later
            (to a position-based model: the count table has no sessions).

        Returns
        -------
        ClickAggregate
        """
        self._need_data("the aggregate")
        table = self._counts or count_table(self.docs, self.positions, self.clicks)
        model = as_propensity_model(propensity)
        if is_session_dependent(model):   # one propensity per click (Vardasbi et al. 2020): sum 1 / q per row
            q = self.propensities(model)
            return ClickAggregate._from_click_weights(self.data, table, self.n_sessions, self.docs,
                                                      self.clicks / q, model)
        return ClickAggregate._weighted(self.data, table, self.n_sessions, propensity)

    # ------------------------------------------------------------- frames
    def to_frame(self):
        """One row per shown document (pandas DataFrame).

        A log over a data set: ``session, qid, doc, position, click, logger, intervention`` (``doc``
        the data-set row). A log without one (:meth:`from_events`): ``session, query, doc,
        position, click`` with the ids as given, which :meth:`from_events` with
        ``session="session"`` reads back.
        """
        import pandas as pd

        sessions = self.item_session
        if self.data is None:
            return pd.DataFrame({"session": self.session_ids[sessions],
                                 "query": self.query_ids[self.row_query[self.docs]], "doc": self.doc_ids[self.docs], "position": self.positions.astype(np.int64),
                                 "click": self.clicks})
        return pd.DataFrame({
            "session": self.session_ids[sessions],
            "qid": self.data.qid[self.docs],
            "doc": self.docs.astype(np.int64),
            "position": self.positions.astype(np.int32),
            "click": self.clicks,
            "logger": self.logger[sessions],
            "intervention": self.intervention[sessions],
        })

    @classmethod
    def from_frame(cls, frame, data: RankingDataset, *, logging_policy=None) -> "ClickLog":
        """Rebuild a log from a frame with columns ``session, qid, doc, position, click``.

        ``frame`` is a pandas DataFrame or a mapping of column name to values.
        Optional columns ``logger`` and ``intervention`` (constant within a
        session) default to 0: one logger, no intervention.

        Rows may come in any order; within a session the positions must be
        ``1..n`` without gaps or repeats, every row of a session must carry the
        same ``qid``, and ``qid`` must match the data set's qid of ``doc``.
        ``session``, ``qid``, ``doc`` and ``position`` hold integers (64-bit
        signed: larger unsigned ids are refused rather than wrapped); ``click``
        holds booleans or the numbers 0 and 1. Missing values are errors. The
        rebuilt log holds the sessions sorted by their ``session`` id, so a
        frame from ``to_frame()`` round-trips exactly. The frame holds no
        logging policy: give it as ``logging_policy`` (see :class:`ClickLog`).

        Parameters
        ----------
        frame : pandas DataFrame or mapping of column name to values
            One row per shown document.
        data : RankingDataset
            The data set whose rows ``doc`` refers to.
        logging_policy : object with ``position_probabilities(data)``, optional
            The policy that logged the sessions (see :class:`ClickLog`).

        Returns
        -------
        ClickLog

        Examples
        --------
        >>> import numpy as np
        >>> from counterfactual_ltr import RankingDataset
        >>> data = RankingDataset(np.eye(3), [1, 0, 1], [5, 5, 5])
        >>> log = ClickLog.from_frame({"session": [7, 7], "qid": [5, 5], "doc": [2, 0],
        ...                            "position": [1, 2], "click": [True, False]}, data)
        >>> log.session_ids.tolist(), log.docs.tolist(), log.n_clicks
        ([7], [2, 0], 1)
        """
        if not isinstance(data, RankingDataset):
            raise TypeError(f"data must be a RankingDataset, got {type(data).__name__}")
        frame = _log_frame(frame)
        arrays = frame_arrays(frame, FRAME_COLUMNS)
        order = np.lexsort((arrays["position"], arrays["session"]))
        rows = {name: values[order] for name, values in arrays.items()}
        checked = check_sessions(data, rows, locate=lambda i: f"frame row {frame.index[order[i]]!r}",
                                 session_column=lambda name: frame_arrays(frame, [name])[name][order]
                                 if name in frame.columns else None)
        return cls(data, checked["session_query"], checked["offsets"], rows["doc"], rows["click"],
                   session_ids=checked["session_ids"], logger=checked["logger"],
                   intervention=checked["intervention"], logging_policy=logging_policy)

    @classmethod
    def from_events(cls, frame, *, query="query", doc="doc", position="position", click="click",
                    session=None) -> "ClickLog":
        """A log from raw events, one row per shown result, with no data set.

        Query and document ids may be strings or 64-bit signed or unsigned integers; they are kept
        as given (``query_ids``, ``doc_ids``, written back by :meth:`to_frame`), and coded densely
        inside. Extra columns are ignored. Pages (the result lists, this log's sessions):

        * with ``session``, the column naming each row's page (where a user's session holds
          several pages, pass the page id): rows may come in any order; pages are ordered by
          their id, rows within a page by position;
        * without it, pages are runs of consecutive rows: a new page starts at a row whose query
          differs from the row before's, or whose position is not larger than the row before's.
          A page that starts with a row repeating a (query, document, position) row of the page
          before, where that is no plausible new result list (the row just before again, or a
          page starting after position 1), is more likely a row logged twice: it warns
          (``RepeatedRowWarning``, with the count and an example) and is kept as a page.

        Positions are as recorded, 1-based; a position missing from a page was not shown.
        ``ValueError`` (naming the column and a frame row) for a missing id, position or click,
        a position below 1, a click other than 0/1 or boolean, a position twice on one page, a
        page whose rows carry two queries, a document twice on one page, ids that are floats or
        mix strings with numbers. Nothing is dropped or converted silently. A document shown twice
        on one page (real logs have such pages) is kept as two shown results; :meth:`with_data`
        refuses such pages (a learner's session shows each document once).

        Parameters
        ----------
        frame : pandas DataFrame or mapping of column name to values
            The events.
        query, doc, position, click : str
            The columns of the query id, document id, position and click (0/1 or boolean).
        session : str, optional
            The column of the page id.

        Returns
        -------
        ClickLog
            Without a data set (``data`` is None): propensity estimation, click models and the
            on-policy value of the logged rankings need none; :meth:`with_data` joins features.

        Examples
        --------
        >>> log = ClickLog.from_events({"query": ["q1"] * 3 + ["q2"] * 2, "doc": [2**63, 5, 9, 5, 4],
        ...                             "position": [1, 2, 4, 1, 2], "click": [0, 1, 0, 0, 1]})
        >>> len(log), log.positions.tolist(), log.doc_ids[log.docs].tolist()[:2]
        (2, [1, 2, 4, 1, 2], [9223372036854775808, 5])
        """
        a = event_arrays(frame, query=query, doc=doc, position=position, click=click, session=session)
        return cls(None, a["session_query"], a["offsets"], a["rows"], a["clicks"], a["session_ids"],
                   positions=a["positions"], ids=a["ids"])

    def with_data(self, data: RankingDataset, *, missing: str = "raise", repeated: str = "drop_pages") -> "ClickLog":
        """The same sessions over ``data``, joined by (query id, document id): the log learners take.

        ``data`` is typically :meth:`RankingDataset.from_frame` of a feature table keyed by the
        log's ids. Sessions, their order, positions and clicks are kept.

        Parameters
        ----------
        data : RankingDataset
            Features keyed by ``data.query_keys`` and ``data.doc_keys``.
        missing : {"raise", "drop_sessions", "drop_rows"}, default "raise"
            Shown documents without features: a ``ValueError`` naming their count and a few of
            them, or drop the sessions that show one, or drop those rows only (the other rows keep
            their positions); a dropping join warns with the counts (``MissingFeaturesWarning``).
        repeated : {"drop_pages", "keep_first", "raise"}, default "drop_pages"
            Pages that show one document twice (real logs have them; a learner's session shows a
            document once): drop those pages, or keep each document's first showing on the page
            (the later rows dropped, the other rows keep their positions), with a
            ``RepeatedDocumentWarning`` that counts them and names a few by their ids; or a
            ``ValueError`` naming the first.

        Returns
        -------
        ClickLog

        Examples
        --------
        >>> log = ClickLog.from_events({"query": ["q1", "q1"], "doc": ["a", "b"], "position": [1, 2],
        ...                             "click": [1, 0]})
        >>> data = RankingDataset.from_frame({"query": ["q1", "q1"], "doc": ["b", "a"], "f": [0.0, 1.0]})
        >>> joined = log.with_data(data)
        >>> joined.docs.tolist(), joined.data.X[joined.docs, 0].tolist()
        ([1, 0], [1.0, 0.0])
        """
        if not isinstance(data, RankingDataset):
            raise TypeError(f"data must be a RankingDataset, got {type(data).__name__}")
        if repeated not in ("drop_pages", "keep_first", "raise"):
            raise ValueError(f"repeated must be 'drop_pages', 'keep_first' or 'raise', got {repeated!r}")
        data_row, known = join_rows(self.row_keys(), data, missing)
        shown_known = known[self.docs]
        keep_items, keep_sessions = kept_after_join(self.item_session, shown_known, self.n_sessions, missing)
        if not shown_known.all():
            warn_dropped(missing, int((~keep_items).sum()), int((~keep_sessions).sum()), self.n_items,
                         self.n_sessions)
        if repeated != "raise":
            keep_items, keep_sessions = self._without_repeats(keep_items, keep_sessions, repeated)
        session = self.item_session[keep_items]
        new_index = np.cumsum(keep_sessions) - 1
        lengths = np.bincount(new_index[session], minlength=int(keep_sessions.sum()))
        docs = data_row[self.docs[keep_items]]
        session_query = data.query_index[docs[np.r_[0, np.cumsum(lengths)[:-1]]]] if docs.size else []
        if docs.size:
            self._refuse_repeats(data, np.asarray(session_query), new_index[session], docs, keep_items)
        return ClickLog(data, session_query,
                        offsets_from_lengths(lengths), docs, self.clicks[keep_items], self._kept_ids(keep_sessions),
                        logger=self.logger[keep_sessions], intervention=self.intervention[keep_sessions],
                        logging_policy=self.logging_policy, positions=self.positions[keep_items])

    def _without_repeats(self, keep_items, keep_sessions, how):
        """The kept items and sessions without the repeated showings of a document on a page (see ``with_data``)."""
        later = later_showings(self.item_session, self.docs) & keep_items
        if not later.any():
            return keep_items, keep_sessions
        keep_items, keep_sessions, pages = without_repeats(later, keep_items, keep_sessions, self.item_session, how)
        first = np.flatnonzero(later)[np.unique(self.item_session[later], return_index=True)[1][:3]]
        query_ids, doc_ids = self.row_keys()
        named = [f"page {format_id(self.session_ids[self.item_session[i]])} (query {format_id(query_ids[self.docs[i]])}, "
                 f"document {format_id(doc_ids[self.docs[i]])})" for i in first]
        if not keep_items.any():
            raise ValueError(f"every page shows a document twice ({', '.join(named)}, ...): nothing is left to join; "
                             "use repeated='keep_first'")
        warnings.warn(repeated_message(pages.size, self.n_sessions, named, how, int(later.sum())),
                      RepeatedDocumentWarning, stacklevel=3)
        return keep_items, keep_sessions

    def _refuse_repeats(self, data, session_query, item_session, docs, keep_items):
        """A joined page that shows a document twice, named by the user's page, query and document ids."""
        repeated = first_repeated_item(data, session_query, item_session, docs)
        if repeated is None:
            return
        item = np.flatnonzero(keep_items)[repeated]
        page = self.item_session[item]
        query_ids, doc_ids = self.row_keys()
        first = self.session_offsets[page] + int(np.flatnonzero(self.docs[self.session_offsets[page]:item]
                                                               == self.docs[item])[0])
        positions = self.positions
        raise ValueError(f"page {format_id(self.session_ids[page])} (query {format_id(query_ids[self.docs[item]])}) "
                         f"shows document {format_id(doc_ids[self.docs[item]])} twice, at positions "
                         f"{positions[first]} and {positions[item]}: a log joined to features shows each document at "
                         "most once per page; drop the repeat from the events")

    def _kept_ids(self, keep):
        """Session ids of the kept sessions (a log over a data set holds integer session ids)."""
        ids = self.session_ids[keep]
        if np.issubdtype(ids.dtype, np.signedinteger) or (ids.dtype.kind == "u"
                                                          and (ids.size == 0 or ids.max() < 2**63)):
            return ids
        return np.flatnonzero(keep)

    def to_parquet(self, path) -> None:
        """Write the frame of :meth:`to_frame` to a Parquet file, with page checksums and a content digest.

        The checksums (CRC-32 of every data page) and the digest of the columns in the file's
        metadata let :meth:`read_parquet` (and every reader of logs) detect a corrupted or
        altered file instead of reading back a different log (see
        :mod:`counterfactual_ltr.logs.log_integrity`).

        Parameters
        ----------
        path : str or path-like
            The file to write (replaced if it exists); Parquet whatever its name.
        """
        write_log_frame(self.to_frame(), path, kind="parquet")

    @classmethod
    def read_parquet(cls, path, data: RankingDataset, *, logging_policy=None) -> "ClickLog":
        """Read a log written by :meth:`to_parquet` (or any Parquet file with the same columns).

        ``path`` is a file (Parquet whatever its name) or a folder of Parquet files
        (``.parquet``/``.pq``, e.g. a partitioned simulation's), read in sorted order.
        Page checksums and the content digest are verified when the file has them.
        A file that is not Parquet, is truncated or corrupted, does not match its
        digest, or does not hold a valid log raises ``ValueError`` naming the file.

        Parameters
        ----------
        path : str or path-like
            The Parquet file or folder.
        data : RankingDataset
            The data set whose rows the log's ``doc`` column refers to.
        logging_policy : object with ``position_probabilities(data)``, optional
            The policy that logged the sessions (see :class:`ClickLog`).

        Returns
        -------
        ClickLog
        """
        name = os.fspath(path)
        if not os.path.exists(name):
            raise FileNotFoundError(f"{name}: no such file or folder")
        frame = read_log_frame(name, kind="parquet")
        try:
            return cls.from_frame(frame, data, logging_policy=logging_policy)
        except (ValueError, TypeError) as err:
            raise type(err)(f"{name}: {err}") from err

    def equals(self, other: "ClickLog") -> bool:
        """Same sessions, shown rows, positions, clicks, loggers and interventions (and the same data set object).

        Logs without a data set compare their ids (two loads of the same raw log are equal).

        Parameters
        ----------
        other : ClickLog
            The log to compare with.

        Returns
        -------
        bool
        """
        if not (isinstance(other, ClickLog) and other.data is self.data):
            return False
        if self.data is None:   # the same events: ids per shown result, not the codes (which follow input order)
            return (other.data is None and self.n_items == other.n_items
                    and np.array_equal(self.session_offsets, other.session_offsets)
                    and all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(
                        (self.session_ids, self.query_ids[self.row_query[self.docs]], self.doc_ids[self.docs]),
                        (other.session_ids, other.query_ids[other.row_query[other.docs]], other.doc_ids[other.docs])))
                    and np.array_equal(self.positions, other.positions) and np.array_equal(self.clicks, other.clicks))
        return (np.array_equal(self.positions, other.positions)
                and np.array_equal(self.session_ids, other.session_ids)
                and np.array_equal(self.session_offsets, other.session_offsets)
                and np.array_equal(self.docs, other.docs) and np.array_equal(self.clicks, other.clicks)
                and np.array_equal(self.session_query, other.session_query)
                and np.array_equal(self.logger, other.logger)
                and np.array_equal(self.intervention, other.intervention))


def _log_frame(frame):
    """``frame`` (a DataFrame or a mapping of columns) as a DataFrame holding each column of a log once, and rows."""
    frame = as_dataframe(frame)
    missing = [c for c in FRAME_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"the frame lacks the columns {missing}")
    repeated = [c for c in FRAME_COLUMNS if np.count_nonzero(frame.columns == c) > 1]
    if repeated:
        raise ValueError(f"the frame has more than one column named {repeated[0]!r}")
    if len(frame) == 0:
        raise ValueError("the frame has no rows")
    return frame


def _session_column(values, name: str, n_sessions: int) -> np.ndarray:
    """An optional per-session integer column (default all 0) as int64 (its range is checked after)."""
    if values is None:
        return np.zeros(n_sessions, dtype=np.int64)
    values = np.asarray(values)
    if values.shape != (n_sessions,):
        raise ValueError(f"{name} has shape {values.shape}, expected ({n_sessions},)")
    if values.size and not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"{name} must hold integers, got dtype {values.dtype}")
    return _check_integer(values, name)


def _check_positions(positions, offsets) -> np.ndarray | None:
    """Recorded positions (>= 1, increasing within each session) as int32, or None for ``1..n`` in every session."""
    if positions is None:
        return None
    positions = np.asarray(positions)
    n = int(offsets[-1])
    if positions.shape != (n,) or (n and not np.issubdtype(positions.dtype, np.integer)):
        raise ValueError(f"positions must hold one integer per item ({n}), got shape {positions.shape} "
                         f"and dtype {positions.dtype}")
    positions = positions.astype(np.int64)
    bad = np.flatnonzero(positions < 1)
    if bad.size:
        raise ValueError(f"positions must be >= 1; item {bad[0]} has {positions[bad[0]]}")
    start = np.zeros(n, dtype=bool)
    start[offsets[:-1][offsets[:-1] < n]] = True
    bad = np.flatnonzero(~start[1:] & (positions[1:] <= positions[:-1])) + 1
    if bad.size:
        raise ValueError(f"positions must increase within a session; item {bad[0]} has {positions[bad[0]]} after "
                         f"{positions[bad[0] - 1]}")
    if positions.size and positions.max() >= 2**31:
        raise ValueError(f"position {positions.max()} is beyond the int32 range positions are stored in")
    consecutive = np.arange(n) - np.repeat(offsets[:-1], np.diff(offsets)) + 1
    return None if np.array_equal(positions, consecutive) else positions.astype(np.int32)

