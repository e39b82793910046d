"""Smooth pairwise surrogates with a positive curvature per document, for Newton boosting.

Gradient-boosted trees set each leaf to ``-sum g / sum h`` over its documents: they need, besides
the gradient ``g``, a positive curvature ``h`` per document. Two objectives over the same pairs
(every clicked document ``j`` of weight ``W_j`` against every other document ``y`` of its query):

* :func:`smooth_lambda_bound`: the propensity-weighted rank bound of Agarwal et al. (2019, Eq. 7),
  ``sum_j W_j lambda(1 + H_j)``, with each hinge ``max(0, z)``, ``z = margin - (s_j - s_y)``,
  replaced by the softplus ``h_t(z) = t log(1 + exp(z / t))`` of temperature ``t``. Since
  ``max(0, z) <= h_t(z) <= max(0, z) + t log 2`` (equality in the limit ``t -> 0``, where it is the
  hinge: ``t = 0`` gives :func:`~counterfactual_ltr.surrogates.lambda_hinge_bound` exactly), the
  smoothed ``H_j`` still bounds ``rank_j - 1`` from above (margin >= 1), and for ``W >= 0`` and an
  increasing ``lambda`` the objective still bounds the IPS risk ``sum_j W_j lambda(rank_j)``; it
  exceeds the hinge bound by at most ``W_j (lambda(1 + H_j + (m - 1) t log 2) - lambda(1 + H_j))``.
  The softplus is chosen over a Huber-smoothed hinge because its curvature
  ``sigma(z/t) (1 - sigma(z/t)) / t`` is positive on every pair, so every document of a query
  with a click gets a positive curvature (Huber's is 0 outside a band of width ``t``), and it is
  the pairwise logistic loss of RankNet/LambdaMART, so both objectives share one pair function.
* :func:`ips_lambdarank`: LambdaMART's pairwise logistic loss with each clicked document's pairs
  weighted by its inverse propensity ``W_j`` and by ``|lambda(rank_j) - lambda(rank_y)|`` at the
  current ranks (Wang et al., WSDM 2018; Hu et al., WWW 2019, with the propensities given).

The curvature (the ``*_newton`` functions). ``lambda`` is concave for DCG and RBP, so the bound is
not convex in the scores; its Hessian is ``sum_j W_j [lambda'' grad H_j grad H_j^T + lambda' hess H_j]``
with a non-positive first term. The curvature returned is the diagonal of the convex majoriser
of the convex-concave procedure at the current scores -- ``lambda`` replaced by its tangent, i.e.
the weights ``c_j = W_j lambda'(1 + H_j)`` of :func:`counterfactual_ltr.solvers.ccp.linearised_weights`:
``h_d = sum_{pairs (j, y) with d in {j, y}, c_j > 0} c_j h_t''(z_jy)``. The majoriser touches the
objective with the same gradient, and it keeps only the terms that curve upwards (a negative
``c_j``, from a trust-bias correction, is linearised as the SVMs' CCP does). For the LambdaRank loss
it is LambdaMART's own ``w sigma^2 rho (1 - rho)`` per pair, again over positive weights only.

Every pair is evaluated (:class:`ClickAnchorPairs`, built once per training set): the softplus has
no closed form over a run of sorted scores, so the prefix sums of
:mod:`counterfactual_ltr.surrogates.implicit_pairs` do not apply. Time is ``O(sum over clicked
documents of their list length)``, as dense (anchors x documents) blocks per query
(:mod:`counterfactual_ltr.surrogates._query_blocks`): an exponential per anchor and per row, not per
pair, and a dozen elementwise passes and matrix products per pair.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from .._segments import check_finite_1d, check_offsets, rank_within_queries, segment_ids
from .._validation import check_real
from ._query_blocks import QueryBlocks
from .implicit_pairs import ClickPairs
from ._common import doc, reduce_losses

__all__ = ["softplus_hinge", "ClickAnchorPairs", "SortedAnchorPairs", "anchor_pairs", "check_width", "SMOOTHINGS",
           "smooth_lambda_bound", "smooth_lambda_bound_newton", "ips_lambdarank", "ips_lambdarank_newton"]


def softplus_hinge(z, temperature: float):
    """The softplus-smoothed hinge ``t log(1 + exp(z / t))``, its first and its second derivative.

    .. math::

        h_t(z) = t \\log(1 + e^{z/t}), \\quad h_t'(z) = \\sigma(z/t), \\quad
        h_t''(z) = \\sigma(z/t)(1 - \\sigma(z/t)) / t

    ``max(0, z) <= h_t(z) <= max(0, z) + t log 2``. ``t = 0`` is the hinge ``max(0, z)`` with
    the subgradient ``1[z > 0]`` and curvature 0.

    Parameters
    ----------
    z : array
        Hinge arguments.
    temperature : float >= 0
        ``t``; 0 gives the hinge.

    Returns
    -------
    value, slope, curvature : arrays shaped like ``z``

    Examples
    --------
    >>> v, d, c = softplus_hinge([-1.0, 0.0, 2.0], 0.0)
    >>> v.tolist(), d.tolist(), c.tolist()
    ([0.0, 0.0, 2.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0])
    >>> v, d, c = softplus_hinge([0.0], 0.5)
    >>> round(float(v[0]), 6), float(d[0]), float(c[0])      # 0.5 log 2, 1/2, (1/4) / 0.5
    (0.346574, 0.5, 0.5)
    """
    z = np.asarray(z, dtype=np.float64)
    t = check_real(temperature, "temperature", min_value=0.0)
    if t == 0.0:
        active = (z > 0).astype(np.float64)
        return np.maximum(z, 0.0), active, np.zeros_like(z)
    u = z / t if t != 1.0 else z
    # q = sigma(-|u|) from e = exp(-|u|) in (0, 1]: no overflow for any z. In place: a boosting
    # round evaluates this on every pair.
    e = np.abs(u)
    np.negative(e, out=e)
    np.exp(e, out=e)
    value = np.maximum(u, 0.0)
    value += np.log1p(e)
    if t != 1.0:
        value *= t
    q = e
    np.divide(e, 1.0 + e, out=q)
    slope = np.sign(u)
    slope *= q - 0.5
    np.subtract(0.5, slope, out=slope)                 # sigma(u): 1 - q for u > 0, q for u < 0
    curvature = 1.0 - q
    curvature *= q
    if t != 1.0:
        curvature /= t                                   # sigma(u) (1 - sigma(u)) / t = q (1 - q) / t
    return value, slope, curvature


def _anchors(click_weights, query_offsets):
    """``(offsets, n, anchors, weights)``: checked offsets, the row count, the rows with ``W_j != 0``, their ``W_j``."""
    offsets = check_offsets(query_offsets)
    n = int(offsets[-1])
    W = check_finite_1d(click_weights, "click_weights", n)
    anchors = np.flatnonzero(W)
    return offsets, n, anchors, W[anchors]


@doc
class ClickAnchorPairs:
    """Every document with a non-zero click weight (an anchor) against every other document of its query.

    Built once per training set and reused at every boosting round. The pairs are those of
    :class:`~counterfactual_ltr.surrogates.implicit_pairs.ClickPairs`; a round evaluates them as dense
    (anchors x documents) blocks of the queries, bucketed by list length
    (:mod:`counterfactual_ltr.surrogates._query_blocks`): one exponential per anchor and per row
    rather than per pair, no logarithm per pair, and sums by matrix products instead of gathers and
    ``bincount`` over the pairs. ``a`` (anchor rows), ``y`` (the other rows) and ``owner`` (the anchor
    of each pair, 0 .. n_anchors - 1) enumerate the same pairs explicitly, anchor after anchor (formed
    on first use; the hinge ``temperature=0`` is evaluated on them).

    Parameters
    ----------
    click_weights : array (n_docs,)
        ``W_j`` per row (negative under a trust-bias correction; 0: not an anchor).
    {query_offsets}
    dtype : float64 or float32, default float64
        Precision of the pair arithmetic (see :func:`anchor_pairs`).

    Examples
    --------
    >>> pairs = ClickAnchorPairs([0.0, 2.0, 0.0, 1.0, 0.0], [0, 3, 5])
    >>> pairs.a.tolist(), pairs.y.tolist(), pairs.n_pairs
    ([1, 1, 3], [0, 2, 4], 3)
    """

    def __init__(self, click_weights, query_offsets, dtype=np.float64):
        self.offsets, self.n, self.anchors, self.weights = _anchors(click_weights, query_offsets)
        self.anchor_query = segment_ids(self.offsets)[self.anchors]
        self.counts = np.diff(self.offsets)[self.anchor_query] - 1               # pairs per anchor
        self.blocks = QueryBlocks(self.offsets, self.anchors, dtype)

    @cached_property
    def _explicit(self):
        return ClickPairs(self.offsets, self.anchors, np.abs(self.weights)).explicit_owners()

    a = property(lambda self: self._explicit[0], doc="The anchor row of each pair.")
    y = property(lambda self: self._explicit[1], doc="The other row of each pair.")
    owner = property(lambda self: self._explicit[2], doc="The anchor (0 .. n_anchors - 1) of each pair.")

    @property
    def n_pairs(self) -> int:
        return int(self.counts.sum())

    def _anchor_sums(self, values):
        """Per anchor, the sum of ``values`` over its explicit pairs."""
        return np.bincount(self.owner, values, minlength=self.anchors.size)

    def _per_doc(self, pair_values, anchor_factor, anchor_sign):
        """``sum_pairs anchor_factor[owner] * v`` at the other rows, plus ``anchor_sign`` times it at the anchors."""
        at_anchors = anchor_sign * anchor_factor * self._anchor_sums(pair_values)
        out = np.bincount(self.y, pair_values * anchor_factor[self.owner], minlength=self.n)
        out[self.anchors] += at_anchors
        return out

    def _hinge(self, s, lam, margin, hessian):
        """The hinge (``temperature=0``) over the explicit pairs: subgradient ``1[z > 0]``, curvature 0."""
        z = margin - (s[self.a] - s[self.y])
        r = 1.0 + self._anchor_sums(np.maximum(z, 0.0))
        c = self.weights * lam.derivative(r)
        grad = self._per_doc((z > 0).astype(np.float64), c, -1.0)
        return r, grad, (np.zeros(self.n) if hessian else None)

    @doc
    def bound(self, scores, lam, margin, temperature, hessian):
        """The smoothed bound of :func:`smooth_lambda_bound` per query, its gradient and curvature.

        Parameters
        ----------
        {row_scores, lam, margin}
        temperature : float >= 0
            The softplus temperature.
        {hessian, round_returns}
        """
        s = check_finite_1d(scores, "scores", self.n)
        t = check_real(temperature, "temperature", min_value=0.0)
        if t == 0.0:
            r, grad, hess = self._hinge(s, lam, margin, hessian)
        else:
            def weights_of(idx, h):             # the CCP weights W_j lambda'(1 + H_j), from one block's anchors
                c = self.weights[idx] * lam.derivative(1.0 + h)
                return c, np.maximum(c, 0.0)

            # d z / d s_y = +1, d z / d s_j = -1; both second derivatives are +1.
            H, grad, hess = self.blocks.softplus_sums(s, margin, t, weights_of, hessian)
            r = 1.0 + H
        per_query = np.bincount(self.anchor_query, self.weights * lam.value(r), minlength=self.offsets.size - 1)
        return per_query, grad, hess

    @doc
    def lambdarank(self, scores, lam, sigma, hessian):
        """The loss of :func:`ips_lambdarank` per query at the current ranks, its gradient and curvature.

        Parameters
        ----------
        {row_scores}
        lam : LambdaWeight
            The rank weight of the ``|Delta|``.
        sigma : float > 0
            The logistic's scale.
        {hessian, round_returns}
        """
        s = check_finite_1d(scores, "scores", self.n)
        lam_r = lam.value(rank_within_queries(s, self.offsets).astype(np.float64))
        # log(1 + exp(-sigma (s_j - s_y))) per pair, weighted by |lambda(r_j) - lambda(r_y)|
        loss, grad, hess = self.blocks.lambdarank_sums(s, sigma, lam_r, self.weights, hessian)
        per_query = np.bincount(self.anchor_query, loss * self.weights, minlength=self.offsets.size - 1)
        return per_query, grad, hess


class SortedAnchorPairs:
    """The pairs of :class:`ClickAnchorPairs` never enumerated: the shifted-Huber bound from sorted scores.

    With the Huber smoothing ``phi_mu`` (0 for ``z <= 0``, ``z^2 / (2 mu)`` on ``(0, mu)``,
    ``z - mu/2`` beyond) shifted by half its band, ``phi_mu(z + mu/2) >= max(0, z)``, equal to the hinge
    for ``|z| >= mu/2``, each anchor's pairs fall into runs of its query's sorted scores (idle, band,
    linear: :mod:`counterfactual_ltr.surrogates.implicit_pairs`) whose sums are differences of prefix sums of
    the scores and their squares: one sort per round, ``O(n log n + k log n)`` for ``n`` rows and
    ``k`` anchors, however many pairs. The curvature is ``c_j / mu`` on band pairs only.

    Parameters
    ----------
    click_weights : array (n_docs,)
        ``W_j`` per row (0: not an anchor).
    query_offsets : array (n_queries + 1,)
        Query boundaries.

    Examples
    --------
    >>> pairs = SortedAnchorPairs([0.0, 2.0, 0.0, 1.0, 0.0], [0, 3, 5])
    >>> pairs.anchors.tolist(), pairs.n_pairs
    ([1, 3], 3)
    """

    def __init__(self, click_weights, query_offsets):
        self.offsets, self.n, self.anchors, self.weights = _anchors(click_weights, query_offsets)
        self.pairs = ClickPairs(self.offsets, self.anchors, np.abs(self.weights))
        self.anchor_query = self.pairs.anchor_query

    @property
    def n_pairs(self) -> int:
        return self.pairs.n_pairs

    @doc
    def bound(self, scores, lam, margin, width, hessian):
        """The shifted-Huber bound per query, its gradient and curvature (see the class docstring).

        Parameters
        ----------
        {row_scores, lam, margin}
        width : float in (0, margin]
            The Huber band ``mu``.
        {hessian, round_returns}
        """
        from .implicit_pairs import _Smoothed

        s = check_finite_1d(scores, "scores", self.n)
        mu, shifted = width, margin + 0.5 * width
        ev = _Smoothed(self.pairs, s, np.zeros(self.anchors.size), shifted, mu)   # one sort: runs and sums
        srt, lo, hi = ev.sorted, ev.lo, ev.hi
        P1 = srt.prefix
        P2 = np.concatenate(([0.0], np.cumsum(srt.ss * srt.ss)))
        d = shifted - srt.sa                                # z = d + s_y
        band = ((hi - lo) * d * d + 2.0 * d * (P1[hi] - P1[lo]) + (P2[hi] - P2[lo])) / (2.0 * mu)
        linear = (srt.end - hi) * (d - 0.5 * mu) + (P1[srt.end] - P1[hi])
        # Minus the anchor's own pair (z = margin + mu/2 > mu: linear, value margin).
        r = 1.0 + np.maximum(band + linear - margin, 0.0)
        per_query = np.bincount(self.anchor_query, self.weights * lam.value(r), minlength=self.offsets.size - 1)
        c = self.weights * lam.derivative(r)
        ev.Cc = c                                           # the aggregate below is computed with the CCP weights
        grad = -ev.aggregate()[0]
        if not hessian:
            return per_query, grad, None
        h = np.maximum(c, 0.0) / mu
        depth = np.cumsum(np.bincount(lo, h, minlength=self.n + 1) - np.bincount(hi, h, minlength=self.n + 1))
        hess = np.zeros(self.n)
        hess[srt.order] = depth[:self.n]
        hess[self.anchors] += h * (hi - lo)
        return per_query, grad, hess


SMOOTHINGS = ("softplus", "huber")


def _lambda(metric, metric_params, need_derivative: bool):
    from ..metrics import LambdaWeight, get_lambda

    lam = metric if isinstance(metric, LambdaWeight) else get_lambda(metric, **metric_params)
    if need_derivative and lam.derivative is None:
        raise ValueError(f"the rank weight {lam.name!r} is not differentiable: no bound gradient")
    return lam


@doc
def smooth_lambda_bound(scores, click_weights, query_offsets, *, metric="dcg", margin: float = 1.0,
                        temperature: float = 1.0, smoothing: str = "softplus", reduce="sum", **metric_params):
    """Softplus-smoothed propensity-weighted rank bound (Agarwal et al. 2019, Eq. 7); see the module docstring.

    .. math::

        L_q(s) = \\sum_{j \\in q} W_j \\, \\lambda\\big(1 + H^t_j(s)\\big), \\qquad
        H^t_j(s) = \\sum_{y \\neq j} t \\log\\big(1 + e^{(\\Delta - (s_j - s_y)) / t}\\big)

    ``t = 0`` is :func:`~counterfactual_ltr.surrogates.lambda_hinge_bound`; for ``t > 0`` the
    value is at least that (``W >= 0``), hence at least the IPS risk ``sum_j W_j lambda(rank_j)``.

    Parameters
    ----------
    {scores}
    click_weights : array (n_docs,)
        ``W_j``, the summed inverse propensity of the clicks on each document (may be negative
        under a trust-bias correction).
    {query_offsets}
    metric : str or LambdaWeight, default "dcg"
        The rank weight ``lambda`` (differentiable: "dcg", "avg_rank", "rbp").
    margin : float > 0, default 1.0
        ``Delta``; at least 1 for the bound on the rank.
    temperature : float >= 0, default 1.0
        ``t`` (0: the hinge); with ``smoothing="huber"`` the band ``mu`` in ``(0, margin]``.
    smoothing : {"softplus", "huber"}, default "softplus"
        The softplus over explicit pairs, or the Huber smoothing shifted by half its band
        (``phi_mu(z + mu/2)``, also an upper bound of the hinge, exceeding it by at most ``mu/8``
        per pair) from sorted scores without forming pairs (:class:`SortedAnchorPairs`).
    {reduce, metric_params}

    Returns
    -------
    loss : float, or array (n_queries,) with ``reduce=None``
    grad : array (n_docs,)
        The gradient of the (summed) loss with respect to ``scores``.

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr.surrogates import lambda_hinge_bound
    >>> s, W, offsets = [1.0, 0.5, 0.0], [0.0, 2.0, 0.0], [0, 3]
    >>> smooth_lambda_bound(s, W, offsets, metric="avg_rank", temperature=0.0)[0]    # the hinge bound: 2 * 3
    6.0
    >>> bool(smooth_lambda_bound(s, W, offsets, temperature=0.1)[0] >= lambda_hinge_bound(s, W, offsets)[0])
    True
    """
    loss, grad, _ = _bound(scores, click_weights, query_offsets, metric, margin, temperature, smoothing, reduce,
                           metric_params, hessian=False)
    return loss, grad


@doc
def smooth_lambda_bound_newton(scores, click_weights, query_offsets, *, metric="dcg", margin: float = 1.0,
                               temperature: float = 1.0, smoothing: str = "softplus", reduce="sum", **metric_params):
    """:func:`smooth_lambda_bound` with the positive curvature per document that Newton boosting needs.

    The curvature is the diagonal of the convex-concave majoriser at ``scores`` (see the module
    docstring): ``h_d = sum_{pairs (j, y) holding d, c_j > 0} c_j h_t''(z_jy)`` with
    ``c_j = W_j lambda'(1 + H^t_j)``; the exact Hessian's diagonal adds
    ``sum_j W_j lambda''(1 + H^t_j) (dH^t_j / ds_d)^2`` (``<= 0`` for a concave ``lambda`` and ``W >= 0``).

    Parameters
    ----------
    {scores, click_weights, offsets}
    metric : str or LambdaWeight, default "dcg"
        The rank weight ``lambda``.
    margin : float > 0, default 1.0
        The hinges' margin.
    temperature : float >= 0, default 1.0
        The softplus temperature (0: the hinge, curvature 0), or the Huber band.
    smoothing : {"softplus", "huber"}, default "softplus"
        As in :func:`smooth_lambda_bound` (Huber: curvature ``c_j / mu`` on band pairs only).
    reduce : {"sum", "mean", None}, default "sum"
        As in :func:`smooth_lambda_bound` (the curvature follows the gradient's scaling).
    {metric_params}

    Returns
    -------
    loss : float or array (n_queries,)
    grad : array (n_docs,)
    hess : array (n_docs,), >= 0
        Positive on every document of a query with a positive weight (``t > 0``), 0 elsewhere.

    Examples
    --------
    >>> loss, grad, hess = smooth_lambda_bound_newton([1.0, 0.5, 0.0], [0.0, 2.0, 0.0], [0, 3],
    ...                                               metric="avg_rank", temperature=0.5)
    >>> bool(abs(grad.sum()) < 1e-12), bool((hess > 0).all())
    (True, True)
    """
    return _bound(scores, click_weights, query_offsets, metric, margin, temperature, smoothing, reduce, metric_params,
                  hessian=True)


def anchor_pairs(click_weights, query_offsets, smoothing: str = "softplus", dtype=np.float64):
    """The pair structure a smoothing evaluates on: :class:`ClickAnchorPairs` or :class:`SortedAnchorPairs`.

    Parameters
    ----------
    click_weights : array (n_docs,)
        ``W_j`` per row.
    query_offsets : array (n_queries + 1,)
        Query boundaries.
    smoothing : {"softplus", "huber"}, default "softplus"
        Explicit pairs for the softplus, sorted scores for the shifted Huber.
    dtype : float64 or float32, default float64
        Precision of the softplus's pair arithmetic (its sums are float64 either way; relative
        error about 1e-6 in float32, for boosting, whose gradients LightGBM keeps in float32).

    Returns
    -------
    ClickAnchorPairs or SortedAnchorPairs

    Examples
    --------
    >>> type(anchor_pairs([1.0, 0.0], [0, 2], "huber")).__name__
    'SortedAnchorPairs'
    """
    if smoothing not in SMOOTHINGS:
        raise ValueError(f"smoothing must be one of {SMOOTHINGS}, got {smoothing!r}")
    if smoothing == "softplus":
        return ClickAnchorPairs(click_weights, query_offsets, dtype)
    return SortedAnchorPairs(click_weights, query_offsets)


def check_width(margin, temperature, smoothing) -> tuple[float, float]:
    """``(margin, temperature)`` checked: ``margin > 0``; ``temperature >= 0`` (softplus) or in ``(0, margin]`` (Huber).

    Parameters
    ----------
    margin : float
        The hinges' margin.
    temperature : float
        The softplus temperature or the Huber band.
    smoothing : {"softplus", "huber"}
        Which smoothing.

    Returns
    -------
    tuple of float

    Examples
    --------
    >>> check_width(2.0, 1.0, "huber")
    (2.0, 1.0)
    """
    margin = check_real(margin, "margin", min_value=0.0, include_min=False)
    if smoothing == "huber":
        # Up to one margin the anchor's own pair (z = margin + mu/2) stays half a band beyond the band.
        return margin, check_real(temperature, "temperature", min_value=0.0, max_value=margin, include_min=False)
    return margin, check_real(temperature, "temperature", min_value=0.0)


def _bound(scores, click_weights, query_offsets, metric, margin, temperature, smoothing, reduce, metric_params,
           hessian):
    pairs = anchor_pairs(click_weights, query_offsets, smoothing)
    margin, temperature = check_width(margin, temperature, smoothing)
    lam = _lambda(metric, metric_params, need_derivative=True)
    per_query, grad, hess = pairs.bound(scores, lam, margin, temperature, hessian)
    return _reduced(per_query, grad, hess, reduce, hessian)


def _reduced(per_query, grad, hess, reduce, with_hessian):
    loss, grad_r = reduce_losses(per_query, grad, reduce, per_query.size)
    if not with_hessian:
        return loss, grad_r, None
    return loss, grad_r, (hess / per_query.size if reduce == "mean" else hess)


@doc
def ips_lambdarank(scores, click_weights, query_offsets, *, metric="dcg", sigma: float = 1.0, reduce="sum",
                   **metric_params):
    """LambdaMART's loss with each clicked document's pairs weighted by its inverse propensity.

    .. math::

        L_q(s) = \\sum_{j \\in q} W_j \\sum_{y \\neq j} |\\lambda(r_j) - \\lambda(r_y)|
                 \\log\\big(1 + e^{-\\sigma (s_j - s_y)}\\big)

    with the ranks ``r`` of the current scores held fixed (LambdaRank's ``|Delta metric|``): the
    gradient is LambdaMART's lambda-gradient, the gradient of this loss at fixed ranks.
    ``E[W_j]`` is the relevance times the impressions of ``j`` (Wang et al. 2018; Hu et al. 2019
    with known propensities), so the loss is an unbiased estimate of the full-information one.

    Parameters
    ----------
    {scores}
    click_weights : array (n_docs,)
        ``W_j``, the summed inverse propensity of the clicks on each document.
    query_offsets : array (n_queries + 1,)
        Query boundaries.
    metric : str or LambdaWeight, default "dcg"
        The rank weight ``lambda`` of the ``|Delta|`` (any of Table 1, Prec@k included).
    sigma : float > 0, default 1.0
        The logistic's scale (LightGBM's ``sigmoid``).
    reduce : {"sum", "mean", None}, default "sum"
        Sum or mean over queries, or one loss per query.
    **metric_params
        ``k`` for ``"prec@k"``, ``p`` for ``"rbp"``.

    Returns
    -------
    loss : float, or array (n_queries,) with ``reduce=None``
    grad : array (n_docs,)

    Examples
    --------
    >>> loss, grad = ips_lambdarank([0.0, 1.0], [2.0, 0.0], [0, 2], metric="avg_rank")
    >>> round(loss, 6), grad.round(6).tolist()      # 2 |1 - 2| log(1 + e), pushing row 0 up
    (2.626523, [-1.462117, 1.462117])
    """
    loss, grad, _ = _lambdarank(scores, click_weights, query_offsets, metric, sigma, reduce, metric_params,
                                hessian=False)
    return loss, grad


@doc
def ips_lambdarank_newton(scores, click_weights, query_offsets, *, metric="dcg", sigma: float = 1.0, reduce="sum",
                          **metric_params):
    """:func:`ips_lambdarank` with LambdaMART's curvature ``sum w sigma^2 rho (1 - rho)`` per document.

    Parameters
    ----------
    {scores, click_weights, offsets}
    metric : str or LambdaWeight, default "dcg"
        The rank weight of the ``|Delta|``.
    sigma : float > 0, default 1.0
        The logistic's scale.
    reduce : {"sum", "mean", None}, default "sum"
        As in :func:`ips_lambdarank`.
    **metric_params
        Parameters of ``metric``.

    Returns
    -------
    loss : float or array (n_queries,)
    grad : array (n_docs,)
    hess : array (n_docs,), >= 0

    Examples
    --------
    >>> loss, grad, hess = ips_lambdarank_newton([0.0, 1.0], [2.0, 0.0], [0, 2], metric="avg_rank")
    >>> hess.round(6).tolist()                      # 2 * sigma(1) * sigma(-1)
    [0.393224, 0.393224]
    """
    return _lambdarank(scores, click_weights, query_offsets, metric, sigma, reduce, metric_params, hessian=True)


def _lambdarank(scores, click_weights, query_offsets, metric, sigma, reduce, metric_params, hessian):
    sigma = check_real(sigma, "sigma", min_value=0.0, include_min=False)
    pairs = ClickAnchorPairs(click_weights, query_offsets)
    lam = _lambda(metric, metric_params, need_derivative=False)
    per_query, grad, hess = pairs.lambdarank(scores, lam, sigma, hessian)
    return _reduced(per_query, grad, hess, reduce, hessian)
