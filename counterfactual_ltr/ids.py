"""Ids as a real log gives them: strings, 64-bit signed or unsigned integers, kept exactly.

A real log names queries and documents by its own ids. Inside, the toolkit works on dense codes
(``0..n-1``); the original values are kept beside the codes and written back in every output.
:func:`id_column` reads one id column of a frame (refusing missing values and types that would
lose information: floats, mixtures of strings and numbers); :func:`factorize` gives codes and
the distinct ids; :class:`IdTable` is the table of the distinct (query, document) pairs of a log,
its rows grouped by query like a data set's, so a log without a data set is a complete object.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["id_column", "ids_from_text", "factorize", "IdTable", "format_id", "as_dataframe", "frame_of", "match"]


def as_dataframe(frame):
    """A pandas DataFrame, or a mapping of column name to values made one; ``TypeError`` for anything else.

    Parameters
    ----------
    frame : pandas DataFrame or mapping of column name to values
        The table.

    Returns
    -------
    pandas DataFrame

    Examples
    --------
    >>> as_dataframe({"a": [1, 2]}).shape
    (2, 1)
    """
    import pandas as pd

    if isinstance(frame, Mapping):
        try:
            frame = pd.DataFrame(dict(frame))
        except UnicodeEncodeError:
            for name, values in frame.items():        # the column and value pandas could not store as text
                for i, v in enumerate(values if isinstance(values, (list, tuple, np.ndarray)) else []):
                    if isinstance(v, str) and not _utf8(v):
                        raise ValueError(f"column {name!r} holds {v!r} at row {i}, which is not valid Unicode text "
                                         "(a lone surrogate: undecoded bytes?)") from None
            raise ValueError("cannot build a frame from the mapping of columns: a value is not valid Unicode "
                             "text") from None
        except (ValueError, TypeError) as err:
            raise ValueError(f"cannot build a frame from the mapping of columns: {err}") from err
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame or a mapping of columns, got {type(frame).__name__}")
    return frame


def frame_of(frame, columns: dict):
    """``frame`` (a DataFrame or a mapping of columns) as a DataFrame with the named columns, once each, and rows.

    Parameters
    ----------
    frame : pandas DataFrame or mapping of column name to values
        The table.
    columns : dict of role -> column name or None
        The columns it must have (``None``: not asked for), named by their role in messages.

    Returns
    -------
    pandas DataFrame

    Examples
    --------
    >>> frame_of({"query": ["a"]}, {"query": "query", "doc": "doc"})
    Traceback (most recent call last):
    ...
    ValueError: the frame has no column 'doc' (the doc column); it has ['query']
    """
    frame = as_dataframe(frame)
    for role, name in columns.items():
        if name is None:
            continue
        if name not in frame.columns:
            raise ValueError(f"the frame has no column {name!r} (the {role} column); it has {list(frame.columns)}")
        if np.count_nonzero(frame.columns == name) > 1:
            raise ValueError(f"the frame has more than one column named {name!r}")
    if len(frame) == 0:
        raise ValueError("the frame has no rows")
    return frame


def id_column(frame, name: str) -> np.ndarray:
    """Column ``name`` of a pandas frame as ids: int64, uint64 (beyond 2**63) or an object array of str.

    Parameters
    ----------
    frame : pandas DataFrame
        The frame.
    name : str
        The column.

    Returns
    -------
    ndarray, or a pandas string array
        ``ValueError`` naming the column and a frame row for a missing value, a float or boolean
        column (ids are never rounded), or a column mixing strings with numbers.

    Examples
    --------
    >>> import pandas as pd
    >>> id_column(pd.DataFrame({"doc": [2**64 - 1, 5]}, dtype="uint64"), "doc").tolist()
    [18446744073709551615, 5]
    >>> id_column(pd.DataFrame({"doc": ["a", 3]}), "doc")
    Traceback (most recent call last):
    ...
    ValueError: column 'doc' mixes strings with other values (frame row 1 holds 3 of type int)
    """
    import pandas as pd

    column = frame[name]
    missing = column.isna().to_numpy()
    if missing.any():
        raise ValueError(f"column {name!r} has a missing value at frame row {frame.index[np.argmax(missing)]!r}")
    dtype = column.dtype
    if pd.api.types.is_bool_dtype(dtype) or not (pd.api.types.is_integer_dtype(dtype)
                                                 or pd.api.types.is_string_dtype(dtype)
                                                 or dtype == object):
        raise ValueError(f"column {name!r} must hold ids (strings or integers), got dtype {dtype}")
    if pd.api.types.is_unsigned_integer_dtype(dtype):
        return column.to_numpy(dtype=np.uint64)
    if pd.api.types.is_integer_dtype(dtype):
        return column.to_numpy(dtype=np.int64)
    if dtype != object:
        empty = (column.str.len() == 0).to_numpy(dtype=bool)
        if empty.any():
            raise _empty_id(name, frame, int(np.argmax(empty)))
        if "pyarrow" not in str(getattr(dtype, "storage", "")):      # Arrow holds valid UTF-8 only
            _check_texts(column.to_numpy(dtype=object), name, frame)
        return column.array        # a string column: factorized as it is (no Python object per row)
    values = column.to_numpy(dtype=object)
    is_str = np.fromiter((type(v) is str for v in values), dtype=bool, count=len(values))
    if not is_str.all():
        i = int(np.argmin(is_str))
        if not is_str.any() and all(type(v) is int or type(v) in _NUMPY_INTS for v in values):
            big = next((k for k, v in enumerate(values) if not -2**63 <= v < 2**64), None)
            if big is None:          # integers held as Python objects (an object column): read as integers
                small = all(v < 2**63 for v in values)
                if not small and any(v < 0 for v in values):
                    raise ValueError(f"column {name!r} holds negative ids and ids beyond 2**63 - 1, which no 64-bit "
                                     "integer type holds together: write such ids as strings")
                return np.asarray(values.tolist(), dtype=np.int64 if small else np.uint64)
            raise ValueError(f"column {name!r} holds {values[big]} at frame row {frame.index[big]!r}, beyond 64-bit "
                             "integers (-2**63 .. 2**64 - 1): write such ids as strings")
        raise ValueError(f"column {name!r} mixes strings with other values (frame row {frame.index[i]!r} holds "
                         f"{values[i]!r} of type {type(values[i]).__name__})")
    _check_texts(values, name, frame)
    return values


_NUMPY_INTS = frozenset(np.dtype(c).type for c in "bBhHiIlLqQ")


def _check_texts(values, name: str, frame) -> None:
    """String ids are not empty (a CSV reads an empty field as missing: refused alike from a frame) and are UTF-8."""
    empty = np.asarray(values == "", dtype=bool)
    if empty.any():
        raise _empty_id(name, frame, int(np.argmax(empty)))
    step = 1 << 16                 # joined in pieces: one encode call per piece, no copy of the whole column
    for start in range(0, len(values), step):
        try:
            "\x00".join(values[start:start + step]).encode("utf-8")
        except UnicodeEncodeError:
            i = start + next(k for k, v in enumerate(values[start:start + step]) if not _utf8(v))
            raise ValueError(f"column {name!r} holds {values[i]!r} at frame row {frame.index[i]!r}, which is not "
                             "valid Unicode text (a lone surrogate: undecoded bytes?) and could not be written as "
                             "UTF-8") from None


def _empty_id(name: str, frame, i: int) -> ValueError:
    return ValueError(f"column {name!r} has an empty id at frame row {frame.index[i]!r}: a CSV reads an empty field "
                      "as a missing value, so ids are never empty (the same log must read the same from a frame and "
                      "from a file); give every row an id")


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_CANONICAL_INTEGER = r"0|-?[1-9][0-9]*"


def ids_from_text(column):
    """A column of ids read as text (a CSV does not say whether ``00123`` is a string) as the ids it holds.

    Integers (int64, or uint64 beyond ``2**63``) where every value is an integer written the one way
    its number is written back (no leading zero or sign, no spaces), so the ids round-trip as text;
    otherwise the strings as read: ``"00123"`` stays ``"00123"`` instead of becoming ``123``. A
    column with a missing value is returned as it is (:func:`id_column` refuses it).

    Parameters
    ----------
    column : pandas Series of str
        The ids as text.

    Returns
    -------
    pandas Series
        int64, uint64 or the strings.

    Examples
    --------
    >>> import pandas as pd
    >>> ids_from_text(pd.Series(["7", "-3"], dtype=str)).tolist()
    [7, -3]
    >>> ids_from_text(pd.Series(["7", "007"], dtype=str)).tolist()
    ['7', '007']
    """
    if column.isna().any() or not column.str.fullmatch(_CANONICAL_INTEGER).all():
        return column
    for dtype in ("int64", "uint64"):
        try:
            return column.astype(dtype)
        except (OverflowError, ValueError, TypeError):     # beyond the type's range
            continue
    return column


def factorize(values, *, sort: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)``: ``uniques[codes] == values``, codes int64 in order of first appearance (or sorted).

    Parameters
    ----------
    values : 1-D array of ids (int64, uint64, object of str, or a pandas string array)
        The ids.
    sort : bool, default False
        Number the distinct ids in sorted order instead of first appearance.

    Returns
    -------
    codes : int64 array
    uniques : array of the ids' dtype

    Examples
    --------
    >>> import numpy as np
    >>> codes, uniques = factorize(np.array(["b", "a", "b"], dtype=object))
    >>> codes.tolist(), uniques.tolist()
    ([0, 1, 0], ['b', 'a'])
    """
    import pandas as pd

    if not isinstance(values, pd.api.extensions.ExtensionArray):
        values = np.asarray(values)
    codes, uniques = pd.factorize(values, sort=sort)
    dtype = values.dtype if isinstance(values, np.ndarray) else object
    return codes.astype(np.int64, copy=False), np.asarray(uniques, dtype=dtype)


def _common(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two id arrays in one dtype without changing a value (``object`` where the dtypes differ)."""
    if a.dtype == b.dtype:
        return a, b
    return a.astype(object), b.astype(object)


def match(keys_a: tuple, keys_b: tuple) -> np.ndarray:
    """For each row of the id pairs ``keys_a``, the row of ``keys_b`` with the same pair, or -1.

    ``1`` and ``"1"`` are different ids; an int64 and a uint64 id of the same value are the same.

    Parameters
    ----------
    keys_a, keys_b : tuple of two 1-D id arrays
        (query id, document id) per row.

    Returns
    -------
    int64 array (len(keys_a[0]),)

    Examples
    --------
    >>> import numpy as np
    >>> match((np.array([1, 1]), np.array(["x", "y"], dtype=object)),
    ...       (np.array([1]), np.array(["y"], dtype=object))).tolist()
    [-1, 0]
    """
    import pandas as pd

    codes = []
    for a, b in zip(keys_a, keys_b):
        a, b = _common(np.asarray(a), np.asarray(b))
        both, uniques = factorize(np.concatenate([a, b]))
        codes.append((both[:len(a)], both[len(a):], len(uniques)))
    (qa, qb, _), (da, db, n_docs) = codes
    key_b = qb * n_docs + db
    return pd.Index(key_b).get_indexer(qa * n_docs + da).astype(np.int64)


def format_id(value) -> str:
    """An id as shown in messages: strings quoted, numbers as they are.

    Parameters
    ----------
    value : str or int
        The id.

    Returns
    -------
    str

    Examples
    --------
    >>> format_id("98435_1"), format_id(7)
    ("'98435_1'", '7')
    """
    return repr(value) if isinstance(value, str) else str(value)


class IdTable:
    """The distinct (query, document) pairs of a log: its "rows", grouped by query like a data set's.

    Row ``r`` is document ``doc_ids[r]`` of query ``query_ids[row_query[r]]``. It offers the
    attributes of :class:`~counterfactual_ltr.datasets.RankingDataset` that a log's checks and
    statistics use (``n_docs``, ``n_queries``, ``query_offsets``, ``query_lengths``,
    ``query_index``), so a log without features works the same way.

    Parameters
    ----------
    query_ids : 1-D array
        Original id of each query code.
    doc_ids : 1-D array
        Original document id of each row.
    query_offsets : int array (n_queries + 1,)
        Rows of query ``q`` are ``query_offsets[q]:query_offsets[q + 1]``.

    Examples
    --------
    >>> import numpy as np
    >>> table, rows = IdTable.from_codes(np.array([0, 1, 0]), np.array(["q1", "q2"], dtype=object),
    ...                                  np.array([0, 0, 1]), np.array([10, 20]))
    >>> rows.tolist(), table.doc_ids.tolist(), table.row_query.tolist()
    ([0, 2, 1], [10, 20, 10], [0, 0, 1])
    """

    def __init__(self, query_ids, doc_ids, query_offsets):
        self.query_ids = np.asarray(query_ids)
        self.doc_ids = np.asarray(doc_ids)
        self.query_offsets = np.asarray(query_offsets, dtype=np.int64)
        if len(self.query_offsets) != len(self.query_ids) + 1 or self.query_offsets[-1] != len(self.doc_ids):
            raise ValueError("query_offsets must hold n_queries + 1 offsets ending at the number of rows")

    @classmethod
    def from_codes(cls, query_code, query_ids, doc_code, doc_ids) -> tuple["IdTable", np.ndarray]:
        """``(table, row)``: the table of the distinct (query code, doc code) pairs and each event's row.

        Parameters
        ----------
        query_code, doc_code : int64 arrays (n_events,)
            Codes into ``query_ids`` and ``doc_ids``.
        query_ids, doc_ids : 1-D arrays
            The distinct ids.

        Returns
        -------
        IdTable, int64 array (n_events,)
        """
        n_d = max(len(doc_ids), 1)
        first, keys = factorize(np.asarray(query_code, dtype=np.int64) * n_d + doc_code)
        # Rows grouped by query (in query-code order), first appearance within a query.
        order = np.argsort(keys // n_d, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        keys = keys[order]
        row_query = keys // n_d
        counts = np.bincount(row_query, minlength=len(query_ids))
        offsets = np.r_[0, np.cumsum(counts)]
        return cls(query_ids, np.asarray(doc_ids)[keys % n_d], offsets), rank[first]

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    @property
    def query_lengths(self) -> np.ndarray:
        return np.diff(self.query_offsets)

    @property
    def query_index(self) -> np.ndarray:
        """Query code of every row."""
        return np.repeat(np.arange(self.n_queries), self.query_lengths)

    row_query = query_index

    def row_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """``(query id, document id)`` of every row."""
        return self.query_ids[self.query_index], self.doc_ids

    def __repr__(self) -> str:
        return f"IdTable(n_queries={self.n_queries}, n_rows={self.n_docs})"
