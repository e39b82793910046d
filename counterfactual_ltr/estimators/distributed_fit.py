"""``RankSVM``, ``SVMPropRank`` and ``SVMPropDCG`` (and ``SVMPropRBP``) fitted on partitions on Dask workers.

The estimators' ``fit`` hands a :class:`~counterfactual_ltr.distributed.DistributedAggregate` (or,
for ``RankSVM`` on graded labels, a :class:`~counterfactual_ltr.distributed.DistributedDataset`)
to :func:`fit_linear`. Each partition builds its pairs once, on its worker, with the in-memory
pair functions (``click_pairs`` of the clicks, or the graded pairs of its queries) and keeps
them (:class:`~counterfactual_ltr.solvers.distributed_newton.PairPart`); the problem is the in-memory one
term for term: ``C`` divided by the number of clicks (queries for graded labels), the same pair
weights, the CCP of :func:`~counterfactual_ltr.solvers.ccp.convex_concave` with the same inner
tolerances, and each convex problem solved by
:func:`~counterfactual_ltr.solvers.distributed_newton.solve_distributed` to the same relative duality gap.
The CCP's hinge sums and re-weighted document weights stay on the workers as futures. The fitted
attributes are those of the in-memory fit.

Not supported on partitions (a ``ValueError`` says so): a ``preprocessor``, constraints, bounds,
an L1 penalty, solvers other than Newton, and trust-bias weights (negative document weights).
"""

from __future__ import annotations

import numpy as np

from .._segments import within_query_pairs
from ..solvers.ccp import convex_concave, linearised_weights
from ._base import refuse_C_scale
from ..solvers.distributed_newton import PairPart, Traffic, solve_distributed

__all__ = ["fit_linear"]


def fit_linear(est, source, click_pairs, *, traffic=None, on_iteration=None):
    """Fit the linear SVM ``est`` on a distributed aggregate (or data set, ``RankSVM``); returns ``est``.

    Parameters
    ----------
    est : RankSVM, SVMPropRank, SVMPropDCG or SVMPropRBP
        The estimator, its parameters as set.
    source : DistributedAggregate or DistributedDataset
        The partitioned clicks (or graded labels).
    click_pairs : callable
        :func:`~counterfactual_ltr.estimators.svm.click_pairs` (handed in by the estimators).
    traffic : Traffic, optional
        Receives the bytes every solve sent and gathered.
    on_iteration : callable, optional
        ``it -> None`` after every Newton evaluation.

    Returns
    -------
    est

    Examples
    --------
    The estimators call it when given a distributed input (see
    :class:`~counterfactual_ltr.distributed.collection.DistributedDataset` for a whole example):
    ``SVMPropRank(C=10).fit(aggregate_clicks(log, data, engine="dask"))``.
    """
    _refuse_options(est)
    checked = est._check_params()
    traffic = traffic if traffic is not None else Traffic()
    est.preprocessor_ = None
    # The frame's feature columns name the raw features, as a named in-memory data set's do.
    dataset = getattr(source, "dataset", source)
    est.feature_names_in_ = np.asarray(dataset.feature_names, dtype=object)
    if type(est).__name__ == "RankSVM":
        return _fit_ranksvm(est, source, click_pairs, checked, traffic, on_iteration)
    return _fit_propensity(est, source, click_pairs, checked, traffic, on_iteration)


def _refuse_options(est):
    for name in ("preprocessor", "monotone_constraints", "bounds", "constraints"):
        if getattr(est, name, None) is not None:
            raise ValueError(f"{type(est).__name__}: {name} is not supported on a distributed data set")
    if est.penalty != "l2" or est.solver not in ("auto", "newton"):
        raise ValueError(f"{type(est).__name__}: on a distributed data set only penalty='l2' and the Newton solver "
                         f"are supported (got penalty={est.penalty!r}, solver={est.solver!r})")


# ---------------------------------------------------------------------- per-partition pieces
def _click_part(agg, click_pairs, counts):
    """The partition's click pairs over its whole feature block (``counts``: click counts as weights)."""
    weights = agg.click_counts.astype(np.float64) if counts else agg.weights
    if np.any(weights < 0):
        raise ValueError("negative document weights (a trust-bias propensity) are not supported on a distributed "
                         "data set")
    rows, _, i, j, pair_w, owner, clicked = click_pairs(agg.data, np.abs(weights))
    return PairPart(agg.data.X, rows[i], rows[j], pair_w, owner), weights[clicked]


def _graded_part(part):
    data = part.data
    i, j = within_query_pairs(data.query_offsets)
    keep = data.y[i] > data.y[j]
    return PairPart(data.X, i[keep], j[keep], np.ones(int(keep.sum()))), None


def _facts(built):
    """``(n_pairs, loss at 0, feature sums, n_rows)`` of one partition, for the C-scale check."""
    part, _ = built
    X = part.X
    return part.i.size, float(np.abs(part.c).sum()), np.asarray(X.sum(axis=0)).ravel(), X.shape[0]


def _max_distance(built, centre):
    X = built[0].X
    if hasattr(X, "multiply"):
        sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        return float(np.sqrt(max(float(np.max(sq - 2.0 * (X @ centre))) + float(centre @ centre), 0.0)))
    return float(np.sqrt(np.max(np.einsum("ij,ij->i", X - centre, X - centre))))


def _first(built):
    return built[0]


def _second(built):
    return built[1]


class _Pairs:
    """The partitions' pairs on the workers, with the totals the fit needs."""

    def __init__(self, client, built):
        self.client = client
        facts = client.gather([client.submit(_facts, b, pure=False) for b in built])
        self.n_pairs = sum(f[0] for f in facts)
        self.loss_at_zero = sum(f[1] for f in facts)
        centre = sum(f[2] for f in facts) / max(1, sum(f[3] for f in facts))
        self.spread = 2.0 * max(client.gather([client.submit(_max_distance, b, centre, pure=False) for b in built]))
        self.parts = [client.submit(_first, b, pure=False) for b in built]
        self.W = [client.submit(_second, b, pure=False) for b in built]
        self.d = int(facts[0][2].shape[0])

    def check_C(self, est, C, slope=1.0):
        kappa = C * slope * self.loss_at_zero * self.spread ** 2
        refuse_C_scale(est, kappa if np.isfinite(kappa) else np.inf, "newton")


def _fit_ranksvm(est, source, click_pairs, checked, traffic, on_iteration):
    client = source.client
    if hasattr(source, "n_clicks"):              # clicks as labels: every click against its query's others
        built = [client.submit(_click_part, a, click_pairs, True, pure=False) for a in source.parts]
        scale = source.n_clicks
    else:
        built = [client.submit(_graded_part, p, pure=False) for p in source.parts]
        scale = source.n_queries
    pairs = _Pairs(client, built)
    if not hasattr(source, "n_clicks") and pairs.n_pairs == 0:
        raise ValueError("no pair of documents with different grades in the same query")
    C = checked["C"] / scale
    pairs.check_C(est, C)
    result = solve_distributed(client, pairs.parts, C, tol=checked["tol"], max_iter=checked["max_iter"],
                               traffic=traffic, on_iteration=on_iteration)
    est.coef_, est.n_iter_, est.objective_ = result.coef, result.n_iter, result.objective
    est.duality_gap_ = result.gap
    est.converged_ = bool(result.converged and pairs.n_pairs > 0)
    est.n_features_in_ = pairs.d
    return est


# ---------------------------------------------------------------------- the propensity SVMs (CCP)
def _hinge_sums(part, W, coef):
    s = part.X @ coef
    z = 1.0 - (s[part.i] - s[part.j])
    return np.bincount(part.owner, np.maximum(z, 0.0), minlength=W.size)


def _lambda_sum(W, H, lam):
    return float(np.sum(W * lam.value(1.0 + H)))


def _snips_sums(agg, coef, metric, params):
    return agg._metric_sums(agg.data.X @ coef, metric, params)


def _fit_propensity(est, source, click_pairs, checked, traffic, on_iteration):
    if not hasattr(source, "n_clicks"):
        raise ValueError(f"{type(est).__name__}.fit needs click data: a DistributedAggregate "
                         "(aggregate_clicks(log, data, engine='dask'))")
    lam = est._lambda()
    if lam.concave is not True:
        raise ValueError(f"rank weight {lam.name!r} is not concave: the convex-concave procedure does not apply")
    client = source.client
    source = source.reweight(est.propensity) if est.propensity is not None else source
    built = [client.submit(_click_part, a, click_pairs, False, pure=False) for a in source.parts]
    pairs = _Pairs(client, built)
    C_n = checked["C"] / source.n_clicks
    slope = abs(float(lam.derivative(1.0))) if lam.derivative is not None else 1.0
    pairs.check_C(est, C_n, slope)
    linear = lam.concave is True and lam.convex is True
    exact = linear or pairs.n_pairs == 0
    cache = {}                                   # coef bytes -> the hinge sums' futures at coef

    def hinge_sums(coef):
        key = coef.tobytes()
        if key not in cache:
            cache.clear()
            cache[key] = [client.submit(_hinge_sums, p, W, coef, pure=False) for p, W in zip(pairs.parts, pairs.W)]
        return cache[key]

    def objective(coef):
        sums = client.gather([client.submit(_lambda_sum, W, H, lam, pure=False)
                              for W, H in zip(pairs.W, hinge_sums(coef))])
        return 0.5 * float(coef @ coef) + C_n * float(sum(sums))

    def reweight(coef):
        return [client.submit(linearised_weights, W, lam, H, pure=False) for W, H in zip(pairs.W, hinge_sums(coef))]

    def solve(doc_w, coef, warm, previous, tol, min_decrease):
        return solve_distributed(client, pairs.parts, C_n, doc_weights=doc_w, w0=coef if warm else None, tol=tol,
                                 max_iter=checked["max_iter"], traffic=traffic, on_iteration=on_iteration)

    snips = []

    def after_step(coef):
        sums = client.gather([client.submit(_snips_sums, a, coef, est._metric, est._metric_params(), pure=False)
                              for a in source.parts])
        snips.append(sum(s[0] for s in sums) / sum(s[1] for s in sums))

    out = convex_concave(objective, reweight, solve, np.zeros(pairs.d), tol=checked["tol"],
                         max_iter=1 if exact else checked["max_ccp_iter"], solver_tol=checked["solver_tol"],
                         exact=exact, after_step=after_step, name=type(est).__name__)
    est.coef_ = out.coef
    est.objective_ = float(out.objective_history[-1])
    est.objective_history_ = out.objective_history
    est.train_snips_history_ = np.asarray(snips)
    est.n_iter_, est.n_ccp_iter_ = out.n_iter, len(out.n_iter)
    est.solve_seconds_, est.inner_tol_ = out.seconds, out.inner_tol
    est.converged_ = bool(out.converged and out.result.converged and pairs.n_pairs > 0)
    est.duality_gap_ = out.result.gap
    est.n_features_in_ = pairs.d
    return est
