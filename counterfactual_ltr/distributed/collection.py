"""Features and clicks partitioned by query on a Dask cluster, kept on the workers.

:func:`from_dask` turns a Dask DataFrame of a feature table into a :class:`DistributedDataset`:
one :class:`Partition` (a :class:`~counterfactual_ltr.datasets.RankingDataset` of whole queries,
with the original query and document ids) per Dask partition, held by the workers as futures
computed from the frame's graph, so a lost worker's partitions are recomputed from their source.

Query boundaries: by default the rows are shuffled by query id (``frame.shuffle(on=query)``), so
every query ends up whole in one partition wherever its rows were read (a query split across
input files is joined). With ``shuffle=False`` the input's partitions are kept as they are, and a
query found in two partitions is a ``ValueError`` naming it. Inside a partition the rows are
sorted by (query id, document id); a pair given twice is an error.

:meth:`DistributedDataset.aggregate` routes a click log (a Dask DataFrame whose ``qid`` and
``doc`` hold the data set's ids) to the partitions of its queries and reduces it there to one
:class:`~counterfactual_ltr.logs.aggregate.ClickAggregate` per partition (every session checked as
every log path checks it): a :class:`DistributedAggregate`. Its IPS and SNIPS estimates are sums
of per-partition sums; indexing it by partition positions (what scikit-learn's splitters do)
gives the aggregate of those partitions, with the same futures.

This module stands below the data set and the aggregate in the import order: it works on the
objects it is handed (the data-set class, the per-partition aggregation function) and calls
their methods on the workers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DistributedDataset", "DistributedAggregate"]


@dataclass
class Partition:
    """The rows of whole queries: ``data`` (query codes ``0..n_queries-1``) and the original ids.

    Parameters
    ----------
    data : RankingDataset
        The partition's rows, sorted by query id then document id.
    query_ids : array (n_queries,)
        The id of every query, as given.
    doc_ids : array (n_docs,)
        The id of every row, as given.
    """

    data: object               # RankingDataset
    query_ids: np.ndarray      # (n_queries,) the id of every query, as given
    doc_ids: np.ndarray        # (n_docs,) the id of every row, as given


def default_client(client=None):
    """``client``, else the active ``dask.distributed`` client (``ValueError`` if there is none).

    Parameters
    ----------
    client : dask.distributed.Client or None
        The client to use.

    Returns
    -------
    dask.distributed.Client
    """
    if client is not None:
        return client
    try:
        from distributed import default_client as active
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("distributed data sets need Dask: pip install 'counterfactual-ltr[dask]'") from err
    try:
        return active()
    except ValueError:
        raise ValueError("no dask.distributed Client is active: create one (Client(...)) or pass client=") from None


def from_dask(cls, frame, *, query, doc, features, label=None, sparse=False, shuffle=True, npartitions=None,
              client=None):
    """A :class:`DistributedDataset` of ``frame`` (see :meth:`RankingDataset.from_dask`, which calls this).

    Parameters
    ----------
    cls : type
        The data-set class of the partitions (:class:`~counterfactual_ltr.datasets.RankingDataset`).
    frame, query, doc, features, label, sparse, shuffle, npartitions, client
        As in :meth:`RankingDataset.from_dask`.

    Returns
    -------
    DistributedDataset
    """
    if not hasattr(frame, "to_delayed"):
        raise TypeError(f"frame must be a Dask DataFrame, got {type(frame).__name__}")
    features = [features] if isinstance(features, str) else list(features)
    if not features:
        raise ValueError("features names no column")
    needed = [query, doc] + features + ([label] if label is not None else [])
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"the frame lacks the columns {missing} (it has {list(frame.columns)})")
    client = default_client(client)
    frame = frame.map_partitions(_columns_of, needed, meta=frame._meta[needed])
    if shuffle:
        frame = frame.shuffle(on=query, npartitions=npartitions or frame.npartitions)
    import dask

    build = dask.delayed(_build_partition, pure=True)
    tasks = [build(part, k, cls, query, doc, features, label, sparse) for k, part in enumerate(frame.to_delayed())]
    futures = client.compute(tasks)
    try:
        shapes = client.gather(client.map(_shape, futures, pure=False))
    except RuntimeError as err:     # Dask's shuffle wraps a partition's error
        if isinstance(err.__cause__, ValueError) and "partition of the frame" in str(err.__cause__):
            raise ValueError(str(err.__cause__)) from None
        raise
    keep = [k for k, shape in enumerate(shapes) if shape[0] > 0]
    if not keep:
        raise ValueError("the frame has no rows")
    futures = [futures[k] for k in keep]
    # Only the query ids meet on one worker (never the features).
    split = client.submit(_first_split_query, [client.submit(_query_ids, f, pure=False) for f in futures]).result()
    if split is not None:
        qid, a, b = split
        raise ValueError(f"query {_plain(qid)!r} has rows in partitions {keep[a]} and {keep[b]} of the frame: a query "
                         "must be whole in one partition (use shuffle=True to join it)")
    return DistributedDataset(client, futures, [shapes[k] for k in keep], features, sparse)


def _columns_of(pdf, needed):
    """The needed columns of one partition; a ValueError naming those it lacks (files with other columns)."""
    missing = [c for c in needed if c not in pdf.columns]
    if missing:
        raise ValueError(f"a partition of the frame lacks the columns {missing} (it has {list(pdf.columns)}; the "
                         "frame takes its columns from its first partition: files with different columns?)")
    return pdf[needed]


def _check_ids(column, name, k):
    """Ids as ``RankingDataset.from_frame`` takes them: integers or strings, one kind per column."""
    import pandas as pd

    dtype = column.dtype
    if pd.api.types.is_integer_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
        return
    if dtype != object and pd.api.types.is_string_dtype(dtype):
        return
    if dtype != object:
        raise ValueError(f"partition {k}: column {name!r} must hold ids (strings or integers), got dtype {dtype}")
    values = column.to_numpy(dtype=object)
    is_str = np.fromiter((type(v) is str for v in values), dtype=bool, count=len(values))
    is_int = np.fromiter((isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in values),
                         dtype=bool, count=len(values))
    if is_str.all() or is_int.all():
        return
    bad = ~is_str if is_str.any() else ~is_int
    i = int(np.argmax(bad))
    what = "mixes strings with other values" if is_str.any() else "must hold ids (strings or integers)"
    raise ValueError(f"partition {k}: column {name!r} {what} (row {i} of the partition holds {values[i]!r} of type "
                     f"{type(values[i]).__name__}); ids are strings or integers, one kind per column")


def _feature_values(pdf, features, k):
    """The feature columns as float64; a ValueError naming the column, the partition and the value otherwise."""
    import pandas as pd

    try:
        return pdf[features].to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        pass
    for name in features:
        column = pdf[name]
        numbers = pd.to_numeric(column, errors="coerce")
        bad = (numbers.isna() & column.notna()).to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"partition {k}: feature column {name!r} holds {column.iloc[i]!r} (row {i} of the "
                             "partition), not a number")
    raise ValueError(f"partition {k}: the feature columns {features} do not convert to numbers")


def _build_partition(pdf, k, cls, query, doc, features, label, sparse):
    """One Dask partition as a :class:`Partition` (rows sorted by query id, then document id)."""
    import pandas as pd

    if len(pdf) == 0:
        return None
    for name in (query, doc):
        if pdf[name].isna().any():
            row = int(np.flatnonzero(pdf[name].isna().to_numpy())[0])
            raise ValueError(f"partition {k}: column {name!r} has a missing value (row {row} of the partition)")
    for name in (query, doc):
        _check_ids(pdf[name], name, k)
    pdf = pdf.sort_values([query, doc], kind="stable")
    repeated = pdf.duplicated([query, doc]).to_numpy()
    if repeated.any():
        at = int(np.flatnonzero(repeated)[0])
        raise ValueError(f"partition {k}: (query {_plain(pdf[query].iloc[at])!r}, document "
                         f"{_plain(pdf[doc].iloc[at])!r}) appears twice")
    codes, _ = pd.factorize(pdf[query], sort=False)
    values = _feature_values(pdf, features, k)
    if sparse:
        import scipy.sparse as sp

        values = sp.csr_matrix(values)
    y = pdf[label].to_numpy() if label is not None else np.zeros(len(pdf), dtype=np.int64)
    data = cls(values, y, codes, name=f"partition {k}")
    starts = data.query_offsets[:-1]
    return Partition(data, pdf[query].to_numpy()[starts], pdf[doc].to_numpy())


def _plain(value):
    """An id as Python shows it in messages (``1``, ``'q1'``, not ``np.int64(1)``)."""
    return value.item() if isinstance(value, np.generic) else value


def _shape(part):
    if part is None:
        return (0, 0, 0)
    return (part.data.n_docs, part.data.n_queries, part.data.n_features)


def _query_ids(part):
    return part.query_ids


def _first_split_query(query_ids):
    """``(query id, a, b)`` of a query found in partitions ``a`` and ``b``, or None."""
    import pandas as pd

    ids = pd.Series(np.concatenate(query_ids))
    owner = np.repeat(np.arange(len(query_ids)), [q.size for q in query_ids])
    repeated = ids.duplicated(keep=False).to_numpy()
    if not repeated.any():
        return None
    first = ids[repeated].iloc[0]
    where = owner[(ids == first).to_numpy()]
    return first, int(where[0]), int(where[1])


class DistributedDataset:
    """A ranking data set whose partitions (whole queries each) live on Dask workers.

    Built by :meth:`RankingDataset.from_dask`. Products with the features run where the
    partitions are; only vectors of length ``n_features`` and scalars come back. Indexing by
    partition positions (``data[[0, 2]]``, what scikit-learn's splitters do) gives the data set of
    those partitions, with the same futures.

    Parameters
    ----------
    client : dask.distributed.Client
        The client whose workers hold the partitions.
    parts : list of Future
        One :class:`Partition` per future (no empty partition).
    shapes : list of (n_docs, n_queries, n_features)
        The partitions' sizes.
    features : list of str
        The feature columns, in order.
    sparse : bool
        Whether the partitions hold CSR features.

    Examples
    --------
    >>> import pandas as pd, dask.dataframe as dd
    >>> from dask.distributed import Client
    >>> from counterfactual_ltr import RankingDataset
    >>> client = Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None)
    >>> table = pd.DataFrame({"query": ["a", "b", "a", "b"], "doc": [1, 1, 2, 3], "f": [0.5, 2.0, 1.0, 0.0],
    ...                       "label": [1, 0, 0, 1]})
    >>> data = RankingDataset.from_dask(dd.from_pandas(table, npartitions=2), query="query", doc="doc",
    ...                                 features=["f"], label="label")
    >>> data.n_docs, data.n_queries, data.n_features
    (4, 2, 1)
    >>> from counterfactual_ltr.estimators import RankSVM
    >>> model = RankSVM(C=1.0).fit(data)             # products with the features on the workers
    >>> bool(model.converged_), model.predict(data).shape
    (True, (4,))
    >>> client.close()
    """

    is_distributed = True

    def __init__(self, client, parts, shapes, features, sparse):
        self.client, self.parts, self.features, self.is_sparse = client, list(parts), list(features), bool(sparse)
        self.shapes = [tuple(int(v) for v in s) for s in shapes]
        widths = {s[2] for s in self.shapes}
        if len(widths) > 1:
            raise ValueError(f"the partitions have different numbers of features: {sorted(widths)}")

    @property
    def n_docs(self) -> int:
        return sum(s[0] for s in self.shapes)

    @property
    def n_queries(self) -> int:
        return sum(s[1] for s in self.shapes)

    @property
    def feature_names(self) -> list:
        """The feature columns' names (the frame's ``features``), as :attr:`RankingDataset.feature_names`."""
        return list(self.features)

    @property
    def n_features(self) -> int:
        return self.shapes[0][2]

    @property
    def n_partitions(self) -> int:
        return len(self.parts)

    @property
    def shape(self) -> tuple:
        """``(n_partitions,)``: scikit-learn's splitters index the partitions."""
        return (self.n_partitions,)

    def __len__(self) -> int:
        return self.n_partitions

    def __getitem__(self, index) -> "DistributedDataset":
        keep = _positions(index, self.n_partitions)
        return DistributedDataset(self.client, [self.parts[k] for k in keep], [self.shapes[k] for k in keep],
                                  self.features, self.is_sparse)

    def __repr__(self) -> str:
        return (f"DistributedDataset(n_docs={self.n_docs}, n_queries={self.n_queries}, n_features={self.n_features}, "
                f"n_partitions={self.n_partitions}{', sparse' if self.is_sparse else ''})")

    def map(self, func, *args, others=(), **kwargs):
        """Futures of ``func(partition, *other[k], *args, **kwargs)`` per partition.

        Parameters
        ----------
        func : callable
            Run on the worker of each partition.
        *args
            Further arguments, the same for every partition.
        others : sequence of lists of Future
            Per-partition arguments, after the partition.
        **kwargs
            Keyword arguments of ``func``.

        Returns
        -------
        list of Future
        """
        columns = [self.parts] + [list(o) for o in others]
        return [self.client.submit(func, *row, *args, pure=False, **kwargs) for row in zip(*columns)]

    def gather(self, futures):
        """The results of ``futures`` on this machine.

        Parameters
        ----------
        futures : list of Future
            E.g. from :meth:`map`.

        Returns
        -------
        list
        """
        return self.client.gather(futures)

    def predict(self, ranker):
        """Scores of every row (a dask array, partition after partition), computed on the workers.

        Parameters
        ----------
        ranker : object with ``predict``
            Scores a partition's feature matrix.

        Returns
        -------
        dask.array.Array (n_docs,)
        """
        import dask.array as da

        blocks = [da.from_delayed(f, shape=(s[0],), dtype=np.float64)
                  for f, s in zip(self.map(_scores, ranker), self.shapes)]
        return da.concatenate(blocks)

    def to_dataset(self):
        """The partitions gathered into one in-memory data set with ``query_ids``/``doc_ids`` arrays (small data).

        Returns ``(data, query_ids, doc_ids)``; rows in partition order.
        """
        import scipy.sparse as sp

        parts = self.client.gather(self.parts)
        cls = type(parts[0].data)
        X = (sp.vstack if self.is_sparse else np.vstack)([p.data.X for p in parts])
        offsets = np.cumsum([0] + [p.data.n_queries for p in parts[:-1]])
        qid = np.concatenate([p.data.qid + o for p, o in zip(parts, offsets)])
        data = cls(X, np.concatenate([p.data.y for p in parts]), qid)
        return data, np.concatenate([p.query_ids for p in parts]), np.concatenate([p.doc_ids for p in parts])

    def aggregate(self, log, propensity=None, *, local, files=None, read=None):
        """The click log reduced per partition: a :class:`DistributedAggregate`.

        Use ``aggregate_clicks(log, data, engine="dask")``, which calls this.

        Parameters
        ----------
        log : dask DataFrame, or log files
            The :meth:`ClickLog.to_frame` columns, ``qid`` and ``doc`` holding this data set's
            query and document ids. Each log partition (or file, read and verified on a worker)
            is cut by the data-set partition of its queries; the pieces meet on the workers of
            those partitions. A session id found in two data-set partitions (a session shows
            one query) is a ``ValueError``, as the in-memory checks refuse it.
        propensity : propensity model, eta, or None
            As in :func:`~counterfactual_ltr.logs.aggregate.aggregate_clicks`.
        local : callable
            ``local(frame, data, propensity, where)``: one partition's rows (local row numbers)
            reduced to its ClickAggregate (:func:`~counterfactual_ltr.logs.aggregate.frame_aggregate`).
        files : callable, optional
            ``source -> list of paths`` (:func:`~counterfactual_ltr.logs.log_integrity.log_files`),
            for a log given as files.
        read : callable, optional
            ``(path, columns, batch_size) -> frames``
            (:func:`~counterfactual_ltr.logs.log_integrity.iter_log_batches`), run on the workers.

        Returns
        -------
        DistributedAggregate
        """
        import dask

        if hasattr(log, "to_delayed"):
            missing = [c for c in _LOG_COLUMNS if c not in log.columns]
            if missing:
                raise ValueError(f"the log lacks the columns {missing}")
            sources = log.to_delayed()
            names = [f"log partition {k}" for k in range(len(sources))]
        elif files is not None and read is not None:
            names = files(log)
            sources = [dask.delayed(_read_file, pure=True)(path, read) for path in names]
        else:
            raise ValueError("a distributed data set aggregates a Dask DataFrame of the log or log files")
        directory = self.client.submit(_directory, [self.client.submit(_query_ids, f, pure=False)
                                                    for f in self.parts], pure=False)
        split = dask.delayed(_split_log, pure=True)
        pieces = self.client.compute([split(piece, directory, self.n_partitions, where)
                                      for piece, where in zip(sources, names)])
        # Each data-set partition fetches only its own piece of every log partition.
        mine = [[self.client.submit(_piece, cut, p, pure=False) for cut in pieces] for p in range(self.n_partitions)]
        aggs = [self.client.submit(_aggregate_partition, part, p, mine[p], local, propensity, pure=False)
                for p, part in enumerate(self.parts)]
        # Only session and query ids meet on one worker (as the query ids did for the routing).
        self.client.submit(_one_partition_per_session, [self.client.submit(_session_queries, m, pure=False)
                                                         for m in mine], pure=False).result()
        counts = self.client.gather(self.client.map(_counts, aggs, pure=False))
        return DistributedAggregate(self, aggs, [c[0] for c in counts], [c[1] for c in counts], propensity)


_LOG_COLUMNS = ("session", "qid", "doc", "position", "click")


def _read_file(path, read):
    """A log file, read and verified on a worker (its session, query, document, position and click columns)."""
    import pandas as pd

    return pd.concat(list(read(path, list(_LOG_COLUMNS), None)), ignore_index=True)


def _session_queries(pieces):
    """The distinct ``(session, qid)`` of a data-set partition's log rows."""
    import pandas as pd

    return pd.concat([piece[["session", "qid"]] for piece in pieces], ignore_index=True).drop_duplicates("session")


def _one_partition_per_session(frames):
    """``ValueError`` naming a session whose rows route to two data-set partitions (two queries)."""
    import pandas as pd

    both = pd.concat([f.assign(partition=p) for p, f in enumerate(frames)], ignore_index=True)
    twice = both[both["session"].duplicated(keep=False)]
    if len(twice):
        first = twice[twice["session"] == twice["session"].iloc[0]].iloc[:2]
        raise ValueError(f"session {_plain(first['session'].iloc[0])!r} shows query {_plain(first['qid'].iloc[0])!r} "
                         f"and query {_plain(first['qid'].iloc[1])!r} (data-set partitions "
                         f"{first['partition'].iloc[0]} and {first['partition'].iloc[1]}): a session shows one query")


def _positions(index, n) -> np.ndarray:
    keep = np.arange(n)[index]
    keep = np.atleast_1d(keep)
    if keep.size == 0:
        raise ValueError("no partition selected")
    return keep


def _scores(part, ranker):
    return np.asarray(ranker.predict(part.data.X), dtype=np.float64)


def _directory(query_ids):
    """Query id -> partition position, for routing the log."""
    import pandas as pd

    ids = np.concatenate(query_ids)
    owner = np.repeat(np.arange(len(query_ids)), [q.size for q in query_ids])
    return pd.Series(owner, index=pd.Index(ids))


def _split_log(piece, directory, n_parts, where):
    """One log partition (``where``) cut by the data-set partition of its queries: a list of ``n_parts`` frames."""
    owner = directory.reindex(piece["qid"].to_numpy()).to_numpy()
    unknown = np.isnan(owner) if owner.dtype.kind == "f" else np.zeros(owner.shape, bool)
    if unknown.any():
        raise ValueError(f"{where}: query {_plain(piece['qid'].iloc[int(np.flatnonzero(unknown)[0])])!r} is not in "
                         "the data set")
    owner = owner.astype(np.int64)
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(n_parts + 1))
    return [piece.iloc[order[bounds[p]:bounds[p + 1]]] for p in range(n_parts)]


def _aggregate_partition(part, p, pieces, local, propensity):
    """The log's rows of partition ``p`` translated to local rows, reduced by ``local``."""
    import pandas as pd

    frame = pd.concat(pieces, ignore_index=True)
    keys = pd.MultiIndex.from_arrays([part.query_ids[part.data.qid], part.doc_ids])
    rows = keys.get_indexer(pd.MultiIndex.from_arrays([frame["qid"].to_numpy(), frame["doc"].to_numpy()]))
    if (rows < 0).any():
        at = {c: _plain(frame[c].iloc[int(np.flatnonzero(rows < 0)[0])]) for c in ("qid", "doc", "session")}
        raise ValueError(f"the log shows (query {at['qid']!r}, document {at['doc']!r}) (session {at['session']!r}), "
                         "which is not in the data set")
    frame = frame.assign(doc=rows, qid=part.data.qid[rows])
    return local(frame, part.data, propensity, f"the log rows of data-set partition {p}")


def _piece(cut, p):
    return cut[p]


def _counts(agg):
    return agg.n_sessions, agg.n_clicks


def _reweighted(agg, propensity):
    return agg.reweight(propensity)


def _metric_sums(agg, ranker, metric, propensity, metric_params):
    """The partition's ``(sum W m(rank), sum W)`` under the propensity the in-memory estimate would use."""
    return agg._resolved(ranker, propensity)._metric_sums(ranker, metric, metric_params)


class DistributedAggregate:
    """Clicks summed per row of a :class:`DistributedDataset`, one ClickAggregate per partition on the workers.

    Parameters
    ----------
    dataset : DistributedDataset
        The partitions the aggregates refer to.
    parts : list of Future
        One :class:`~counterfactual_ltr.logs.aggregate.ClickAggregate` per partition.
    n_sessions, n_clicks : list of int
        Per partition.
    propensity : propensity model or None
        The model the weights were computed under.

    Examples
    --------
    >>> import numpy as np, pandas as pd, dask.dataframe as dd
    >>> from dask.distributed import Client
    >>> from counterfactual_ltr import RankingDataset, aggregate_clicks
    >>> client = Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None)
    >>> table = pd.DataFrame({"query": ["a", "a", "b", "b"], "doc": ["x", "y", "x", "z"], "f": [1.0, 0.0, 0.0, 1.0]})
    >>> data = RankingDataset.from_dask(dd.from_pandas(table, npartitions=2), query="query", doc="doc",
    ...                                 features=["f"])
    >>> log = pd.DataFrame({"session": [1, 1, 2, 2], "qid": ["a", "a", "b", "b"], "doc": ["y", "x", "x", "z"],
    ...                     "position": [1, 2, 1, 2], "click": [0, 1, 0, 1]})
    >>> agg = aggregate_clicks(dd.from_pandas(log, npartitions=1), data, engine="dask")
    >>> agg.n_sessions, agg.n_clicks
    (2, 2)
    >>> class ByFeature:
    ...     def predict(self, X): return X[:, 0]
    >>> agg.snips_value(ByFeature(), metric="dcg")    # both clicked documents ranked first
    1.0
    >>> client.close()
    """

    is_distributed = True

    def __init__(self, dataset, parts, n_sessions, n_clicks, propensity):
        self.dataset, self.parts = dataset, list(parts)
        self.partition_sessions, self.partition_clicks = list(n_sessions), list(n_clicks)
        self.propensity = propensity

    @property
    def n_sessions(self) -> int:
        return int(sum(self.partition_sessions))

    @property
    def n_clicks(self) -> int:
        return int(sum(self.partition_clicks))

    @property
    def client(self):
        return self.dataset.client

    @property
    def shape(self) -> tuple:
        """``(n_partitions,)``: scikit-learn's splitters (e.g. ``KFold``) split by partitions."""
        return (len(self.parts),)

    def __len__(self) -> int:
        return len(self.parts)

    def __getitem__(self, index) -> "DistributedAggregate":
        keep = _positions(index, len(self.parts))
        return DistributedAggregate(self.dataset[keep], [self.parts[k] for k in keep],
                                    [self.partition_sessions[k] for k in keep],
                                    [self.partition_clicks[k] for k in keep], self.propensity)

    def __repr__(self) -> str:
        return (f"DistributedAggregate(n_sessions={self.n_sessions}, n_clicks={self.n_clicks}, "
                f"n_partitions={len(self.parts)})")

    def reweight(self, propensity) -> "DistributedAggregate":
        """The same clicks weighted under another position-based propensity model (on the workers).

        Parameters
        ----------
        propensity : None, float or propensity model
            The new examination model.

        Returns
        -------
        DistributedAggregate
        """
        parts = [self.client.submit(_reweighted, a, propensity, pure=False) for a in self.parts]
        return DistributedAggregate(self.dataset, parts, self.partition_sessions, self.partition_clicks, propensity)

    def _sums(self, ranker, metric, propensity, metric_params):
        sums = self.client.gather([self.client.submit(_metric_sums, a, ranker, metric, propensity, metric_params,
                                                      pure=False) for a in self.parts])
        return float(sum(s[0] for s in sums)), float(sum(s[1] for s in sums))

    def ips_value(self, ranker, *, metric="dcg", propensity=None, **metric_params) -> float:
        """IPS point estimate ``(1/N) sum_d m(rank(d)) W_d``, summed over the partitions.

        Parameters
        ----------
        ranker : object with ``predict``
            Scores each partition's rows on its worker.
        metric : str, default "dcg"
            The metric of the clicked documents' ranks.
        propensity : propensity model, optional
            Resolved as in :meth:`ClickAggregate.ips_value`.
        **metric_params
            Parameters of the metric.

        Returns
        -------
        float
        """
        return self._sums(ranker, metric, propensity, metric_params)[0] / self.n_sessions

    def snips_value(self, ranker, *, metric="dcg", propensity=None, **metric_params) -> float:
        """SNIPS point estimate ``sum_d m(rank(d)) W_d / sum_d W_d``, summed over the partitions.

        Parameters
        ----------
        ranker : object with ``predict``
            Scores each partition's rows on its worker.
        metric : str, default "dcg"
            The metric of the clicked documents' ranks.
        propensity : propensity model, optional
            Resolved as in :meth:`ClickAggregate.snips_value`.
        **metric_params
            Parameters of the metric.

        Returns
        -------
        float
        """
        x, w = self._sums(ranker, metric, propensity, metric_params)
        if w == 0:
            raise ValueError("the aggregate has no clicks: SNIPS is undefined")
        return x / w
