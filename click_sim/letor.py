"""Loading LETOR / SVMlight ranking files."""

from __future__ import annotations

import os

import numpy as np
from sklearn.datasets import load_svmlight_file

from counterfactual_ltr.datasets import RankingDataset

__all__ = ["load_letor"]


def load_letor(path, *, n_features: int | None = None, name: str | None = None) -> RankingDataset:
    """Load a LETOR / SVMlight file (``label qid:Q idx:value ... # comment``), plain, ``.gz`` or ``.bz2``.

    Parsing is done by :func:`sklearn.datasets.load_svmlight_file` with
    ``query_id=True``; features are made dense (LETOR sets are dense). The
    order of the queries is kept. Malformed lines, lines without ``qid`` and
    files whose query ids are not contiguous raise ``ValueError`` naming the
    line (1-based).

    Parameters
    ----------
    path : str or path-like
    n_features : int, optional
        Number of feature columns (default: the largest index in the file).
        Give it when loading train/validation/test files that must agree.

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
    >>> os.unlink(tmp.name)
    """
    path = os.fspath(path)
    try:
        X, y, qid = load_svmlight_file(path, n_features=n_features, query_id=True, dtype=np.float64)
    except ValueError as err:
        located = _first_malformed_line(path)
        raise ValueError(f"{path}: {located or err}") from err
    if X.shape[0] == 0:
        raise ValueError(f"{path}: no data lines")
    missing = _first_line_without_qid(path) if len(qid) != X.shape[0] or np.any(qid == 0) else None
    if missing:
        raise ValueError(f"{path}: {missing}")
    try:
        return RankingDataset(X, y, qid, name=name or os.path.basename(os.path.dirname(path)) + "/" + os.path.basename(path))
    except ValueError as err:
        raise ValueError(f"{path}: {_locate_row_error(path, str(err))}") from err


def _open_binary(path):
    """The file, decompressed as ``load_svmlight_file`` does for ``.gz`` and ``.bz2`` names."""
    if str(path).endswith(".gz"):
        import gzip

        return gzip.open(path, "rb")
    if str(path).endswith(".bz2"):
        import bz2

        return bz2.open(path, "rb")
    return open(path, "rb")


def _data_lines(path):
    """``(line_number, content_without_comment)`` of every data line."""
    with _open_binary(path) as fh:
        for number, raw in enumerate(fh, start=1):
            text = raw.decode("utf-8", "replace").split("#", 1)[0].strip()
            if text:
                yield number, text


def _first_malformed_line(path) -> str | None:
    for number, text in _data_lines(path):
        tokens = text.split()
        try:
            float(tokens[0])
        except ValueError:
            return f"line {number}: label {tokens[0]!r} is not a number"
        for token in tokens[1:]:
            key, sep, value = token.partition(":")
            if not sep:
                return f"line {number}: token {token!r} is not of the form index:value"
            try:
                if key == "qid":
                    int(value)
                else:
                    if int(key) < 1:
                        return f"line {number}: feature index {key} must be >= 1"
                    float(value)
            except ValueError:
                return f"line {number}: token {token!r} is malformed"
    return None


def _first_line_without_qid(path) -> str | None:
    for number, text in _data_lines(path):
        if " qid:" not in f" {text}":
            return f"line {number} has no qid (ranking data needs one per line)"
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
