"""Off-policy evaluation from click logs: exact values on a hand-made log, Monte Carlo checks of IPS
unbiasedness, SNIPS consistency, misspecified propensities, clipping, confidence-interval coverage, bad input.

The Monte Carlo tests use the metrics' rank weights written out here (``m(r) = 1/log2(1+r)`` for DCG,
``m(r) = r`` for the average rank), passed to the estimators as callables, so they do not depend on
``counterfactual_ltr.metrics``; ``test_metric_names_match_rank_weights`` ties the names to these weights
when that module is present.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog, PositionBasedPropensity
from counterfactual_ltr._segments import offsets_from_lengths
from counterfactual_ltr.evaluation import (ips_estimate, ips_scorer, session_contributions, snips_estimate,
                                           snips_scorer, true_values)


def dcg_weight(r):
    return 1.0 / np.log2(1.0 + np.asarray(r, dtype=float))


def rank_weight(r):
    return np.asarray(r, dtype=float)


METRICS = {"dcg": dcg_weight, "avg_rank": rank_weight}

# small Monte Carlo logs trip the estimates' diagnostics on purpose; the warnings are tested elsewhere
pytestmark = pytest.mark.filterwarnings("ignore::counterfactual_ltr.evaluation.EstimateWarning")

# ----------------------------------------------------------------------------- Monte Carlo setting

N_QUERIES = 30


@pytest.fixture(scope="module")
def setting():
    """Small make_ranking data, a fixed production ranking and a different fixed target scoring."""
    data = make_ranking(n_queries=N_QUERIES, n_docs=(5, 20), random_state=0)
    rng = np.random.default_rng(1)
    production = data.X[:, 0] + 0.5 * rng.standard_normal(data.n_docs)
    target = data.X @ np.linspace(1.0, -0.5, data.n_features)
    return data, production, target


def _ranks(scores, data):
    """1-based ranks per query, computed independently of the library (stable: ties keep row order)."""
    ranks = np.empty(data.n_docs, dtype=np.int64)
    for s, e in zip(data.query_offsets[:-1], data.query_offsets[1:]):
        ranks[s + np.argsort(-scores[s:e], kind="stable")] = np.arange(1, e - s + 1)
    return ranks


def _truth(data, target, m, c):
    """(mean over queries of sum_y m(rank(y)) c(y),  sum_q sum_y m c / sum_q sum_y c)."""
    mc = m(_ranks(target, data)) * c
    per_query = np.array([mc[s:e].sum() for s, e in zip(data.query_offsets[:-1], data.query_offsets[1:])])
    return per_query.mean(), per_query.sum() / c.sum()


def _per_pass(log, n_passes, estimate, target, **kwargs):
    """The estimate on each pass (every query once) of a many-pass log."""
    Q = log.data.n_queries
    return np.array([estimate(log[p * Q:(p + 1) * Q], target, **kwargs).value for p in range(n_passes)])


def _within(values, expected, n_se=3.0):
    mean = values.mean()
    se = values.std(ddof=1) / np.sqrt(len(values))
    return abs(mean - expected) <= n_se * se, mean, se


# ----------------------------------------------------------------------------- exact values on a hand log


@pytest.fixture
def hand(tiny_data):
    """Two sessions of query 0 (rows 0-2) and one of query 2 (rows 5-8)."""
    log = ClickLog(tiny_data, [0, 2, 0], offsets_from_lengths([3, 4, 2]),
                   [2, 0, 1, 8, 5, 7, 6, 0, 1], [0, 1, 1, 1, 0, 0, 1, 1, 0])
    scores = np.array([0.0, 2.0, 1.0, 5.0, 4.0, 0.5, 0.1, 0.9, 0.3])
    return log, scores


def test_ips_and_snips_by_hand(hand):
    log, scores = hand
    # target ranks: query 0 -> row1: 1, row2: 2, row0: 3;   query 2 -> row7: 1, row5: 2, row8: 3, row6: 4
    # session 0 clicks row 0 (pos 2, 1/q = 2, rank 3) and row 1 (pos 3, 1/q = 3, rank 1)
    # session 1 clicks row 8 (pos 1, 1/q = 1, rank 3) and row 6 (pos 4, 1/q = 4, rank 4)
    # session 2 clicks row 0 (pos 1, 1/q = 1, rank 3)
    X = np.array([2 * 3 + 3 * 1, 1 * 3 + 4 * 4, 1 * 3], dtype=float)
    W = np.array([2 + 3, 1 + 4, 1], dtype=float)
    ips = ips_estimate(log, scores, metric=rank_weight, confidence=0.9)
    assert np.isclose(ips.value, X.mean())
    assert np.isclose(ips.stderr, X.std(ddof=1) / np.sqrt(3))
    z = stats.norm.ppf(0.95)
    assert np.isclose(ips.ci_low, X.mean() - z * ips.stderr) and np.isclose(ips.ci_high, X.mean() + z * ips.stderr)
    assert ips.n_sessions == 3 and ips.n_clicks == 5 and ips.max_weight == 4.0 and ips.estimator == "ips"
    w = np.array([2, 3, 1, 4, 1], dtype=float)
    assert np.isclose(ips.ess, w.sum() ** 2 / (w**2).sum())
    snips = snips_estimate(log, scores, metric=rank_weight)
    ratio = X.sum() / W.sum()
    assert np.isclose(snips.value, ratio)
    assert np.isclose(snips.stderr, np.sqrt(np.sum((X - ratio * W) ** 2) * 3 / 2) / W.sum())
    Xs, Ws, ws = session_contributions(log, scores, metric=rank_weight)
    np.testing.assert_allclose(Xs, X)
    np.testing.assert_allclose(Ws, W)
    # DCG weights and another propensity model
    ips2 = ips_estimate(log, scores, metric=dcg_weight, propensity=2.0)
    X2 = np.array([4 * dcg_weight(3) + 9 * dcg_weight(1), dcg_weight(3) + 16 * dcg_weight(4), dcg_weight(3)])
    assert np.isclose(ips2.value, X2.mean())


def test_ranker_object_equals_scores(hand):
    log, scores = hand

    class Lookup:  # predicts the scores of the rows it is given (identified by their first feature)
        def predict(self, X):
            return scores[(X[:, 0] / 2).astype(int)]

    assert np.isclose(ips_estimate(log, Lookup(), metric=dcg_weight).value,
                      ips_estimate(log, scores, metric=dcg_weight).value)
    assert np.isclose(snips_estimate(log, Lookup(), metric=rank_weight).value,
                      snips_estimate(log, scores, metric=rank_weight).value)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("estimate", [ips_estimate, snips_estimate])
def test_bad_scores(hand, estimate):
    log, scores = hand
    nan = scores.copy()
    nan[4] = np.nan
    inf = scores.copy()
    inf[0] = np.inf
    for bad in (nan, inf, scores[:-1], np.r_[scores, 0.0], scores[:, None]):
        with pytest.raises(ValueError):
            estimate(log, bad, metric=dcg_weight)

    class NaNRanker:
        def predict(self, X):
            return np.full(len(X), np.nan)

    with pytest.raises(ValueError):
        estimate(log, NaNRanker(), metric=dcg_weight)


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5, 95])
def test_bad_confidence(hand, confidence):
    log, scores = hand
    with pytest.raises(ValueError):
        ips_estimate(log, scores, metric=dcg_weight, confidence=confidence)
    with pytest.raises(ValueError):
        snips_estimate(log, scores, metric=dcg_weight, confidence=confidence)


def test_snips_without_clicks(tiny_data):
    log = ClickLog(tiny_data, [0, 1], offsets_from_lengths([3, 2]), [0, 1, 2, 3, 4], [0, 0, 0, 0, 0])
    scores = np.arange(9.0)
    with pytest.raises(ValueError, match="click"):
        snips_estimate(log, scores, metric=dcg_weight)
    # IPS would be 0 for every ranker with a zero-width interval: an error, not a silent certainty
    with pytest.raises(ValueError, match="no clicks"):
        ips_estimate(log, scores, metric=dcg_weight)


def test_bad_propensity_in_estimate(hand):
    log, scores = hand
    with pytest.raises(ValueError):
        ips_estimate(log, scores, metric=dcg_weight, propensity=lambda pos: np.zeros(len(pos)))
    with pytest.raises(ValueError):
        snips_estimate(log, scores, metric=dcg_weight, propensity=-1.0)


def test_scorer_needs_a_click_log(hand):
    log, scores = hand

    class Zero:
        def predict(self, X):
            return np.zeros(len(X))

    with pytest.raises(ValueError):
        snips_scorer(dcg_weight)(Zero(), log.data.X)
    assert np.isclose(ips_scorer(dcg_weight)(Zero(), log), ips_estimate(log, np.zeros(9), metric=dcg_weight).value)


# ----------------------------------------------------------------------------- IPS unbiasedness


@pytest.mark.parametrize("eps_minus, eps_plus", [(0.0, 1.0), (0.2, 0.7)])
def test_ips_is_unbiased(setting, eps_minus, eps_plus):
    """Mean over 300 one-pass logs of IPS = mean over queries of sum_y m(rank(y)) c(y), c = eps+ / eps-."""
    data, production, target = setting
    n_passes = 300
    log = simulate_clicks(data, production, PositionBasedClickModel(eta=1.0, eps_minus=eps_minus, eps_plus=eps_plus),
                          n_passes=n_passes, random_state=2024)
    c = np.where(data.relevance() == 1, eps_plus, eps_minus)
    for name, m in METRICS.items():
        truth, _ = _truth(data, target, m, c)
        values = _per_pass(log, n_passes, ips_estimate, target, metric=m)
        ok, mean, se = _within(values, truth)
        assert ok, f"{name}: mean IPS {mean:.4f} vs truth {truth:.4f} (s.e. {se:.4f})"
        # the per-pass estimates average to the estimate on the whole log (equal sessions per pass)
        assert np.isclose(mean, ips_estimate(log, target, metric=m).value)
        # true_values computes the same target
        assert np.isclose(true_values(log, target, c, metric=m)["ips"], truth)
    if eps_minus == 0:
        # noiseless clicks: the truth is the full-information metric over relevant documents
        rel = data.relevance() == 1
        ranks = _ranks(target, data)
        direct = sum(dcg_weight(ranks[s:e][rel[s:e]]).sum()
                     for s, e in zip(data.query_offsets[:-1], data.query_offsets[1:])) / data.n_queries
        assert np.isclose(_truth(data, target, dcg_weight, c)[0], direct)


def test_naive_estimate_is_biased(setting):
    """Sanity check that the Monte Carlo has power: without propensities (eta=0 assumed) the estimate
    of the average rank is far below the truth (deep clicks are rare under the true eta=1)."""
    data, production, target = setting
    n_passes = 300
    log = simulate_clicks(data, production, PositionBasedClickModel(1.0, 0.0, 1.0), n_passes=n_passes,
                          random_state=7)
    truth, _ = _truth(data, target, rank_weight, data.relevance().astype(float))
    values = _per_pass(log, n_passes, ips_estimate, target, metric=rank_weight, propensity=0.0)
    ok, mean, se = _within(values, truth)
    assert not ok and mean < truth


# ----------------------------------------------------------------------------- misspecified propensities


@pytest.mark.parametrize("assumed_eta", [0.5, 2.0])
def test_misspecified_eta_bias(setting, assumed_eta):
    """True eta = 1, estimated with ``assumed_eta``.

    A relevant document shown at production position r is clicked with probability 1/r and, when
    clicked, weighted by 1/q_assumed(r) = r**assumed_eta, so its expected contribution is
    m(rank_S(y)) * r**(assumed_eta - 1) instead of m(rank_S(y)). With assumed_eta = 0.5 the factor
    r**-0.5 is < 1 for every r > 1: documents at low positions are underweighted and, since
    m(r) > 0, IPS-DCG is biased *downwards* (strictly, as some relevant documents sit below position 1).
    With assumed_eta = 2 the factor r is > 1: the estimate is biased *upwards*.
    """
    data, production, target = setting
    n_passes = 300
    log = simulate_clicks(data, production, PositionBasedClickModel(1.0, 0.0, 1.0), n_passes=n_passes,
                          random_state=11)
    rel = data.relevance().astype(float)
    truth, _ = _truth(data, target, dcg_weight, rel)
    factor = _ranks(production, data).astype(float) ** (assumed_eta - 1.0)
    biased_expectation, _ = _truth(data, target, dcg_weight, rel * factor)
    values = _per_pass(log, n_passes, ips_estimate, target, metric=dcg_weight,
                       propensity=PositionBasedPropensity(assumed_eta))
    ok, mean, se = _within(values, biased_expectation)
    assert ok, f"mean {mean:.4f} vs derived expectation {biased_expectation:.4f} (s.e. {se:.4f})"
    if assumed_eta < 1:
        assert biased_expectation < truth and mean + 3 * se < truth
    else:
        assert biased_expectation > truth and mean - 3 * se > truth
    # with the true eta the same log is unbiased
    ok, mean, se = _within(_per_pass(log, n_passes, ips_estimate, target, metric=dcg_weight, propensity=1.0), truth)
    assert ok


# ----------------------------------------------------------------------------- SNIPS consistency


def test_snips_is_consistent(setting):
    """On a long log SNIPS approaches sum_q sum_rel m(rank) / (number of relevant documents)."""
    data, production, target = setting
    n_passes = 2000
    log = simulate_clicks(data, production, PositionBasedClickModel(1.0, 0.0, 1.0), n_passes=n_passes,
                          random_state=3)
    rel = data.relevance().astype(float)
    for name, m in METRICS.items():
        _, ratio = _truth(data, target, m, rel)
        est = snips_estimate(log, target, metric=m)
        assert abs(est.value - ratio) <= 3 * est.stderr, f"{name}: {est.value} vs {ratio} (s.e. {est.stderr})"
        # the delta-method s.e. agrees with the spread of SNIPS over 40 disjoint batches of 50 passes
        batch = N_QUERIES * 50
        batches = np.array([snips_estimate(log[b * batch:(b + 1) * batch], target, metric=m).value
                            for b in range(40)])
        batch_se = batches.std(ddof=1) / np.sqrt(40)
        assert 0.6 < est.stderr / batch_se < 1.6, (est.stderr, batch_se)
        assert abs(batches.mean() - ratio) <= 3 * batch_se
        assert np.isclose(true_values(log, target, rel, metric=m)["snips"], ratio)
    # and it is the per-relevant-document value, not the per-query one
    ips_truth, ratio = _truth(data, target, dcg_weight, rel)
    assert not np.isclose(ips_truth, ratio)


# ----------------------------------------------------------------------------- clipping


def test_clipping_bounds_the_weights(setting):
    data, production, target = setting
    log = simulate_clicks(data, production, PositionBasedClickModel(1.0, 0.1, 1.0), n_passes=50, random_state=5)
    plain = ips_estimate(log, target, metric=dcg_weight)
    clipped = ips_estimate(log, target, metric=dcg_weight, propensity=PositionBasedPropensity(1.0, clip=0.1))
    assert plain.max_weight > 10  # some clicks below position 10 (lists up to 20)
    assert clipped.max_weight == 10.0
    assert clipped.max_weight < plain.max_weight
    # smaller weights on positive gains: a smaller estimate, and less spread of the weights
    assert clipped.value < plain.value
    assert clipped.ess > plain.ess
    assert clipped.stderr < plain.stderr


# ----------------------------------------------------------------------------- confidence intervals


def test_confidence_interval_coverage(setting):
    """90% intervals of IPS and SNIPS cover their targets in 85%-95% of 200 simulated logs.

    Each log holds 600 sessions drawn at random (without replacement) from a pool of 200 * 20 passes,
    so its sessions are i.i.d. (random query, fresh clicks): the setting of the CLT the intervals assume.
    (Logs of whole passes, every query equally often, would make the IPS interval conservative: the
    between-query variance it counts does not vary from log to log.)
    """
    data, production, target = setting
    n_logs, size = 200, 600
    pool = simulate_clicks(data, production, PositionBasedClickModel(1.0, 0.0, 1.0),
                           n_passes=n_logs * size // N_QUERIES, random_state=99)
    perm = np.random.default_rng(99).permutation(pool.n_sessions)
    rel = data.relevance().astype(float)
    truth_ips, truth_snips = _truth(data, target, dcg_weight, rel)
    covered_ips = covered_snips = 0
    for k in range(n_logs):
        log = pool[perm[k * size:(k + 1) * size]]
        ips = ips_estimate(log, target, metric=dcg_weight, confidence=0.9)
        snips = snips_estimate(log, target, metric=dcg_weight, confidence=0.9)
        covered_ips += ips.ci_low <= truth_ips <= ips.ci_high
        covered_snips += snips.ci_low <= truth_snips <= snips.ci_high
    assert 0.85 * n_logs <= covered_ips <= 0.95 * n_logs, covered_ips
    assert 0.85 * n_logs <= covered_snips <= 0.95 * n_logs, covered_snips


# ----------------------------------------------------------------------------- metric names


def test_metric_names_match_rank_weights(hand):
    pytest.importorskip("counterfactual_ltr.metrics", reason="counterfactual_ltr.metrics is not written yet")
    from counterfactual_ltr.evaluation import metric_weight

    r = np.arange(1, 30)
    np.testing.assert_allclose(metric_weight("dcg")(r), dcg_weight(r))
    np.testing.assert_allclose(metric_weight("avg_rank")(r), rank_weight(r))
    log, scores = hand
    for name, m in METRICS.items():
        assert np.isclose(ips_estimate(log, scores, metric=name).value, ips_estimate(log, scores, metric=m).value)
        assert np.isclose(snips_estimate(log, scores, metric=name).value,
                          snips_estimate(log, scores, metric=m).value)
    # scorers are "greater is better": the average rank is negated
    class Fixed:
        def predict(self, X):
            return scores[(X[:, 0] / 2).astype(int)]

    assert np.isclose(snips_scorer("avg_rank")(Fixed(), log), -snips_estimate(log, scores, metric="avg_rank").value)
    assert np.isclose(ips_scorer("dcg")(Fixed(), log), ips_estimate(log, scores, metric="dcg").value)
