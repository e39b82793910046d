"""SLAM surrogates and the max-pair surrogate (Chaudhuri & Tewari, "Perceptron-like algorithms for online LTR").

Pure functions of per-query scores with the shared signature (see ``docs/conventions.md``)::

    loss, grad = surrogate(scores, labels, query_offsets, *, reduce="sum", **params)

* :func:`slam_loss` -- the SLAM family (Eq. 8/9 of the paper), per query

  .. math::

      \\phi^v_{SLAM}(s, R) = \\sum_i v_i \\max\\big(0, \\max_j 1[R_i > R_j] (\\Delta + s_j - s_i)\\big)
                          = \\sum_i v_i \\max(0, \\Delta + M_i - s_i),

  with ``M_i = max{s_j : R_j < R_i}`` (the best-scored document of a *lower* grade in
  the same query; ``-inf`` when there is none) and a non-negative weight vector ``v``
  (:func:`slam_weights`). It equals the LP of Eq. 8: ``min sum_i v_i delta_i`` subject
  to ``delta >= 0``, ``s_i + delta_i >= Delta + s_j`` for ``R_i > R_j`` -- the
  constraints on ``delta_i`` separate, and the smallest feasible ``delta_i`` is
  ``max(0, Delta + M_i - s_i)``.
* :func:`max_pair_loss` -- the Crammer-Singer style surrogate of Eq. 26/27,
  ``phi_C(s, R) = max_{i, j} 1[R_i > R_j] (Delta + s_j - s_i)_+ = max(0, max_i (Delta + M_i - s_i))``.

Computation. ``M_i`` is found per relevance level, not per pair: for each level ``l``
present in the data, mask the scores of documents with label ``>= l`` and take the
per-query maximum (``np.maximum.reduceat``). This costs ``O(n_docs * n_levels)`` time
and memory -- never ``O(m^2)`` pairs -- and has no Python loop over queries. One
query (``query_offsets = [0, m]``) takes a cheaper path without segment reductions;
the online learners use it every round.

Subgradients (Eq. 13/16 and 29): with ``k(i)`` the row attaining ``M_i`` and
``c_i = max(0, Delta + M_i - s_i)``, ``d phi / d s = sum_{i: c_i > 0} v_i (e_{k(i)} - e_i)``;
for ``phi_C``, ``e_{k(i*)} - e_{i*}`` at the (first) row ``i*`` attaining the max.
At kinks (``c_i = 0`` exactly) the zero element of the subdifferential is taken.

Bounds (proved in the docstring of :func:`slam_weights`, tested with hypothesis):
for ``margin >= 1`` and the weights of :func:`slam_weights`,
``slam_loss(..., weights="ndcg") >= 1 - NDCG``, ``weights="ndcg@k"`` ``>= 1 - NDCG@k``,
``weights="ap"`` ``>= 1 - AP``, and ``max_pair_loss >= 1 -`` each of them, for every
score vector (ties in scores broken by row order, as everywhere in the toolkit).
Queries without relevant documents (NDCG/AP undefined) get zero weights, and
queries whose documents all share one grade have no pair: their SLAM and max-pair
losses are 0 (and so is their gradient).
"""

from __future__ import annotations

import numpy as np

from .._segments import check_finite_1d, check_offsets, segment_ids
from .._validation import check_int, check_real
from ..datasets import DEFAULT_RELEVANCE_THRESHOLD
from ._common import check_reduce, doc, prepare, reduce_losses

__all__ = ["slam_loss", "slam_weights", "max_pair_loss", "lower_grade_max", "SLAM_WEIGHT_KINDS"]

#: Names accepted by :func:`slam_weights` (and ``weights=`` of :func:`slam_loss`).
SLAM_WEIGHT_KINDS = ("ndcg", "ndcg@k", "ap")


# ----------------------------------------------------------------- validation
def _check_margin(margin) -> float:
    return check_real(margin, "margin", min_value=0.0)


def _check_kind(kind, k):
    if not isinstance(kind, str) or kind not in SLAM_WEIGHT_KINDS:
        raise ValueError(f"weights kind must be one of {SLAM_WEIGHT_KINDS}, got {kind!r}")
    if kind == "ndcg@k":
        if k is None:
            raise ValueError("kind='ndcg@k' needs the cutoff k")
        return check_int(k, "k", min_value=1)
    if k is not None:
        raise ValueError(f"k={k} is only used with kind='ndcg@k' (got kind={kind!r})")
    return None


# ------------------------------------------------------------------- weights
def _gain(y):
    return np.exp2(y) - 1.0


_DCUM_CACHE: dict = {}


def _discount_cumsum(m_max: int, k):
    """``[0, D(1), D(1)+D(2), ...]`` of ``D(p) = 1/log2(1+p) * 1[p <= k]``, length ``m_max + 1`` (cached, read-only)."""
    key = (m_max, k)
    out = _DCUM_CACHE.get(key)
    if out is None:
        p = np.arange(1, m_max + 1, dtype=np.float64)
        d = 1.0 / np.log2(1.0 + p)
        if k is not None:
            d[k:] = 0.0
        out = np.zeros(m_max + 1)
        np.cumsum(d, out=out[1:])
        out.flags.writeable = False
        if len(_DCUM_CACHE) < 256:
            _DCUM_CACHE[key] = out
    return out


def _levels(y):
    """``(levels, li)``: sorted distinct labels and each label's index (a cheap ``np.unique``)."""
    ys = np.sort(y)
    keep = np.empty(ys.shape[0], dtype=bool)
    keep[:1] = True
    np.not_equal(ys[1:], ys[:-1], out=keep[1:])
    levels = ys[keep]
    return levels, np.searchsorted(levels, y)


def _weights_core(y, offsets, kind, k, threshold, lv=None):
    """Unvalidated :func:`slam_weights` (``y`` float64, ``offsets`` int64; ``lv`` = ``_levels(y)`` if known)."""
    n = y.shape[0]
    nq = offsets.shape[0] - 1
    if kind == "ap":
        rel = (y >= threshold).astype(np.float64)
        if nq == 1:
            r = rel.sum()
            return rel / r if r > 0 else rel
        seg = segment_ids(offsets)
        r = np.add.reduceat(rel, offsets[:-1])
        return np.divide(rel, r[seg], out=np.zeros(n), where=r[seg] > 0)
    # NDCG / NDCG@k: the block of ideal positions of every grade, averaged discount.
    levels, li = _levels(y) if lv is None else lv
    L = levels.shape[0]
    gains = _gain(levels)
    if nq == 1:
        counts = np.bincount(li, minlength=L)
        # ideal positions of level l: start_l + 1 .. start_l + counts_l, start_l = #docs of higher grades
        higher = n - np.cumsum(counts)
        dcum = _discount_cumsum(n, k)
        block = dcum[higher + counts] - dcum[higher]       # sum of D over the block (0 past k)
        Z = float(gains @ block)
        if Z <= 0:
            return np.zeros(n)
        per_level = gains * block / (counts * Z)
        return per_level[li]
    seg = segment_ids(offsets)
    counts = np.bincount(seg * L + li, minlength=nq * L).reshape(nq, L)
    higher = counts[:, ::-1].cumsum(axis=1)[:, ::-1] - counts        # docs with a higher grade, same query
    dcum = _discount_cumsum(int(np.diff(offsets).max()), k)
    block = dcum[higher + counts] - dcum[higher]
    Z = block @ gains
    denom = counts * Z[:, None]
    per_level = np.divide(gains[None, :] * block, denom, out=np.zeros((nq, L)), where=denom > 0)
    return per_level[seg, li]


@doc
def slam_weights(labels, query_offsets, kind: str = "ndcg", k=None, *,
                 threshold: float = DEFAULT_RELEVANCE_THRESHOLD) -> np.ndarray:
    """SLAM weight vectors ``v^NDCG``, ``v^NDCG@k`` and ``v^AP`` (Eq. 10, 11, 24), one value per document.

    With ``G(r) = 2^r - 1``, ``D(p) = 1/log2(1 + p)`` and the documents of a query
    sorted by decreasing grade, grade ``l`` owns the block ``B_l`` of ideal positions
    ``start_l + 1 .. start_l + n_l`` (``start_l`` = number of documents of higher
    grade, ``n_l`` = number of grade ``l``). Then, for a document ``i`` of grade ``l``:

    * ``"ndcg"``: ``v_i = G(l) * mean_{p in B_l} D(p) / Z``, ``Z = sum_p G(R_(p)) D(p)``
      the ideal DCG;
    * ``"ndcg@k"``: the same with ``D_k(p) = D(p) 1[p <= k]`` and ``Z_k`` the ideal DCG@k;
    * ``"ap"``: ``v_i = 1[R_i >= threshold] / r``, ``r`` the number of relevant documents
      (grades binarised with ``threshold``, default 1 as in LETOR practice).

    The paper (Eq. 11, 24) writes ``G(R_i) D(i)/Z`` for documents already sorted by grade
    and, in its proofs, breaks ties between equal grades by score -- which would make
    ``v`` depend on ``s`` (and the surrogate non-convex). Here a grade's ideal discounts
    are *averaged* over its documents: the weights depend on the labels only, equal
    grades are exchangeable, and ``sum_i v_i = 1`` (so the Lipschitz constant is still 2).
    Queries without relevant documents (``Z = 0`` or ``r = 0``) get all-zero weights.

    **Why the bound still holds** (margin ``Delta >= 1``). For any ranking ``pi`` of
    the scores, assign inside every grade the ideal positions of ``B_l`` in score order
    (``1 - NDCG`` does not depend on this assignment, since equal grades have equal
    gains):  ``1 - NDCG = sum_i G(R_i) (D(p_i) - D(pi_i)) / Z``. Call ``i`` *violated*
    when some lower-grade document is ranked above it; then ``s_j >= s_i`` for that
    ``j``, so the SLAM hinge of ``i`` is ``>= Delta >= 1``. A document that is not
    violated has only higher grades and equal grades of higher score above it, so
    ``pi_i <= p_i`` and its term is ``<= 0``. If ``i`` is violated so is every document
    of its grade with a lower score, hence the violated documents of grade ``l`` are
    the ``u`` lowest-scored ones, holding the ``u`` *last* positions of ``B_l``; their
    terms sum to at most ``G(l) sum_{last u of B_l} D(p) / Z <= u G(l) mean_{B_l} D / Z``
    (``D`` decreases, so the mean of the last ``u`` is below the block mean), which is
    what SLAM charges them at least. The same argument with ``D_k`` (also
    non-increasing) gives NDCG@k. For AP, a relevant document with no irrelevant one
    above it has precision 1 at its rank, so ``1 - AP <= (#violated relevant) / r``.

    Parameters
    ----------
    {labels, query_offsets}
    kind : {"ndcg", "ndcg@k", "ap"}, default "ndcg"
        The measure whose SLAM weights are wanted.
    k : int, optional
        Cutoff for ``"ndcg@k"``.
    threshold : float, default 1
        Binarisation of the grades for ``"ap"``.

    Returns
    -------
    array (n_docs,)
        ``v``, one non-negative weight per document.

    Examples
    --------
    >>> slam_weights([2, 0, 1], [0, 3]).round(4).tolist()       # G = 3, 0, 1; D = 1, .631, .5
    [0.8262, 0.0, 0.1738]
    >>> slam_weights([1, 1, 0, 2], [0, 2, 4], kind="ap").tolist()
    [0.5, 0.5, 0.0, 1.0]
    >>> slam_weights([1, 1, 0], [0, 3], kind="ndcg@k", k=1).tolist()   # the top slot shared by both 1s
    [0.5, 0.5, 0.0]
    """
    k = _check_kind(kind, k)
    offsets = check_offsets(query_offsets)
    y = check_finite_1d(labels, "labels", int(offsets[-1]))
    if kind != "ap" and y.size and y.min() < 0:
        raise ValueError(f"labels must be >= 0 for NDCG weights; index {int(np.argmin(y))} has {y.min()}")
    return _weights_core(y, offsets, kind, k, check_real(threshold, "threshold"))


# ------------------------------------------------------- max over lower grades
def _lower_max_core(s, y, offsets, lv=None):
    """``(M, arg)``: best score among lower-grade documents of the same query, and its row (-1: none)."""
    n = s.shape[0]
    nq = offsets.shape[0] - 1
    levels, li = _levels(y) if lv is None else lv
    L = levels.shape[0]
    if L < 2:
        return np.full(n, -np.inf), np.full(n, -1, dtype=np.int64)
    below = y[None, :] < levels[1:, None]          # (L - 1, n): doc j is below level l + 1
    masked = np.where(below, s[None, :], -np.inf)
    if nq == 1:
        # tables indexed by level: level 0 has nothing below it
        lev_arg = masked.argmax(axis=1)
        arg_tab = np.empty(L, dtype=np.int64)
        arg_tab[0] = -1
        arg_tab[1:] = lev_arg
        max_tab = np.empty(L)
        max_tab[0] = -np.inf
        max_tab[1:] = s[lev_arg]
        return max_tab[li], arg_tab[li]
    li = li - 1                     # row of the level table: level l+1 looks at everything below it
    has_lower = li >= 0
    seg = segment_ids(offsets)
    qmax = np.maximum.reduceat(masked, offsets[:-1], axis=1)    # (L - 1, n_queries)
    hit = below & (masked == qmax[:, seg])
    lev, col = np.nonzero(hit)
    garg = np.full(qmax.shape, -1, dtype=np.int64)
    garg[lev, seg[col]] = col
    lj = np.maximum(li, 0)
    M = np.where(has_lower, qmax[lj, seg], -np.inf)
    arg = np.where(has_lower, garg[lj, seg], -1)
    return M, arg


@doc
def lower_grade_max(scores, labels, query_offsets):
    """For every document, the highest score among documents of *lower* grade in its query.

    Returns ``(M, arg)``: ``M[i] = max{s_j : R_j < R_i}`` (``-inf`` if ``i`` has the
    lowest grade of its query) and ``arg[i]`` a row attaining it (``-1`` if none).
    ``O(n_docs * n_levels)``, vectorised over queries.

    Parameters
    ----------
    {scores, labels, query_offsets}

    Returns
    -------
    M : array (n_docs,)
    arg : array (n_docs,) of int

    Examples
    --------
    >>> M, arg = lower_grade_max([0.5, 2.0, 1.0, 3.0], [2, 1, 0, 0], [0, 3, 4])
    >>> M.tolist(), arg.tolist()
    ([2.0, 1.0, -inf, -inf], [1, 2, -1, -1])
    """
    offsets, s, y = prepare(scores, labels, query_offsets)
    return _lower_max_core(s, y, offsets)


# ------------------------------------------------------------------ surrogates
def _slam_core(s, y, v, offsets, margin, lv=None):
    """Per-query SLAM losses and the gradient of their sum (unvalidated inputs)."""
    n = s.shape[0]
    M, arg = _lower_max_core(s, y, offsets, lv)
    c = margin + M - s
    act = c > 0                     # implies a lower-grade document exists (arg >= 0)
    va = v * act
    grad = np.bincount(arg[act], va[act], minlength=n) - va
    if offsets.shape[0] == 2:
        per_query = np.array([va @ np.where(act, c, 0.0)])
    else:
        per_query = np.add.reduceat(va * np.where(act, c, 0.0), offsets[:-1])
    return per_query, grad


@doc
def slam_loss(scores, labels, query_offsets, *, weights="ndcg", k=None, margin: float = 1.0,
              threshold: float = DEFAULT_RELEVANCE_THRESHOLD, reduce="sum"):
    """SLAM surrogate (Eq. 9): ``sum_i v_i max(0, max_{j: R_j < R_i} (Delta + s_j - s_i))`` per query.

    Parameters
    ----------
    scores, labels : arrays (n_docs,)
        Scores and graded labels, queries back to back (``query_offsets``).
    {query_offsets}
    weights : "ndcg", "ndcg@k", "ap" or array (n_docs,)
        The weight vector ``v`` (see :func:`slam_weights`) or explicit non-negative
        per-document weights. With ``"ap"`` the labels are binarised with ``threshold``
        before the pairs are formed (AP only knows relevant / irrelevant).
    k : int, optional
        Cutoff for ``weights="ndcg@k"``.
    margin : float
        ``Delta`` (>= 0; the bounds on ``1 - NDCG`` / ``1 - AP`` need ``Delta >= 1``).
    reduce : "sum", "mean" or None
        Sum / mean over queries, or ``None`` for one loss per query (``grad`` is then the
        gradient of their sum).
    threshold : float, default 1
        Labels at or above it are relevant, for ``weights="ap"``.

    Returns
    -------
    loss : float, or array (n_queries,) with ``reduce=None``
        A query whose documents all share one grade contributes 0.
    grad : array (n_docs,)
        A subgradient of the loss w.r.t. ``scores`` (Eq. 13).

    Examples
    --------
    >>> loss, grad = slam_loss([0.0, 1.0, 0.5], [1, 0, 0], [0, 3], weights="ap")
    >>> loss, grad.tolist()              # doc 0 must beat doc 1 by 1: 1 + 1 - 0
    (2.0, [-1.0, 1.0, 0.0])
    >>> slam_loss([3.0, 1.0, 0.5], [1, 0, 0], [0, 3])[0]   # margin respected: no loss
    0.0
    """
    offsets, s, y = prepare(scores, labels, query_offsets)
    margin = _check_margin(margin)
    check_reduce(reduce)
    if isinstance(weights, str):
        kind = weights
        kk = _check_kind(kind, k)
        if kind != "ap" and y.size and y.min() < 0:
            raise ValueError(f"labels must be >= 0 for NDCG weights; index {int(np.argmin(y))} has {y.min()}")
        threshold = check_real(threshold, "threshold")
        v = _weights_core(y, offsets, kind, kk, threshold)
        if kind == "ap":
            y = (y >= threshold).astype(np.float64)
    else:
        if k is not None:
            raise ValueError("k is only used with weights='ndcg@k'")
        v = check_finite_1d(weights, "weights", s.shape[0])
        if np.any(v < 0):
            raise ValueError(f"weights must be >= 0; index {int(np.flatnonzero(v < 0)[0])} is negative")
    per_query, grad = _slam_core(s, y, v, offsets, margin)
    return reduce_losses(per_query, grad, reduce, offsets.shape[0] - 1)


def _max_pair_core(s, y, offsets, margin):
    n = s.shape[0]
    nq = offsets.shape[0] - 1
    M, arg = _lower_max_core(s, y, offsets)
    c = np.maximum(margin + M - s, 0.0)
    grad = np.zeros(n)
    if nq == 1:
        i = int(np.argmax(c))
        val = c[i]
        if val > 0:
            grad[i] -= 1.0
            grad[arg[i]] += 1.0
        return np.array([val]), grad
    qmax = np.maximum.reduceat(c, offsets[:-1])
    seg = segment_ids(offsets)
    cand = np.flatnonzero((c == qmax[seg]) & (c > 0))
    first = cand[np.r_[True, seg[cand][1:] != seg[cand][:-1]]] if cand.size else cand
    np.subtract.at(grad, first, 1.0)
    np.add.at(grad, arg[first], 1.0)
    return qmax, grad


@doc
def max_pair_loss(scores, labels, query_offsets, *, margin: float = 1.0, reduce="sum"):
    """Max-pair surrogate (Eq. 27): ``max_{i,j} 1[R_i > R_j] (Delta + s_j - s_i)_+`` per query.

    The worst-violated pair of differently graded documents; equal to the LP of Eq. 26
    (``min delta`` s.t. ``delta >= 0``, ``s_i + delta >= Delta + s_j`` for ``R_i > R_j``).
    The subgradient (Eq. 29) is ``e_{j*} - e_{i*}`` for the first row ``i*`` (in row
    order) attaining the maximum and ``j*`` its best-scored lower-grade document; zero
    when the loss is 0. Unlike SLAM it does not weight positions (not listwise), but
    with ``Delta >= 1`` it is still ``>= 1 - NDCG``, ``1 - NDCG@k`` and ``1 - AP``
    (any misordered pair makes it ``>= Delta``). Single-grade queries give 0.

    Parameters
    ----------
    {scores, labels, query_offsets}
    margin : float, default 1.0
        ``Delta``, the required score difference.
    {reduce, returns}

    Examples
    --------
    >>> loss, grad = max_pair_loss([0.0, 1.0, 0.5], [2, 1, 0], [0, 3])
    >>> loss, grad.tolist()      # worst pair: doc 0 (grade 2) vs doc 1 (grade 1): 1 + 1 - 0
    (2.0, [-1.0, 1.0, 0.0])
    """
    offsets, s, y = prepare(scores, labels, query_offsets)
    margin = _check_margin(margin)
    check_reduce(reduce)
    per_query, grad = _max_pair_core(s, y, offsets, margin)
    return reduce_losses(per_query, grad, reduce, offsets.shape[0] - 1)
