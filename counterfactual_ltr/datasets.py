"""Ranking data sets: feature rows grouped into queries.

:class:`RankingDataset` is the one container every part of the toolkit
shares. Click logs refer to its rows instead of copying features, so the
same data set can carry millions of logged sessions.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._docs import fill_doc
from ._segments import query_runs, segment_gather, segment_ids
from ._validation import check_real

# The Parameters section of the methods taking queries: a ``{name}`` line is filled from it at import.
_doc = fill_doc({
    "queries": "Parameters\n----------\nqueries : array of int or bool\n"
               "    Query indices (0 .. n_queries - 1), or a mask over the queries.",
})

__all__ = ["RankingDataset", "binarize", "dense_features", "checked_csr", "DEFAULT_RELEVANCE_THRESHOLD"]

#: Graded labels >= this value count as relevant when binarising. LETOR 4.0
#: (MQ2007/MQ2008) grades documents 0, 1, 2; Joachims et al. (2017) and
#: Agarwal et al. (2019) treat every document with a positive grade as
#: relevant.
DEFAULT_RELEVANCE_THRESHOLD = 1


class RankingDataset:
    """Documents of many queries with graded relevance labels.

    Parameters
    ----------
    X : array or scipy.sparse matrix of shape (n_docs, n_features)
        Features, one row per (query, document). Sparse input stays sparse
        (a float64 CSR matrix: rows are gathered, ``X @ w`` is a sparse
        product, and the SVMs solve on it without densifying); dense input
        is a C-contiguous float64 array.
    y : array of shape (n_docs,)
        Graded relevance labels: non-negative integers.
    qid : array of shape (n_docs,)
        Query id of every row. The rows of one query must be contiguous; the
        order of the queries is kept as given.
    name : str, optional
        A name shown in the ``repr`` (e.g. the file it was read from).
    feature_names : list of str, optional
        The name of every feature column, in column order (``from_frame`` sets the feature
        table's column names). A ranker fitted on the data set keeps them as
        ``feature_names_in_``, so that an export names the features as the table did.

    Attributes
    ----------
    X, y, qid : arrays as above (``X`` float64, dense or CSR; ``y`` int64, ``qid`` int64)
    feature_names : list of str or None
        As above; None when the columns have no names (LETOR files number them).
    query_offsets : array of shape (n_queries + 1,)
        Rows of query ``q`` are ``query_offsets[q]:query_offsets[q + 1]``.
    query_ids : array of shape (n_queries,)
        The query id of each query, in data-set order.

    Examples
    --------
    >>> import numpy as np
    >>> data = RankingDataset(np.eye(3), [2, 0, 1], [7, 7, 9])
    >>> data.n_queries, data.query_offsets.tolist(), data.relevance().tolist()
    (2, [0, 2, 3], [1, 0, 1])
    """

    def __init__(self, X, y, qid, *, name: str | None = None, feature_names=None):
        if sp.issparse(X):
            X = checked_csr(X)
        else:
            X = np.asarray(X)
            _check_real_dtype(X, "X")
            X = np.ascontiguousarray(X, dtype=np.float64)
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D (n_docs, n_features), got shape {X.shape}")
        n = X.shape[0]
        if n == 0:
            raise ValueError("the data set has no documents")
        if X.shape[1] == 0:
            raise ValueError("X has no feature columns")
        y = np.asarray(y)
        qid = np.asarray(qid)
        for label, arr in (("y", y), ("qid", qid)):
            if arr.ndim != 1 or arr.shape[0] != n:
                raise ValueError(f"{label} has shape {arr.shape}, expected ({n},) to match X (mismatched lengths)")
        if not sp.issparse(X):
            bad = np.argwhere(~np.isfinite(X))
            if bad.size:
                r, c = bad[0]
                raise ValueError(f"X holds a non-finite value ({X[r, c]}) at row {r}, column {c}")
        y = _check_labels(y)
        qid = _check_integer(qid, "qid")
        starts, run_ids, run = query_runs(qid)
        if run is not None:   # a query id that starts a second run: name the row where it reappears
            raise ValueError(
                f"query ids are not contiguous: qid {run_ids[run]} reappears at row {starts[run]} "
                "after rows of other queries"
            )
        self.X = X
        self.y = y
        self.qid = qid
        self.query_offsets = np.r_[starts, n].astype(np.int64)
        self.query_ids = run_ids
        self.name = name
        self.feature_names = None if feature_names is None else _check_feature_names(feature_names, X.shape[1])
        self._query_keys = self._doc_keys = None
        self.has_labels = True

    @classmethod
    def from_frame(cls, frame, *, query="query", doc="doc", features=None, label=None,
                   name: str | None = None) -> "RankingDataset":
        """A data set keyed by (query id, document id) from a feature table, labels optional.

        Ids are kept as given (strings, 64-bit signed or unsigned integers) in ``query_keys``
        and ``doc_keys``, the ids a click log is joined by (``ClickLog.with_data``). Rows are
        grouped by query in order of each query's first row (a table already grouped keeps its
        order); ``qid`` holds the query's id where it is an int64, its code otherwise. Without
        ``label`` the data set has no labels (``has_labels`` is False, ``y`` is zeros): it serves
        learning from clicks, prediction and off-policy estimates, and label metrics refuse it.

        Parameters
        ----------
        frame : pandas DataFrame or mapping of column name to values
            One row per (query, document).
        query, doc : str
            The id columns; a (query, document) pair may appear once.
        features : list of str, optional
            The feature columns (default: every column but the id and label columns).
        label : str, optional
            A column of graded relevance labels (integers >= 0).
        name : str, optional
            Shown in the ``repr``.

        Returns
        -------
        RankingDataset

        Examples
        --------
        >>> data = RankingDataset.from_frame({"query": ["b", "a", "b"], "doc": [7, 7, 9],
        ...                                   "f1": [0.5, 1.0, 0.0]})
        >>> data.query_keys.tolist(), data.doc_keys.tolist(), data.X[:, 0].tolist(), data.has_labels
        (['b', 'a'], [7, 9, 7], [0.5, 0.0, 1.0], False)
        >>> data.feature_names
        ['f1']
        """
        from .ids import factorize, format_id, frame_of, id_column

        frame = frame_of(frame, {"query": query, "doc": doc, "label": label})
        if features is None:
            features = [c for c in frame.columns if c not in (query, doc, label)]
        features = list(features)
        frame_of(frame, {f"feature {i}": f for i, f in enumerate(features)})
        if not features:
            raise ValueError("the feature table has no feature columns")
        query_code, query_keys = factorize(id_column(frame, query))
        doc_code, doc_ids = factorize(id_column(frame, doc))
        pair = query_code * len(doc_ids) + doc_code
        _, first, counts = np.unique(pair, return_index=True, return_counts=True)
        if np.any(counts > 1):
            i = first[np.argmax(counts > 1)]
            raise ValueError(f"the feature table holds (query {format_id(query_keys[query_code[i]])}, doc "
                             f"{format_id(doc_ids[doc_code[i]])}) more than once (first at frame row "
                             f"{frame.index[i]!r})")
        order = np.argsort(query_code, kind="stable")
        X = frame[features]
        bad = [c for c in features if not np.issubdtype(np.asarray(X[c]).dtype, np.number)]
        if bad:
            raise ValueError(f"feature column {bad[0]!r} must hold numbers, got dtype {X[bad[0]].dtype}")
        X = X.to_numpy(dtype=np.float64)[order]
        bad = np.argwhere(~np.isfinite(X))
        if bad.size:
            raise ValueError(f"feature column {features[bad[0][1]]!r} holds {X[tuple(bad[0])]} at frame row "
                             f"{frame.index[order[bad[0][0]]]!r}; features must be finite numbers")
        y = np.zeros(len(order), dtype=np.int64) if label is None else _frame_column(frame, label)[order]
        qid = query_keys[query_code[order]] if query_keys.dtype == np.int64 else query_code[order]
        try:
            data = cls(X, y, qid, name=name, feature_names=[str(f) for f in features])
        except ValueError as err:
            raise ValueError(f"column {label!r}: {err}" if label is not None and "label" in str(err) else str(err)) \
                from None
        data._query_keys = query_keys
        data._doc_keys = doc_ids[doc_code[order]]
        data.has_labels = label is not None
        return data

    @property
    def query_keys(self) -> np.ndarray:
        """The id of each query as the user gave it (default: ``query_ids``)."""
        return self.query_ids if self._query_keys is None else self._query_keys

    @property
    def doc_keys(self) -> np.ndarray:
        """The id of each row's document as the user gave it (default: the row index)."""
        return np.arange(self.n_docs, dtype=np.int64) if self._doc_keys is None else self._doc_keys

    # ------------------------------------------------------------------ sizes
    @classmethod
    def from_dask(cls, frame, *, query, doc, features, label=None, sparse=False, shuffle=True, npartitions=None,
                  client=None):
        """A data set partitioned by query on a Dask cluster (:class:`~counterfactual_ltr.distributed.DistributedDataset`).

        Parameters
        ----------
        frame : dask DataFrame
            The feature table, one row per (query, document).
        query, doc : str
            Columns of the query and document ids (kept as given: integers or strings).
        features : list of str
            The feature columns.
        label : str, optional
            Column of graded labels (zeros without it).
        sparse : bool, default False
            Keep every partition's features as a CSR matrix.
        shuffle : bool, default True
            Move the rows so that every query is whole in one partition (``frame.shuffle(on=query)``);
            False keeps the frame's partitions and refuses a query found in two of them.
        npartitions : int, optional
            Partitions after the shuffle (default: the frame's).
        client : dask.distributed.Client, optional
            Default: the active client.

        Returns
        -------
        DistributedDataset
        """
        from .distributed.collection import from_dask

        return from_dask(cls, frame, query=query, doc=doc, features=features, label=label, sparse=sparse,
                         shuffle=shuffle, npartitions=npartitions, client=client)

    @property
    def n_docs(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def is_sparse(self) -> bool:
        """Whether ``X`` is a scipy.sparse (CSR) matrix."""
        return sp.issparse(self.X)

    @property
    def n_queries(self) -> int:
        return len(self.query_offsets) - 1

    @property
    def query_lengths(self) -> np.ndarray:
        return np.diff(self.query_offsets)

    @property
    def query_index(self) -> np.ndarray:
        """Query index (0 .. n_queries - 1) of every row."""
        return segment_ids(self.query_offsets)

    def __len__(self) -> int:
        return self.n_docs

    def __repr__(self) -> str:
        name = f"{self.name!r}, " if self.name else ""
        return f"RankingDataset({name}n_queries={self.n_queries}, n_docs={self.n_docs}, n_features={self.n_features})"

    # ------------------------------------------------------------- relevance
    def relevance(self, threshold: float = DEFAULT_RELEVANCE_THRESHOLD) -> np.ndarray:
        """Binary relevance (0/1, int64): ``y >= threshold``.

        Parameters
        ----------
        threshold : float, default 1
            Labels at or above it count as relevant.

        Returns
        -------
        ndarray of int64, shape (n_docs,)
        """
        if not self.has_labels:
            raise ValueError("the data set has no relevance labels (built without label=): label metrics and "
                             "relevance need them")
        return binarize(self.y, threshold)

    # --------------------------------------------------------------- subsets
    @_doc
    def subset(self, queries) -> "RankingDataset":
        """A new data set holding the given queries (indices or boolean mask), in that order.

        A query may appear only once: a repeated query would merge with itself into one longer
        query (its rows share the query id), so repeats raise instead.

        {queries}

        Returns
        -------
        RankingDataset
        """
        queries = self._query_indices(queries)
        if queries.size == 0:
            raise ValueError("subset needs at least one query")
        unique, counts = np.unique(queries, return_counts=True)
        if np.any(counts > 1):
            raise ValueError(f"subset: query index {unique[counts > 1][0]} is repeated; "
                             "each query may appear once")
        rows = self.rows_of(queries)
        sub = RankingDataset(self.X[rows], self.y[rows], self.qid[rows], name=self.name,
                             feature_names=self.feature_names)
        sub.has_labels = self.has_labels
        if self._query_keys is not None:
            sub._query_keys, sub._doc_keys = self._query_keys[queries], self._doc_keys[rows]
        return sub

    @_doc
    def rows_of(self, queries) -> np.ndarray:
        """Row indices of the given queries (indices or boolean mask), query after query.

        Repeated indices are allowed here (bootstrap resampling); they repeat the rows.

        {queries}

        Returns
        -------
        ndarray of int64
            The rows of the first query, then of the second, ...
        """
        return segment_gather(self.query_offsets, self._query_indices(queries))

    def _query_indices(self, queries) -> np.ndarray:
        """Validated int64 query indices from indices or a boolean mask over the queries."""
        queries = np.asarray(queries)
        if queries.dtype == bool:
            if queries.shape != (self.n_queries,):
                raise ValueError(f"boolean query mask has shape {queries.shape}, expected ({self.n_queries},)")
            return np.flatnonzero(queries)
        if queries.size and not np.issubdtype(queries.dtype, np.integer):
            raise ValueError(f"query indices must be integers, got dtype {queries.dtype}")
        queries = queries.astype(np.int64).ravel()
        if queries.size and (queries.min() < 0 or queries.max() >= self.n_queries):
            bad = queries[(queries < 0) | (queries >= self.n_queries)][0]
            raise ValueError(f"query index {bad} out of range [0, {self.n_queries})")
        return queries


def dense_features(X) -> np.ndarray:
    """``X`` as a dense float64 array (sparse input densified) for code that needs dense rows.

    Parameters
    ----------
    X : array or scipy.sparse matrix
        Feature rows.

    Returns
    -------
    array

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> dense_features(sp.csr_matrix(np.eye(2))).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    return X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)


def checked_csr(X, what: str = "X"):
    """A scipy.sparse ``X`` as a canonical float64 CSR matrix with finite values.

    Parameters
    ----------
    X : scipy.sparse matrix
        Sparse feature rows (any format; converted to CSR).
    what : str
        Name used in the error message.

    Returns
    -------
    scipy.sparse.csr_matrix
        Sorted, unique column indices. A non-2-D ``X`` or a non-finite value is a ``ValueError``
        (naming the value's row and column), a non-real dtype a ``TypeError``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> checked_csr(sp.coo_matrix(np.eye(2))).format
    'csr'
    """
    if X.ndim != 2:
        raise ValueError(f"{what} must be 2-D (n_docs, n_features), got shape {X.shape}")
    _check_real_dtype(X, what)
    X = sp.csr_matrix(X, dtype=np.float64)
    X.sum_duplicates()
    bad = np.flatnonzero(~np.isfinite(X.data))
    if bad.size:
        row = int(np.searchsorted(X.indptr, bad[0], side="right") - 1)
        raise ValueError(f"{what} holds a non-finite value ({X.data[bad[0]]}) at row {row}, "
                         f"column {X.indices[bad[0]]}")
    return X


def _check_real_dtype(X, what: str):
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool) or np.iscomplexobj(X):
        raise TypeError(f"{what} must hold real numbers, got dtype {X.dtype}")


def binarize(y, threshold: float = DEFAULT_RELEVANCE_THRESHOLD) -> np.ndarray:
    """Binary relevance ``1[y >= threshold]`` as int64 (``threshold`` finite: NaN would make nothing relevant).

    Parameters
    ----------
    y : array of graded labels
        Labels >= 0.
    threshold : float, default 1
        Labels at or above it count as relevant.

    Returns
    -------
    array of int64 (0/1)

    Examples
    --------
    >>> binarize([0, 1, 2]).tolist()
    [0, 1, 1]
    """
    threshold = check_real(threshold, "threshold")
    return (np.asarray(y) >= threshold).astype(np.int64)


def _check_feature_names(names, n_features: int) -> list[str]:
    """``names`` as a list of ``n_features`` distinct non-empty strings, or a ValueError naming the bad one.

    A name per column is what lets a fitted ranker's export find each feature in the serving stack,
    so a wrong count or a repeat (two columns one stack feature) is refused here rather than there.
    """
    if isinstance(names, (str, bytes)):
        raise ValueError("feature_names must be a list of names, one per feature column, not one string")
    names = list(names)
    if len(names) != n_features:
        raise ValueError(f"feature_names has {len(names)} names but X has {n_features} feature columns")
    seen = {}
    for position, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise ValueError(f"feature_names[{position}] is {name!r}: every feature column needs a non-empty "
                             "string name")
        if name in seen:
            raise ValueError(f"feature_names names column {name!r} twice (positions {seen[name]} and {position})")
        seen[name] = position
    return names


def _check_integer(values, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if np.issubdtype(arr.dtype, np.unsignedinteger) and arr.size and arr.max() > np.iinfo(np.int64).max:
        # Casting would wrap to a negative int64 silently.
        row = int(np.argmax(arr > np.iinfo(np.int64).max))
        raise ValueError(f"{name} must fit in a 64-bit signed integer; row {row} has {arr[row]}")
    if np.issubdtype(arr.dtype, np.integer):
        return arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    # 2**63 itself does not fit in an int64; smaller whole floats do.
    bad = np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)) | (np.abs(arr) >= 2.0**63))
    if bad.size:
        raise ValueError(f"{name} must hold integers that fit in 64 bits; row {bad[0]} has {arr[bad[0]]}")
    return arr.astype(np.int64)


def _frame_column(frame, name: str, *, as_click: bool | None = None) -> np.ndarray:
    """Column ``name`` of a pandas frame as an int64 array, or ``ValueError`` naming the column and row.

    A click column (``as_click``; by default the column named ``"click"``) is read as booleans
    (from booleans or 0/1 numbers).
    Shared by every reader of log and data frames (click logs, streamed aggregates), so they refuse
    the same inputs with the same messages.
    """
    import pandas as pd

    column = frame[name]
    missing = column.isna().to_numpy()
    if missing.any():
        raise ValueError(f"column {name!r} has a missing value at frame row {frame.index[np.argmax(missing)]!r}")
    dtype = column.dtype
    if as_click or (as_click is None and name == "click"):
        if pd.api.types.is_bool_dtype(dtype) or (pd.api.types.is_numeric_dtype(dtype)
                                                  and not pd.api.types.is_complex_dtype(dtype)):
            values = column.to_numpy(dtype=bool if pd.api.types.is_bool_dtype(dtype) else np.float64)
            bad = np.flatnonzero(~((values == 0) | (values == 1)))
            if bad.size:
                raise ValueError(f"column {name!r} must hold booleans or 0/1; frame row {frame.index[bad[0]]!r} "
                                 f"holds {column.iloc[bad[0]]}")
            return values.astype(bool)
        raise ValueError(f"column {name!r} must hold booleans or 0/1, got dtype {dtype}")
    if not pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
        raise ValueError(f"column {name!r} must hold integers, got dtype {dtype}")
    values = column.to_numpy(dtype=np.uint64 if pd.api.types.is_unsigned_integer_dtype(dtype) else np.int64)
    if values.dtype == np.uint64:
        big = np.flatnonzero(values > np.iinfo(np.int64).max)
        if big.size:
            raise ValueError(f"column {name!r} holds {values[big[0]]} at frame row {frame.index[big[0]]!r}, "
                             "beyond the 64-bit signed range (it would wrap to a negative number)")
        values = values.astype(np.int64)
    return values


def _check_labels(y) -> np.ndarray:
    y = _check_integer(y, "y (relevance labels)")
    bad = np.flatnonzero(y < 0)
    if bad.size:
        raise ValueError(f"relevance labels must be >= 0; row {bad[0]} has {y[bad[0]]}")
    return y
