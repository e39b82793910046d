"""Top-k feedback learner (RTop-kF): unbiased gradient estimators, the learner, surrogates."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from counterfactual_ltr.online import (Feedback, RandomRanker, TopKFeedbackRanker, estimate_score_gradient,
                                       inclusion_probabilities, squared_gradient_estimate)
from counterfactual_ltr.surrogates import (kl_listnet_loss, pairwise_hinge, smooth_dcg_at1_loss,
                                           squared_loss)

EPS = 0.5  # SmoothDCG smoothing in the tests (0.01 makes the softmax one-hot and the gradient ~0)
SCORES = np.array([0.3, -0.2, 0.9, 0.1, 0.5, -0.4, 0.45])
LABELS = np.array([2, 0, 1, 0, 1, 2, 0])


def true_score_gradient(surrogate, s, R):
    off = [0, len(s)]
    if surrogate == "squared":
        return squared_loss(s, R, off)[1]
    if surrogate == "kl_listnet":
        return kl_listnet_loss(s, R, off)[1]
    if surrogate == "smooth_dcg":
        return smooth_dcg_at1_loss(s, R, off, epsilon=EPS)[1]
    return pairwise_hinge(s, R, off, margin=1.0)[1]


def params(surrogate):
    return {"epsilon": EPS} if surrogate == "smooth_dcg" else {}


def draw_shown(rng, s, gamma, n):
    """``n`` draws of RTop-kF's shown permutation: own argsort w.p. 1 - gamma, else uniform."""
    order = np.argsort(-s, kind="stable")
    shown = np.tile(order, (n, 1))
    explore = rng.random(n) < gamma
    shown[explore] = np.argsort(rng.random((explore.sum(), len(s))), axis=1)
    return shown, explore


CASES = [(sur, k, gamma) for sur in ("squared", "kl_listnet", "smooth_dcg", "ranksvm")
         for k in (1, 2, 3) for gamma in (0.05, 0.2, 0.45) if not (sur == "ranksvm" and k == 1)]


# ------------------------------------------------------------------------------------------------
# Surrogates: gradients against finite differences
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [squared_loss, kl_listnet_loss, smooth_dcg_at1_loss])
def test_surrogate_gradients_match_finite_differences(fn):
    rng = np.random.default_rng(0)
    offsets = [0, 4, 5, 9]
    s = rng.normal(size=9)
    y = rng.integers(0, 3, size=9)
    kw = {"epsilon": 0.7} if fn is smooth_dcg_at1_loss else {}
    loss, grad = fn(s, y, offsets, **kw)
    h = 1e-6
    fd = np.array([(fn(s + h * e, y, offsets, **kw)[0] - fn(s - h * e, y, offsets, **kw)[0]) / (2 * h)
                   for e in np.eye(9)])
    np.testing.assert_allclose(grad, fd, atol=1e-6)
    per_query, grad_none = fn(s, y, offsets, reduce=None, **kw)
    assert per_query.shape == (3,) and math.isclose(per_query.sum(), loss)
    np.testing.assert_allclose(grad_none, grad)
    mean, grad_mean = fn(s, y, offsets, reduce="mean", **kw)
    assert math.isclose(mean, loss / 3) and np.allclose(grad_mean, grad / 3)


def test_surrogate_minima_and_definitions():
    y = np.array([2, 0, 1])
    assert kl_listnet_loss(y.astype(float), y, [0, 3]) == (0.0, pytest.approx(np.zeros(3)))
    assert squared_loss(y.astype(float), y, [0, 3])[0] == 0.0
    # SmoothDCG@1 -> -G(R) of the top-scored document as epsilon -> 0 (negated: a loss to descend).
    assert smooth_dcg_at1_loss([0.0, 0.2, 1.0], y, [0, 3], epsilon=1e-3)[0] == pytest.approx(-1.0)
    # stable softmax: huge scores do not overflow
    loss, grad = smooth_dcg_at1_loss([1e4, 0.0], [1, 0], [0, 2], epsilon=0.01)
    assert np.isfinite(loss) and np.all(np.isfinite(grad))
    with pytest.raises(ValueError, match="epsilon"):
        smooth_dcg_at1_loss([0.0], [1], [0, 1], epsilon=0.0)
    with pytest.raises(ValueError, match="reduce"):
        squared_loss([0.0], [1], [0, 1], reduce="max")


# ------------------------------------------------------------------------------------------------
# Unbiasedness
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("surrogate,k,gamma", CASES)
def test_estimator_is_exactly_unbiased_by_enumeration(surrogate, k, gamma):
    """E[g] over the exact sampling distribution (all 5! permutations) equals the true gradient."""
    s, R = SCORES[:5], LABELS[:5]
    m = len(s)
    perms = np.array(list(itertools.permutations(range(m))))
    order = np.argsort(-s, kind="stable")
    prob = np.full(len(perms), gamma / len(perms))
    prob[np.all(perms == order, axis=1)] += 1 - gamma
    g = estimate_score_gradient(surrogate, s, perms, R[perms[:, :k]], gamma, **params(surrogate))
    np.testing.assert_allclose(prob @ g, true_score_gradient(surrogate, s, R), atol=1e-10)


@pytest.mark.parametrize("surrogate,k,gamma", CASES)
def test_estimator_is_unbiased_by_simulation(surrogate, k, gamma):
    """Monte Carlo mean over drawn permutations is within 3 standard errors of the true gradient."""
    rng = np.random.default_rng(12345)
    n = 40_000
    shown, explore = draw_shown(rng, SCORES, gamma, n)
    # exploration happened, including lists that do not start with the learner's own top document
    assert explore.sum() > 0.5 * gamma * n
    assert np.any(shown[:, 0] != np.argmax(SCORES))
    g = estimate_score_gradient(surrogate, SCORES, shown, LABELS[shown[:, :k]], gamma, **params(surrogate))
    mean, se = g.mean(axis=0), g.std(axis=0, ddof=1) / math.sqrt(n)
    truth = true_score_gradient(surrogate, SCORES, LABELS)
    assert np.all(np.abs(mean - truth) <= 3 * se + 1e-9), (mean, truth, se)


def test_full_feedback_estimate_is_the_gradient():
    """With k = m every inclusion probability is 1: the estimate is the exact gradient."""
    m = len(SCORES)
    shown = np.random.default_rng(1).permutation(m)
    for sur in ("squared", "kl_listnet", "smooth_dcg", "ranksvm"):
        g = estimate_score_gradient(sur, SCORES, shown, LABELS[shown], 0.3, **params(sur))
        np.testing.assert_allclose(g, true_score_gradient(sur, SCORES, LABELS), atol=1e-12)


def test_paper_shortcut_probability_is_biased():
    """p(sigma(1)) = 1 - gamma + gamma/m for every drawn list (the AISTATS text) is biased."""
    gamma, m, n = 0.2, len(SCORES), 40_000
    rng = np.random.default_rng(7)
    shown, explore = draw_shown(rng, SCORES, gamma, n)
    top = shown[:, 0]
    R = LABELS[top]
    shortcut = np.tile(2 * SCORES, (n, 1))
    shortcut[np.arange(n), top] -= 2 * R / (1 - gamma + gamma / m)
    truth = true_score_gradient("squared", SCORES, LABELS)
    mean, se = shortcut.mean(axis=0), shortcut.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.max(np.abs(mean - truth) / (se + 1e-12)) > 10
    # ... while the exact marginals on the same draws are unbiased
    exact = squared_gradient_estimate(SCORES, shown, R[:, None], gamma)
    mean, se = exact.mean(axis=0), exact.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(mean - truth) <= 3 * se + 1e-9)
    # the two agree exactly on lists that start with the learner's own top document
    own = top == np.argmax(SCORES)
    np.testing.assert_allclose(shortcut[own], exact[own])
    assert not np.allclose(shortcut[~own], exact[~own])


def test_inclusion_probabilities_match_frequencies():
    rng = np.random.default_rng(3)
    gamma, n, m = 0.3, 200_000, len(SCORES)
    shown, _ = draw_shown(rng, SCORES, gamma, n)
    order = np.argsort(-SCORES, kind="stable")
    # p(doc j first) = (1 - gamma) 1[j = own top] + gamma / m, for every j
    freq_first = np.bincount(shown[:, 0], minlength=m) / n
    p_first = inclusion_probabilities(SCORES, np.arange(m)[:, None], 1, gamma)[:, 0]
    np.testing.assert_allclose(freq_first, p_first, atol=4e-3)
    assert p_first[order[0]] == pytest.approx(1 - gamma + gamma / m) and p_first[order[1]] == pytest.approx(gamma / m)
    # unordered pairs in the top-2: the own top-2 pair vs another pair
    top2 = np.sort(shown[:, :2], axis=1)
    assert np.mean(np.all(top2 == np.sort(order[:2]), axis=1)) == pytest.approx(
        1 - gamma + gamma * 2 / (m * (m - 1)), abs=4e-3)
    assert np.mean(np.all(top2 == np.sort([order[0], order[3]]), axis=1)) == pytest.approx(
        gamma * 2 / (m * (m - 1)), abs=2e-3)
    # inclusion in the top-3 set
    in_top3 = np.zeros(m)
    np.add.at(in_top3, shown[:, :3].ravel(), 1.0)
    p3 = inclusion_probabilities(SCORES, np.arange(m)[:, None].repeat(3, axis=1), 3, gamma)[:, 0]
    np.testing.assert_allclose(in_top3 / n, p3, atol=4e-3)


# ------------------------------------------------------------------------------------------------
# The learner
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("surrogate,k", [("squared", 1), ("kl_listnet", 1), ("smooth_dcg", 1), ("ranksvm", 2),
                                         ("squared", 3), ("ranksvm", 3), ("smooth_dcg", 2)])
def test_learner_step_is_projected_estimate(surrogate, k):
    """Each update is w <- Proj(w - eta X^T g) with g the public estimator (fast paths included)."""
    rng = np.random.default_rng(5)
    m, d = 7, 4
    learner = TopKFeedbackRanker(surrogate, k=k, eta=0.05, gamma=0.45, radius=2.0, epsilon=EPS,
                                 random_state=0).reset(d)
    explored = 0
    for t in range(60):
        X = rng.normal(size=(m, d))
        y = rng.integers(0, 3, size=m)
        w = learner.coef_.copy()
        shown = learner.rank(X)
        s = X @ w
        explored += not np.array_equal(shown, np.argsort(-s, kind="stable"))
        learner.update(X, Feedback(shown, y[shown[:k]]))
        g = estimate_score_gradient(surrogate, s, shown, y[shown[:k]], 0.45, **params(surrogate))
        expected = w - 0.05 * (X.T @ g)
        norm = np.linalg.norm(expected)
        if norm > 2.0:
            expected *= 2.0 / norm
        np.testing.assert_allclose(learner.coef_, expected, atol=1e-10)
        assert np.linalg.norm(learner.coef_) <= 2.0 + 1e-12
    assert explored > 5 and learner.t_ == 61


def test_projection_keeps_weights_in_ball():
    rng = np.random.default_rng(0)
    learner = TopKFeedbackRanker("squared", eta=10.0, gamma=0.3, radius=0.5, random_state=0).reset(3)
    clipped = 0
    for _ in range(50):
        X = rng.normal(size=(6, 3)) * 5
        y = rng.integers(0, 3, size=6)
        shown = learner.rank(X)
        learner.update(X, Feedback(shown, y[shown[:1]]))
        norm = np.linalg.norm(learner.coef_)
        assert norm <= 0.5 + 1e-12
        clipped += math.isclose(norm, 0.5)
    assert clipped > 10


def test_sampling_distribution_and_schedules():
    X = np.random.default_rng(0).normal(size=(4, 3))
    learner = TopKFeedbackRanker("kl_listnet", eta=0.1, gamma=0.4, gamma_power=0.0, random_state=1).reset(3)
    order = np.argsort(-(X @ learner.coef_), kind="stable")
    T = 20_000
    own = sum(np.array_equal(learner.rank(X), order) for _ in range(T))  # no update: w stays 0
    assert own / T == pytest.approx(0.6 + 0.4 / 24, abs=0.015)
    assert learner.n_explored_ / T == pytest.approx(0.4, abs=0.015)
    decaying = TopKFeedbackRanker("squared", eta=0.01, eta_power=2 / 3, gamma=0.1, gamma_power=1 / 3).reset(3)
    decaying.t_ = 8
    assert decaying._eta_t(decaying.t_) == pytest.approx(0.01 / 4) and decaying._gamma_now() == pytest.approx(0.05)
    assert TopKFeedbackRanker("ranksvm").feedback_k == 2 and TopKFeedbackRanker("smooth_dcg").feedback_k == 1
    assert TopKFeedbackRanker("squared", k=3).feedback_k == 3


def test_bad_inputs():
    with pytest.raises(ValueError, match="gamma"):
        TopKFeedbackRanker(gamma=0.5)
    with pytest.raises(ValueError, match="gamma"):
        TopKFeedbackRanker(gamma=0.0)
    with pytest.raises(ValueError, match="gamma"):
        TopKFeedbackRanker(gamma=-0.1)
    with pytest.raises(ValueError, match="eta"):
        TopKFeedbackRanker(eta=0.0)
    with pytest.raises(ValueError, match="eta"):
        TopKFeedbackRanker(eta=-1e-3)
    with pytest.raises(ValueError, match="radius"):
        TopKFeedbackRanker(radius=0)
    with pytest.raises(ValueError, match="surrogate"):
        TopKFeedbackRanker("hinge")
    with pytest.raises(ValueError, match="top-2"):
        TopKFeedbackRanker("ranksvm", k=1)
    with pytest.raises(ValueError, match="gamma_t"):  # a callable schedule leaving (0, 1/2)
        TopKFeedbackRanker(gamma=lambda t: 0.9).reset(2).rank(np.ones((3, 2)))
    learner = TopKFeedbackRanker("squared", k=3).reset(2)
    with pytest.raises(ValueError, match=r"k=3.*m=2"):
        learner.rank(np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"k=3.*m=2"):
        learner.update(np.ones((2, 2)), Feedback(np.array([0, 1]), np.array([1, 0])))
    with pytest.raises(ValueError, match=r"k=2.*m=1"):
        TopKFeedbackRanker("ranksvm").rank(np.ones((1, 2)))
    X = np.ones((4, 2))
    shown = learner.rank(X)
    with pytest.raises(ValueError, match="labels"):
        learner.update(X, Feedback(shown, np.array([1])))
    # estimator functions
    with pytest.raises(ValueError, match=r"k=3.*m=2"):
        squared_gradient_estimate([0.0, 1.0], [0, 1], [1, 0, 1], 0.1)
    with pytest.raises(ValueError, match="outside"):
        squared_gradient_estimate([0.0, 1.0], [5, 0], [1], 0.1)
    with pytest.raises(ValueError, match="repeats"):
        squared_gradient_estimate([0.0, 1.0, 2.0], [1, 1, 0], [1, 1], 0.1)
    with pytest.raises(ValueError, match="gamma"):
        squared_gradient_estimate([0.0, 1.0], [0, 1], [1], 0.0)
    with pytest.raises(ValueError, match="top-2"):
        estimate_score_gradient("ranksvm", [0.0, 1.0], [0, 1], [1], 0.1)
    with pytest.raises(ValueError, match="unknown surrogate"):
        estimate_score_gradient("listmle", [0.0, 1.0], [0, 1], [1], 0.1)


def test_learners_beat_random_on_synthetic_data():
    pytest.importorskip("counterfactual_ltr.metrics")
    from click_sim import make_ranking, run_online

    data = make_ranking(n_queries=100, n_features=10, random_state=0)
    T = 3000
    random = run_online(RandomRanker(random_state=0), data, T, random_state=0).ndcg_at_10.mean()
    for sur in ("squared", "ranksvm", "kl_listnet", "smooth_dcg"):
        learner = TopKFeedbackRanker(sur, eta=0.01, gamma=0.1, radius=1.0, epsilon=0.1, random_state=0)
        res = run_online(learner, data, T, random_state=0)
        assert res.ndcg_at_10.mean() > random + 0.03, (sur, res.ndcg_at_10.mean(), random)
