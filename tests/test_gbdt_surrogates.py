"""The smooth surrogates of GBDTPropDCG: values against loops, gradients and curvatures against finite
differences, the bound they keep, the hinge bound when the smoothing is off, and LightGBM's own lambdarank."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from counterfactual_ltr._segments import offsets_from_lengths, rank_within_queries
from counterfactual_ltr.metrics import get_lambda
from counterfactual_ltr.surrogates import (ClickAnchorPairs, ips_lambdarank, ips_lambdarank_newton, lambda_hinge_bound,
                                           smooth_lambda_bound, smooth_lambda_bound_newton, softplus_hinge)

METRICS = ("dcg", "avg_rank", "rbp")


def _problem(rng, n_queries=5, max_len=7, tie_scores=False, negative=False):
    lengths = rng.integers(1, max_len + 1, size=n_queries)
    offsets = offsets_from_lengths(lengths)
    n = offsets[-1]
    scores = rng.integers(-3, 4, size=n).astype(float) if tie_scores else rng.normal(size=n) * 2
    weights = np.where(rng.random(n) < 0.5, rng.uniform(1, 20, size=n), 0.0)
    if negative:
        weights = np.where(rng.random(n) < 0.3, -rng.uniform(0.5, 5, size=n), weights)
    return scores, weights, offsets


def _pair_term(z, t, smoothing):
    """The smoothed hinge of one pair, written out."""
    if t == 0:
        return max(z, 0.0)
    if smoothing == "softplus":
        return t * np.log1p(np.exp(z / t))
    z = z + t / 2                                        # Huber of band t, shifted by half the band
    return 0.0 if z <= 0 else (z * z / (2 * t) if z < t else z - t / 2)


def _loops(scores, weights, offsets, lam, margin, t, smoothing="softplus"):
    """``sum_j W_j lambda(1 + sum_y h(z_jy))`` and ``H_j`` by plain loops (the pair term written out)."""
    total, H_all = 0.0, {}
    for q in range(len(offsets) - 1):
        for j in range(offsets[q], offsets[q + 1]):
            H = 0.0
            for y in range(offsets[q], offsets[q + 1]):
                if y != j:
                    H += _pair_term(margin - (scores[j] - scores[y]), t, smoothing)
            H_all[j] = H
            total += weights[j] * float(lam.value(np.array([1.0 + H]))[0])
    return total, H_all


def _fd(f, s, h=1e-6):
    return np.array([(f(s + e * h) - f(s - e * h)) / (2 * h) for e in np.eye(len(s))])


def _fd_diag(grad, s, h=1e-6):
    """Diagonal of the Jacobian of ``grad`` by central differences."""
    return np.array([(grad(s + e * h) - grad(s - e * h))[i] / (2 * h) for i, e in enumerate(np.eye(len(s)))])


@settings(max_examples=60, deadline=None)
@given(z=st.floats(-60, 60), t=st.floats(0.01, 5.0))
def test_softplus_hinge_bounds_the_hinge_and_its_derivatives_match(z, t):
    value, slope, curvature = softplus_hinge(np.array([z]), t)
    hinge = max(z, 0.0)
    assert hinge - 1e-12 <= value[0] <= hinge + t * np.log(2) + 1e-12
    h = 1e-6 * max(1.0, t)
    v = lambda x: softplus_hinge(np.array([x]), t)
    assert slope[0] == pytest.approx((v(z + h)[0][0] - v(z - h)[0][0]) / (2 * h), abs=1e-6)
    assert curvature[0] == pytest.approx((v(z + h)[1][0] - v(z - h)[1][0]) / (2 * h), abs=1e-5)
    assert 0.0 <= curvature[0] <= 1.0 / (4 * t) + 1e-12


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("seed", range(4))
def test_no_smoothing_is_the_svm_propdcg_bound(metric, seed):
    """temperature = 0 gives the hinge bound of SVM PropDCG / Deep PropDCG: value and gradient."""
    rng = np.random.default_rng(seed)
    scores, weights, offsets = _problem(rng, tie_scores=seed % 2 == 1)
    for margin in (1.0, 2.0):
        for reduce in ("sum", "mean", None):
            ours = smooth_lambda_bound(scores, weights, offsets, metric=metric, margin=margin, temperature=0.0,
                                       reduce=reduce)
            svm = lambda_hinge_bound(scores, weights, offsets, metric=metric, margin=margin, reduce=reduce)
            np.testing.assert_allclose(ours[0], svm[0], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(ours[1], svm[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("smoothing, temperature", [("softplus", 0.2), ("softplus", 1.0), ("huber", 0.5),
                                                    ("huber", 1.0)])
@pytest.mark.parametrize("seed", range(3))
def test_value_gradient_and_curvature(metric, smoothing, temperature, seed):
    """Value against loops; gradient against finite differences of the value; curvature against finite
    differences of the majoriser's gradient (CCP weights frozen), and the exact Hessian's diagonal against
    the curvature plus the lambda'' term it leaves out."""
    rng = np.random.default_rng(seed)
    scores, weights, offsets = _problem(rng)
    lam = get_lambda(metric)
    kw = dict(metric=metric, temperature=temperature, smoothing=smoothing)
    loss, grad, hess = smooth_lambda_bound_newton(scores, weights, offsets, **kw)
    expected, H = _loops(scores, weights, offsets, lam, 1.0, temperature, smoothing)
    assert loss == pytest.approx(expected, rel=1e-10)
    assert smooth_lambda_bound(scores, weights, offsets, **kw)[0] == loss
    np.testing.assert_allclose(grad, _fd(lambda s: smooth_lambda_bound(s, weights, offsets, **kw)[0], scores),
                               rtol=1e-5, atol=1e-6)
    # The majoriser: lambda linearised at `scores`, i.e. sum_j c_j H_j(s) with c_j frozen.
    c = np.array([weights[j] * lam.derivative(np.array([1.0 + H[j]]))[0] for j in range(len(scores))])
    majoriser_grad = lambda s: smooth_lambda_bound(s, c, offsets, metric="avg_rank", temperature=temperature,
                                                   smoothing=smoothing)[1]
    np.testing.assert_allclose(hess, _fd_diag(majoriser_grad, scores), rtol=1e-5, atol=1e-6)
    # The exact diagonal adds sum_j W_j lambda''(1 + H_j) (dH_j / ds_d)^2 (lambda'' by differences of lambda').
    r = 1.0 + np.array([H[j] for j in range(len(scores))])
    lam2 = (lam.derivative(r + 1e-5) - lam.derivative(r - 1e-5)) / 2e-5
    extra = np.zeros(len(scores))
    for j in np.flatnonzero(weights):
        dH = _fd(lambda s: _loops(s, np.eye(len(s))[j], offsets, get_lambda("avg_rank"), 1.0, temperature,
                                  smoothing)[0], scores)
        extra += weights[j] * lam2[j] * dH ** 2
    exact = _fd_diag(lambda s: smooth_lambda_bound(s, weights, offsets, **kw)[1], scores)
    np.testing.assert_allclose(exact, hess + extra, rtol=1e-4, atol=1e-5)
    if metric != "avg_rank":
        assert np.all(extra <= 1e-12)          # concave lambda: the majoriser's curvature is the larger one


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), temperature=st.sampled_from([0.05, 0.5, 1.0]),
       metric=st.sampled_from(METRICS), smoothing=st.sampled_from(["softplus", "huber"]))
def test_smoothed_bound_keeps_the_bound_on_the_ips_risk(seed, temperature, metric, smoothing):
    """hinge bound <= smoothed bound <= the stated excess over it; the hinge bound >= the IPS risk."""
    rng = np.random.default_rng(seed)
    scores, weights, offsets = _problem(rng, tie_scores=True)
    lam = get_lambda(metric)
    risk = float(np.sum(weights * lam.value(rank_within_queries(scores, offsets).astype(float))))
    hinge, _ = lambda_hinge_bound(scores, weights, offsets, metric=metric)
    smooth = smooth_lambda_bound(scores, weights, offsets, metric=metric, temperature=temperature,
                                 smoothing=smoothing, reduce=None)[0]
    assert hinge >= risk - 1e-9
    assert smooth.sum() >= hinge - 1e-9
    # Excess: each of the m - 1 pairs of a clicked document adds at most t log 2 (Huber: mu / 8) to its H_j.
    _, H = _loops(scores, weights, offsets, lam, 1.0, 0.0)
    lengths = np.diff(offsets)[np.searchsorted(offsets, np.arange(len(scores)), side="right") - 1]
    H = np.array([H[j] for j in range(len(scores))])
    per_pair = temperature * np.log(2) if smoothing == "softplus" else temperature / 8
    most = weights * lam.value(1.0 + H + (lengths - 1) * per_pair)
    assert smooth.sum() <= float(most.sum()) + 1e-9


def test_curvature_is_positive_on_every_document_of_a_clicked_query():
    rng = np.random.default_rng(7)
    scores, weights, offsets = _problem(rng, n_queries=30, max_len=12)
    _, _, hess = smooth_lambda_bound_newton(scores, weights, offsets, temperature=0.5)
    query = np.searchsorted(offsets, np.arange(len(scores)), side="right") - 1
    lengths = np.diff(offsets)
    clicked = np.bincount(query, weights > 0, minlength=len(lengths)) > 0
    covered = clicked[query] & (lengths[query] > 1)
    assert np.all(hess[covered] > 0) and np.all(hess[~covered] == 0)


def test_negative_weights_keep_their_gradient_and_drop_their_curvature():
    rng = np.random.default_rng(3)
    scores, weights, offsets = _problem(rng, negative=True)
    _, grad, hess = smooth_lambda_bound_newton(scores, weights, offsets, temperature=0.5)
    positive = np.where(weights > 0, weights, 0.0)
    _, _, hess_pos = smooth_lambda_bound_newton(scores, positive, offsets, temperature=0.5)
    fd = _fd(lambda s: smooth_lambda_bound(s, weights, offsets, temperature=0.5)[0], scores)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)
    assert np.all(hess >= 0)
    # Only positive CCP weights curve: at the same H_j the positive part's curvature is what remains.
    assert np.all(hess <= hess_pos + 1e-9) or np.allclose(hess, hess_pos)


@pytest.mark.parametrize("metric", ["dcg", "avg_rank", "rbp"])
@pytest.mark.parametrize("seed", range(3))
def test_ips_lambdarank_value_gradient_and_curvature(metric, seed):
    rng = np.random.default_rng(seed)
    scores, weights, offsets = _problem(rng)
    lam = get_lambda(metric)
    sigma = 1.5
    loss, grad, hess = ips_lambdarank_newton(scores, weights, offsets, metric=metric, sigma=sigma)
    ranks = rank_within_queries(scores, offsets).astype(float)
    expected = 0.0
    for q in range(len(offsets) - 1):
        for j in range(offsets[q], offsets[q + 1]):
            for y in range(offsets[q], offsets[q + 1]):
                if y != j:
                    delta = abs(lam.value(ranks[[j]])[0] - lam.value(ranks[[y]])[0])
                    expected += weights[j] * delta * np.log1p(np.exp(-sigma * (scores[j] - scores[y])))
    assert loss == pytest.approx(expected, rel=1e-10)
    # Continuous scores: a small step changes no rank, so the loss at fixed ranks is what differences see.
    f = lambda s: ips_lambdarank(s, weights, offsets, metric=metric, sigma=sigma)[0]
    np.testing.assert_allclose(grad, _fd(f, scores), rtol=1e-5, atol=1e-6)
    g = lambda s: ips_lambdarank(s, weights, offsets, metric=metric, sigma=sigma)[1]
    np.testing.assert_allclose(hess, _fd_diag(g, scores), rtol=1e-5, atol=1e-6)


def test_ips_lambdarank_with_unit_weights_is_lightgbm_lambdarank():
    """One relevant document per query, weight 1: the pairs and weights of LightGBM's lambdarank
    (label_gain [0, 1], no normalisation); boosting with our gradients gives LightGBM's trees."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 12, size=60)
    offsets = offsets_from_lengths(lengths)
    n = int(offsets[-1])
    X = rng.normal(size=(n, 4))
    labels = np.zeros(n)
    labels[offsets[:-1] + rng.integers(0, lengths)] = 1.0
    params = {"num_leaves": 4, "learning_rate": 0.3, "min_data_in_leaf": 5, "num_threads": 1, "deterministic": True,
              "force_row_wise": True, "verbose": -1, "lambdarank_norm": False, "label_gain": [0.0, 1.0],
              "lambdarank_truncation_level": 100, "sigmoid": 1.0}

    def fobj(preds, _):
        _, grad, hess = ips_lambdarank_newton(preds, labels, offsets, metric="dcg")
        return grad, hess

    theirs = lgb.train({**params, "objective": "lambdarank"}, lgb.Dataset(X, labels, group=lengths), 20)
    ours = lgb.train({**params, "objective": fobj}, lgb.Dataset(X, labels, group=lengths), 20)
    # LightGBM reads the sigmoid from a table: the scores agree to its resolution (another rank weight,
    # e.g. avg_rank, is off by about 2 on scores of about 3).
    assert np.abs(theirs.predict(X)).max() > 1.0
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X), rtol=0, atol=1e-4)


def test_anchor_pairs_and_bad_input():
    pairs = ClickAnchorPairs([0.0, 3.0, 0.0, 0.0, -1.0], [0, 1, 3, 5])
    assert pairs.anchors.tolist() == [1, 4] and pairs.n_pairs == 2
    assert pairs.a.tolist() == [1, 4] and pairs.y.tolist() == [2, 3]
    with pytest.raises(ValueError, match="non-finite"):
        smooth_lambda_bound([np.nan, 1.0], [1.0, 0.0], [0, 2])
    with pytest.raises(ValueError, match="temperature"):
        smooth_lambda_bound([0.0, 1.0], [1.0, 0.0], [0, 2], temperature=-1.0)
    with pytest.raises(ValueError, match="margin"):
        smooth_lambda_bound([0.0, 1.0], [1.0, 0.0], [0, 2], margin=0.0)
    with pytest.raises(ValueError, match="not differentiable"):
        smooth_lambda_bound([0.0, 1.0], [1.0, 0.0], [0, 2], metric="prec@k", k=1)
    with pytest.raises(ValueError, match="temperature"):
        smooth_lambda_bound([0.0, 1.0], [1.0, 0.0], [0, 2], smoothing="huber", temperature=1.5)   # band > margin
    with pytest.raises(ValueError, match="smoothing"):
        smooth_lambda_bound([0.0, 1.0], [1.0, 0.0], [0, 2], smoothing="logistic")
    with pytest.raises(ValueError, match="sigma"):
        ips_lambdarank([0.0, 1.0], [1.0, 0.0], [0, 2], sigma=0.0)
    assert ips_lambdarank([0.0, 1.0], [1.0, 0.0], [0, 2], metric="prec@k", k=1)[0] > 0
    with pytest.raises(ValueError, match="click_weights"):
        smooth_lambda_bound([0.0, 1.0], [1.0], [0, 2])


def test_sorted_pairs_match_explicit_pairs_on_long_lists():
    """The shifted Huber from sorted scores equals the same pair terms summed over enumerated pairs."""
    rng = np.random.default_rng(11)
    offsets = offsets_from_lengths([200, 150, 1, 90])
    n = int(offsets[-1])
    scores = rng.normal(size=n) * 3
    weights = np.where(rng.random(n) < 0.2, rng.uniform(0.5, 5, size=n), 0.0)
    loss, grad, hess = smooth_lambda_bound_newton(scores, weights, offsets, smoothing="huber", temperature=1.0)
    pairs = ClickAnchorPairs(weights, offsets)
    z = 1.5 - (scores[pairs.a] - scores[pairs.y])        # margin + mu/2
    value = np.where(z <= 0, 0.0, np.where(z < 1.0, z * z / 2, z - 0.5))
    slope = np.clip(z, 0.0, 1.0)
    lam = get_lambda("dcg")
    H = np.bincount(pairs.owner, value, minlength=pairs.anchors.size)
    c = pairs.weights * lam.derivative(1.0 + H)
    assert loss == pytest.approx(float(np.sum(pairs.weights * lam.value(1.0 + H))), rel=1e-12)
    expected = np.bincount(pairs.y, c[pairs.owner] * slope, minlength=n) - np.bincount(pairs.a, c[pairs.owner] * slope,
                                                                                       minlength=n)
    np.testing.assert_allclose(grad, expected, rtol=1e-9, atol=1e-9)
    band = c[pairs.owner] * ((z > 0) & (z < 1.0))
    np.testing.assert_allclose(hess, np.bincount(pairs.y, band, minlength=n) + np.bincount(pairs.a, band, minlength=n),
                               rtol=1e-9, atol=1e-9)
