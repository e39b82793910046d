"""The dense per-query blocks behind ClickAnchorPairs against a plain loop over the pairs.

Both objectives (the smoothed PropDCG bound and the IPS-weighted LambdaRank loss), with ragged
list lengths (single-document queries included, so several length buckets), several anchors per
query and negative click weights; and the block machinery's corner cases forced small: chunks
that split a query, chunks of many queries (reduceat) and of few (matrix product), row products
in runs, and scores spread too far for the separable exponential; each in float64 (to 1e-10) and in
the float32 the tree learner uses (to the float32 precision the sums can keep).
"""

import numpy as np
import pytest
from scipy.special import expit

from counterfactual_ltr._segments import offsets_from_lengths, rank_within_queries
from counterfactual_ltr.metrics import get_lambda
from counterfactual_ltr.surrogates import ClickAnchorPairs
from counterfactual_ltr.surrogates import _query_blocks


def _problem(seed, n_queries=12, max_len=9, spread=2.0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len + 1, size=n_queries)
    lengths[0] = 1                                              # a query with a single document
    offsets = offsets_from_lengths(lengths)
    n = int(offsets[-1])
    weights = np.where(rng.random(n) < 0.5, rng.uniform(0.5, 20, size=n), 0.0)
    weights = np.where(rng.random(n) < 0.2, -rng.uniform(0.5, 5, size=n), weights)     # trust-bias corrections
    weights[offsets[0]] = 3.0                                   # an anchor without pairs
    return rng.normal(size=n) * spread, weights, offsets


def _reference(scores, weights, offsets, pair):
    """Per query ``sum_j W_j f(sum_y ...)``, gradient and curvature by a loop over the pairs (``pair`` gives the terms)."""
    n = scores.size
    per_query, grad, hess = np.zeros(offsets.size - 1), np.zeros(n), np.zeros(n)
    for q in range(offsets.size - 1):
        for j in range(offsets[q], offsets[q + 1]):
            if weights[j] == 0:
                continue
            others = [y for y in range(offsets[q], offsets[q + 1]) if y != j]
            terms = [pair(j, y) for y in others]            # (value, slope, curvature, weight of the anchor)
            loss, c, c_plus = terms[0][3](sum(t[0] for t in terms)) if terms else pair(j, None)[3](0.0)
            per_query[q] += loss
            for y, (_, slope, curvature, _) in zip(others, terms):
                grad[y] += c * slope
                grad[j] -= c * slope
                hess[y] += c_plus * curvature
                hess[j] += c_plus * curvature
    return per_query, grad, hess


def _bound_reference(scores, weights, offsets, lam, margin, t):
    def anchor(j):
        def totals(H):
            c = weights[j] * float(lam.derivative(np.array([1.0 + H]))[0])
            return weights[j] * float(lam.value(np.array([1.0 + H]))[0]), c, max(c, 0.0)
        return totals

    def pair(j, y):
        if y is None:
            return 0.0, 0.0, 0.0, anchor(j)
        u = (margin - (scores[j] - scores[y])) / t
        return t * np.logaddexp(0.0, u), expit(u), expit(u) * expit(-u) / t, anchor(j)
    return _reference(scores, weights, offsets, pair)


def _lambdarank_reference(scores, weights, offsets, lam, sigma):
    lam_r = lam.value(rank_within_queries(scores, offsets).astype(np.float64))

    def pair(j, y):
        w = weights[j]
        totals = (lambda value: (w * value, sigma * w, sigma * sigma * max(w, 0.0)))
        if y is None:
            return 0.0, 0.0, 0.0, totals
        u, delta = -sigma * (scores[j] - scores[y]), abs(lam_r[j] - lam_r[y])
        return delta * np.logaddexp(0.0, u), delta * expit(u), delta * expit(u) * expit(-u), totals
    return _reference(scores, weights, offsets, pair)


def _close(got, expected, dtype=np.float64):
    """float64: to 1e-10; float32 (eps 1.2e-7, sums of up to ~10 terms): to 2e-6 of the largest entry."""
    rtol, atol = (1e-10, 1e-12) if dtype == np.float64 else (2e-5, 2e-6)
    for g, e in zip(got, expected):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol * max(1.0, np.abs(e).max()))


@pytest.fixture(params=[np.float64, np.float32], ids=["float64", "float32"])
def dtype(request):
    return request.param


@pytest.fixture(params=["default", "small chunks", "one query per chunk", "short product runs"])
def block_settings(request, monkeypatch):
    """The default blocks, and blocks forced into their other code paths on small inputs."""
    if request.param == "small chunks":             # chunks of many queries, some split across two chunks
        monkeypatch.setattr(_query_blocks, "_CHUNK", 20 * 8)             # bytes: 20 float64s, 40 float32s
        monkeypatch.setattr(_query_blocks, "_BLOCK_QUERIES", 1)
    elif request.param == "one query per chunk":
        monkeypatch.setattr(_query_blocks, "_CHUNK", 9 * 4)
    elif request.param == "short product runs":
        monkeypatch.setattr(_query_blocks, "_PRODUCT_RUN", {np.dtype(np.float64): 3, np.dtype(np.float32): 3})
        monkeypatch.setattr(_query_blocks, "_PER_BUCKET", 0.0)     # one bucket per distinct length
    return request.param


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("metric, margin, t", [("dcg", 1.0, 1.0), ("avg_rank", 2.0, 0.3), ("rbp", 1.0, 4.0)])
def test_bound_matches_a_loop_over_the_pairs(block_settings, dtype, seed, metric, margin, t):
    scores, weights, offsets = _problem(seed)
    lam = get_lambda(metric)
    got = ClickAnchorPairs(weights, offsets, dtype).bound(scores, lam, margin, t, True)
    _close(got, _bound_reference(scores, weights, offsets, lam, margin, t), dtype)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("metric, sigma", [("dcg", 1.0), ("prec@3", 2.5)])
def test_lambdarank_matches_a_loop_over_the_pairs(block_settings, dtype, seed, metric, sigma):
    scores, weights, offsets = _problem(seed)
    lam = get_lambda("prec@k", k=3) if metric == "prec@3" else get_lambda(metric)
    got = ClickAnchorPairs(weights, offsets, dtype).lambdarank(scores, lam, sigma, True)
    _close(got, _lambdarank_reference(scores, weights, offsets, lam, sigma), dtype)


@pytest.mark.parametrize("spread", [30.0, 150.0, 2000.0])
def test_scores_spread_beyond_the_separable_exponential(dtype, spread):
    """Scores tens (float32's separable limit) to hundreds (float64's) of temperatures apart (no separable
    exp(-u)), and pairs saturated both ways."""
    scores, weights, offsets = _problem(7, spread=spread)
    lam = get_lambda("dcg")
    pairs = ClickAnchorPairs(weights, offsets, dtype)
    expected = _bound_reference(scores, weights, offsets, lam, 1.0, 1.0)
    _close(pairs.bound(scores, lam, 1.0, 1.0, True), expected, dtype)
    _close(pairs.lambdarank(scores, lam, 1.0, True), _lambdarank_reference(scores, weights, offsets, lam, 1.0), dtype)


def test_float32_is_chosen_by_name_and_nothing_else():
    with pytest.raises(ValueError, match="float64 or float32"):
        ClickAnchorPairs([1.0, 0.0], [0, 2], np.float16)


def test_without_curvature_and_without_pairs():
    scores, weights, offsets = _problem(3)
    lam = get_lambda("dcg")
    pairs = ClickAnchorPairs(weights, offsets)
    per_query, grad, hess = pairs.bound(scores, lam, 1.0, 1.0, False)
    full = pairs.bound(scores, lam, 1.0, 1.0, True)
    assert hess is None and np.array_equal(per_query, full[0]) and np.array_equal(grad, full[1])
    single = ClickAnchorPairs([2.0, 0.0], [0, 1, 2])                # one anchor alone in its query
    assert single.n_pairs == 0
    per_query, grad, hess = single.bound(np.zeros(2), lam, 1.0, 1.0, True)
    assert per_query.tolist() == [2.0 * float(lam.value(np.array([1.0]))[0]), 0.0]
    assert grad.tolist() == [0.0, 0.0] and hess.tolist() == [0.0, 0.0]
