"""Perceptron-like online rankers of Chaudhuri & Tewari ("Perceptron-like algorithms for online LTR").

Both learners keep a linear scorer ``s = X w`` (``w_1 = 0``), show ``argsort(-s)`` (ties by
row order, the toolkit's convention), receive the full relevance vector ``R_t`` and update
**only on mistake rounds**, i.e. when the ranking-measure-induced loss ``RML(s_t, R_t)``
(``1 - NDCG``, ``1 - NDCG@k`` or ``1 - AP`` of the shown ranking) is non-zero:

* :class:`SLAMPerceptron` -- Algorithm 2: ``w_{t+1} = w_t - eta z_t`` with ``z_t = X_t^T g_t``
  and ``g_t`` the subgradient (Eq. 16) of the *whole* SLAM surrogate
  ``phi^{v_t}_SLAM(X_t w, R_t)`` at ``w_t`` -- every document with a positive hinge
  ``c_i`` (misordered *or* inside the margin) contributes ``v_i (e_{k(i)} - e_i)``, not just
  the misordered pairs. On rounds with ``RML = 0`` nothing changes, even if some
  hinge is positive (the loss ``f_t`` of Eq. 15 is then identically 0).
* :class:`MaxPairPerceptron` -- Algorithm 3: the same with the max-pair surrogate of
  Eq. 27, whose subgradient (Eq. 29) ``e_{j*} - e_{i*}`` involves only the worst pair. On
  a mistake round that pair is misordered, so it is the pair maximising ``s_j - s_i``
  over ``R_i > R_j`` -- a choice invariant to scaling ``w``; since ``w_1 = 0``, every
  ``w_t`` is ``eta`` times the ``eta = 1`` iterate and the shown rankings do not depend on
  ``eta`` (the classic perceptron property; Algorithm 2 does not have it).

The mistake test is exact (no metric evaluation): for NDCG, a mistake is any pair shown
in the wrong order of grades; for NDCG@k, top-k shown grades differing from the ideal
ones; for AP, a non-relevant document shown above a relevant one (grades binarised with
``threshold``; the AP variants also use the binarised grades in the surrogate, as the
paper does for its AP experiments). Lists without a relevant document never cause an
update (their SLAM weights are 0).

Surrogate values and gradients come from :mod:`counterfactual_ltr.surrogates.slam`
(its single-query path), so the formulas live in one place.
"""

from __future__ import annotations

import numpy as np

from ..datasets import DEFAULT_RELEVANCE_THRESHOLD
from ..surrogates.slam import SLAM_WEIGHT_KINDS, _check_kind, _levels, _max_pair_core, _slam_core, _weights_core
from .._validation import check_int, check_real
from ._base import Feedback, OnlineLearner, check_learning_rate

__all__ = ["SLAMPerceptron", "MaxPairPerceptron"]

_MEASURES = ("ndcg", "ndcg@k", "ap")


def _check_margin(margin) -> float:
    return check_real(margin, "margin", min_value=0.0)


def is_mistake(shown_labels: np.ndarray, measure: str, k: int | None, threshold: float) -> bool:
    """Whether the shown order (labels in shown order) has a non-zero ``1 - measure``."""
    lab = shown_labels
    if measure == "ap":
        lab = lab >= threshold
        return bool(np.any(lab[1:] > lab[:-1]))
    if measure == "ndcg":
        return bool(np.any(lab[1:] > lab[:-1]))
    # NDCG@k: the top-k grades must be the k largest grades, in order.
    kk = min(k, lab.shape[0])
    ideal = np.sort(lab)[::-1][:kk]
    return bool(np.any(lab[:kk] != ideal))


class _LinearPerceptron(OnlineLearner):
    """Shared state and ``rank`` of the linear online learners (full feedback)."""

    feedback_k = None

    def rank(self, X) -> np.ndarray:
        self._check_width(X)
        with np.errstate(over="ignore", invalid="ignore"):
            s = X @ self.coef_
        if not np.all(np.isfinite(s)):
            raise ValueError(f"{type(self).__name__}: non-finite scores at round {self.t_} (|coef_| up to "
                             f"{np.max(np.abs(self.coef_)):.3g}, or X not finite); lower eta")
        self._last = (X, s)
        return np.argsort(-s, kind="stable")

    def _scores_and_labels(self, X, feedback: Feedback):
        """Scores of the ranked list (cached by ``rank``) and its labels in row order."""
        self._check_width(X)
        m = X.shape[0]
        ranking, labels = feedback.ranking, feedback.labels
        if len(ranking) != m:
            raise ValueError(f"feedback ranking has {len(ranking)} entries but X has {m} rows (mismatched lengths)")
        if len(labels) != m:
            raise ValueError(f"{type(self).__name__} needs full feedback: got {len(labels)} labels for "
                             f"{m} documents (feedback_k is None)")
        last = self._last
        self._last = None
        s = last[1] if last is not None and last[0] is X else X @ self.coef_
        y = np.empty(m)
        y[ranking] = labels
        return s, y, np.asarray(labels, dtype=np.float64)

    def _offsets(self, m: int) -> np.ndarray:
        off = self._offset_cache.get(m)
        if off is None:
            off = self._offset_cache[m] = np.array([0, m], dtype=np.int64)
        return off

    def _base_reset(self, n_features: int, feature_names=None):
        n_features = check_int(n_features, "n_features", min_value=1)
        self._keep_feature_names(feature_names, n_features)
        self.coef_ = np.zeros(n_features)
        self.t_ = 1
        self.n_updates_ = 0
        self._last = None
        self._offset_cache = {}


class _MistakeDriven(_LinearPerceptron):
    """The parameters both perceptrons take, kept by ``__init__`` and checked there and by ``reset``.

    ``eta``, a ranking measure (named ``weights`` or ``measure``), ``k``, ``margin`` and ``threshold``.
    """

    #: the parameter naming the ranking measure ("weights" or "measure"), and the measures it may name
    _measure_param: str
    _measure_options: tuple

    def _keep_params(self, eta, measure, k, margin, threshold):
        """Keep ``__init__``'s arguments (the measure under the class's own name for it), then check them."""
        self.eta = eta
        setattr(self, self._measure_param, measure)
        self.k = k
        self.margin = margin
        self.threshold = threshold
        self._validate()

    def _validate(self):
        eta = check_learning_rate(self.eta, "eta")
        name, measure = self._measure_param, getattr(self, self._measure_param)
        if not isinstance(measure, str) or measure not in self._measure_options:
            raise ValueError(f"{name} must be one of {self._measure_options}, got {measure!r}")
        k = _check_kind(measure, self.k)
        return eta, k, _check_margin(self.margin), check_real(self.threshold, "threshold")

    def _mistake_step(self, g, X):
        """``w <- w - eta X^T g`` on a mistake round (refused if it overflows), counted in ``n_updates_``."""
        with np.errstate(over="ignore", invalid="ignore"):
            w = self.coef_ - self._eta * (g @ X)
        self._take_step(w)
        self.n_updates_ += 1

    def reset(self, n_features: int, *, feature_names=None):
        self._eta, self._k, self._margin, self._threshold = self._validate()
        self._base_reset(n_features, feature_names)
        return self


# Label vectors whose SLAM weights are kept (a few MiB for lists of 20).
_WEIGHT_CACHE_SIZE = 100_000


class SLAMPerceptron(_MistakeDriven):
    """Algorithm 2: perceptron on the SLAM surrogate, updating on ``NDCG``, ``NDCG@k`` or ``AP`` mistakes.

    Parameters
    ----------
    eta : float > 0
        Learning rate (affects the predictions, unlike the classic perceptron).
    weights : "ndcg", "ndcg@k" or "ap"
        SLAM weight vector (:func:`~counterfactual_ltr.surrogates.slam_weights`); also the
        measure whose induced loss decides the mistake rounds.
    k : int, optional
        Cutoff for ``weights="ndcg@k"``.
    margin : float
        ``Delta`` of the surrogate (1 in the paper's analysis).
    threshold : float
        Binarisation threshold for ``weights="ap"``.

    Attributes
    ----------
    coef_ : weights ``w``; ``t_`` : next round (1-based); ``n_updates_`` : mistake rounds so far.

    Examples
    --------
    >>> from click_sim import make_separable_ranking
    >>> data = make_separable_ranking(20, random_state=0)
    >>> learner = SLAMPerceptron(eta=1.0).reset(data.n_features)
    >>> X, y = data.X[:20], data.y[:20]
    >>> shown = learner.rank(X)
    >>> learner = learner.update(X, Feedback(shown, y[shown]))
    >>> learner.n_updates_, learner.t_
    (1, 2)
    """

    _measure_param, _measure_options = "weights", SLAM_WEIGHT_KINDS

    def __init__(self, eta: float = 1.0, weights: str = "ndcg", k: int | None = None, margin: float = 1.0,
                 threshold: float = DEFAULT_RELEVANCE_THRESHOLD):
        self._keep_params(eta, weights, k, margin, threshold)

    def reset(self, n_features: int, *, feature_names=None) -> "SLAMPerceptron":
        super().reset(n_features, feature_names=feature_names)
        self._weight_cache = {}
        return self

    def update(self, X, feedback: Feedback) -> "SLAMPerceptron":
        s, y, shown_labels = self._scores_and_labels(X, feedback)
        kind = self.weights
        if is_mistake(shown_labels, kind, self._k, self._threshold):
            off = self._offsets(X.shape[0])
            # v and the label levels depend on the labels only, and streams repeat queries.
            key = y.tobytes()
            cached = self._weight_cache.get(key)
            if cached is None:
                if kind == "ap":
                    v = _weights_core(y, off, kind, None, self._threshold)
                    y = (y >= self._threshold).astype(np.float64)
                    lv = _levels(y)
                else:
                    lv = _levels(y)          # shared by the weights and the surrogate
                    v = _weights_core(y, off, kind, self._k, self._threshold, lv)
                if len(self._weight_cache) < _WEIGHT_CACHE_SIZE:
                    self._weight_cache[key] = (v, y, lv)
            else:
                v, y, lv = cached
            _, g = _slam_core(s, y, v, off, self._margin, lv)
            self._mistake_step(g, X)
        self.t_ += 1
        return self


class MaxPairPerceptron(_MistakeDriven):
    """Algorithm 3: perceptron on the max-pair surrogate (Eq. 27); predictions do not depend on ``eta``.

    Parameters
    ----------
    eta : float > 0
        Learning rate; only scales ``coef_``.
    measure : "ndcg", "ndcg@k" or "ap"
        Ranking measure whose induced loss decides the mistake rounds (the paper's RML).
        With ``"ap"`` the grades are binarised (``threshold``) for the surrogate too.
    k : int, optional
        Cutoff for ``measure="ndcg@k"``.
    margin : float
        ``Delta`` (1 in the paper). Any ``margin`` keeps the ``eta``-invariance: on a
        mistake round the worst pair is misordered, whatever ``Delta >= 0``.
    threshold : float, default 1
        Binarisation threshold of the grades for ``measure="ap"``.

    Examples
    --------
    >>> import numpy as np
    >>> from click_sim import make_separable_ranking
    >>> data = make_separable_ranking(20, random_state=0)
    >>> learner = MaxPairPerceptron().reset(data.n_features)
    >>> X, y = data.X[:20], data.y[:20]
    >>> shown = learner.rank(X)
    >>> learner = learner.update(X, Feedback(shown, y[shown]))
    >>> int(np.count_nonzero(learner.coef_ != 0)) > 0
    True
    """

    _measure_param, _measure_options = "measure", _MEASURES

    def __init__(self, eta: float = 1.0, measure: str = "ndcg", k: int | None = None, margin: float = 1.0,
                 threshold: float = DEFAULT_RELEVANCE_THRESHOLD):
        self._keep_params(eta, measure, k, margin, threshold)

    def reset(self, n_features: int, *, feature_names=None) -> "MaxPairPerceptron":
        return super().reset(n_features, feature_names=feature_names)

    def update(self, X, feedback: Feedback) -> "MaxPairPerceptron":
        s, y, shown_labels = self._scores_and_labels(X, feedback)
        if is_mistake(shown_labels, self.measure, self._k, self._threshold):
            if self.measure == "ap":
                y = (y >= self._threshold).astype(np.float64)
            _, g = _max_pair_core(s, y, self._offsets(X.shape[0]), self._margin)
            self._mistake_step(g, X)
        self.t_ += 1
        return self
