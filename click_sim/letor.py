"""Loading LETOR / SVMlight ranking files."""

from __future__ import annotations

import bz2
import gzip
import lzma
import math
import os

import numpy as np
from sklearn.datasets import load_svmlight_file

from counterfactual_ltr._validation import check_optional_int
from counterfactual_ltr.datasets import RankingDataset

__all__ = ["load_letor", "MAX_IMPLICIT_FEATURES", "SPARSE_MAX_DENSITY"]

#: Largest feature index accepted when ``n_features`` is not given. LETOR sets
#: are dense with at most a few hundred features (MQ2008: 46, MSLR: 136,
#: Yahoo: 700); a larger index is far more likely a corrupt line than a real
#: feature, and would make the dense matrix huge.
MAX_IMPLICIT_FEATURES = 10_000

#: ``load_letor(sparse=None)`` keeps a CSR matrix when at most this share of the values is
#: non-zero: CSR then takes at most half the memory of the dense array (12 bytes a non-zero
#: against 8 a value). MQ2008 (53 % non-zero) stays dense, as before.
SPARSE_MAX_DENSITY = 1.0 / 3.0

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min

# Compression is recognised by the file's first bytes, not by its name.
_MAGIC = ((b"\x1f\x8b", gzip.open), (b"BZh", bz2.open), (b"\xfd7zXZ\x00", lzma.open))


def load_letor(path, *, n_features: int | None = None, name: str | None = None,
               zero_based: bool = False, sparse: bool | None = None) -> RankingDataset:
    """Load a LETOR / SVMlight file (``label qid:Q 1:v1 2:v2 # comment``): plain, gzip, bzip2 or xz.

    Parsing is done by :func:`sklearn.datasets.load_svmlight_file` with
    ``query_id=True``. Features stay a scipy.sparse CSR matrix when the file
    is sparse (at most :data:`SPARSE_MAX_DENSITY` of the values non-zero, or
    ``sparse=True``) and are made dense otherwise (LETOR sets such as MQ2008
    are dense). The order of the queries is kept. gzip, bzip2 and xz files are read
    transparently (recognised by their first bytes).

    Every line must hold a label (a non-negative integer grade), then
    ``qid:Q`` (an integer), then ``index:value`` pairs with strictly
    increasing indices and finite values. Anything else -- a malformed token,
    a missing qid, a repeated or decreasing index, an index 0 in a 1-based
    file, NaN or inf, query ids that are not contiguous, an empty file --
    raises ``ValueError`` naming the file and the 1-based line of the
    (decompressed) text.

    Parameters
    ----------
    path : str or path-like
        The LETOR/SVMlight file (plain, ``.gz``, ``.bz2`` or ``.xz``).
    n_features : int, optional
        Number of feature columns. By default the largest index in the file,
        which must then be at most :data:`MAX_IMPLICIT_FEATURES`; give it
        explicitly for wider files, and when loading train/validation/test
        files that must agree. An index beyond it is an error.
    name : str, optional
        Name of the data set (default ``"<folder>/<file>"``).
    zero_based : bool, default False
        Whether feature indices start at 0. LETOR files are 1-based, so an
        index 0 is an error unless this is ``True``; the indexing is never
        guessed from the data.
    sparse : bool or None, default None
        ``True``: keep ``X`` as CSR; ``False``: dense array; ``None``: CSR when at
        most :data:`SPARSE_MAX_DENSITY` of the values are non-zero.

    Returns
    -------
    RankingDataset

    Examples
    --------
    >>> import tempfile, os
    >>> tmp = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    >>> _ = tmp.write("2 qid:1 1:0.5 2:1.0 # doc a\\n0 qid:1 1:0.1 2:0.0\\n1 qid:7 1:0.3 2:0.2\\n")
    >>> tmp.close()
    >>> data = load_letor(tmp.name)
    >>> data.n_queries, data.X.shape, data.query_ids.tolist()
    (2, (3, 2), [1, 7])
    >>> load_letor(tmp.name, sparse=True).X.nnz          # CSR on request (or when the file is sparse)
    5
    >>> os.unlink(tmp.name)
    """
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"path must be a file name (str or path-like), got {type(path).__name__}") from None
    n_features = check_optional_int(n_features, "n_features", min_value=1)
    if not isinstance(zero_based, (bool, np.bool_)):
        raise TypeError(f"zero_based must be True or False, got {zero_based!r}")
    if sparse is not None and not isinstance(sparse, (bool, np.bool_)):
        raise TypeError(f"sparse must be True, False or None, got {sparse!r}")
    checks = dict(n_features=n_features, zero_based=bool(zero_based))
    try:
        with _open(path) as fh:
            X, y, qid = load_svmlight_file(fh, n_features=n_features, query_id=True, dtype=np.float64,
                                           zero_based=bool(zero_based))
    except (ValueError, OverflowError) as err:
        raise ValueError(f"{path}: {_first_bad_line(path, **checks) or err}") from err
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (OSError, EOFError, lzma.LZMAError) as err:
        raise ValueError(f"{path}: cannot be read as a text or compressed LETOR file ({err})") from err
    if X.shape[0] == 0:
        raise ValueError(f"{path}: no data lines (the file is empty or holds only comments)")
    if len(qid) != X.shape[0] or (n_features is None and X.shape[1] > MAX_IMPLICIT_FEATURES):
        # A line without qid, or an index too large to densify: both are found line by line.
        raise ValueError(f"{path}: {_first_bad_line(path, **checks)}")
    if _contains(path, b"_"):
        # Python's int()/float(), which the parser uses, read "1_0" as 10: look for such a token.
        problem = _first_bad_line(path, **checks)
        if problem:
            raise ValueError(f"{path}: {problem}")
    if name is None:
        name = os.path.basename(os.path.dirname(path)) + "/" + os.path.basename(path)
    X.eliminate_zeros()                          # explicit "k:0" entries are not non-zeros
    if sparse is None:
        sparse = X.nnz <= SPARSE_MAX_DENSITY * X.shape[0] * X.shape[1]
    if not sparse:
        X = X.toarray()
    try:
        return RankingDataset(X, y, qid, name=name)
    except ValueError as err:
        raise ValueError(f"{path}: {_first_bad_line(path, **checks) or _locate_row_error(path, str(err))}") from err


def _open(path):
    """The file as a binary stream, decompressed when its first bytes say it is compressed."""
    with open(path, "rb") as fh:
        head = fh.read(6)
    for magic, opener in _MAGIC:
        if head.startswith(magic):
            return opener(path, "rb")
    return open(path, "rb")


def _contains(path, needle: bytes) -> bool:
    """Whether the (decompressed) file holds ``needle``; read in large chunks at C speed."""
    with _open(path) as fh:
        tail = b""
        for chunk in iter(lambda: fh.read(1 << 24), b""):
            if needle in tail + chunk[:len(needle)] or needle in chunk:
                return True
            tail = chunk[-len(needle) + 1:] if len(needle) > 1 else b""
    return False


def _data_lines(path):
    """``(line_number, tokens)`` of every data line of the decompressed text (1-based numbers)."""
    with _open(path) as fh:
        for number, raw in enumerate(fh, start=1):
            tokens = raw.split(b"#", 1)[0].split()
            if tokens:
                yield number, [t.decode("utf-8", "replace") for t in tokens]


def _is_finite_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _line_problem(tokens, n_features, zero_based) -> str | None:
    """What is wrong with one data line (``None`` if nothing)."""
    for token in tokens:
        if "_" in token:  # int("1_0") == 10 in Python; not a number in a LETOR file
            return f"token {token!r} holds an underscore, which is not part of a LETOR number"
    label = tokens[0]
    if not _is_finite_number(label) or float(label) < 0 or float(label) != int(float(label)):
        return f"label {label!r} is not a non-negative integer grade"
    if len(tokens) < 2 or not tokens[1].startswith("qid:"):
        return "has no qid after the label (ranking data needs 'label qid:Q ...' on every line)"
    try:
        q = int(tokens[1][4:])
    except ValueError:
        return f"qid {tokens[1][4:]!r} is not an integer"
    if not _INT64_MIN <= q <= _INT64_MAX:
        return f"qid {q} does not fit in a 64-bit integer"
    first = 0 if zero_based else 1
    limit = n_features - 1 + first if n_features is not None else MAX_IMPLICIT_FEATURES - 1 + first
    previous = None
    for token in tokens[2:]:
        key, sep, value = token.partition(":")
        if not sep:
            return f"token {token!r} is not of the form index:value"
        try:
            index = int(key)
        except ValueError:
            return f"feature index {key!r} in {token!r} is not an integer"
        if index < first:
            hint = "" if zero_based else " (LETOR indices start at 1; pass zero_based=True for a 0-based file)"
            return f"feature index {index} is below {first}{hint}"
        if index > limit:
            if n_features is not None:
                return f"feature index {index} exceeds n_features={n_features}"
            return (f"feature index {index} exceeds {MAX_IMPLICIT_FEATURES} (MAX_IMPLICIT_FEATURES); pass "
                    "n_features explicitly if the file really is that wide")
        if previous is not None and index <= previous:
            kind = "repeated" if index == previous else "smaller than the one before it"
            return f"feature index {index} is {kind} (indices must increase along a line)"
        previous = index
        if not _is_finite_number(value):
            return f"feature {index} has value {value!r}, not a finite number"
    return None


def _first_bad_line(path, *, n_features, zero_based) -> str | None:
    """The first line that is malformed, or whose qid reappears after other queries (non-contiguous)."""
    finished, current = set(), None
    for number, tokens in _data_lines(path):
        problem = _line_problem(tokens, n_features, zero_based)
        if problem:
            return f"line {number}: {problem}"
        q = int(tokens[1][4:])
        if q != current:
            if q in finished:
                return (f"line {number}: query ids are not contiguous: qid {q} reappears after rows of other "
                        "queries")
            if current is not None:
                finished.add(current)
            current = q
    return None


def _locate_row_error(path, message: str) -> str:
    """Turn 'row R' in a RankingDataset error into the file's line number."""
    import re

    match = re.search(r"row (\d+)", message)
    if not match:
        return message
    row = int(match.group(1))
    # RankingDataset counts feature columns from 0; LETOR files count features from 1.
    message = re.sub(r"column (\d+)", lambda m: f"feature {int(m.group(1)) + 1}", message)
    for index, (number, _) in enumerate(_data_lines(path)):
        if index == row:
            return message.replace(f"row {row}", f"line {number}")
    return message
