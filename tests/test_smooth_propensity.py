"""The "smooth" propensity estimate: its likelihood, recovery, intervals that widen where the log is silent,
and the one uncertainty path (replicates, failures, percentile intervals) that comparisons use."""

import warnings

import numpy as np
import pytest

from click_sim.raw import simulate_raw_events
from counterfactual_ltr import ClickLog, estimate_propensities
from counterfactual_ltr.propensity._methods import _Impressions
from counterfactual_ltr.propensity._smooth import _MovingDocuments, held_out_conditional_loglik
from counterfactual_ltr.propensity.estimation import reestimate
from counterfactual_ltr.propensity.uncertainty import (failed_curves, percentile_interval, percentile_spread,
                                                       replicate_models)


def _raw_log(seed, *, eta=1.2, drift=0.5, pages=2000, queries=300, candidates=10):
    theta = np.arange(1, 11) ** -eta
    frame, _ = simulate_raw_events(pages, n_queries=queries, theta=theta, drift=drift, n_candidates=candidates,
                                   random_state=seed)
    return ClickLog.from_events(frame, session="session"), theta


def _estimate(log, method="smooth", **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate_propensities(log, method, **kwargs)


def test_gradient_and_hessian_match_finite_differences():
    log, _ = _raw_log(0, pages=300, queries=40)
    moving = _MovingDocuments(_Impressions(log, 10, log.intervention == 0))
    rng = np.random.default_rng(1)
    w = rng.uniform(0.5, 2.0, moving.n_docs)
    x = np.r_[rng.normal(-1.0, 0.5, 9), 0.8]
    f, g, hess, _ = moving.objective(x, w, 0.3)
    h = 1e-6
    num_g = np.array([(moving.objective(x + h * e, w, 0.3)[0] - moving.objective(x - h * e, w, 0.3)[0]) / (2 * h)
                      for e in np.eye(10)])
    num_h = np.array([(moving.objective(x + h * e, w, 0.3)[1] - moving.objective(x - h * e, w, 0.3)[1]) / (2 * h)
                      for e in np.eye(10)])
    np.testing.assert_allclose(g, num_g, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hess, num_h, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("eta, drift", [(0.7, 0.3), (1.6, 1.0)])
def test_recovers_examination_other_than_one_over_rank(eta, drift):
    log, theta = _raw_log(2, eta=eta, drift=drift)
    est = _estimate(log, n_bootstrap=100, random_state=0)
    assert np.max(np.abs(np.log(est.relative_ / theta))) < 0.25
    assert np.all((est.lower_ <= est.relative_) & (est.relative_ <= est.upper_))
    assert abs(est.eta_ - eta) < 0.25


def test_intervals_cover_the_truth_over_logs():
    hits = []
    for seed in range(12):
        log, theta = _raw_log(100 + seed, eta=1.2, drift=0.3, pages=1000, queries=150)
        est = _estimate(log, n_bootstrap=100, random_state=seed)
        hits.append((est.lower_[1:] <= theta[1:]) & (theta[1:] <= est.upper_[1:]))
    assert np.mean(hits) >= 0.85


def _frozen_tail_log(seed=0, pages=3000):
    """Positions 1-4 rotate their documents; positions 5-6 always show the same two documents of a query."""
    rng = np.random.default_rng(seed)
    n_queries = 60
    alpha = rng.uniform(0.1, 0.8, (n_queries, 6))
    theta = np.arange(1, 7) ** -1.0
    q = rng.integers(0, n_queries, pages)
    top = np.array([rng.permutation(4) for _ in range(pages)])
    order = np.c_[top, np.full((pages, 1), 4), np.full((pages, 1), 5)]
    # one page in a hundred moves the fifth document up: position 5 is identified by a handful of clicks
    rare = rng.random(pages) < 0.01
    order[rare, 0], order[rare, 4] = order[rare, 4], order[rare, 0].copy()
    docs = order.ravel()
    queries = np.repeat(q, 6)
    positions = np.tile(np.arange(1, 7), pages)
    clicks = rng.random(docs.size) < theta[positions - 1] * alpha[queries, docs]
    return ClickLog.from_events({"query": queries, "doc": docs, "position": positions, "click": clicks,
                                 "page": np.repeat(np.arange(pages), 6)}, session="page"), theta


def test_a_position_the_log_barely_identifies_borrows_and_has_a_wide_interval():
    log, theta = _frozen_tail_log()
    with pytest.warns(Warning, match="weakly identified"):
        est = estimate_propensities(log, "smooth", max_position=6, n_bootstrap=200, random_state=0)
    width = np.log(est.upper_ / est.lower_)
    assert est.borrowed_[5] > 0.5 > est.borrowed_[1]
    assert width[4] > 2 * width[1] and width[5] > 2 * width[1]
    assert np.all((est.lower_ <= theta) & (theta <= est.upper_))


def test_no_moving_document_is_an_error_that_says_why():
    rng = np.random.default_rng(0)
    log = ClickLog.from_events({"query": np.zeros(400, int), "doc": np.tile(np.arange(4), 100),
                                "position": np.tile(np.arange(1, 5), 100), "click": rng.random(400) < 0.3})
    with pytest.raises(ValueError, match="no \\(query, document\\) was shown at two positions"):
        estimate_propensities(log, "smooth", max_position=4)


def test_reestimate_with_unit_weights_is_the_estimate_and_same_seed_same_replicates():
    log, _ = _raw_log(3, pages=600, queries=80)
    a = _estimate(log, n_bootstrap=30, random_state=5)
    b = _estimate(log, n_bootstrap=30, random_state=5)
    np.testing.assert_array_equal(a.bootstrap_, b.bootstrap_)
    present = (np.bincount(log.session_query, minlength=log.n_queries) > 0).astype(float)
    np.testing.assert_allclose(reestimate(a, log, present).relative_, a.relative_, rtol=1e-8)


def test_held_out_score_prefers_the_true_curve_to_a_flat_or_steeper_one():
    log, theta = _raw_log(4)
    per_query, clicks = held_out_conditional_loglik(log, 10, theta)
    assert clicks > 0
    for wrong in (np.ones(10), theta ** 2):
        assert per_query.sum() > held_out_conditional_loglik(log, 10, wrong)[0].sum()


def test_failed_replicates_count_beyond_both_ends():
    x = np.linspace(-1, 1, 201)
    base = percentile_interval(x, 0.95)
    assert percentile_interval(np.r_[x, 1e9, -1e9], 0.95) == pytest.approx(base, abs=0.03)
    lo, hi = percentile_interval(x, 0.95, n_failed=3)
    assert lo < base[0] and hi > base[1] and np.isfinite(lo) and np.isfinite(hi)
    assert np.isinf(percentile_interval(x, 0.95, n_failed=10)[0])
    assert percentile_spread(np.r_[x, 1e12]) < 1.0
    assert failed_curves([[1.0, 0.4, 0.2], [1.0, 1.0, 0.3]], "pbm").tolist() == [False, True]
    assert failed_curves([[1.0, 1.0, 0.3]], "harvest").tolist() == [False]


def test_a_degenerate_replicate_does_not_blow_up_the_comparison():
    from counterfactual_ltr import RankingDataset
    from counterfactual_ltr.evaluation import compare_rankers
    from counterfactual_ltr.propensity import EstimatedPropensity

    frame, sim = simulate_raw_events(800, n_queries=60, theta=np.arange(1, 11) ** -1.0, drift=0.5,
                                     random_state=6)
    raw = ClickLog.from_events(frame, session="session")
    Q, M = sim["alpha"].shape
    data = RankingDataset.from_frame({"query": np.repeat(sim["query_ids"], M), "doc": sim["doc_ids"].ravel(),
                                      "f0": np.log(sim["alpha"]).ravel()})
    log = raw.with_data(data, missing="drop_rows")
    truth = np.arange(1, 11) ** -1.0
    rng = np.random.default_rng(0)
    replicates = truth * np.exp(rng.normal(0, 0.1, (200, 10)))
    sane = EstimatedPropensity(truth, bootstrap=replicates, method="harvest")
    broken = replicates.copy()
    broken[:3, 9] = 1e-9                                      # three replicates with a vanishing position 10
    wild = EstimatedPropensity(truth, bootstrap=broken, method="harvest")
    results = [compare_rankers(log, data.X[:, 0], propensity=p, n_bootstrap=200, random_state=0, estimator="ips")
               for p in (sane, wild)]
    width = [c.ci_high - c.ci_low for c in results]
    assert width[1] < 1.5 * width[0]
    assert "replicates of its own log" in results[1].propensity_uncertainty or "own log" in \
        results[1].propensity_uncertainty


def test_replicates_at_a_bound_or_a_floor_count_as_failed():
    """pbm replicates at theta = 1 below position 1, and any replicate below 1e-6, fail; the rest are models."""
    from counterfactual_ltr.propensity import EstimatedPropensity

    log, _ = _raw_log(7, pages=300, queries=40)
    rows = np.array([[1.0, 0.5, 0.3], [1.0, 1.0, 0.3], [1.0, 0.5, 1e-8], [1.0, 0.4, 0.2]])
    weights = np.ones((4, log.n_queries))
    for method, failed in (("pbm", [1, 2]), ("harvest", [2])):
        model = EstimatedPropensity([1.0, 0.5, 0.3], method=method, bootstrap=rows)   # from another log
        reps = replicate_models(model, log, weights, random_state=0)
        assert reps.how == "replicates of its own log"
        assert [i for i, m in enumerate(reps.models) if m is None] == failed
    est = _estimate(log, "harvest", max_position=5, n_bootstrap=20, random_state=0)
    assert replicate_models(est, log, weights, random_state=0).how == "re-estimated"

def test_tempered_moves_each_position_towards_its_interval_upper_end():
    from counterfactual_ltr.propensity import EstimatedPropensity

    est = EstimatedPropensity([1.0, 0.5, 0.1], lower=[1.0, 0.45, 0.01], upper=[1.0, 0.55, 0.9], method="harvest")
    np.testing.assert_allclose(est.tempered(0).relative_, est.relative_)
    np.testing.assert_allclose(est.tempered(1).relative_, [1.0, 0.55, 0.9])
    half = est.tempered(0.5).relative_
    np.testing.assert_allclose(half, np.sqrt(est.relative_ * np.array([1.0, 0.55, 0.9])))
    assert half[1] / est.relative_[1] < 1.1 < half[2] / est.relative_[2]      # the narrow position barely moves
    with pytest.raises(ValueError, match="strength"):
        est.tempered(1.5)
    with pytest.raises(ValueError, match="no interval"):
        EstimatedPropensity([1.0, 0.5]).tempered(0.5)


def _scored_world(seed=8):
    from counterfactual_ltr import RankingDataset

    frame, sim = simulate_raw_events(1500, n_queries=80, theta=np.arange(1, 11) ** -1.2, drift=0.5,
                                     random_state=seed)
    raw = ClickLog.from_events(frame, session="session")
    Q, M = sim["alpha"].shape
    noise = np.random.default_rng(seed).gumbel(size=(Q, M))
    data = RankingDataset.from_frame({"query": np.repeat(sim["query_ids"], M), "doc": sim["doc_ids"].ravel(),
                                      "f0": np.log(sim["alpha"]).ravel(), "f1": noise.ravel()})
    return raw, raw.with_data(data, missing="drop_rows"), data


def test_quantile_scorer_is_the_paired_improvement_over_the_logged_rankings():
    from counterfactual_ltr import snips_scorer
    from counterfactual_ltr.evaluation import compare_rankers, snips_estimate
    from counterfactual_ltr.propensity import EstimatedPropensity

    raw, log, data = _scored_world()
    est = _estimate(raw, n_bootstrap=40, random_state=0)
    flat = EstimatedPropensity(est.relative_, est.lower_, est.upper_, method="smooth",
                               bootstrap=np.repeat(est.relative_[None], 40, 0))
    ranker = data.X[:, 0] + data.X[:, 1]
    difference = compare_rankers(log, ranker, baseline="logging", value="relevance", propensity=flat,
                                 n_bootstrap=0).difference
    assert snips_scorer(propensity=flat)(_Scores(ranker), log) == pytest.approx(difference, rel=1e-9)
    plain = snips_scorer(propensity=est, propensity_quantile=None)(_Scores(ranker), log)
    assert plain == pytest.approx(snips_estimate(log, ranker, propensity=est, n_bootstrap=0).value)
    spread = snips_scorer(propensity=est)(_Scores(ranker), log)
    point = snips_scorer(propensity=est, propensity_quantile=0.5)(_Scores(ranker), log)
    assert spread < point                         # the low quantile over replicates is below their middle
    with pytest.raises(ValueError, match="propensity_quantile"):
        snips_scorer(propensity=est, propensity_quantile=0.7)


class _Scores:
    """A fixed ranker: ``predict`` returns the given scores."""

    def __init__(self, scores):
        self.scores = scores

    def predict(self, X):
        return self.scores


def test_impression_features_by_hand_and_refusals():
    import pandas as pd

    from counterfactual_ltr.logs import impression_features

    train = pd.DataFrame({"page": [1, 1, 2, 2, 3, 3], "query": ["q", "q", "q", "q", "r", "r"],
                          "doc": ["a", "b", "b", "c", "a", "b"], "position": [1, 2, 1, 2, 1, 2]})
    test = pd.DataFrame({"page": [1, 1], "query": ["q", "q"], "doc": ["a", "c"], "position": [2, 1]})
    table = impression_features(train, test).set_index(["query", "doc"])
    # q has three pages (two in train, one in test: page 1 of each file is a page of its own)
    assert table.loc[("q", "a"), "page_share"] == pytest.approx(2 / 3)
    assert table.loc[("q", "a"), "neg_position"] == pytest.approx(-1.5)
    assert table.loc[("q", "b"), "log_shown"] == pytest.approx(np.log(3))
    assert table.loc[("r", "b"), "page_share"] == 1.0
    with pytest.raises(ValueError, match="lacks the columns \\['page'\\]"):
        impression_features(train.drop(columns="page"))
    with pytest.raises(ValueError, match="at least one"):
        impression_features()


def test_every_estimate_propagates_or_says_why():
    """trust_em's replicates, a cascade model's reason, a file larger than a megabyte read back."""
    from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
    from counterfactual_ltr.evaluation import compare_rankers

    data = make_ranking(n_queries=60, random_state=0)
    rankers = [data.X[:, 0], data.X[:, 1], data.X[:, 0] + data.X[:, 2]]
    log = simulate_clicks(data, rankers, PositionBasedClickModel(eta=1.0, eps_minus=0.1), n_passes=20,
                          random_state=0)
    trust = _estimate(log, "trust_em", max_position=5, n_bootstrap=40, random_state=0)
    c = compare_rankers(log, data.X[:, 1], propensity=trust, n_bootstrap=200, random_state=0)
    assert "replicates on its own log" in c.propensity_uncertainty and np.isfinite(c.ci_low)
    dbn = _estimate(log, "dbn")
    c = compare_rankers(log, data.X[:, 1], propensity=dbn, n_bootstrap=200, random_state=0, value="relevance")
    assert c.propensity_uncertainty.startswith("treated as known (it is a cascade model")


def test_a_propensity_file_over_a_megabyte_loads(tmp_path):
    import json

    from counterfactual_ltr.model_files.persistence import load_propensity, propensity_to_dict

    est = _estimate(_raw_log(9, pages=400, queries=40)[0], n_bootstrap=20, random_state=0)
    text = json.dumps({"propensity": propensity_to_dict(est)}, indent=1)
    path = tmp_path / "big.json"
    path.write_text(text + " " * 1_100_000)                  # a cascade model's table of a real log is megabytes
    loaded = load_propensity(str(path))
    np.testing.assert_allclose(loaded.relative_, est.relative_)
    assert loaded.eta_ == pytest.approx(est.eta_)          # smooth's fitted power law, not refitted to the table
    payload = json.loads(text)
    payload["propensity"]["bootstrap"][0][3] = -0.5
    path.write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="finite positive"):
        load_propensity(str(path))
