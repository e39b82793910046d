"""Pairwise hinge surrogates: values against explicit pair loops, gradients against finite differences."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from counterfactual_ltr._segments import offsets_from_lengths, rank_within_queries
from counterfactual_ltr.metrics import get_lambda
from counterfactual_ltr.surrogates import hinge_rank_bound, lambda_hinge_bound, pairwise_hinge


def _problem(rng, n_queries=4, max_len=7, tie_scores=False):
    lengths = rng.integers(1, max_len + 1, size=n_queries)
    offsets = offsets_from_lengths(lengths)
    n = offsets[-1]
    scores = rng.integers(-3, 4, size=n).astype(float) if tie_scores else rng.normal(size=n) * 2
    labels = rng.integers(0, 3, size=n)
    weights = np.where(rng.random(n) < 0.5, rng.uniform(1, 20, size=n), 0.0)
    return scores, labels, weights, offsets


def _explicit_bound(scores, weights, offsets, lam, margin=1.0):
    """sum_j W_j lambda(1 + sum_{y != j} max(0, margin - (s_j - s_y))) by plain loops."""
    total = 0.0
    H_all = {}
    for q in range(len(offsets) - 1):
        for j in range(offsets[q], offsets[q + 1]):
            H = sum(max(0.0, margin - (scores[j] - scores[y])) for y in range(offsets[q], offsets[q + 1]) if y != j)
            H_all[j] = H
            total += weights[j] * lam.value(np.array([1.0 + H]))[0]
    return total, H_all


def _fd_grad(f, s, h=1e-6):
    g = np.zeros_like(s)
    for i in range(len(s)):
        e = np.zeros_like(s)
        e[i] = h
        g[i] = (f(s + e) - f(s - e)) / (2 * h)
    return g


@pytest.mark.parametrize("metric", ["dcg", "avg_rank", "rbp"])
@pytest.mark.parametrize("seed", range(5))
def test_lambda_hinge_bound_value_and_gradient(metric, seed):
    rng = np.random.default_rng(seed)
    scores, _, weights, offsets = _problem(rng)
    lam = get_lambda(metric)
    loss, grad = lambda_hinge_bound(scores, weights, offsets, metric=metric)
    expected, _ = _explicit_bound(scores, weights, offsets, lam)
    assert loss == pytest.approx(expected, rel=1e-10, abs=1e-10)
    # Continuous scores: kinks have measure zero, so central differences match the gradient.
    fd = _fd_grad(lambda s: lambda_hinge_bound(s, weights, offsets, metric=metric)[0], scores)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), margin=st.sampled_from([0.5, 1.0, 2.0]))
def test_hinge_rank_bound_matches_pairs_and_bounds_rank(seed, margin):
    rng = np.random.default_rng(seed)
    scores, _, _, offsets = _problem(rng, tie_scores=True)
    rows = np.arange(offsets[-1])
    H, n_active = hinge_rank_bound(scores, offsets, rows, margin=margin)
    for j in rows:
        q = np.searchsorted(offsets, j, side="right") - 1
        others = [y for y in range(offsets[q], offsets[q + 1]) if y != j]
        slack = [margin - (scores[j] - scores[y]) for y in others]
        assert H[j] == pytest.approx(sum(max(0.0, v) for v in slack), abs=1e-9)
        assert n_active[j] == sum(v > 0 for v in slack)
    if margin >= 1.0:
        ranks = rank_within_queries(scores, offsets)
        # With ties the hinge still counts every tied competitor, so it bounds any tie-break.
        assert np.all(1 + H >= ranks - 1e-9)


def test_lambda_bound_upper_bounds_ips_risk():
    rng = np.random.default_rng(3)
    for _ in range(50):
        scores, _, weights, offsets = _problem(rng, tie_scores=True)
        ranks = rank_within_queries(scores, offsets)
        for metric in ("dcg", "avg_rank", "rbp"):
            lam = get_lambda(metric)
            risk = float(np.sum(weights * lam.value(ranks.astype(float))))
            bound, _ = lambda_hinge_bound(scores, weights, offsets, metric=metric)
            assert bound >= risk - 1e-9


def test_pairwise_hinge_against_loops_and_fd():
    rng = np.random.default_rng(0)
    scores, labels, weights, offsets = _problem(rng, n_queries=5)
    loss, grad = pairwise_hinge(scores, labels, offsets, weights=weights + 1)
    expected = 0.0
    for q in range(len(offsets) - 1):
        for i in range(offsets[q], offsets[q + 1]):
            for j in range(offsets[q], offsets[q + 1]):
                if labels[i] > labels[j]:
                    expected += (weights[i] + 1) * max(0.0, 1 - (scores[i] - scores[j]))
    assert loss == pytest.approx(expected)
    fd = _fd_grad(lambda s: pairwise_hinge(s, labels, offsets, weights=weights + 1)[0], scores)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)
    per_query, _ = pairwise_hinge(scores, labels, offsets, reduce=None)
    assert per_query.shape == (len(offsets) - 1,)
    assert pairwise_hinge(scores, labels, offsets, reduce="sum")[0] == pytest.approx(per_query.sum())


def test_bad_input():
    with pytest.raises(ValueError, match="non-finite"):
        lambda_hinge_bound([np.nan, 1.0], [1.0, 0.0], [0, 2])
    with pytest.raises(ValueError, match=">= 0"):
        lambda_hinge_bound([0.0, 1.0], [-1.0, 0.0], [0, 2])
    with pytest.raises(ValueError, match="mismatched"):
        lambda_hinge_bound([0.0, 1.0, 2.0], [1.0, 0.0], [0, 2])
    with pytest.raises(ValueError, match="empty"):
        pairwise_hinge([0.0, 1.0], [1, 0], [0, 0, 2])
    with pytest.raises(ValueError, match="reduce"):
        pairwise_hinge([0.0, 1.0], [1, 0], [0, 2], reduce="max")
