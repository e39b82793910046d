"""Choosing the learner by the log: shared folds, the one-standard-error rule, the record, ``cltr fit --model auto``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, GroupKFold

from click_sim import make_ranking, simulate_clicks
from counterfactual_ltr.cli import main
from counterfactual_ltr.estimators import RankSVM, SVMPropDCG, SVMPropRank
from counterfactual_ltr.evaluation import snips_estimate, snips_scorer
from counterfactual_ltr.learner_choice import (choose_learner, learner_candidates, learner_leads, learner_lines,
                                               select_learner)
from counterfactual_ltr.model_selection import cv_folds, grid_search, param_grid_search
from counterfactual_ltr.persistence import load_model, save_model

pytestmark = pytest.mark.filterwarnings("ignore::counterfactual_ltr.evaluation.EstimateWarning",
                                        "ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def log():
    data = make_ranking(n_queries=45, n_docs=(5, 12), random_state=2)
    return simulate_clicks(data, data.X[:, 0] + 0.3 * data.X[:, 1], n_passes=6, random_state=2)


def _quiet(f, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*args, **kw)


# ------------------------------------------------------------------ folds and the search they serve

def test_cv_folds_are_group_k_fold_over_queries(log):
    folds = cv_folds(log, 3)
    splits = list(GroupKFold(3).split(np.arange(len(log)), groups=log.groups))
    for (train, test), (tr, te) in zip(folds, splits):
        assert len(train) == len(tr) and len(test) == len(te)
        np.testing.assert_array_equal(test.session_ids, log.session_ids[te])
        assert not set(np.unique(train.groups)) & set(np.unique(test.groups))
    with pytest.raises(ValueError, match="cv=50 folds of queries need at least 50 queries"):
        cv_folds(log, 50)


def test_a_frozen_log_aggregates_as_a_fresh_one_and_refuses_writes(log):
    part = log[: len(log) // 2]
    fresh = part.aggregate(0.7)
    frozen = log[: len(log) // 2].frozen()
    for _ in range(2):                       # the second aggregate reuses the kept counts
        again = frozen.aggregate(0.7)
        assert again.n_clicks == fresh.n_clicks
        np.testing.assert_array_equal(again.weights, fresh.weights)
        for kept, counted in zip(again.table, fresh.table):
            np.testing.assert_array_equal(kept, counted)
    with pytest.raises(ValueError, match="read-only"):
        frozen.clicks[0] = True


def test_param_grid_search_scores_as_grid_search_cv(log):
    grid = {"C": [0.1, 10.0], "solver_tol": [1e-6, 1e-3]}
    model = _quiet(param_grid_search, SVMPropRank(), log, grid, cv=3, scoring=snips_scorer("dcg"),
                   scoring_name="snips-dcg")
    search = _quiet(GridSearchCV(SVMPropRank(), grid, cv=GroupKFold(3), scoring=snips_scorer("dcg")).fit,
                    log, groups=log.groups)
    record = model.selection_
    order = [record["candidates"].index([float(p["C"]), float(p["solver_tol"])]) for p in search.cv_results_["params"]]
    np.testing.assert_allclose(np.array(record["mean_test_score"])[order], search.cv_results_["mean_test_score"],
                               rtol=1e-12)
    assert record["chosen"] == [float(search.best_params_["C"]), float(search.best_params_["solver_tol"])]
    best = search.best_index_
    np.testing.assert_allclose(record["fold_scores"], [search.cv_results_[f"split{k}_test_score"][best]
                                                       for k in range(3)], rtol=1e-12)
    np.testing.assert_allclose(model.coef_, search.best_estimator_.coef_, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ the rule

score_rows = st.lists(st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4), min_size=2, max_size=5)


@settings(max_examples=200, deadline=None)
@given(score_rows, st.floats(0.0, 3.0))
def test_the_choice_is_the_cheapest_learner_within_the_noise_of_the_best(rows, noise):
    scores = np.array(rows)
    names = [f"l{i}" for i in range(len(rows))]
    chosen, best, reason = choose_learner(names, scores, noise)
    means = scores.mean(axis=1)
    assert best == int(np.argmax(means)) and chosen <= best
    d = scores[best] - scores
    se = d.std(axis=1, ddof=1) / np.sqrt(scores.shape[1])
    within = [i for i in range(best) if noise > 0 and d[i].mean() <= noise * se[i]]
    assert chosen == (within[0] if within else best)
    assert choose_learner(names, scores)[0] == best                       # the default keeps the best mean
    assert names[chosen] in reason
    # a larger noise never keeps a dearer learner
    assert choose_learner(names, scores, noise + 1.0)[0] <= chosen


def test_query_terms_measure_the_lead_on_queries():
    folds = np.array([[0.30, 0.34, 0.32], [0.33, 0.31, 0.35]])          # the folds alone: within the noise
    assert choose_learner(["a", "b"], folds, 1.0)[0] == 0
    chosen, _, reason = choose_learner(["a", "b"], folds)
    assert chosen == 1 and "its lead over the cheaper a" in reason and "may rank as well" in reason
    rng = np.random.default_rng(0)
    a = rng.normal(0.010, 0.002, 400)
    terms = np.vstack([a, a + 0.0005 + rng.normal(0, 0.0001, 400)])      # b ahead on nearly every query
    best, leads, errors = learner_leads(folds, terms)
    assert best == 1 and leads[0] == pytest.approx(np.sum(terms[1] - terms[0]))
    assert errors[0] == pytest.approx(np.sqrt(400) * np.std(terms[1] - terms[0], ddof=1)) and errors[0] < 0.01
    chosen, _, reason = choose_learner(["a", "b"], folds, 1.0, terms)
    assert chosen == 1 and "over queries" in reason
    with pytest.raises(ValueError, match="one row per learner"):
        choose_learner(["a", "b"], folds[:1])
    with pytest.raises(ValueError, match="finite"):
        choose_learner(["a", "b"], [[0.1, np.nan], [0.2, 0.3]])
    with pytest.raises(ValueError, match="noise"):
        choose_learner(["a", "b"], folds, -1.0)


# ------------------------------------------------------------------ select_learner

@pytest.fixture(scope="module")
def selection(log):
    learners = learner_candidates(["svm-rank", "svm-proprank", "svm-propdcg"], C=[0.1, 10.0])
    learners["svm-propdcg"] = (SVMPropDCG(max_ccp_iter=2), learners["svm-propdcg"][1])
    fits = _quiet(select_learner, log, learners, scoring=snips_scorer("dcg"), scoring_name="snips-dcg",
                  refit=False, extend=False)
    return learners, fits


def test_every_learner_is_searched_on_the_same_folds(log, selection):
    learners, fits = selection
    table = next(iter(fits.values())).selection_["learners"]
    assert table["names"] == ["svm-rank", "svm-proprank", "svm-propdcg"]
    for name, (estimator, grid) in learners.items():
        own = _quiet(grid_search, estimator, log, "C", grid["C"], cv=3, scoring=snips_scorer("dcg"), refit=False)
        assert fits[name].C == own.selection_["chosen"]
        np.testing.assert_allclose(table["fold_scores"][table["names"].index(name)], own.selection_["fold_scores"],
                                   rtol=1e-12)
    assert all(fits[n].selection_["learners"] is table for n in fits)


def _out_of_fold(log, model):
    """Scores of every document by ``model`` refitted on the folds that do not hold its query."""
    scores = np.zeros(log.data.n_docs)
    for train, test in cv_folds(log, 3):
        rows = log.data.rows_of(np.unique(test.session_query))
        scores[rows] = _quiet(clone(model).fit, train).predict(log.data.X[rows])
    return scores


def test_the_leads_are_those_of_the_pooled_out_of_fold_snips(log, selection):
    """The recorded lead of the best over each learner is the difference of their pooled held-out SNIPS-DCG."""
    _, fits = selection
    table = next(iter(fits.values())).selection_["learners"]
    pooled = {name: snips_estimate(log, _out_of_fold(log, model), metric="dcg", n_bootstrap=0).value
              for name, model in fits.items()}
    for name, lead in zip(table["names"], table["leads"]):
        assert lead == pytest.approx(pooled[table["best"]] - pooled[name], abs=1e-12)


def test_the_lead_error_matches_a_bootstrap_over_queries(log, selection):
    """The standard error of a lead (a sum of per-query differences) against resampling the queries."""
    from counterfactual_ltr.learner_choice import _query_terms

    _, fits = selection
    table = next(iter(fits.values())).selection_["learners"]
    names = table["names"]
    out_of_fold = {name: _out_of_fold(log, model) for name, model in fits.items()}
    terms = _query_terms(log, names, out_of_fold, fits, snips_scorer("dcg"))
    other = next(i for i, n in enumerate(names) if n != table["best"])
    d = terms[names.index(table["best"])] - terms[other]
    rng = np.random.default_rng(0)
    boot = d[rng.integers(0, len(d), size=(4000, len(d)))].sum(axis=1)
    assert table["lead_errors"][other] == pytest.approx(boot.std(), rel=0.1)


def test_select_learner_refits_the_choice_and_the_file_keeps_the_table(log, tmp_path):
    learners = learner_candidates(["svm-rank", "svm-proprank"], C=[0.1, 10.0])
    model = _quiet(select_learner, log, learners, scoring=snips_scorer("dcg"), scoring_name="snips-dcg")
    table = model.selection_["learners"]
    chosen = learners[table["chosen"]][0]
    assert type(model) is type(chosen)
    again = _quiet(clone(chosen).set_params(C=model.C).fit, log)
    np.testing.assert_allclose(model.coef_, again.coef_, rtol=1e-10, atol=1e-12)
    save_model(model, tmp_path / "m.npz")
    assert load_model(tmp_path / "m.npz").selection_["learners"] == table
    lines = learner_lines(model.selection_)
    assert sum("<- chosen" in line for line in lines) == 1 and table["reason"] in lines[-1]


def test_a_learner_whose_search_fails_is_left_out_and_said(log):
    learners = learner_candidates(["svm-rank", "svm-proprank"], C=[1.0])
    learners["svm-proprank"] = (SVMPropRank(propensity=0.5), {"C": [-1.0]})        # C < 0: every fit fails
    with pytest.warns(UserWarning, match="leaves out svm-proprank"):
        model = select_learner(log, learners, scoring=snips_scorer("dcg"))
    table = model.selection_["learners"]
    assert table["names"] == ["svm-rank"] and "svm-proprank" in table["failed"] and isinstance(model, RankSVM)
    with pytest.raises(ValueError, match="unknown learner 'svm-xyz'"):
        learner_candidates(["svm-xyz"])


# ------------------------------------------------------------------ cltr fit --model auto

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from sklearn.datasets import dump_svmlight_file

    folder = tmp_path_factory.mktemp("auto_files")
    data = make_ranking(n_queries=60, n_docs=(5, 12), n_features=5, random_state=4)
    dump_svmlight_file(data.X, data.y, str(folder / "data.txt"), query_id=data.qid, zero_based=False)
    assert main(["simulate", str(folder / "data.txt"), "--passes", "5", "-o", str(folder / "log.parquet"), "-q"]) == 0
    return folder


def test_fit_auto_prints_the_learners_and_stores_them(files, monkeypatch, capsys):
    monkeypatch.chdir(files)
    status = _quiet(main, ["fit", "log.parquet", "data.txt", "--model", "auto", "--learners", "svm-proprank,svm-rank",
                           "--C", "1,10", "--cv", "2", "-o", "auto.npz"])
    assert status == 0
    out = capsys.readouterr().out.splitlines()
    table = load_model(files / "auto.npz").selection_["learners"]
    assert table["names"] == ["svm-rank", "svm-proprank"]                  # cheapest first, whatever the order given
    assert out[0] == "compared 2 learners by cross-validated snips-dcg:"
    assert out[1].split()[:2] == ["learner", "snips-dcg"]
    assert [line.split()[0] for line in out[2:4]] == table["names"]
    assert any(line.startswith(f"chose {table['chosen']} (") for line in out)
    status = _quiet(main, ["fit", "log.parquet", "data.txt", "--model", "auto", "--learners", "svm-proprank,svm-rank",
                           "--C", "1,10", "--cv", "2", "--noise", "1000", "-o", "cheap.npz"])
    assert status == 0 and load_model(files / "cheap.npz").selection_["learners"]["chosen"] == "svm-rank"


def test_fit_auto_refuses_options_no_learner_takes(files, monkeypatch, capsys):
    monkeypatch.chdir(files)
    assert main(["fit", "log.parquet", "data.txt", "--model", "svm-rank", "--learners", "svm-rank", "-o", "x.npz"]) == 2
    assert "--learners and --noise are for --model auto" in capsys.readouterr().err
    assert main(["fit", "log.parquet", "data.txt", "--model", "auto", "--learners", "svm-rank,forest",
                 "-o", "x.npz"]) == 2
    assert "forest" in capsys.readouterr().err
    assert main(["fit", "log.parquet", "data.txt", "--model", "auto", "--learners", "svm-rank", "--alpha", "0.1",
                 "-o", "x.npz"]) == 2
    assert "--alpha" in capsys.readouterr().err and not (files / "x.npz").exists()
    assert main(["fit", "log.parquet", "data.txt", "--model", "auto", "--learners", "svm-rank", "--n-estimators", "5",
                 "-o", "x.npz"]) == 2
    assert "--n-estimators: none of the learners (svm-rank) takes it" in capsys.readouterr().err


def test_a_failed_fit_scores_error_score_with_a_warning(log):
    from sklearn.exceptions import FitFailedWarning

    with pytest.warns(FitFailedWarning, match=r"the fit of \{'C': -1.0\} on fold 0 failed and scores -1"):
        model = grid_search(SVMPropRank(), log, "C", [-1.0, 1.0], cv=2, scoring=snips_scorer("dcg"), error_score=-1.0)
    assert model.selection_["mean_test_score"][0] == -1.0 and model.C == 1.0
    with pytest.raises(ValueError):
        grid_search(SVMPropRank(), log, "C", [-1.0, 1.0], cv=2)


def test_tempering_is_tried_for_every_propensity_learner_and_recorded():
    from click_sim import SwapIntervention
    from counterfactual_ltr import estimate_propensities

    data = make_ranking(n_queries=60, random_state=0)
    log = simulate_clicks(data, data.X[:, 0], n_passes=30, random_state=0,
                          intervention=SwapIntervention(0.5, max_position=4))
    est = _quiet(estimate_propensities, log, "swap", max_position=4, n_bootstrap=40, random_state=0)
    learners = learner_candidates(["svm-rank", "svm-proprank"], propensity=est, C=[1.0])
    fits = _quiet(select_learner, log, learners, scoring=snips_scorer(propensity=est), strengths=(0.0, 1.0),
                  refit=False)
    assert "tempering" not in fits["svm-rank"].selection_
    assert fits["svm-proprank"].selection_["tempering"]["strengths"] == [0.0, 1.0]
    table = fits["svm-proprank"].selection_["learners"]
    assert table["chosen_params"][1].endswith(f"tempering={fits['svm-proprank'].selection_['tempering']['chosen']:g}")
    assert table["lead_unit"] == "queries"
