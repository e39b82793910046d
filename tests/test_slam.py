"""SLAM / max-pair / ListNet surrogates and the batch SLAMRanker."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from counterfactual_ltr._segments import offsets_from_lengths
from counterfactual_ltr.surrogates import (listnet_loss, lower_grade_max, max_pair_loss, slam_loss,
                                           slam_weights)

# ----------------------------------------------------------------------------- strategies


@st.composite
def ranking_problem(draw, max_queries=4, max_docs=8, max_grade=3):
    """Queries with graded labels (ties likely) and scores on a coarse grid (score ties likely)."""
    nq = draw(st.integers(1, max_queries))
    lengths = draw(st.lists(st.integers(1, max_docs), min_size=nq, max_size=nq))
    n = sum(lengths)
    labels = np.array(draw(st.lists(st.integers(0, max_grade), min_size=n, max_size=n)), dtype=np.int64)
    grid = draw(st.booleans())
    if grid:
        scores = np.array(draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), dtype=np.float64) / 2
    else:
        scores = np.array(draw(st.lists(st.floats(-5, 5, allow_nan=False), min_size=n, max_size=n)))
    return scores, labels, offsets_from_lengths(lengths)


def _metric_losses(scores, labels, offsets, k):
    from counterfactual_ltr.metrics import average_precision, ndcg

    return {
        "ndcg": 1.0 - ndcg(scores, labels, offsets, reduce=None),
        "ndcg@k": 1.0 - ndcg(scores, labels, offsets, k=k, reduce=None),
        "ap": 1.0 - average_precision(scores, labels, offsets, threshold=1, reduce=None),
    }


def _has_relevant(labels, offsets):
    return np.add.reduceat((labels >= 1).astype(int), offsets[:-1]) > 0


# ----------------------------------------------------------------------------- bounds


@settings(max_examples=300, deadline=None)
@given(ranking_problem(), st.integers(1, 6))
def test_slam_and_max_pair_upper_bound_the_measure_losses(problem, k):
    scores, labels, offsets = problem
    losses = _metric_losses(scores, labels, offsets, k)
    # Queries without a relevant document have no defined NDCG/AP (the metric's no_relevant
    # convention decides); SLAM is 0 there -- the bound is stated for the other queries.
    keep = _has_relevant(labels, offsets)
    mp, _ = max_pair_loss(scores, labels, offsets, reduce=None)
    for kind, target in losses.items():
        kw = {"k": k} if kind == "ndcg@k" else {}
        slam, _ = slam_loss(scores, labels, offsets, weights=kind, reduce=None, **kw)
        assert np.all(slam[keep] >= target[keep] - 1e-9), kind
        assert np.all(mp[keep] >= target[keep] - 1e-9), kind


@settings(max_examples=200, deadline=None)
@given(ranking_problem())
def test_weights_sum_to_one_and_are_exchangeable(problem):
    _, labels, offsets = problem
    keep = _has_relevant(labels, offsets)
    for kind, kw in (("ndcg", {}), ("ndcg@k", {"k": 3}), ("ap", {})):
        v = slam_weights(labels, offsets, kind, **kw)
        assert np.all(v >= 0)
        sums = np.add.reduceat(v, offsets[:-1])
        np.testing.assert_allclose(sums[keep], 1.0)
        np.testing.assert_allclose(sums[~keep], 0.0)
        # equal grades in a query get equal weights
        seg = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        key = seg * 10 + labels
        for u in np.unique(key):
            assert np.ptp(v[key == u]) < 1e-12


def test_weights_examples_and_ndcg_monotone_in_grade():
    v = slam_weights([3, 2, 2, 0, 1], [0, 5])
    g = np.array([7.0, 3.0, 3.0, 0.0, 1.0])
    d = 1 / np.log2(np.arange(2, 7))
    Z = g[[0, 1, 2, 4, 3]] @ d
    expected = np.array([7 * d[0], 3 * (d[1] + d[2]) / 2, 3 * (d[1] + d[2]) / 2, 0.0, 1 * d[3]]) / Z
    np.testing.assert_allclose(v, expected)
    # NDCG@k: grade blocks past k get nothing
    vk = slam_weights([3, 2, 2, 0, 1], [0, 5], kind="ndcg@k", k=2)
    Zk = 7 * d[0] + 3 * d[1]
    np.testing.assert_allclose(vk, [7 * d[0] / Zk, 3 * d[1] / 2 / Zk, 3 * d[1] / 2 / Zk, 0, 0])
    # binary labels: all kinds give 1 / (number of relevant)
    for kind, kw in (("ndcg", {}), ("ndcg@k", {"k": 2}), ("ap", {})):
        np.testing.assert_allclose(slam_weights([1, 0, 1, 1], [0, 4], kind, **kw), [1 / 3, 0, 1 / 3, 1 / 3])


# ----------------------------------------------------------------------------- LP of Eq. 8


def _slam_lp(s, R, v, margin):
    import cvxpy as cp

    m = len(s)
    delta = cp.Variable(m)
    cons = [delta >= 0]
    for i in range(m):
        for j in range(m):
            if R[i] > R[j]:
                cons.append(s[i] + delta[i] >= margin + s[j])
    prob = cp.Problem(cp.Minimize(v @ delta), cons)
    prob.solve(solver=cp.CLARABEL)
    return prob.value


def _max_pair_lp(s, R, margin):
    import cvxpy as cp

    delta = cp.Variable()
    cons = [delta >= 0] + [s[i] + delta >= margin + s[j]
                           for i in range(len(s)) for j in range(len(s)) if R[i] > R[j]]
    prob = cp.Problem(cp.Minimize(delta), cons)
    prob.solve(solver=cp.CLARABEL)
    return prob.value


@pytest.mark.parametrize("seed", range(8))
def test_slam_equals_lp_of_eq8(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 9))
    s = rng.normal(size=m)
    R = rng.integers(0, 4, size=m)
    margin = float(rng.choice([0.5, 1.0, 2.0]))
    for kind, kw in (("ndcg", {}), ("ndcg@k", {"k": 3}), ("ap", {})):
        loss, _ = slam_loss(s, R, [0, m], weights=kind, margin=margin, **kw)
        v = slam_weights(R, [0, m], kind, **kw)
        Rl = (R >= 1).astype(int) if kind == "ap" else R
        assert loss == pytest.approx(_slam_lp(s, Rl, v, margin), abs=1e-6)
    assert max_pair_loss(s, R, [0, m], margin=margin)[0] == pytest.approx(_max_pair_lp(s, R, margin), abs=1e-6)


# ----------------------------------------------------------------------------- gradients


def _numeric_grad(f, s, eps=1e-6):
    out = np.empty_like(s)
    for i in range(len(s)):
        e = np.zeros_like(s)
        e[i] = eps
        out[i] = (f(s + e) - f(s - e)) / (2 * eps)
    return out


def _away_from_kinks(s, R, offsets, margin, tol=1e-3):
    """No hinge at 0 and a unique maximiser for every max (where the surrogates are differentiable)."""
    M, _ = lower_grade_max(s, R, offsets)
    c = margin + M - s
    if np.any(np.abs(c[np.isfinite(c)]) < tol):
        return False
    for q in range(len(offsets) - 1):
        sl = slice(offsets[q], offsets[q + 1])
        if len(np.unique(np.round(s[sl], 6))) < offsets[q + 1] - offsets[q]:
            return False
        cq = c[sl][np.isfinite(c[sl])]
        if cq.size > 1 and np.sort(cq)[-1] - np.sort(cq)[-2] < tol:
            return False
        if np.any(np.abs(np.subtract.outer(cq, cq))[~np.eye(cq.size, dtype=bool)] < tol):
            pass  # equal hinges of different documents are fine for SLAM (separate terms)
    return True


@pytest.mark.parametrize("seed", range(20))
def test_subgradients_match_finite_differences(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 9, size=3)
    offsets = offsets_from_lengths(lengths)
    n = offsets[-1]
    R = rng.integers(0, 4, size=n)
    s = rng.normal(scale=2.0, size=n)
    margin = 1.0
    if not _away_from_kinks(s, R, offsets, margin):
        pytest.skip("drawn point lies near a kink")
    cases = [
        (lambda x: slam_loss(x, R, offsets)[0], slam_loss(s, R, offsets)[1]),
        (lambda x: slam_loss(x, R, offsets, weights="ndcg@k", k=2, reduce="mean")[0],
         slam_loss(s, R, offsets, weights="ndcg@k", k=2, reduce="mean")[1]),
        (lambda x: slam_loss(x, R, offsets, weights="ap")[0], None),
        (lambda x: max_pair_loss(x, R, offsets)[0], max_pair_loss(s, R, offsets)[1]),
        (lambda x: listnet_loss(x, R, offsets)[0], listnet_loss(s, R, offsets)[1]),
        (lambda x: listnet_loss(x, R, offsets, target="gain")[0], listnet_loss(s, R, offsets, target="gain")[1]),
    ]
    for f, g in cases[:2] + cases[3:]:
        np.testing.assert_allclose(g, _numeric_grad(f, s), atol=1e-5)
    # AP uses binarised grades: its kinks are those of the binary problem
    Rb = (R >= 1).astype(int)
    if _away_from_kinks(s, Rb, offsets, margin):
        np.testing.assert_allclose(slam_loss(s, R, offsets, weights="ap")[1], _numeric_grad(cases[2][0], s), atol=1e-5)


def test_reduce_modes_and_vectorised_equals_per_query():
    rng = np.random.default_rng(0)
    offsets = offsets_from_lengths([5, 1, 7, 3])
    n = offsets[-1]
    s, R = rng.normal(size=n), rng.integers(0, 3, size=n)
    for f, kw in ((slam_loss, {}), (slam_loss, {"weights": "ap"}), (slam_loss, {"weights": "ndcg@k", "k": 2}),
                  (max_pair_loss, {}), (listnet_loss, {}), (listnet_loss, {"target": "gain"})):
        per_q, g = f(s, R, offsets, reduce=None, **kw)
        total, g_sum = f(s, R, offsets, **kw)
        mean, g_mean = f(s, R, offsets, reduce="mean", **kw)
        assert per_q.shape == (4,)
        assert total == pytest.approx(per_q.sum()) and mean == pytest.approx(per_q.mean())
        np.testing.assert_allclose(g, g_sum)
        np.testing.assert_allclose(g_mean, g / 4)
        for q in range(4):
            sl = slice(offsets[q], offsets[q + 1])
            lq, gq = f(s[sl], R[sl], [0, offsets[q + 1] - offsets[q]], **kw)
            assert lq == pytest.approx(per_q[q])
            np.testing.assert_allclose(gq, g[sl])


def test_examples_by_hand():
    # SLAM NDCG, one query, grades (2, 1, 0): weights 3/Z, 1*D(2)/Z, 0
    s = np.array([0.0, 0.5, 0.2])
    R = np.array([2, 1, 0])
    Z = 3 + 1 / np.log2(3)
    v = np.array([3 / Z, (1 / np.log2(3)) / Z, 0.0])
    # doc 0: max over lower docs of 1 + s_j - s_0 = 1.5 (doc 1); doc 1: 1 + 0.2 - 0.5 = 0.7 (doc 2)
    loss, grad = slam_loss(s, R, [0, 3])
    assert loss == pytest.approx(v[0] * 1.5 + v[1] * 0.7)
    np.testing.assert_allclose(grad, [-v[0], v[0] - v[1], v[1]])
    # max pair: worst is (0, 1) with 1.5
    loss, grad = max_pair_loss(s, R, [0, 3])
    assert loss == pytest.approx(1.5)
    np.testing.assert_allclose(grad, [-1, 1, 0])
    # ListNet softmax target
    loss, grad = listnet_loss(s, R, [0, 3])
    p = np.exp(R) / np.exp(R).sum()
    q = np.exp(s) / np.exp(s).sum()
    assert loss == pytest.approx(-(p * np.log(q)).sum())
    np.testing.assert_allclose(grad, q - p)


def test_single_level_and_no_relevant_queries_give_zero():
    s = np.array([0.3, -1.0, 2.0, 0.0, 1.0])
    offsets = [0, 3, 5]
    for R in ([1, 1, 1, 0, 0], [0, 0, 0, 2, 2]):
        for kind in ("ndcg", "ap"):
            loss, grad = slam_loss(s, R, offsets, weights=kind, reduce=None)
            np.testing.assert_array_equal(loss, 0.0)
            np.testing.assert_array_equal(grad, 0.0)
        loss, grad = max_pair_loss(s, R, offsets, reduce=None)
        np.testing.assert_array_equal(loss, 0.0)
        np.testing.assert_array_equal(grad, 0.0)
    # grades 0 and ... AP with grades {0} only: nothing relevant -> 0 weights
    assert slam_weights([0, 0], [0, 2], "ap").tolist() == [0.0, 0.0]
    # gain target undefined without relevant docs: contributes 0
    loss, grad = listnet_loss([1.0, 2.0], [0, 0], [0, 2], target="gain")
    assert loss == 0.0 and np.all(grad == 0)


def test_bad_input_raises():
    s, R, off = [0.0, 1.0, 2.0], [1, 0, 2], [0, 3]
    with pytest.raises(ValueError, match="k"):
        slam_loss(s, R, off, weights="ndcg@k", k=0)
    with pytest.raises(ValueError, match="k"):
        slam_weights(R, off, "ndcg@k")
    with pytest.raises(ValueError, match="k"):
        slam_weights(R, off, "ndcg", k=3)
    with pytest.raises(ValueError, match="mismatched"):
        slam_loss([0.0, 1.0], R, off)
    with pytest.raises(ValueError, match="mismatched"):
        max_pair_loss(s, [1, 0], off)
    with pytest.raises(ValueError, match="mismatched"):
        listnet_loss(s, R, [0, 2])
    with pytest.raises(ValueError, match="margin"):
        slam_loss(s, R, off, margin=-1)
    with pytest.raises(ValueError, match="weights"):
        slam_loss(s, R, off, weights="dcg")
    with pytest.raises(ValueError, match="weights"):
        slam_loss(s, R, off, weights=[1.0, -1.0, 0.0])
    with pytest.raises(ValueError, match="reduce"):
        slam_loss(s, R, off, reduce="max")
    with pytest.raises(ValueError, match="target"):
        listnet_loss(s, R, off, target="plackett")
    with pytest.raises(ValueError, match="non-finite"):
        slam_loss([0.0, np.nan, 1.0], R, off)
    with pytest.raises(ValueError, match=">= 0"):
        slam_weights([-1, 0, 1], off)


def test_no_pairwise_memory_for_long_lists():
    # 20,000 documents in one query: O(m * levels) work, fast and small.
    rng = np.random.default_rng(0)
    m = 20_000
    s, R = rng.normal(size=m), rng.integers(0, 5, size=m)
    loss, grad = slam_loss(s, R, [0, m])
    M, arg = lower_grade_max(s, R, [0, m])
    top = np.argmax(s)
    assert np.all(M[R > R[top]] == s[top])
    assert np.isfinite(loss) and grad.shape == (m,)


# ----------------------------------------------------------------------------- SLAMRanker


def _cvx_slam_objective(X, y, qid, C, kind, k, margin):
    import cvxpy as cp

    from counterfactual_ltr.datasets import RankingDataset

    data = RankingDataset(X, y, qid)
    labels = data.y.astype(float)
    v = slam_weights(labels, data.query_offsets, kind, k)
    if kind == "ap":
        labels = (labels >= 1).astype(float)
    w = cp.Variable(X.shape[1])
    delta = cp.Variable(len(labels))
    cons = [delta >= 0]
    for q in range(data.n_queries):
        a, b = data.query_offsets[q], data.query_offsets[q + 1]
        for i in range(a, b):
            for j in range(a, b):
                if labels[i] > labels[j]:
                    cons.append(X[i] @ w + delta[i] >= margin + X[j] @ w)
    obj = 0.5 * cp.sum_squares(w) + (C / data.n_queries) * (v @ delta)
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve(solver=cp.CLARABEL)
    return prob.value


@pytest.mark.parametrize("kind,k,C", [("ndcg", None, 1.0), ("ndcg@k", 2, 10.0), ("ap", None, 0.3)])
def test_slam_ranker_matches_cvxpy(kind, k, C):
    pytest.importorskip("counterfactual_ltr.solvers")
    from counterfactual_ltr.estimators.slam import SLAMRanker

    rng = np.random.default_rng(1)
    lengths = [5, 6, 4, 7]
    qid = np.repeat(np.arange(4), lengths)
    X = rng.normal(size=(qid.size, 4))
    y = np.clip(np.round(X @ np.array([1.0, -0.5, 0.3, 0.0]) + rng.normal(scale=0.7, size=qid.size)), 0, 3)
    model = SLAMRanker(C=C, weights=kind, k=k, tol=1e-8, max_iter=5000).fit(X, y, qid=qid)
    ref = _cvx_slam_objective(X, y, qid, C, kind, k, 1.0)
    assert model.objective_ == pytest.approx(ref, abs=1e-6)
    assert model.objective(X, y, qid) == pytest.approx(model.objective_, abs=1e-9)
    assert model.predict(X).shape == (qid.size,)


def test_slam_ranker_sklearn_conventions_and_bad_input():
    from sklearn.base import clone

    from counterfactual_ltr.estimators.slam import SLAMRanker

    est = SLAMRanker(C=2.0, weights="ndcg@k", k=5, margin=0.5)
    assert clone(est).get_params() == est.get_params()
    X = np.random.default_rng(0).normal(size=(6, 2))
    y, qid = [1, 0, 2, 0, 1, 0], [0, 0, 0, 1, 1, 1]
    with pytest.raises(ValueError, match="C"):
        SLAMRanker(C=0).fit(X, y, qid=qid)
    with pytest.raises(ValueError, match="k"):
        SLAMRanker(weights="ndcg@k", k=0).fit(X, y, qid=qid)
    with pytest.raises(ValueError, match="qid"):
        SLAMRanker().fit(X, y)
    with pytest.raises(ValueError, match="mismatched"):
        SLAMRanker().fit(X, y[:5], qid=qid)


@pytest.mark.slow  # ~6 s: two BMRM fits to 1e-6
def test_slam_ranker_learns_and_fits_click_logs():
    pytest.importorskip("counterfactual_ltr.solvers")
    from click_sim import make_ranking, simulate_clicks

    from counterfactual_ltr.estimators.slam import SLAMRanker

    # Low label noise: with noise ~ 1 the max-over-lower-grades hinge makes w = 0 optimal
    # (the best irrelevant score grows with ||w|| faster than the relevant ones).
    data, w_true = make_ranking(n_queries=60, noise=0.1, random_state=0, return_ranker=True)
    full = SLAMRanker(C=10.0).fit(data)
    assert np.corrcoef(full.coef_, w_true)[0, 1] > 0.95
    # a fair production ranker; with a poor one (e.g. one feature) many relevant rows stay
    # unclicked, sit in the comparison set, and the click objective is again minimised near 0
    noise = np.random.default_rng(0).normal(size=data.n_features) / np.sqrt(data.n_features)
    log = simulate_clicks(data, data.X @ (w_true + 0.6 * noise), n_passes=20, random_state=0)
    model = SLAMRanker(C=10.0).fit(log)
    assert model.coef_.shape == (data.n_features,)
    assert np.corrcoef(model.coef_, w_true)[0, 1] > 0.9


def test_slam_ranker_zero_solution_is_reported():
    # Irrelevant documents on both sides of the relevant one: any w lets one of them outscore
    # it, so the SLAM loss grows in every direction from w = 0 and 0 is optimal for every C.
    from counterfactual_ltr.estimators.slam import SLAMRanker

    X = np.array([[0.0], [1.0], [-1.0]])
    y = np.array([1, 0, 0])
    for C in (0.1, 100.0):
        with pytest.warns(UserWarning, match="w = 0"):
            model = SLAMRanker(C=C).fit(X, y, qid=np.zeros(3, dtype=int))
        assert np.all(model.coef_ == 0)


def test_slam_loss_grows_from_zero_on_mq2008(mq2008_fold1_train):
    # Why SLAMRanker returns w = 0 on MQ2008 (module docstring): even along the RankSVM
    # direction u the empirical SLAM loss rises from w = 0, so 0 is the minimiser for every C.
    from counterfactual_ltr.estimators import RankSVM

    data = mq2008_fold1_train
    u = RankSVM(C=10).fit(data.X, data.y, qid=data.qid).coef_
    losses = [slam_loss(data.X @ (t * u), data.y, data.query_offsets, reduce="mean")[0] for t in (0.0, 1e-3, 1e-2)]
    assert losses[0] < losses[1] < losses[2]
