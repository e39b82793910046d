"""Click aggregates: the sufficient statistic of the propensity-weighted learners.

The candidate set of a query is the same in every session, so the objectives
of SVM PropRank / PropDCG / PropRBP (and SLAM's batch ERM) depend on a log
only through, per data-set row, the summed IPS weight of its clicks. Under a
position-based propensity model that sum is ``sum_r clicks(doc, r) / q(r)``,
so the table of click and impression counts per ``(doc, position)`` is enough
to train with *any* position-based propensity model, chosen after the log is
reduced. Its size is the number of distinct shown ``(doc, position)`` pairs,
not the number of sessions: a log of billions of rows reduces to megabytes.

:func:`aggregate_clicks` builds it from log files (Parquet or CSV) in bounded
memory (pyarrow batches) or as a Dask reduction, checking every session as
:meth:`ClickLog.from_frame` does; :meth:`ClickLog.aggregate` builds the same
table from a log in memory. The three paths give identical tables
(integer counts, sorted by ``(doc, position)``), hence identical weights.

What an aggregate cannot give: anything that needs the sessions themselves,
i.e. confidence intervals of IPS/SNIPS (their variance has within-session
cross terms), session-level cross-validation splits, and the online loop.
Point estimates of IPS and SNIPS of a ranker can be computed from it
(:meth:`ClickAggregate.ips_value`, :meth:`ClickAggregate.snips_value`).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np

from .._segments import predicted_scores, rank_within_queries
from .._validation import check_int
from ..datasets import RankingDataset, _check_integer
from .log_integrity import iter_log_batches, log_columns, log_files, log_kind
from ._log_stream import NotGrouped, Summary, bucketed, fold, summarise
from ..metrics import metric_weight
from ..examination.propensity_models import (affine_parts, as_propensity_model, is_affine, propensities_at,
                                             resolve_propensity, warn_if_extrapolated)
from .session_checks import FRAME_COLUMNS, SESSION_COLUMNS
from ._count_table import _POSITION_BITS, _merge_keys, count_table, merge_tables as _merge_tables, \
    merge_two as _merge_two

__all__ = ["ClickAggregate", "aggregate_clicks", "count_table"]

#: Columns an aggregate needs from a log frame (``to_frame()`` has them all): the session checks read them all.
AGGREGATE_COLUMNS = FRAME_COLUMNS

@dataclass(frozen=True, eq=False)
class ClickAggregate:
    """Clicks of a log summed per data-set row: what propensity-weighted training needs.

    Build it with :meth:`ClickLog.aggregate`, :func:`aggregate_clicks` or :meth:`from_table`.

    Parameters
    ----------
    data : RankingDataset
        The data set whose rows the log refers to.
    weights : array (n_docs,)
        ``sum over clicks on the row of 1 / propensity`` under :attr:`propensity` (0 if never clicked);
        under a trust-bias model, ``sum over impressions of (click - beta_r) / alpha_r`` (may be negative).
    click_counts : array (n_docs,)
        Number of clicks on each row.
    queries : array
        Indices of the queries with a non-zero weight (with a click, for a plain propensity), ascending.
    n_sessions : int
        Number of sessions behind the aggregate.
    n_clicks : int
        Number of clicks behind it.
    table : tuple of four int64 arrays, optional
        ``(docs, positions, clicks, impressions)``: counts per distinct shown
        ``(doc, position)``, sorted. With it, :meth:`reweight` applies any other
        position-based propensity model without the log.
    propensity : propensity model, optional
        The model :attr:`weights` were computed under.

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import RankingDataset, ClickLog
    >>> data = RankingDataset(np.eye(3), [1, 0, 1], [5, 5, 5])
    >>> log = ClickLog(data, [0, 0], [0, 3, 6], [2, 0, 1, 0, 2, 1], [0, 1, 0, 1, 0, 0])
    >>> agg = log.aggregate()                     # eta = 1: clicks at positions 2 and 1
    >>> agg.weights.tolist(), agg.reweight(2.0).weights.tolist()
    ([3.0, 0.0, 0.0], [5.0, 0.0, 0.0])
    """

    data: RankingDataset
    weights: np.ndarray
    click_counts: np.ndarray
    queries: np.ndarray
    n_sessions: int
    n_clicks: int
    table: tuple | None = None
    propensity: object = None

    @classmethod
    def from_table(cls, data: RankingDataset, docs, positions, clicks, impressions, n_sessions: int,
                   propensity=None) -> "ClickAggregate":
        """Build an aggregate from a count table (validated: rows of ``data``, positions >= 1, clicks <= impressions).

        Parameters
        ----------
        data : RankingDataset
            The data set whose rows ``docs`` refers to.
        docs, positions : array of int (n_rows,)
            Data-set row and 1-based position of every row of the table.
        clicks, impressions : array of int (n_rows,)
            Clicks and impressions of each (doc, position), ``0 <= clicks <= impressions``.
        n_sessions : int >= 0
            Number of sessions the table was counted over.
        propensity : None, float or propensity model, default None
            Examination model of the weights (``None``: ``eta = 1``).

        Returns
        -------
        ClickAggregate
        """
        if not isinstance(data, RankingDataset):
            raise TypeError(f"data must be a RankingDataset, got {type(data).__name__}")
        columns = {}
        for name, values in (("docs", docs), ("positions", positions), ("clicks", clicks),
                             ("impressions", impressions)):
            try:   # whole numbers only: 2.7 clicks is an error, not 2
                columns[name] = _check_integer(np.atleast_1d(np.asarray(values)), f"the count table's {name}")
            except (ValueError, TypeError) as err:
                raise ValueError(str(err)) from None
        docs, positions, clicks, impressions = columns.values()
        if not (docs.shape == positions.shape == clicks.shape == impressions.shape and docs.ndim == 1):
            raise ValueError("the count table's columns must be 1-D arrays of equal length")
        if docs.size and (docs.min() < 0 or docs.max() >= data.n_docs):
            raise ValueError(f"the count table references rows missing from the data set ({data.n_docs} rows)")
        if positions.size and (positions.min() < 1 or positions.max() >= 2**_POSITION_BITS):
            raise ValueError(f"the count table holds a position outside [1, 2**{_POSITION_BITS}) (positions are "
                             "1-based)")
        if np.any(clicks < 0) or np.any(clicks > impressions):
            raise ValueError("the count table holds negative clicks or more clicks than impressions")
        n_sessions = check_int(n_sessions, "n_sessions", min_value=0)
        table = (docs, positions, clicks, impressions)
        return cls._weighted(data, table, n_sessions, propensity)

    @classmethod
    def _from_click_weights(cls, data, table, n_sessions, item_docs, item_weights, model):
        """The aggregate of a session-dependent propensity: per-item weights (click / q) summed per row."""
        n = data.n_docs
        weights = np.bincount(item_docs, weights=item_weights, minlength=n)
        docs, _, clicks, _ = table
        counts = np.bincount(docs, weights=clicks, minlength=n).astype(np.int64)
        queries = np.unique(data.query_index[np.flatnonzero(weights)])
        return cls(data, weights, counts, queries, n_sessions, int(counts.sum()), table, model)

    @classmethod
    def _weighted(cls, data, table, n_sessions, propensity):
        docs, positions, clicks, impressions = table
        model = as_propensity_model(propensity)
        n = data.n_docs
        clicked = np.flatnonzero(clicks)
        if is_affine(model):
            # Trust bias (Vardasbi et al. 2020): sum over impressions of (click - beta_r) / alpha_r,
            # which needs the impressions too and may be negative.
            alpha, beta = affine_parts(model, positions)
            weights = np.bincount(docs, weights=(clicks - beta * impressions) / alpha, minlength=n)
        else:
            warn_if_extrapolated(model, int(positions[clicked].max(initial=0)))
            q = propensities_at(model, positions[clicked])
            weights = np.bincount(docs[clicked], weights=clicks[clicked] / q, minlength=n)
        counts = np.bincount(docs[clicked], weights=clicks[clicked], minlength=n).astype(np.int64)
        queries = np.unique(data.query_index[np.flatnonzero(weights)])
        return cls(data, weights, counts, queries, n_sessions, int(counts.sum()), table, model)

    def reweight(self, propensity) -> "ClickAggregate":
        """The same clicks weighted under another position-based propensity model.

        Parameters
        ----------
        propensity : None, float or propensity model
            The new examination model (``None``: ``eta = 1``; a number: its ``eta``).

        Returns
        -------
        ClickAggregate
            A new aggregate; this one is unchanged.
        """
        if self.table is None:
            raise ValueError("this aggregate has no (doc, position) count table: it cannot be re-weighted; "
                             "build it with ClickLog.aggregate or aggregate_clicks")
        return self._weighted(self.data, self.table, self.n_sessions, propensity)

    @property
    def n_impressions(self) -> int:
        """Number of shown documents (rows of the log) behind the aggregate."""
        return int(self.table[3].sum()) if self.table is not None else -1

    def equals(self, other: "ClickAggregate") -> bool:
        """Same data set, sessions, count table and weights (exactly).

        Parameters
        ----------
        other : ClickAggregate
            The aggregate to compare with.

        Returns
        -------
        bool
        """
        if not isinstance(other, ClickAggregate) or other.data is not self.data:
            return False
        same_table = (self.table is None) == (other.table is None) and (
            self.table is None or all(np.array_equal(a, b) for a, b in zip(self.table, other.table)))
        return (same_table and self.n_sessions == other.n_sessions and self.n_clicks == other.n_clicks
                and np.array_equal(self.weights, other.weights)
                and np.array_equal(self.click_counts, other.click_counts))

    # --------------------------------------------------------------- point estimates
    def _resolved(self, scores_or_ranker, propensity) -> "ClickAggregate":
        """This aggregate weighted under the propensity the log path would use (see :meth:`ips_value`)."""
        model, _ = resolve_propensity(propensity, scores_or_ranker, default=self.propensity)
        if self.propensity is not None and repr(model) == repr(self.propensity):
            return self
        return self.reweight(model)

    def _metric_sums(self, scores_or_ranker, metric, metric_params):
        data = self.data
        if hasattr(scores_or_ranker, "predict"):
            scores = predicted_scores(scores_or_ranker, data.X, data.n_docs)
        else:
            scores = np.asarray(scores_or_ranker, dtype=np.float64)
        if scores.shape != (data.n_docs,) or not np.all(np.isfinite(scores)):
            raise ValueError(f"scores must be finite, one per data-set row ({data.n_docs}), got shape {scores.shape}")
        clicked = np.flatnonzero(self.weights)
        ranks = rank_within_queries(scores, data.query_offsets)[clicked]
        m = metric_weight(metric, **metric_params)(ranks)
        return float(np.sum(self.weights[clicked] * m)), float(np.sum(self.weights[clicked]))

    def ips_value(self, scores_or_ranker, *, metric="dcg", propensity=None, **metric_params) -> float:
        """IPS point estimate ``(1/N) sum_d m(rank(d)) W_d``: equal to ``ips_estimate(log, ...).value``.

        The propensity is resolved as on the log
        (:func:`~counterfactual_ltr.examination.propensity_models.resolve_propensity`): an
        explicit ``propensity``, else the ranker's own when it is an estimator
        that carries one, else this aggregate's :attr:`propensity`; the weights
        are recomputed from the count table when it differs. No interval: its
        variance needs the sessions (within-session cross terms).

        Parameters
        ----------
        scores_or_ranker : array of shape (n_docs,) or object with ``predict``
            Scores of every data-set row, or a fitted ranker.
        metric : str or callable, default "dcg"
            The metric; see :func:`~counterfactual_ltr.metrics.metric_weight`.
        propensity : None, float or propensity model, default None
            Examination model of the log (a number: its ``eta``); ``None``: see above.
        **metric_params
            Parameters of the metric: ``k`` for ``"prec@k"``, ``p`` for ``"rbp"``.

        Returns
        -------
        float
        """
        if self.n_sessions == 0:
            raise ValueError("the aggregate has no sessions")
        agg = self._resolved(scores_or_ranker, propensity)
        return agg._metric_sums(scores_or_ranker, metric, metric_params)[0] / self.n_sessions

    def snips_value(self, scores_or_ranker, *, metric="dcg", propensity=None, **metric_params) -> float:
        """SNIPS point estimate ``sum_d m(rank(d)) W_d / sum_d W_d``: equal to ``snips_estimate(log, ...).value``.

        The propensity is resolved as in :meth:`ips_value`.

        Parameters
        ----------
        scores_or_ranker : array of shape (n_docs,) or object with ``predict``
            Scores of every data-set row, or a fitted ranker.
        metric : str or callable, default "dcg"
            The metric; see :func:`~counterfactual_ltr.metrics.metric_weight`.
        propensity : None, float or propensity model, default None
            Examination model of the log (a number: its ``eta``); ``None``: see :meth:`ips_value`.
        **metric_params
            Parameters of the metric: ``k`` for ``"prec@k"``, ``p`` for ``"rbp"``.

        Returns
        -------
        float
        """
        x, w = self._resolved(scores_or_ranker, propensity)._metric_sums(scores_or_ranker, metric, metric_params)
        if w == 0:
            raise ValueError("the aggregate has no clicks: SNIPS is undefined")
        return x / w


# ------------------------------------------------------------------------ streamed aggregation
def _count(rows: dict):
    """The count table of checked complete sessions."""
    return count_table(rows["doc"], rows["position"], rows["click"])


def _file_batches(path: str, batch_size: int):
    """``(frame, where)`` batches of one log file, verified (checksums, digest) and with the columns a log needs."""
    names = log_columns(path)
    missing = [c for c in FRAME_COLUMNS if c not in names]
    if missing:
        raise ValueError(f"{path}: the log lacks the columns {missing}")
    columns = list(FRAME_COLUMNS) + [c for c in SESSION_COLUMNS if c in names]
    for k, frame in enumerate(iter_log_batches(path, columns, batch_size)):
        yield frame, path if k == 0 else f"{path} (batch {k})"


def _bucket_count(files_or_parts, batch_size: int, data, where: str):
    """The rows streamed again, into temporary files by session (see :mod:`counterfactual_ltr.logs._log_stream`)."""
    rows = 0
    for item in files_or_parts:
        rows += _rows_in(item)
    return bucketed(_all_batches(files_or_parts, batch_size), data, _count, _merge_two,
                    n_buckets=max(1, -(-rows // batch_size)), where=where)


def _rows_in(item) -> int:
    if not isinstance(item, str):
        return len(item.compute()) if hasattr(item, "compute") else len(item)
    if log_kind(item) == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(item).metadata.num_rows
    return os.path.getsize(item) // 16          # CSV: a row takes at least ~16 bytes


def _all_batches(files_or_parts, batch_size):
    for k, item in enumerate(files_or_parts):
        if isinstance(item, str):
            yield from _file_batches(item, batch_size)
        else:                                   # a partition of a Dask DataFrame, computed here
            yield (item.compute() if hasattr(item, "compute") else item), f"partition {k}"


def aggregate_clicks(source, data: RankingDataset, propensity=None, *, engine: str = "pyarrow",
                     batch_size: int = 1 << 20, query: str | None = None, doc: str | None = None,
                     position: str | None = None, click: str | None = None, session: str | None = None,
                     missing: str | None = None, repeated: str | None = None) -> ClickAggregate:
    """Reduce a click log on disk (or a Dask DataFrame) to its :class:`ClickAggregate`, checking every session.

    The log is read as every log reader reads it (page checksums and content digest
    verified, see :mod:`counterfactual_ltr.logs.log_integrity`) and every session is checked as
    :meth:`ClickLog.from_frame` checks it (:mod:`counterfactual_ltr.logs.session_checks`):
    a duplicated session, positions that do not run ``1..n``, a row shown twice are errors
    naming the file, not clicks counted twice or weighted by the wrong position. Memory
    stays at about one batch (see :mod:`counterfactual_ltr.logs._log_stream`).

    Parameters
    ----------
    source : path, directory, glob, list of paths, or dask DataFrame
        Log files with the :meth:`ClickLog.to_frame` columns (``session``, ``qid``, ``doc``,
        ``position``, ``click``; ``logger`` and ``intervention`` if present): Parquet
        (``.parquet``, ``.pq``) or CSV (``.csv``, ``.csv.gz``, ...), the endings
        :func:`~counterfactual_ltr.logs.files.read_click_log` accepts. A directory is searched
        recursively; a file in it with another ending is an error (names starting with
        ``.`` or ``_`` are skipped).
    data : RankingDataset or DistributedDataset
        The data set whose rows ``doc`` refers to. A distributed data set
        (:meth:`RankingDataset.from_dask`) takes a Dask DataFrame or log files (no raw-log options)
        whose ``qid`` and ``doc`` hold its query and document ids; the result is then a
        :class:`~counterfactual_ltr.distributed.DistributedAggregate` (one aggregate per partition,
        on the workers).
    propensity : propensity model, eta, or None (eta = 1)
        Used for :attr:`ClickAggregate.weights`; :meth:`ClickAggregate.reweight` changes it later.
    engine : {"pyarrow", "dask"}
        ``"pyarrow"`` streams batches of ``batch_size`` rows, so memory is bounded by one
        batch plus the aggregate; ``"dask"`` runs one reduction per file (or per partition
        of a Dask DataFrame) on the active ``dask.distributed`` client (or Dask's default
        scheduler) and merges them in a tree. A log whose sessions' rows are not together
        is checked by one more pass on this machine.
    batch_size : int >= 1, default 2**20
        Rows read at a time from a file.
    query, doc, position, click, session : str, optional
        A raw log (one row per shown result, ids as a real log has them, see
        :meth:`ClickLog.from_events`): its column names. Giving any of these (or ``missing``)
        reads the log raw, the others taking their default names (``"query"``, ``"doc"``,
        ``"position"``, ``"click"``; no ``session``: pages are runs of consecutive rows across
        the files in order). Documents are joined to ``data`` by (query id, document id) as
        :meth:`ClickLog.with_data` joins them; positions may have gaps. With ``session`` a
        page's rows may be anywhere in the log (they are spread over temporary files of about
        ``batch_size`` rows by a hash of the page id); without it, memory stays at about one
        batch too. Ids must be of one kind per column across the files (strings, or integers).
    missing : {"raise", "drop_sessions", "drop_rows"}, optional
        Raw log only: shown documents without features in ``data``, as in
        :meth:`ClickLog.with_data` (default ``"raise"``, after the whole log is read, with the
        count of such (query, document) pairs; a dropping join warns once with the counts).
    repeated : {"drop_pages", "keep_first", "raise"}, optional
        Raw log only: pages that show a document twice, as in :meth:`ClickLog.with_data` (default
        ``"drop_pages"``; one warning for the whole log, and one for pages cut from runs that
        start by repeating a row, as :meth:`ClickLog.from_events` warns).

    Returns
    -------
    ClickAggregate
        Identical (exactly) to ``ClickLog.read_parquet(source, data).aggregate(propensity)``;
        for a raw log, to ``ClickLog.from_events(frame, ...).with_data(data, missing=...,
        repeated=...).aggregate(propensity)`` of the files' rows one after the other.
        ``n_sessions`` is the number of sessions (pages).

    Examples
    --------
    >>> import tempfile, os
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=20, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    >>> path = os.path.join(tempfile.mkdtemp(), "log.parquet")
    >>> log.to_parquet(path)
    >>> aggregate_clicks(path, data).equals(log.aggregate())
    True
    """
    raw = {"query": query, "doc": doc, "position": position, "click": click, "session": session}
    if getattr(data, "is_distributed", False):   # partitions on a cluster: reduced where they live
        return _distributed(source, data, propensity, engine, [missing, repeated, *raw.values()])
    if not isinstance(data, RankingDataset):
        raise TypeError(f"data must be a RankingDataset, got {type(data).__name__}")
    if engine not in ("pyarrow", "dask"):
        raise ValueError(f"engine must be 'pyarrow' or 'dask', got {engine!r}")
    batch_size = check_int(batch_size, "batch_size", min_value=1)
    if missing is not None or repeated is not None or any(v is not None for v in raw.values()):
        table, n_sessions = _raw_table(source, data, engine, batch_size, raw, missing or "raise",
                                       repeated or "drop_pages")
    elif engine == "dask":
        table, n_sessions = _dask_table(source, data, batch_size)
    else:
        if hasattr(source, "to_delayed"):
            raise ValueError("a Dask DataFrame needs engine='dask'")
        files = log_files(source)
        try:
            summary = summarise(_all_batches(files, batch_size), data, _count, _merge_two)
            edges, n_sessions = fold([summary], data, _count, _merge_two)
            table = _merge_tables([t for t in (summary.reduced, edges) if t is not None])
        except NotGrouped:
            table, n_sessions = _bucket_count(files, batch_size, data, _where(source))
    return ClickAggregate._weighted(data, table if table is not None else _merge_tables([]), n_sessions, propensity)


def _distributed(source, data, propensity, engine: str, raw_options: list):
    """``aggregate_clicks`` on a distributed data set: one aggregate per partition, on the workers."""
    if engine != "dask":
        raise ValueError("a distributed data set needs engine='dask'")
    if any(v is not None for v in raw_options):
        raise ValueError("the raw-log options (query, doc, ..., missing, repeated) are not supported on a "
                         "distributed data set")
    return data.aggregate(source, propensity, local=frame_aggregate, files=log_files, read=iter_log_batches)


def frame_aggregate(frame, data: RankingDataset, propensity, where: str) -> ClickAggregate:
    """The aggregate of a log held in one pandas frame (``doc``: rows of ``data``), every session checked.

    What one partition of a distributed data set runs on its share of the log (see
    :mod:`counterfactual_ltr.distributed`): the rows are grouped by session, then checked and
    counted as the streamed path does.

    Parameters
    ----------
    frame : pandas DataFrame
        The log's rows with the :meth:`ClickLog.to_frame` columns.
    data : RankingDataset
        The data set whose rows ``doc`` refers to.
    propensity : propensity model, eta, or None
        As in :func:`aggregate_clicks`.
    where : str
        Names the rows in error messages.

    Returns
    -------
    ClickAggregate

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> data = RankingDataset(np.eye(3), [1, 0, 1], [5, 5, 5])
    >>> frame = pd.DataFrame({"session": [1, 1], "qid": [5, 5], "doc": [2, 0], "position": [1, 2],
    ...                       "click": [1, 0]})
    >>> frame_aggregate(frame, data, None, "example").weights.tolist()
    [0.0, 0.0, 1.0]
    """
    frame = frame.sort_values("session", kind="stable")
    try:
        summary = summarise([(frame, where)], data, _count, _merge_two)
        edges, n_sessions = fold([summary], data, _count, _merge_two)
    except NotGrouped:
        # The rows are grouped here: a session the stream cannot check is a bad one; say which and why.
        from .session_checks import check_sessions, frame_arrays

        try:
            check_sessions(data, frame_arrays(frame.sort_values(["session", "position"], kind="stable")))
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        raise ValueError(f"{where}: a session's rows do not form one checked session") from None
    table = _merge_tables([t for t in (summary.reduced, edges) if t is not None])
    return ClickAggregate._weighted(data, table if table is not None else _merge_tables([]), n_sessions, propensity)


def _raw_table(source, data, engine: str, batch_size: int, raw: dict, missing: str, repeated: str):
    """The count table and page count of a raw log (see :mod:`counterfactual_ltr.logs._raw_stream`)."""
    from functools import partial

    from ._raw_stream import dask_counts, relocate, stream_counts
    from .raw_events import RepeatedDocumentWarning, RepeatedRowWarning, check_id_types, missing_features_error, phantom_message, \
        repeated_message, warn_dropped

    if missing not in ("raise", "drop_sessions", "drop_rows"):
        raise ValueError(f"missing must be 'raise', 'drop_sessions' or 'drop_rows', got {missing!r}")
    if repeated not in ("drop_pages", "keep_first", "raise"):
        raise ValueError(f"repeated must be 'drop_pages', 'keep_first' or 'raise', got {repeated!r}")
    names = {role: raw[role] or role for role in ("query", "doc", "position", "click")} | {"session": raw["session"]}
    for role, name in names.items():
        if name is not None and not isinstance(name, str):
            raise TypeError(f"{role} must be a column name (str), got {type(name).__name__}")
    is_frame = hasattr(source, "to_delayed")
    if is_frame and engine != "dask":
        raise ValueError("a Dask DataFrame needs engine='dask'")
    items = list(source.to_delayed()) if is_frame else log_files(source)
    sources = [f"partition {k}" for k in range(len(items))] if is_frame else items
    for item in ([] if is_frame else items):     # every file's columns, before anything is read
        _check_raw_columns(log_columns(item), names, item)
    read = partial(_raw_pieces, names=names, batch_size=batch_size)
    try:
        if engine == "dask":
            counts = dask_counts(items, data, names, missing, read, repeated)
        else:
            counts = stream_counts((p for k, f in enumerate(items) for p in read(f, k)), data, names, missing,
                                   n_rows=sum(_rows_in(f) for f in items), batch_size=batch_size, repeated=repeated)
    except ValueError as err:
        raise relocate(err, sources) from None
    if counts.phantoms:
        warnings.warn(phantom_message(counts.phantoms, relocate(counts.phantom_example, sources)), RepeatedRowWarning,
                      stacklevel=3)
    if counts.repeated_pages:
        named = [relocate(name, sources) for name in counts.repeated_named]
        if counts.n_sessions == 0:
            raise ValueError(f"every page shows a document twice ({', '.join(named)}, ...): nothing is left to "
                             "count; use repeated='keep_first'")
        warnings.warn(repeated_message(counts.repeated_pages, counts.n_pages, named, repeated, counts.repeated_rows),
                      RepeatedDocumentWarning, stacklevel=3)
    if counts.unknown is not None:
        check_id_types((counts.unknown["query"].to_numpy(), counts.unknown["doc"].to_numpy()), data)
        raise missing_features_error(len(counts.unknown), counts.unknown["query"].to_numpy()[:3],
                                     counts.unknown["doc"].to_numpy()[:3])
    if counts.dropped_rows:
        warn_dropped(missing, counts.dropped_rows, counts.dropped_pages, counts.n_rows, counts.n_pages, stacklevel=4)
    return (counts.table if counts.table is not None else _merge_tables([])), counts.n_sessions


def _check_raw_columns(columns, names: dict, where: str) -> None:
    missing = [f"{n!r} (the {role} column)" for role, n in names.items() if n is not None and n not in columns]
    if missing:
        raise ValueError(f"{where}: the raw log lacks the column {', '.join(missing)}; it has {list(columns)}")


def _raw_pieces(item, k: int, *, names: dict, batch_size: int):
    """The pieces of file (or computed partition) ``k`` of a raw log."""
    from ._raw_stream import piece_of

    wanted = [n for n in names.values() if n is not None]
    if not isinstance(item, str):
        _check_raw_columns(list(item.columns), names, f"partition {k}")
        yield piece_of(item, names, k, 0)
        return
    first = 0
    ids = [names[role] for role in ("query", "doc", "session") if names.get(role) is not None]
    for frame in iter_log_batches(item, list(dict.fromkeys(wanted)), batch_size, ids=ids):
        yield piece_of(frame, names, k, first)
        first += len(frame)


def _where(source) -> str:
    if isinstance(source, (list, tuple)):
        return f"the log files {', '.join(map(str, source[:3]))}{', ...' if len(source) > 3 else ''}"
    return f"the log {os.fspath(source)}" if not hasattr(source, "to_delayed") else "the Dask DataFrame"


def _summary_task(item, k, data, batch_size):
    """One file or partition: its summary, with its table kept apart (merged in a tree)."""
    batches = _file_batches(item, batch_size) if isinstance(item, str) else [(item, f"partition {k}")]
    return summarise(batches, data, _count, _merge_two)


def _dask_table(source, data, batch_size):
    try:
        import dask
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("engine='dask' needs Dask: pip install 'counterfactual-ltr[dask]'") from err
    data_ref = dask.delayed(data, pure=True)
    if hasattr(source, "to_delayed"):   # a Dask DataFrame: one reduction per partition
        items = list(source.to_delayed())
    else:                               # files: each task streams one file as the pyarrow engine does
        items = log_files(source)
        for f in items:  # the same clear errors as the pyarrow path, before any task runs
            missing = [c for c in FRAME_COLUMNS if c not in log_columns(f)]
            if missing:
                raise ValueError(f"{f}: the log lacks the columns {missing}")
    summaries = [dask.delayed(_summary_task)(item, k, data_ref, batch_size) for k, item in enumerate(items)]
    # Tables merge in a tree (memory per task stays at a few tables); the summaries' edges (a few
    # rows and id ranges each) come back here to be joined in order.
    tables = [dask.delayed(_reduced)(s) for s in summaries]
    while len(tables) > 1:
        tables = [dask.delayed(_merge_two)(tables[k], tables[k + 1]) if k + 1 < len(tables) else tables[k]
                  for k in range(0, len(tables), 2)]
    if not tables:
        return _merge_tables([]), 0
    edges = [dask.delayed(_edges)(s) for s in summaries]
    try:
        table, edges = dask.compute(tables[0], edges)
        extra, n_sessions = fold(edges, data, _count, _merge_two)
    except NotGrouped:
        return _bucket_count(items, batch_size, data, _where(source))
    return _merge_tables([t for t in (table, extra) if t is not None]), n_sessions


def _reduced(summary):
    return summary.reduced


def _edges(summary):
    """The summary without its table: what :func:`~counterfactual_ltr.logs._log_stream.fold` needs."""
    return Summary(None, summary.ranges, summary.n_sessions, summary.head, summary.tail)
