"""Batch SLAM: regularised empirical SLAM risk with a linear scorer (Chaudhuri & Tewari).

:class:`SLAMRanker` minimises, exactly (up to ``tol``), the convex objective

.. math::

    F(w) = \\tfrac12 \\|w\\|^2 + C \\, \\hat L(w), \\qquad
    \\hat L(w) = \\frac{1}{n} \\sum_{q=1}^{n} \\phi^{v_q}_{SLAM}(X_q w, R_q)

with :func:`~counterfactual_ltr.surrogates.slam_loss` (weights ``v^NDCG``, ``v^NDCG@k`` or
``v^AP``, margin ``Delta``) through :func:`counterfactual_ltr.solvers.solve_regularized`
(oracle: ``w -> (L_hat(w), X^T grad_s / n)``). The empirical loss is the **mean over
queries** (``n`` = number of queries), the regularised-ERM form of the batch SLAM paper
and the convention of the toolkit's RankSVM (``C / n_queries``), so ``C`` grids are
comparable across data-set sizes and with RankSVM.

When ``w = 0`` is the solution for every ``C``. Near ``w = 0`` the loss grows linearly:
``L(t u) = L(0) + t D(u)`` for small ``t > 0``, with
``D(u) = mean_q sum_i v_i (max_{j: R_j < R_i} u.x_j - u.x_i)``. On noisy data with many
lower-graded documents per query, some of them outscore a relevant document in *every*
direction ``u``, so ``D(u) > 0`` for all ``u`` and ``w = 0`` is optimal whatever ``C``.
This is a property of the surrogate (its per-document max), not of the solver: on MQ2008
Fold1 it holds even along the RankSVM direction (mean loss 0.7197 at ``w = 0``, 0.7201 at
``10^-3 u``, 0.7233 at ``10^-2 u``; ``test_slam_loss_grows_from_zero_on_mq2008``). The
online perceptrons do not meet it because they take one step per mistake instead of
minimising the loss.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..logs.aggregate import ClickAggregate
from ..logs.clicklog import ClickLog
from ..datasets import DEFAULT_RELEVANCE_THRESHOLD, RankingDataset, dense_features
from ..propensity import as_propensity_model
from .._validation import check_int, check_real
from ._base import RankerMixin, check_C_scale, click_aggregate
from ._docs import doc
from ..surrogates.slam import SLAM_WEIGHT_KINDS, _check_kind, _check_margin, _slam_core, _weights_core

__all__ = ["SLAMRanker"]


@doc
class SLAMRanker(RankerMixin, BaseEstimator):
    """Linear ranker minimising ``0.5||w||^2 + C * mean_q SLAM_q(X_q w)`` (batch SLAM).

    Parameters
    ----------
    C : float > 0, default 1.0
        Weight of the empirical loss (a mean over queries, or over sessions for click logs).
        {C_scale}
    weights : {"ndcg", "ndcg@k", "ap"}, default "ndcg"
        SLAM weight vector (see :func:`~counterfactual_ltr.surrogates.slam_weights`).
    k : int >= 1, optional
        Cutoff for ``weights="ndcg@k"``.
    margin : float > 0, default 1.0
        ``Delta`` (1: the surrogate upper-bounds ``1 - NDCG`` / ``1 - AP``).
    tol : float > 0, default 1e-6
        Relative duality gap at which the bundle method
        (:func:`~counterfactual_ltr.solvers.solve_regularized`) stops.
    max_iter : int >= 1, default 1000
        Bundle-method iterations before a ConvergenceWarning.
    propensity : None, float or propensity model, default None
        Only for ``fit(log)``: examination propensities (default position-based, eta = 1).
    threshold : float, default 1 (``DEFAULT_RELEVANCE_THRESHOLD``)
        Binarisation threshold of the grades for ``weights="ap"``.
    preprocessor : scikit-learn transformer, optional
        Fitted (a clone) on the training documents in ``fit`` and applied in
        ``predict``; tunable as ``preprocessor__<param>`` (see
        :class:`~counterfactual_ltr.estimators._base.RankerMixin`).

    Attributes
    ----------
    coef_ : (n_features,) weights; ``objective_`` : ``F(coef_)``; ``n_iter_`` : solver
    iterations; ``duality_gap_``, ``converged_`` : solver diagnostics; ``n_features_in_``.

    Notes
    -----
    Fitting on a click log, ``fit(log)``: the log is aggregated per data-set row,
    ``W_i = sum over clicks on i of 1/p(position)``. Clicked rows get relevance 1, never-clicked rows 0, and the SLAM weights of the
    clicked rows are multiplied by ``W_i``. For binary labels all three weight kinds
    coincide: ``v_i = 1/n_c`` for the ``n_c`` clicked rows of the query (``"ndcg"``: the
    clicked block's averaged discount divided by its ideal DCG; ``"ndcg@k"``: the same
    truncated at ``k``; ``"ap"``: ``1/r``). The objective is
    ``0.5||w||^2 + (C/N) sum_q sum_{i clicked} W_i (1/n_c(q)) h_i(w)`` with ``N`` the number
    of sessions (= query instances) and ``h_i = max(0, max_{j unclicked} (Delta + s_j - s_i))``.

    *Derivation.* Let ``r`` be the true binary relevance and clicks follow the
    position-based model ``c_i = o_i r_i``, ``P(o_i = 1) = p_i`` (position-dependent
    propensity, known or estimated). The full-information SLAM loss of a query
    instance is the sum over its relevant documents of ``l_i(s) = (1/r_tot) h*_i(s)``,
    ``h*_i`` the hinge against the truly non-relevant documents. For any per-document
    terms ``l_i`` that do not depend on the clicks, inverse propensity weighting is
    unbiased for exactly the terms in the sum:
    ``E[sum_i (c_i / p_i) l_i] = sum_i (p_i r_i / p_i) l_i = sum_i r_i l_i``; summed over the
    ``N_q`` sessions of query ``q``, ``E[sum_i W_i l_i] = N_q * sum_{i relevant} l_i``. The
    estimator replaces the two unobservable parts of ``l_i`` by observable ones:
    ``1/r_tot`` by ``1/n_c`` and ``h*_i`` by ``h_i`` (hinge against the unclicked rows).
    Non-relevant rows are never clicked, so ``n_c <= r_tot`` and the unclicked set
    contains every non-relevant row: ``(1/n_c) h_i >= (1/r_tot) h*_i`` pointwise. Hence the
    click objective is, in expectation, an *upper bound* of ``N`` times the
    full-information mean SLAM loss (itself ``>= 1 - AP``, ``>= 1 - NDCG`` of the binary
    relevance), and it is exactly the unbiased IPS sum of the full-information terms
    once every relevant row of a query has been clicked at least once (``n_c = r_tot``,
    unclicked set = non-relevant set), which happens with probability -> 1 as sessions
    accumulate. With click noise (clicks on non-relevant rows) the bound argument does
    not hold. Unclicked rows carry no weight (``W = 0``); queries without clicks contribute 0.

    Examples
    --------
    >>> from click_sim import make_ranking
    >>> data = make_ranking(n_queries=30, random_state=0)
    >>> model = SLAMRanker(C=1.0).fit(data.X, data.y, qid=data.qid)
    >>> model.predict(data.X).shape == (data.n_docs,)
    True
    """

    def __init__(self, C: float = 1.0, weights: str = "ndcg", k: int | None = None, margin: float = 1.0,
                 tol: float = 1e-6, max_iter: int = 1000, propensity=None,
                 threshold: float = DEFAULT_RELEVANCE_THRESHOLD, preprocessor=None):
        self.C = C
        self.weights = weights
        self.k = k
        self.margin = margin
        self.tol = tol
        self.max_iter = max_iter
        self.propensity = propensity
        self.threshold = threshold
        self.preprocessor = preprocessor

    # ------------------------------------------------------------------ checks
    def _check_params(self, n_features=None):
        """The hyper-parameters checked as ``fit`` uses them, whatever the others (``load_model`` runs it too).

        Returns ``(C, k, margin, tol, max_iter)``; ``n_features`` is not needed (no option depends on it).
        """
        C = check_real(self.C, "C", min_value=0.0, include_min=False)
        as_propensity_model(self.propensity)
        if not isinstance(self.weights, str) or self.weights not in SLAM_WEIGHT_KINDS:
            raise ValueError(f"weights must be one of {SLAM_WEIGHT_KINDS}, got {self.weights!r}")
        k = _check_kind(self.weights, self.k)
        margin = _check_margin(self.margin)
        tol = check_real(self.tol, "tol", min_value=0.0, include_min=False)
        max_iter = check_int(self.max_iter, "max_iter", min_value=1)
        check_real(self.threshold, "threshold")
        return C, k, margin, tol, max_iter

    # --------------------------------------------------------------------- fit
    def fit(self, X, y=None, qid=None):
        """Fit on ``(X, y, qid)``, a :class:`RankingDataset`, or a :class:`ClickLog` (see class doc).

        Parameters
        ----------
        X : array (n_docs, n_features), RankingDataset or ClickLog
            The training data: features with ``y`` and ``qid``, a data set, or a click log.
        y, qid : arrays (n_docs,), optional
            Graded labels and query ids when ``X`` is an array.

        Returns
        -------
        self
        """
        C, k, margin, tol, max_iter = self._check_params()
        if not isinstance(X, (ClickLog, ClickAggregate, RankingDataset)) and y is None:
            raise ValueError("SLAMRanker.fit(X, y, qid) needs the graded labels y")
        X, y, qid = self._begin_fit(X, y, qid)
        if isinstance(X, (ClickLog, ClickAggregate)):
            Xm, labels, offsets, v, n = self._click_problem(X)
        else:
            if isinstance(X, RankingDataset):
                data = X
            else:
                if qid is None:
                    raise ValueError("SLAMRanker.fit(X, y) needs qid=... (the query id of every row)")
                if y is None:
                    raise ValueError("SLAMRanker.fit(X, y, qid) needs the graded labels y")
                data = RankingDataset(X, y, qid)
            Xm, offsets = dense_features(data.X), data.query_offsets
            labels = data.y.astype(np.float64)
            v = _weights_core(labels, offsets, self.weights, k, float(self.threshold))
            if self.weights == "ap":
                labels = (labels >= float(self.threshold)).astype(np.float64)
            n = data.n_queries
        self._solve(Xm, labels, offsets, v, n, C, margin, tol, max_iter)
        return self._end_fit()

    def _click_problem(self, log):
        agg = click_aggregate(log, as_propensity_model(self.propensity), type(self).__name__)
        data = agg.data
        W = np.asarray(agg.weights, dtype=np.float64)
        rows = data.rows_of(agg.queries)                  # queries with >= 1 click, their rows
        Xm = dense_features(data.X[rows])
        offsets = np.r_[0, np.cumsum(data.query_lengths[agg.queries])].astype(np.int64)
        labels = (W[rows] > 0).astype(np.float64)
        # All weight kinds give 1/n_c on binary labels; computed through the same function.
        kind = "ap" if self.weights == "ap" else self.weights
        k = _check_kind(kind, self.k)
        v = _weights_core(labels, offsets, kind, k, 0.5) * W[rows]
        return Xm, labels, offsets, v, agg.n_sessions

    def _solve(self, Xm, labels, offsets, v, n, C, margin, tol, max_iter):
        from ..solvers import solve_regularized

        def oracle(w):
            per_query, g = _slam_core(Xm @ w, labels, v, offsets, margin)
            return float(per_query.sum()) / n, (g @ Xm) / n

        # At w = 0 every weighted document's hinge is at most the margin: L(0) <= margin sum(v) / n.
        with np.errstate(over="ignore"):
            loss_at_zero = float(np.float64(margin) * np.sum(np.abs(v)) / n)
        if not np.isfinite(loss_at_zero):
            raise ValueError(f"{type(self).__name__}: the SLAM loss overflows float64 at margin={margin:g}; use a "
                             "smaller margin")
        check_C_scale(self, C, loss_at_zero, Xm, solver="bmrm", margin=margin)

        try:
            result = solve_regularized(oracle, Xm.shape[1], C, tol=tol, max_iter=max_iter)
        except ValueError as err:
            if "non-finite" not in str(err):
                raise
            raise ValueError(f"{type(self).__name__}: the SLAM loss overflows float64 at margin={margin:g}, C={C:g} "
                             f"({err}); use a smaller margin or C") from None
        self.coef_ = np.asarray(result.coef, dtype=np.float64)
        self.objective_ = float(result.objective)
        self.n_iter_ = int(result.n_iter)
        self.duality_gap_ = result.gap
        self.converged_ = bool(result.converged)
        if not np.any(self.coef_):
            warnings.warn(f"{type(self).__name__}: the solution is w = 0 (all scores tie), which happens when the "
                          "SLAM loss grows in every direction from 0 (see the module docstring)", UserWarning)
        self.n_features_in_ = Xm.shape[1]
        return self

    # ----------------------------------------------------------------- predict
    @doc
    def predict(self, X):
        """Scores ``X @ coef_`` (higher is better); ``X`` may be a RankingDataset or ClickLog.

        {predict}
        """
        check_is_fitted(self, "coef_")
        return self._prediction_features(X, self.coef_.shape[0]) @ self.coef_

    def objective(self, X, y=None, qid=None) -> float:
        """``F(coef_)`` on full-information data (for checks): ``0.5||w||^2 + C mean_q SLAM_q``.

        Parameters
        ----------
        X : array (n_docs, n_features) or RankingDataset
            Features (with ``y`` and ``qid``) or a data set.
        y, qid : arrays (n_docs,), optional
            Graded labels and query ids when ``X`` is an array.

        Returns
        -------
        float
        """
        check_is_fitted(self, "coef_")
        C, k, margin, _, _ = self._check_params()
        data = X if isinstance(X, RankingDataset) else RankingDataset(X, y, qid)
        labels = data.y.astype(np.float64)
        v = _weights_core(labels, data.query_offsets, self.weights, k, float(self.threshold))
        if self.weights == "ap":
            labels = (labels >= float(self.threshold)).astype(np.float64)
        scores = self._prediction_features(data.X, self.coef_.shape[0]) @ self.coef_
        per_query, _ = _slam_core(scores, labels, v, data.query_offsets, margin)
        return 0.5 * float(self.coef_ @ self.coef_) + C * float(per_query.sum()) / data.n_queries
