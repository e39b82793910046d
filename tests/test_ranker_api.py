"""What a new user reaches for: ``score`` on labelled data, ``preprocessor=`` in model selection, metrics by qid,
progress bars."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.preprocessing import StandardScaler

from click_sim import make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog, RankingDataset
from counterfactual_ltr.estimators import DeepPropDCG, RankSVM, SLAMRanker, SVMPropDCG, SVMPropRank
from counterfactual_ltr.evaluation import snips_estimate, snips_scorer
from counterfactual_ltr.metrics import average_precision, dcg, ndcg, ranks


@pytest.fixture(scope="module")
def scaled_problem():
    """Features spanning orders of magnitude; a log over the first 40 of 60 queries."""
    data = make_ranking(n_queries=60, n_docs=(4, 12), n_features=5, random_state=5)
    X = data.X * np.array([1.0, 1e3, 1e-3, 1e5, 10.0]) + np.array([0.0, 5e3, 0.0, -2e5, 3.0])
    data = RankingDataset(X, data.y, data.qid)
    log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=1)
    train_log = log[np.flatnonzero(log.session_query < 40)]
    return data, train_log


def test_preprocessor_equals_scaling_the_training_rows_by_hand(scaled_problem):
    """Fitting with preprocessor=StandardScaler() = fitting on features scaled by the training queries' rows."""
    data, log = scaled_problem
    model = SVMPropDCG(C=1.0, preprocessor=StandardScaler()).fit(log)
    rows = data.rows_of(np.unique(log.session_query))
    mean, std = data.X[rows].mean(axis=0), data.X[rows].std(axis=0)
    np.testing.assert_allclose(model.preprocessor_.mean_, mean)      # the training fold's rows only
    assert not np.allclose(mean, data.X.mean(axis=0))
    by_hand = RankingDataset((data.X - mean) / std, data.y, data.qid)
    log_by_hand = ClickLog(by_hand, log.session_query, log.session_offsets, log.docs, log.clicks, log.session_ids)
    reference = SVMPropDCG(C=1.0).fit(log_by_hand)
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(model.predict(data.X), reference.predict(by_hand.X), rtol=1e-7, atol=1e-9)
    assert model.n_features_in_ == data.n_features
    assert model.objective_history_[-1] == pytest.approx(reference.objective_history_[-1], rel=1e-9)


@pytest.mark.parametrize("make", [lambda: RankSVM(C=1.0), lambda: SLAMRanker(C=10.0)])
def test_preprocessor_on_full_information_fits(make, scaled_problem):
    data, _ = scaled_problem
    model = clone(make()).set_params(preprocessor=StandardScaler()).fit(data.X, data.y, qid=data.qid)
    scaled = RankingDataset(StandardScaler().fit_transform(data.X), data.y, data.qid)
    reference = make().fit(scaled)
    np.testing.assert_allclose(model.predict(data), reference.predict(scaled), rtol=1e-6, atol=1e-8)


def test_deep_preprocessor_predicts_through_the_fitted_transformer(scaled_problem):
    data, log = scaled_problem
    model = DeepPropDCG(hidden_layer_sizes=(3,), max_epochs=2, random_state=0, preprocessor=StandardScaler()).fit(log)
    Xt = model.preprocessor_.transform(data.X)
    np.testing.assert_allclose(model.predict(data.X), model.model_.forward(Xt).ravel(), rtol=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # with_std=False on raw scales
def test_grid_search_tunes_the_preprocessor(scaled_problem):
    data, log = scaled_problem
    est = SVMPropRank(preprocessor=StandardScaler())
    assert "preprocessor__with_mean" in est.get_params()
    grid = {"C": [0.1, 10.0], "preprocessor__with_std": [True, False]}
    search = GridSearchCV(est, grid, cv=GroupKFold(2), scoring=snips_scorer("dcg")).fit(log, groups=log.groups)
    assert len(search.cv_results_["params"]) == 4
    best = search.best_estimator_
    assert best.preprocessor_.with_std == search.best_params_["preprocessor__with_std"]
    assert est.preprocessor is not best.preprocessor  # cloned, the original is untouched
    assert not hasattr(est.preprocessor, "mean_")


def test_bad_preprocessor_is_a_type_error(scaled_problem):
    _, log = scaled_problem
    with pytest.raises(TypeError, match="preprocessor must be a scikit-learn transformer"):
        SVMPropRank(preprocessor="standard").fit(log)


def test_score_is_ndcg10_on_labelled_data_and_snips_on_a_log(scaled_problem):
    data, log = scaled_problem
    model = SVMPropRank(C=1.0, propensity=0.8, preprocessor=StandardScaler()).fit(log)
    expected = ndcg(model.predict(data), data.y, data.query_offsets, k=10)
    assert model.score(data) == pytest.approx(expected, rel=1e-12)
    assert model.score(data.X, data.y, data.qid) == pytest.approx(expected, rel=1e-12)
    assert model.score(data, k=3) == pytest.approx(ndcg(model.predict(data), data.y, data.query_offsets, k=3))
    assert model.score(log) == pytest.approx(snips_estimate(log, model, metric="dcg", propensity=0.8).value)
    with pytest.raises(ValueError, match="labelled RankingDataset"):
        model.score(data.X)
    # Without a scoring, GridSearchCV ranks the candidates by score(): SNIPS-DCG on the held-out clicks.
    est = SVMPropRank(preprocessor=StandardScaler())
    search = GridSearchCV(est, {"C": [0.1, 10.0]}, cv=GroupKFold(2)).fit(log, groups=log.groups)
    explicit = GridSearchCV(est, {"C": [0.1, 10.0]}, cv=GroupKFold(2),
                            scoring=snips_scorer("dcg")).fit(log, groups=log.groups)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], explicit.cv_results_["mean_test_score"])


def test_metrics_take_query_ids(synthetic_data):
    data = synthetic_data
    scores = np.random.default_rng(0).normal(size=data.n_docs)
    for metric in (ndcg, dcg, average_precision):
        assert metric(scores, data.y, qid=data.qid) == metric(scores, data.y, data.query_offsets)
    np.testing.assert_array_equal(ranks(scores, qid=data.qid), ranks(scores, data.query_offsets))
    with pytest.raises(ValueError, match="pass it as qid="):
        ndcg(scores, data.y, data.qid + 1)
    with pytest.raises(ValueError, match="either query_offsets"):
        ndcg(scores, data.y)
    with pytest.raises(ValueError, match="either query_offsets"):
        ndcg(scores, data.y, data.query_offsets, qid=data.qid)
    with pytest.raises(ValueError, match="contiguous: qid 1 reappears at row 2"):
        ndcg([1.0, 2.0, 3.0], [1, 0, 1], qid=[1, 2, 1])
    with pytest.raises(ValueError, match="mismatched lengths"):
        ndcg([1.0, 2.0, 3.0], [1, 0, 1], qid=[1, 1])


def test_progress_bars_show_when_asked_and_change_nothing(capsys):
    from counterfactual_ltr._progress import show_progress

    data = make_ranking(n_queries=10, random_state=0)
    quiet = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    assert capsys.readouterr().err == ""
    with show_progress(True):
        loud = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
        SVMPropDCG(C=1.0).fit(loud)
    err = capsys.readouterr().err
    assert "simulating clicks" in err and "CCP" in err
    assert loud.equals(quiet)
