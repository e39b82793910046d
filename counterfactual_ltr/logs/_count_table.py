"""Count tables: click and impression counts per distinct shown ``(data-set row, position)``.

The learners' sufficient statistic of a log (see :mod:`counterfactual_ltr.logs.aggregate`); tables of
parts of a log merge into the table of the whole, so logs are counted in pieces.
"""

from __future__ import annotations

import numpy as np

__all__ = ["count_table", "merge_tables", "merge_two"]

_POSITION_BITS = 32


def count_table(docs, positions, clicks):
    """Click and impression counts per distinct ``(doc, position)``, sorted by doc then position.

    Parameters
    ----------
    docs, positions, clicks : arrays (n_items,)
        Data-set row, 1-based position and click flag of every shown item.

    Returns
    -------
    docs, positions, clicks, impressions : int64 arrays (n_distinct,)

    Examples
    --------
    >>> count_table([3, 1, 3, 3], [2, 1, 2, 1], [1, 0, 1, 0])[2].tolist()
    [0, 0, 2]
    """
    docs = np.asarray(docs, dtype=np.int64)
    positions = np.asarray(positions, dtype=np.int64)
    clicks = np.asarray(clicks, dtype=np.int64)
    return _merge_keys(np.left_shift(docs, _POSITION_BITS) | positions, clicks, np.ones_like(clicks))


def _merge_keys(keys, clicks, impressions):
    """Sum counts per distinct key; dense bincount when the key range is small, else a sort."""
    if keys.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    docs = keys >> _POSITION_BITS
    pos = keys & ((1 << _POSITION_BITS) - 1)
    lo, hi, max_pos = int(docs.min()), int(docs.max()), int(pos.max())
    span = (hi - lo + 1) * max_pos
    if span <= 4 * keys.size + 4096:
        dense = (docs - lo) * max_pos + (pos - 1)
        imp = np.bincount(dense, weights=impressions, minlength=span)
        clk = np.bincount(dense, weights=clicks, minlength=span)
        present = np.flatnonzero(imp)
        u_docs, u_pos = present // max_pos + lo, present % max_pos + 1
        return (u_docs.astype(np.int64), u_pos.astype(np.int64), np.rint(clk[present]).astype(np.int64),
                np.rint(imp[present]).astype(np.int64))
    if np.issubdtype(clicks.dtype, np.integer) and impressions.min() == 1 == impressions.max() \
            and clicks.min() >= 0 and clicks.max() <= 1 and int(keys.max()) < 1 << 62 and int(keys.min()) >= 0:
        # One impression per item, 0/1 clicks: one sort of the keys with the click as their lowest bit
        # (no argsort; 2.3M items: 0.27 s against 0.6 s for ``unique``), counts from the runs.
        packed = np.sort((keys << 1) | clicks)
        keys = packed >> 1
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        unique = keys[starts]
        return (unique >> _POSITION_BITS, unique & ((1 << _POSITION_BITS) - 1),
                np.add.reduceat(packed & 1, starts), np.diff(np.r_[starts, keys.size]))
    unique, inverse = np.unique(keys, return_inverse=True)
    clk = np.bincount(inverse, weights=clicks, minlength=unique.size)
    imp = np.bincount(inverse, weights=impressions, minlength=unique.size)
    return (unique >> _POSITION_BITS, unique & ((1 << _POSITION_BITS) - 1), np.rint(clk).astype(np.int64),
            np.rint(imp).astype(np.int64))


def merge_tables(tables):
    """Merge several ``(docs, positions, clicks, impressions)`` tables into one.

    Parameters
    ----------
    tables : list of tuples of four int64 arrays
        Count tables.

    Returns
    -------
    tuple of four int64 arrays
    """
    tables = [t for t in tables if t[0].size]
    if not tables:
        return _merge_keys(np.zeros(0, dtype=np.int64), None, None)
    if len(tables) == 1:
        return tables[0]
    docs, pos, clk, imp = (np.concatenate(parts) for parts in zip(*tables))
    return _merge_keys(np.left_shift(docs, _POSITION_BITS) | pos, clk, imp)


def merge_two(a, b):
    """Two count tables merged; ``None`` (nothing counted yet) on either side is nothing.

    Parameters
    ----------
    a, b : tuple of four int64 arrays, or None
        Count tables.

    Returns
    -------
    tuple of four int64 arrays, or None
    """
    return b if a is None else a if b is None else merge_tables([a, b])
