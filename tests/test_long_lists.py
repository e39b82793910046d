"""Long candidate lists and web-like features: the generator's options and the estimators on them."""

import numpy as np
import pytest

import counterfactual_ltr.solvers.pairwise as solvers
from click_sim import make_ranking, simulate_clicks
from counterfactual_ltr.estimators import SVMPropDCG, SVMPropRank, click_pair_set, click_pairs


def test_sparse_features_have_the_asked_density_and_range():
    data = make_ranking(n_queries=60, n_docs=15, n_features=300, density=0.32, random_state=0)
    nonzero = data.X != 0
    assert abs(nonzero.mean() - 0.32) < 0.01
    assert data.X.min() == 0.0 and data.X.max() <= 1.0 and np.all(data.X[nonzero] > 0)
    assert set(np.unique(data.y)) == {0, 1, 2}


def test_correlated_features_share_one_factor():
    data = make_ranking(n_queries=400, n_docs=20, n_features=6, correlation=0.7, random_state=1)
    corr = np.corrcoef(data.X.T)
    off = corr[~np.eye(6, dtype=bool)]
    assert np.all(np.abs(off - 0.7) < 0.05)
    plain = make_ranking(n_queries=400, n_docs=20, n_features=6, random_state=1)
    assert np.all(np.abs(np.corrcoef(plain.X.T)[~np.eye(6, dtype=bool)]) < 0.05)


def test_long_lists_and_defaults_unchanged():
    data = make_ranking(n_queries=3, n_docs=1000, random_state=0)
    assert np.all(data.query_lengths == 1000)
    # the new options default to the old generator, draw for draw
    a = make_ranking(n_queries=20, random_state=5)
    b = make_ranking(n_queries=20, random_state=5, density=1.0, correlation=0.0)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)


@pytest.mark.parametrize("kwargs, error", [(dict(density=0.0), ValueError), (dict(density=1.5), ValueError),
                                           (dict(correlation=1.0), ValueError), (dict(correlation=-0.1), ValueError),
                                           (dict(density="x"), TypeError)])
def test_generator_options_are_checked(kwargs, error):
    with pytest.raises(error):
        make_ranking(n_queries=5, **kwargs)


@pytest.fixture
def long_log():
    data = make_ranking(n_queries=12, n_docs=150, n_features=5, density=0.5, random_state=3)
    return simulate_clicks(data, np.random.default_rng(0).normal(size=data.n_docs), n_passes=3, random_state=0)


def test_click_pair_set_is_click_pairs(long_log):
    agg = long_log.aggregate()
    rows, Xl, i, j, w, owner, clicked = click_pairs(agg.data, agg.weights)
    rows2, Xl2, pairs, clicked2 = click_pair_set(agg.data, agg.weights)
    i2, j2, w2 = pairs.explicit()
    np.testing.assert_array_equal(rows, rows2)
    np.testing.assert_array_equal(clicked, clicked2)
    np.testing.assert_array_equal(i, i2)
    np.testing.assert_array_equal(j, j2)
    np.testing.assert_array_equal(w, w2)
    s = Xl @ np.arange(1.0, 6.0)
    hinge = np.bincount(owner, np.maximum(0, 1 - (s[i] - s[j])), minlength=clicked.size)
    np.testing.assert_allclose(pairs.hinge_sums(s), hinge, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("Estimator", [SVMPropRank, SVMPropDCG])
def test_estimators_same_fit_on_either_pair_path(Estimator, long_log, monkeypatch):
    """149 pairs per click: the implicit path is chosen; forcing explicit pairs gives the same fit."""
    kw = dict(C=10.0, solver_tol=1e-8)
    if Estimator is SVMPropDCG:                 # the CCP run to its fixed point, not to a 1e-3 change
        kw.update(tol=1e-7, max_ccp_iter=200)
    implicit = Estimator(**kw).fit(long_log)
    monkeypatch.setattr(solvers, "_IMPLICIT_MIN_PAIRS_PER_ANCHOR", np.inf)
    explicit = Estimator(**kw).fit(long_log)
    assert implicit.converged_ and explicit.converged_
    assert implicit.objective_ == pytest.approx(explicit.objective_, rel=1e-6)
    np.testing.assert_allclose(implicit.coef_, explicit.coef_, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("long_lists", [True, False])
def test_train_snips_is_the_snips_of_the_fitted_ranker(long_lists, long_log):
    """train_snips_history_[-1]: SNIPS of DCG per clicked document, ranked by the final weights on all the data."""
    from counterfactual_ltr._segments import rank_within_queries
    from counterfactual_ltr.evaluation import metric_weight

    log = long_log if long_lists else simulate_clicks(make_ranking(n_queries=30, n_docs=12, n_features=5, random_state=4),
                                                      np.random.default_rng(1).normal(size=360), n_passes=3,
                                                      random_state=1)
    model = SVMPropDCG(C=10.0).fit(log)
    agg = log.aggregate()
    ranks = rank_within_queries(agg.data.X @ model.coef_, agg.data.query_offsets)
    clicked = np.flatnonzero(agg.weights)
    w = agg.weights[clicked]
    expected = np.sum(w * metric_weight("dcg")(ranks[clicked])) / np.sum(w)
    assert model.train_snips_history_[-1] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("Estimator", [SVMPropRank, SVMPropDCG])
@pytest.mark.parametrize("n_docs", [8, 150])                # explicit and implicit pairs
def test_queries_without_clicks_are_kept_rather_than_copying_X(Estimator, n_docs, monkeypatch):
    """Nearly every query clicked: no copy of X, and the same fit as on the copy without the others."""
    import counterfactual_ltr.estimators.svm as svm
    from counterfactual_ltr import ClickLog

    data = make_ranking(n_queries=30, n_docs=n_docs, n_features=5, random_state=4)
    log = simulate_clicks(data, np.random.default_rng(1).normal(size=data.n_docs), n_passes=3, random_state=2)
    clicks = np.where(np.repeat(log.session_query, np.diff(log.session_offsets)) == 0, 0, log.clicks)
    log = ClickLog(data, log.session_query, log.session_offsets, log.docs, clicks)   # query 0: no clicks
    weights = log.aggregate().weights
    assert not weights[:n_docs].any()
    for pair_set in (True, False):
        out = click_pair_set(data, weights) if pair_set else click_pairs(data, weights)
        assert out[1] is data.X and out[0].tolist() == list(range(data.n_docs))
    kw = dict(C=10.0, solver_tol=1e-8)
    if Estimator is SVMPropDCG:
        # Exact subproblems, the CCP to its fixed point: descent-only steps stop wherever the Newton
        # directions lead, and those come from Hessians sampled over every k-th query.
        monkeypatch.setattr(svm, "_CCP_DESCENT_FACTOR", 0.0)
        kw.update(tol=1e-7, max_ccp_iter=200)
    kept = Estimator(**kw).fit(log)
    monkeypatch.setattr(svm, "_COPY_MIN_UNCLICKED_SHARE", 0.0)
    rows, Xl, _, _ = click_pair_set(data, weights)
    assert rows.min() == n_docs and Xl.shape[0] == rows.size < data.n_docs
    copied = Estimator(**kw).fit(log)
    assert kept.objective_ == pytest.approx(copied.objective_, rel=1e-9)
    np.testing.assert_allclose(kept.coef_, copied.coef_, rtol=1e-4, atol=1e-6)   # ||dw||^2 <= 2 gaps
