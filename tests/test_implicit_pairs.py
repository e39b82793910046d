"""Implicit click pairs: every pair sum against the explicit pairs, and the solver against cvxpy."""

import numpy as np
import pytest

import counterfactual_ltr.solvers.pairwise as solvers
from counterfactual_ltr._segments import padded_layout, rank_within_queries, sort_within_queries, sorted_within_queries
from counterfactual_ltr.implicit_pairs import ClickPairs, _Smoothed, band_hessian
from counterfactual_ltr.solvers import solve_pairwise_hinge


def _pairs(seed, ties=False, max_len=40):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len, rng.integers(2, 20))
    offsets = np.r_[0, np.cumsum(lengths)]
    n = int(offsets[-1])
    anchors = rng.choice(n, size=max(1, n // 4), replace=bool(seed % 2))   # repeats on odd seeds
    weights = rng.uniform(0, 3, anchors.size)
    scores = rng.normal(size=n)
    if ties:
        scores = np.round(scores, 1)
    return ClickPairs(offsets, anchors, weights), scores, rng


@pytest.mark.parametrize("seed", range(8))
def test_explicit_pairs_are_every_other_row_of_the_anchor_query(seed):
    pairs, _, _ = _pairs(seed)
    i, j, c = pairs.explicit()
    assert i.size == pairs.n_pairs
    q = np.searchsorted(pairs.query_offsets, np.arange(pairs.n_rows), side="right") - 1
    assert np.all(q[i] == q[j]) and np.all(i != j)
    for k, a in enumerate(pairs.anchors):
        mine = np.flatnonzero(i == a) if np.sum(pairs.anchors == a) == 1 else None
        if mine is not None:
            assert sorted(j[mine].tolist()) == [y for y in range(*pairs.query_offsets[q[a]:q[a] + 2]) if y != a]
            assert np.all(c[mine] == pairs.weights[k])


@pytest.mark.parametrize("seed", range(9))
def test_sort_within_queries_matches_lexsort(seed):
    """Stable ascending order per query, on unequal lists, equal lists (no padding) and very unequal ones."""
    rng = np.random.default_rng(seed)
    lengths = [rng.integers(1, 30, 12), np.full(7, 25), np.r_[np.ones(20, dtype=int), 400]][seed % 3]
    offsets = np.r_[0, np.cumsum(lengths)]
    s = np.round(rng.normal(size=offsets[-1]), 1)            # ties: row order must be kept
    seg = np.repeat(np.arange(offsets.size - 1), lengths)
    expected = np.lexsort((s, seg))
    assert np.array_equal(sort_within_queries(s, offsets), expected)
    # With the layout computed once; negative zeros tie with zeros.
    s[s == 0] = -0.0 if seed % 2 else 0.0
    layout = padded_layout(offsets)
    assert layout[1] == (0 if seed % 3 == 2 else lengths.max()) and (layout[2] is None) == (seed % 3 > 0)
    order, ordered = sorted_within_queries(s, offsets, layout)
    assert np.array_equal(order, expected) and np.array_equal(ordered, s[expected])


@pytest.mark.parametrize("seed", range(6))
def test_anchor_ranks_match_rank_within_queries(seed):
    """Ranks of the anchors from the pairs' sort: decreasing score, ties by row order (scores with ties)."""
    pairs, s, rng = _pairs(seed, ties=True)
    s = np.round(s, 0)
    H, ranks = pairs.hinge_sums_and_ranks(s)
    np.testing.assert_array_equal(ranks, rank_within_queries(s, pairs.query_offsets)[pairs.anchors])
    np.testing.assert_array_equal(H, pairs.hinge_sums(s))


@pytest.mark.parametrize("seed", range(6))
def test_sort_within_queries_exact_on_near_ties(seed):
    """Scores that differ only in the low bits the sort keys give to the row index are still ordered exactly."""
    rng = np.random.default_rng(seed)
    lengths = [np.full(6, 300), rng.integers(200, 300, 6)][seed % 2]
    offsets = np.r_[0, np.cumsum(lengths)]
    base = rng.choice([1.0, -3.0, 1e-300, 0.0], offsets[-1])
    s = base + rng.integers(-40, 40, offsets[-1]) * np.spacing(base)     # neighbours within 40 ulps
    s[rng.random(s.size) < 0.5] = rng.normal(size=1)[0]               # and exact ties
    seg = np.repeat(np.arange(offsets.size - 1), lengths)
    expected = np.lexsort((s, seg))
    assert np.array_equal(sort_within_queries(s, offsets), expected)


@pytest.mark.parametrize("seed", range(12))
def test_pair_sums_match_explicit_pairs(seed):
    pairs, s, rng = _pairs(seed, ties=seed % 3 == 0)
    margin = [1.0, 0.5, 2.0, 0.0, -0.5][seed % 5]
    mu = [1.0, 0.3, 0.01, 2.5][seed % 4]
    Cc = rng.uniform(0, 2, pairs.anchors.size)
    i, j, _ = pairs.explicit()
    owner = _owner(pairs)
    z = margin - (s[i] - s[j])
    # hinge sums per anchor
    expected_h = np.bincount(owner, np.maximum(z, 0), minlength=pairs.anchors.size)
    assert np.allclose(pairs.hinge_sums(s, margin), expected_h, atol=1e-10)
    ev = _Smoothed(pairs, s, Cc, margin, mu)
    assert ev.hinge() == pytest.approx(float(np.dot(Cc[owner], np.maximum(z, 0))), abs=1e-9)
    alpha = Cc[owner] * np.clip(z / mu, 0, 1)
    g, alpha_sum = ev.aggregate()
    n = pairs.n_rows
    assert alpha_sum == pytest.approx(alpha.sum(), abs=1e-9)
    assert np.allclose(g, np.bincount(i, alpha, minlength=n) - np.bincount(j, alpha, minlength=n), atol=1e-9)
    # Band Laplacian: band membership jumps at z = 0 and z = mu, where rounding of
    # s_a - margin against margin - (s_a - s_y) may disagree; scores off the grid avoid that.
    s = s + 1e-6 * rng.normal(size=s.size)
    z = margin - (s[i] - s[j])
    ev = _Smoothed(pairs, s, Cc, margin, mu)
    band = (z > 0) & (z < mu)
    h = Cc[owner][band] / mu
    V = rng.normal(size=(n, 3))
    diff = V[i[band]] - V[j[band]]
    LV = np.zeros_like(V)
    np.add.at(LV, i[band], h[:, None] * diff)
    np.add.at(LV, j[band], -h[:, None] * diff)
    assert np.allclose(ev.laplacian(V), LV, atol=1e-9)
    assert np.allclose(ev.laplacian(V[:, 0]), LV[:, 0], atol=1e-9)
    X = rng.normal(size=(n, 4))
    D = X[i[band]] - X[j[band]]
    assert np.allclose(band_hessian(X, ev), D.T @ (h[:, None] * D), atol=1e-8)
    # in blocks of one query at a time (bounded memory): the same matrix
    assert np.allclose(band_hessian(X, ev, block_bytes=1), D.T @ (h[:, None] * D), atol=1e-8)
    # either way of summing (prefix sums over covered rows, enumerated band pairs), any block size
    for method in ("prefix", "pairs"):
        for block in (1, 1 << 25):
            assert np.allclose(band_hessian(X, ev, block_bytes=block, method=method), D.T @ (h[:, None] * D),
                               atol=1e-8)
    # a sample of every k-th query, scaled by k: the exact Hessian of those queries' band pairs, times k
    for max_rows in (1, 5, 10 ** 9):
        covered = np.count_nonzero(np.cumsum(np.bincount(ev.lo, minlength=n + 1)
                                             - np.bincount(ev.hi, minlength=n + 1))[:n])
        stride = int(np.ceil(covered / max_rows)) if covered else 1
        q = np.searchsorted(pairs.query_offsets, i, side="right") - 1
        sub = band & (q % stride == 0) if stride > 1 else band
        Ds = X[i[sub]] - X[j[sub]]
        expected = stride * Ds.T @ ((Cc[owner][sub] / mu)[:, None] * Ds)
        assert np.allclose(band_hessian(X, ev, max_rows=max_rows), expected, atol=1e-8)
    with pytest.raises(ValueError, match="method"):
        band_hessian(X, ev, method="dense")


def _owner(pairs):
    lengths = np.diff(pairs.query_offsets)[pairs.anchor_query]
    owner = np.repeat(np.arange(pairs.anchors.size), lengths)
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)
    members = np.repeat(pairs.query_offsets[pairs.anchor_query], lengths) + np.arange(lengths.sum()) - first
    return owner[members != pairs.anchors[owner]]


def _reference(X, i, j, c, C, margin=1.0):
    cp = pytest.importorskip("cvxpy")
    w = cp.Variable(X.shape[1])
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * (c @ cp.pos(margin - (X[i] - X[j]) @ w))))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return prob.value


@pytest.fixture
def implicit_always(monkeypatch):
    monkeypatch.setattr(solvers, "_IMPLICIT_MIN_PAIRS_PER_ANCHOR", 0)


@pytest.mark.parametrize("seed", range(8))
def test_implicit_solver_matches_cvxpy_and_certifies(seed, implicit_always):
    pairs, _, rng = _pairs(seed, max_len=25)
    X = rng.normal(size=(pairs.n_rows, int(rng.integers(2, 7))))
    if seed % 3 == 0:
        X = np.round(X, 1)                        # ties between scores
    C = [0.01, 0.1, 1.0, 10.0, 1000.0][seed % 5]
    margin = [1.0, 0.5][seed % 2]
    res = solve_pairwise_hinge(X, pairs, None, None, C, margin=margin, tol=1e-9)
    i, j, c = pairs.explicit()
    ref = _reference(X, i, j, c, C, margin)
    assert res.converged and res.gap >= 0
    assert res.objective == pytest.approx(ref, rel=1e-6, abs=1e-9)
    assert res.objective - ref <= res.gap + 1e-7 * max(1.0, ref)
    assert res.dual_objective <= ref + 1e-7 * max(1.0, ref)
    s = X @ res.coef
    exact = 0.5 * res.coef @ res.coef + C * np.sum(c * np.maximum(0, margin - (s[i] - s[j])))
    assert res.objective == pytest.approx(exact, rel=1e-12)


def test_implicit_warm_start_and_automatic_choice(implicit_always):
    pairs, _, rng = _pairs(3, max_len=30)
    X = rng.normal(size=(pairs.n_rows, 5))
    cold = solve_pairwise_hinge(X, pairs, None, None, 10.0, tol=1e-10)
    re = pairs.with_weights(pairs.weights * rng.uniform(0.5, 2.0, pairs.weights.size))
    cold2 = solve_pairwise_hinge(X, re, None, None, 10.0, tol=1e-10)
    warm2 = solve_pairwise_hinge(X, re, None, None, 10.0, tol=1e-10, w0=cold.coef)
    assert warm2.converged and warm2.objective == pytest.approx(cold2.objective, rel=1e-8)
    i, j, c = re.explicit()
    explicit = solve_pairwise_hinge(X, i, j, c, 10.0, tol=1e-10)
    assert explicit.objective == pytest.approx(cold2.objective, rel=1e-8)


def test_long_lists_choose_the_implicit_path(monkeypatch):
    rng = np.random.default_rng(0)
    offsets = np.arange(0, 3 * 200 + 1, 200)
    X = rng.normal(size=(600, 3))
    pairs = ClickPairs(offsets, [5, 250, 580], [1.0, 2.0, 0.5])
    called = []
    real = solvers._solve_implicit
    monkeypatch.setattr(solvers, "_solve_implicit", lambda *a: called.append(1) or real(*a))
    res = solve_pairwise_hinge(X, pairs, None, None, 1.0, tol=1e-8)
    assert called and res.converged
    short = ClickPairs(np.arange(0, 601, 10), [5, 250, 580], [1.0, 2.0, 0.5])
    solve_pairwise_hinge(X, short, None, None, 1.0, tol=1e-8)
    assert len(called) == 1                   # 9 pairs per anchor: explicit pairs


def test_implicit_degenerate_problems(implicit_always):
    X = np.random.default_rng(0).normal(size=(6, 2))
    none = solve_pairwise_hinge(X, ClickPairs([0, 3, 6], [0, 4], [0.0, 0.0]), None, None, 1.0)
    assert none.converged and none.objective == 0.0 and not none.coef.any()
    # a click alone in its query has no pair; warm start from an arbitrary point
    pairs = ClickPairs([0, 1, 6], [0, 4], [1.0, 1.0])
    res = solve_pairwise_hinge(X, pairs, None, None, 1.0, w0=[1.0, 2.0], tol=1e-9)
    assert res.converged
    assert res.objective == pytest.approx(solve_pairwise_hinge(X, *pairs.explicit(), 1.0, tol=1e-9).objective,
                                          rel=1e-8)


@pytest.mark.parametrize("bad, match", [
    (dict(pairs_j=[0]), "must be None"),
    (dict(X=np.ones((7, 2))), "rows"),
])
def test_click_pairs_errors(bad, match):
    pairs = ClickPairs([0, 3, 6], [0, 4], [1.0, 1.0])
    args = dict(X=np.ones((6, 2)), pairs_j=None)
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        solve_pairwise_hinge(args["X"], pairs, args["pairs_j"], None, 1.0)


@pytest.mark.parametrize("args, match", [
    (([0, 3], [3], [1.0]), "out of range"),
    (([0, 3], [1], [-1.0]), ">= 0"),
    (([0, 3], [1], [1.0, 2.0]), "one per anchor"),
    (([0, 3], [0.5], [1.0]), "integer"),
    (([0, 3], [1], [np.nan]), "finite"),
])
def test_click_pairs_validation(args, match):
    with pytest.raises(ValueError, match=match):
        ClickPairs(*args)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("rtol", [1e-10, 0.1])
def test_line_search_meets_its_slope_condition(seed, rtol):
    # The smoothed objective along w + t u, from explicit pairs; the secant line search must
    # stop where |phi'(t)| <= rtol |phi'(0)| and hand back the evaluation at that t.
    from counterfactual_ltr.implicit_pairs import line_search

    pairs, _, rng = _pairs(seed, max_len=30)
    X = rng.normal(size=(pairs.n_rows, 4))
    Cc = rng.uniform(0.5, 5.0, pairs.anchors.size) * (10.0 if seed % 2 else 1.0)
    mu = [0.3, 0.01, 1.0][seed % 3]
    i, j, _ = pairs.explicit()
    owner = _owner(pairs)
    w, u = rng.normal(size=4), rng.normal(size=4) * 3
    s, Xu = X @ w, X @ u

    def slope(t):
        z = 1.0 - ((s + t * Xu)[i] - (s + t * Xu)[j])
        return float((w + t * u) @ u) - float(np.dot(Cc[owner] * np.clip(z / mu, 0, 1), Xu[i] - Xu[j]))

    def ev_at(t, need_hess):
        ev = _Smoothed(pairs, s + t * Xu, Cc, 1.0, mu)
        return ev.aggregate()[0], ev

    f0 = slope(0.0)
    if f0 >= 0:
        u, Xu, f0 = -u, -Xu, -f0
    t, ev = line_search(Xu, w, u, ev_at, mu, f0=f0, rtol=rtol, max_eval=200, return_eval=True)
    assert t > 0
    assert abs(slope(t)) <= rtol * -f0 + 1e-9 * max(1.0, -f0)
    assert ev is not None and np.allclose(ev.sorted.s, s + t * Xu)


def test_covered_is_the_union_length_of_the_bands():
    """``band_hessian`` picks its method from the rows the bands cover, counted from the intervals."""
    from counterfactual_ltr.implicit_pairs import _covered

    rng = np.random.default_rng(0)
    for _ in range(500):
        k = int(rng.integers(0, 8))
        lo = rng.integers(0, 30, k)
        hi = lo + rng.integers(0, 10, k)                  # empty bands too
        mask = np.zeros(40, dtype=bool)
        for a, b in zip(lo, hi):
            mask[a:b] = True
        assert _covered(lo, hi) == mask.sum()
