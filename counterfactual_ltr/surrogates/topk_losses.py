"""Surrogates of the top-k feedback learner (Chaudhuri & Tewari, AISTATS 2016, section 4).

Pure functions of per-query scores with the shared signature (see
``docs/conventions.md``)::

    loss, grad = surrogate(scores, labels, query_offsets, *, reduce="sum", **params)

* :func:`squared_loss` -- pointwise ``||s - R||^2``;
* :func:`kl_listnet_loss` -- ListNet's cross entropy with the *unnormalised*
  KL divergence between ``exp(R)`` and ``exp(s)`` (gradient ``exp(s) - exp(R)``,
  which decomposes over single documents);
* :func:`smooth_dcg_at1_loss` -- the negative of SmoothDCG@1 (Chapelle & Wu,
  2010), non-convex.

The RankSVM surrogate of the paper is
:func:`counterfactual_ltr.surrogates.pairwise.pairwise_hinge` with unit
weights and margin 1 (not repeated here).

The labels are the raw graded relevance values ``R`` (0, 1, 2, ... in
LETOR), as in the paper; no binarisation.
"""

from __future__ import annotations

import numpy as np

from .._segments import segment_ids
from .._validation import check_real
from ._common import doc, prepare, reduce_losses

__all__ = ["squared_loss", "kl_listnet_loss", "smooth_dcg_at1_loss"]


def _finish(per_doc, grad, offsets, reduce):
    """Per-document losses summed per query, then the package's ``reduce`` convention."""
    n_queries = len(offsets) - 1
    return reduce_losses(np.bincount(segment_ids(offsets), per_doc, minlength=n_queries), grad, reduce, n_queries)


@doc
def squared_loss(scores, labels, query_offsets, *, reduce="sum"):
    """Pointwise squared loss (Cossock & Zhang), per query:

    .. math::

        \\phi_{sq}(s, R) = \\|s - R\\|_2^2 = \\sum_i (s_i - R_i)^2,
        \\qquad \\nabla_s \\phi_{sq} = 2 (s - R).

    Returns ``(loss, grad)``; ``reduce`` is ``"sum"``, ``"mean"`` (over
    queries) or ``None`` (per-query losses, gradient of their sum).

    Parameters
    ----------
    {scores, labels, query_offsets, reduce, returns}

    Examples
    --------
    >>> loss, grad = squared_loss([1.0, 0.0, 0.5], [2, 0, 0], [0, 2, 3])
    >>> loss, grad.tolist()
    (1.25, [-2.0, 0.0, 1.0])
    >>> squared_loss([1.0, 0.0, 0.5], [2, 0, 0], [0, 2, 3], reduce=None)[0].tolist()
    [1.0, 0.25]
    """
    offsets, s, y = prepare(scores, labels, query_offsets)
    diff = s - y
    return _finish(diff * diff, 2.0 * diff, offsets, reduce)


@doc
def kl_listnet_loss(scores, labels, query_offsets, *, reduce="sum"):
    """ListNet with the unnormalised KL divergence (the paper's modified listwise surrogate).

    With ``p_i = exp(R_i)`` and ``q_i = exp(s_i)`` (not normalised to sum 1):

    .. math::

        \\phi_{KL}(s, R) = \\sum_i \\big( e^{R_i} R_i - e^{R_i} s_i - e^{R_i} + e^{s_i} \\big)
        = \\sum_i \\big( e^{R_i}(R_i - s_i - 1) + e^{s_i} \\big),
        \\qquad \\nabla_s \\phi_{KL} = e^{s} - e^{R}.

    Non-negative, convex, minimised at ``s = R``. Returns ``(loss, grad)``.

    Parameters
    ----------
    {scores, labels, query_offsets, reduce, returns}

    Examples
    --------
    >>> loss, grad = kl_listnet_loss([0.0, 1.0], [0, 1], [0, 2])
    >>> loss, grad.tolist()              # s = R: the minimum
    (0.0, [0.0, 0.0])
    >>> loss, grad = kl_listnet_loss([0.0], [1], [0, 1])
    >>> round(loss, 6), round(float(grad[0]), 6)    # e*(1 - 0 - 1) + 1; 1 - e
    (1.0, -1.718282)
    """
    offsets, s, y = prepare(scores, labels, query_offsets)
    es, ey = np.exp(s), np.exp(y)
    return _finish(ey * (y - s - 1.0) + es, es - ey, offsets, reduce)


@doc
def smooth_dcg_at1_loss(scores, labels, query_offsets, *, epsilon: float = 0.01, reduce="sum"):
    """Negative SmoothDCG@1 (Chapelle & Wu, 2010), the paper's non-convex surrogate.

    With the softmax ``pi_i(s) = exp(s_i / eps) / sum_j exp(s_j / eps)`` and
    gain ``G(r) = 2^r - 1``:

    .. math::

        \\phi_{SD}(s, R) = -\\sum_i G(R_i)\\, \\pi_i(s),
        \\qquad \\frac{\\partial \\phi_{SD}}{\\partial s_j}
        = -\\frac{1}{\\epsilon} \\pi_j(s) \\Big( G(R_j) - \\sum_i G(R_i) \\pi_i(s) \\Big).

    The paper writes SmoothDCG@1 itself (a gain, to be maximised); it is
    negated here so that gradient *descent* (Algorithm 1, step 10) increases
    DCG@1. ``epsilon > 0`` is the smoothing; ``epsilon -> 0`` gives
    ``-G(R)`` of the top-scored document. The softmax is computed stably
    (max subtracted per query).

    Parameters
    ----------
    {scores, labels, query_offsets}
    epsilon : float > 0, default 0.01
        Softmax smoothing.
    {reduce, returns}

    Examples
    --------
    >>> loss, grad = smooth_dcg_at1_loss([1.0, 0.0], [1, 0], [0, 2], epsilon=1.0)
    >>> round(loss, 6)                       # -(2^1 - 1) * e / (e + 1)
    -0.731059
    >>> [round(g, 6) for g in grad.tolist()] # -pi_0 (1 - pi_0), +pi_0 pi_1
    [-0.196612, 0.196612]
    """
    epsilon = check_real(epsilon, "epsilon", min_value=0.0, include_min=False)
    offsets, s, y = prepare(scores, labels, query_offsets)
    seg = segment_ids(offsets)
    starts = offsets[:-1]
    z = s / epsilon
    zmax = np.maximum.reduceat(z, starts)
    e = np.exp(z - zmax[seg])
    pi = e / np.add.reduceat(e, starts)[seg]
    gain = np.exp2(y) - 1.0
    per_doc = -gain * pi
    expected = np.add.reduceat(gain * pi, starts)[seg]
    grad = -(pi / epsilon) * (gain - expected)
    return _finish(per_doc, grad, offsets, reduce)
