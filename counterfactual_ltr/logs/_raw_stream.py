"""Raw event logs streamed into a count table: the raw-log options of ``aggregate_clicks``.

Every stretch of whole pages goes through what ``ClickLog.from_events(...).with_data(data,
missing=...)`` does in memory (:func:`~counterfactual_ltr.logs.raw_events.event_arrays`, the join by
(query id, document id), the same drops) and is counted; the stretches' tables are merged, so
the aggregate is exactly that of the in-memory path. How the stream is cut into stretches of
whole pages depends on how pages are known:

* **With a page column** (``session``): a page's rows may be anywhere in the log. Rows are
  spread by a hash of their page id over buckets of about one batch each (temporary files on
  this machine; with Dask, pieces that stay on the workers), and every bucket, which holds
  whole pages, is counted.
* **Without** (pages are runs of consecutive rows, the ``from_events`` rule): the last page of a
  batch may continue in the next batch, so it waits for it. With Dask every partition counts its
  inner pages where it is and sends only its first and last page here, to be joined in order.

Rows keep a code ``source << 40 | row`` (file or partition, row in it), so an error names the
file and the row. Ids are checked for one kind per column across the log (strings, or
integers: 64-bit signed and unsigned parts are put together exactly, never through floats).
"""

from __future__ import annotations

import os
import pickle
import re
import tempfile
from dataclasses import dataclass

import numpy as np

from ._count_table import count_table, merge_two
from .._segments import segment_ids
from ..ids import format_id
from .raw_events import event_arrays, join_rows, kept_after_join, later_showings, phantom_example, \
    phantom_page_starts, without_repeats

__all__ = ["RAW_ROLES", "PageCounts", "count_pages", "stream_counts", "dask_counts"]

#: The roles of a raw log's columns, in the order of ``aggregate_clicks``' options.
RAW_ROLES = ("query", "doc", "position", "click", "session")
_ID_ROLES = ("query", "doc", "session")
_ROW_BITS = 40
_MAX_BUCKETS = 512                 # open bucket files at a time (file handles)


@dataclass
class PageCounts:
    """What a stretch of whole pages gives: its count table and the join's bookkeeping."""

    table: tuple | None = None
    n_sessions: int = 0            # pages kept
    n_pages: int = 0               # pages read
    n_rows: int = 0                # shown results read
    dropped_rows: int = 0
    dropped_pages: int = 0
    unknown: object = None         # distinct (query, doc) pairs without features (a pandas frame), or None
    repeated_pages: int = 0        # kept-so-far pages that show a document twice (dropped or cut)
    repeated_rows: int = 0         # their later showings
    repeated_named: tuple = ()     # a few of them, by their ids (rows as ``frame row <code>``)
    phantoms: int = 0              # pages cut from runs that start by repeating a row (RepeatedRowWarning)
    phantom_example: str | None = None

    def __add__(self, other: "PageCounts") -> "PageCounts":
        import pandas as pd

        unknown = [u for u in (self.unknown, other.unknown) if u is not None]
        return PageCounts(merge_two(self.table, other.table), self.n_sessions + other.n_sessions,
                          self.n_pages + other.n_pages, self.n_rows + other.n_rows,
                          self.dropped_rows + other.dropped_rows, self.dropped_pages + other.dropped_pages,
                          pd.concat(unknown).drop_duplicates() if len(unknown) > 1 else
                          unknown[0] if unknown else None,
                          self.repeated_pages + other.repeated_pages, self.repeated_rows + other.repeated_rows,
                          (self.repeated_named + other.repeated_named)[:3], self.phantoms + other.phantoms,
                          self.phantom_example or other.phantom_example)


def _frame(piece: dict, names: dict):
    """A piece (column arrays and ``_row`` codes) as the frame ``event_arrays`` reads, indexed by row code."""
    import pandas as pd

    return pd.DataFrame({names[r]: piece[r] for r in RAW_ROLES if names[r] is not None}, index=piece["_row"])


def count_pages(piece: dict, data, names: dict, missing: str, repeated: str = "raise") -> PageCounts:
    """The count table of a stretch of whole pages, joined to ``data`` as ``with_data`` joins.

    Parameters
    ----------
    piece : dict of role -> array, with ``_row`` (row codes)
        The rows of whole pages.
    data : RankingDataset
        The features, keyed by (query id, document id).
    names : dict of role -> column name (or None)
        The columns of the raw log.
    missing : {"raise", "drop_sessions", "drop_rows"}
        As in :meth:`ClickLog.with_data`; ``"raise"`` records the pairs without features (the
        caller raises once the whole log is read, with their count).
    repeated : {"drop_pages", "keep_first", "raise"}
        Pages that show a document twice, as in :meth:`ClickLog.with_data` (the caller warns once
        with the counts this records).

    Returns
    -------
    PageCounts
    """
    if len(piece["_row"]) == 0:
        return PageCounts()
    a = event_arrays(_frame(piece, names), **{r: names[r] for r in RAW_ROLES}, warn_phantoms=False)
    keys = a["ids"].row_keys()
    data_row, known = join_rows(keys, data, "drop_rows", check_types=False)     # types: on the unknown pairs
    offsets, rows = a["offsets"], a["rows"]
    n_pages = len(offsets) - 1
    item_page = segment_ids(offsets)
    shown_known = known[rows]
    unknown = None
    if not shown_known.all() and missing == "raise":
        import pandas as pd

        lost = np.unique(rows[~shown_known])
        unknown = pd.DataFrame({"query": keys[0][lost], "doc": keys[1][lost]})
    keep_items, keep_pages = kept_after_join(item_page, shown_known,  n_pages,
                                             "drop_rows" if missing == "raise" else missing)
    dropped_rows, dropped_pages = int((~keep_items).sum()), int((~keep_pages).sum())    # for missing features
    repeats = {}
    if repeated != "raise":
        later = later_showings(item_page, rows) & keep_items
        if later.any():
            keep_items, keep_pages, pages = without_repeats(later, keep_items, keep_pages, item_page, repeated)
            first = np.flatnonzero(later)[np.unique(item_page[later], return_index=True)[1][:3]]
            repeats = {"repeated_pages": pages.size, "repeated_rows": int(later.sum()), "repeated_named": tuple(
                f"{_page_name(a, item_page[i], piece['_row'][i] if names['session'] is None else None)} (query "
                f"{format_id(keys[0][rows[i]])}, document {format_id(keys[1][rows[i]])})" for i in first)}
    docs = data_row[rows[keep_items]]
    page = (np.cumsum(keep_pages) - 1)[item_page[keep_items]]
    _check_no_repeat(data, docs, page, a, keep_pages, None if names["session"] is not None
                     else piece["_row"][keep_items])
    return PageCounts(count_table(docs, a["positions"][keep_items], a["clicks"][keep_items]),
                      int(keep_pages.sum()), n_pages, len(rows), dropped_rows, dropped_pages, unknown, **repeats)


def _page_name(arrays, page: int, row_code=None) -> str:
    """A page by its id, or (pages without ids) by a row of it, ``frame row <code>`` (relocated later)."""
    if row_code is not None:
        return f"the page of frame row {row_code}"
    return f"page {format_id(arrays['session_ids'][page])}"


def _check_no_repeat(data, docs, page, arrays, keep_pages, row_codes=None) -> None:
    """``ValueError`` for a kept page that shows one document twice (a learner's session shows it once).

    The page is named by its id, or (``row_codes``: pages without ids, rows in input order) by the
    row that shows the document again.
    """
    from .session_checks import first_repeated_item

    if docs.size == 0:
        return
    starts = np.flatnonzero(np.r_[True, page[1:] != page[:-1]])
    repeated = first_repeated_item(data, data.query_index[docs[starts]], page, docs)
    if repeated is not None:
        doc = format_id(data.doc_keys[docs[repeated]])
        where = f"the page of frame row {row_codes[repeated]}" if row_codes is not None else \
            f"page {format_id(arrays['session_ids'][np.flatnonzero(keep_pages)[page[repeated]]])}"
        raise ValueError(f"{where} shows document {doc} twice: a log joined to features shows each document at "
                         "most once per page (repeated='drop_pages' or 'keep_first' drops such pages or rows)")


# ------------------------------------------------------------------------ pieces of a stream

def piece_of(frame, names: dict, source: int, first_row: int) -> dict:
    """The named columns of a batch as arrays (``_row``: the rows' codes), nothing converted."""
    piece = {r: frame[names[r]].to_numpy() for r in RAW_ROLES if names[r] is not None}
    piece["_row"] = (np.int64(source) << _ROW_BITS) + first_row + np.arange(len(frame), dtype=np.int64)
    return piece


def _concat_values(parts: list, role: str, names: dict, rows: list | None = None) -> np.ndarray:
    """Column parts put together; 64-bit signed and unsigned ids exactly (NumPy would make floats).

    ``rows``: each part's row codes, so that a column typed differently in two parts names where.
    """
    kinds = {p.dtype.kind for p in parts}
    if role in _ID_ROLES and kinds & {"i", "u"} and kinds - {"i", "u"}:
        integer = next(k for k, p in enumerate(parts) if p.dtype.kind in "iu" and len(p))
        other = next(k for k, p in enumerate(parts) if p.dtype.kind not in "iu" and len(p))
        if rows is None:
            raise ValueError(f"column {names[role]!r} holds integers in one part of the log and other values in "
                             "another; write the ids the same way everywhere")
        a, b = int(rows[integer][0]), int(rows[other][0])
        where = (f"integers from frame row {a} and other values (e.g. {format_id(parts[other][0])}) from frame "
                 f"row {b}")
        if a >> _ROW_BITS != b >> _ROW_BITS:
            raise ValueError(f"column {names[role]!r} holds {where}: each file's ids are typed on their own (a CSV "
                             "column of digits is read as integers), and the two files hold different kinds; write "
                             "the ids the same way in every file (e.g. Parquet with the ids as strings)")
        raise ValueError(f"column {names[role]!r} holds {where}: a CSV's types are read batch by batch, so ids that "
                         "look like numbers in one batch are integers there; give a batch_size of at least the "
                         "file's rows, or write the log as Parquet with the ids as strings")
    if kinds == {"i", "u"} and role in _ID_ROLES:
        if all(p.min(initial=0) >= 0 for p in parts if p.dtype.kind == "i"):
            parts = [p.astype(np.uint64) for p in parts]
        elif all(p.max(initial=0) < 2**63 for p in parts if p.dtype.kind == "u"):
            parts = [p.astype(np.int64) for p in parts]
        else:
            raise ValueError(f"column {names[role]!r} holds negative ids and ids beyond 2**63 - 1: no 64-bit "
                             "integer type holds both; write the ids as strings")
    return np.concatenate(parts)


def concat_pieces(pieces: list, names: dict) -> dict:
    """Pieces of a stream one after the other, as one piece."""
    pieces = [p for p in pieces if len(p["_row"])]
    if len(pieces) <= 1:
        return pieces[0] if pieces else {r: np.zeros(0) for r in RAW_ROLES if names[r] is not None} | {
            "_row": np.zeros(0, dtype=np.int64)}
    rows = [p["_row"] for p in pieces]
    return {r: _concat_values([p[r] for p in pieces], r, names, rows) for r in pieces[0]}


def _take(piece: dict, start: int, stop: int | None = None) -> dict:
    return {r: v[start:stop] for r, v in piece.items()}


def _page_codes(piece: dict, names: dict, with_docs: bool = False):
    """``(page starts, query codes, positions, frame)`` of a stretch without a page column."""
    from ..datasets import _frame_column
    from ..ids import factorize, id_column

    frame = _frame(piece, names)
    if len(frame) == 0:
        return np.zeros(0, dtype=np.int64), None, None, frame
    query, _ = factorize(id_column(frame, names["query"]))
    position = _frame_column(frame, names["position"], as_click=False)
    starts = np.flatnonzero(np.r_[True, (query[1:] != query[:-1]) | (position[1:] <= position[:-1])])
    return starts, query, position, frame


def phantom_counts(piece: dict, names: dict, from_row: int = 1, codes=None) -> PageCounts:
    """The pages starting at row ``from_row`` or later that repeat a row of the page before.

    :func:`~counterfactual_ltr.logs.raw_events.phantom_page_starts` over a stretch of whole
    pages; each page start of a stream is looked at once, in the first stretch that holds it
    with the page before (``from_row`` skips the starts looked at already).
    """
    from ..ids import factorize, id_column

    starts, query, position, frame = codes if codes is not None else _page_codes(piece, names)
    if starts[starts >= max(from_row, 1)].size == 0:
        return PageCounts()
    query_ids = id_column(frame, names["query"])
    doc_code, doc_ids = factorize(id_column(frame, names["doc"]))
    found = phantom_page_starts(np.r_[starts, len(frame)], query, doc_code, position)
    found = found[found >= from_row]
    if found.size == 0:
        return PageCounts()
    i = int(found[0])
    example = phantom_example(i, f"frame row {piece['_row'][i]}", query_ids, np.arange(len(frame)), doc_ids,
                              doc_code, position)
    return PageCounts(phantoms=found.size, phantom_example=example)


def inner_pages(pieces, data, names: dict, missing: str, repeated: str = "raise") -> tuple[PageCounts, dict | None, dict | None]:
    """A stream without a page column: ``(counts of its inner pages, first page, last page)``.

    The first and last pages may continue in the neighbouring streams; ``last`` is None when the
    stream holds one page (or part of one), which is then ``first``.
    """
    counts, first, carry = PageCounts(), None, None
    for piece in pieces:
        if len(piece["_row"]) == 0:
            continue
        piece = concat_pieces([carry, piece], names) if carry is not None else piece
        codes = _page_codes(piece, names)
        starts = codes[0]
        if starts.size > 1:               # page starts after the first are new here (the carry is one page)
            counts = counts + phantom_counts(piece, names, 1, codes)
        lo = 0
        if first is None:
            if starts.size == 1:          # still inside the first page
                carry = piece
                continue
            first, lo = _take(piece, 0, starts[1]), starts[1]
        if starts[-1] > lo:
            counts = counts + count_pages(_take(piece, lo, starts[-1]), data, names, missing, repeated)
        carry = _take(piece, starts[-1])
    if first is None:
        return counts, carry, None
    return counts, first, carry


def _join_edges(edges, data, names: dict, missing: str, repeated: str = "raise") -> PageCounts:
    """Count the first and last pages of consecutive streams (``(first, last)`` each, in order)."""
    counts, carry = PageCounts(), None
    for first, last in edges:
        stretch = concat_pieces([p for p in (carry, first) if p is not None], names) if first is not None else carry
        if carry is not None and first is not None:    # where two streams meet a page may start
            counts = counts + phantom_counts(stretch, names, len(carry["_row"]))
        if last is None:                  # the stream was one page: it may go on in the next one
            carry = stretch
            continue
        counts = counts + count_pages(stretch, data, names, missing, repeated)
        carry = last
    if carry is not None:
        counts = counts + count_pages(carry, data, names, missing, repeated)
    return counts


# ------------------------------------------------------------------------ buckets of pages

def _bucket_of(piece: dict, bits: int) -> np.ndarray:
    """A bucket per row from a hash of its page id (the same id gives the same bucket in every batch)."""
    import pandas as pd

    if bits == 0:
        return np.zeros(len(piece["_row"]), dtype=np.int64)
    values = piece["session"]
    if values.dtype.kind == "u":           # the same bits as int64: equal ids hash alike across batches
        values = values.view(np.int64)
    hashed = pd.util.hash_array(values if values.dtype.kind != "O" else values.astype(object))
    return (hashed >> np.uint64(64 - bits)).astype(np.int64)


def split_piece(piece: dict, bits: int) -> list:
    """A piece cut into ``2**bits`` pieces by the hash of the page id (rows keep their order)."""
    bucket = _bucket_of(piece, bits)
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange((1 << bits) + 1))
    return [{r: v[order[bounds[k]:bounds[k + 1]]] for r, v in piece.items()} for k in range(1 << bits)]


def _bucket_counts(pieces, data, names: dict, missing: str, repeated: str, n_rows: int,
                   batch_size: int) -> PageCounts:
    """Pages with a page column, in any order: hashed into temporary files of about one batch, each counted."""
    bits = int(np.ceil(np.log2(min(max(1, -(-n_rows // batch_size)), _MAX_BUCKETS))))
    if bits == 0:
        return count_pages(concat_pieces(list(pieces), names), data, names, missing, repeated)
    counts = PageCounts()
    with tempfile.TemporaryDirectory(prefix="cltr_pages_") as tmp:
        paths = [os.path.join(tmp, f"{k}.pkl") for k in range(1 << bits)]
        for piece in pieces:
            for path, part in zip(paths, split_piece(piece, bits)):
                if len(part["_row"]):
                    with open(path, "ab") as fh:   # our own temporary files, read back by this process only
                        pickle.dump(part, fh, protocol=pickle.HIGHEST_PROTOCOL)
        for path in paths:
            if not os.path.exists(path):
                continue
            parts = []
            with open(path, "rb") as fh:
                while True:
                    try:
                        parts.append(pickle.load(fh))
                    except EOFError:
                        break
            counts = counts + count_pages(concat_pieces(parts, names), data, names, missing, repeated)
    return counts


# ------------------------------------------------------------------------ the two engines

def stream_counts(pieces, data, names: dict, missing: str, *, n_rows: int, batch_size: int,
                  repeated: str = "raise") -> PageCounts:
    """All pages of a stream of pieces (one machine), counted in bounded memory.

    Parameters
    ----------
    pieces : iterable of dict
        The log's rows in order, as pieces (:func:`piece_of`).
    data : RankingDataset
        The features.
    names : dict of role -> column name (or None)
        The raw log's columns.
    missing : {"raise", "drop_sessions", "drop_rows"}
        As in :meth:`ClickLog.with_data`.
    n_rows : int
        About how many rows the log has (sets the number of buckets).
    batch_size : int
        Rows per bucket wanted.
    repeated : {"drop_pages", "keep_first", "raise"}
        Pages that show a document twice, as in :meth:`ClickLog.with_data`.

    Returns
    -------
    PageCounts
    """
    if names["session"] is not None:
        return _bucket_counts(pieces, data, names, missing, repeated, n_rows, batch_size)
    counts, first, last = inner_pages(pieces, data, names, missing, repeated)
    return counts + _join_edges([(first, last)], data, names, missing, repeated) if first is not None else counts


def _split_task(item, k: int, names: dict, bits: int, read):
    """A Dask task: one file or partition cut into buckets by page id."""
    return tuple(split_piece(concat_pieces(list(read(item, k)), names), bits))


def _bucket_task(parts, data, names: dict, missing: str, repeated: str) -> PageCounts:
    return count_pages(concat_pieces(list(parts), names), data, names, missing, repeated)


def _edge_task(item, k: int, data, names: dict, missing: str, repeated: str, read):
    return inner_pages(read(item, k), data, names, missing, repeated)


def dask_counts(items, data, names: dict, missing: str, read, repeated: str = "raise") -> PageCounts:
    """All pages of files or partitions counted with Dask: pieces and counts stay on the workers.

    Parameters
    ----------
    items : list
        Files (paths) or delayed partitions, in the log's order.
    data : RankingDataset
        The features.
    names : dict of role -> column name (or None)
        The raw log's columns.
    missing : {"raise", "drop_sessions", "drop_rows"}
        As in :meth:`ClickLog.with_data`.
    read : callable
        ``read(item, k)`` yields the pieces of item ``k``.
    repeated : {"drop_pages", "keep_first", "raise"}
        Pages that show a document twice, as in :meth:`ClickLog.with_data`.

    Returns
    -------
    PageCounts
    """
    import dask

    data_ref = dask.delayed(data, pure=True)
    if names["session"] is not None:
        bits = int(np.ceil(np.log2(min(max(1, len(items)), _MAX_BUCKETS))))
        splits = [dask.delayed(_split_task, nout=1 << bits)(item, k, names, bits, read)
                  for k, item in enumerate(items)]
        parts = [dask.delayed(_bucket_task)([s[b] for s in splits], data_ref, names, missing, repeated)
                 for b in range(1 << bits)]
        while len(parts) > 1:      # counts merged in a tree on the workers
            parts = [dask.delayed(_add)(parts[k], parts[k + 1]) if k + 1 < len(parts) else parts[k]
                     for k in range(0, len(parts), 2)]
        return dask.compute(parts[0])[0] if parts else PageCounts()
    results = dask.compute(*[dask.delayed(_edge_task)(item, k, data_ref, names, missing, repeated, read)
                             for k, item in enumerate(items)])
    counts = PageCounts()
    for inner, _, _ in results:
        counts = counts + inner
    return counts + _join_edges([(first, last) for _, first, last in results if first is not None], data, names,
                                missing, repeated)


def _add(a: PageCounts, b: PageCounts) -> PageCounts:
    return a + b


def relocate(err: ValueError | str, sources: list) -> ValueError | str:
    """The error (or text) with every ``frame row <code>`` turned into ``row <r> of <file or partition>``."""

    def place(match):
        code = int(match.group(1) or match.group(2))
        source, row = code >> _ROW_BITS, code & ((1 << _ROW_BITS) - 1)
        return f"row {row} of {sources[source]}" if source < len(sources) else match.group(0)

    text = re.sub(r"frame row (?:np\.int64\((\d+)\)|(\d+))", place, str(err))
    return text if isinstance(err, str) else ValueError(text)
