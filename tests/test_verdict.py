"""Four verdicts: "cannot tell" when the estimate rests on what the log cannot show, and one statement per question."""

from __future__ import annotations

import html
import json
import warnings
import re

import numpy as np
import pytest

from click_sim import make_ranking, simulate_clicks
from counterfactual_ltr.evaluation import TrustRules, compare_rankers, validation_report
from counterfactual_ltr.propensity import EstimatedPropensity

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def data():
    return make_ranking(n_queries=60, n_docs=(20, 20), random_state=3)


@pytest.fixture(scope="module")
def log(data):
    return simulate_clicks(data, data.X[:, 0], n_passes=30, random_state=0)


def test_a_candidate_that_promotes_never_shown_documents_cannot_be_told(data):
    top10 = simulate_clicks(data, data.X[:, 0], n_passes=30, random_state=0, max_shown=10)
    reverse = -data.X[:, 0]                            # ranks the never-shown bottom half first
    c = compare_rankers(top10, reverse, data.X[:, 0], estimator="ips", n_bootstrap=0)
    assert c.verdict == "cannot tell"
    assert any("never showed" in r for r in c.reasons) and c.reasons == c.doubts
    assert "cannot tell, because" in c.summary() and "clears 0" not in c.summary()
    # the same comparison on a log that showed every document has no such doubt
    full = compare_rankers(simulate_clicks(data, data.X[:, 0], n_passes=30, random_state=0), reverse,
                           data.X[:, 0], estimator="ips", n_bootstrap=0)
    assert not any("never showed" in r for r in full.doubts)


def test_few_effective_clicks_cannot_be_told(data):
    small = simulate_clicks(data, data.X[:, 0], n_passes=1, random_state=1)
    c = compare_rankers(small, data.y.astype(float), n_bootstrap=0, random_state=0)
    assert c.candidate_estimate.ess < 100
    assert c.verdict == "cannot tell" and any("effective sample size" in r for r in c.reasons)
    relaxed = compare_rankers(small, data.y.astype(float), n_bootstrap=0, random_state=0,
                              rules=TrustRules(min_ess=0, max_click_share=1, max_query_share=1))
    assert relaxed.verdict in ("better", "worse", "no difference found") and not relaxed.doubts


def test_one_query_carrying_the_weight_cannot_be_told(data, log):
    c = compare_rankers(log, data.y.astype(float), n_bootstrap=0, rules=TrustRules(max_query_share=0.001))
    assert c.verdict == "cannot tell" and any("one query carries" in r for r in c.reasons)


def test_clicks_at_thin_positions_of_an_estimated_propensity_cannot_be_told(data, log):
    estimated = EstimatedPropensity(1.0 / np.arange(1, 21), method="harvest")
    given = EstimatedPropensity(1.0 / np.arange(1, 21))            # method "given": known, not estimated
    strict = TrustRules(min_position_clicks=10**6, min_ess=0)
    c = compare_rankers(log, data.y.astype(float), propensity=estimated, n_bootstrap=0, rules=strict)
    assert c.verdict == "cannot tell" and any("thinly supported" in r for r in c.reasons)
    c = compare_rankers(log, data.y.astype(float), propensity=given, n_bootstrap=0, rules=strict)
    assert not any("thinly supported" in r for r in c.doubts)


def test_thin_positions_do_not_veto_an_interval_that_carries_the_propensity_error(data, log):
    """With the estimate's replicates in the interval, the thin-positions rule is not a second veto."""
    rng = np.random.default_rng(0)
    truth = 1.0 / np.arange(1, 21)
    estimated = EstimatedPropensity(truth, method="harvest", bootstrap=truth * np.exp(rng.normal(0, 0.05, (60, 20))))
    strict = TrustRules(min_position_clicks=10**6, min_ess=0)
    known = compare_rankers(log, data.y.astype(float), propensity=estimated, n_bootstrap=60, rules=strict,
                            random_state=0, propagate_propensity=False)
    propagated = compare_rankers(log, data.y.astype(float), propensity=estimated, n_bootstrap=60, rules=strict,
                                 random_state=0)
    assert any("thinly supported" in r for r in known.doubts)
    assert not any("thinly supported" in r for r in propagated.doubts)
    assert "replicates" in propagated.propensity_uncertainty
    assert propagated.ci_high - propagated.ci_low >= known.ci_high - known.ci_low


@pytest.mark.parametrize("seed", range(6))
def test_the_verdict_and_the_bound_never_contradict(data, seed):
    rng = np.random.default_rng(seed)
    log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=seed)
    candidate = data.X[:, 0] + rng.normal(scale=rng.uniform(0.1, 3.0), size=data.n_docs)
    for metric in ("dcg", "avg_rank"):
        c = compare_rankers(log, candidate, metric=metric, value="relevance", n_bootstrap=0, random_state=seed,
                            rules=TrustRules(min_ess=0, max_click_share=1, max_query_share=1))
        assert (c.verdict == "better") == c.clears_zero
        low, high = c.improvement_interval
        assert c.lower_bound == pytest.approx(low) and low <= c.improvement <= high
        text = c.summary()
        assert ("no difference found" in text) == ("does not clear 0" in text and c.verdict != "worse")


def test_lower_is_better_reads_as_an_improvement(data, log):
    good, bad = data.y.astype(float), -data.y.astype(float)
    c = compare_rankers(log, good, bad, metric="avg_rank", estimator="ips", n_bootstrap=0,
                        rules=TrustRules(min_ess=0))
    low, high = c.improvement_interval
    assert c.difference < 0 < c.improvement and 0 < low <= high and c.verdict == "better"
    assert "lower is better" in c.summary() and f"{c.improvement:+.4f}" in c.summary()


def test_the_report_prints_the_same_verdict_and_reasons_everywhere(data):
    top10 = simulate_clicks(data, data.X[:, 0], n_passes=30, random_state=0, max_shown=10)
    report = validation_report({"reverse": -data.X[:, 0], "same": data.X[:, 0]}, top10, metrics=("dcg",),
                               pair_bootstrap=0, n_bootstrap=0, random_state=0)
    (rev, same) = report.comparisons["dcg"]
    assert rev.verdict == "cannot tell"
    md, js = report.to_markdown(), report.to_dict()
    assert js["comparisons"]["dcg"]["reverse"]["verdict"] == "cannot tell"
    assert js["comparisons"]["dcg"]["reverse"]["reasons"] == list(rev.reasons)
    for text in (md, report.to_html(figures=False), "\n".join(report.verdict_lines())):
        assert "cannot tell" in text and rev.reasons[0] in html.unescape(text)
    assert "dcg of clicks (SNIPS)" in md and "dcg over click-relevance" in md


@pytest.mark.parametrize("bad", [dict(min_ess=-1), dict(max_unshown_mass=1.5), dict(min_position_clicks=-2),
                                 dict(max_query_share=float("nan"))])
def test_rules_out_of_range_are_refused(bad):
    with pytest.raises(ValueError, match="TrustRules"):
        TrustRules(**bad)


def test_rules_of_the_wrong_type_are_refused(data, log):
    with pytest.raises(ValueError, match="rules must be a TrustRules"):
        compare_rankers(log, data.y.astype(float), rules={"min_ess": 3})


@pytest.fixture(scope="module")
def raw_setting():
    from click_sim.raw import simulate_raw_events
    from counterfactual_ltr import ClickLog, RankingDataset

    frame, sim = simulate_raw_events(1500, n_queries=60, n_shown=6, drift=1.0, random_state=0)
    Q, M = sim["alpha"].shape
    f0 = np.log(sim["alpha"])
    data = RankingDataset.from_frame({"query": np.repeat(sim["query_ids"], M), "doc": sim["doc_ids"].ravel(),
                                      "f0": f0.ravel()})
    raw = ClickLog.from_events(frame, session="session")
    other, _ = simulate_raw_events(1500, n_queries=60, n_shown=6, drift=1.0, random_state=1)
    return raw, raw.with_data(data), data, ClickLog.from_events(other, session="session")


def test_an_estimated_propensity_widens_the_interval_by_its_own_error(raw_setting):
    from counterfactual_ltr import PositionBasedPropensity, estimate_propensities

    raw, log, data, other = raw_setting
    scores = data.X[:, 0]
    same = estimate_propensities(raw, "harvest", max_position=6, n_bootstrap=50, random_state=0)
    c = compare_rankers(log, scores, propensity=same, n_bootstrap=100, random_state=0)
    assert c.propensity_uncertainty.startswith("propensity re-estimated on each of 100")
    assert c.stderr >= c.stderr_known_propensity > 0
    known = compare_rankers(log, scores, propensity=same, n_bootstrap=100, random_state=0, propagate_propensity=False)
    assert known.propensity_uncertainty == "treated as known" and known.stderr_known_propensity is None
    assert known.stderr == pytest.approx(c.stderr_known_propensity) and known.difference == c.difference
    assert c.ci_high - c.ci_low >= known.ci_high - known.ci_low
    from_other = estimate_propensities(other, "harvest", max_position=6, n_bootstrap=50, random_state=0)
    c = compare_rankers(log, scores, propensity=from_other, n_bootstrap=100, random_state=0)
    assert "its replicates on its own log" in c.propensity_uncertainty and c.stderr >= c.stderr_known_propensity
    given = compare_rankers(log, scores, propensity=PositionBasedPropensity(1.0), n_bootstrap=100, random_state=0)
    assert given.propensity_uncertainty == "treated as known (it is given, not estimated)"


def test_re_estimating_on_unit_weights_gives_the_estimate_back(raw_setting):
    from counterfactual_ltr import estimate_propensities
    from counterfactual_ltr.propensity.estimation import log_fingerprint, replicate_curves

    raw, log, _, _ = raw_setting
    est = estimate_propensities(raw, "harvest", max_position=6, n_bootstrap=0)
    assert log_fingerprint(raw) == log_fingerprint(log)
    present = (np.bincount(log.session_query, minlength=log.n_queries) > 0).astype(float)
    curves, how = replicate_curves(est, log, present[None, :])
    assert how == "re-estimated"
    np.testing.assert_allclose(curves[0] / curves[0].max(), est.relative_ / est.relative_.max(), rtol=1e-8)


def test_a_cut_list_that_rotates_its_candidates_cannot_be_told_by_position_propensities():
    from click_sim.raw import simulate_raw_events
    from counterfactual_ltr import ClickLog, PositionBasedPropensity, RankingDataset

    def setting(n_candidates):
        frame, sim = simulate_raw_events(1500, n_queries=60, n_shown=5, n_candidates=n_candidates, drift=1.0,
                                         random_state=2)
        Q, M = sim["alpha"].shape
        data = RankingDataset.from_frame({"query": np.repeat(sim["query_ids"], M), "doc": sim["doc_ids"].ravel(),
                                          "f0": np.log(sim["alpha"]).ravel()})
        return ClickLog.from_events(frame, session="session").with_data(data), data

    rules = TrustRules(min_ess=0, max_click_share=1, max_query_share=1)
    cut, data = setting(10)
    c = compare_rankers(cut, data.X[:, 0], propensity=PositionBasedPropensity(1.0), n_bootstrap=0, rules=rules)
    assert c.verdict == "cannot tell" and any("did not show" in r for r in c.reasons)
    full, data = setting(5)
    c = compare_rankers(full, data.X[:, 0], propensity=PositionBasedPropensity(1.0), n_bootstrap=0, rules=rules)
    assert not c.doubts


def test_an_estimate_read_back_from_its_file_carries_its_uncertainty(raw_setting):
    """A propensity written by `cltr propensity` (or saved with a model) re-estimates or draws replicates as in Python."""
    from counterfactual_ltr import estimate_propensities
    from counterfactual_ltr.persistence import propensity_from_dict, propensity_to_dict

    raw, log, data, other = raw_setting
    scores = data.X[:, 0]
    for source, words in ((raw, "propensity re-estimated on each of 100"), (other, "its replicates on its own log")):
        est = estimate_propensities(source, "harvest", max_position=6, n_bootstrap=50, random_state=0)
        back = propensity_from_dict(json.loads(json.dumps(propensity_to_dict(est))))
        np.testing.assert_array_equal(back.bootstrap_, est.bootstrap_)
        assert back.recipe_ == est.recipe_ and back.log_fingerprint_ == est.log_fingerprint_
        python = compare_rankers(log, scores, propensity=est, n_bootstrap=100, random_state=0)
        read = compare_rankers(log, scores, propensity=back, n_bootstrap=100, random_state=0)
        assert words in read.propensity_uncertainty
        assert (read.difference, read.stderr, read.ci_low, read.ci_high, read.verdict) == \
            (python.difference, python.stderr, python.ci_low, python.ci_high, python.verdict)


@pytest.mark.parametrize("change, words", [
    (lambda d: d | {"bootstrap": [[1.0, 0.5]]}, "replicates of 6 numbers"),
    (lambda d: d | {"bootstrap_converged": [True]}, "one per replicate"),
    (lambda d: d | {"recipe": {"method": "harvest", "max_position": 4, "options": {}}}, "'max_position': 6"),
    (lambda d: {k: v for k, v in d.items() if k != "log_fingerprint"}, "needs the field 'log_fingerprint'"),
])
def test_a_damaged_uncertainty_field_is_refused(raw_setting, change, words):
    from counterfactual_ltr import estimate_propensities
    from counterfactual_ltr.persistence import propensity_from_dict, propensity_to_dict

    est = estimate_propensities(raw_setting[0], "harvest", max_position=6, n_bootstrap=5, random_state=0)
    with pytest.raises(ValueError, match=re.escape(words)):
        propensity_from_dict(change(propensity_to_dict(est)))


@pytest.mark.slow
def test_log_size_needed_finds_the_difference_with_the_stated_power():
    """On f times the pilot's queries, a true difference of the stated size is found about 80% of the time.

    Queries are the independent units: more of them (drawn from the same population) shrink the
    standard error, more sessions of the same queries do not.
    """
    from dataclasses import replace

    from click_sim import PositionBasedClickModel

    clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1)
    population = make_ranking(n_queries=6000, n_docs=(6, 12), random_state=3)

    def compare(n_queries, seed):
        rng = np.random.default_rng(seed)
        data = population.subset(np.sort(rng.choice(population.n_queries, n_queries, replace=False)))
        log = simulate_clicks(data, data.X[:, 1], clicks, n_passes=3, random_state=seed)
        return compare_rankers(log, data.X[:, 0] + data.X[:, 1], estimator="ips", n_bootstrap=0,
                               random_state=seed)

    truth = compare(6000, 1000).difference         # the population's difference
    f = replace(compare(200, 0), difference=truth).log_size_needed(0.8)
    assert 1.5 < f < 25
    found = [compare(round(200 * f), seed).verdict != "no difference found" for seed in range(1, 61)]
    assert 0.65 <= np.mean(found) <= 0.93, (f, np.mean(found))
    data = make_ranking(n_queries=20, random_state=0)
    log = simulate_clicks(data, data.X[:, 0], clicks, n_passes=2, random_state=0)
    assert compare_rankers(log, data.X[:, 0], estimator="ips", n_bootstrap=0).log_size_needed() == float("inf")


def test_the_report_says_which_intervals_carry_the_propensity_error(raw_setting):
    """Estimated propensity: its source is named, the paired columns say they redraw it, the single estimates that they do not."""
    from counterfactual_ltr import estimate_propensities

    raw, log, data, _ = raw_setting
    est = estimate_propensities(raw, "harvest", max_position=6, n_bootstrap=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = validation_report({"f0": data.X[:, 0]}, log, propensity=est, metrics=("dcg",), n_bootstrap=0,
                                 pair_bootstrap=200, random_state=0).to_markdown()
        known = validation_report({"f0": data.X[:, 0]}, log, propensity=est, metrics=("dcg",), n_bootstrap=0,
                                  pair_bootstrap=200, random_state=0, propagate_propensity=False).to_markdown()
    assert "estimated by 'harvest' and passed in" in text
    assert "95% CI (percentile bootstrap, propensity redrawn)" in text and "CI (BCa bootstrap)" not in text
    assert "(the propensity treated as known: the verdicts' intervals above include its estimation error)" in text
    assert "95% CI (BCa bootstrap)" in known and "propensity redrawn" not in known
