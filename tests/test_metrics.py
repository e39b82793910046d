"""Tests of counterfactual_ltr.metrics: hand values, sklearn, a per-query reference, errors."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from counterfactual_ltr import metrics as M
from counterfactual_ltr._segments import offsets_from_lengths
from counterfactual_ltr.metrics import (LAMBDA_WEIGHTS, LambdaWeight, additive_metric, average_precision, avg_rank,
                                        dcg, get_lambda, lambda_avg_rank, lambda_dcg, lambda_prec_at_k, lambda_rbp,
                                        mean_relevant_rank, ndcg, precision_at_k, ranks, rbp)

LOG3 = math.log2(3.0)


# ----------------------------------------------------------------------------- per-query reference


def ref_order(s):
    """Rows of one query, best first; ties: earlier row first."""
    return sorted(range(len(s)), key=lambda i: (-s[i], i))


def ref_dcg(s, y, k=None, gain="exp2"):
    G = (lambda r: 2.0**r - 1.0) if gain == "exp2" else (lambda r: float(r))
    order = ref_order(s)
    k = len(s) if k is None else k
    return sum(G(y[d]) / math.log2(i + 2) for i, d in enumerate(order[:k]))


def ref_ndcg(s, y, k=None, gain="exp2"):
    ideal = ref_dcg(sorted(y, reverse=True), sorted(y, reverse=True), k, gain)
    return None if ideal == 0 else ref_dcg(s, y, k, gain) / ideal


def ref_rel(y, threshold=1):
    return [1 if v >= threshold else 0 for v in y]


def ref_ap(s, y, k=None):
    rel = ref_rel(y)
    if sum(rel) == 0:
        return None
    order = ref_order(s)
    hits, total = 0, 0.0
    for j, d in enumerate(order, start=1):
        if rel[d]:
            hits += 1
            if k is None or j <= k:
                total += hits / j
    return total / sum(rel)


def ref_prec(s, y, k):
    rel = ref_rel(y)
    return sum(rel[d] for d in ref_order(s)[:k]) / k


def ref_rbp(s, y, p, k=None):
    rel = ref_rel(y)
    order = ref_order(s)[: (len(s) if k is None else k)]
    return (1 - p) * sum(p**i * rel[d] for i, d in enumerate(order))


def ref_rank_sum(s, y):
    rel = ref_rel(y)
    return sum(i for i, d in enumerate(ref_order(s), start=1) if rel[d])


def ref_additive(s, y, lam):
    rel = ref_rel(y)
    return sum(lam(float(i)) * rel[d] for i, d in enumerate(ref_order(s), start=1) if rel[d])


def split(values, offsets):
    return [list(values[offsets[q]:offsets[q + 1]]) for q in range(len(offsets) - 1)]


@st.composite
def problems(draw, min_len=1):
    """Random queries with integer scores (to force ties) and graded labels 0..3."""
    lengths = draw(st.lists(st.integers(min_len, 8), min_size=1, max_size=6))
    n = sum(lengths)
    scores = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    labels = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    return np.array(scores, float), np.array(labels, np.int64), offsets_from_lengths(lengths)


def test_doctests():
    result = doctest.testmod(M, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 10 and result.failed == 0


# ----------------------------------------------------------------------------- hand-computed values


def test_ranks_ties_keep_row_order():
    # query 0: scores 1, 2, 1, 2 -> rows 1, 3 tie for first (row 1 wins), rows 0, 2 tie for third
    assert ranks([1.0, 2.0, 1.0, 2.0, 5.0, 5.0], [0, 4, 6]).tolist() == [3, 1, 4, 2, 1, 2]


def test_dcg_ndcg_by_hand_with_ties():
    s, y, off = [1.0, 1.0, 0.0], [0, 2, 1], [0, 3]
    # tie: row 0 ranks first, so the ranking is labels 0, 2, 1
    actual = 3 / LOG3 + 1 / 2
    ideal = 3 + 1 / LOG3
    assert dcg(s, y, off) == pytest.approx(actual)
    assert ndcg(s, y, off) == pytest.approx(actual / ideal)
    assert dcg(s, y, off, gain="linear") == pytest.approx(2 / LOG3 + 1 / 2)
    assert ndcg(s, y, off, k=1) == 0.0
    assert ndcg(s, y, off, k=2) == pytest.approx((3 / LOG3) / ideal)
    # reversing the tie order changes the result: the tie convention matters
    assert ndcg([1.0, 1.0], [0, 1], [0, 2]) == pytest.approx(1 / LOG3)
    assert ndcg([1.0, 1.0], [1, 0], [0, 2]) == 1.0


def test_binary_metrics_by_hand():
    s = [0.9, 0.8, 0.7, 0.6, 0.5]
    y = [1, 0, 2, 0, 1]  # relevant at ranks 1, 3, 5
    off = [0, 5]
    assert average_precision(s, y, off) == pytest.approx((1 + 2 / 3 + 3 / 5) / 3)
    assert average_precision(s, y, off, k=3) == pytest.approx((1 + 2 / 3) / 3)
    assert average_precision(s, y, off, threshold=2) == pytest.approx(1 / 3)
    assert precision_at_k(s, y, off, k=2) == 0.5
    assert precision_at_k(s, y, off, k=10) == pytest.approx(3 / 10)
    assert rbp(s, y, off, p=0.5) == pytest.approx(0.5 * (1 + 0.25 + 0.0625))
    assert rbp(s, y, off, p=0.5, k=3) == pytest.approx(0.5 * (1 + 0.25))
    assert avg_rank(s, y, off) == 9.0
    assert mean_relevant_rank(s, y, off) == 3.0


def test_all_zero_queries_follow_no_relevant():
    s = np.array([2.0, 1.0, 0.0, 3.0, 1.0])
    y = np.array([0, 1, 1, 0, 0])
    off = [0, 3, 5]
    first = (1 / LOG3 + 1 / 2) / (1 + 1 / LOG3)
    for fn, v0 in ((ndcg, first), (average_precision, (1 / 2 + 2 / 3) / 2)):
        per = fn(s, y, off, reduce=None)
        assert per.dtype == np.float64 and not np.isnan(per).any()
        np.testing.assert_allclose(per, [v0, 0.0])
        assert fn(s, y, off) == pytest.approx(v0 / 2)
        assert fn(s, y, off, no_relevant=1.0) == pytest.approx((v0 + 1) / 2)
        assert fn(s, y, off, no_relevant="skip") == pytest.approx(v0)
        assert fn(s, y, off, no_relevant="skip", reduce="sum") == pytest.approx(v0)
        skipped = fn(s, y, off, no_relevant="skip", reduce=None)
        assert skipped[0] == pytest.approx(v0) and np.isnan(skipped[1])
    np.testing.assert_array_equal(mean_relevant_rank(s, y, off, reduce=None), [2.5, np.nan])
    assert mean_relevant_rank(s, y, off, no_relevant=0.0, reduce="sum") == 2.5
    # the other metrics are simply 0 there
    for fn, kw in ((dcg, {}), (precision_at_k, {"k": 2}), (rbp, {}), (avg_rank, {}),
                   (additive_metric, {"weight": "dcg"})):
        assert fn(s, y, off, reduce=None, **kw)[1] == 0.0


# ----------------------------------------------------------------------------- sklearn


@pytest.mark.parametrize("k", [None, 1, 3, 10])
def test_ndcg_matches_sklearn_without_ties(k):
    from sklearn.metrics import ndcg_score

    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 12, size=25)
    off = offsets_from_lengths(lengths)
    s = rng.standard_normal(off[-1])  # continuous: no ties
    y = rng.integers(0, 5, size=off[-1])
    y[off[3]:off[4]] = 0  # an all-zero query: sklearn gives 0, as no_relevant=0.0
    lin = ndcg(s, y, off, k=k, gain="linear", reduce=None)
    exp = ndcg(s, y, off, k=k, reduce=None)
    for q in range(len(lengths)):
        sl = slice(off[q], off[q + 1])
        assert lin[q] == pytest.approx(ndcg_score([y[sl]], [s[sl]], k=k))
        assert exp[q] == pytest.approx(ndcg_score([2.0 ** y[sl] - 1], [s[sl]], k=k))
    assert ndcg(s, y, off, k=k) == pytest.approx(np.mean(exp))


# ----------------------------------------------------------------------------- reference on random inputs


@settings(max_examples=50, deadline=None)
@given(prob=problems(), k=st.sampled_from([None, 1, 2, 5]), gain=st.sampled_from(["exp2", "linear"]))
def test_dcg_ndcg_match_reference(prob, k, gain):
    s, y, off = prob
    S, Y = split(s, off), split(y, off)
    np.testing.assert_allclose(dcg(s, y, off, k=k, gain=gain, reduce=None),
                               [ref_dcg(a, b, k, gain) for a, b in zip(S, Y)], atol=1e-12)
    ref = [ref_ndcg(a, b, k, gain) for a, b in zip(S, Y)]
    per = ndcg(s, y, off, k=k, gain=gain, reduce=None)
    np.testing.assert_allclose(per, [0.0 if v is None else v for v in ref], atol=1e-12)
    assert np.all((per >= 0) & (per <= 1 + 1e-12))
    assert ndcg(s, y, off, k=k, gain=gain) == pytest.approx(per.mean())
    assert ndcg(s, y, off, k=k, gain=gain, reduce="sum") == pytest.approx(per.sum())
    kept = [v for v in ref if v is not None]
    if kept:
        assert ndcg(s, y, off, k=k, gain=gain, no_relevant="skip") == pytest.approx(np.mean(kept))
    else:
        with pytest.raises(ValueError, match="skip"):
            ndcg(s, y, off, k=k, gain=gain, no_relevant="skip")


@settings(max_examples=50, deadline=None)
@given(prob=problems(), k=st.sampled_from([None, 1, 3]), p=st.sampled_from([0.5, 0.8, 0.95]))
def test_binary_metrics_match_reference(prob, k, p):
    s, y, off = prob
    S, Y = split(s, off), split(y, off)
    ap = average_precision(s, y, off, k=k, reduce=None)
    np.testing.assert_allclose(ap, [ref_ap(a, b, k) or 0.0 for a, b in zip(S, Y)], atol=1e-12)
    assert np.all((ap >= 0) & (ap <= 1 + 1e-12))
    assert average_precision(s, y, off, k=k) == pytest.approx(ap.mean())
    kk = 2 if k is None else k
    np.testing.assert_allclose(precision_at_k(s, y, off, k=kk, reduce=None),
                               [ref_prec(a, b, kk) for a, b in zip(S, Y)], atol=1e-12)
    np.testing.assert_allclose(rbp(s, y, off, p=p, k=k, reduce=None),
                               [ref_rbp(a, b, p, k) for a, b in zip(S, Y)], atol=1e-12)
    sums = avg_rank(s, y, off, reduce=None)
    np.testing.assert_allclose(sums, [ref_rank_sum(a, b) for a, b in zip(S, Y)])
    n_rel = np.array([sum(ref_rel(b)) for b in Y])
    np.testing.assert_allclose(mean_relevant_rank(s, y, off, no_relevant=0.0, reduce=None),
                               np.where(n_rel > 0, sums / np.maximum(n_rel, 1), 0.0))


@settings(max_examples=50, deadline=None)
@given(prob=problems(), weight=st.sampled_from(["avg_rank", "dcg", "prec@k", "rbp"]))
def test_additive_metric_matches_reference_and_named_metrics(prob, weight):
    s, y, off = prob
    params = {"k": 3} if weight == "prec@k" else {"p": 0.7} if weight == "rbp" else {}
    lam = get_lambda(weight, **params)
    per = additive_metric(s, y, off, weight=weight, reduce=None, **params)
    S, Y = split(s, off), split(y, off)
    np.testing.assert_allclose(per, [ref_additive(a, b, lambda r: float(lam.value(r))) for a, b in zip(S, Y)],
                               atol=1e-12)
    # Table 1: each lambda-metric is minus (or, for AvgRank, exactly) the usual metric.
    binary = (y >= 1).astype(float)
    expected = {
        "avg_rank": avg_rank(s, y, off, reduce=None),
        "dcg": -dcg(s, binary, off, gain="linear", reduce=None),
        "prec@k": -precision_at_k(s, y, off, k=3, reduce=None),
        "rbp": -rbp(s, y, off, p=0.7, reduce=None),
    }[weight]
    np.testing.assert_allclose(per, expected, atol=1e-12)
    assert additive_metric(s, y, off, weight=weight, **params) == pytest.approx(per.mean())


def test_additive_metric_threshold_none_uses_graded_labels():
    s, y, off = [3.0, 2.0, 1.0], [2, 0, 1], [0, 3]
    assert additive_metric(s, y, off, weight="dcg", threshold=None) == pytest.approx(-dcg(s, y, off, gain="linear"))
    assert additive_metric(s, y, off, weight=lambda r: r, threshold=2) == 1.0


# ----------------------------------------------------------------------------- rank weights


def test_lambda_values_table1():
    r = np.array([1.0, 2.0, 3.0, 7.0])
    np.testing.assert_allclose(lambda_avg_rank(r), r)
    np.testing.assert_allclose(lambda_dcg(r), -1 / np.log2(1 + r))
    np.testing.assert_allclose(lambda_prec_at_k(r, 2), [-0.5, -0.5, 0.0, 0.0])
    # RBP weight sums to -(1 - p^n) over ranks 1..n: the (1-p) p^(r-1) form, not (1-p)/p^r
    p = 0.8
    np.testing.assert_allclose(lambda_rbp(r, p), -(1 - p) * p ** (r - 1))
    assert lambda_rbp(np.arange(1, 201), p).sum() == pytest.approx(-1.0)
    assert set(LAMBDA_WEIGHTS) == {"avg_rank", "dcg", "prec@k", "rbp"}
    # all weights are non-decreasing in the rank (required by the hinge rank bound)
    for name, params in (("avg_rank", {}), ("dcg", {}), ("prec@k", {"k": 3}), ("rbp", {"p": 0.6})):
        v = get_lambda(name, **params).value(np.arange(1.0, 40.0))
        assert np.all(np.diff(v) >= 0), name


@pytest.mark.parametrize("name,params", [("avg_rank", {}), ("dcg", {}), ("rbp", {"p": 0.8}), ("rbp", {"p": 0.3})])
def test_lambda_derivative_and_shape(name, params):
    lam = get_lambda(name, **params)
    assert isinstance(lam, LambdaWeight) and lam.name == name
    r = np.linspace(1.0, 30.0, 300)
    h = 1e-5
    fd = (lam.value(r + h) - lam.value(r - h)) / (2 * h)
    np.testing.assert_allclose(lam.derivative(r), fd, rtol=1e-6, atol=1e-9)
    second = np.diff(lam.value(r), 2)
    if lam.convex:
        assert np.all(second >= -1e-12)
    if lam.concave:
        assert np.all(second <= 1e-12)
    assert lam.concave is True  # every differentiable weight of Table 1 is concave (CCP applies)
    assert lam.convex is (name == "avg_rank")
    assert lam(np.array([2.0])).shape == (1,)


def test_get_lambda_records_and_errors():
    prec = get_lambda("prec@k", k=2)
    assert prec.derivative is None and prec.convex is False and prec.concave is False
    np.testing.assert_allclose(prec.value([1, 3]), [-0.5, 0.0])
    np.testing.assert_allclose(get_lambda("rbp").value([1.0]), [-0.2])  # default p = 0.8
    custom = get_lambda(np.sqrt, concave=True)
    assert custom.value is np.sqrt and custom.concave is True and custom.derivative is None
    assert get_lambda(custom) is custom
    for bad, params in (("ndcg", {}), ("prec@k", {}), ("prec@k", {"k": 0}), ("rbp", {"p": 1.0}),
                        ("rbp", {"q": 0.5}), ("dcg", {"k": 3}), (custom, {"p": 0.5})):
        with pytest.raises(ValueError):
            get_lambda(bad, **params)


# ----------------------------------------------------------------------------- input validation


def test_invalid_inputs_raise_value_error():
    s, y, off = [1.0, 2.0, 3.0], [0, 1, 2], [0, 1, 3]
    with pytest.raises(ValueError, match="index 1"):
        ndcg([1.0, np.nan, 3.0], y, off)
    with pytest.raises(ValueError, match="index 2"):
        ranks([1.0, 2.0, np.inf], off)
    with pytest.raises(ValueError, match="mismatched"):
        ndcg(s, y, [0, 1, 4])
    with pytest.raises(ValueError, match="mismatched"):
        average_precision(s, [0, 1], off)
    with pytest.raises(ValueError, match="empty"):
        dcg(s, y, [0, 0, 3])
    with pytest.raises(ValueError, match=r"labels\[1\]"):
        precision_at_k(s, [0, -1, 2], off, k=1)
    with pytest.raises(ValueError, match="skip"):
        ndcg(s, [0, 0, 0], off, no_relevant="skip")
    with pytest.raises(ValueError, match="skip"):
        average_precision(s, [0, 0, 0], off, no_relevant="skip", reduce=None)
    with pytest.raises(ValueError, match="reduce"):
        dcg(s, y, off, reduce="max")
    with pytest.raises(ValueError, match="gain"):
        dcg(s, y, off, gain="log")
    with pytest.raises(ValueError, match="k must"):
        ndcg(s, y, off, k=0)
    with pytest.raises(ValueError, match="k must"):
        precision_at_k(s, y, off, k=None)
    with pytest.raises(ValueError, match="no_relevant"):
        ndcg(s, y, off, no_relevant="zero")
    with pytest.raises(ValueError, match="p must"):
        rbp(s, y, off, p=0.0)
    with pytest.raises(ValueError, match="unknown rank weight"):
        additive_metric(s, y, off, weight="map")


@pytest.mark.parametrize("lengths", [[70, 90, 65], [200, 3, 1, 80], [10] * 30, [1, 7, 3, 12, 2, 9], [1, 1, 2, 1]])
def test_order_within_queries_long_lists_match_the_stable_lexsort(lengths):
    """The padded per-query sort (equal or ragged, long or short lists; lexsort where padding would more
    than double the rows): same order as one stable lexsort, ties by row order."""
    from counterfactual_ltr._segments import offsets_from_lengths, order_within_queries, segment_ids

    offsets = offsets_from_lengths(lengths)
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, offsets[-1]).astype(np.float64)     # many ties
    scores[::7] = -0.0
    reference = np.lexsort((-scores, segment_ids(offsets)))
    np.testing.assert_array_equal(order_within_queries(scores, offsets), reference)
    scores[3] = np.nan                                               # non-finite: lexsort's order
    np.testing.assert_array_equal(order_within_queries(scores, offsets), np.lexsort((-scores, segment_ids(offsets))))
