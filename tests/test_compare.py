"""Paired comparisons (compare_rankers) and the value of clicks against the logged rankings.

Exact values on logs worked by hand or by independent loops; Monte Carlo checks that the difference
against the logging policy is unbiased for the value of clicks (plain, trust-bias, stochastic top-5
logger), that the paired intervals over queries cover, that the lower bound holds and that pairing
narrows the interval; BCa against scipy's; Bonferroni; orientation of average rank; bad input.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from click_sim import PositionBasedClickModel, StochasticRanker, make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog, RankingDataset
from counterfactual_ltr.evaluation import (ESTIMATORS, EstimateWarning, compare_rankers, on_policy_value,
                                           session_contributions, snips_estimate, true_click_values)
from counterfactual_ltr.evaluation.compare import _bca, _resample_counts
from counterfactual_ltr.propensity import TrustBiasPropensity

pytestmark = pytest.mark.filterwarnings("ignore::counterfactual_ltr.evaluation.EstimateWarning")


def dcg_weight(r):
    return 1.0 / np.log2(1.0 + np.asarray(r, dtype=float))


@pytest.fixture(scope="module")
def setting():
    """30 queries of 5-12 documents, a noisy production ranker (the logger), a different candidate."""
    data = make_ranking(n_queries=30, n_docs=(5, 12), random_state=0)
    rng = np.random.default_rng(1)
    logger = data.X[:, 0] + 0.5 * rng.standard_normal(data.n_docs)
    candidate = data.X @ np.linspace(1.0, -0.5, data.n_features)
    clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    relevance = np.where(data.relevance() == 1, 1.0, 0.1)
    return data, logger, candidate, clicks, relevance


@pytest.fixture(scope="module")
def log(setting):
    data, logger, _, clicks, _ = setting
    return simulate_clicks(data, logger, clicks, n_passes=20, random_state=0)


def _by_hand_logged_value(log, m):
    """sum_k m(k) c_k per session, by a loop over sessions."""
    out = np.zeros(log.n_sessions)
    for i in range(log.n_sessions):
        s, e = log.session_offsets[i], log.session_offsets[i + 1]
        out[i] = np.sum(m(np.arange(1, e - s + 1)) * log.clicks[s:e])
    return out


# ----------------------------------------------------------------------------- the logging baseline


def test_logging_baseline_is_the_unweighted_on_policy_value(setting, log):
    _, _, candidate, _, _ = setting
    Y = _by_hand_logged_value(log, dcg_weight)
    ips = compare_rankers(log, candidate, "logging", estimator="ips", n_bootstrap=0)
    assert ips.baseline_estimate.value == pytest.approx(Y.mean(), rel=1e-12)
    assert on_policy_value(log) == pytest.approx(Y.mean(), rel=1e-12)
    assert ips.baseline_estimate.estimator == "on_policy" and ips.value == "clicks"
    # SNIPS divides the same unweighted sum by the summed click weights W (shared with the candidate).
    _, W, _ = session_contributions(log, candidate, propensity=1.0)
    snips = compare_rankers(log, candidate, "logging", n_bootstrap=0, propensity=1.0)
    assert snips.baseline_estimate.value == pytest.approx(Y.sum() / W.sum(), rel=1e-12)
    # The propensity model changes the candidate's estimate, never the logged value.
    other = compare_rankers(log, candidate, "logging", estimator="ips", propensity=2.0, n_bootstrap=0)
    assert other.baseline_estimate.value == pytest.approx(Y.mean(), rel=1e-12)
    assert other.candidate_estimate.value != pytest.approx(ips.candidate_estimate.value)


@pytest.mark.parametrize("estimator", sorted(ESTIMATORS))
def test_the_logger_itself_differs_from_the_logging_baseline_by_exactly_zero(setting, log, estimator):
    """With full lists and the logger's own scores, X_i = Y_i session by session (module docstring)."""
    _, logger, _, _, _ = setting
    c = compare_rankers(log, logger, "logging", estimator=estimator, n_bootstrap=0)
    if estimator == "clipped_ips":  # flooring alpha changes the weights: not the logged value any more
        assert c.candidate_estimate.bias_bound > 0
        return
    assert abs(c.difference) < 1e-12 and c.stderr < 1e-12
    assert c.verdict == "no difference found" and c.p_value == 1.0


def _independent_click_truth(data, ranks_of, relevance, alpha, beta, m, lengths_per_query):
    """mean over queries of sum_{r <= L} m(r) (alpha_r R(d_r) + beta_r), by loops."""
    values = []
    for q in range(data.n_queries):
        s, e = data.query_offsets[q], data.query_offsets[q + 1]
        L = lengths_per_query[q]
        order = s + np.argsort(ranks_of[s:e])
        r = np.arange(1, e - s + 1)[:L]
        values.append(np.sum(m(r) * (alpha(r) * relevance[order[:L]] + beta(r))))
    return np.mean(values)


def test_true_click_values_by_loops(setting):
    data, logger, candidate, clicks, relevance = setting
    once = simulate_clicks(data, logger, clicks, n_passes=1, random_state=0)
    from counterfactual_ltr.metrics import ranks as ranks_of

    full = data.query_lengths
    expected = _independent_click_truth(data, ranks_of(candidate, data.query_offsets), relevance,
                                        lambda r: 1.0 / r, lambda r: 0.0 * r, dcg_weight, full)
    assert true_click_values(once, candidate, relevance)["ips"] == pytest.approx(expected, rel=1e-12)
    logged = _independent_click_truth(data, ranks_of(logger, data.query_offsets), relevance,
                                      lambda r: 1.0 / r, lambda r: 0.0 * r, dcg_weight, full)
    assert true_click_values(once, "logging", relevance)["ips"] == pytest.approx(logged, rel=1e-12)
    # Trust bias: beta adds sum_{r <= L} m(r) beta_r.
    model = TrustBiasPropensity(1.0 / np.arange(1, 13), eps_plus=1.0, eps_minus=0.2)
    expected = _independent_click_truth(data, ranks_of(candidate, data.query_offsets), relevance,
                                        model.alpha, model.beta, dcg_weight, full)
    assert true_click_values(once, candidate, relevance, propensity=model)["ips"] == pytest.approx(expected)


def _mean_within(values, truth, n_se=3.5):
    values = np.asarray(values)
    se = values.std(ddof=1) / np.sqrt(len(values))
    return abs(values.mean() - truth) <= n_se * se, values.mean(), truth, se


def test_difference_to_the_logging_policy_is_unbiased(setting):
    """Full lists, deterministic logger: E[IPS difference] = V(candidate) - V(logged rankings) (value of clicks)."""
    data, logger, candidate, clicks, relevance = setting
    big = simulate_clicks(data, logger, clicks, n_passes=5000, random_state=3)
    size = data.n_queries * 5
    diffs = [compare_rankers(big[k * size:(k + 1) * size], candidate, "logging", estimator="ips", metric=dcg_weight,
                             n_bootstrap=0).difference for k in range(1000)]
    truth = (true_click_values(big, candidate, relevance, metric=dcg_weight)["ips"]
             - true_click_values(big, "logging", relevance, metric=dcg_weight)["ips"])
    ok, *numbers = _mean_within(diffs, truth)
    assert ok, numbers
    assert abs(truth) > 6 * numbers[-1]  # a difference worth detecting, not 0 = 0


def test_difference_to_the_logging_policy_is_unbiased_under_trust_bias(setting):
    data, logger, candidate, _, _ = setting
    theta = 1.0 / np.arange(1, 13)
    eps_minus = np.linspace(0.3, 0.05, 12)
    model = TrustBiasPropensity(theta, eps_plus=1.0, eps_minus=eps_minus)
    trust = PositionBasedClickModel(examination=theta, eps_minus=eps_minus, eps_plus=1.0)
    big = simulate_clicks(data, logger, trust, n_passes=2000, random_state=4)
    relevance = data.relevance().astype(float)
    size = data.n_queries * 5
    for estimator in ("ips", "dr"):
        diffs = [compare_rankers(big[k * size:(k + 1) * size], candidate, "logging", estimator=estimator,
                                 propensity=model, relevance_model=np.full(data.n_docs, 0.5),
                                 n_bootstrap=0).difference for k in range(400)]
        truth = (true_click_values(big, candidate, relevance, propensity=model)["ips"]
                 - true_click_values(big, "logging", relevance, propensity=model)["ips"])
        ok, *numbers = _mean_within(diffs, truth)
        assert ok, (estimator, numbers)


def test_policy_aware_difference_to_a_stochastic_top5_logger_is_unbiased(setting):
    """A Plackett-Luce logger showing its top 5: policy-aware IPS estimates the candidate's top 5 without bias;
    the logged value is the policy's expected value of clicks, exact from its position probabilities."""
    data, logger, candidate, clicks, relevance = setting
    policy = StochasticRanker(logger, temperature=1.0)
    big = simulate_clicks(data, policy, clicks, n_passes=1500, random_state=5, max_shown=5)
    size = data.n_queries * 5
    diffs = [compare_rankers(big[k * size:(k + 1) * size], candidate, "logging", estimator="policy_aware",
                             logging_policy=big.logging_policy, n_bootstrap=0).difference for k in range(300)]
    probs = big.logging_policy.position_probabilities(data).probabilities      # (n_docs, 5)
    k = np.arange(1, probs.shape[1] + 1)
    per_row = probs @ (dcg_weight(k) / k) * relevance
    policy_value = np.bincount(data.query_index, per_row, minlength=data.n_queries).mean()
    truth = true_click_values(big, candidate, relevance)["ips"] - policy_value
    ok, *numbers = _mean_within(diffs, truth, n_se=4.0)  # position probabilities are Monte Carlo estimates
    assert ok, numbers


def test_difference_to_the_logged_rankings_over_relevance_is_unbiased(setting):
    """value="relevance": the logged rankings by their own IPS; E[difference] = true relevance-value difference."""
    data, logger, candidate, clicks, relevance = setting
    big = simulate_clicks(data, logger, clicks, n_passes=3000, random_state=6)
    size = data.n_queries * 5
    diffs = [compare_rankers(big[k * size:(k + 1) * size], candidate, "logging", estimator="ips", value="relevance",
                             n_bootstrap=0).difference for k in range(600)]
    # eta = 0 examines every position: the value of clicks is then the metric over relevance
    truth = (true_click_values(big, candidate, relevance, propensity=0.0)["ips"]
             - true_click_values(big, "logging", relevance, propensity=0.0)["ips"])
    ok, *numbers = _mean_within(diffs, truth)
    assert ok, numbers
    one = compare_rankers(big[:size], candidate, "logging", estimator="ips", value="relevance", n_bootstrap=0)
    X, _, _ = session_contributions(big[:size], logger)     # full lists: the logger's own IPS is the logged one
    assert one.baseline_estimate.value == pytest.approx(X.mean(), rel=1e-12)
    assert one.baseline_estimate.estimator == "logged_ips" and one.value == "relevance"


def test_the_average_rank_of_clicks_cannot_tell_rankings_apart_under_eta_1(setting, log):
    """m(r) alpha_r = r * (1/r) = 1: every ranking has the same expected sum of the ranks of its clicks."""
    data, logger, candidate, _, _ = setting
    with pytest.warns(EstimateWarning, match="same for every ranking"):
        c = compare_rankers(log, candidate, "logging", metric="avg_rank", estimator="ips", n_bootstrap=0)
    assert any("same for every ranking" in w for w in c.warnings)
    assert abs(c.difference) < 1e-9 * abs(c.baseline_estimate.value)
    with warnings.catch_warnings(record=True) as caught:   # under eta = 0.5, r * r^-0.5 varies: no such warning
        warnings.simplefilter("always")
        other = compare_rankers(log, candidate, "logging", metric="avg_rank", estimator="ips", propensity=0.5,
                                n_bootstrap=0)
    assert not any("same for every ranking" in str(w.message) for w in caught) and other.difference != 0


# ----------------------------------------------------------------------------- against a ranker baseline


def test_each_rankers_estimate_is_the_estimators(setting, log):
    data, logger, candidate, _, _ = setting
    for estimator in ("snips", "ips", "dr"):
        c = compare_rankers(log, candidate, logger, estimator=estimator, n_bootstrap=50, random_state=3)
        direct = ESTIMATORS[estimator](log, candidate, n_bootstrap=50, random_state=3)
        base = ESTIMATORS[estimator](log, logger, n_bootstrap=50, random_state=3)
        assert c.candidate_estimate.value == pytest.approx(direct.value, rel=1e-12)
        assert c.candidate_estimate.boot_low == pytest.approx(direct.boot_low, rel=1e-12)
        assert c.baseline_estimate.value == pytest.approx(base.value, rel=1e-12)
        assert c.difference == pytest.approx(direct.value - base.value, rel=1e-10)


def test_snips_difference_is_one_ratio_with_a_query_level_delta_method(setting, log):
    """sum (X_c - X_b) / sum W, its standard error by a loop over queries; not the naive per-session mean."""
    _, logger, candidate, _, _ = setting
    Xc, W, _ = session_contributions(log, candidate)
    Xb, _, _ = session_contributions(log, logger)
    c = compare_rankers(log, candidate, logger, n_bootstrap=0)
    diff = (Xc.sum() - Xb.sum()) / W.sum()
    assert c.difference == pytest.approx(diff, rel=1e-12)
    queries = np.unique(log.session_query)
    resid = np.array([np.sum((Xc - Xb - diff * W)[log.session_query == q]) for q in queries])
    G = len(queries)
    se = np.sqrt(np.sum(resid**2) * G / (G - 1)) / W.sum()
    assert c.stderr == pytest.approx(se, rel=1e-10)
    t = stats.t.ppf(0.975, G - 1)
    assert (c.ci_low, c.ci_high) == pytest.approx((diff - t * se, diff + t * se), rel=1e-10)
    assert c.p_value == pytest.approx(2 * stats.t.sf(abs(diff) / se, G - 1), rel=1e-8)
    assert c.lower_bound == pytest.approx(diff - stats.t.ppf(0.975, G - 1) * se, rel=1e-10)   # the interval's end
    naive = (Xc - Xb) / W.mean()     # what treating the ratio as a mean of per-session terms would give
    assert abs(naive.std(ddof=1) / np.sqrt(len(naive)) - se) > 0.05 * se


def test_bca_matches_scipy():
    rng = np.random.default_rng(0)
    B = rng.poisson(3, 80).astype(float) + 1
    A = B * rng.gamma(2.0, 1.0, 80) + rng.normal(0, 1, 80)
    ours = _bca(A, B, _resample_counts(80, 40_000, np.random.default_rng(1)), [0.025, 0.975])
    ref = stats.bootstrap((A, B), lambda a, b, axis=-1: a.sum(axis) / b.sum(axis), paired=True, vectorized=True,
                          n_resamples=40_000, method="BCa", random_state=2).confidence_interval
    assert ours == pytest.approx([ref.low, ref.high], abs=0.01 * (ref.high - ref.low) + 5e-3)


def test_several_candidates_are_corrected_by_bonferroni(setting, log):
    data, logger, candidate, _, _ = setting
    named = {"cand": candidate, "f1": data.X[:, 1], "f2": data.X[:, 2]}
    single = compare_rankers(log, candidate, logger, n_bootstrap=0)
    three = compare_rankers(log, named, logger, n_bootstrap=400, random_state=0)
    c = three["cand"]
    G = c.n_queries
    assert list(three) == ["cand", "f1", "f2"] and c.n_comparisons == 3
    assert c.difference == single.difference and c.stderr == single.stderr
    ratio = (c.ci_high - c.ci_low) / (single.ci_high - single.ci_low)
    assert ratio == pytest.approx(stats.t.ppf(1 - 0.05 / 6, G - 1) / stats.t.ppf(0.975, G - 1), rel=1e-10)
    assert c.p_value == pytest.approx(min(1.0, 3 * single.p_value), rel=1e-10)
    assert c.lower_bound == pytest.approx(c.ci_low, rel=1e-10)     # the corrected interval's end
    for comp in three.values():  # a verdict never contradicts its (adjusted) p-value
        assert (comp.verdict != "no difference found") == (comp.p_value < 0.05)
        assert comp.boot_low <= comp.difference <= comp.boot_high


def test_average_rank_improves_downwards(setting, log):
    data, logger, _, _, _ = setting
    good, bad = data.y.astype(float), -data.y.astype(float)
    better = compare_rankers(log, good, bad, metric="avg_rank", estimator="ips", n_bootstrap=0)
    assert better.difference < 0 < better.improvement and better.verdict == "better" and better.clears_zero
    assert better.lower_bound == pytest.approx(-better.difference - stats.t.ppf(0.975, better.n_queries - 1)
                                               * better.stderr)
    worse = compare_rankers(log, bad, good, metric="avg_rank", estimator="ips", n_bootstrap=0)
    assert worse.verdict == "worse" and not worse.clears_zero
    assert "better" in better.summary() and "clears 0" in better.summary()


@pytest.mark.slow      # a coverage count over independent logs: about 10 s
def test_paired_intervals_cover_and_the_lower_bound_holds_over_independent_logs():
    """A smaller version of experiments/paired_comparison.py: queries drawn from a population of 200."""
    from experiments.paired_comparison import monte_carlo, summarise

    data = make_ranking(n_queries=200, n_docs=(5, 15), random_state=7)
    rng = np.random.default_rng(8)
    logger = data.X[:, 0] + 0.7 * rng.standard_normal(data.n_docs)
    candidate = data.X[:, 0] + 0.4 * rng.standard_normal(data.n_docs)
    clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    summary = summarise(monte_carlo(data, candidate, logger, clicks, n_logs=200, n_queries=100, sessions=5,
                                    n_bootstrap=300, seed=0))
    for key, s in summary.items():
        # 200 logs: a calibrated 95% interval covers in 92-98% of them with probability > 0.95
        assert 0.91 <= s["coverage_t"] <= 0.99, (key, s)
        assert 0.89 <= s["coverage_bca"] <= 0.99, (key, s)
        assert s["lower_bound_holds"] >= 0.91, (key, s)
    assert summary["ranker/snips"]["width_ratio_median"] <= 0.7
    assert summary["ranker/ips"]["width_ratio_median"] <= 0.7


# ----------------------------------------------------------------------------- warnings and bad input


def test_a_ranker_that_ties_everything_is_flagged(setting, log):
    data, logger, _, _, _ = setting
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compare_rankers(log, np.zeros(data.n_docs), logger, n_bootstrap=0)
    assert any("ranks every document equal" in w for w in c.warnings)


def test_bad_input_is_named(setting, log):
    data, logger, candidate, _, _ = setting
    with pytest.raises(ValueError, match="unknown estimator"):
        compare_rankers(log, candidate, estimator="ipw")
    with pytest.raises(ValueError, match="'logging'"):
        compare_rankers(log, candidate, "production")
    with pytest.raises(ValueError, match="only the baseline"):
        compare_rankers(log, "logging")
    with pytest.raises(ValueError, match="empty mapping"):
        compare_rankers(log, {})
    with pytest.raises(ValueError, match="confidence"):
        compare_rankers(log, candidate, confidence=1.0)
    with pytest.raises(ValueError, match="shape"):
        compare_rankers(log, candidate[:-1])
    empty = ClickLog(data, log.session_query, log.session_offsets, log.docs, np.zeros(log.n_items, dtype=bool))
    with pytest.raises(ValueError, match="no clicks"):
        compare_rankers(empty, candidate)
    one = RankingDataset(np.eye(3), [1, 0, 1], [5, 5, 5])
    tiny = ClickLog(one, [0, 0], [0, 3, 6], [2, 0, 1, 0, 2, 1], [0, 1, 0, 1, 0, 0])
    with pytest.raises(ValueError, match=r"the log has a single query \(5\): a comparison's interval is over "
                                         "queries .* so one query cannot give one; use a log of many queries"):
        compare_rankers(tiny, np.array([1.0, 2.0, 3.0]), n_bootstrap=0)


def test_the_lower_bound_is_documented_as_what_it_is():
    """The docstring says what the code computes: the lower end of the interval of the improvement."""
    from counterfactual_ltr.evaluation.compare import Comparison, compare_rankers

    entry = Comparison.__doc__.split("lower_bound : float")[1].split("confidence : float")[0]
    assert "lower end of the interval" in entry and "improvement_interval[0]" in entry
    for doc in (Comparison.__doc__, compare_rankers.__doc__):
        assert "one-sided lower confidence bound" not in " ".join(doc.split()).lower()


def test_a_level_below_one_never_reads_100_percent():
    from counterfactual_ltr.evaluation.compare import _percent

    assert [_percent(c) for c in (0.95, 0.9961538, 0.999, 0.9999, 0.99999, 1.0)] == \
        ["95%", "99.6%", "99.9%", "99.99%", "99.999%", "100%"]
