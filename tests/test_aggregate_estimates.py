"""One number for one question: a click aggregate's IPS and SNIPS equal the log's, to 1e-12, whichever way
the propensity is given (explicitly, carried by the evaluated estimator, or the aggregate's own)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
from counterfactual_ltr import PositionBasedPropensity, TabularPropensity, TrustBiasPropensity
from counterfactual_ltr.estimators import RankSVM, SVMPropDCG, SVMPropRank
from counterfactual_ltr.evaluation import ips_estimate, snips_estimate
from counterfactual_ltr.propensity_models import resolve_propensity

pytestmark = pytest.mark.filterwarnings("ignore::counterfactual_ltr.evaluation.EstimateWarning")

TRUST = TrustBiasPropensity(1.0 / np.arange(1, 21), eps_plus=1.0, eps_minus=np.linspace(0.3, 0.05, 20))


@pytest.fixture(scope="module")
def log():
    data = make_ranking(n_queries=40, n_docs=(4, 20), random_state=3)
    return simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(eta=1.0, eps_minus=0.1), n_passes=8,
                           random_state=3)


@pytest.fixture(scope="module")
def rankers(log):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"eta 0.5": SVMPropDCG(C=1.0, propensity=0.5).fit(log),
                "trust bias": SVMPropRank(C=1.0, propensity=TRUST).fit(log),
                "naive": RankSVM(C=1.0).fit(log)}


METRICS = [("dcg", {}), ("avg_rank", {}), ("rbp", {"p": 0.7}), ("prec@k", {"k": 3})]
EXPLICIT = [0.7, TabularPropensity([1.0, 0.6, 0.4, 0.3, 0.25]), PositionBasedPropensity(1.0, clip=0.2), TRUST]


def _both(agg, log, ranker, metric, params, **given):
    pairs = [(agg.ips_value(ranker, metric=metric, **given, **params),
              ips_estimate(log, ranker, metric=metric, n_bootstrap=0, **given, **params).value),
             (agg.snips_value(ranker, metric=metric, **given, **params),
              snips_estimate(log, ranker, metric=metric, n_bootstrap=0, **given, **params).value)]
    for from_aggregate, from_log in pairs:
        assert from_aggregate == pytest.approx(from_log, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("metric, params", METRICS)
@pytest.mark.parametrize("propensity", EXPLICIT, ids=repr)
def test_explicit_propensity_on_both_paths(log, rankers, metric, params, propensity):
    agg = log.aggregate(1.3)     # built under another model: the explicit one is applied from its count table
    scores = log.data.X[:, 2] - log.data.X[:, 0]
    for ranker in (scores, *rankers.values()):
        _both(agg, log, ranker, metric, params, propensity=propensity)


@pytest.mark.parametrize("metric, params", METRICS)
@pytest.mark.parametrize("name", ["eta 0.5", "trust bias"])
def test_the_estimators_own_propensity_on_both_paths(log, rankers, metric, params, name):
    """The issue's case: an aggregate built under eta = 2 used it for a model trained under another propensity."""
    ranker = rankers[name]
    agg = log.aggregate(2.0)
    _both(agg, log, ranker, metric, params)
    assert agg.snips_value(ranker, metric=metric, **params) == pytest.approx(
        snips_estimate(log, ranker, metric=metric, propensity=ranker.propensity, n_bootstrap=0, **params).value,
        rel=1e-12)
    if metric == "dcg":
        assert ranker.score(log) == pytest.approx(agg.snips_value(ranker), rel=1e-12)
        assert ranker.score(agg) == pytest.approx(agg.snips_value(ranker), rel=1e-12)


@pytest.mark.parametrize("metric, params", METRICS)
def test_scores_and_naive_rankers_use_the_aggregates_own(log, rankers, metric, params):
    agg = log.aggregate(1.3)
    for ranker in (log.data.X[:, 1], rankers["naive"]):
        _both(agg, log, ranker, metric, params, propensity=1.3)
        assert agg.ips_value(ranker, metric=metric, **params) == pytest.approx(
            ips_estimate(log, ranker, metric=metric, propensity=1.3, n_bootstrap=0, **params).value, rel=1e-12)
    default = log.aggregate()    # eta = 1 on both sides when nobody names one
    _both(default, log, log.data.X[:, 1], metric, params)


def test_streamed_aggregate_gives_the_same_numbers(log, rankers, tmp_path):
    from counterfactual_ltr import aggregate_clicks

    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    agg = aggregate_clicks(path, log.data, propensity=2.0)
    _both(agg, log, rankers["eta 0.5"], "dcg", {})


def test_rankers_trained_under_different_propensities_need_one_named(rankers):
    with pytest.raises(ValueError, match="different propensity models"):
        resolve_propensity(None, rankers["eta 0.5"], rankers["trust bias"])
    model, source = resolve_propensity(None, rankers["eta 0.5"], rankers["naive"], np.zeros(3))
    assert repr(model) == "PositionBasedPropensity(eta=0.5)" and source == "the rankers' own"
