"""Offline evaluation with cascade-aware propensities (one per shown result, given the clicks above it).

IPS with each click weighted by ``1 / P(E_r = 1 | C_<r)`` is unbiased under a cascade model for the
metric's weighted attractiveness of the shown results (Vardasbi et al. 2020): checked by Monte Carlo
against the exact value, with the true examination computed from the simulator's own parameters.
The estimators that need the examination by rank (DR, policy-aware, the metric of clicks) refuse
such a propensity with a ValueError that says why.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from click_sim import RankingDataset
from click_sim.cascade import cascade_clicks
from counterfactual_ltr import (ClickLog, compare_rankers, dr_estimate, estimate_propensities, ips_estimate,
                                snips_estimate, validation_report)
from counterfactual_ltr.metrics import metric_weight
from counterfactual_ltr.propensity._cascade_em import conditional

ALPHA = np.array([[0.7, 0.2, 0.5, 0.1, 0.6], [0.3, 0.8, 0.05, 0.4, 0.9]])   # two queries, five results each
SIGMA, GAMMA = 0.6, 0.85


class TrueExamination:
    """The DBN's own ``P(E_r = 1 | C_<r)`` with the true parameters (what a perfect fit would give)."""

    def item_propensities(self, log):
        S, L = log.n_sessions, ALPHA.shape[1]
        A = ALPHA[log.session_query]
        C = log.clicks.reshape(S, L).astype(np.float64)
        mask = np.ones((S, L), dtype=bool)
        pos = np.tile(np.arange(1, L + 1), (S, 1))
        E, _ = conditional("dbn", A, C, mask, pos, Sg=np.full((S, L), SIGMA), gamma=GAMMA)
        return E.ravel()

    def __repr__(self):
        return "TrueExamination()"


def _log(n_sessions, seed):
    data = RankingDataset(np.random.default_rng(0).standard_normal((10, 3)), np.zeros(10, dtype=int),
                          np.repeat([0, 1], 5))
    rng = np.random.default_rng(seed)
    query = rng.integers(0, 2, n_sessions)
    A = ALPHA[query]
    clicks = cascade_clicks("dbn", A, sigma=np.full_like(A, SIGMA), gamma=GAMMA, random_state=rng)
    offsets = np.arange(n_sessions + 1) * 5
    docs = (query[:, None] * 5 + np.arange(5)).ravel()        # every page shows its query's documents in order
    return data, ClickLog(data, query, offsets, docs, clicks.ravel().astype(bool))


@pytest.mark.parametrize("metric", ["dcg", "avg_rank"])
def test_cascade_aware_ips_is_unbiased_under_the_dbn(metric):
    data, log = _log(40_000, seed=1)
    scores = np.array([0.1, 0.9, 0.3, 0.7, 0.5, 0.2, 0.4, 0.6, 0.8, 0.0])     # a ranking unlike the logged one
    est = ips_estimate(log, scores, metric=metric, propensity=TrueExamination(), n_bootstrap=0)
    # exact: per query, sum_d alpha_d m(rank_d), averaged over the queries' session shares
    m = metric_weight(metric)
    exact = 0.0
    for q in (0, 1):
        s = scores[q * 5:(q + 1) * 5]
        rank = np.argsort(np.argsort(-s)) + 1
        exact += np.mean(log.session_query == q) * float(np.sum(ALPHA[q] * np.asarray(m(rank))))
    assert abs(est.value - exact) < 4 * est.stderr, (est.value, exact, est.stderr)
    # without the examination (eta = 0: every result taken as examined) the same check fails
    biased = ips_estimate(log, scores, metric=metric, propensity=0.0, n_bootstrap=0)
    assert abs(biased.value - exact) > 4 * biased.stderr


def test_estimators_that_need_examination_by_rank_refuse_it():
    data, log = _log(2_000, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = estimate_propensities(log, "dbn")
        scores = data.X[:, 0]
        assert np.isfinite(snips_estimate(log, scores, propensity=fitted).value)
        with pytest.raises(ValueError, match="per shown result.*use ips, snips or clipped_ips"):
            dr_estimate(log, scores, propensity=fitted)
        with pytest.raises(ValueError, match="value='clicks'.*compare on value='relevance'"):
            compare_rankers(log, scores, propensity=fitted, value="clicks")
        comparison = compare_rankers(log, scores, propensity=fitted, value="relevance", n_bootstrap=50)
        assert "cascade model" in comparison.propensity_uncertainty
        report = validation_report({"f0": scores}, log, propensity=fitted, pair_bootstrap=50, n_bootstrap=50)
    assert report.estimators == ("ips", "snips", "clipped_ips")
