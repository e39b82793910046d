"""scikit-learn scorers on click logs: an off-policy estimate of a fitted ranker is its score.

``GridSearchCV(..., scoring=snips_scorer("dcg"), cv=GroupKFold(...))`` over a
:class:`~counterfactual_ltr.logs.clicklog.ClickLog` chooses hyper-parameters by the
estimated value on held-out sessions. Scores are greater-is-better, so a
metric where lower is better (average rank) is negated.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_real
from ..logs.clicklog import ClickLog
from ..metrics import LOWER_IS_BETTER
from ._docs import doc
from .offpolicy import _estimate

__all__ = ["ips_scorer", "snips_scorer", "clipped_ips_scorer", "dr_scorer", "policy_aware_scorer",
           "SCORER_REPLICATES"]

#: At most this many of a propensity's bootstrap replicates enter a scorer's ``propensity_quantile``.
SCORER_REPLICATES = 50


class _LogScorer:
    """A scikit-learn scorer ``scorer(estimator, log, y=None)`` from a click log."""

    def __init__(self, kind, metric, propensity, metric_params, options=None, quantile=None):
        self.kind, self.metric, self.propensity, self.metric_params = kind, metric, propensity, metric_params
        self.options = dict(options or {})
        if quantile is not None:
            quantile = check_real(quantile, "propensity_quantile", min_value=0.0, max_value=0.5, include_min=False)
        self.quantile = quantile

    def __call__(self, estimator, X, y=None):
        if not isinstance(X, ClickLog):
            raise ValueError(f"{self.kind} scorers need a ClickLog as X, got {type(X).__name__} (for NDCG@10 on "
                             "labelled data use the estimator's score, e.g. search.best_estimator_.score(test))")
        replicates = self._replicates(estimator)
        if replicates is not None:
            return self._quantile_score(estimator, X, *replicates)
        est = _estimate(self.kind, X, estimator, self.metric, self.propensity, 0.95, self.metric_params,
                        n_bootstrap=0, **self.options)
        return -est.value if self.metric in LOWER_IS_BETTER else est.value

    def _replicates(self, estimator):
        """``(point, curves, method)`` of an estimated propensity to score over, or None for the plain score."""
        from ..examination.propensity_models import resolve_propensity

        if self.quantile is None:
            return None
        model = resolve_propensity(self.propensity, estimator)[0]
        boot = getattr(model, "bootstrap_", None)
        if not isinstance(boot, np.ndarray) or boot.ndim != 2 or boot.shape[0] == 0:
            return None
        converged = getattr(model, "bootstrap_converged_", np.ones(len(boot), dtype=bool))
        return model, boot[:SCORER_REPLICATES], getattr(model, "method_", None), converged[:SCORER_REPLICATES]

    def _quantile_score(self, estimator, log, model, curves, method, converged):
        """The ``quantile`` of the improvement over the logged rankings, over the point and replicate propensities."""
        from ..propensity.estimation import EstimatedPropensity
        from ..propensity.uncertainty import failed_curves, percentile_interval
        from . import click_value
        from .offpolicy import _check_log, _omega, _session_terms

        _check_log(log, self.kind)
        omega = _omega(log, estimator, self.metric, self.metric_params)
        failed = failed_curves(curves, method) | ~converged
        gains = []
        for propensity in [model] + [EstimatedPropensity(c) for c in curves[~failed]]:
            X, W, _, _ = _session_terms(log, omega, propensity)
            logged, _ = click_value.logged_relevance_terms(log, self.metric, self.metric_params, propensity)
            den = W.sum() if self.kind == "snips" else log.n_sessions
            gains.append((X.sum() - logged.sum()) / den if den > 0 else np.nan)
        gains = np.array(gains)
        if self.metric in LOWER_IS_BETTER:
            gains = -gains
        return percentile_interval(gains, 1.0 - 2 * self.quantile, n_failed=int(failed.sum()))[0]

    def __repr__(self):
        options = "".join(f", {k}={v!r}" for k, v in self.options.items())
        quantile = f", propensity_quantile={self.quantile!r}" if self.kind in ("ips", "snips") else ""
        return f"{self.kind}_scorer(metric={self.metric!r}, propensity={self.propensity!r}{options}{quantile})"


@doc
def ips_scorer(metric="dcg", propensity=None, propensity_quantile=0.1, **metric_params):
    """Scorer for ``GridSearchCV``/``cross_validate`` on click logs: the IPS estimate (greater is better;
    average rank is negated).

    Parameters
    ----------
    {scorer_metric, scorer_propensity, propensity_quantile, metric_params, ips_scorer_returns}

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> from click_sim import make_ranking, simulate_clicks
    >>> from counterfactual_ltr.evaluation import ips_estimate
    >>> data = make_ranking(n_queries=50, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0)
    >>> ranker = LinearRegression().fit(data.X, data.y)
    >>> scorer = ips_scorer("dcg")
    >>> scorer
    ips_scorer(metric='dcg', propensity=None, propensity_quantile=0.1)
    >>> score = scorer(ranker, log)
    >>> bool(np.isclose(score, ips_estimate(log, ranker, n_bootstrap=0).value))
    True
    >>> avg_rank = ips_estimate(log, ranker, metric="avg_rank", n_bootstrap=0).value
    >>> bool(np.isclose(ips_scorer("avg_rank")(ranker, log), -avg_rank))
    True
    """
    return _LogScorer("ips", metric, propensity, metric_params, quantile=propensity_quantile)


@doc
def snips_scorer(metric="dcg", propensity=None, propensity_quantile=0.1, **metric_params):
    """Scorer for ``GridSearchCV``/``cross_validate`` on click logs: the SNIPS estimate (greater is better;
    average rank is negated).

    Parameters
    ----------
    {scorer_metric, scorer_propensity, propensity_quantile, metric_params, snips_scorer_returns}

    Examples
    --------
    >>> from sklearn.model_selection import GroupKFold, cross_val_score
    >>> # cross_val_score(est, log, groups=log.groups, cv=GroupKFold(3), scoring=snips_scorer("dcg"))
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> from click_sim import make_ranking, simulate_clicks
    >>> from counterfactual_ltr.evaluation import snips_estimate
    >>> data = make_ranking(n_queries=50, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0)
    >>> ranker = LinearRegression().fit(data.X, data.y)
    >>> score = snips_scorer("dcg")(ranker, log)
    >>> bool(np.isclose(score, snips_estimate(log, ranker, n_bootstrap=0).value))
    True
    """
    return _LogScorer("snips", metric, propensity, metric_params, quantile=propensity_quantile)


@doc
def clipped_ips_scorer(metric="dcg", propensity=None, clip=0.1, **metric_params):
    """Scorer of the clipped IPS estimate (greater is better; average rank is negated).

    Parameters
    ----------
    {scorer_metric, scorer_propensity}
    clip : float in (0, 1], default 0.1
        Floor of the propensities; see :func:`~counterfactual_ltr.evaluation.clipped_ips_estimate`.
    {metric_params, clipped_ips_scorer_returns}

    Examples
    --------
    >>> clipped_ips_scorer("dcg", clip=0.2)
    clipped_ips_scorer(metric='dcg', propensity=None, clip=0.2)
    """
    return _LogScorer("clipped_ips", metric, propensity, metric_params, {"clip": clip})


@doc
def dr_scorer(metric="dcg", propensity=None, relevance_model=None, n_folds=2, random_state=None, **metric_params):
    """Scorer of the doubly robust estimate (the relevance model is fitted on each scored log; greater is better).

    Parameters
    ----------
    {scorer_metric, scorer_propensity}
    relevance_model : None, scikit-learn estimator, callable or array (n_docs,), default None
        Relevance model of :func:`~counterfactual_ltr.evaluation.fit_relevance` (``None``: ridge regression);
        an unfitted estimator is cross-fitted on each scored log.
    n_folds : int >= 2, default 2
        Number of folds of queries of the cross-fitting.
    random_state : None, int or numpy Generator, default None
        Seed of the folds.
    {metric_params, dr_scorer_returns}

    Examples
    --------
    >>> dr_scorer("dcg", random_state=0)
    dr_scorer(metric='dcg', propensity=None, relevance_model=None, n_folds=2, random_state=0)
    """
    return _LogScorer("dr", metric, propensity, metric_params,
                      {"relevance_model": relevance_model, "n_folds": n_folds, "random_state": random_state})


@doc
def policy_aware_scorer(metric="dcg", propensity=None, logging_policy=None, **metric_params):
    """Scorer of the policy-aware estimate (the log's own logging policy unless one is given; greater is better).

    Parameters
    ----------
    {scorer_metric, scorer_propensity}
    logging_policy : object with ``position_probabilities(data)``, optional
        Policy that logged the scored logs; default ``None``: each log's own
        ``logging_policy``.
    {metric_params, policy_aware_scorer_returns}

    Examples
    --------
    >>> policy_aware_scorer("dcg")
    policy_aware_scorer(metric='dcg', propensity=None, logging_policy=None)
    """
    return _LogScorer("policy_aware", metric, propensity, metric_params, {"logging_policy": logging_policy})
