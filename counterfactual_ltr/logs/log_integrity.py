"""Click-log files that say when they were changed: page checksums and a digest of the columns' content.

Every writer of a log (``write_click_log``, ``ClickLog.to_parquet``, the partitioned simulation,
``cltr simulate``) goes through :func:`write_log_frame`, and every reader (``read_click_log``,
``ClickLog.read_parquet``, both engines of ``aggregate_clicks``, every ``cltr`` command) through
:func:`read_log_frame` or :func:`iter_log_batches`:

* **Parquet** files carry pyarrow's page checksums (CRC-32 of every data page, verified on
  read) and, in the file's key-value metadata under ``counterfactual_ltr.digest``, a digest of
  the decoded content: per column its dtype and the SHA-256 of its values in row order, and the
  number of rows. Page checksums miss corruption outside the data pages (page headers, the
  footer); the digest is compared with the values read back, so a change anywhere that alters
  what is read is an error, and a change that alters nothing reads back identical.
* **CSV** files carry the same digest in a sidecar file, ``<name>.digest`` (``log.csv.digest``
  beside ``log.csv``, ``log.csv.gz.digest`` beside ``log.csv.gz``): a comment line inside the
  file would break other CSV readers. The digest is of the values, not the bytes, so the file
  may be recompressed; an edited file no longer matches.

Which files are verified: those written by this library (they carry a digest). A Parquet file
without the metadata entry, or a CSV file without a sidecar, is a file a user brought: it is
read as it is (Parquet page checksums still verified where present) and checked like any frame
by ``ClickLog.from_frame``. A mismatch is a ``ValueError`` naming the file.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import zipfile
import zlib

import numpy as np

__all__ = ["LOG_SUFFIXES", "DIGEST_KEY", "SIDECAR_SUFFIX", "log_kind", "log_files", "log_columns",
           "write_log_frame", "read_log_frame", "iter_log_batches", "content_digest"]

#: File name endings understood as Parquet and as CSV (compressed CSV by pandas' inference).
LOG_SUFFIXES = {"parquet": (".parquet", ".pq"), "csv": (".csv", ".csv.gz", ".csv.bz2", ".csv.zip", ".csv.xz")}
#: Key of the digest in a Parquet file's key-value metadata.
DIGEST_KEY = b"counterfactual_ltr.digest"
#: Ending added to a CSV file's name for its digest file.
SIDECAR_SUFFIX = ".digest"
_FORMAT = "counterfactual-ltr log digest"
# What reading a corrupted (possibly compressed) CSV file raises; pandas' ParserError is a ValueError.
_CSV_ERRORS = (OSError, ValueError, EOFError, UnicodeDecodeError, zlib.error, lzma.LZMAError, zipfile.BadZipFile,
               OverflowError, MemoryError)
_MAX_DIGEST_BYTES = 1 << 16


def log_kind(path) -> str:
    """``"parquet"`` or ``"csv"`` from the file name's ending; ``ValueError`` naming the file otherwise.

    Parameters
    ----------
    path : str or path-like
        A click-log file name.

    Returns
    -------
    str

    Examples
    --------
    >>> log_kind("logs/day1.pq"), log_kind("day1.csv.gz")
    ('parquet', 'csv')
    """
    name = os.fspath(path).lower()
    for kind, suffixes in LOG_SUFFIXES.items():
        if name.endswith(suffixes):
            return kind
    allowed = ", ".join(s for suffixes in LOG_SUFFIXES.values() for s in suffixes)
    raise ValueError(f"{os.fspath(path)}: unknown click-log file type (expected one of {allowed})")


def log_files(source, *, kinds=("parquet", "csv")) -> list[str]:
    """The log files of ``source``: a file, a folder (searched recursively), a glob pattern or a list of them.

    In a folder, every file whose name ends in one of :data:`LOG_SUFFIXES` (of ``kinds``) is
    taken, in sorted order; names starting with ``.`` or ``_`` (``_SUCCESS``, ``_metadata``,
    digest files are skipped as well) are skipped as other tools' bookkeeping, and any other
    file is an error naming it rather than being skipped without a word.

    Parameters
    ----------
    source : path, folder, glob pattern, or list of paths
        Where the log is.
    kinds : tuple of {"parquet", "csv"}
        The file types accepted.

    Returns
    -------
    list of str

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> for name in ("b.pq", "a.parquet", "_SUCCESS"):
    ...     open(os.path.join(folder, name), "w").close()
    >>> [os.path.basename(f) for f in log_files(folder, kinds=("parquet",))]
    ['a.parquet', 'b.pq']
    """
    import glob

    if isinstance(source, (list, tuple)):
        files = [os.fspath(s) for s in source]
    else:
        source = os.fspath(source)
        if os.path.isdir(source):
            files = _folder_files(source, kinds)
        elif any(ch in source for ch in "*?["):
            files = sorted(glob.glob(source, recursive=True))
        else:
            files = [source]
    if not files:
        names = " or ".join({"parquet": "Parquet", "csv": "CSV"}[k] for k in kinds)
        raise ValueError(f"no {names} files found at {source!r}")
    for f in files:
        if not os.path.exists(f):
            raise FileNotFoundError(f"{f}: no such file")
        if not os.path.isfile(f):
            raise ValueError(f"{f}: not a file")
        if log_kind(f) not in kinds:
            raise ValueError(f"{f}: a {log_kind(f)} file, where {' or '.join(kinds)} files are read")
    return files


def _folder_files(folder: str, kinds) -> list[str]:
    suffixes = tuple(s for kind in kinds for s in LOG_SUFFIXES[kind])
    found, others = [], []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in names:
            if name.startswith((".", "_")) or name.lower().endswith(SIDECAR_SUFFIX):
                continue
            (found if name.lower().endswith(suffixes) else others).append(os.path.join(root, name))
    if others:
        raise ValueError(f"{sorted(others)[0]}: not a log file ({', '.join(suffixes)}) in the log folder {folder}; "
                         "move it out, or give the log files as a list or a glob pattern")
    return sorted(found)


# ----------------------------------------------------------------------------- the digest

def _canonical(values, dtype: np.dtype, name: str) -> np.ndarray:
    """``values`` as ``dtype`` (booleans as uint8), or ``ValueError`` if that changes a value."""
    arr = np.asarray(values)
    if arr.dtype.kind == "b" and dtype.kind == "b" or arr.dtype == dtype:
        out = arr
    elif arr.dtype.kind in "biu" and dtype.kind in "biu":
        out = arr.astype(dtype)
        if not np.array_equal(out, arr):
            raise ValueError(f"column {name!r} holds values that do not fit its recorded type {dtype}")
    else:
        raise ValueError(f"column {name!r} holds {arr.dtype} values where its digest records {dtype}")
    return np.ascontiguousarray(out.view(np.uint8) if out.dtype.kind == "b" else out)


#: The digest's type name of a column of strings (a raw log's ids).
_STR = "str"


def _string_parts(values, name: str) -> tuple[np.ndarray, memoryview]:
    """The UTF-8 lengths (int64) and bytes of a column of strings, or ``ValueError`` for anything else."""
    import pyarrow as pa

    try:
        arr = pa.array(np.asarray(values, dtype=object), type=pa.large_string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise ValueError(f"column {name!r} holds values that are not strings where its digest records strings") \
            from None
    if arr.null_count:
        raise ValueError(f"column {name!r} holds a missing value where its digest records strings")
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data = arr.buffers()[2]
    return np.diff(offsets), memoryview(data)[offsets[0]:offsets[-1]] if data is not None else memoryview(b"")


class _ColumnHashes:
    """SHA-256 of each column's canonical bytes, updated batch by batch in row order.

    A column of strings has two running hashes, of its values' UTF-8 lengths and of their bytes, so
    the digest does not depend on how the rows were cut into batches.
    """

    def __init__(self, dtypes: dict):
        self.dtypes = {name: _STR if str(dt) == _STR else np.dtype(dt) for name, dt in dtypes.items()}
        self.hashes = {name: hashlib.sha256() for name in dtypes}
        self.texts = {name: hashlib.sha256() for name, dt in self.dtypes.items() if dt is _STR}
        self.rows = 0

    def update(self, frame) -> None:
        for name, dtype in self.dtypes.items():
            if dtype is _STR:
                lengths, data = _string_parts(frame[name].to_numpy(dtype=object), name)
                self.hashes[name].update(lengths.data)
                self.texts[name].update(data)
            else:
                self.hashes[name].update(_canonical(frame[name].to_numpy(), dtype, name).data)
        self.rows += len(frame)

    def result(self) -> dict:
        columns = {}
        for name, h in self.hashes.items():
            if name in self.texts:
                columns[name] = [_STR, hashlib.sha256(h.digest() + self.texts[name].digest()).hexdigest()]
            else:
                columns[name] = [self.dtypes[name].name, h.hexdigest()]
        return {"format": _FORMAT, "version": 1, "rows": self.rows, "columns": columns}


def content_digest(frame) -> dict:
    """The digest of a log frame's columns: per column its dtype and the SHA-256 of its values, and the rows.

    Parameters
    ----------
    frame : pandas DataFrame
        Columns of integers or booleans, or of strings (a raw log's ids).

    Returns
    -------
    dict (JSON-ready)

    Examples
    --------
    >>> import pandas as pd
    >>> digest = content_digest(pd.DataFrame({"doc": [3, 1], "click": [True, False]}))
    >>> digest["rows"], digest["columns"]["click"][0]
    (2, 'bool')
    """
    import pandas as pd

    dtypes = {}
    for name in frame.columns:
        dtype = frame[name].to_numpy().dtype
        if dtype.kind not in "biu":
            if pd.api.types.infer_dtype(frame[name], skipna=False) != "string":
                raise ValueError(f"column {name!r} of a log frame holds {dtype} values; a log holds integers, "
                                 "booleans and string ids")
            dtype = _STR
        dtypes[str(name)] = dtype
    hashes = _ColumnHashes(dtypes)
    hashes.update(frame)
    return hashes.result()


def _parse_digest(text, where: str) -> dict:
    try:
        digest = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise ValueError(f"{where}: its digest is unreadable ({type(err).__name__}): the file is corrupted") from None
    ok = (isinstance(digest, dict) and digest.get("format") == _FORMAT and digest.get("version") == 1
          and isinstance(digest.get("rows"), int) and isinstance(digest.get("columns"), dict)
          and all(isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v)
                  for v in digest["columns"].values()))
    if not ok:
        raise ValueError(f"{where}: its digest is malformed: the file is corrupted")
    try:
        for dtype, _ in digest["columns"].values():
            if dtype != _STR and np.dtype(dtype).kind not in "biu":
                raise TypeError(dtype)
    except TypeError:
        raise ValueError(f"{where}: its digest is malformed: the file is corrupted") from None
    return digest


def _check_against(digest: dict, hashes: _ColumnHashes, where: str) -> None:
    found = hashes.result()
    if found["rows"] != digest["rows"]:
        raise ValueError(f"{where}: {found['rows']} rows read where its digest records {digest['rows']}: the file "
                         "is corrupted or was changed after it was written")
    for name, (dtype, expected) in digest["columns"].items():
        if name in found["columns"] and found["columns"][name] != [dtype, expected]:
            raise ValueError(f"{where}: column {name!r} does not match its digest: the file is corrupted or was "
                             "changed after it was written (a CSV edited on purpose: delete its .digest file)")


def _sidecar(path: str) -> str:
    return path + SIDECAR_SUFFIX


# ----------------------------------------------------------------------------- writing

def write_log_frame(frame, path, kind: str | None = None) -> None:
    """Write a log frame to Parquet (with page checksums and the digest in its metadata) or CSV (with a sidecar).

    Parameters
    ----------
    frame : pandas DataFrame
        The columns of ``ClickLog.to_frame()`` (integers and booleans).
    path : str or path-like
        Ending in one of :data:`LOG_SUFFIXES`; replaced if it exists (with its digest file).
    kind : {"parquet", "csv"}, optional
        The file type, whatever the name (default: from the name).

    Returns
    -------
    None

    Examples
    --------
    >>> import os, tempfile, pandas as pd
    >>> path = os.path.join(tempfile.mkdtemp(), "log.csv")
    >>> write_log_frame(pd.DataFrame({"doc": [3, 1], "click": [True, False]}), path)
    >>> os.path.exists(path + ".digest"), read_log_frame(path)["doc"].tolist()
    (True, [3, 1])
    """
    path = os.fspath(path)
    kind = kind or log_kind(path)
    digest = json.dumps(content_digest(frame), separators=(",", ":"))
    if kind == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        # Only the digest as metadata: no pandas metadata to decode (or to be corrupted) on read.
        table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata({DIGEST_KEY: digest})
        pq.write_table(table, path, write_page_checksum=True)
        return
    if os.path.exists(_sidecar(path)):
        os.remove(_sidecar(path))         # never leave an old digest beside a new file
    frame.to_csv(path, index=False)
    with open(_sidecar(path), "w", encoding="utf-8") as fh:
        fh.write(digest + "\n")


# ----------------------------------------------------------------------------- reading

def _parquet_handle(path: str):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path, page_checksum_verification=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except Exception as err:  # pyarrow raises several types for a file that is not Parquet
        raise ValueError(f"{path}: not a readable Parquet file ({type(err).__name__}: {_first_line(err)})"
                         f"{_text_hint(path)}") from None


def _text_hint(path) -> str:
    """A hint when a file named as Parquet starts like a CSV file (a first line of text with commas)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return ""
    first = head.split(b"\n", 1)[0]
    try:
        first.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    if b"," not in first or b"\x00" in head:
        return ""
    return "; it starts like a CSV file: if it is one, give it a .csv name (the file type is read from the name)"


def _first_line(err) -> str:
    text = str(err)
    return text.splitlines()[0] if text else repr(err)


def _digest_of_file(path: str, kind: str, handle=None):
    """The digest a file carries, or ``None`` for a file without one (a user's own)."""
    if kind == "parquet":
        metadata = handle.schema_arrow.metadata or {}
        text = metadata.get(DIGEST_KEY)
        if text is None:
            return None
        if len(text) > _MAX_DIGEST_BYTES:
            raise ValueError(f"{path}: its digest is malformed: the file is corrupted")
        return _parse_digest(text, path)
    sidecar = _sidecar(path)
    if not os.path.isfile(sidecar):
        return None
    if os.path.getsize(sidecar) > _MAX_DIGEST_BYTES:
        raise ValueError(f"{sidecar}: not a digest file (too large)")
    with open(sidecar, "rb") as fh:
        return _parse_digest(fh.read(), f"{path} (digest file {sidecar})")


def log_columns(path, kind: str | None = None) -> list[str]:
    """The column names of a log file, read from its footer (Parquet) or header line (CSV).

    Parameters
    ----------
    path : str or path-like
        A Parquet or CSV log file.
    kind : {"parquet", "csv"}, optional
        The file type, whatever the name (default: from the name).

    Returns
    -------
    list of str

    Examples
    --------
    >>> import os, tempfile, pandas as pd
    >>> path = os.path.join(tempfile.mkdtemp(), "log.csv")
    >>> write_log_frame(pd.DataFrame({"doc": [1], "click": [True]}), path)
    >>> log_columns(path)
    ['doc', 'click']
    """
    path = os.fspath(path)
    if (kind or log_kind(path)) == "parquet":
        return list(_parquet_handle(path).schema_arrow.names)
    import pandas as pd

    try:
        return [str(c) for c in pd.read_csv(path, nrows=0).columns]
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except _CSV_ERRORS as err:
        raise ValueError(f"{path}: cannot be read as CSV ({type(err).__name__}: {_first_line(err)})") from None


def iter_log_batches(path, columns=None, batch_size: int | None = 1 << 20, kind: str | None = None, ids=()):
    """The rows of one log file as pandas frames of at most ``batch_size`` rows, verified as they are read.

    Parquet page checksums are verified per page; the digest (when the file has one) is
    compared with the columns read, and the last batch is only yielded once the whole file
    matched, so a consumer that reaches the end has read verified data.

    Parameters
    ----------
    path : str or path-like
        A Parquet or CSV log file.
    columns : list of str, optional
        The columns to read (default all); the digest is checked on these.
    batch_size : int or None
        Rows per frame (``None``: the whole file as one frame).
    kind : {"parquet", "csv"}, optional
        The file type, whatever the name (default: from the name).
    ids : list of str, optional
        Columns of ids. In a CSV file without a digest they are read as text and made integers only
        where that writes back the same text (:func:`~counterfactual_ltr.ids.ids_from_text`), so
        ``"00123"`` is not read as ``123``; a digest says the types itself.

    Yields
    ------
    pandas DataFrame

    Raises
    ------
    ValueError
        Naming the file: not readable, corrupted pages, a column missing, content that does not
        match the digest.

    Examples
    --------
    >>> import os, tempfile, pandas as pd
    >>> path = os.path.join(tempfile.mkdtemp(), "log.parquet")
    >>> write_log_frame(pd.DataFrame({"doc": range(5), "click": [True] * 5}), path)
    >>> [len(batch) for batch in iter_log_batches(path, ["doc"], batch_size=2)]
    [2, 2, 1]
    """
    path = os.fspath(path)
    kind = kind or log_kind(path)
    handle = _parquet_handle(path) if kind == "parquet" else None
    digest = _digest_of_file(path, kind, handle)
    names = handle.schema_arrow.names if handle is not None else None
    if names is not None and columns is not None and any(c not in names for c in columns):
        raise ValueError(f"{path}: the log lacks the columns {[c for c in columns if c not in names]}")
    # A CSV does not say that "00123" or "123" is a string id: the digest does, and such columns are
    # read as text (nothing turned into a missing value), so the ids come back as they were written.
    text = [c for c, (dt, _) in digest["columns"].items() if dt == _STR] if digest is not None else []
    batches = _parquet_batches(handle, path, columns, batch_size) if kind == "parquet" \
        else _csv_batches(path, columns, batch_size, text, ids=() if digest is not None else ids)
    hashes = None
    if digest is not None:
        wanted = columns if columns is not None else list(digest["columns"])
        missing = [c for c in digest["columns"] if names is not None and c not in names]
        if missing:
            raise ValueError(f"{path}: the column {missing[0]!r} of its digest is missing: the file is corrupted")
        hashes = _ColumnHashes({c: digest["columns"][c][0] for c in wanted if c in digest["columns"]})
    pending = None
    for batch in batches:
        if hashes is not None:
            try:
                hashes.update(batch)
            except (ValueError, KeyError) as err:
                raise ValueError(f"{path}: {err}: the file is corrupted or was changed after it was written") from None
        if pending is not None:
            yield pending
        pending = batch
    if hashes is not None:
        _check_against(digest, hashes, path)
    if pending is not None:
        yield pending


def _parquet_batches(handle, path, columns, batch_size):
    import pyarrow as pa

    try:
        if batch_size is None:
            yield handle.read(columns=columns).to_pandas()
            return
        for batch in handle.iter_batches(batch_size=batch_size, columns=columns):
            yield batch.to_pandas()
    except (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError, MemoryError,
            NotImplementedError, OverflowError) as err:
        raise ValueError(f"{path}: corrupted Parquet data ({type(err).__name__}: {_first_line(err)})") from None


def _csv_batches(path, columns, batch_size, text=(), ids=()):
    """``text``: the columns a digest says are strings; ``ids``: id columns of a file without a digest."""
    import pandas as pd

    from ..ids import ids_from_text

    options = {"usecols": columns, "low_memory": False}   # each batch's types from the whole batch
    if text:    # a digest's text columns: every value as written
        options |= {"dtype": {c: str for c in text}, "keep_default_na": False, "na_values": []}
    if ids:     # no digest: missing values stay missing here (and are refused as ids)
        options |= {"dtype": {c: str for c in ids}}
    try:
        chunks = [pd.read_csv(path, **options)] if batch_size is None \
            else pd.read_csv(path, chunksize=batch_size, **options)
        for chunk in chunks:
            for name in set(ids) & set(chunk.columns):
                chunk[name] = ids_from_text(chunk[name])
            yield chunk
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except _CSV_ERRORS as err:
        raise ValueError(f"{path}: cannot be read as CSV ({type(err).__name__}: {_first_line(err)})") from None


def read_log_frame(source, columns=None, kind: str | None = None, ids=()):
    """The whole log of ``source`` (a file, a folder of files, a glob or a list) as one verified pandas frame.

    Parameters
    ----------
    source : path, folder, glob pattern or list of paths
        Parquet and CSV log files (see :func:`log_files`).
    columns : list of str, optional
        The columns to read (default all).
    kind : {"parquet", "csv"}, optional
        Read every file as this type whatever its name (a folder then holds only such files).
    ids : list of str, optional
        Columns of ids, read from CSV as :func:`iter_log_batches` says.

    Returns
    -------
    pandas DataFrame
        The files' rows one after the other, in sorted file order.

    Examples
    --------
    See :func:`write_log_frame`.
    """
    import pandas as pd

    if kind is not None and not isinstance(source, (list, tuple)) and not os.path.isdir(source):
        files = [os.fspath(source)]           # one file of the given type, whatever its name
    else:
        files = log_files(source, kinds=(kind,) if kind else ("parquet", "csv"))
    parts = [batch for path in files for batch in iter_log_batches(path, columns, None, kind=kind, ids=ids)]
    if not parts:
        return pd.DataFrame(columns=columns) if columns is not None else pd.DataFrame()
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
