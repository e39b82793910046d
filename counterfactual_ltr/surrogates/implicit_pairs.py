"""Implicit click pairs: every clicked row against every other row of its query, never enumerated.

The propensity SVMs pair each clicked document ``a`` (an *anchor*, weight
``c_a``) with every other candidate ``y`` of its query. On long candidate
lists (hundreds to thousands per query) the pairs outnumber the documents by
the list length, so :class:`ClickPairs` keeps only the anchors and computes
every pair sum the solver needs from the scores sorted once per query
(prefix sums over the sorted scores; Joachims, KDD 2006, uses the same idea
for the linear-time ranking SVM). With the hinge argument
``z_ay = margin - (s_a - s_y)`` and the Huber-smoothed hinge's derivative
``clip(z / mu, 0, 1)``, the pairs of anchor ``a`` fall into three runs of
its query's sorted scores:

* idle, ``s_y <= s_a - margin`` (``z <= 0``);
* band, ``s_a - margin < s_y < s_a - margin + mu`` (quadratic piece);
* linear, ``s_y >= s_a - margin + mu``.

Two binary searches per anchor find the runs; sums over a run are
differences of prefix sums, and sums over the anchors that cover a row are
cumulative sums of difference arrays. One evaluation costs a sort per query
(``O(n log n)``) plus ``O(n + k log n)`` for ``k`` anchors, whatever the
number of pairs. The anchor's pair with itself (``z = margin``) cancels in
every per-document aggregate and is subtracted from the sums.
"""

from __future__ import annotations

import numpy as np

from .._linalg import pair_gram
from .._segments import (check_offsets, concat_ranges, padded_layout, segment_gather, segment_ids, segment_searchsorted,
                        sorted_within_queries)
from ._common import doc

__all__ = ["ClickPairs"]


class ClickPairs:
    """Pairs ``(a, y)``: every anchor row ``a`` against every other row ``y`` of its query.

    Pair ``(a, y)`` has weight ``weights[k]`` for anchor ``k`` (row
    ``anchors[k]``); the pair set is that of
    :func:`counterfactual_ltr.estimators.click_pairs`, without the index
    arrays. Pass it to :func:`counterfactual_ltr.solvers.solve_pairwise_hinge`
    as ``pairs_i`` (with ``pairs_j=None, pair_weights=None``).

    Parameters
    ----------
    query_offsets : (n_queries + 1,) int array
        Rows of each query of the feature matrix the pairs index.
    anchors : (k,) int array
        Anchor rows (clicked documents); a row may repeat.
    weights : (k,) array, >= 0
        Weight of every pair of each anchor.

    Examples
    --------
    >>> import numpy as np
    >>> pairs = ClickPairs([0, 3, 5], [0, 4], [2.0, 1.0])
    >>> pairs.n_pairs
    3
    >>> i, j, c = pairs.explicit()
    >>> i.tolist(), j.tolist(), c.tolist()
    ([0, 0, 4], [1, 2, 3], [2.0, 2.0, 1.0])
    >>> np.round(pairs.hinge_sums(np.array([1.0, 0.5, 3.0, 0.0, 0.2])), 12).tolist()   # 0.5 + 3, then 0.8
    [3.5, 0.8]
    """

    def __init__(self, query_offsets, anchors, weights):
        self.query_offsets = check_offsets(query_offsets)
        n = int(self.query_offsets[-1])
        anchors = np.asarray(anchors)
        if anchors.ndim != 1 or (anchors.size and not np.issubdtype(anchors.dtype, np.integer)):
            raise ValueError("anchors must be a 1-D array of integer row indices")
        anchors = anchors.astype(np.int64)
        if anchors.size and (anchors.min() < 0 or anchors.max() >= n):
            bad = anchors[(anchors < 0) | (anchors >= n)][0]
            raise ValueError(f"anchor row {bad} is out of range for {n} rows")
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != anchors.shape:
            raise ValueError(f"weights has shape {weights.shape}, expected {anchors.shape} (one per anchor)")
        bad = np.flatnonzero(~np.isfinite(weights) | (weights < 0))
        if bad.size:
            raise ValueError(f"weights must be finite and >= 0, got {weights[bad[0]]} at index {bad[0]}")
        self.anchors, self.weights = anchors, weights
        self.anchor_query = segment_ids(self.query_offsets)[anchors]
        self._layout = None

    @property
    def layout(self):
        """The padded per-query sort layout of the rows (computed once: every evaluation sorts)."""
        if getattr(self, "_layout", None) is None:     # (absent on objects pickled before it existed)
            self._layout = padded_layout(self.query_offsets)
        return self._layout

    @property
    def n_rows(self) -> int:
        return int(self.query_offsets[-1])

    @property
    def n_pairs(self) -> int:
        lengths = np.diff(self.query_offsets)
        return int(np.sum(lengths[self.anchor_query] - 1))

    def with_weights(self, weights) -> "ClickPairs":
        """The same pairs with new per-anchor weights.

        Parameters
        ----------
        weights : array (n_anchors,)
            Finite, ``>= 0``.

        Returns
        -------
        ClickPairs
        """
        new = object.__new__(ClickPairs)
        new.__dict__.update(self.__dict__)
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != self.anchors.shape or not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError(f"weights must be {self.anchors.shape[0]} finite values >= 0")
        new.weights = weights
        return new

    def explicit(self):
        """``(i, j, c)``: the pairs as index arrays (memory: three arrays of ``n_pairs``)."""
        i, j, owner = self.explicit_owners()
        return i, j, self.weights[owner]

    def explicit_owners(self):
        """``(i, j, owner)``: the pairs as index arrays, ``owner`` the anchor (0 .. n_anchors - 1) of each pair."""
        lengths = np.diff(self.query_offsets)[self.anchor_query]
        owner = np.repeat(np.arange(self.anchors.size), lengths)
        members = segment_gather(self.query_offsets, self.anchor_query)
        keep = members != self.anchors[owner]
        return self.anchors[owner[keep]], members[keep], owner[keep]

    @doc
    def hinge_sums(self, scores, margin: float = 1.0) -> np.ndarray:
        """Per anchor, ``sum_{y != a} max(0, margin - (s_a - s_y))`` (no pairs formed).

        Parameters
        ----------
        {pair_scores, hinge_margin}

        Returns
        -------
        array (n_anchors,)
        """
        scores = np.asarray(scores, dtype=np.float64)
        if scores.shape != (self.n_rows,):
            raise ValueError(f"scores has shape {scores.shape}, expected ({self.n_rows},)")
        return _Sorted(self, scores).hinge_per_anchor(float(margin))

    @doc
    def hinge_sums_and_ranks(self, scores, margin: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`hinge_sums` and each anchor's 1-based rank in its query, from one sort.

        Ranks follow the toolkit's convention (decreasing score, ties: the earlier row first).

        Parameters
        ----------
        {pair_scores, hinge_margin}

        Returns
        -------
        tuple of arrays (n_anchors,)
            The hinge sums and the ranks.

        Examples
        --------
        >>> import numpy as np
        >>> pairs = ClickPairs([0, 3, 5], [0, 2, 4], [1.0, 1.0, 1.0])
        >>> pairs.hinge_sums_and_ranks(np.array([1.0, 2.0, 1.0, 0.0, 0.5]))[1].tolist()
        [2, 3, 1]
        """
        scores = np.asarray(scores, dtype=np.float64)
        if scores.shape != (self.n_rows,):
            raise ValueError(f"scores has shape {scores.shape}, expected ({self.n_rows},)")
        srt = _Sorted(self, scores)
        return srt.hinge_per_anchor(float(margin)), srt.anchor_ranks()


class _Sorted:
    """The scores of one iterate, sorted per query, with prefix sums (shared by every pair sum)."""

    def __init__(self, pairs: ClickPairs, scores: np.ndarray):
        self.pairs = pairs
        self.s = scores
        self.order, self.ss = sorted_within_queries(scores, pairs.query_offsets, pairs.layout)
        self.prefix = np.empty(self.ss.size + 1)
        self.prefix[0] = 0.0
        np.cumsum(self.ss, out=self.prefix[1:])
        self.sa = scores[pairs.anchors]
        self.end = pairs.query_offsets[pairs.anchor_query + 1]

    def search(self, values, side):
        p = self.pairs
        return segment_searchsorted(self.ss, p.query_offsets, p.anchor_query, values, side=side)

    def hinge_per_anchor(self, margin, lo=None):
        """``lo``: the start of each anchor's non-idle run, if already searched (:meth:`runs`)."""
        if lo is None:
            lo = self.search(self.sa - margin, "right")
        count = self.end - lo
        total = self.prefix[self.end] - self.prefix[lo]
        # Sum over y after lo of (margin - s_a + s_y), minus the anchor's own pair (z = margin).
        return np.maximum(count * (margin - self.sa) + total - max(margin, 0.0), 0.0)

    def anchor_ranks(self):
        """1-based rank of each anchor in its query: decreasing score, ties by row order."""
        left, right = self.search(self.sa, "left"), self.search(self.sa, "right")
        # Ascending order keeps ties in row order: an anchor's place among its ties is the
        # number of tied rows before it, which rank above it.
        ahead = np.zeros(left.size, dtype=np.int64)
        tied = np.flatnonzero(right - left > 1)
        if tied.size:
            place = np.empty(self.order.size, dtype=np.int64)
            place[self.order] = np.arange(self.order.size)
            ahead[tied] = place[self.pairs.anchors[tied]] - left[tied]
        return 1 + (self.end - right) + ahead

    def runs(self, margin, mu):
        """Band ``[lo, hi)`` and linear ``[hi, end)`` runs of every anchor, in sorted positions."""
        lo = self.search(self.sa - margin, "right")
        hi = np.maximum(self.search(self.sa - margin + mu, "left"), lo)
        return lo, hi


class _Smoothed:
    """Everything Newton needs at one iterate: objective pieces, aggregate ``g``, band Laplacian."""

    def __init__(self, pairs: ClickPairs, scores, Cc, margin, mu, width=None):
        self.sorted = srt = _Sorted(pairs, scores)
        self.Cc, self.margin, self.mu = Cc, margin, mu
        # ``width > mu``: the quadratic piece is kept over ``0 < z < width`` with slope
        # ``1 / mu`` (unclipped): the Newton model of the solver's step right after mu shrinks.
        self.lo, self.hi = srt.runs(margin, mu if width is None else width)
        self.n = scores.shape[0]
        self._aggregate = None

    def hinge(self):
        """``sum_p C c_p max(0, z_p)``."""
        # The runs' idle bound (whatever the band's width) is where the hinge starts.
        return float(np.dot(self.Cc, self.sorted.hinge_per_anchor(self.margin, self.lo)))

    def aggregate(self):
        """``(g, alpha_sum)``: per-row aggregate of ``alpha = C c clip(z/mu, 0, 1)`` and ``sum alpha``."""
        if self._aggregate is None:
            self._aggregate = self._compute_aggregate()
        return self._aggregate

    def _compute_aggregate(self):
        srt, lo, hi, Cc, m, mu = self.sorted, self.lo, self.hi, self.Cc, self.margin, self.mu
        end, sa, P = srt.end, srt.sa, srt.prefix
        band = (hi - lo) * (m - sa) + (P[hi] - P[lo])
        A = (end - hi) + band / mu                        # sum_y a_ay, the anchor's own pair included
        n = self.n
        # (float64 also without anchors, where bincount returns integers)
        g = np.bincount(self.sorted.pairs.anchors, Cc * A, minlength=n).astype(np.float64, copy=False)
        # Rows covered by an anchor's linear run get C c, by its band run C c (m - s_a + s_y) / mu:
        # difference arrays (+ at a run's start, - past its end) of the constant and of the slope.
        ca, cb = Cc * (m - sa) / mu, Cc / mu
        const = np.bincount(np.concatenate((hi, end, lo, hi)), np.concatenate((Cc, -Cc, ca, -ca)), minlength=n + 1)
        slope = np.bincount(np.concatenate((lo, hi)), np.concatenate((cb, -cb)), minlength=n + 1)
        y_side = np.cumsum(const[:n], dtype=np.float64)
        y_side += np.cumsum(slope[:n]) * srt.ss
        g[srt.order] -= y_side
        self_a = min(max(m / mu, 0.0), 1.0)               # the anchor's own pair, cancelled in g
        alpha_sum = float(np.dot(Cc, A)) - self_a * float(Cc.sum())
        return g, alpha_sum

    def laplacian(self, V):
        """``L V`` for the band Laplacian ``L = sum_band (C c / mu) (e_a - e_y)(e_a - e_y)^T``."""
        srt, lo, hi, n = self.sorted, self.lo, self.hi, self.n
        h = self.Cc / self.mu
        one_d = V.ndim == 1
        V2 = V[:, None] if one_d else V
        anchors = srt.pairs.anchors
        Vs = V2[srt.order]
        prefix = np.zeros((n + 1, V2.shape[1]))
        np.cumsum(Vs, axis=0, out=prefix[1:])
        out = np.zeros_like(V2)
        band_sum = prefix[hi] - prefix[lo]
        np.add.at(out, anchors, h[:, None] * ((hi - lo)[:, None] * V2[anchors] - band_sum))
        # Rows y in anchor k's band get h_k (v_y - v_a): difference arrays over sorted positions.
        cover = np.cumsum(np.bincount(lo, h, minlength=n + 1) - np.bincount(hi, h, minlength=n + 1))[:n]
        dv = np.zeros((n + 1, V2.shape[1]))
        hv = h[:, None] * V2[anchors]
        np.add.at(dv, lo, hv)
        np.add.at(dv, hi, -hv)
        ys = cover[:, None] * Vs - np.cumsum(dv[:n], axis=0)
        out[srt.order] += ys
        return out[:, 0] if one_d else out

    def band_rows(self):
        """Rows that touch a band pair (the only non-zero rows of ``L``)."""
        lo, hi, n = self.lo, self.hi, self.n
        cover = np.cumsum(np.bincount(lo, minlength=n + 1) - np.bincount(hi, minlength=n + 1))[:n]
        touched = np.zeros(n, dtype=bool)
        touched[self.sorted.order[cover > 0]] = True
        touched[self.sorted.pairs.anchors[hi > lo]] = True
        return np.flatnonzero(touched)


def band_hessian(X, ev: _Smoothed, block_bytes=1 << 25, max_rows=None, method="auto"):
    """``X^T L X = sum_band h (x_a - x_y)(x_a - x_y)^T`` for the band Laplacian of ``ev``.

    Expanded per pair into ``x_a x_a^T + x_y x_y^T - x_a x_y^T - x_y x_a^T``:
    the anchors' term is one weighted product of the anchor rows, the rows'
    term ``X_U^T diag(cover) X_U`` over the covered sorted positions ``U``,
    and the cross term ``sum_k h_k x_a (sum_band x_y)^T`` needs the band sums
    of ``X`` from one prefix sum over ``U`` (features along rows, so the
    cumulative sum streams through memory). Bands never cross a query, so
    ``U`` is taken in blocks of whole queries: memory stays at a few
    ``d x block`` arrays (``block_bytes`` each) whatever the number of rows.

    ``max_rows``: when the bands cover more rows than that (wide bands, far
    from the optimum), the Hessian is estimated from every ``k``-th query
    (``k`` the smallest stride that brings the covered rows under
    ``max_rows``), its terms scaled by ``k``: the sum over all queries has
    that sample's sum times ``k`` as an unbiased, deterministic estimate. The
    Newton step only needs a direction (the line search and the certificate
    use the exact sums); wide bands far from the optimum (more band pairs
    than rows) then cost a fraction.

    ``method``: ``"prefix"`` as above; ``"pairs"`` enumerates the band pairs
    (in blocks of ``block_bytes``) and sums the outer products of their
    differences, cheaper when the band holds about as many pairs as rows it
    covers (narrow bands near the optimum: no ``d x |U|`` gather and prefix
    sum); ``"auto"`` takes ``"pairs"`` when the band pairs are at most twice
    the covered rows.
    """
    if method not in ("auto", "pairs", "prefix"):
        raise ValueError(f"method must be 'auto', 'pairs' or 'prefix', got {method!r}")
    srt, lo, hi, n = ev.sorted, ev.lo, ev.hi, ev.n
    d = X.shape[1]
    H = np.zeros((d, d))
    live = hi > lo
    if not live.any():
        return H
    offsets = srt.pairs.query_offsets
    h_all = ev.Cc / ev.mu
    if max_rows is not None:
        stride = int(np.ceil(_covered(lo[live], hi[live]) / max(int(max_rows), 1)))
        if stride > 1:
            live &= srt.pairs.anchor_query % stride == 0
            h_all = h_all * stride
            if not live.any():
                return H
    lo, hi = lo[live], hi[live]
    h = h_all[live]
    anchors = srt.pairs.anchors[live]
    Xa = X[anchors]
    hXa = h[:, None] * Xa
    H += ((hi - lo)[:, None] * hXa).T @ Xa                  # anchors' term
    width = hi - lo
    if method == "pairs" or (method == "auto" and int(width.sum()) <= 2 * _covered(lo, hi)):
        return _band_hessian_pairs(X, srt.order, anchors, lo, width, h, block_bytes)
    # Covered sorted positions, then blocks of whole queries over them.
    depth = np.cumsum(np.bincount(lo, minlength=n + 1) - np.bincount(hi, minlength=n + 1))[:n]
    U = np.flatnonzero(depth > 0)
    rows_per_block = max(1, block_bytes // (8 * max(d, 1)))
    cuts = np.searchsorted(U, offsets)                       # U index where each query starts
    by_start = np.argsort(lo, kind="stable")                 # anchors by band start (= by query)
    lo_sorted = lo[by_start]
    q_start = 0
    nq = offsets.size - 1
    while q_start < nq:
        # As many whole queries as fit in one block (at least one).
        q_end = int(np.searchsorted(cuts, cuts[q_start] + rows_per_block, side="right")) - 1
        q_end = min(max(q_end, q_start + 1), nq)
        u0, u1 = int(cuts[q_start]), int(cuts[q_end])
        if u1 > u0:
            Ub = U[u0:u1]
            k0, k1 = np.searchsorted(lo_sorted, [offsets[q_start], offsets[q_end]])
            ks = by_start[k0:k1]
            clo, chi = np.searchsorted(Ub, lo[ks]), np.searchsorted(Ub, hi[ks])
            XU = X.T[:, srt.order[Ub]]                        # d x block, features along rows
            prefix = np.zeros((d, Ub.size + 1))
            np.cumsum(XU, axis=1, out=prefix[:, 1:])
            cross = hXa[ks].T @ (prefix[:, chi] - prefix[:, clo]).T
            cover = np.cumsum(np.bincount(clo, h[ks], minlength=Ub.size + 1)
                              - np.bincount(chi, h[ks], minlength=Ub.size + 1))[:Ub.size]
            H += (XU * cover) @ XU.T - cross - cross.T
        q_start = q_end
    return 0.5 * (H + H.T)


def _covered(lo, hi):
    """Length of the union of the intervals ``[lo_k, hi_k)`` (from the intervals alone, not ``O(n)``)."""
    if lo.size == 0:
        return 0
    by_start = np.argsort(lo, kind="stable")
    lo, hi = lo[by_start], hi[by_start]
    reach = np.maximum.accumulate(hi)                   # furthest end among intervals started so far
    start = np.maximum(lo[1:], reach[:-1])
    return int(hi[0] - lo[0]) + int(np.maximum(hi[1:] - start, 0).sum())


def _band_hessian_pairs(X, order, anchors, lo, width, h, block_bytes):
    """``sum_band h (x_a - x_y)(x_a - x_y)^T`` over the enumerated band pairs, block by block."""
    d = X.shape[1]
    H = np.zeros((d, d))
    per_block = max(1, block_bytes // (16 * max(d, 1)))
    ends = np.cumsum(width)
    k0 = 0
    while k0 < width.size:
        # Whole anchors per block (at least one), about ``per_block`` pairs.
        k1 = max(k0 + 1, int(np.searchsorted(ends, (ends[k0 - 1] if k0 else 0) + per_block, side="right")))
        wk = width[k0:k1]
        owner = np.repeat(np.arange(k0, k1), wk)
        y = order[concat_ranges(lo[k0:k1], wk)]
        H += pair_gram(X, anchors[owner], y, h[owner])
        k0 = k1
    return 0.5 * (H + H.T)


def line_search(X_u, w, u, ev_at, mu, t0=1.0, max_eval=30, f0=None, rtol=1e-10, return_eval=False):
    """Minimiser over ``t >= 0`` of the smoothed objective along ``w + t u``, to a relative slope ``rtol``.

    ``ev_at(t)`` evaluates the pair sums at ``w + t u``; the derivative is
    ``(w + t u).u - g(t).Xu`` (convex objective: it increases with ``t``).
    Stopped when the derivative is below ``rtol`` times its value at 0
    (``f0``, if known, saves one evaluation): ``rtol = 1e-10`` is an exact
    line search, ``rtol = 0.1`` a strong Wolfe condition, enough for Newton
    and each evaluation saved is a sort of all scores. Inside a bracket the
    next ``t`` is the root of the secant of the derivative (Illinois
    variant, which keeps both ends moving): after a step across many kinks
    the derivative jumps, and its secant lands near the root where a
    Newton step on the band's curvature alone, or bisection, needs several
    evaluations. Before a bracket exists, 1-D Newton on the band
    Laplacian's quadratic form of ``Xu`` (or doubling) extends the step.
    ``return_eval``: also the evaluation at the returned ``t`` (None if
    that point was not evaluated), so the caller need not evaluate it again.
    """
    wu, uu = float(w @ u), float(u @ u)
    if f0 is None:
        g0, _ = ev_at(0.0, need_hess=False)
        f0 = wu - float(g0 @ X_u)
    if f0 >= 0:
        return (0.0, None) if return_eval else 0.0
    lo, hi, t = 0.0, np.inf, t0
    f_lo, f_hi = f0, np.nan
    side = 0                                        # which end moved last (Illinois halving)
    last = (None, None)
    for _ in range(max_eval):
        g, ev = ev_at(t, need_hess=True)
        last = (t, ev)
        f1 = wu + t * uu - float(g @ X_u)
        if abs(f1) <= rtol * -f0:
            return (t, ev) if return_eval else t
        if f1 < 0:
            lo, f_lo = t, f1
            if side < 0:
                f_hi *= 0.5
            side = -1
        else:
            hi, f_hi = t, f1
            if side > 0:
                f_lo *= 0.5
            side = 1
        if hi - lo <= 1e-13 * hi:
            break
        if hi == np.inf:
            f2 = uu + float(X_u @ ev.laplacian(X_u))
            nt = t - f1 / f2 if f2 > 0 else np.inf
            if not lo < nt:
                nt = 2.0 * t
        else:
            nt = lo + (hi - lo) * f_lo / (f_lo - f_hi)
            width = hi - lo
            if not lo + 1e-3 * width < nt < hi - 1e-3 * width:
                nt = 0.5 * (lo + hi)
        t = nt
    t = lo if lo > 0 else t
    if not return_eval:
        return t
    return t, (last[1] if last[0] == t else None)
