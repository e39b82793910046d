"""Linear ranking SVMs: RankSVM (full information) and the propensity SVMs of Agarwal et al. (2019).

All of them minimise ``0.5 ||w||^2 + C * (loss)`` where the loss is built
from weighted pairwise hinges ``max(0, 1 - w.(x_i - x_j))``, solved exactly
by :func:`counterfactual_ltr.solvers.solve_pairwise_hinge`.

* :class:`RankSVM`: pairs of documents with different grades in a query,
  loss averaged over queries (``C / n_queries``), as svm_rank does. Fitted on
  a click log it is the naive "SVM Rank" baseline: every click is paired
  with every other candidate, propensities ignored.
* :class:`SVMPropRank`: ``lambda(r) = r``. The IPS hinge bound (Eq. 7)
  ``(C/n) sum_clicks (1/q_i) sum_{y != y_i} hinge`` is one convex QP; the
  clicks on a document aggregate into one weight ``W_j = sum 1/q``.
* :class:`SVMPropDCG`: ``lambda(r) = -1/log2(1 + r)`` (concave). The
  convex-concave procedure linearises ``lambda`` at the current hinge sums
  ``H_j`` (Lipp & Boyd 2016): each iteration solves the PropRank QP with
  weights ``W_j * lambda'(1 + H_j)`` -- the ``1/q_i'`` of section 4.1 -- warm
  started from the last solution, and stops when the relative change of
  the true objective ``0.5||w||^2 + (C/n) sum_j W_j lambda(1 + H_j)`` is below
  ``tol`` (default 1e-3: 6-8 iterations on MQ2008; the paper's "3-5 iterations"
  are changes below ~1e-2). The objective never increases (majorisation-
  minimisation). The CCP is inexact: the first subproblem is solved to a
  relative gap of 1e-4 and later ones to 1% of the last objective change, never
  looser than before and never tighter than ``solver_tol``; the returned point
  is never worse than the warm start, so monotonicity holds regardless.
* :class:`SVMPropRBP`: rank-biased precision, concave, through the same CCP.

``n`` is the number of clicks in the log, as in the paper. The paper writes
``log`` without a base for DCG; base 2 only rescales ``C``.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .._segments import offsets_from_lengths, segment_gather, within_query_pairs
from ..clicklog import ClickLog
from ..datasets import RankingDataset
from ..implicit_pairs import ClickPairs
from ..propensity import as_propensity_model
from ..solvers import solve_pairwise_hinge
from ._base import prediction_matrix

__all__ = ["RankSVM", "SVMPropRank", "SVMPropDCG", "SVMPropRBP", "click_pairs", "click_pair_set"]


def _check_C(C) -> float:
    C = float(C)
    if not np.isfinite(C) or C <= 0:
        raise ValueError(f"C must be a positive finite number, got {C}")
    return C


def click_pairs(data: RankingDataset, weights: np.ndarray):
    """Pairs (clicked row j, every other row y of its query) of the rows with ``weights > 0``.

    Returns ``(rows, local_X, i, j, pair_w, doc_of_pair)`` restricted to the
    queries with clicks: ``local_X = data.X[rows]``; ``i``, ``j`` index
    ``local_X``; ``pair_w = weights[clicked row]``; ``doc_of_pair`` numbers the
    clicked documents 0..n_clicked-1 for per-document reductions.
    """
    clicked = np.flatnonzero(weights > 0)
    queries = np.unique(data.query_index[clicked])
    rows = segment_gather(data.query_offsets, queries)
    local = np.full(data.n_docs, -1, dtype=np.int64)
    local[rows] = np.arange(len(rows))
    lengths = data.query_lengths[data.query_index[clicked]]
    # For each clicked row: all rows of its query, then drop the row itself.
    members = segment_gather(data.query_offsets, data.query_index[clicked])
    owner = np.repeat(np.arange(len(clicked)), lengths)
    keep = members != clicked[owner]
    i = local[clicked[owner[keep]]]
    j = local[members[keep]]
    return rows, data.X[rows], i, j, weights[clicked][owner[keep]], owner[keep], clicked


def click_pair_set(data: RankingDataset, weights: np.ndarray):
    """The pairs of :func:`click_pairs` as a :class:`ClickPairs` (no pair arrays).

    Returns ``(rows, local_X, pairs, clicked)``: ``local_X = data.X[rows]`` holds
    the queries with clicks; ``pairs`` anchors every clicked row of ``local_X``
    (in ``clicked`` order) with weight ``weights[clicked]``.
    ``pairs.explicit()`` gives the arrays ``i, j, pair_w`` of :func:`click_pairs`,
    in the same order.

    Examples
    --------
    >>> from click_sim import make_ranking
    >>> data = make_ranking(n_queries=5, n_docs=4, random_state=0)
    >>> weights = np.zeros(data.n_docs); weights[[1, 9]] = [2.0, 0.5]
    >>> rows, Xl, pairs, clicked = click_pair_set(data, weights)
    >>> rows.tolist(), pairs.anchors.tolist(), pairs.n_pairs
    ([0, 1, 2, 3, 8, 9, 10, 11], [1, 5], 6)
    """
    clicked = np.flatnonzero(weights > 0)
    queries = np.unique(data.query_index[clicked])
    rows = segment_gather(data.query_offsets, queries)
    local = np.full(data.n_docs, -1, dtype=np.int64)
    local[rows] = np.arange(len(rows))
    offsets = offsets_from_lengths(data.query_lengths[queries])
    # Every query clicked (long lists, many passes): the data set's X, not a copy of it.
    Xl = data.X if rows.size == data.n_docs else data.X[rows]
    return rows, Xl, ClickPairs(offsets, local[clicked], weights[clicked]), clicked


class _LinearRanker(BaseEstimator):
    """Shared ``predict`` of the linear rankers."""

    def predict(self, X):
        """Scores ``X @ coef_`` (higher is better); ``X`` may also be a RankingDataset or ClickLog."""
        check_is_fitted(self, "coef_")
        return prediction_matrix(X, self.coef_.shape[0]) @ self.coef_


# Relative duality gap of the first CCP subproblem: its solution is only a starting point.
_CCP_FIRST_INNER_TOL = 1e-4


class RankSVM(_LinearRanker):
    """Linear Ranking SVM (Joachims 2002) on graded labels, or naively on clicks.

    Minimises ``0.5||w||^2 + (C / n_queries) sum_q sum_{R_i > R_j} max(0, 1 - w.(x_i - x_j))``.

    ``fit(X, y, qid=...)`` uses full-information labels; ``fit(log)`` treats
    clicks as labels ignoring position bias (the "SVM Rank" baseline of
    Table 3): each click pairs the clicked document with every other
    candidate, weight = number of clicks, ``C`` divided by the number of
    clicks (as the propensity SVMs do, so ``C`` grids are comparable).

    Examples
    --------
    >>> from click_sim import make_ranking
    >>> data = make_ranking(n_queries=40, random_state=0)
    >>> model = RankSVM(C=1.0).fit(data.X, data.y, qid=data.qid)
    >>> model.predict(data.X).shape == (data.n_docs,)
    True
    """

    def __init__(self, C: float = 1.0, tol: float = 1e-6, max_iter: int = 1000):
        self.C = C
        self.tol = tol
        self.max_iter = max_iter

    def fit(self, X, y=None, qid=None):
        C = _check_C(self.C)
        if isinstance(X, ClickLog):
            agg = X.aggregate(lambda positions: np.ones(len(positions)))
            if agg.n_clicks == 0:
                raise ValueError("the click log has no clicks: nothing to learn from")
            # Long candidate lists: implicit pairs (solve_pairwise_hinge picks the path).
            _, Xl, pairs, _ = click_pair_set(agg.data, agg.weights.astype(np.float64))
            i, j, w = pairs, None, None
            scale = agg.n_clicks
        else:
            data = X if isinstance(X, RankingDataset) else RankingDataset(X, y, qid if qid is not None else _missing_qid())
            i, j = within_query_pairs(data.query_offsets)
            keep = data.y[i] > data.y[j]
            i, j = i[keep], j[keep]
            if i.size == 0:
                raise ValueError("no pair of documents with different grades in the same query")
            Xl, w, scale = data.X, np.ones(i.size), data.n_queries
        result = solve_pairwise_hinge(Xl, i, j, w, C / scale, tol=self.tol, max_iter=self.max_iter)
        self.coef_ = result.coef
        self.n_iter_ = result.n_iter
        self.objective_ = result.objective
        self.duality_gap_ = result.gap
        self.converged_ = result.converged
        self.n_features_in_ = Xl.shape[1]
        return self


def _missing_qid():
    raise ValueError("RankSVM.fit(X, y) needs qid=... (the query id of every row)")


class _PropensitySVM(_LinearRanker):
    """Propensity-weighted hinge-bound SVM for a rank weight ``lambda`` (shared by the Prop* estimators)."""

    _metric = "avg_rank"

    def _metric_params(self):
        return {}

    def _lambda(self):
        from ..metrics import get_lambda

        return get_lambda(self._metric, **self._metric_params())

    def _prepare(self, log):
        if not isinstance(log, ClickLog):
            raise ValueError(f"{type(self).__name__}.fit needs a ClickLog, got {type(log).__name__}")
        C = _check_C(self.C)
        agg = log.aggregate(as_propensity_model(self.propensity))
        if agg.n_clicks == 0:
            raise ValueError("the click log has no clicks: nothing to learn from")
        rows, Xl, pairs, clicked = click_pair_set(agg.data, agg.weights)
        return C / agg.n_clicks, agg, Xl, pairs, clicked

    def _bound(self, scores, pairs):
        """Hinge sums ``H_j`` per clicked document (sorted scores, no pairs formed)."""
        return pairs.hinge_sums(scores)

    def fit(self, log, y=None):
        lam = self._lambda()
        C_n, agg, Xl, pairs, clicked = self._prepare(log)
        W = pairs.weights
        linear = lam.concave is True and lam.convex is True  # affine lambda: one QP
        if not linear and lam.concave is not True:
            raise ValueError(f"rank weight {lam.name!r} is not concave: the convex-concave procedure does not apply")
        max_ccp = 1 if linear else int(self.max_ccp_iter)
        if max_ccp < 1:
            raise ValueError(f"max_ccp_iter must be >= 1, got {max_ccp}")
        coef = np.zeros(Xl.shape[1])
        history, snips_history, iters, seconds, tols = [], [], [], [], []
        history.append(self._objective(coef, Xl, pairs, W, lam, C_n))
        converged_ccp = False
        inner_tol = self.solver_tol
        if max_ccp > 1:  # a lone step is solved exactly; a first step of many only loosely
            inner_tol = max(self.solver_tol, min(_CCP_FIRST_INNER_TOL, 0.1 * self.tol))
        for _ in range(max_ccp):
            # Linearise lambda at the current hinge sums: PropRank weights W_j * lambda'(1 + H_j).
            H = self._bound(Xl @ coef, pairs)
            step_pairs = pairs.with_weights(W * lam.derivative(1.0 + H))
            tols.append(inner_tol)
            t0 = time.perf_counter()
            result = solve_pairwise_hinge(Xl, step_pairs, None, None, C_n, w0=coef if iters else None,
                                          tol=inner_tol, max_iter=self.max_iter)
            seconds.append(time.perf_counter() - t0)
            coef = result.coef
            iters.append(result.n_iter)
            objective = self._objective(coef, Xl, pairs, W, lam, C_n)
            snips_history.append(self._train_snips(coef, agg, lam))
            previous = history[-1]
            history.append(objective)
            if linear:
                converged_ccp = result.converged
                break
            change = abs(previous - objective) / max(abs(objective), 1e-12)
            if change <= self.tol:
                converged_ccp = True
                break
            # Inexact CCP: a step far from the fixed point needs no exact QP. The solver
            # returns its best iterate, never worse than the warm start where the majoriser
            # touches the objective, so the objective stays non-increasing; the tolerance
            # tightens with the objective change down to ``solver_tol``.
            inner_tol = max(self.solver_tol, min(inner_tol, 0.01 * change))
        if not converged_ccp and not linear:
            warnings.warn(f"{type(self).__name__}: the convex-concave procedure stopped after {max_ccp} "
                          f"iterations with relative objective change above tol={self.tol}", ConvergenceWarning)
        self.coef_ = coef
        self.objective_ = history[-1]
        self.objective_history_ = np.asarray(history)
        self.train_snips_history_ = np.asarray(snips_history)
        self.n_iter_ = np.asarray(iters)
        self.n_ccp_iter_ = len(iters)
        self.solve_seconds_ = np.asarray(seconds)
        self.inner_tol_ = np.asarray(tols)        # relative duality gap asked of each subproblem
        self.converged_ = bool(converged_ccp and result.converged)
        self.duality_gap_ = result.gap
        self.n_features_in_ = Xl.shape[1]
        return self

    def _objective(self, coef, Xl, pairs, W, lam, C_n):
        H = self._bound(Xl @ coef, pairs)
        return 0.5 * float(coef @ coef) + C_n * float(np.sum(W * lam.value(1.0 + H)))

    def _train_snips(self, coef, agg, lam):
        """SNIPS estimate of the metric on the training clicks (metric per relevant document)."""
        from ..evaluation import metric_weight
        from .._segments import rank_within_queries

        scores = agg.data.X @ coef
        ranks = rank_within_queries(scores, agg.data.query_offsets)
        clicked = np.flatnonzero(agg.weights)
        m = metric_weight(self._metric, **self._metric_params())(ranks[clicked])
        return float(np.sum(agg.weights[clicked] * m) / np.sum(agg.weights[clicked]))


class SVMPropRank(_PropensitySVM):
    """SVM PropRank (Joachims et al. 2017): ``lambda(r) = r``, one convex QP.

    Minimises ``0.5||w||^2 + (C/n) sum_j W_j sum_{y != j} max(0, 1 - w.(x_j - x_y))``
    over a click log, ``W_j`` the summed ``1/q`` of the clicks on document
    ``j`` under ``propensity`` (default position-based, eta = 1).

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=40, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> SVMPropRank(C=1.0).fit(log).coef_.shape
    (10,)
    """

    _metric = "avg_rank"

    def __init__(self, C: float = 1.0, propensity=None, solver_tol: float = 1e-6, max_iter: int = 1000):
        self.C = C
        self.propensity = propensity
        self.solver_tol = solver_tol
        self.max_iter = max_iter

    tol = 0.0
    max_ccp_iter = 1


class SVMPropDCG(_PropensitySVM):
    """SVM PropDCG (Agarwal et al. 2019): DCG hinge bound by the convex-concave procedure.

    Minimises ``0.5||w||^2 + (C/n) sum_j W_j lambda(1 + H_j(w))`` with
    ``lambda(r) = -1/log2(1 + r)`` and ``H_j`` the hinge bound on ``rank_j - 1``.
    Attributes after ``fit``: ``objective_history_`` (objective at the start
    and after every CCP iteration, non-increasing), ``train_snips_history_``
    (training SNIPS-DCG after every iteration), ``n_iter_`` (solver
    iterations per CCP iteration), ``n_ccp_iter_``, ``solve_seconds_`` and
    ``inner_tol_`` (time of, and relative duality gap asked of, each subproblem).

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=40, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> model = SVMPropDCG(C=1.0).fit(log)
    >>> bool(np.all(np.diff(model.objective_history_) <= 1e-9))
    True
    """

    _metric = "dcg"

    def __init__(self, C: float = 1.0, propensity=None, max_ccp_iter: int = 50, tol: float = 1e-3,
                 solver_tol: float = 1e-6, max_iter: int = 1000):
        self.C = C
        self.propensity = propensity
        self.max_ccp_iter = max_ccp_iter
        self.tol = tol
        self.solver_tol = solver_tol
        self.max_iter = max_iter


class SVMPropRBP(SVMPropDCG):
    """Propensity SVM for rank-biased precision, ``lambda(r) = -(1-p) p^(r-1)`` (concave), by CCP."""

    _metric = "rbp"

    def __init__(self, C: float = 1.0, p: float = 0.8, propensity=None, max_ccp_iter: int = 50,
                 tol: float = 1e-3, solver_tol: float = 1e-6, max_iter: int = 1000):
        super().__init__(C=C, propensity=propensity, max_ccp_iter=max_ccp_iter, tol=tol,
                         solver_tol=solver_tol, max_iter=max_iter)
        self.p = p

    def _metric_params(self):
        return {"p": self.p}
