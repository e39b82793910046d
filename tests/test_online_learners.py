"""Perceptron-like online rankers (Algorithms 2 and 3 of Chaudhuri & Tewari) and online ListNet."""

from __future__ import annotations

import numpy as np
import pytest

from click_sim import make_ranking, make_separable_ranking, run_online
from counterfactual_ltr.online import Feedback, MaxPairPerceptron, OnlineListNet, SLAMPerceptron
from counterfactual_ltr.surrogates import listnet_loss, max_pair_loss, slam_loss

T = 20_000


@pytest.fixture(scope="module")
def separable():
    return make_separable_ranking(n_queries=1000, n_docs=20, n_features=20, n_levels=5, random_state=0)


@pytest.fixture(scope="module")
def separable_runs(separable):
    learners = {
        "alg2": SLAMPerceptron(eta=1.0, weights="ndcg"),
        "alg2_k": SLAMPerceptron(eta=1.0, weights="ndcg@k", k=10),
        "alg3": MaxPairPerceptron(eta=1.0),
        "listnet_eta1": OnlineListNet(eta=1.0, schedule="constant"),
    }
    return {name: (learner, run_online(learner, separable, T, random_state=0)) for name, learner in learners.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["alg2", "alg2_k", "alg3"])
def test_perceptrons_converge_on_separable_data(separable_runs, name):
    learner, res = separable_runs[name]
    avg = res.time_average(res.ndcg_at_10)[-1]
    assert avg > 0.98
    # finite cumulative loss: (almost) nothing is added over the second half. The v^NDCG@10
    # learner only reacts to NDCG@10 mistakes (inversions below rank 10 are never fixed), so
    # its measure is the NDCG@10-induced loss.
    cum = np.cumsum(1.0 - res.ndcg_at_10) if name == "alg2_k" else res.cumulative_ndcg_loss
    assert cum[-1] - cum[T // 2 - 1] < 0.01 * cum[-1]
    # updates happen only on mistake rounds (1 - NDCG > 0, resp. 1 - NDCG@10 for alg2_k)
    target = res.ndcg_at_10 if name == "alg2_k" else res.ndcg
    assert learner.n_updates_ == int(np.sum(target < 1 - 1e-12))


@pytest.mark.slow
def test_listnet_at_the_perceptron_rate_is_clearly_worse(separable_runs):
    # At eta = 1 (the perceptrons' rate; Algorithm 3 is eta-free) online ListNet keeps
    # oscillating and stays clearly below both perceptrons at T = 20,000. NOTE: with a
    # tuned constant rate (eta ~ 0.03-0.1) ListNet matches the perceptrons on this
    # generator -- see experiments/slam_fig1_separable.py; this test pins the behaviour
    # at a common rate, not the paper's tuned-rate gap.
    ln = separable_runs["listnet_eta1"][1]
    avg_ln = ln.time_average(ln.ndcg_at_10)[-1]
    for name in ("alg2", "alg3"):
        res = separable_runs[name][1]
        assert res.time_average(res.ndcg_at_10)[-1] > avg_ln + 0.05


def _run_rankings(learner, data, T, seed=0):
    res = run_online(learner, data, T, random_state=seed)
    return res.rankings


@pytest.mark.parametrize("data_kind", ["separable", "noisy"])
def test_algorithm3_predictions_do_not_depend_on_eta(data_kind):
    if data_kind == "separable":
        data = make_separable_ranking(n_queries=100, n_docs=10, n_features=8, margin=0.05, random_state=1)
    else:
        data = make_ranking(n_queries=80, random_state=1)
    ref_learner = MaxPairPerceptron(eta=1.0)
    ref = _run_rankings(ref_learner, data, 1500)
    assert ref_learner.n_updates_ > 10
    for eta in (0.25, 4.0, 1024.0, 0.37, 13.0):
        learner = MaxPairPerceptron(eta=eta)
        np.testing.assert_array_equal(_run_rankings(learner, data, 1500), ref)
        np.testing.assert_allclose(learner.coef_, eta * ref_learner.coef_, rtol=1e-9, atol=1e-12)


def test_algorithm2_depends_on_eta_but_only_through_updates():
    data = make_ranking(n_queries=80, random_state=1)
    a = SLAMPerceptron(eta=1.0)
    b = SLAMPerceptron(eta=0.01)
    ra, rb = _run_rankings(a, data, 1500), _run_rankings(b, data, 1500)
    assert a.n_updates_ > 0 and b.n_updates_ > 0
    assert not np.array_equal(ra, rb)  # the paper's remark: Algorithm 2 is not eta-invariant


def test_single_update_uses_the_surrogate_subgradients():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(7, 4))
    y = np.array([2, 0, 1, 0, 2, 1, 0])
    for learner, grad in (
        (SLAMPerceptron(eta=0.5), lambda s: slam_loss(s, y, [0, 7])[1]),
        (SLAMPerceptron(eta=0.5, weights="ap"), lambda s: slam_loss(s, y, [0, 7], weights="ap")[1]),
        (SLAMPerceptron(eta=0.5, weights="ndcg@k", k=3), lambda s: slam_loss(s, y, [0, 7], weights="ndcg@k", k=3)[1]),
        (MaxPairPerceptron(eta=0.5), lambda s: max_pair_loss(s, y, [0, 7])[1]),
        (OnlineListNet(eta=0.5), lambda s: listnet_loss(s, y, [0, 7])[1]),
    ):
        learner.reset(4)
        learner.coef_ = rng.normal(size=4)
        w0 = learner.coef_.copy()
        shown = learner.rank(X)
        assert np.array_equal(shown, np.argsort(-(X @ w0), kind="stable"))
        learner.update(X, Feedback(shown, y[shown]))
        np.testing.assert_allclose(learner.coef_, w0 - 0.5 * grad(X @ w0) @ X)


@pytest.mark.parametrize("weights", ["ndcg", "ndcg@k", "ap"])
def test_repeated_queries_update_like_fresh_ones(weights):
    """SLAM weights are cached per label vector; every update must still match the surrogate."""
    rng = np.random.default_rng(5)
    queries = [(rng.normal(size=(6, 3)), rng.integers(0, 3, 6)) for _ in range(3)]
    learner = SLAMPerceptron(eta=0.7, weights=weights, k=3 if weights == "ndcg@k" else None).reset(3)
    kw = {"weights": weights, "k": 3} if weights == "ndcg@k" else {"weights": weights}
    for t in range(30):
        X, y = queries[t % 3]
        y = y.copy() if t % 2 else y[::-1][::-1].copy()      # same labels, a different array object
        w0 = learner.coef_.copy()
        shown = learner.rank(X)
        learner.update(X, Feedback(shown, y[shown]))
        loss, grad = slam_loss(X @ w0, y, [0, 6], **kw)
        mistake = not np.array_equal(learner.coef_, w0)
        expected = w0 - 0.7 * grad @ X if mistake else w0
        np.testing.assert_allclose(learner.coef_, expected)
    assert learner.n_updates_ > 3


def test_no_update_without_mistake_even_inside_the_margin():
    X = np.array([[3.0], [2.5], [0.0]])
    y = np.array([2, 1, 0])  # correctly ordered, but docs 0 and 1 are closer than the margin
    for learner in (SLAMPerceptron(), MaxPairPerceptron()):
        learner.reset(1)
        learner.coef_ = np.array([1.0])
        assert slam_loss(X[:, 0], y, [0, 3])[0] > 0
        shown = learner.rank(X)
        learner.update(X, Feedback(shown, y[shown]))
        assert learner.coef_.tolist() == [1.0] and learner.n_updates_ == 0


def test_listnet_sqrt_schedule():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 3))
    y = np.array([1, 0, 2, 0, 1])
    learner = OnlineListNet(eta=2.0, schedule="sqrt").reset(3)
    for t in range(1, 4):
        w0 = learner.coef_.copy()
        shown = learner.rank(X)
        learner.update(X, Feedback(shown, y[shown]))
        np.testing.assert_allclose(learner.coef_, w0 - 2.0 / np.sqrt(t) * listnet_loss(X @ w0, y, [0, 5])[1] @ X)


@pytest.mark.parametrize("make", [
    lambda: SLAMPerceptron(eta=0.0),
    lambda: SLAMPerceptron(eta=-1.0),
    lambda: SLAMPerceptron(weights="ndcg@k", k=0),
    lambda: SLAMPerceptron(weights="ndcg@k"),
    lambda: SLAMPerceptron(weights="dcg"),
    lambda: SLAMPerceptron(margin=-0.5),
    lambda: MaxPairPerceptron(eta=0.0),
    lambda: MaxPairPerceptron(measure="ndcg@k", k=0),
    lambda: OnlineListNet(eta=0.0),
    lambda: OnlineListNet(eta=float("nan")),
    lambda: OnlineListNet(schedule="cubic"),
])
def test_bad_parameters_raise(make):
    with pytest.raises(ValueError):
        make()


def test_bad_feedback_raises():
    X = np.random.default_rng(0).normal(size=(4, 2))
    y = np.array([1, 0, 2, 0])
    for learner in (SLAMPerceptron(), MaxPairPerceptron(), OnlineListNet()):
        learner.reset(2)
        shown = learner.rank(X)
        with pytest.raises(ValueError, match="full feedback"):
            learner.update(X, Feedback(shown, y[shown][:2]))
        with pytest.raises(ValueError, match="mismatched"):
            learner.update(X, Feedback(shown[:3], y[shown][:3]))
