"""RankSVM, SVM PropRank and SVM PropDCG against cvxpy references, and their scikit-learn behaviour."""

import pickle
import warnings

import cvxpy as cp
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, GroupKFold

from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog, PositionBasedPropensity
from counterfactual_ltr._segments import offsets_from_lengths, within_query_pairs
from counterfactual_ltr.estimators import RankSVM, SVMPropDCG, SVMPropRank, click_pairs
from counterfactual_ltr.evaluation import snips_scorer
from counterfactual_ltr.metrics import get_lambda


def _small_log(seed=0, n_queries=8, n_passes=6, n_features=4):
    data = make_ranking(n_queries=n_queries, n_docs=(3, 8), n_features=n_features, random_state=seed)
    log = simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(1.0, 0.1, 1.0), n_passes, random_state=seed)
    return data, log


def _cvx_pairwise(X, i, j, c, C):
    w = cp.Variable(X.shape[1])
    D = X[i] - X[j]
    objective = 0.5 * cp.sum_squares(w) + C * cp.sum(cp.multiply(c, cp.pos(1 - D @ w)))
    problem = cp.Problem(cp.Minimize(objective))
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return problem.value, w.value


@pytest.mark.parametrize("C", [0.1, 3.0, 100.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_proprank_matches_cvxpy(C, seed):
    data, log = _small_log(seed)
    model = SVMPropRank(C=C, solver_tol=1e-9).fit(log)
    agg = log.aggregate()
    _, Xl, i, j, w, _, _ = click_pairs(data, agg.weights)
    ref, _ = _cvx_pairwise(Xl, i, j, w, C / agg.n_clicks)
    # objective_ is the bound with lambda(1 + H) = 1 + H: the QP value plus C/n * sum W.
    constant = C / agg.n_clicks * agg.weights.sum()
    assert model.objective_ == pytest.approx(ref + constant, rel=1e-6)


@pytest.mark.parametrize("C", [0.05, 1.0, 30.0])
def test_ranksvm_matches_cvxpy(C):
    data = make_ranking(n_queries=6, n_docs=(3, 7), n_features=3, random_state=4)
    model = RankSVM(C=C, tol=1e-9).fit(data.X, data.y, qid=data.qid)
    i, j = within_query_pairs(data.query_offsets)
    keep = data.y[i] > data.y[j]
    ref, _ = _cvx_pairwise(data.X, i[keep], j[keep], np.ones(keep.sum()), C / data.n_queries)
    assert model.objective_ == pytest.approx(ref, rel=1e-6)


def test_one_ccp_step_matches_cvxpy():
    data, log = _small_log(2)
    C = 5.0
    model = SVMPropDCG(C=C, max_ccp_iter=1, solver_tol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # one CCP step is not convergence
        model.fit(log)
    agg = log.aggregate()
    _, Xl, i, j, W, owner, clicked = click_pairs(data, agg.weights)
    lam = get_lambda("dcg")
    # From w = 0 every hinge is 1: H_j = m_q - 1, so the linearised weights are W_j lambda'(m_q).
    H0 = np.bincount(owner, np.ones_like(W), minlength=len(clicked))
    c = (agg.weights[clicked] * lam.derivative(1 + H0))[owner]
    ref, w_ref = _cvx_pairwise(Xl, i, j, c, C / agg.n_clicks)
    D = Xl[i] - Xl[j]
    mine = 0.5 * model.coef_ @ model.coef_ + C / agg.n_clicks * np.sum(c * np.maximum(0, 1 - D @ model.coef_))
    assert mine == pytest.approx(ref, rel=1e-6)


@pytest.mark.parametrize("C", [0.3, 10.0, 300.0])
def test_ccp_objective_non_increasing(C):
    _, log = _small_log(5, n_queries=15, n_passes=10)
    model = SVMPropDCG(C=C, max_ccp_iter=20, tol=1e-8).fit(log)
    history = model.objective_history_
    assert len(history) == model.n_ccp_iter_ + 1
    assert np.all(np.diff(history) <= 1e-7 * np.abs(history[:-1]).max())
    assert len(model.train_snips_history_) == model.n_ccp_iter_
    # inexact CCP: the subproblems' tolerances only tighten, never past solver_tol
    tols = model.inner_tol_
    assert len(tols) == model.n_ccp_iter_ and np.all(np.diff(tols) <= 0) and tols.min() >= model.solver_tol


@pytest.mark.parametrize("C", [10.0, 100.0])
@pytest.mark.parametrize("n_docs, density", [((3, 8), 1.0), (80, 0.3)])
def test_ccp_result_is_a_fixed_point(C, n_docs, density):
    """The final CCP iterate solves its own linearised QP (cvxpy reference), on explicit and implicit pairs.

    80 candidates per query take the solver's implicit-pair path; sparse features in [0, 1] are
    the data on which the inner Newton iterations used to grow over the CCP steps.
    """
    data = make_ranking(n_queries=8, n_docs=n_docs, n_features=5, density=density, random_state=3)
    log = simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(1.0, 0.1, 1.0), 4, random_state=3)
    model = SVMPropDCG(C=C, max_ccp_iter=200, tol=1e-9, solver_tol=1e-10).fit(log)
    assert model.converged_
    agg = log.aggregate()
    _, Xl, i, j, W, owner, clicked = click_pairs(data, agg.weights)
    assert (n_docs == 80) == (i.size >= 64 * len(clicked))      # which solver path ran
    lam = get_lambda("dcg")
    D = Xl[i] - Xl[j]
    hinge = np.maximum(0, 1 - D @ model.coef_)
    H = np.bincount(owner, hinge, minlength=len(clicked))
    c = (agg.weights[clicked] * lam.derivative(1 + H))[owner]
    C_n = C / agg.n_clicks
    ref, _ = _cvx_pairwise(Xl, i, j, c, C_n)
    mine = 0.5 * model.coef_ @ model.coef_ + C_n * np.sum(c * hinge)
    assert mine == pytest.approx(ref, rel=1e-6)


def _repeat_log(log, k):
    lengths = np.tile(np.diff(log.session_offsets), k)
    return ClickLog(log.data, np.tile(log.session_query, k), offsets_from_lengths(lengths),
                    np.tile(log.docs, k), np.tile(log.clicks, k))


@pytest.mark.parametrize("Estimator", [SVMPropRank, SVMPropDCG, RankSVM])
def test_repeated_log_gives_same_model(Estimator):
    _, log = _small_log(6, n_queries=12, n_passes=5)
    a = Estimator(C=10.0).fit(log)
    b = Estimator(C=10.0).fit(_repeat_log(log, 3))
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-4, atol=1e-6)


def test_gridsearch_groupkfold_snips_and_pickle():
    data, log = _small_log(7, n_queries=30, n_passes=5)
    search = GridSearchCV(SVMPropDCG(max_ccp_iter=3), {"C": [0.1, 10.0]}, cv=GroupKFold(n_splits=3),
                          scoring=snips_scorer("dcg"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(log, groups=log.groups)
    assert search.best_params_["C"] in (0.1, 10.0)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    model = search.best_estimator_
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(data.X), model.predict(data.X))
    fresh = clone(model)
    assert fresh.get_params() == model.get_params() and not hasattr(fresh, "coef_")


def test_misspecified_propensity_changes_model():
    _, log = _small_log(8, n_queries=20, n_passes=5)
    true = SVMPropRank(C=10.0, propensity=PositionBasedPropensity(1.0)).fit(log)
    wrong = SVMPropRank(C=10.0, propensity=PositionBasedPropensity(2.0)).fit(log)
    clipped = SVMPropRank(C=10.0, propensity=PositionBasedPropensity(2.0, clip=0.5)).fit(log)
    assert not np.allclose(true.coef_, wrong.coef_)
    assert not np.allclose(wrong.coef_, clipped.coef_)


def test_bad_input():
    data, log = _small_log(9)
    with pytest.raises(ValueError, match="C must be"):
        SVMPropRank(C=0).fit(log)
    with pytest.raises(ValueError, match="C must be"):
        RankSVM(C=-1).fit(data.X, data.y, qid=data.qid)
    with pytest.raises(ValueError, match="no clicks"):
        no_clicks = ClickLog(data, log.session_query, log.session_offsets, log.docs, np.zeros(log.n_items, bool))
        SVMPropDCG().fit(no_clicks)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        SVMPropRank(propensity=lambda positions: np.zeros(len(positions))).fit(log)
    with pytest.raises(ValueError, match="missing"):
        ClickLog(data, [0], [0, 2], [0, data.n_docs + 5], [1, 0])
    with pytest.raises(ValueError, match="ClickLog"):
        SVMPropRank().fit(data.X)
    with pytest.raises(ValueError, match="qid"):
        RankSVM().fit(data.X, data.y)


def test_iteration_limit_warns_and_records():
    _, log = _small_log(10, n_queries=20, n_passes=5)
    with pytest.warns(ConvergenceWarning):
        model = SVMPropRank(C=1000.0, max_iter=1, solver_tol=1e-12).fit(log)
    assert model.converged_ is False
    with pytest.warns(ConvergenceWarning):
        model = SVMPropDCG(C=10.0, max_ccp_iter=1, tol=1e-12).fit(log)
    assert model.converged_ is False
