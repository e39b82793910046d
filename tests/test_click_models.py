"""Click models and propensities from raw logs (issue 27): PBM EM, natural harvesting, held-out perplexity."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from click_sim.raw import simulate_raw_events
from counterfactual_ltr import ClickLog, estimate_propensities
from counterfactual_ltr.propensity._click_em import pbm_em
from counterfactual_ltr.click_models import DocumentOnlyModel, PositionBasedModel, RankOnlyModel
from counterfactual_ltr.propensity_estimation import IdentificationWarning
from tests.test_raw_logs import requires_trec, trec_dir


@pytest.fixture(scope="module")
def drifting():
    """100K simulated pages (1,000 queries, 10 results, theta = 1/r) with drifting rankings, as a raw log."""
    frame, truth = simulate_raw_events(100_000, random_state=1, shuffle=True)
    log = ClickLog.from_events(frame, session="session")
    test = np.random.default_rng(0).random(len(log)) < 0.2
    return log, log[~test], log[test], truth


def test_pbm_em_likelihood_never_decreases_and_matches_the_exact_mle_on_a_tiny_problem():
    rng = np.random.default_rng(3)
    row, k = np.repeat(np.arange(6), 3), np.tile([1, 2, 3], 6)
    n = rng.integers(5, 40, size=18).astype(float)
    c = rng.binomial(n.astype(int), 0.6 / k * rng.uniform(0.2, 1, 18)).astype(float)
    lls = [pbm_em(row, k, n, c, 6, 3, prior_strength=0.0, max_iter=it, tol=1e-300)["loglik"] for it in range(2, 60, 4)]
    assert np.all(np.diff(lls) >= -1e-12)
    fit = pbm_em(row, k, n, c, 6, 3, prior_strength=0.0, max_iter=20000, tol=1e-14)
    # At the MLE the gradient of the log-likelihood in (theta, alpha) vanishes where both lie inside (0, 1).
    p = fit["theta"][k - 1] * fit["alpha"][row]
    score = c / p - (n - c) / (1 - p)
    g_theta = np.bincount(k - 1, weights=score * fit["alpha"][row])
    inside = fit["theta"] < 1 - 1e-6
    assert np.allclose(g_theta[inside], 0, atol=1e-3)
    g_alpha = np.bincount(row, weights=score * fit["theta"][k - 1])
    assert np.allclose(g_alpha[fit["alpha"] < 1 - 1e-6], 0, atol=1e-3)


def test_pbm_recovers_theta_by_monte_carlo():
    """Plain EM (no prior) on many impressions per pair: theta_r / theta_1 within 3 % of the truth."""
    rng = np.random.default_rng(5)
    theta = np.array([1.0, 0.6, 0.4, 0.3])
    alpha = rng.uniform(0.1, 0.9, 200)
    row, k = np.repeat(np.arange(200), 4), np.tile([1, 2, 3, 4], 200)
    n = np.full(800, 400.0)
    c = rng.binomial(400, theta[k - 1] * alpha[row]).astype(float)
    fit = pbm_em(row, k, n, c, 200, 4, prior_strength=0.0, max_iter=5000, tol=1e-12)
    np.testing.assert_allclose(fit["theta"] / fit["theta"][0], theta, rtol=0.03)


def test_position_based_model_beats_both_baselines_on_drifting_rankings(drifting):
    _, train, test, _ = drifting
    pbm = PositionBasedModel().fit(train)
    rank = RankOnlyModel().fit(train).perplexity(test)
    doc = DocumentOnlyModel().fit(train).perplexity(test)
    held_out = pbm.perplexity(test)
    assert held_out < rank and held_out < doc, (held_out, rank, doc)
    assert pbm.log_likelihood(test) > RankOnlyModel().fit(train).log_likelihood(test)
    by_position = pbm.perplexity(test, by_position=True)
    assert by_position.shape == (10,) and np.isclose(by_position.mean(), held_out)


def test_the_prior_keeps_em_from_overfitting(drifting):
    _, train, test, _ = drifting
    plain = PositionBasedModel(prior_strength=0.0).fit(train)
    prior = PositionBasedModel().fit(train)
    assert prior.perplexity(test) < plain.perplexity(test)
    assert plain.perplexity(train) < prior.perplexity(train)   # what overfitting means


@pytest.mark.parametrize("method", ["pbm", "harvest"])
def test_raw_log_methods_recover_theta_within_ten_percent(drifting, method):
    log, _, _, truth = drifting
    est = estimate_propensities(log, method, n_bootstrap=5, random_state=0)
    truth_rel = truth["theta"] / truth["theta"][0]
    assert np.all(np.abs(est.relative_ / truth_rel - 1) <= 0.10), est.relative_ / truth_rel
    assert est.support_.shape == (10,) and np.all(est.support_ >= 20)


def test_perplexity_by_hand():
    log = ClickLog.from_events({"query": ["q"] * 4, "doc": [1, 2, 2, 1], "position": [1, 2, 1, 2],
                                "click": [1, 0, 0, 0]})
    model = RankOnlyModel().fit(log)        # P(click) = 0.5 at 1, 0 (clipped) at 2
    per = model.perplexity(log, by_position=True)
    assert per[0] == pytest.approx(2.0) and per[1] == pytest.approx(1.0, abs=1e-8)
    assert model.log_likelihood(log) == pytest.approx(np.log(0.5) / 2, abs=1e-8)


def test_unseen_pairs_get_the_prior_and_ids_are_matched():
    train = ClickLog.from_events({"query": ["a", "a", "a", "a"], "doc": ["x", "y", "y", "x"],
                                  "position": [1, 2, 1, 2], "click": [1, 0, 1, 0]})
    other = ClickLog.from_events({"query": ["b", "a"], "doc": ["x", "y"], "position": [1, 2], "click": [0, 0]})
    model = PositionBasedModel().fit(train)
    p = model._click_probability(other)
    seen = model.alpha_[np.flatnonzero((model.row_keys_[1] == "y"))[0]]
    assert p[0] == pytest.approx(model.theta_[0] * model.prior_mean_[0])
    assert p[1] == pytest.approx(model.theta_[1] * seen)
    doc = DocumentOnlyModel().fit(train)
    assert doc._click_probability(other)[0] == pytest.approx(0.5)


def test_unfitted_and_bad_input():
    with pytest.raises(ValueError, match="not fitted"):
        PositionBasedModel().perplexity(ClickLog.from_events({"query": [1], "doc": [1], "position": [1],
                                                              "click": [0]}))
    with pytest.raises(TypeError, match="ClickLog"):
        PositionBasedModel().fit(pd.DataFrame())
    with pytest.raises(ValueError, match="prior_strength"):
        PositionBasedModel(prior_strength=-1).fit(ClickLog.from_events({"query": [1], "doc": [1], "position": [1],
                                                                         "click": [0]}))


def test_harvest_needs_no_logger_and_pbm_takes_its_options(drifting):
    log, *_ = drifting
    assert np.all(log.logger == 0)
    est = estimate_propensities(log[:3000], "harvest", n_bootstrap=0, min_support=10**6)
    assert est.pair_support_.shape == (10, 10) and np.all(est.pair_support_ == est.pair_support_.T)
    with pytest.raises(TypeError, match="prior_strength is an option of methods 'pbm' and 'harvest'"):
        estimate_propensities(log, "em", prior_strength=1.0)


def test_harvest_prior_keeps_a_position_without_clicks_positive_and_fades_with_the_pairs():
    """Position 2 never clicked on documents seen at both positions: the MLE is 0, the prior's estimate is
    positive and falls towards 0 as more (query, document) pairs are seen at both positions."""
    pages = pd.DataFrame({"page": [0, 0, 1, 1], "query": ["q"] * 4, "doc": ["x", "y", "y", "x"],
                          "position": [1, 2, 1, 2], "click": [1, 0, 1, 0]})
    ratios = []
    for n in (1, 4, 16):    # n queries, each with two documents swapped between two pages
        log = ClickLog.from_events(pd.concat([pages.assign(page=pages["page"] + 2 * k, query=f"q{k}")
                                              for k in range(n)]), session="page")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ValueError, match="position 2 is 0.0"):
                estimate_propensities(log, "harvest", max_position=2, n_bootstrap=0, prior_strength=0.0)
            ratios.append(estimate_propensities(log, "harvest", max_position=2, n_bootstrap=0).relative_[1])
    assert 0 < ratios[2] < ratios[1] < ratios[0] < 1


def test_harvest_weights_a_pair_by_the_harmonic_mean_of_its_impressions():
    """Two positions: theta_2 / theta_1 = sum_S w CTR_2 / sum_S w CTR_1 (prior off), w = 2 n_1 n_2 / (n_1 + n_2)."""
    def pages(query, n_xy, n_yx, clicks_x):
        # n_xy pages with x at 1 and y at 2, n_yx pages the other way round; clicks_x = (at 1, at 2) on x
        top = ["x"] * n_xy + ["y"] * n_yx
        second = ["y"] * n_xy + ["x"] * n_yx
        click_top = [1] * clicks_x[0] + [0] * (n_xy - clicks_x[0]) + [0] * n_yx
        click_second = [0] * n_xy + [1] * clicks_x[1] + [0] * (n_yx - clicks_x[1])
        rows = []
        for p in range(n_xy + n_yx):
            rows += [(f"{query}{p}", query, top[p], 1, click_top[p]), (f"{query}{p}", query, second[p], 2, click_second[p])]
        return rows
    # q1: x seen once at 1 (clicked) and 1000 times at 2 (500 clicks); q2: 400 times at each, 200 and 40 clicks
    rows = pages("a", 1, 1000, (1, 500)) + pages("b", 400, 400, (200, 40))
    log = ClickLog.from_events(pd.DataFrame(rows, columns=["page", "query", "doc", "position", "click"]),
                               session="page")
    w = np.array([2 * 1 * 1000 / 1001, 400.0])
    ctr1, ctr2 = np.array([1 / 1, 200 / 400]), np.array([500 / 1000, 40 / 400])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimate_propensities(log, "harvest", max_position=2, n_bootstrap=0, prior_strength=0.0,
                                    tol=1e-14)
    assert est.relative_[1] == pytest.approx((w @ ctr2) / (w @ ctr1), rel=1e-9)   # 0.2035; unit weights: 0.4
    assert est.pair_support_.tolist() == [[0, 4], [4, 0]]        # x and y of both queries


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_harvest_recovers_theta_from_a_few_queries_shown_many_times(seed):
    """The issue's log shape (20 queries, 56,000 pages): every document is shown at every position, some
    only a handful of times; those pairs' click rates are noise and must not count as much as the others
    (with one weight per pair: 17-28 % off at positions 8-10 on these seeds)."""
    frame, truth = simulate_raw_events(56_000, n_queries=20, drift=0.7, random_state=seed)
    log = ClickLog.from_events(frame, session="session")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimate_propensities(log, "harvest", n_bootstrap=0)
    truth_rel = truth["theta"] / truth["theta"][0]
    assert np.all(np.abs(est.relative_ / truth_rel - 1) <= 0.15), est.relative_ / truth_rel


REPO = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1)
def _trec_train() -> ClickLog:
    return ClickLog.from_events(pd.read_csv(trec_dir() / "train.csv"), session="page")


@requires_trec
def test_trec_held_out_perplexities_quoted_in_the_docs_are_the_commands():
    """The figures of ``cltr propensity train.csv --session page --method pbm --holdout 0.2`` (seed 0) as
    the pages quote them, from the same split and models as the command (``cli._held_out``)."""
    from counterfactual_ltr.cli import _held_out

    log = _trec_train()
    out = np.random.default_rng(0).random(len(log)) < 0.2              # the command's split at --seed 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        printed = _held_out(log[np.flatnonzero(~out)], log[np.flatnonzero(out)])
    found = {key: f"{printed[name]:.4f}" for key, name in (("pbm", "position-based"), ("rank", "rank-only"),
                                                           ("doc", "document-only"))}
    quotes = {"docs/guide/logs.md": "position-based {pbm}, rank-only {rank}, document-only {doc}",
              "docs/real-logs-notes.md": "pages is {pbm} with it and 1.1637 with the global prior (rank-only {rank}, "
                                         "document-only {doc})",
              "docs/click-models.md": "beat the PBM, {rank} vs {pbm}"}
    for page, quote in quotes.items():
        text = " ".join((REPO / page).read_text(encoding="utf-8").split())
        assert quote.format(**found) in text, (page, found)


@requires_trec
def test_trec_log_both_methods_run_and_say_how_well_positions_are_identified():
    log = _trec_train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pbm = estimate_propensities(log, "pbm", n_bootstrap=3, random_state=0, min_support=50)
    assert pbm.support_.tolist()[0] > 0 and any(issubclass(w.category, IdentificationWarning) for w in caught)
    with pytest.warns(IdentificationWarning, match="fewer than min_clicks"):
        harvest = estimate_propensities(log, "harvest", max_position=4, n_bootstrap=3, random_state=0)
    assert harvest.support_.shape == (4,)
    # at every position: no clicks on position 5's pairs make its maximum-likelihood estimate 0; the
    # default prior keeps it small and positive, with a wide interval
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="position 5 is 0.0"):
            estimate_propensities(log, "harvest", n_bootstrap=0, prior_strength=0.0, monotone=False)
        full = estimate_propensities(log, "harvest", n_bootstrap=5, random_state=0, monotone=False)
        shaped = estimate_propensities(log, "harvest", n_bootstrap=5, random_state=0)
    assert np.all(full.relative_ > 0) and full.relative_[4] < 0.1 and np.all(full.upper_[1:] > full.lower_[1:])
    # the default pools position 5 with the rises after it: a non-increasing curve, still positive
    assert np.all(np.diff(shaped.relative_) <= 1e-12) and np.all(shaped.relative_ > 0)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(2, 4), st.floats(0.0, 20.0), st.integers(0, 2**32 - 1))
def test_em_parameters_and_perplexity_stay_in_bounds(n_rows, K, prior_strength, seed):
    rng = np.random.default_rng(seed)
    row = np.repeat(np.arange(n_rows), K)
    k = np.tile(np.arange(1, K + 1), n_rows)
    n = rng.integers(1, 5, size=row.size).astype(float)
    c = np.floor(rng.random(row.size) * (n + 1))
    fit = pbm_em(row, k, n, c, n_rows, K, prior_strength=prior_strength, max_iter=200)
    for values in (fit["theta"], fit["alpha"], fit["mu"]):
        assert np.all((values > 0) & (values <= 1))
    assert fit["loglik"] <= 0
    positions = np.tile(np.arange(1, K + 1), n_rows)
    clicks = rng.random(positions.size) < 0.3
    log = ClickLog.from_events({"query": np.repeat(np.arange(n_rows), K), "doc": rng.permutation(positions.size),
                                "position": positions, "click": clicks})
    for model in (PositionBasedModel(prior_strength=prior_strength, max_iter=200), RankOnlyModel(),
                  DocumentOnlyModel(prior_strength=prior_strength)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(log)
        per = model.perplexity(log, by_position=True)
        assert np.all(per >= 1 - 1e-12) and model.log_likelihood(log) <= 0


def test_em_on_a_raw_log_asks_for_features_and_trust_em_runs(drifting):
    log, *_ = drifting
    with pytest.raises(ValueError, match="'em' .* needs document features: this log has none"):
        estimate_propensities(log[:2000], "em", n_bootstrap=0)
    est = estimate_propensities(log[:20000], "trust_em", n_bootstrap=0)
    assert est.relative_.shape == (10,) and np.all(np.isfinite(est.relative_))


def test_position_based_model_with_a_given_propensity_scores_that_estimate(drifting):
    """theta kept at a propensity model's values (alpha fitted): the true theta predicts held-out clicks
    better than no position effect or a too steep one, and the free fit's own theta reproduces the free fit."""
    from counterfactual_ltr import PositionBasedPropensity

    _, train, test, truth = drifting
    small = train[:20000]
    scores = {eta: PositionBasedModel(propensity=PositionBasedPropensity(eta)).fit(small).perplexity(test)
              for eta in (0.0, 1.0, 2.0)}                      # the truth is theta_r = 1 / r: eta = 1
    assert scores[1.0] < scores[0.0] and scores[1.0] < scores[2.0]
    given = PositionBasedModel(propensity=PositionBasedPropensity(1.0)).fit(small)
    np.testing.assert_allclose(given.theta_, 1.0 / np.arange(1, 11))
    free = PositionBasedModel().fit(small)
    again = PositionBasedModel(propensity=free.propensity_).fit(small)
    np.testing.assert_allclose(again.theta_, free.theta_ / free.theta_.max(), rtol=1e-12)
    assert again.perplexity(test) == pytest.approx(free.perplexity(test), rel=1e-5)
