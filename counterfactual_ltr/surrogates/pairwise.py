"""Pairwise hinge surrogates: the Ranking SVM loss and the propensity-weighted rank bound.

Both are pure functions of per-query scores (see ``docs/conventions.md``).
"""

from __future__ import annotations

import numpy as np

from .._segments import (check_finite_1d, check_offsets, segment_ids, segment_searchsorted, within_query_pairs)
from .._validation import check_real
from ._common import doc, prepare, reduce_losses

__all__ = ["pairwise_hinge", "hinge_rank_bound", "lambda_hinge_bound"]


@doc
def pairwise_hinge(scores, labels, query_offsets, *, weights=None, margin: float = 1.0, reduce="sum"):
    """Ranking SVM loss: hinge on every pair of documents with different grades.

    .. math::

        L_q(s) = \\sum_{i, j \\in q:\\ R_i > R_j} w_i \\max(0, \\Delta - (s_i - s_j))

    with per-document weights ``w`` on the preferred document (default 1) and
    margin ``Delta``. Memory ``O(sum_q m_q^2)``.

    Returns ``(loss, grad)``; ``grad`` is a subgradient w.r.t. ``scores``.

    Parameters
    ----------
    {scores, labels, query_offsets}
    weights : array (n_docs,), optional
        Weight of each document when it is the preferred one of a pair (default 1).
    margin : float, default 1.0
        Required score difference of a preferred pair.
    {reduce, returns}

    Examples
    --------
    >>> loss, grad = pairwise_hinge([2.0, 1.5, 0.0], [2, 1, 0], [0, 3])
    >>> loss, grad.tolist()          # only the pair (0, 1) violates the margin: 1 - 0.5
    (0.5, [-1.0, 1.0, 0.0])
    """
    offsets, s, y = prepare(scores, labels, query_offsets)
    margin = check_real(margin, "margin")
    n = int(offsets[-1])
    w = np.ones(n) if weights is None else check_finite_1d(weights, "weights", n)
    i, j = within_query_pairs(offsets)
    keep = y[i] > y[j]
    i, j = i[keep], j[keep]
    slack = margin - (s[i] - s[j])
    active = slack > 0
    c = w[i] * active
    per_pair = c * slack
    grad = np.bincount(j, c, minlength=n) - np.bincount(i, c, minlength=n)
    per_query = np.bincount(segment_ids(offsets)[i], per_pair, minlength=len(offsets) - 1)
    return reduce_losses(per_query, grad, reduce, len(offsets) - 1)


@doc
def hinge_rank_bound(scores, query_offsets, rows, *, margin: float = 1.0):
    """Hinge upper bound on ``rank - 1`` of the documents ``rows`` in their queries.

    .. math::

        H_j(s) = \\sum_{y \\in q(j),\\ y \\neq j} \\max(0, \\Delta - (s_j - s_y)) \\;\\ge\\; \\mathrm{rank}(j) - 1
        \\quad (\\Delta \\ge 1 \\text{ for the bound})

    Computed by sorting each query once and binary search (``O(m log m)``
    per query, no pairs). Returns ``(H, n_active)`` where ``n_active[t]`` is
    the number of ``y != j`` with a positive hinge (the subgradient count).

    Parameters
    ----------
    {scores, query_offsets}
    rows : array of int
        The documents whose bound is wanted.
    margin : float, default 1.0
        Margin of the hinges.

    Returns
    -------
    H : array (len(rows),)
        The hinge sums.
    n_active : array (len(rows),) of int
        Number of positive hinges of each.

    Examples
    --------
    >>> H, n_active = hinge_rank_bound([3.0, 2.5, 0.0], [0, 3], [1])
    >>> H.tolist(), n_active.tolist()     # 1 - (2.5 - 3.0) = 1.5 against doc 0; doc 2 is 2.5 below
    ([1.5], [1])
    """
    offsets = np.asarray(query_offsets, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    rows = np.asarray(rows, dtype=np.int64)
    # The self term of H is always active only for a positive margin.
    margin = check_real(margin, "margin", min_value=0.0, include_min=False)
    seg = segment_ids(offsets)
    order = np.lexsort((s, seg))  # ascending within query
    s_sorted = s[order]
    prefix = np.concatenate(([0.0], np.cumsum(s_sorted)))
    q = seg[rows]
    # y is active iff s_y > s_j - margin: everything from the insertion point to the query's end.
    start = segment_searchsorted(s_sorted, offsets, q, s[rows] - margin, side="right")
    end = offsets[q + 1]
    count = end - start
    total = prefix[end] - prefix[start]
    # Sum over active y of (margin - s_j + s_y), minus the self term (always active: margin > 0).
    H = count * (margin - s[rows]) + total - margin
    return np.maximum(H, 0.0), count - 1


@doc
def lambda_hinge_bound(scores, click_weights, query_offsets, *, metric="dcg", margin: float = 1.0,
                       reduce="sum", **metric_params):
    """Propensity-weighted hinge bound on an additive metric's IPS risk (Agarwal et al. 2019, Eq. 7).

    .. math::

        L_q(s) = \\sum_{j \\in q} W_j \\, \\lambda\\big(1 + H_j(s)\\big), \\qquad
        H_j(s) = \\sum_{y \\neq j} \\max(0, \\Delta - (s_j - s_y))

    where ``W_j`` is the summed inverse propensity of the clicks on document
    ``j`` (0 if never clicked) and ``lambda`` is a monotone increasing rank
    weight of Table 1 (``"dcg"``: ``-1/log2(1 + r)``, ``"avg_rank"``: ``r``,
    ``"rbp"``, or a :class:`~counterfactual_ltr.metrics.LambdaWeight`). Since
    ``H_j >= rank_j - 1`` and ``lambda`` increases, ``L`` bounds the IPS risk
    ``sum_j W_j lambda(rank_j)`` from above. The gradient uses ``lambda'``,
    so ``lambda`` must be differentiable (not Prec@k).

    Parameters
    ----------
    {scores}
    click_weights : array (n_docs,)
        ``W_j``, the summed inverse propensity of the clicks on each document.
    {query_offsets}
    metric : str or LambdaWeight, default "dcg"
        The rank weight ``lambda`` (see :func:`~counterfactual_ltr.metrics.get_lambda`).
    margin : float, default 1.0
        Margin of the hinges.
    {reduce, metric_params, returns}

    Examples
    --------
    >>> loss, grad = lambda_hinge_bound([1.0, 0.5, 0.0], [0.0, 2.0, 0.0], [0, 3], metric="avg_rank")
    >>> loss                                   # 2 * (1 + 1.5 + 0.5)
    6.0
    >>> grad.tolist()
    [2.0, -4.0, 2.0]
    """
    from ..metrics import LambdaWeight, get_lambda

    offsets = check_offsets(query_offsets)
    n = offsets[-1]
    s = check_finite_1d(scores, "scores", n)
    W = check_finite_1d(click_weights, "click_weights", n)
    if np.any(W < 0):
        raise ValueError(f"click_weights must be >= 0; index {np.flatnonzero(W < 0)[0]} is negative")
    lam = metric if isinstance(metric, LambdaWeight) else get_lambda(metric, **metric_params)
    if lam.derivative is None:
        raise ValueError(f"the rank weight {lam.name!r} is not differentiable: no hinge bound gradient")
    rows = np.flatnonzero(W)
    H, n_active = hinge_rank_bound(s, offsets, rows, margin=margin)
    r = 1.0 + H
    per_doc = W[rows] * lam.value(r)
    c = W[rows] * lam.derivative(r)  # d loss / d H_j
    # dH_j/ds_y = +1 for active y != j (s_j < s_y + margin); dH_j/ds_j = -(number of active y).
    seg = segment_ids(offsets)
    by_score = np.lexsort((s[rows], seg[rows]))
    rows_sorted = rows[by_score]
    row_offsets = np.searchsorted(seg[rows_sorted], np.arange(len(offsets)), side="left")
    c_prefix = np.concatenate(([0.0], np.cumsum(c[by_score])))
    hi = segment_searchsorted(s[rows_sorted], row_offsets, seg, s + margin, side="left")
    grad = c_prefix[hi] - c_prefix[row_offsets[seg]]
    # The sum above includes the self pair of a clicked document: remove it, then add -count.
    grad[rows] -= c * (1 + n_active)
    per_query = np.bincount(seg[rows], per_doc, minlength=len(offsets) - 1)
    return reduce_losses(per_query, grad, reduce, len(offsets) - 1)
