"""Online learning to rank from top-k feedback: RTop-kF (Chaudhuri & Tewari, AISTATS 2016, Algorithm 1).

Each round the learner scores the list, ``s = X w``, and shows with
probability ``1 - gamma`` the argsort of ``s`` (its own ranking ``sigma_t``)
and with probability ``gamma`` a uniformly random permutation. It then sees
the graded labels of the top ``k`` *shown* documents only, builds an
unbiased estimate ``g`` of the surrogate gradient ``grad_s phi(s, R)`` with
respect to the scores, and takes the projected step
``w <- Proj_{||w|| <= U}(w - eta X^T g)``.

Marginal probabilities (exact, from the sampling distribution)
---------------------------------------------------------------
With ``L_k`` the learner's own top-``k`` set (first ``k`` of the stable
argsort of ``s``) and ``S_k`` the shown top-``k`` set:

* ``P(j in S_k) = (1 - gamma) 1[j in L_k] + gamma k / m``; for ``k = 1``
  this is ``p(sigma(1)) = (1 - gamma) 1[j = sigma_t(1)] + gamma / m``;
* ``P({i, j} subset of S_k) = (1 - gamma) 1[i, j in L_k] + gamma k (k-1) / (m (m-1))``;
  for ``k = 2`` this is ``p(sigma(1), sigma(2)) + p(sigma(2), sigma(1))``
  with the indicator ``{i, j} = L_2``.

The AISTATS text gives ``p(sigma(1)) = 1 - gamma + gamma/m`` for every drawn
permutation; that holds only when the shown list starts with the learner's
own top document (otherwise it is ``gamma/m``) and makes the estimate biased.

Estimators (Lemma 1 with the top-k generalisation)
--------------------------------------------------
When ``grad_s phi(s, R) = sum_i h_i(R_i)`` decomposes over single documents
(squared, unnormalised-KL ListNet, SmoothDCG@1), ``g = sum_{j in S_k} h_j(R_j) / P(j in S_k)``
is unbiased: ``E[g] = sum_j P(j in S_k) h_j(R_j) / P(j in S_k)``. When it
decomposes over pairs (RankSVM), ``g = sum_{{i,j} subset S_k} (h_ij + h_ji) / P({i,j} subset S_k)``.
For ``k = 1`` (resp. 2) these are exactly the paper's estimators with the
exact marginals; larger ``k`` uses all revealed labels (lower variance).
The per-document terms are

* squared ``||s - R||^2``: ``grad = 2 s - 2 R``, so ``g = 2 s - 2 sum_{j in S_k} R_j e_j / P_j``
  (the ``2 s`` part is known and needs no estimation);
* unnormalised-KL ListNet: ``h_j = (e^{s_j} - e^{R_j}) e_j``;
* SmoothDCG@1 (negated, see :func:`~counterfactual_ltr.surrogates.smooth_dcg_at1_loss`):
  ``h_j = -(1/eps) G(R_j) pi_j (e_j - pi)`` with ``pi = softmax(s / eps)``, ``G(r) = 2^r - 1``;
* RankSVM hinge (margin 1): ``h_ij = 1[R_i > R_j] 1[1 + s_j > s_i] (e_j - e_i)``.
"""

from __future__ import annotations

import math

import numpy as np

from .._segments import check_finite_1d, offsets_from_lengths
from .._validation import check_int, check_real
from ..surrogates.pairwise import pairwise_hinge
from ..models import _rng
from .._docs import fill_doc
from ._base import Feedback, OnlineLearner, make_schedule

__all__ = [
    "TopKFeedbackRanker",
    "SURROGATE_MIN_K",
    "inclusion_probabilities",
    "squared_gradient_estimate",
    "kl_listnet_gradient_estimate",
    "smooth_dcg_gradient_estimate",
    "ranksvm_gradient_estimate",
    "estimate_score_gradient",
]

#: Minimum top-k feedback each surrogate's gradient needs (Lemmas 1-3 of the paper).
SURROGATE_MIN_K = {"squared": 1, "ranksvm": 2, "kl_listnet": 1, "smooth_dcg": 1}


# ----------------------------------------------------------------------------------------------
# Public estimators (vectorised over many draws of the shown permutation)
# ----------------------------------------------------------------------------------------------

# Parameter and return text the gradient estimators share: a ``{name, ...}`` line is filled from it at import.
_doc = fill_doc({
    "scores": "scores : array (m,)\n    The learner's scores of the query's documents.",
    "shown": "shown : array (m,) or (n_draws, m)\n    The shown permutation(s).",
    "labels": "labels : array (k,)\n    Labels of the first ``k`` shown documents.",
    "gamma": "gamma : float in [0, 1]\n    Exploration probability the list was drawn with.",
    "returns": "Returns\n-------\narray like ``scores`` (or ``(n_draws, m)``)",
})


def _check_gamma(gamma, upper: float = 1.0, name: str = "gamma") -> float:
    gamma = check_real(gamma, name)
    if not (0.0 < gamma <= upper):
        raise ValueError(f"{name} must lie in (0, {upper}], got {gamma}")
    return gamma


def _prepare(scores, shown, labels, gamma):
    """Validated ``(s, idx (n, k), R (n, k), gamma, learner top-k mask, single)``."""
    s = check_finite_1d(scores, "scores")
    m = s.shape[0]
    gamma = _check_gamma(gamma)
    shown = np.asarray(shown)
    labels = np.asarray(labels, dtype=np.float64)
    single = shown.ndim == 1
    if shown.ndim not in (1, 2) or labels.ndim != shown.ndim:
        raise ValueError(f"shown and labels must both be 1-D (one draw) or 2-D (draws x positions), "
                         f"got shapes {shown.shape} and {labels.shape}")
    shown2 = shown.reshape(1, -1) if single else shown
    lab2 = labels.reshape(1, -1) if single else labels
    n, k = lab2.shape
    if shown2.shape[0] != n:
        raise ValueError(f"shown has {shown2.shape[0]} draws but labels has {n} (mismatched lengths)")
    if k < 1:
        raise ValueError("no labels revealed: the top-k feedback needs k >= 1")
    if k > m:
        raise ValueError(f"k={k} revealed labels but the list has only m={m} documents")
    if shown2.shape[1] < k:
        raise ValueError(f"shown lists {shown2.shape[1]} positions, fewer than the k={k} labels")
    if not np.issubdtype(shown2.dtype, np.integer):
        raise ValueError(f"shown must hold integer row indices, got dtype {shown2.dtype}")
    idx = shown2[:, :k].astype(np.int64)
    if idx.min() < 0 or idx.max() >= m:
        raise ValueError(f"shown holds a row index outside [0, {m})")
    if k > 1 and np.any(np.diff(np.sort(idx, axis=1), axis=1) == 0):
        raise ValueError("shown repeats a document among its top-k positions")
    if not np.all(np.isfinite(lab2)):
        raise ValueError("labels hold a non-finite value")
    in_top = np.zeros(m, dtype=bool)
    in_top[np.argsort(-s, kind="stable")[:k]] = True
    return s, idx, lab2, gamma, in_top, single


@_doc
def inclusion_probabilities(scores, shown, k: int, gamma):
    """Exact ``P(doc in shown top-k)`` of the documents ``shown[..., :k]``.

    ``P(j in S_k) = (1 - gamma) 1[j in L_k] + gamma k / m`` where ``L_k`` is
    the learner's top-k (stable argsort of ``scores``) and ``m = len(scores)``.

    Parameters
    ----------
    {scores, shown}
    k : int >= 1
        Number of top positions whose labels are revealed.
    {gamma}

    Returns
    -------
    array (k,) or (n_draws, k)

    Examples
    --------
    >>> inclusion_probabilities([0.3, 0.9, 0.1], [1, 0, 2], 1, 0.3).round(6).tolist()  # own top shown
    [0.8]
    >>> inclusion_probabilities([0.3, 0.9, 0.1], [0, 1, 2], 1, 0.3).round(6).tolist()  # explored: gamma/m
    [0.1]
    >>> inclusion_probabilities([0.3, 0.9, 0.1], [0, 1, 2], 2, 0.3).round(6).tolist()  # both in L_2
    [0.9, 0.9]
    """
    k = check_int(k, "k")
    s = check_finite_1d(scores, "scores")
    m = s.shape[0]
    if not 1 <= k <= m:
        raise ValueError(f"k={k} must be between 1 and the list length m={m}")
    idx = np.asarray(shown, dtype=np.int64)[..., :k]
    in_top = np.zeros(m, dtype=bool)
    in_top[np.argsort(-s, kind="stable")[:k]] = True
    return _inclusion(in_top, idx, _check_gamma(gamma), k, m)


def _scatter(m, idx, values):
    """``(n_draws, m)`` zeros with ``values`` at each draw's shown top-k documents ``idx``."""
    n = idx.shape[0]
    out = np.zeros((n, m))
    out[np.arange(n)[:, None], idx] = values  # indices are distinct within a draw
    return out


def _inclusion(in_top, idx, gamma, k, m):
    """``P(j in S_k) = (1 - gamma) 1[j in L_k] + gamma k / m`` of the shown top-k documents ``idx``."""
    return (1.0 - gamma) * in_top[idx] + gamma * k / m


@_doc
def squared_gradient_estimate(scores, shown, labels, gamma):
    """Unbiased estimate of ``grad_s ||s - R||^2 = 2 (s - R)`` from top-k feedback.

    ``g = 2 s - 2 sum_{j in S_k} R_j e_j / P(j in S_k)``. ``shown`` is the shown
    permutation (or a 2-D array of draws, one per row), ``labels[i]`` the
    label of ``shown[i]`` for the first ``k = len(labels)`` positions,
    ``gamma`` the exploration probability the list was drawn with.
    Returns an array like ``scores`` (or ``(n_draws, m)``).

    Parameters
    ----------
    {scores, shown, labels, gamma, returns}

    Examples
    --------
    >>> squared_gradient_estimate([0.5, 0.0, 0.2], [0, 2, 1], [2], gamma=0.3).tolist()
    [-4.0, 0.0, 0.4]
    >>> squared_gradient_estimate([0.5, 0.0, 0.2], [2, 0, 1], [1], gamma=0.3).tolist()  # p = 0.1
    [1.0, 0.0, -19.6]
    """
    s, idx, R, gamma, in_top, single = _prepare(scores, shown, labels, gamma)
    m = s.shape[0]
    p = _inclusion(in_top, idx, gamma, R.shape[1], m)
    g = 2.0 * s - _scatter(m, idx, 2.0 * R / p)
    return g[0] if single else g


@_doc
def kl_listnet_gradient_estimate(scores, shown, labels, gamma):
    """Unbiased estimate of ``grad_s phi_KL = exp(s) - exp(R)`` from top-k feedback.

    ``g = sum_{j in S_k} (e^{s_j} - e^{R_j}) e_j / P(j in S_k)``.

    Parameters
    ----------
    {scores, shown, labels, gamma, returns}

    Examples
    --------
    >>> g = kl_listnet_gradient_estimate([0.0, 0.0], [0, 1], [1], gamma=0.2)
    >>> [round(v, 6) for v in g.tolist()]     # (1 - e) / (0.8 + 0.1)
    [-1.909202, 0.0]
    """
    s, idx, R, gamma, in_top, single = _prepare(scores, shown, labels, gamma)
    m = s.shape[0]
    p = _inclusion(in_top, idx, gamma, R.shape[1], m)
    g = _scatter(m, idx, (np.exp(s[idx]) - np.exp(R)) / p)
    return g[0] if single else g


def _softmax(s, epsilon):
    z = s / epsilon
    e = np.exp(z - z.max())
    return e / e.sum()


@_doc
def smooth_dcg_gradient_estimate(scores, shown, labels, gamma, *, epsilon: float = 0.01):
    """Unbiased estimate of the gradient of negative SmoothDCG@1 from top-k feedback.

    With ``pi = softmax(s / eps)`` and ``c_j = G(R_j) pi_j / P(j in S_k)``:
    ``g = -(1/eps) (sum_{j in S_k} c_j e_j - (sum_{j in S_k} c_j) pi)``.

    Parameters
    ----------
    {scores, shown, labels, gamma}
    epsilon : float > 0, default 0.01
        SmoothDCG smoothing.

    {returns}

    Examples
    --------
    >>> g = smooth_dcg_gradient_estimate([1.0, 0.0], [0, 1], [1], gamma=0.2, epsilon=1.0)
    >>> [round(v, 6) for v in g.tolist()]    # -pi_0 (1 - pi_0) / 0.9, +pi_0 pi_1 / 0.9
    [-0.218458, 0.218458]
    """
    epsilon = check_real(epsilon, "epsilon", min_value=0.0, include_min=False)
    s, idx, R, gamma, in_top, single = _prepare(scores, shown, labels, gamma)
    m = s.shape[0]
    p = _inclusion(in_top, idx, gamma, R.shape[1], m)
    pi = _softmax(s, epsilon)
    c = (np.exp2(R) - 1.0) * pi[idx] / p
    g = -(_scatter(m, idx, c) - c.sum(axis=1)[:, None] * pi) / epsilon
    return g[0] if single else g


@_doc
def ranksvm_gradient_estimate(scores, shown, labels, gamma, *, margin: float = 1.0):
    """Unbiased estimate of the RankSVM hinge gradient from top-k feedback (k >= 2).

    ``g = sum_{{i,j} subset S_k} (h_ij + h_ji) / P({i,j} subset S_k)`` with
    ``h_ij = 1[R_i > R_j] 1[margin + s_j > s_i] (e_j - e_i)`` and
    ``P({i,j} subset S_k) = (1 - gamma) 1[i, j in L_k] + gamma k (k-1) / (m (m-1))``.
    The pair weight is ``a + b 1[i, j in L_k]``, so the estimate is
    ``a * pairwise_hinge(shown top-k) + b * pairwise_hinge(shown top-k within L_k)``
    (:func:`~counterfactual_ltr.surrogates.pairwise.pairwise_hinge`, unit weights).

    Parameters
    ----------
    {scores, shown, labels, gamma}
    margin : float, default 1.0
        Margin of the pairwise hinge.

    {returns}

    Examples
    --------
    >>> # learner's top-2 is {1, 0}; shown top-2 = (0, 1): P = 0.7 + 0.3 * 2 / 6 = 0.8
    >>> ranksvm_gradient_estimate([0.5, 0.9, 0.0], [0, 1, 2], [2, 0], gamma=0.3).tolist()
    [-1.25, 1.25, 0.0]
    """
    s, idx, R, gamma, in_top, single = _prepare(scores, shown, labels, gamma)
    n, k = R.shape
    m = s.shape[0]
    if k < 2:
        raise ValueError(f"the RankSVM estimator needs top-2 feedback or more, got k={k}")
    explore = gamma * k * (k - 1) / (m * (m - 1))
    a = 1.0 / explore
    b = 1.0 / ((1.0 - gamma) + explore) - a
    rows = np.repeat(np.arange(n), k)
    flat = idx.ravel()
    _, g_all = pairwise_hinge(s[flat], R.ravel(), np.arange(n + 1) * k, margin=margin)
    g = np.bincount(rows * m + flat, a * g_all, minlength=n * m)
    keep = in_top[flat]
    counts = np.bincount(rows[keep], minlength=n)
    nonempty = counts > 0
    if keep.any():
        # pairwise_hinge needs non-empty queries: drop draws without any document of L_k.
        _, g_top = pairwise_hinge(s[flat[keep]], R.ravel()[keep], offsets_from_lengths(counts[nonempty]),
                                  margin=margin)
        g += np.bincount(rows[keep] * m + flat[keep], b * g_top, minlength=n * m)
    g = g.reshape(n, m)
    return g[0] if single else g


_ESTIMATORS = {
    "squared": squared_gradient_estimate,
    "kl_listnet": kl_listnet_gradient_estimate,
    "smooth_dcg": smooth_dcg_gradient_estimate,
    "ranksvm": ranksvm_gradient_estimate,
}


@_doc
def estimate_score_gradient(surrogate: str, scores, shown, labels, gamma, **params):
    """Dispatch to the estimator of ``surrogate`` (``"squared"``, ``"ranksvm"``, ``"kl_listnet"``, ``"smooth_dcg"``).

    ``params``: ``epsilon`` for ``smooth_dcg``, ``margin`` for ``ranksvm``.
    The gradient with respect to ``w`` of a linear model is ``X.T @ g``.

    Parameters
    ----------
    surrogate : {"squared", "ranksvm", "kl_listnet", "smooth_dcg"}
        The surrogate whose score gradient is estimated.
    scores, shown, labels : arrays
        As in :func:`squared_gradient_estimate`.
    gamma : float
        As in :func:`squared_gradient_estimate`.
    **params
        ``epsilon`` or ``margin``.

    {returns}

    Examples
    --------
    >>> estimate_score_gradient("squared", [0.0, 0.0], [0, 1], [1], gamma=0.5).tolist()  # p = 0.5 + 0.25
    [-2.6666666666666665, 0.0]
    """
    try:
        fn = _ESTIMATORS[surrogate]
    except KeyError:
        raise ValueError(f"unknown surrogate {surrogate!r}; choose one of {sorted(_ESTIMATORS)}") from None
    return fn(scores, shown, labels, gamma, **params)


# ----------------------------------------------------------------------------------------------
# The learner
# ----------------------------------------------------------------------------------------------

class TopKFeedbackRanker(OnlineLearner):
    """RTop-kF: online linear ranker learning from the labels of the top-k shown documents only.

    Parameters
    ----------
    surrogate : {"squared", "ranksvm", "kl_listnet", "smooth_dcg"}
        Squared loss (top-1), RankSVM pairwise hinge with margin 1 (top-2),
        unnormalised-KL ListNet (top-1), negative SmoothDCG@1 (top-1, non-convex).
    k : int, optional
        Number of top shown positions whose labels are revealed
        (``feedback_k``); default the minimum the surrogate needs (1 or 2).
        Larger ``k`` uses every revealed label. A list shorter than ``k``
        raises ``ValueError`` at ``rank``/``update`` time.
    eta, eta_power : float
        Learning rate ``eta_t = eta / t**eta_power`` (``eta > 0``).
    gamma, gamma_power : float
        Exploration ``gamma_t = gamma / t**gamma_power``, ``gamma`` in (0, 1/2).
    radius : float
        ``U``, radius of the l2 ball the weights are projected onto.
    epsilon : float
        SmoothDCG smoothing (only for ``"smooth_dcg"``).
    random_state : None, int or Generator
        Drives the exploration draws.

    Attributes
    ----------
    coef_ : (n_features,) weights ``w``; ``t_`` : index of the next round (1-based);
    n_explored_ : rounds in which a uniformly random permutation was shown.

    Examples
    --------
    >>> from click_sim import make_ranking
    >>> data = make_ranking(n_queries=5, random_state=0)
    >>> learner = TopKFeedbackRanker("ranksvm", eta=0.01, gamma=0.1, random_state=0).reset(data.n_features)
    >>> X = data.X[data.query_offsets[0]:data.query_offsets[1]]
    >>> shown = learner.rank(X)
    >>> y = data.y[data.query_offsets[0]:data.query_offsets[1]]
    >>> learner = learner.update(X, Feedback(shown, y[shown[:learner.feedback_k]]))
    >>> learner.feedback_k, learner.t_
    (2, 2)
    """

    def __init__(self, surrogate: str = "squared", k: int | None = None, eta=0.01, gamma=0.1,
                 radius: float = 1.0, eta_power: float = 0.0, gamma_power: float = 0.0,
                 epsilon: float = 0.01, random_state=None):
        self.surrogate = surrogate
        self.k = k
        self.eta = eta
        self.gamma = gamma
        self.radius = radius
        self.eta_power = eta_power
        self.gamma_power = gamma_power
        self.epsilon = epsilon
        self.random_state = random_state
        self._validate()

    # -- parameters ------------------------------------------------------------------------
    @property
    def feedback_k(self) -> int:
        if self.k is None:
            return SURROGATE_MIN_K.get(self.surrogate, 1) if isinstance(self.surrogate, str) else 1
        return check_int(self.k, "k", min_value=1)

    def _validate(self):
        if not isinstance(self.surrogate, str) or self.surrogate not in SURROGATE_MIN_K:
            raise ValueError(f"unknown surrogate {self.surrogate!r}; choose one of {sorted(SURROGATE_MIN_K)}")
        need = SURROGATE_MIN_K[self.surrogate]
        if self.k is not None:
            k = check_int(self.k, "k", min_value=1)
            if k < need:
                raise ValueError(f"surrogate {self.surrogate!r} needs top-{need} feedback, got k={k}")
        eta = make_schedule(self.eta, self.eta_power, "eta")
        if not callable(self.gamma):
            g = check_real(self.gamma, "gamma")
            if not (0.0 < g < 0.5):
                raise ValueError(f"gamma must lie in (0, 1/2), got {self.gamma}")
        gamma = make_schedule(self.gamma, self.gamma_power, "gamma")
        radius = check_real(self.radius, "radius", min_value=0.0, include_min=False)
        eps = check_real(self.epsilon, "epsilon", min_value=0.0, include_min=False)
        return eta, gamma, radius, eps

    # -- protocol --------------------------------------------------------------------------
    def reset(self, n_features: int, *, feature_names=None) -> "TopKFeedbackRanker":
        self._eta_t, self._gamma_t, self._radius, self._epsilon = self._validate()
        self._keep_feature_names(feature_names, check_int(n_features, "n_features", min_value=1))
        self._k = int(self.feedback_k)
        self._rng = _rng(self.random_state)
        self.coef_ = np.zeros(check_int(n_features, "n_features", min_value=1))
        self.t_ = 1
        self.n_explored_ = 0
        self._last = None
        return self

    def _gamma_now(self) -> float:
        g = self._gamma_t(self.t_)
        if not (0.0 < g < 0.5):
            raise ValueError(f"gamma_t must lie in (0, 1/2), got {g} at round {self.t_} "
                             f"(gamma={self.gamma!r}, gamma_power={self.gamma_power!r})")
        return g

    def _check_length(self, m: int):
        if self._k > m:
            raise ValueError(f"feedback k={self._k} exceeds the list length m={m}: "
                             f"a list needs at least k documents")

    def rank(self, X) -> np.ndarray:
        self._check_width(X)
        m = X.shape[0]
        self._check_length(m)
        s = X @ self.coef_
        order = np.argsort(-s, kind="stable")
        g = self._gamma_now()
        if self._rng.random() < g:
            shown = self._rng.permutation(m)
            self.n_explored_ += 1
        else:
            shown = order
        self._last = (X, s, order, g)
        return shown

    def update(self, X, feedback: Feedback) -> "TopKFeedbackRanker":
        self._check_width(X)
        m = X.shape[0]
        k = self._k
        self._check_length(m)
        ranking, labels = feedback.ranking, feedback.labels
        if len(labels) != k:
            raise ValueError(f"feedback holds {len(labels)} labels but the learner uses k={k} (list length m={m})")
        last = self._last
        if last is not None and last[0] is X:
            _, s, order, g = last
        else:  # update without the matching rank call: score now, with the current gamma_t
            s = X @ self.coef_
            order = np.argsort(-s, kind="stable")
            g = self._gamma_now()
        self._last = None
        z = self._w_gradient(X, s, order, ranking, labels, g, m, k)
        if z is not None:
            rate = self._eta_t(self.t_)
            if not (rate > 0 and np.isfinite(rate)):
                raise ValueError(f"eta_t must be a positive finite number, got {rate} at round {self.t_} "
                                 f"(eta={self.eta!r}, eta_power={self.eta_power!r})")
            with np.errstate(over="ignore", invalid="ignore"):
                w = self.coef_ - rate * z
                sq = w @ w
            U = self._radius
            if not np.isfinite(sq):
                # The step overflowed (its norm is far beyond U), but its projection is exact:
                # w / ||w|| = d / ||d|| with d = w / eta_t.
                w = self.coef_ / rate - z
                sq = w @ w
                w = w * (U / math.sqrt(sq)) if sq > 0 else self.coef_
            elif sq > U * U:
                w = w * (U / math.sqrt(sq))
            self._take_step(w)
        self.t_ += 1
        return self

    def _w_gradient(self, X, s, order, ranking, labels, g, m, k):
        """Estimate of ``grad_w phi(X w, R) = X^T grad_s`` (None when it is zero)."""
        surrogate = self.surrogate
        if k == 1 and surrogate != "ranksvm":
            j = int(ranking[0])
            R = float(labels[0])
            p = g / m + (1.0 - g if j == order[0] else 0.0)
            if surrogate == "squared":
                gs = 2.0 * s
                gs[j] -= 2.0 * R / p
                return gs @ X
            if surrogate == "kl_listnet":
                return ((math.exp(s[j]) - math.exp(R)) / p) * X[j]
            # smooth_dcg
            gain = 2.0 ** R - 1.0
            if gain == 0.0:
                return None
            pi = _softmax(s, self._epsilon)
            c = gain * pi[j] / p
            gs = (c / self._epsilon) * pi
            gs[j] -= c / self._epsilon
            return gs @ X
        if k == 2 and surrogate == "ranksvm":
            i, j = int(ranking[0]), int(ranking[1])
            Ri, Rj = labels[0], labels[1]
            if Ri == Rj:
                return None
            if Ri < Rj:
                i, j = j, i  # i is the preferred document
            if 1.0 + s[j] - s[i] <= 0.0:
                return None
            o1, o2 = order[0], order[1]
            own = (i == o1 and j == o2) or (i == o2 and j == o1)
            P = 2.0 * g / (m * (m - 1)) + (1.0 - g if own else 0.0)
            return (X[j] - X[i]) / P
        params = {"epsilon": self._epsilon} if surrogate == "smooth_dcg" else {}
        gs = estimate_score_gradient(surrogate, s, np.asarray(ranking), labels, g, **params)
        return gs @ X
