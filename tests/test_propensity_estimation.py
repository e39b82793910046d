"""Propensity estimation from logs: click models with trust bias, interventions, several loggers,
the four estimators (recovery of a known truth), their bootstrap intervals, and bad input."""

import numpy as np
import pytest

from click_sim import (ClickLog, PositionBasedClickModel, StochasticRanker, SwapIntervention, TopNShuffle,
                       make_ranking, simulate_clicks)
from counterfactual_ltr._segments import offsets_from_lengths, order_within_queries
from counterfactual_ltr.propensity import TrustBiasPropensity, estimate_propensities
from counterfactual_ltr.propensity_estimation import EstimatedPropensity, EstimatedTrustBias


@pytest.fixture(scope="module")
def ranked():
    data, w = make_ranking(n_queries=300, n_docs=(10, 20), random_state=0, return_ranker=True)
    return data, data.X @ w


# ----------------------------------------------------------------------------- click model


def test_click_model_per_position_forms():
    theta = [1.0, 0.7, 0.2]
    model = PositionBasedClickModel(eta=5.0, eps_minus=[0.3, 0.2, 0.1], eps_plus=[1.0, 0.9, 0.8], examination=theta)
    r = np.array([1, 2, 3, 4, 1, 2, 3, 4])
    rel = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    expected = [1.0, 0.7 * 0.9, 0.2 * 0.8, 0.2 * 0.8, 0.3, 0.7 * 0.2, 0.2 * 0.1, 0.2 * 0.1]
    np.testing.assert_allclose(model.click_probability(r, rel), expected)
    assert model.has_trust_bias
    trust = model.trust_model()
    np.testing.assert_allclose(trust.alpha([1, 2, 3]), [0.7, 0.7 * 0.7, 0.2 * 0.7])
    np.testing.assert_allclose(model.propensity_model()([1, 2, 3, 9]), [1.0, 0.7, 0.2, 0.2])
    plain = PositionBasedClickModel(2.0, 0.1, 1.0)
    assert not plain.has_trust_bias
    np.testing.assert_allclose(plain.examination_curve(3), [1, 1 / 4, 1 / 9])


@pytest.mark.parametrize("kwargs, match", [
    ({"eps_minus": [0.1, 1.2]}, "eps_minus must lie in"),
    ({"eps_plus": -0.1}, "eps_plus must lie in"),
    ({"examination": [1.0, 0.0]}, "TabularPropensity values"),
    ({"eps_minus": []}, "non-empty"),
])
def test_click_model_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PositionBasedClickModel(**kwargs)


# ----------------------------------------------------------------------------- simulate_clicks


def _old_simulate(data, scores, model, n_passes, seed, max_shown=None):
    """The single-ranker simulator as it was before loggers and interventions."""
    order = order_within_queries(scores, data.query_offsets)
    lengths = data.query_lengths
    positions = np.arange(data.n_docs) - np.repeat(data.query_offsets[:-1], lengths) + 1
    if max_shown is not None:
        keep = positions <= max_shown
        order, positions = order[keep], positions[keep]
        lengths = np.minimum(lengths, max_shown)
    prob = model.click_probability(positions, data.y[order] >= 1)
    rng = np.random.default_rng(seed)
    clicks = np.concatenate([rng.random(len(order)) < prob for _ in range(n_passes)])
    return np.tile(order, n_passes), clicks, offsets_from_lengths(np.tile(lengths, n_passes))


@pytest.mark.parametrize("max_shown", [None, 4])
def test_simulate_keeps_single_ranker_stream(ranked, max_shown):
    data, scores = ranked
    model = PositionBasedClickModel(0.8, 0.2, 0.9)
    log = simulate_clicks(data, scores, model, 3, 11, max_shown=max_shown)
    docs, clicks, offsets = _old_simulate(data, scores, model, 3, 11, max_shown)
    np.testing.assert_array_equal(log.docs, docs)
    np.testing.assert_array_equal(log.clicks, clicks)
    np.testing.assert_array_equal(log.session_offsets, offsets)
    assert not log.logger.any() and not log.intervention.any()


def test_several_loggers_share_and_orders(ranked):
    data, scores = ranked
    rankers = [scores, -scores, data.X[:, 0]]
    log = simulate_clicks(data, rankers, n_passes=20, random_state=0, shares=[0.5, 0.3, 0.2])
    share = np.bincount(log.logger, minlength=3) / log.n_sessions
    np.testing.assert_allclose(share, [0.5, 0.3, 0.2], atol=0.01)
    for index, scores_i in enumerate(rankers):
        order = order_within_queries(scores_i, data.query_offsets)
        sessions = np.flatnonzero(log.logger == index)[:50]
        for s in sessions:
            q = log.session_query[s]
            shown = log.docs[log.session_offsets[s]:log.session_offsets[s + 1]]
            np.testing.assert_array_equal(shown, order[data.query_offsets[q]:data.query_offsets[q + 1]])
    again = simulate_clicks(data, rankers, n_passes=20, random_state=0, shares=[0.5, 0.3, 0.2])
    assert again.equals(log)
    with pytest.raises(ValueError, match="one share per ranker"):
        simulate_clicks(data, rankers, shares=[1.0, 1.0])


def test_swap_intervention(ranked):
    data, scores = ranked
    log = simulate_clicks(data, scores, n_passes=20, random_state=1, intervention=SwapIntervention(0.4, 6))
    order = order_within_queries(scores, data.query_offsets)
    codes = log.intervention
    assert abs(np.mean(codes > 0) - 0.4) < 0.02
    k = codes[codes > 0]
    assert k.min() == 2 and k.max() == 6
    counts = np.bincount(k, minlength=7)[2:]
    assert np.all(np.abs(counts / counts.sum() - 0.2) < 0.02)  # uniform over 2..6
    for s in np.flatnonzero(codes)[:100]:
        q = log.session_query[s]
        logged = order[data.query_offsets[q]:data.query_offsets[q + 1]].copy()
        kk = codes[s]
        logged[[0, kk - 1]] = logged[[kk - 1, 0]]
        np.testing.assert_array_equal(log.docs[log.session_offsets[s]:log.session_offsets[s + 1]], logged)


def test_top_n_shuffle(ranked):
    data, scores = ranked
    n = 4
    log = simulate_clicks(data, scores, n_passes=40, random_state=2, intervention=TopNShuffle(n, share=0.5))
    order = order_within_queries(scores, data.query_offsets)
    shuffled = np.flatnonzero(log.intervention == -n)
    assert abs(shuffled.size / log.n_sessions - 0.5) < 0.02
    top_position = []
    for s in shuffled:
        q = log.session_query[s]
        logged = order[data.query_offsets[q]:data.query_offsets[q + 1]]
        shown = log.docs[log.session_offsets[s]:log.session_offsets[s + 1]]
        assert sorted(shown[:n]) == sorted(logged[:n])
        np.testing.assert_array_equal(shown[n:], logged[n:])
        top_position.append(int(np.flatnonzero(shown == logged[0])[0]))
    freq = np.bincount(top_position, minlength=n) / len(top_position)
    assert np.all(np.abs(freq - 1 / n) < 0.03)  # the logger's top document lands anywhere in the top n
    short = simulate_clicks(data, scores, n_passes=2, random_state=2, max_shown=3, intervention=TopNShuffle(n))
    assert set(short.intervention.tolist()) == {-3}  # a shuffle deeper than the list covers what is shown


def test_log_columns_kept_through_selection_frames_and_parquet(ranked, tmp_path):
    data, scores = ranked
    log = simulate_clicks(data, [scores, -scores], n_passes=2, random_state=3, intervention=SwapIntervention(0.5))
    sub = log[np.arange(0, log.n_sessions, 3)]
    np.testing.assert_array_equal(sub.logger, log.logger[::3])
    np.testing.assert_array_equal(sub.intervention, log.intervention[::3])
    frame = log.to_frame()
    assert {"logger", "intervention"} <= set(frame.columns)
    assert ClickLog.from_frame(frame, data).equals(log)
    log.to_parquet(tmp_path / "log.parquet")
    assert ClickLog.read_parquet(tmp_path / "log.parquet", data).equals(log)
    bare = ClickLog.from_frame(frame.drop(columns=["logger", "intervention"]), data)
    assert not bare.logger.any() and not bare.intervention.any()
    broken = frame.copy()
    broken.loc[broken.index[1], "logger"] = 7  # second row of session 0 disagrees with the first
    with pytest.raises(ValueError, match="constant within a session"):
        ClickLog.from_frame(broken, data)
    with pytest.raises(ValueError, match="intervention code"):
        ClickLog(data, [0], [0, 2], data.query_offsets[0] + np.array([0, 1]), [0, 0], intervention=[5])


# ----------------------------------------------------------------------------- recovery of a known truth


def _max_rel_error(model, truth):
    truth = np.asarray(truth)
    return float(np.max(np.abs(model.relative_ / (truth / truth[0]) - 1)))


@pytest.mark.parametrize("curve", [1.0 / np.arange(1, 7) ** 0.5, np.array([1.0, 0.9, 0.45, 0.4, 0.15, 0.12])])
def test_swap_recovers_examination(ranked, curve):
    data, scores = ranked
    model = PositionBasedClickModel(examination=curve, eps_minus=0.1)
    log = simulate_clicks(data, scores, model, 100, 0, intervention=SwapIntervention(0.5, 6))
    est = estimate_propensities(log, "swap", max_position=6, n_bootstrap=100, random_state=0)
    assert isinstance(est, EstimatedPropensity)
    assert _max_rel_error(est, curve) < 0.08
    assert np.all(est.lower_ <= est.relative_) and np.all(est.relative_ <= est.upper_)


# eta = 2: few clicks at the low positions, where a prior counted in (query, document) pairs rather than
# impressions pulled the estimate towards 1 by 15 % (position 7)
@pytest.mark.parametrize("eta, tolerance", [(1.0, 0.08), (2.0, 0.12)])
def test_harvest_recovers_examination_without_randomisation(ranked, eta, tolerance):
    data, scores = ranked
    curve = 1.0 / np.arange(1, 9) ** eta
    rankers = [scores, scores + data.X[:, 0], scores + data.X[:, 1]]
    log = simulate_clicks(data, rankers, PositionBasedClickModel(examination=curve), 100, 0)
    assert not log.intervention.any()
    est = estimate_propensities(log, "harvest", max_position=8, n_bootstrap=50, random_state=0)
    assert _max_rel_error(est, curve) < tolerance
    assert abs(est.eta_ - eta) < 0.1 * eta


def test_em_recovers_examination_from_one_logger(ranked):
    data, scores = ranked
    curve = 1.0 / np.arange(1, 7)
    model = PositionBasedClickModel(examination=curve, eps_minus=0.1)
    log = simulate_clicks(data, scores, model, 100, 0)
    est = estimate_propensities(log, "em", max_position=6, n_bootstrap=0)
    assert est.lower_ is None
    # A deterministic logger shows every document at one position: the logistic relevance model,
    # which cannot follow gamma(x) = eps- + (eps+ - eps-) P(R | x) exactly, leaves about 10% error
    # (click-rate ratios, which ignore relevance, are off by far more).
    assert _max_rel_error(est, curve) < 0.15
    naive = np.bincount(log.positions[log.clicks])[1:7] / np.bincount(log.positions)[1:7]
    assert np.max(np.abs(naive / naive[0] / curve - 1)) > 0.3
    # One stochastic logger shows each document at several positions, which identifies theta.
    varied = simulate_clicks(data, StochasticRanker(scores, 1.0), model, 100, 0)
    assert _max_rel_error(estimate_propensities(varied, "em", max_position=6, n_bootstrap=0), curve) < 0.05


def test_em_is_the_fixed_point_of_regression_em(ranked):
    """The built-in Newton fit equals EM with scikit-learn's LogisticRegression(C=1) run to convergence."""
    from sklearn.linear_model import LogisticRegression

    data, scores = ranked
    log = simulate_clicks(data, StochasticRanker(scores, 1.0), PositionBasedClickModel(1.0, 0.1), 20, 3)
    fast = estimate_propensities(log, "em", max_position=5, n_bootstrap=0)
    reference = estimate_propensities(log, "em", max_position=5, n_bootstrap=0, tol=1e-10, max_iter=5000,
                                      relevance_model=LogisticRegression(C=1.0, tol=1e-12, max_iter=10_000))
    np.testing.assert_allclose(fast.relative_, reference.relative_, rtol=1e-5)
    # ... and a different relevance model gives a different estimate (the option is used).
    ridge_heavy = estimate_propensities(log, "em", max_position=5, n_bootstrap=0,
                                        relevance_model=LogisticRegression(C=1e-4))
    assert np.max(np.abs(ridge_heavy.relative_ / fast.relative_ - 1)) > 1e-3


def test_trust_em_recovers_eps(ranked):
    data, scores = ranked
    K = 6
    r = np.arange(1, K + 1)
    theta, minus = 1.0 / r, 0.4 / r ** 0.5
    model = PositionBasedClickModel(examination=theta, eps_minus=minus, eps_plus=0.9)
    log = simulate_clicks(data, scores, model, 150, 0)
    est = estimate_propensities(log, "trust_em", max_position=K, n_bootstrap=30, random_state=0)
    assert isinstance(est, EstimatedTrustBias) and isinstance(est, TrustBiasPropensity)
    np.testing.assert_allclose(est.eps_plus, 0.9, atol=0.05)
    np.testing.assert_allclose(est.eps_minus, minus, atol=0.05)
    assert _max_rel_error(est, theta) < 0.1
    truth = model.trust_model()
    np.testing.assert_allclose(est.alpha(r), truth.alpha(r), atol=0.05)
    np.testing.assert_allclose(est.beta(r), truth.beta(r), atol=0.03)
    lo, hi = est.intervals_["eps_minus"]
    assert np.all(lo <= est.eps_minus + 1e-12) and np.all(est.eps_minus <= hi + 1e-12)


def test_estimate_is_a_propensity_model(ranked):
    data, scores = ranked
    from counterfactual_ltr.estimators import SVMPropRank

    log = simulate_clicks(data, scores, PositionBasedClickModel(1.0), 30, 0, intervention=SwapIntervention(0.5, 5))
    est = estimate_propensities(log, "swap", max_position=5, n_bootstrap=20, random_state=0)
    q = est(np.arange(1, 12))
    assert np.all(np.diff(q[4:]) < 0)  # the fitted power law continues the table beyond K
    np.testing.assert_allclose(q[9] / q[4], 0.5 ** est.eta_)
    first = np.flatnonzero((log.intervention == 0) & (log.session_query < 40))
    assert SVMPropRank(propensity=est).fit(log[first]).coef_.shape == (data.n_features,)
    again = estimate_propensities(log, "swap", max_position=5, n_bootstrap=20, random_state=0)
    np.testing.assert_array_equal(again.bootstrap_, est.bootstrap_)
    import matplotlib

    matplotlib.use("Agg")
    assert est.plot(truth=PositionBasedClickModel(1.0).propensity_model()) is not None


# ----------------------------------------------------------------------------- intervals


@pytest.mark.parametrize("method", ["swap", "harvest"])
def test_intervals_cover_the_truth(method):
    """95% bootstrap intervals cover theta_r/theta_1 in 90-99% of 200 simulations (positions 2-4 pooled)."""
    data, w = make_ranking(n_queries=150, n_docs=(6, 12), random_state=5, return_ranker=True)
    K = 4
    model = PositionBasedClickModel(1.0, eps_minus=0.1)
    truth = model.examination_curve(K)
    scores = data.X @ w
    if method == "swap":
        rankers, intervention = scores, SwapIntervention(0.5, K)
    else:
        rankers, intervention = [scores, scores + data.X[:, 0], scores + data.X[:, 1]], None
    covered = []
    for seed in range(200):
        log = simulate_clicks(data, rankers, model, 20, seed, intervention=intervention)
        est = estimate_propensities(log, method, max_position=K, n_bootstrap=200, random_state=seed)
        covered.append((est.lower_[1:] <= truth[1:]) & (truth[1:] <= est.upper_[1:]))
    coverage = np.mean(covered)
    assert 0.90 <= coverage <= 0.99, coverage


@pytest.mark.slow
@pytest.mark.parametrize("method", ["em", "trust_em"])
def test_em_intervals_cover_the_truth(method):
    """Coverage of the EM methods' 95% intervals in 80 simulations where their models hold.

    "em": one deterministic logger, and a feature that is the relevance indicator, so the logistic
    relevance model can be exact; "trust_em": per-position eps- and a position-independent eps+.
    Positions 2-4 are pooled for theta_r / theta_1, and for trust_em also eps- and eps+ at 1-4.
    """
    from counterfactual_ltr.datasets import RankingDataset

    data, w = make_ranking(n_queries=150, n_docs=(6, 12), random_state=5, return_ranker=True)
    K, r = 4, np.arange(1, 5)
    scores = data.X @ w
    if method == "em":
        data = RankingDataset(np.c_[data.X[:, :3], data.y >= 1], data.y, data.qid)
        model, passes = PositionBasedClickModel(1.0, eps_minus=0.1), 20
    else:
        model, passes = PositionBasedClickModel(examination=1 / r, eps_minus=0.4 / r ** 0.5, eps_plus=0.9), 40
    truth = model.examination_curve(K)
    covered, eps_covered = [], []
    for seed in range(80):         # 80 x 3 positions: the coverage to about +-0.014 (one standard error)
        log = simulate_clicks(data, scores, model, passes, seed)
        est = estimate_propensities(log, method, max_position=K, n_bootstrap=120, random_state=seed)
        covered.append((est.lower_[1:] <= truth[1:]) & (truth[1:] <= est.upper_[1:]))
        if method == "trust_em":
            for name in ("eps_minus", "eps_plus"):
                lo, hi = est.intervals_[name]
                true = getattr(model.trust_model(K), name)
                eps_covered.append((lo <= true) & (true <= hi))
    assert 0.90 <= np.mean(covered) <= 0.99, np.mean(covered)
    if eps_covered:
        assert 0.90 <= np.mean(eps_covered) <= 0.99, np.mean(eps_covered)


# ----------------------------------------------------------------------------- bad input


def test_bad_input_says_what_the_method_needs(ranked):
    data, scores = ranked
    one = simulate_clicks(data, scores, n_passes=5, random_state=0)
    with pytest.raises(ValueError, match="needs sessions with a swap intervention"):
        estimate_propensities(one, "swap")
    with pytest.raises(ValueError, match="is never shown for a \(query, document\) that is also shown at another"):
        estimate_propensities(one, "harvest")
    short = simulate_clicks(data, scores, n_passes=5, random_state=0, max_shown=5)
    with pytest.raises(ValueError, match="position 6 is never shown"):
        estimate_propensities(short, "em", max_position=8)
    small = data.subset(np.arange(5))
    few = simulate_clicks(small, small.X[:, 0], n_passes=1, random_state=0)
    with pytest.raises(ValueError, match="min_clicks"):
        estimate_propensities(few, "trust_em")
    with pytest.raises(ValueError, match="method must be one of"):
        estimate_propensities(one, "magic")
    with pytest.raises(TypeError, match="ClickLog"):
        estimate_propensities(one.to_frame(), "em")
    with pytest.raises(TypeError, match="unknown options"):
        estimate_propensities(one, "em", n_bootsrap=3)
    with pytest.raises(TypeError, match="n_bootstrap must be a real number"):
        estimate_propensities(one, "em", n_bootstrap="3")
    everything = simulate_clicks(data, scores, n_passes=5, random_state=0, intervention=SwapIntervention(1.0))
    with pytest.raises(ValueError, match="without intervention"):
        estimate_propensities(everything, "swap")


def test_reexported_lazily():
    import counterfactual_ltr.propensity as propensity

    assert propensity.estimate_propensities is estimate_propensities
    with pytest.raises(AttributeError):
        propensity.no_such_name


@pytest.mark.parametrize("method", ["pbm", "harvest"])
def test_bootstrap_drawn_in_blocks_gives_the_replicates_of_one_dense_draw(monkeypatch, method):
    """The query weights are drawn a block of replicates at a time (memory); the numbers do not change."""
    from click_sim.raw import simulate_raw_events
    from counterfactual_ltr import ClickLog
    from counterfactual_ltr.propensity_estimation import _BootstrapWeights

    frame, _ = simulate_raw_events(1500, n_queries=80, random_state=5)
    log = ClickLog.from_events(frame, session="session")
    whole = estimate_propensities(log, method, n_bootstrap=6, random_state=2, max_position=5)
    monkeypatch.setattr(_BootstrapWeights, "_BLOCK", 1)      # one replicate per block
    blocked = estimate_propensities(log, method, n_bootstrap=6, random_state=2, max_position=5)
    # (harvest's products of a block differ from the whole matrix's in the last bit: BLAS by shape)
    np.testing.assert_allclose(blocked.bootstrap_, whole.bootstrap_, rtol=1e-13, atol=0)
    rng = np.random.default_rng(2)
    dense = np.zeros((6, log.n_queries))
    dense[:, :] = rng.multinomial(log.n_queries, np.full(log.n_queries, 1.0 / log.n_queries), size=6)
    lazy = _BootstrapWeights(np.random.default_rng(2), 6, log.n_queries, np.arange(log.n_queries))
    np.testing.assert_array_equal(np.array(list(lazy)), dense)
    np.testing.assert_array_equal(lazy[:, [3, 1]], dense[:, [3, 1]])
