"""Clipped IPS, doubly robust, policy-aware and trust-bias corrected estimates; diagnostics, scorers, reports.

Monte Carlo tests compare the mean over >= 500 simulated logs with the exact full-information value
``mean over queries of sum_d m(rank_S(d)) c(d)`` (``c`` the click-relevance), within 3 standard errors
of the Monte Carlo mean. Each suite simulates one long log of small synthetic data and splits it into
logs of whole passes, so hundreds of logs cost one vectorised simulation.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator
from sklearn.linear_model import Ridge
from sklearn.model_selection import GroupKFold, cross_val_score

from click_sim import PositionBasedClickModel, StochasticRanker, make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog, PositionBasedPropensity, RankingDataset
from counterfactual_ltr._segments import offsets_from_lengths
from counterfactual_ltr.evaluation import (ESTIMATORS, EstimateWarning, clipped_ips_estimate, clipped_ips_scorer,
                                           dr_estimate, dr_scorer, fit_relevance, ips_estimate, policy_aware_estimate,
                                           policy_aware_scorer, snips_estimate, validation_report)
from counterfactual_ltr.logging_policy import PositionProbabilities
from counterfactual_ltr.propensity import TabularPropensity, TrustBiasPropensity

pytestmark = pytest.mark.filterwarnings("ignore::counterfactual_ltr.evaluation.EstimateWarning")

N_LOGS = 500
PASSES = 5  # passes (every query once) per simulated log


def dcg_weight(r):
    return 1.0 / np.log2(1.0 + np.asarray(r, dtype=float))


def _ranks(scores, data):
    ranks = np.empty(data.n_docs, dtype=np.int64)
    for s, e in zip(data.query_offsets[:-1], data.query_offsets[1:]):
        ranks[s + np.argsort(-scores[s:e], kind="stable")] = np.arange(1, e - s + 1)
    return ranks


def _truth(data, target, c):
    """(mean over queries of sum_d m(rank) c,  sum_q sum_d m c / sum_q sum_d c), computed independently."""
    mc = dcg_weight(_ranks(target, data)) * c
    per_query = np.array([mc[s:e].sum() for s, e in zip(data.query_offsets[:-1], data.query_offsets[1:])])
    return per_query.mean(), per_query.sum() / c.sum()


def _per_log(log, estimate, target, n_logs=N_LOGS, **kwargs):
    size = len(log) // n_logs
    return np.array([estimate(log[i * size:(i + 1) * size], target, metric=dcg_weight, n_bootstrap=0, **kwargs).value
                     for i in range(n_logs)])


def _within(values, expected, n_se=3.0):
    mean, se = values.mean(), values.std(ddof=1) / np.sqrt(len(values))
    return abs(mean - expected) <= n_se * se, mean, se


@pytest.fixture(scope="module")
def setting():
    """20 queries of 6-9 documents, a noisy production ranker, a different target ranker, eps- = 0.1."""
    data = make_ranking(n_queries=20, n_docs=(6, 9), random_state=0)
    rng = np.random.default_rng(1)
    production = data.X[:, 0] + 0.5 * rng.standard_normal(data.n_docs)
    target = data.X @ np.linspace(1.0, -0.5, data.n_features)
    clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    c = np.where(data.relevance() == 1, 1.0, 0.1)
    return data, production, target, clicks, c


# ----------------------------------------------------------------------------- unbiasedness, full lists


def test_ips_dr_unbiased_snips_consistent_on_full_lists(setting):
    data, production, target, clicks, c = setting
    log = simulate_clicks(data, production, clicks, n_passes=N_LOGS * PASSES, random_state=10)
    truth, ratio = _truth(data, target, c)
    ips = _per_log(log, ips_estimate, target)
    ok, mean, se = _within(ips, truth)
    assert ok, (mean, truth, se)
    # DR with a deliberately wrong relevance model (the opposite of the truth) is still unbiased ...
    wrong = _per_log(log, dr_estimate, target, relevance_model=1.0 - c)
    ok, mean, se = _within(wrong, truth)
    assert ok, (mean, truth, se)
    # ... and, with every document shown by a deterministic logger, equals IPS whatever the model:
    # the model term sum_d omega R_hat cancels against the correction's - omega alpha R_hat / alpha.
    np.testing.assert_allclose(wrong, ips)
    # SNIPS: a ratio estimator, consistent for the per-relevant-document value
    snips = _per_log(log, snips_estimate, target)
    ok, mean, se = _within(snips, ratio)
    assert ok, (mean, ratio, se)
    whole = snips_estimate(log, target, metric=dcg_weight, n_bootstrap=0)
    assert abs(whole.value - ratio) <= 3 * whole.stderr
    assert whole.stderr < snips.std() / 10  # 500 times the sessions: the error shrinks like 1/sqrt(n)


def test_dr_relevance_models_of_every_kind(setting):
    """On full lists from a deterministic logger DR equals IPS whatever the model (see above): so every way
    of giving the model must run and give the IPS value; the cross-fitted models depend on the seed only."""
    from sklearn.linear_model import LogisticRegression

    data, production, target, clicks, c = setting
    log = simulate_clicks(data, production, clicks, n_passes=30, random_state=20)
    ips = ips_estimate(log, target, metric="dcg").value
    fitted = Ridge().fit(data.X, c)
    for model in (None, Ridge(alpha=10.0), LogisticRegression(), fitted, lambda X: X[:, 0], c,
                  fit_relevance(log, random_state=3)):
        assert np.isclose(dr_estimate(log, target, metric="dcg", relevance_model=model, random_state=3).value, ips)
    fit = fit_relevance(log, LogisticRegression(), random_state=0)
    assert fit.predictions.shape == (data.n_docs,) and np.all((fit.predictions > 0) & (fit.predictions < 1))
    assert np.bincount(fit.query_fold).tolist() == [data.n_queries // 2] * 2
    np.testing.assert_array_equal(fit.predictions, fit_relevance(log, LogisticRegression(), random_state=0).predictions)
    # fold 0's rows are predicted by a ridge fit on fold 1's sessions only: per row, the mean of click / q
    ridge = fit_relevance(log, Ridge(alpha=1.0), random_state=5)
    other = log[ridge.query_fold[log.session_query] == 1]
    target_sum = np.zeros(data.n_docs)
    shows = np.zeros(data.n_docs)
    np.add.at(target_sum, other.docs, other.clicks * other.positions.astype(float))  # 1/q = position (eta=1)
    np.add.at(shows, other.docs, 1.0)
    rows = shows > 0
    ref = Ridge(alpha=1.0).fit(data.X[rows], target_sum[rows] / shows[rows], sample_weight=shows[rows])
    fold0 = ridge.query_fold[data.query_index] == 0
    np.testing.assert_allclose(ridge.predictions[fold0], ref.predict(data.X[fold0]))
    np.testing.assert_allclose(fitted.predict(data.X), fit_relevance(log, fitted).predictions)


# ----------------------------------------------------------------------------- Plackett-Luce logger, top-5


@pytest.fixture(scope="module")
def top5(setting):
    data, production, target, clicks, c = setting
    stochastic = simulate_clicks(data, StochasticRanker(production, temperature=1.0), clicks,
                                 n_passes=N_LOGS * PASSES, random_state=11, max_shown=5)
    deterministic = simulate_clicks(data, production, clicks, n_passes=N_LOGS * PASSES, random_state=12,
                                    max_shown=5)
    return stochastic, deterministic


def test_policy_aware_and_dr_unbiased_under_top5_cutoff_plain_ips_biased(setting, top5):
    data, production, target, clicks, c = setting
    stochastic, deterministic = top5
    truth, _ = _truth(data, target, c)
    assert stochastic.logging_policy.position_probabilities(data).n_samples is None  # exact probabilities
    pa = _per_log(stochastic, policy_aware_estimate, target)
    ok, mean, se = _within(pa, truth)
    assert ok, (mean, truth, se)
    wrong = _per_log(stochastic, dr_estimate, target, relevance_model=1.0 - c)
    ok, mean, se = _within(wrong, truth)
    assert ok, (mean, truth, se)
    # plain IPS under the same cutoff: documents below position 5 are never credited (DCG weights > 0)
    for log in (deterministic, stochastic):
        ips = _per_log(log, ips_estimate, target)
        ok, mean, se = _within(ips, truth)
        assert not ok and mean + 3 * se < truth, (mean, truth, se)


def test_dr_standard_deviation_against_ips_and_snips(setting, top5):
    """DR with a cross-fitted ridge model is unbiased; with the true relevance it has a smaller spread
    than policy-aware IPS. The measured ratios are printed (run with -s); the user guide (evaluation.md)
    quotes the MQ2008 figures of ``python -m experiments.bench_evaluation --variance``."""
    data, production, target, clicks, c = setting
    stochastic, _ = top5
    truth, _ = _truth(data, target, c)
    n = 250  # the model is refitted per log: half the logs, each of twice the sessions
    ridge = _per_log(stochastic, dr_estimate, target, n_logs=n, relevance_model=Ridge(alpha=1.0), random_state=0)
    ok, mean, se = _within(ridge, truth)
    assert ok, (mean, truth, se)
    exact = _per_log(stochastic, dr_estimate, target, n_logs=n, relevance_model=c)
    pa = _per_log(stochastic, policy_aware_estimate, target, n_logs=n)
    snips = _per_log(stochastic, snips_estimate, target, n_logs=n)
    assert exact.std() < 0.95 * pa.std()
    print(f"\nstd over {n} logs: DR(ridge)/policy-aware {ridge.std() / pa.std():.3f}, DR(true R)/policy-aware "
          f"{exact.std() / pa.std():.3f}, DR(ridge)/SNIPS (relative std) "
          f"{(ridge.std() / ridge.mean()) / (snips.std() / snips.mean()):.3f}")


# ----------------------------------------------------------------------------- trust bias


def test_affine_correction_unbiased_where_plain_ips_is_biased(setting):
    """Trust bias (eps+ = 1, eps- falling with the position): clicks at position k have probability
    theta_k (R + eps-_k (1 - R)). IPS with the examination theta as propensity has expectation
    sum_d omega(d) (R(d) + eps-_k(d) (1 - R(d))) > truth: biased *upwards* (irrelevant documents' clicks
    count as relevance). The affine estimate (c - beta) / alpha is unbiased."""
    data, production, target, _, _ = setting
    theta = 1.0 / np.arange(1, 10)
    eps_minus = np.linspace(0.3, 0.05, 9)
    model = TrustBiasPropensity(theta, eps_plus=1.0, eps_minus=eps_minus)
    base = simulate_clicks(data, production, PositionBasedClickModel(1.0, 0.0, 1.0), n_passes=N_LOGS * PASSES,
                           random_state=13)
    R = data.relevance()[base.docs].astype(float)
    alpha, beta = model.alpha(base.positions), model.beta(base.positions)
    clicks = np.random.default_rng(14).random(base.n_items) < alpha * R + beta
    log = ClickLog(data, base.session_query, base.session_offsets, base.docs, clicks)
    rel = data.relevance().astype(float)
    truth, _ = _truth(data, target, rel)
    affine = _per_log(log, ips_estimate, target, propensity=model)
    ok, mean, se = _within(affine, truth)
    assert ok, (mean, truth, se)
    dr = _per_log(log, dr_estimate, target, propensity=model, relevance_model=np.full(data.n_docs, 0.5))
    assert _within(dr, truth)[0]
    plain = _per_log(log, ips_estimate, target, propensity=TabularPropensity(theta))
    # the derived expectation of plain IPS
    positions = _ranks(production, data)
    biased, _ = _truth(data, target, rel + eps_minus[positions - 1] * (1 - rel))
    assert biased > truth
    ok, mean, se = _within(plain, biased)
    assert ok, (mean, biased, se)
    assert mean - 3 * se > truth


# ----------------------------------------------------------------------------- clipping


def test_clipped_ips_bias_never_above_its_bound(setting):
    data, production, target, clicks, c = setting
    log = simulate_clicks(data, production, clicks, n_passes=N_LOGS * PASSES, random_state=15)
    truth, _ = _truth(data, target, c)
    positions = _ranks(production, data)
    omega = dcg_weight(_ranks(target, data))
    for clip in (0.15, 0.3, 0.6):
        values = _per_log(log, clipped_ips_estimate, target, clip=clip)
        q = 1.0 / positions
        # the exact expectation: clipping scales each document's credit by q / max(q, clip)
        expected, _ = _truth(data, target, c * q / np.maximum(q, clip))
        ok, mean, se = _within(values, expected)
        assert ok, (clip, mean, expected, se)
        bound = clipped_ips_estimate(log, target, metric=dcg_weight, clip=clip, n_bootstrap=0).bias_bound
        per_query_bound = np.bincount(data.query_index, omega * np.clip(1 - q / clip, 0, None)).mean()
        assert np.isclose(bound, per_query_bound)
        assert abs(expected - truth) <= bound          # the exact bias
        assert abs(mean - truth) <= bound + 3 * se      # the measured bias, up to Monte Carlo error
        assert bound > 0
    # clipping below every propensity changes nothing
    full = clipped_ips_estimate(log[:100], target, metric=dcg_weight, clip=0.01, n_bootstrap=0)
    assert full.bias_bound == 0 and np.isclose(full.value, ips_estimate(log[:100], target, metric=dcg_weight).value)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 8), st.floats(0.0, 2.0), st.floats(0.05, 1.0), st.integers(0, 2**31 - 1))
def test_clipping_bias_bound_on_random_inputs(n, eta, clip, seed):
    """|E[clipped IPS] - truth| <= bound for any relevance in [0, 1], propensities and scores."""
    rng = np.random.default_rng(seed)
    data = RankingDataset(rng.normal(size=(n, 2)), rng.integers(0, 2, n), np.zeros(n, dtype=int))
    order = rng.permutation(n)
    clicks = rng.random(n) < 0.5
    clicks[0] = True  # a log without clicks is an error; the bound does not depend on the clicks
    log = ClickLog(data, [0], [0, n], order, clicks)
    scores = rng.normal(size=n)
    est = clipped_ips_estimate(log, scores, metric="dcg", propensity=eta, clip=clip, n_bootstrap=0)
    q = np.empty(n)
    q[order] = np.arange(1, n + 1, dtype=float) ** -eta
    omega = dcg_weight(_ranks(scores, data))
    for R in (rng.random(n), np.ones(n), np.zeros(n), (rng.random(n) < 0.5).astype(float)):
        bias = np.sum(omega * R * (q / np.maximum(q, clip) - 1))
        assert abs(bias) <= est.bias_bound + 1e-12


# ----------------------------------------------------------------------------- interval coverage


@pytest.fixture(scope="module")
def iid_logs(setting):
    """500 logs of 400 sessions, each session a uniformly random query (the CLT's i.i.d. setting)."""
    data, production, target, clicks, c = setting
    n_logs, size = N_LOGS, 400
    pool = simulate_clicks(data, production, clicks, n_passes=n_logs * size // data.n_queries, random_state=16)
    perm = np.random.default_rng(16).permutation(pool.n_sessions)
    return pool, perm, n_logs, size


@pytest.mark.slow
def test_intervals_cover_the_truth(setting, iid_logs):
    """Normal 95% intervals of IPS, SNIPS and DR cover the truth in 92-98% of 500 logs;
    the bootstrap intervals of IPS too."""
    data, production, target, clicks, c = setting
    pool, perm, n_logs, size = iid_logs
    truth, ratio = _truth(data, target, c)
    # a reasonable relevance model, fitted on an independent log
    other = simulate_clicks(data, production, clicks, n_passes=50, random_state=17)
    rhat = fit_relevance(other, Ridge(alpha=1.0), random_state=0).predictions
    covered = dict(ips=0, snips=0, dr=0, boot=0)
    for k in range(n_logs):
        log = pool[perm[k * size:(k + 1) * size]]
        ips = ips_estimate(log, target, metric=dcg_weight, n_bootstrap=200, random_state=k)
        snips = snips_estimate(log, target, metric=dcg_weight, n_bootstrap=0)
        dr = dr_estimate(log, target, metric=dcg_weight, relevance_model=rhat, n_bootstrap=0)
        covered["ips"] += ips.ci_low <= truth <= ips.ci_high
        covered["boot"] += ips.boot_low <= truth <= ips.boot_high
        covered["snips"] += snips.ci_low <= ratio <= snips.ci_high
        covered["dr"] += dr.ci_low <= truth <= dr.ci_high
    for name, count in covered.items():
        assert 0.92 * n_logs <= count <= 0.98 * n_logs, (name, count / n_logs)


# ----------------------------------------------------------------------------- diagnostics by hand


@pytest.fixture
def cut_log(tiny_data):
    """Query 0 (rows 0-2) shown twice with only two of its three rows; query 2 (rows 5-8) once, complete."""
    return ClickLog(tiny_data, [0, 0, 2], offsets_from_lengths([2, 2, 4]), [1, 0, 0, 1, 8, 5, 7, 6],
                    [1, 1, 0, 1, 1, 0, 0, 1])


def test_diagnostics_by_hand(cut_log):
    scores = np.array([0.0, 2.0, 1.0, 5.0, 4.0, 0.5, 0.1, 0.9, 0.3])
    # ranks: query 0 -> row1: 1, row2: 2, row0: 3 ; query 2 -> row7: 1, row5: 2, row8: 3, row6: 4
    with pytest.warns(EstimateWarning, match="never showed"):
        est = ips_estimate(cut_log, scores, metric="dcg", n_bootstrap=0)
    # clicked: session 0 row1 (pos 1, w 1), row0 (pos 2, w 2); session 1 row1 (pos 2, w 2);
    #          session 2 row8 (pos 1, w 1), row6 (pos 4, w 4)
    w = np.array([1.0, 2.0, 2.0, 1.0, 4.0])
    assert est.n_clicks == 5 and est.max_weight == 4.0
    assert np.isclose(est.ess, w.sum() ** 2 / (w**2).sum())
    assert np.isclose(est.max_weight_share, 4.0 / w.sum())
    # row 2 (rank 2 of query 0) never shown; query 0 has two sessions, query 2 one
    m = dcg_weight
    mass_q0 = m(1) + m(2) + m(3)
    mass_q2 = m(1) + m(2) + m(3) + m(4)
    assert np.isclose(est.unshown_mass, 2 * m(2) / (2 * mass_q0 + mass_q2))
    assert est.boot_low is None and est.bias_bound == 0.0
    assert any("never showed" in text for text in est.warnings)
    X = np.array([m(1) * 1 + m(3) * 2, m(1) * 2, m(3) * 1 + m(4) * 4])
    assert np.isclose(est.value, X.mean())


def test_bootstrap_intervals(setting):
    data, production, target, clicks, c = setting
    log = simulate_clicks(data, production, clicks, n_passes=200, random_state=18)  # 4000 sessions: blocks
    a = ips_estimate(log, target, metric="dcg", random_state=1)
    b = ips_estimate(log, target, metric="dcg", random_state=1)
    assert (a.boot_low, a.boot_high) == (b.boot_low, b.boot_high)
    for est in (a, snips_estimate(log, target, metric="dcg", random_state=1),
                dr_estimate(log, target, metric="dcg", random_state=1)):
        width, boot_width = est.ci_high - est.ci_low, est.boot_high - est.boot_low
        assert 0.8 < boot_width / width < 1.25, (est.estimator, width, boot_width)
        assert est.boot_low < est.value < est.boot_high
    small = log[:300]  # fewer sessions than blocks: sessions are resampled
    s = ips_estimate(small, target, metric="dcg", random_state=2)
    assert 0.75 < (s.boot_high - s.boot_low) / (s.ci_high - s.ci_low) < 1.33


def test_warnings_say_when_not_to_trust(setting, top5):
    data, production, target, clicks, c = setting
    _, deterministic = top5
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = ips_estimate(deterministic[:40], target, metric="dcg")
    texts = [str(w.message) for w in caught if issubclass(w.category, EstimateWarning)]
    assert any("never showed" in t for t in texts) and any("effective sample size" in t for t in texts)
    assert est.warnings and est.unshown_mass > 0.05
    # a big full-list log: no warning
    log = simulate_clicks(data, production, clicks, n_passes=400, random_state=19)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EstimateWarning)
        assert ips_estimate(log, target, metric="dcg", n_bootstrap=0).warnings == ()


# ----------------------------------------------------------------------------- scorers and report


class _FixedRanker(BaseEstimator):
    def __init__(self, w=None):
        self.w = w

    def fit(self, X, y=None):
        return self

    def predict(self, X):
        return X @ np.linspace(1.0, -0.5, X.shape[1])


def test_scorers_match_estimates_and_run_in_cross_validation(setting, top5):
    data, production, target, clicks, c = setting
    stochastic, _ = top5
    log = stochastic[:600]
    ranker = _FixedRanker()
    pairs = [(clipped_ips_scorer("dcg", clip=0.2), clipped_ips_estimate, {"clip": 0.2}),
             (dr_scorer("dcg", relevance_model=c), dr_estimate, {"relevance_model": c}),
             (policy_aware_scorer("dcg"), policy_aware_estimate, {})]
    for scorer, estimate, kwargs in pairs:
        assert np.isclose(scorer(ranker, log), estimate(log, ranker, metric="dcg", **kwargs).value)
        scores = cross_val_score(ranker, log, groups=log.groups, cv=GroupKFold(3), scoring=scorer)
        assert scores.shape == (3,) and np.all(np.isfinite(scores))
    assert np.isclose(dr_scorer("avg_rank", relevance_model=c)(ranker, log),
                      -dr_estimate(log, ranker, metric="avg_rank", relevance_model=c).value)


def test_validation_report_shows_every_estimator(setting, top5, tmp_path):
    data, production, target, clicks, c = setting
    stochastic, _ = top5
    log = stochastic[:1000]
    report = validation_report({"target": target, "production": production}, log, metrics=("dcg",),
                               true_relevance=c, random_state=0)
    assert report.estimators == tuple(ESTIMATORS)
    md = report.to_markdown()
    for label in ("| IPS |", "| SNIPS |", "| clipped IPS |", "| DR |", "| policy-aware |", "bootstrap",
                  "unshown mass", "bias bound", "max weight share"):
        assert label in md, label
    labels = ("IPS", "SNIPS", "clipped IPS", "DR", "policy-aware")
    assert sum(md.count(f"| target | {label} |") for label in labels) == len(ESTIMATORS)
    html = report.to_html()
    assert html.count('<tr><td class="text">target</td><td class="text">') == len(ESTIMATORS)
    assert "policy-aware" in html and html.count("data:image/png;base64,") == 1
    fig = report.plot(tmp_path / "report.png")
    # every ranker's estimate beside each candidate's improvement over the logging policy
    assert (tmp_path / "report.png").stat().st_size > 0 and len(fig.axes) == 2
    row = report.rows[0]["dcg"]
    assert np.isclose(row["policy_aware"].value, policy_aware_estimate(log, target, metric="dcg").value)
    assert report.best("dcg", "policy_aware") in ("target", "production")
    # without a logging policy the default report leaves policy-aware out
    bare = ClickLog(data, log.session_query, log.session_offsets, log.docs, log.clicks)
    assert "policy_aware" not in validation_report({"t": target}, bare, metrics=("dcg",)).estimators
    with pytest.raises(ValueError, match="non-empty"):
        validation_report({}, log)
    with pytest.raises(ValueError, match="unknown estimators"):
        validation_report({"t": target}, log, estimators=("ips", "magic"))


# ----------------------------------------------------------------------------- bad input


def test_bad_input_gives_clear_errors(setting, top5, tiny_data):
    data, production, target, clicks, c = setting
    stochastic, _ = top5
    log = stochastic[:200]
    bare = ClickLog(data, log.session_query, log.session_offsets, log.docs, log.clicks)
    with pytest.raises(ValueError, match="logging policy"):
        policy_aware_estimate(bare, target)
    # a user-supplied policy works on the bare log and matches the log's own
    P = log.logging_policy.position_probabilities(data)
    assert np.isclose(policy_aware_estimate(bare, target, logging_policy=P).value,
                      policy_aware_estimate(log, target).value)
    # a policy that never shows a row the log shows
    with pytest.raises(ValueError, match="does not match"):
        policy_aware_estimate(bare, target, logging_policy=PositionProbabilities(np.zeros((data.n_docs, 5))))
    # relevance models of the wrong shape
    with pytest.raises(ValueError, match="shape"):
        dr_estimate(log, target, relevance_model=c[:-1])
    with pytest.raises(ValueError, match="shape"):
        dr_estimate(log, target, relevance_model=lambda X: np.c_[X[:, 0], X[:, 1]])

    class TwoOutputs(Ridge):
        def predict(self, X):
            return np.c_[super().predict(X), super().predict(X)]

    with pytest.raises(ValueError, match="shape"):
        dr_estimate(log, target, relevance_model=TwoOutputs())
    with pytest.raises(ValueError, match="non-finite"):
        dr_estimate(log, target, relevance_model=np.full(data.n_docs, np.nan))
    fit = fit_relevance(log, random_state=0)
    with pytest.raises(ValueError, match="another log"):
        dr_estimate(stochastic[200:400], target, relevance_model=fit)
    # propensities of zero
    zero = lambda positions: np.zeros(len(positions))  # noqa: E731
    for name, estimate in ESTIMATORS.items():
        with pytest.raises(ValueError, match=r"\(0, 1\]"):
            estimate(log, target, propensity=zero)
    with pytest.raises(ValueError):
        TrustBiasPropensity([1.0, 0.0])
    # scalar options
    with pytest.raises(ValueError, match="clip"):
        clipped_ips_estimate(log, target, clip=0.0)
    with pytest.raises(TypeError, match="clip"):
        clipped_ips_estimate(log, target, clip="0.1")
    with pytest.raises(ValueError, match="n_bootstrap"):
        ips_estimate(log, target, n_bootstrap=-1)
    with pytest.raises(ValueError, match="n_folds"):
        dr_estimate(log, target, n_folds=1)
    with pytest.raises(TypeError, match="ClickLog"):
        dr_estimate(log.to_frame(), target)
