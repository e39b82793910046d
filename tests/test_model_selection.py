"""Model selection that says what it did: grid edges warn or extend the grid, the record reaches the model file,
and ``cltr fit`` refuses a model that ranks everything equal."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, GroupKFold

from click_sim import make_ranking, simulate_clicks
from counterfactual_ltr.cli import main
from counterfactual_ltr.estimators import SVMPropRank
from counterfactual_ltr.evaluation import snips_scorer
from counterfactual_ltr.model_selection import GridEdgeWarning, check_grid_edge, grid_search, selection_lines
from counterfactual_ltr.persistence import load_model, save_model

from conftest import requires_mq2008, mq2008_dir

pytestmark = pytest.mark.filterwarnings("ignore::counterfactual_ltr.evaluation.EstimateWarning")


@pytest.fixture(scope="module")
def log():
    data = make_ranking(n_queries=45, n_docs=(5, 12), random_state=2)
    return simulate_clicks(data, data.X[:, 0], n_passes=6, random_state=2)


def peak_at_1000(estimator, X, y=None):
    """A criterion that rises until C = 1000 and falls after it."""
    return -abs(np.log10(estimator.C) - 3.0)


def flat(estimator, X, y=None):
    return 0.5


def test_cross_validated_scores_are_grid_search_cvs(log):
    grid = [0.1, 1.0, 10.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = grid_search(SVMPropRank(), log, "C", grid, cv=3, scoring=snips_scorer("dcg"))
        search = GridSearchCV(SVMPropRank(), {"C": grid}, cv=GroupKFold(3), scoring=snips_scorer("dcg"))
        search.fit(log, groups=log.groups)
    record = model.selection_
    np.testing.assert_allclose(record["mean_test_score"], search.cv_results_["mean_test_score"], rtol=1e-12)
    np.testing.assert_allclose(record["std_test_score"], search.cv_results_["std_test_score"], rtol=1e-12)
    assert model.C == search.best_params_["C"] == record["chosen"]
    np.testing.assert_allclose(model.coef_, search.best_estimator_.coef_, rtol=1e-10, atol=1e-12)


def test_a_binding_edge_warns(log):
    with pytest.warns(GridEdgeWarning, match=r"C=10 is at the upper edge of the grid \[0.1, 1, 10\].*C=100"):
        model = grid_search(SVMPropRank(), log, "C", [0.1, 1, 10], cv=2, scoring=peak_at_1000)
    assert model.selection_["edge"] == "high" and model.selection_["extended"] == []


def test_extension_by_factors_of_ten_until_interior(log):
    with warnings.catch_warnings():
        warnings.simplefilter("error", GridEdgeWarning)   # interior in the end: no warning
        model = grid_search(SVMPropRank(), log, "C", [0.1, 1, 10], cv=2, scoring=peak_at_1000, extend=True,
                            max_extensions=3)
    record = model.selection_
    assert record["extended"] == [100.0, 1000.0, 10000.0]
    assert record["grid"] == [0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0]
    assert record["chosen"] == model.C == 1000.0 and record["edge"] is None
    lines = selection_lines(record)
    assert "<- chosen" in lines[5] and "(added)" in lines[5] and "(added)" in lines[6]


def test_the_extension_limit_is_stated(log):
    with pytest.warns(GridEdgeWarning, match="extended 1 times, the limit"):
        model = grid_search(SVMPropRank(), log, "C", [0.1, 1], cv=2, scoring=peak_at_1000, extend=True,
                            max_extensions=1)
    assert model.selection_["grid"] == [0.1, 1.0, 10.0] and model.selection_["edge"] == "high"


def test_a_lower_edge_at_zero_cannot_be_extended(log):
    def peak_at_zero(estimator, X, y=None):
        return -estimator.solver_tol

    with pytest.warns(GridEdgeWarning, match="cannot be extended below 0"):
        model = grid_search(SVMPropRank(), log, "solver_tol", [0.0, 1e-6], cv=2, scoring=peak_at_zero, extend=True)
    assert model.selection_["extended"] == [] and model.selection_["edge"] == "low"


def test_a_tie_at_the_edge_is_not_an_edge(log):
    with warnings.catch_warnings():
        warnings.simplefilter("error", GridEdgeWarning)
        model = grid_search(SVMPropRank(), log, "C", [0.1, 1, 10], cv=2, scoring=flat, extend=True)
    assert model.selection_["chosen"] == 0.1 and model.selection_["extended"] == []


def test_check_grid_edge_on_a_users_search(log):
    search = GridSearchCV(SVMPropRank(), {"C": [0.1, 1, 10], "solver_tol": [1e-6]}, cv=GroupKFold(2),
                          scoring=peak_at_1000).fit(log, groups=log.groups)
    with pytest.warns(GridEdgeWarning, match="upper edge"):
        assert check_grid_edge(search) == {"C": "high"}


def test_the_record_is_saved_in_the_model_file(log, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = grid_search(SVMPropRank(), log, "C", [0.1, 1, 10], cv=2, scoring=peak_at_1000, extend=True,
                            scoring_name="peak")
    save_model(model, tmp_path / "m.npz")
    loaded = load_model(tmp_path / "m.npz")
    assert loaded.selection_ == model.selection_ and loaded.selection_["scoring"] == "peak"


def test_bad_grids_are_named(log):
    with pytest.raises(ValueError, match="grid of C"):
        grid_search(SVMPropRank(), log, "C", [], cv=2)
    with pytest.raises(ValueError, match="cv"):
        grid_search(SVMPropRank(), log, "C", [1.0], cv=1)


# ----------------------------------------------------------------------------- the command line


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from sklearn.datasets import dump_svmlight_file

    folder = tmp_path_factory.mktemp("fit_files")
    data = make_ranking(n_queries=60, n_docs=(5, 12), n_features=5, random_state=4)
    dump_svmlight_file(data.X, data.y, str(folder / "data.txt"), query_id=data.qid, zero_based=False)
    assert main(["simulate", str(folder / "data.txt"), "--passes", "5", "-o", str(folder / "log.parquet"), "-q"]) == 0
    return folder


def test_fit_prints_and_stores_the_search(files, monkeypatch, capsys):
    monkeypatch.chdir(files)
    assert main(["fit", "log.parquet", "data.txt", "--model", "svm-proprank", "--C", "1,10", "--cv", "2",
                 "-o", "m.npz"]) == 0
    out = capsys.readouterr().out.splitlines()
    record = load_model(files / "m.npz").selection_
    assert out[0].startswith(f"chose C={record['chosen']:g} (cross-validated snips-dcg")
    assert out[1].split() == ["C", "snips-dcg", "(2-fold", "CV)", "std"]
    assert len(out) == 2 + len(record["grid"]) and sum("<- chosen" in line for line in out) == 1
    assert {1.0, 10.0} <= set(record["grid"])


def test_fit_refuses_a_model_that_ranks_everything_equal(files, monkeypatch, capsys):
    monkeypatch.chdir(files)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main(["fit", "log.parquet", "data.txt", "--model", "svm-proprank", "--C", "1e-7,1e-6", "--cv", "2",
                       "-q", "-o", "zero.npz"])
    assert status == 2 and not (files / "zero.npz").exists()
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("cltr: error")]
    assert len(err) == 1
    assert "ranks every document equal" in err[0] and "try larger C values (--C 1e-05,0.0001)" in err[0]


@requires_mq2008
def test_fit_slam_on_mq2008_is_an_error_not_an_all_zero_model(tmp_path, monkeypatch, capsys):
    train = mq2008_dir() / "Fold1" / "train.txt"
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", str(train), "--passes", "10", "-o", "log.parquet", "-q"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main(["fit", "log.parquet", str(train), "--model", "slam", "--C", "1,100", "--cv", "2", "-q",
                       "-o", "slam.npz"])
    assert status == 2 and not (tmp_path / "slam.npz").exists()
    err = capsys.readouterr().err
    assert "SLAMRanker ranks every document equal" in err and "try --model svm-propdcg" in err


def test_the_record_round_trips_through_a_model_file_and_a_forged_one_is_refused(log, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = grid_search(SVMPropRank(), log, "C", [0.1, 1, 10], cv=2, scoring=peak_at_1000, extend=True)
    save_model(model, tmp_path / "m.npz")
    assert load_model(tmp_path / "m.npz").selection_ == model.selection_
    forged = {"chosen": 5.0, "n_folds": 1, "edge": "middle", "grid": ["a"], "scoring": 3}
    for key, value in forged.items():
        model.selection_ = {**model.selection_, key: value} if key != "grid" else {**model.selection_, "grid": value}
        with pytest.raises(ValueError, match=rf"selection_: \['{key}'\]|selection_: .*'{key}'"):
            save_model(model, tmp_path / f"bad_{key}.npz")
        model.selection_ = load_model(tmp_path / "m.npz").selection_
    model.selection_ = {"chosen": 1.0}
    with pytest.raises(ValueError, match="grid-search record with the keys"):
        save_model(model, tmp_path / "bad_keys.npz")


class _Chatty(SVMPropRank):
    """Warns on every fit, with the fit's C in the text (the same cause, other numbers)."""

    def fit(self, X, y=None, **kw):
        warnings.warn(f"thin data at C={self.C}", UserWarning)
        if self.C > 5:
            warnings.warn("large C", RuntimeWarning)
        return super().fit(X, y, **kw)


def test_fold_warnings_are_said_once_per_cause_with_their_count(log):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grid_search(_Chatty(), log, "C", [1.0, 10.0], cv=3, scoring=snips_scorer("dcg"))
    texts = [str(w.message) for w in caught if "thin data" in str(w.message) or "large C" in str(w.message)]
    # 6 fits (2 values x 3 folds) warn "thin data", 3 warn "large C"; then the final refit warns itself
    assert texts[:2] == ["thin data at C=1.0 (in 6 of 6 fits of the grid search)",
                         "large C (in 3 of 6 fits of the grid search)"]
    assert texts[2].startswith("thin data at C=") and all("grid search" not in t for t in texts[2:])  # the refit
    scored = [str(w.message) for w in caught if "effective sample size" in str(w.message)]
    assert len(scored) <= 1                                   # the scorer's warning: once, not once per fold


def _search(params, means, best):
    from types import SimpleNamespace

    return SimpleNamespace(best_index_=best, n_splits_=3, scoring="peak",
                           cv_results_={"params": params, "mean_test_score": means,
                                        "std_test_score": [0.01] * len(means)})


@pytest.mark.parametrize("grid, means, limit, advised", [
    ([2, 7, 31], [0.3, 0.2, 0.1], 2, None),           # already the least value: no advice below it
    ([3, 7, 31], [0.3, 0.2, 0.1], 2, 2),              # 3 // 2 = 1 is below the limit: the limit
    ([8, 16, 32], [0.3, 0.2, 0.1], 2, 4),             # whole numbers: halved
    ([8, 16, 32], [0.1, 0.2, 0.3], 2, 64),            # and doubled
    ([0.05, 0.1], [0.3, 0.2], None, 0.005),           # real numbers: a factor of 10
])
def test_edge_advice_names_a_value_the_parameter_takes(grid, means, limit, advised):
    search = _search([{"num_leaves": v} for v in grid], means, int(np.argmax(means)))
    with pytest.warns(GridEdgeWarning) as caught:
        check_grid_edge(search, limits={"num_leaves": limit} if limit is not None else None)
    text = str(caught[0].message)
    if advised is None:
        assert "extend the grid" not in text and f"{grid[0]} is the least value" in text
    else:
        assert f"extend the grid (e.g. num_leaves={advised:g})" in text


def test_a_search_over_several_parameters_is_recorded_printed_and_saved(log, tmp_path):
    from counterfactual_ltr.model_selection import search_record

    search = GridSearchCV(SVMPropRank(), {"C": [0.1, 1, 10], "solver_tol": [1e-6, 1e-8]}, cv=GroupKFold(2),
                          scoring=peak_at_1000).fit(log, groups=log.groups)
    with pytest.warns(GridEdgeWarning):
        edges = check_grid_edge(search)
    record = search_record(search, scoring_name="peak", edges=edges)
    assert record["parameters"] == ["C", "solver_tol"] and len(record["candidates"]) == 6
    assert record["chosen"] == [10.0, record["chosen"][1]] and record["edges"]["C"] == "high"
    lines = selection_lines(record)
    assert len(lines) == 1 + 6 + 1 and sum("<- chosen" in line for line in lines) == 1
    assert "C at its high edge" in lines[-1]
    model = search.best_estimator_
    model.selection_ = record
    save_model(model, tmp_path / "m.npz")
    assert load_model(tmp_path / "m.npz").selection_ == record
    bad = dict(record, chosen=[5.0, 1e-6])
    model.selection_ = bad
    with pytest.raises(ValueError, match="not one of the candidates"):
        save_model(model, tmp_path / "bad.npz")


def test_a_choice_parameter_is_recorded_as_text_printed_and_saved(log, tmp_path):
    """A grid may hold choices (GBDT_GRID's ``objective``): the record keeps them as strings beside the
    numbers, the table prints them, the model file holds them, and a chosen value off the grid is refused."""
    from counterfactual_ltr.model_selection import search_record

    search = GridSearchCV(SVMPropRank(), {"C": [0.1, 10], "solver": ["auto", "newton"]}, cv=GroupKFold(2),
                          scoring=peak_at_1000).fit(log, groups=log.groups)
    with pytest.warns(GridEdgeWarning):
        edges = check_grid_edge(search)
    assert "solver" not in edges                          # a choice has no edge
    record = search_record(search, scoring_name="peak", edges=edges)
    assert record["parameters"] == ["C", "solver"]
    assert sorted(map(tuple, record["candidates"])) == [(0.1, "auto"), (0.1, "newton"), (10.0, "auto"),
                                                        (10.0, "newton")]
    assert record["chosen"] == [10.0, search.best_params_["solver"]]
    lines = selection_lines(record)
    assert [line.split()[:2] for line in lines[1:5]] == [[f"{c:g}", s] for c, s in record["candidates"]]
    model = search.best_estimator_
    model.selection_ = record
    save_model(model, tmp_path / "m.npz")
    assert load_model(tmp_path / "m.npz").selection_ == record
    model.selection_ = dict(record, chosen=[10.0, "primal"])
    with pytest.raises(ValueError, match="not one of the candidates"):
        save_model(model, tmp_path / "bad.npz")
    search.cv_results_["params"][0]["solver"] = None
    with pytest.raises(ValueError, match="numbers or short strings.*solver = None"):
        search_record(search)
