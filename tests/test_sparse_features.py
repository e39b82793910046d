"""Sparse (CSR) features end to end: loader, data set, simulation, SVM estimators, scoring, preprocessors."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import MaxAbsScaler

from click_sim import load_letor, make_ranking, simulate_clicks, train_production_ranker
from counterfactual_ltr import RankingDataset
from counterfactual_ltr.estimators import RankSVM, SVMPropDCG, SVMPropRank


@pytest.fixture(scope="module")
def pair():
    kw = dict(n_queries=60, n_docs=(5, 20), n_features=40, density=0.2, random_state=3)
    return make_ranking(**kw), make_ranking(sparse=True, **kw)


def test_sparse_data_set_keeps_csr_and_subsets(pair):
    dense, csr = pair
    assert csr.is_sparse and not dense.is_sparse and sp.isspmatrix_csr(csr.X)
    sub = csr.subset([3, 1])
    assert sub.is_sparse
    np.testing.assert_array_equal(sub.X.toarray(), dense.subset([3, 1]).X)


def test_letor_loader_keeps_sparse_files_sparse(tmp_path, pair):
    from sklearn.datasets import dump_svmlight_file

    dense, _ = pair
    path = tmp_path / "sparse.txt"
    dump_svmlight_file(dense.X, dense.y, str(path), query_id=dense.qid, zero_based=False)
    auto = load_letor(path)                                   # 20 % non-zero: CSR
    assert auto.is_sparse
    np.testing.assert_allclose(auto.X.toarray(), dense.X, rtol=1e-15)
    forced = load_letor(path, sparse=False)
    assert not forced.is_sparse and np.array_equal(forced.X, auto.X.toarray())
    # a dense file (every value non-zero) stays dense by default, sparse on request
    path2 = tmp_path / "dense.txt"
    full = make_ranking(n_queries=5, n_features=4, random_state=0)
    dump_svmlight_file(full.X, full.y, str(path2), query_id=full.qid, zero_based=False)
    assert not load_letor(path2).is_sparse and load_letor(path2, sparse=True).is_sparse
    with pytest.raises(TypeError, match="sparse must be"):
        load_letor(path, sparse="yes")


def test_non_finite_sparse_values_are_named():
    X = sp.csr_matrix(np.array([[0.0, 1.0, 0.0], [0.0, 0.0, np.nan]]))
    with pytest.raises(ValueError, match=r"row 1, column 2"):
        RankingDataset(X, [1, 0], [1, 1])
    data = make_ranking(n_queries=10, n_features=5, random_state=0, sparse=True, density=0.5)
    model = RankSVM().fit(data)
    bad = data.X.copy()
    bad.data[3] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        model.predict(bad)
    # one checked_csr serves the data set, the solver and prediction: dtype and shape too
    with pytest.raises(TypeError, match="must hold real numbers"):
        RankingDataset(sp.csr_matrix(np.eye(2) * 1j), [1, 0], [1, 1])
    with pytest.raises(TypeError, match="must hold real numbers"):
        model.predict(sp.csr_matrix(np.ones((2, 5)) * 1j))
    with pytest.raises(ValueError, match="2-D"):
        RankingDataset(sp.coo_array(np.ones(2)), [1, 0], [1, 1])


def _simulate(data, production):
    return simulate_clicks(data, production, n_passes=3, random_state=1)


@pytest.mark.parametrize("Est, kwargs", [(SVMPropRank, dict(C=10.0)), (SVMPropDCG, dict(C=10.0))])
def test_propensity_svms_on_sparse_match_dense(pair, Est, kwargs):
    dense, csr = pair
    production = train_production_ranker(dense, fraction=0.2, random_state=0)
    scores = production.predict(dense.X)
    # same queries, same RankSVM up to its solver tolerance (relative gap 1e-6)
    np.testing.assert_allclose(train_production_ranker(csr, fraction=0.2, random_state=0).predict(csr), scores,
                               atol=1e-3 * np.abs(scores).max())
    log_d, log_s = _simulate(dense, scores), _simulate(csr, scores)
    a = Est(solver_tol=1e-8, **kwargs).fit(log_d)
    b = Est(solver_tol=1e-8, **kwargs).fit(log_s)
    assert b.objective_ == pytest.approx(a.objective_, rel=1e-5)
    # PropDCG's CCP is non-convex: the same objective, nearby weights
    ref = a.predict(dense)
    np.testing.assert_allclose(b.predict(csr), ref, atol=1e-2 * np.abs(ref).max())
    assert b.score(log_s) == pytest.approx(a.score(log_d), rel=1e-2)
    assert b.score(csr) == pytest.approx(a.score(dense), abs=1e-2)


def test_rank_svm_on_sparse_matches_dense_and_keeps_X_sparse(pair, monkeypatch):
    import counterfactual_ltr.solvers as solvers

    dense, csr = pair
    seen = []
    real = solvers.solve_pairwise_hinge

    def spy(X, *args, **kwargs):
        seen.append(sp.issparse(X))
        return real(X, *args, **kwargs)

    monkeypatch.setattr("counterfactual_ltr.estimators.svm.solve_pairwise_hinge", spy)
    a = RankSVM(C=5.0, tol=1e-9).fit(dense)
    b = RankSVM(C=5.0, tol=1e-9).fit(csr)
    assert seen == [False, True]
    assert b.objective_ == pytest.approx(a.objective_, rel=1e-7)
    assert b.score(csr) == pytest.approx(a.score(dense), abs=1e-6)


def test_sparse_preserving_preprocessor(pair):
    dense, csr = pair
    log = _simulate(csr, csr.X[:, 0].toarray().ravel())
    model = SVMPropRank(C=1.0, preprocessor=MaxAbsScaler()).fit(log)
    ref = SVMPropRank(C=1.0, preprocessor=MaxAbsScaler()).fit(_simulate(dense, dense.X[:, 0]))
    assert model.objective_ == pytest.approx(ref.objective_, rel=1e-5)
    assert model.predict(csr).shape == (csr.n_docs,)


def test_simulation_and_offline_evaluation_on_sparse(pair):
    from counterfactual_ltr.evaluation import dr_estimate, snips_estimate

    dense, csr = pair
    ranker = RankSVM(C=1.0).fit(dense.subset(np.arange(10)))
    log_d = simulate_clicks(dense, ranker, n_passes=3, random_state=4)
    log_s = simulate_clicks(csr, ranker, n_passes=3, random_state=4)      # a fitted ranker scores CSR rows
    np.testing.assert_array_equal(log_s.docs, log_d.docs)
    np.testing.assert_array_equal(log_s.clicks, log_d.clicks)
    assert snips_estimate(log_s, ranker, n_bootstrap=0).value == pytest.approx(
        snips_estimate(log_d, ranker, n_bootstrap=0).value, rel=1e-12)
    dr_s = dr_estimate(log_s, ranker, n_bootstrap=0, random_state=0).value   # ridge relevance model on CSR
    dr_d = dr_estimate(log_d, ranker, n_bootstrap=0, random_state=0).value
    assert dr_s == pytest.approx(dr_d, rel=1e-4)
