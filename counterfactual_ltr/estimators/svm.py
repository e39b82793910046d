"""Linear ranking SVMs: RankSVM (full information) and the propensity SVMs of Agarwal et al. (2019).

All of them minimise ``0.5 ||w||^2 + C * (loss)`` where the loss is built
from weighted pairwise hinges ``max(0, 1 - w.(x_i - x_j))``, solved exactly
by :func:`counterfactual_ltr.solvers.solve_pairwise_hinge`. With constraints
(``monotone_constraints``, ``bounds``, ``constraints``) or an L1 / elastic-net
``penalty`` the same loss is minimised over the feasible set by
:func:`counterfactual_ltr.solvers.constrained.solve_constrained_hinge`.

* :class:`RankSVM`: pairs of documents with different grades in a query,
  loss averaged over queries (``C / n_queries``), as svm_rank does. Fitted on
  a click log it is the naive "SVM Rank" baseline: every click is paired
  with every other candidate, propensities ignored.
* :class:`SVMPropRank`: ``lambda(r) = r``. The IPS hinge bound (Eq. 7)
  ``(C/n) sum_clicks (1/q_i) sum_{y != y_i} hinge`` is one convex QP; the
  clicks on a document aggregate into one weight ``W_j = sum 1/q``.
* :class:`SVMPropDCG`: ``lambda(r) = -1/log2(1 + r)`` (concave), minimised by
  the convex-concave procedure (:mod:`counterfactual_ltr.solvers.ccp`): each step
  solves the PropRank QP with the weights ``W_j lambda'(1 + H_j)`` at the
  current hinge sums ``H_j``, warm-started from the last solution, until the
  relative change of ``0.5||w||^2 + (C/n) sum_j W_j lambda(1 + H_j)`` is at most
  ``tol``; the objective never increases. On long candidate lists (implicit
  pairs, where every Newton step sorts all rows) a later subproblem also stops
  once a Newton step gains less than a tenth of the objective's last decrease:
  from the warm start its first Newton steps take nearly all of its decrease.
  ``duality_gap_`` is then that of a subproblem stopped early, and ``converged_``
  says that the CCP met ``tol``.
* :class:`SVMPropRBP`: rank-biased precision, concave, through the same CCP.

A fit whose weights are exactly 0 (all scores tie) warns and says why: no pair
to rank (every click on a one-document query; then ``converged_`` is False and
``n_iter_`` 0), features equal within every pair, or ``C`` too small.

``n`` is the number of clicks in the log, as in the paper. The paper writes
``log`` without a base for DCG; base 2 only rescales ``C``.

Trust bias (an affine ``propensity`` such as
:class:`~counterfactual_ltr.propensity.TrustBiasPropensity`): the clicks'
IPS weights become the affine correction of Vardasbi et al. (CIKM 2020),
``W_j = sum over impressions of j of (click - beta_r) / alpha_r``, an
unbiased estimate of (impressions x relevance). Documents shown but rarely
clicked get ``W_j < 0``, and ``W_j lambda(1 + H_j)`` is then concave in
``w``. Each CCP step keeps the convex part (documents with positive weight,
as before) and linearises the concave part at the current ``w``: the
negative-weight hinge sums become a linear term ``l.w``, written for the
solver as one extra always-active hinge pair (``s max(0, 1 + l.w / (C s))``
with ``s`` large enough to be active at the current ``w``: an upper bound of
``l.w``, tight there). For PropRank (``lambda`` affine) this is an exact
majoriser and the objective never increases; for PropDCG/RBP the negative
part's ``lambda`` is linearised too, which is not a bound, so a step that
raises the true objective is halved back towards the previous ``w`` and the
CCP stops if none helps. PropRank with negative weights runs this CCP with
``max_ccp_iter=50`` and ``tol=1e-3``.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .._segments import offsets_from_lengths, segment_gather, within_query_pairs
from .._validation import check_int, check_probability, check_real
from ..logs.clicklog import ClickLog
from ..solvers.constrained import check_penalty, feasible_set, solve_constrained_hinge
from ..datasets import RankingDataset
from ..surrogates.implicit_pairs import ClickPairs
from ..propensity import as_propensity_model
from ..solvers import solve_pairwise_hinge
from ..solvers.pairwise import uses_implicit_pairs
from ..logs.aggregate import ClickAggregate
from ..solvers.ccp import convex_concave, linearised_weights
from ._base import RankerMixin, check_C_scale, click_aggregate
from ._docs import doc

__all__ = ["RankSVM", "SVMPropRank", "SVMPropDCG", "SVMPropRBP", "click_pairs", "click_pair_set",
           "affine_click_weights"]


def _check_C(C) -> float:
    return check_real(C, "C", min_value=0.0, include_min=False)


def _warn_zero_coef(est, n_pairs: int, X, i, j):
    """Warn when the fitted weights are exactly 0 (all scores tie), saying why."""
    name = type(est).__name__
    if n_pairs == 0:
        why = ("every click (or graded pair) is on a query with a single candidate document, so there is no "
               "pair to rank: nothing can be learned (converged_ is False, n_iter_ is 0)")
    elif not _rows_differ(X, i, j):
        why = "the features do not differ between any two documents of a pair, so no weight changes a hinge"
    else:
        why = (f"w = 0 is optimal to within the solver tolerance at C = {est.C}: C is too small for the clicks "
               "to move the weights (all scores tie); try a larger C")
    warnings.warn(f"{name}: the solution is coef_ = 0: {why}", UserWarning, stacklevel=3)


def _rows_differ(X, i, j) -> bool:
    """Whether ``X[i] != X[j]`` for some pair (sparse ``X``: through one random projection, no row gathers)."""
    if not sp.issparse(X):
        return bool(np.any(X[i] != X[j]))
    # Equal rows project equally; different rows almost never do (fixed direction: deterministic).
    s = X @ np.random.default_rng(0).standard_normal(X.shape[1])
    return bool(np.any(s[i] != s[j]))


# The queries with clicks are taken out of X only when the others hold more than this share of its
# rows: where nearly every query has a click, the copy costs a feature matrix of memory to save a
# few per cent of the work (products and per-query sorts over the rows of queries without clicks,
# which carry no pairs).
_COPY_MIN_UNCLICKED_SHARE = 0.1


def _clicked_query_rows(data: RankingDataset, clicked: np.ndarray):
    """``(queries, rows, local_X)``: the queries kept for the clicked rows, their rows, ``data.X[rows]``."""
    queries = np.unique(data.query_index[clicked])
    if data.query_lengths[queries].sum() >= (1.0 - _COPY_MIN_UNCLICKED_SHARE) * data.n_docs:
        return np.arange(data.n_queries), np.arange(data.n_docs), data.X
    rows = segment_gather(data.query_offsets, queries)
    return queries, rows, data.X[rows]


def click_pairs(data: RankingDataset, weights: np.ndarray):
    """Pairs (clicked row j, every other row y of its query) of the rows with ``weights > 0``.

    Parameters
    ----------
    data : RankingDataset
        The data set the click weights refer to.
    weights : array (n_docs,)
        Click weight of every row (e.g. ``ClickAggregate.weights``); rows with 0 are not clicked.

    Returns
    -------
    tuple ``(rows, local_X, i, j, pair_w, doc_of_pair, clicked)``
        Restricted to the queries with clicks (all queries, and ``local_X = data.X``
        itself, where those hold 90 % of the rows or more): ``local_X = data.X[rows]``;
        ``i``, ``j`` index ``local_X``; ``pair_w = weights[clicked row]``; ``doc_of_pair`` numbers the
        clicked documents 0..n_clicked-1 for per-document reductions; ``clicked`` are
        their data-set rows.

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import RankingDataset
    >>> data = RankingDataset(np.eye(3), [1, 0, 0], [1, 1, 1])
    >>> rows, X, i, j, w, doc, clicked = click_pairs(data, np.array([2.0, 0.0, 0.0]))
    >>> i.tolist(), j.tolist(), w.tolist()
    ([0, 0], [1, 2], [2.0, 2.0])
    """
    clicked = np.flatnonzero(weights > 0)
    _, rows, Xl = _clicked_query_rows(data, clicked)
    local = np.full(data.n_docs, -1, dtype=np.int64)
    local[rows] = np.arange(len(rows))
    lengths = data.query_lengths[data.query_index[clicked]]
    # For each clicked row: all rows of its query, then drop the row itself.
    members = segment_gather(data.query_offsets, data.query_index[clicked])
    owner = np.repeat(np.arange(len(clicked)), lengths)
    keep = members != clicked[owner]
    i = local[clicked[owner[keep]]]
    j = local[members[keep]]
    return rows, Xl, i, j, weights[clicked][owner[keep]], owner[keep], clicked


def click_pair_set(data: RankingDataset, weights: np.ndarray):
    """The pairs of :func:`click_pairs` as a :class:`ClickPairs` (no pair arrays).

    Returns ``(rows, local_X, pairs, clicked)``: ``local_X = data.X[rows]`` holds
    the queries with clicks (as :func:`click_pairs`: all of ``data.X`` where they
    hold 90 % of its rows or more); ``pairs`` anchors every clicked row of ``local_X``
    (in ``clicked`` order) with weight ``weights[clicked]``.
    ``pairs.explicit()`` gives the arrays ``i, j, pair_w`` of :func:`click_pairs`,
    in the same order.

    Parameters
    ----------
    data : RankingDataset
        The data set the click weights refer to.
    weights : array (n_docs,)
        Click weight of every row; rows with 0 are not clicked.

    Returns
    -------
    tuple ``(rows, local_X, pairs, clicked)``

    Examples
    --------
    >>> import numpy as np
    >>> from click_sim import make_ranking
    >>> data = make_ranking(n_queries=5, n_docs=4, random_state=0)
    >>> weights = np.zeros(data.n_docs); weights[[1, 9]] = [2.0, 0.5]
    >>> rows, Xl, pairs, clicked = click_pair_set(data, weights)
    >>> rows.tolist(), pairs.anchors.tolist(), pairs.n_pairs
    ([0, 1, 2, 3, 8, 9, 10, 11], [1, 5], 6)
    """
    clicked = np.flatnonzero(weights > 0)
    queries, rows, Xl = _clicked_query_rows(data, clicked)
    local = np.full(data.n_docs, -1, dtype=np.int64)
    local[rows] = np.arange(len(rows))
    offsets = offsets_from_lengths(data.query_lengths[queries])
    return rows, Xl, ClickPairs(offsets, local[clicked], weights[clicked]), clicked


class _LinearRanker(RankerMixin, BaseEstimator):
    """Shared ``predict`` (and ``score``, ``preprocessor``) of the linear rankers, and their choice of solver.

    The constraint options of the four SVMs (documented on each) are checked before any
    solving by :func:`~counterfactual_ltr.solvers.constrained.feasible_set`.
    """

    def _keep_params(self, params: dict):
        """Store each ``__init__`` argument (``params``: that call's ``locals()``) unchanged under its own name.

        scikit-learn's rule for ``__init__``: no checks, no changes; ``fit`` checks them (:meth:`_check_params`).
        """
        for name, value in params.items():
            if name != "self" and not name.startswith("__"):
                setattr(self, name, value)

    def _check_params(self, n_features=None) -> dict:
        """Every hyper-parameter checked as ``fit`` uses it, whatever the others (``load_model`` runs it too).

        Returns the checked numbers (``C``, ``tol``, ``max_iter`` and, where the class has
        them, ``solver_tol`` and ``max_ccp_iter``); with ``n_features`` the constraint
        options are checked against the length of the weight vector as well.
        """
        checked = {"C": _check_C(self.C), "tol": check_real(self.tol, "tol", min_value=0.0),
                   "max_iter": check_int(self.max_iter, "max_iter", min_value=1)}
        if hasattr(self, "solver_tol"):
            checked["solver_tol"] = check_real(self.solver_tol, "solver_tol", min_value=0.0)
        if hasattr(self, "max_ccp_iter"):      # a parameter of PropDCG/PropRBP; PropRank's is fixed at 1
            checked["max_ccp_iter"] = check_int(self.max_ccp_iter, "max_ccp_iter", min_value=1)
        if hasattr(self, "propensity"):
            as_propensity_model(self.propensity)
        self._metric_params()
        check_penalty(self.penalty, self.l1_ratio, self.solver)
        if n_features is not None:
            self._feasible_set(n_features)
        return checked

    def _metric_params(self):
        return {}

    def _feasible_set(self, n_features):
        return feasible_set(n_features, monotone_constraints=self.monotone_constraints, bounds=self.bounds,
                            penalty=self.penalty, l1_ratio=self.l1_ratio, constraints=self.constraints,
                            solver=self.solver)

    def _solve(self, fs, X, i, j, c, C, *, w0=None, warm=None, tol, max_iter, min_decrease=0.0):
        """Today's Newton solver for unconstrained L2 (unchanged call), else the constrained solvers."""
        if fs.method == "newton":
            return solve_pairwise_hinge(X, i, j, c, C, w0=w0, tol=tol, max_iter=max_iter, min_decrease=min_decrease)
        warm_points = getattr(warm, "support_points", None)
        if sp.issparse(X):
            X = X.toarray()                        # the cutting-plane master works on dense rows
        return solve_constrained_hinge(X, i, j, c, C, feasible=fs, method=fs.method, w0=w0,
                                       warm_points=warm_points, tol=tol, max_iter=max_iter)

    def predict(self, X):
        """Scores of the rows of ``X`` (higher is better).

        Parameters
        ----------
        X : array (n_docs, n_features), RankingDataset or ClickLog (its data set's rows)
            Or a distributed data set or aggregate: then a dask array of the scores, partition
            after partition, computed on the workers.

        Returns
        -------
        scores : array (n_docs,)
            ``preprocessor_.transform(X) @ coef_`` (``X @ coef_`` without a preprocessor).
        """
        check_is_fitted(self, "coef_")
        if getattr(X, "is_distributed", False):    # scores computed where the partitions live
            return (X.dataset if hasattr(X, "dataset") else X).predict(self)
        return self._prediction_features(X, self.coef_.shape[0]) @ self.coef_


# On long lists (implicit pairs, where every Newton step sorts all rows) a later CCP subproblem also
# stops once a Newton step gains less than this fraction of the CCP objective's last decrease: from
# the warm start its first Newton steps take nearly all of its decrease, the rest only certify it.
_CCP_DESCENT_FACTOR = 0.1
# Trust-bias correction: CCP settings of PropRank with negative weights.
_AFFINE_CCP_MAX, _AFFINE_CCP_TOL = 50, 1e-3


def affine_click_weights(log, model):
    """Per data-set row, ``sum over impressions of (click - beta_r) / alpha_r`` (Vardasbi et al., CIKM 2020).

    Parameters
    ----------
    log : ClickLog or ClickAggregate
        The clicks and their impressions.
    model : propensity model (typically a ``TrustBiasPropensity``)
        ``P(click | r) = alpha_r R + beta_r`` (a plain propensity model: ``beta = 0``).

    Returns
    -------
    ClickAggregate

    With ``P(click | r) = alpha_r R + beta_r`` this is an unbiased estimate of
    ``R`` times the row's impressions; a plain propensity model
    (``beta = 0``) gives the usual ``sum over clicks of 1 / q``. Returns the
    :class:`~counterfactual_ltr.logs.aggregate.ClickAggregate` of ``log`` (a
    ``ClickLog`` or an aggregate) under ``model``; its ``weights`` may be negative.

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import ClickLog, RankingDataset
    >>> from counterfactual_ltr.propensity import TrustBiasPropensity
    >>> data = RankingDataset(np.eye(2), [1, 0], [1, 1])
    >>> log = ClickLog(data, [0, 0], [0, 2, 4], [0, 1, 0, 1], [1, 0, 0, 1])
    >>> model = TrustBiasPropensity([1.0, 0.5], eps_plus=1.0, eps_minus=0.2)
    >>> affine_click_weights(log, model).weights.round(3).tolist()   # (1-.2)/.8 + (0-.2)/.8, (0-.1)/.4 + (1-.1)/.4
    [0.75, 2.0]
    """
    return log.aggregate(model) if isinstance(log, ClickLog) else log.reweight(model)


@doc
class RankSVM(_LinearRanker):
    """Linear Ranking SVM (Joachims 2002) on graded labels, or naively on clicks.

    Minimises ``0.5||w||^2 + (C / n_queries) sum_q sum_{R_i > R_j} max(0, 1 - w.(x_i - x_j))``.

    ``fit(X, y, qid=...)`` uses full-information labels; ``fit(log)`` treats
    clicks as labels ignoring position bias (the "SVM Rank" baseline of
    Table 3): each click pairs the clicked document with every other
    candidate, weight = number of clicks, ``C`` divided by the number of
    clicks (as the propensity SVMs do, so ``C`` grids are comparable).

    Parameters
    ----------
    C : float > 0, default 1.0
        Weight of the hinge loss against ``0.5||w||^2``.
        {C_scale}
    tol : float > 0, default 1e-6
        Relative duality gap at which the solver stops.
    {max_iter_warning, svm_options}

    Attributes
    ----------
    coef_ : array (n_model_features,)
    n_iter_, objective_, duality_gap_, converged_ : solver diagnostics
    {fitted}

    Examples
    --------
    >>> from click_sim import make_ranking
    >>> data = make_ranking(n_queries=40, random_state=0)
    >>> model = RankSVM(C=1.0).fit(data.X, data.y, qid=data.qid)
    >>> model.predict(data.X).shape == (data.n_docs,)
    True
    """

    def __init__(self, C: float = 1.0, tol: float = 1e-6, max_iter: int = 1000, preprocessor=None, *,
                 monotone_constraints=None, bounds=None, penalty: str = "l2", l1_ratio: float = 0.5,
                 constraints=None, solver: str = "auto"):
        self._keep_params(locals())

    def fit(self, X, y=None, qid=None):
        """Fit on full-information labels ``(X, y, qid)`` / a RankingDataset, or naively on a ClickLog.

        Parameters
        ----------
        X : array (n_docs, n_features), RankingDataset or ClickLog
            The training data: features with ``y`` and ``qid``, a data set, or a click log.
        y : array (n_docs,), optional
            Graded labels when ``X`` is an array.
        qid : array (n_docs,), optional
            Query id of every row when ``X`` is an array.

        Returns
        -------
        self
        """
        if getattr(X, "is_distributed", False):   # partitions on a Dask cluster
            return _fit_distributed(self, X)
        checked = self._check_params()
        C, tol, max_iter = checked["C"], checked["tol"], checked["max_iter"]
        X, y, qid = self._begin_fit(X, y, qid)
        if isinstance(X, (ClickLog, ClickAggregate)):
            agg = click_aggregate(X, lambda positions: np.ones(len(positions)), type(self).__name__)
            _, Xl, pairs, _ = click_pair_set(agg.data, agg.weights.astype(np.float64))
            if self._feasible_set(Xl.shape[1]).method == "newton":
                i, j, w = pairs, None, None        # long lists: no pair arrays (the solver picks the path)
            else:
                i, j, w = pairs.explicit()
            scale = agg.n_clicks
        else:
            data = X if isinstance(X, RankingDataset) else RankingDataset(X, y, qid if qid is not None else _missing_qid())
            i, j = within_query_pairs(data.query_offsets)
            keep = data.y[i] > data.y[j]
            i, j = i[keep], j[keep]
            if i.size == 0:
                raise ValueError("no pair of documents with different grades in the same query")
            Xl, w, scale = data.X, np.ones(i.size), data.n_queries
        fs = self._feasible_set(Xl.shape[1])
        check_C_scale(self, C / scale, _loss_at_zero(i, w), Xl, solver=_solver_family(fs))
        result = self._solve(fs, Xl, i, j, w, C / scale, tol=tol, max_iter=max_iter)
        self.coef_ = result.coef
        self.n_iter_ = result.n_iter
        self.objective_ = result.objective
        self.duality_gap_ = result.gap
        n_pairs = i.n_pairs if isinstance(i, ClickPairs) else i.size
        self.converged_ = result.converged and n_pairs > 0
        self.n_features_in_ = Xl.shape[1]
        if not np.any(self.coef_):
            _warn_zero_coef(self, n_pairs, Xl, *(i.explicit()[:2] if isinstance(i, ClickPairs) else (i, j)))
        return self._end_fit()


def _fit_distributed(est, source):
    """The fit on a distributed aggregate or data set (:mod:`counterfactual_ltr.estimators.distributed_fit`)."""
    from .distributed_fit import fit_linear

    return fit_linear(est, source, click_pairs)


def _loss_at_zero(pairs, weights) -> float:
    """The weighted hinge loss at ``w = 0`` (every pair at the margin): the sum of the pairs' absolute weights."""
    if isinstance(pairs, ClickPairs):
        lengths = np.diff(pairs.query_offsets)[pairs.anchor_query]
        return float(np.sum(np.abs(pairs.weights) * (lengths - 1)))
    return float(np.sum(np.abs(weights)))


def _solver_family(fs) -> str:
    return "newton" if fs.method == "newton" else "cutting_plane"


def _missing_qid():
    raise ValueError("RankSVM.fit(X, y) needs qid=... (the query id of every row)")


class _PropensitySVM(_LinearRanker):
    """Propensity-weighted hinge-bound SVM for a rank weight ``lambda`` (shared by the Prop* estimators)."""

    _metric = "avg_rank"

    def _lambda(self):
        from ..metrics import get_lambda

        return get_lambda(self._metric, **self._metric_params())

    def _prepare(self, log):
        C = _check_C(self.C)
        agg = click_aggregate(log, as_propensity_model(self.propensity), type(self).__name__, allow_affine=True)
        # Rows with a non-zero weight (negative ones only under a trust-bias correction).
        rows, Xl, pairs, clicked = click_pair_set(agg.data, np.abs(agg.weights))
        return C / agg.n_clicks, agg, Xl, pairs, clicked

    def fit(self, log, y=None):
        """Fit on a click log (propensities from ``propensity``).

        Parameters
        ----------
        log : ClickLog or ClickAggregate
        y : ignored
            Present for scikit-learn's model selection.

        Returns
        -------
        self
        """
        if getattr(log, "is_distributed", False):  # partitions on a Dask cluster
            return _fit_distributed(self, log)
        lam = self._lambda()
        if not isinstance(log, (ClickLog, ClickAggregate)):
            raise ValueError(f"{type(self).__name__}.fit needs a ClickLog or a ClickAggregate, got "
                             f"{type(log).__name__}")
        checked = self._check_params()
        tol, solver_tol, max_iter = checked["tol"], checked["solver_tol"], checked["max_iter"]
        max_ccp_iter = checked["max_ccp_iter"]
        log, _, _ = self._begin_fit(log)
        C_n, agg, Xl, pairs, clicked = self._prepare(log)
        fs = self._feasible_set(Xl.shape[1])
        # The CCP re-weights documents by lambda'(1 + H) <= lambda'(1): the largest loss it can pose.
        slope = abs(float(lam.derivative(1.0))) if lam.derivative is not None else 1.0
        check_C_scale(self, C_n, slope * _loss_at_zero(pairs, None), Xl, solver=_solver_family(fs))
        W = agg.weights[clicked]
        negative = bool(np.any(W < 0))
        linear = lam.concave is True and lam.convex is True and not negative  # affine lambda, W >= 0: one QP
        if lam.concave is not True:
            raise ValueError(f"rank weight {lam.name!r} is not concave: the convex-concave procedure does not apply")
        n_pairs = pairs.n_pairs
        max_ccp = 1 if linear or n_pairs == 0 else max_ccp_iter
        if negative and lam.convex is True:
            max_ccp, tol = _AFFINE_CCP_MAX, _AFFINE_CCP_TOL
        cache = []                                # [coef, hinge sums, ranks] of the last objective evaluated
        snips_history = []

        def reweight(coef):
            # The hinge sums at ``coef`` were computed by the last objective (one sort of all rows saved).
            H = cache[1] if cache and np.array_equal(cache[0], coef) else pairs.hinge_sums(Xl @ coef)
            return linearised_weights(W, lam, H)

        solve, descent = self._subproblem_solver(fs, Xl, pairs, negative, C_n, max_iter)
        out = convex_concave(lambda coef: self._objective(coef, Xl, pairs, W, lam, C_n, fs, keep=cache), reweight,
                             solve, np.zeros(Xl.shape[1]), tol=tol, max_iter=max_ccp, solver_tol=solver_tol,
                             exact=linear or n_pairs == 0, majorises=not negative or lam.convex is True,
                             descent=_CCP_DESCENT_FACTOR if descent else 0.0,
                             after_step=lambda coef: snips_history.append(self._train_snips(coef, W, Xl, pairs, cache)),
                             name=type(self).__name__)
        self.coef_ = out.coef
        self.objective_ = float(out.objective_history[-1])
        self.objective_history_ = out.objective_history
        self.train_snips_history_ = np.asarray(snips_history)
        self.n_iter_ = out.n_iter
        self.n_ccp_iter_ = len(out.n_iter)
        self.solve_seconds_ = out.seconds
        self.inner_tol_ = out.inner_tol           # relative duality gap asked of each subproblem
        self.converged_ = bool(out.converged and (out.result.converged or out.result.stalled) and n_pairs > 0)
        self.duality_gap_ = out.result.gap
        self.n_features_in_ = Xl.shape[1]
        if not np.any(out.coef):
            _warn_zero_coef(self, n_pairs, Xl, *pairs.explicit()[:2])
        return self._end_fit()

    def _subproblem_solver(self, fs, Xl, pairs, negative, C_n, max_iter):
        """``(solve, descent)``: the CCP's subproblem solve for document weights, and whether it may stop at descent.

        Pair arrays only where a solver needs them (trust-bias steps, constrained solvers); the
        Newton solver takes the implicit pairs and picks its path from the list lengths.
        Descent-only subproblems on long lists only: on short ones exact warm-started
        subproblems are cheap (screening), and they keep fits on dense and CSR copies of the
        same data equal to the solver's tolerance, where inexact steps differ by up to ``tol``.
        """
        explicit = negative or fs.method != "newton"
        descent = not explicit and uses_implicit_pairs(pairs, Xl.shape[1])
        i, j, owner = pairs.explicit_owners() if explicit else (None, None, None)

        def solve(doc_w, coef, warm, previous, tol, min_decrease):
            if negative:
                return self._affine_step(fs, coef, Xl, i, j, owner, doc_w, C_n, tol, warm=warm, max_iter=max_iter)
            w0 = coef if warm else None
            if explicit:
                return self._solve(fs, Xl, i, j, doc_w[owner], C_n, w0=w0, warm=previous, tol=tol, max_iter=max_iter)
            # no pair arrays: hinge sums from scores sorted per query (long lists)
            return self._solve(fs, Xl, pairs.with_weights(doc_w), None, None, C_n, w0=w0, warm=previous, tol=tol,
                               max_iter=max_iter, min_decrease=min_decrease)

        return solve, descent

    def _affine_step(self, fs, coef, Xl, i, j, owner, doc_w, C_n, inner_tol, warm, max_iter):
        """One CCP subproblem with negative document weights: their hinge sums linearised at ``coef``."""
        pos = doc_w[owner] > 0
        neg = doc_w[owner] < 0
        active = neg & (1.0 - (Xl[i] @ coef - Xl[j] @ coef) > 0)
        # Gradient of sum_neg doc_w_j H_j at coef: doc_w_j * (-(x_i - x_j)) over active pairs.
        c = -doc_w[owner[active]]
        n = Xl.shape[0]
        lin = C_n * (Xl.T @ (np.bincount(i[active], c, minlength=n) - np.bincount(j[active], c, minlength=n)))
        scale = 10.0 * (1.0 + abs(float(lin @ coef)) / C_n)
        # One extra pair (row a over row b = 0) with weight `scale`: C s max(0, 1 - x_a.w) = C s + lin.w where active.
        extra = np.vstack([-lin / (C_n * scale), np.zeros(Xl.shape[1])])
        X_ext = sp.vstack([Xl, sp.csr_matrix(extra)], format="csr") if sp.issparse(Xl) else np.vstack([Xl, extra])
        a, b = Xl.shape[0], Xl.shape[0] + 1
        ii = np.r_[i[pos], a]
        jj = np.r_[j[pos], b]
        ww = np.r_[doc_w[owner[pos]], scale]
        return self._solve(fs, X_ext, ii, jj, ww, C_n, w0=coef if warm else None, tol=inner_tol, max_iter=max_iter)

    def _objective(self, coef, Xl, pairs, W, lam, C_n, fs=None, keep=None):
        """The CCP's objective; ``fs`` (a FeasibleSet) carries the penalty, L2 when None.

        ``keep``, a list, receives ``[coef, hinge sums, ranks of the clicked rows]``: the next
        CCP step linearises there, and the training SNIPS needs the ranks (one sort for both).
        """
        H, ranks = pairs.hinge_sums_and_ranks(Xl @ coef)
        if keep is not None:
            keep[:] = [coef, H, ranks]
        penalty = 0.5 * float(coef @ coef) if fs is None else fs.penalty(coef)
        return penalty + C_n * float(np.sum(W * lam.value(1.0 + H)))

    def _train_snips(self, coef, W, Xl, pairs, cache):
        """SNIPS estimate of the metric on the training clicks (metric per relevant document).

        ``W``: the clicked rows' weights in the order of ``pairs``' anchors. Their queries are
        whole in ``Xl``, so their ranks there are those in the data; ``cache`` has them if the
        last objective was evaluated at ``coef``.
        """
        from ..evaluation import metric_weight

        if cache and np.array_equal(cache[0], coef):
            ranks = cache[2]
        else:
            ranks = pairs.hinge_sums_and_ranks(Xl @ coef)[1]
        m = metric_weight(self._metric, **self._metric_params())(ranks)
        return float(np.sum(W * m) / np.sum(W))


@doc
class SVMPropRank(_PropensitySVM):
    """SVM PropRank (Joachims et al. 2017): ``lambda(r) = r``, one convex QP.

    Minimises ``0.5||w||^2 + (C/n) sum_j W_j sum_{y != j} max(0, 1 - w.(x_j - x_y))``
    over a click log, ``W_j`` the summed ``1/q`` of the clicks on document
    ``j`` under ``propensity`` (default position-based, eta = 1).

    Parameters
    ----------
    C : float > 0, default 1.0
        Weight of the propensity-weighted hinge bound (divided by the number of clicks).
        {C_scale}
    {propensity}
    solver_tol : float > 0, default 1e-6
        Relative duality gap at which the QP solver stops.
    {max_iter_warning, svm_options}

    Attributes
    ----------
    coef_ : array (n_model_features,)
    objective_, objective_history_, n_iter_, duality_gap_, converged_ : solver diagnostics
        (a trust-bias ``propensity`` with negative weights makes the fit a convex-concave
        procedure: one entry of ``n_iter_`` per step)
    {fitted}

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=40, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> SVMPropRank(C=1.0).fit(log).coef_.shape
    (10,)
    """

    _metric = "avg_rank"

    def __init__(self, C: float = 1.0, propensity=None, solver_tol: float = 1e-6, max_iter: int = 1000,
                 preprocessor=None, *, monotone_constraints=None, bounds=None, penalty: str = "l2",
                 l1_ratio: float = 0.5, constraints=None, solver: str = "auto"):
        self._keep_params(locals())

    tol = 0.0
    max_ccp_iter = 1


@doc
class SVMPropDCG(_PropensitySVM):
    """SVM PropDCG (Agarwal et al. 2019): DCG hinge bound by the convex-concave procedure.

    Minimises ``0.5||w||^2 + (C/n) sum_j W_j lambda(1 + H_j(w))`` with
    ``lambda(r) = -1/log2(1 + r)`` and ``H_j`` the hinge bound on ``rank_j - 1``, by the
    convex-concave procedure of :mod:`counterfactual_ltr.solvers.ccp`.

    Parameters
    ----------
    C : float > 0, default 1.0
        Weight of the propensity-weighted DCG bound (divided by the number of clicks).
        {C_scale}
    {propensity, max_ccp_iter, tol, solver_tol, max_iter, svm_options}

    Attributes
    ----------
    coef_ : array (n_model_features,)
    objective_ : float
        The objective at ``coef_``.
    objective_history_ : array
        The objective at the start and after every CCP iteration (non-increasing).
    train_snips_history_ : array
        Training SNIPS estimate of the metric after every CCP iteration.
    n_iter_ : array of int
        Solver iterations of every CCP iteration's subproblem.
    n_ccp_iter_ : int
    solve_seconds_, inner_tol_ : arrays
        Time of, and relative duality gap asked of, each subproblem.
    duality_gap_ : float
        The last subproblem's.
    converged_ : bool
        The CCP met ``tol`` (and its last subproblem converged or stopped at descent).
    {fitted}

    Examples
    --------
    >>> import numpy as np
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=40, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> model = SVMPropDCG(C=1.0).fit(log)
    >>> bool(np.all(np.diff(model.objective_history_) <= 1e-9))
    True

    Constraints and penalties are options (see :mod:`counterfactual_ltr.solvers.constrained`):

    >>> monotone = SVMPropDCG(C=1.0, monotone_constraints={0: 1, 3: -1}, bounds=(-1.0, 1.0)).fit(log)
    >>> bool(monotone.coef_[0] >= 0 and monotone.coef_[3] <= 0 and np.abs(monotone.coef_).max() <= 1)
    True
    """

    _metric = "dcg"

    def __init__(self, C: float = 1.0, propensity=None, max_ccp_iter: int = 50, tol: float = 1e-3,
                 solver_tol: float = 1e-6, max_iter: int = 1000, preprocessor=None, *, monotone_constraints=None,
                 bounds=None, penalty: str = "l2", l1_ratio: float = 0.5, constraints=None, solver: str = "auto"):
        self._keep_params(locals())


@doc
class SVMPropRBP(SVMPropDCG):
    """Propensity SVM for rank-biased precision, ``lambda(r) = -(1-p) p^(r-1)`` (concave), by CCP.

    Parameters
    ----------
    C : float > 0, default 1.0
        Weight of the propensity-weighted RBP bound (divided by the number of clicks).
        {C_scale}
    p : float in (0, 1), default 0.8
        Persistence of rank-biased precision.
    {propensity, max_ccp_iter, tol, solver_tol, max_iter, svm_options}

    Attributes
    ----------
    coef_, objective_, objective_history_, train_snips_history_, n_iter_ :
        As in :class:`SVMPropDCG` (the metric is RBP).
    n_ccp_iter_, solve_seconds_, inner_tol_, duality_gap_, converged_, preprocessor_, n_features_in_ :
        As in :class:`SVMPropDCG`.

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=40, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    >>> SVMPropRBP(C=1.0, p=0.5).fit(log).predict(data).shape == (data.n_docs,)
    True
    """

    _metric = "rbp"

    def __init__(self, C: float = 1.0, p: float = 0.8, propensity=None, max_ccp_iter: int = 50,
                 tol: float = 1e-3, solver_tol: float = 1e-6, max_iter: int = 1000, preprocessor=None, *,
                 monotone_constraints=None, bounds=None, penalty: str = "l2", l1_ratio: float = 0.5,
                 constraints=None, solver: str = "auto"):
        self._keep_params(locals())

    def _metric_params(self):
        return {"p": check_probability(self.p, "p", include_zero=False, include_one=False)}
