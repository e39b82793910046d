"""Exact solvers: solve_pairwise_hinge and solve_regularized against a cvxpy reference (Clarabel)."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from counterfactual_ltr.solvers import (SolverResult, pairwise_hinge_oracle, solve_pairwise_hinge,
                                        solve_regularized)

cp = pytest.importorskip("cvxpy")


def _reference(X, i, j, c, C, margin=1.0):
    """One slack per pair, Clarabel at tight tolerances."""
    w = cp.Variable(X.shape[1])
    D = X[i] - X[j]
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * (c @ cp.pos(margin - D @ w))))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return prob.value, w.value


def _problem(seed, C=None):
    rng = np.random.default_rng(seed)
    n, d, m = rng.integers(10, 50), rng.integers(3, 9), rng.integers(30, 300)
    X = rng.normal(size=(n, d))
    i, j = rng.integers(0, n, m), rng.integers(0, n, m)
    c = rng.uniform(0, 5, m)
    c[rng.random(m) < 0.2] = 0.0                       # some zero weights
    dup = rng.integers(0, m, 10)                       # duplicate pairs
    i, j, c = np.r_[i, i[dup]], np.r_[j, j[dup]], np.r_[c, c[dup]]
    if C is None:
        C = [0.01, 0.1, 1.0, 10.0, 1000.0][seed % 5]
    return X, i, j, c, C


@pytest.mark.parametrize("seed", range(10))
def test_pairwise_hinge_matches_cvxpy(seed):
    X, i, j, c, C = _problem(seed)
    res = solve_pairwise_hinge(X, i, j, c, C, tol=1e-9)
    ref, _ = _reference(X, i, j, c, C)
    assert isinstance(res, SolverResult) and res.converged
    assert res.gap >= 0
    assert res.objective == pytest.approx(ref, rel=1e-6, abs=1e-9)
    # the certificate is a true bound: sub-optimality <= gap, and the dual bound <= optimum
    assert res.objective - ref <= res.gap + 1e-7 * max(1.0, abs(ref))
    assert res.dual_objective <= ref + 1e-7 * max(1.0, abs(ref))
    s = X @ res.coef
    exact = 0.5 * res.coef @ res.coef + C * np.sum(c * np.maximum(0, 1 - (s[i] - s[j])))
    assert res.objective == pytest.approx(exact, rel=1e-12)


def test_pairwise_hinge_margin_and_loose_tol_gap_is_a_bound():
    X, i, j, c, C = _problem(3, C=5.0)
    ref, _ = _reference(X, i, j, c, C, margin=0.5)
    res = solve_pairwise_hinge(X, i, j, c, C, margin=0.5, tol=1e-2)
    assert res.converged and res.gap <= 1e-2 * max(1.0, res.objective)
    assert res.objective - ref <= res.gap + 1e-8 and res.dual_objective <= ref + 1e-8


def test_warm_start_same_solution():
    X, i, j, c, C = _problem(7, C=10.0)
    cold = solve_pairwise_hinge(X, i, j, c, C, tol=1e-10)
    c2 = c * np.random.default_rng(0).uniform(0.5, 2.0, size=c.size)
    cold2 = solve_pairwise_hinge(X, i, j, c2, C, tol=1e-10)
    warm2 = solve_pairwise_hinge(X, i, j, c2, C, tol=1e-10, w0=cold.coef)
    assert warm2.converged
    assert warm2.objective == pytest.approx(cold2.objective, rel=1e-9)
    np.testing.assert_allclose(warm2.coef, cold2.coef, atol=1e-4)
    # from the optimum itself, nothing to do
    again = solve_pairwise_hinge(X, i, j, c2, C, tol=1e-6, w0=cold2.coef)
    assert again.n_iter < cold2.n_iter


@pytest.mark.parametrize("C", [0.1, 10.0, 1000.0])
def test_gap_safe_screening_keeps_the_optimum(C, monkeypatch, capsys):
    """Screened pairs are fixed at alpha = C c or 0; the optimum must not move."""
    import counterfactual_ltr.solvers.finisher as solvers

    rng = np.random.default_rng(int(C))
    n, d, m = 400, 6, 6000
    X = rng.normal(size=(n, d))
    i, j = rng.integers(0, n, m), rng.integers(0, n, m)
    c = rng.uniform(0.1, 3.0, m)
    finish = solvers._FINISH_START
    monkeypatch.setattr(solvers, "_FINISH_START", 0.0)  # the finisher would end the solve before screening
    screened = solve_pairwise_hinge(X, i, j, c, C, tol=1e-10, verbose=True)
    working = [int(line.rsplit("=", 1)[1]) for line in capsys.readouterr().out.splitlines()]
    assert min(working) < 0.5 * m                      # screening did remove pairs
    monkeypatch.setattr("counterfactual_ltr.solvers.working_set._SCREEN_START", 0.0)  # never screen (the finisher on again)
    monkeypatch.setattr(solvers, "_FINISH_START", finish)
    plain = solve_pairwise_hinge(X, i, j, c, C, tol=1e-10)
    assert screened.converged and plain.converged
    assert screened.objective == pytest.approx(plain.objective, rel=1e-9)
    np.testing.assert_allclose(screened.coef, plain.coef, atol=1e-4 * max(1.0, np.abs(plain.coef).max()))
    # the certificate is on the full problem, not the reduced one
    s = X @ screened.coef
    full = 0.5 * screened.coef @ screened.coef + C * np.sum(c * np.maximum(0, 1 - (s[i] - s[j])))
    assert screened.objective == pytest.approx(full, rel=1e-12)
    assert screened.dual_objective <= plain.objective + 1e-9 * max(1.0, plain.objective)


def test_wrong_warm_start_guesses_are_released(capsys):
    """Warm starts fix far-from-margin pairs speculatively; a misleading w0 must still give the optimum."""
    rng = np.random.default_rng(11)
    n, d, m = 300, 5, 4000
    X = rng.normal(size=(n, d))
    i, j = rng.integers(0, n, m), rng.integers(0, n, m)
    truth = rng.normal(size=d)
    keep = X[i] @ truth > X[j] @ truth + 0.3                # mostly separable along ``truth``
    i, j = i[keep], j[keep]
    c = rng.uniform(0.5, 2.0, i.size)
    cold = solve_pairwise_hinge(X, i, j, c, 10.0, tol=1e-9)
    turn = rng.normal(size=d)
    misleading = cold.coef + 0.6 * np.linalg.norm(cold.coef) * turn / np.linalg.norm(turn)
    warm = solve_pairwise_hinge(X, i, j, c, 10.0, tol=1e-9, w0=misleading, verbose=True)
    working = [int(line.rsplit("=", 1)[1]) for line in capsys.readouterr().out.splitlines()]
    assert working[0] < i.size                              # it did guess
    assert any(b > a for a, b in zip(working, working[1:]))  # and had to release pairs
    assert warm.converged
    assert cold.converged and warm.objective == pytest.approx(cold.objective, rel=2e-9)
    assert warm.dual_objective <= cold.objective + 1e-9 * cold.objective
    np.testing.assert_allclose(warm.coef, cold.coef, atol=1e-4 * np.abs(cold.coef).max())


def test_all_zero_weights_and_no_pairs():
    X = np.random.default_rng(0).normal(size=(5, 3))
    res = solve_pairwise_hinge(X, [0, 1], [1, 2], [0.0, 0.0], 1.0)
    assert res.converged and res.objective == 0 and np.all(res.coef == 0)
    res = solve_pairwise_hinge(X, [], [], [], 1.0)
    assert res.converged and res.objective == 0


def test_convergence_warning_when_max_iter_tiny():
    X, i, j, c, C = _problem(4, C=1000.0)
    with pytest.warns(ConvergenceWarning, match="gap"):
        res = solve_pairwise_hinge(X, i, j, c, C, tol=1e-12, max_iter=1)
    assert not res.converged and res.gap > 0
    with pytest.warns(ConvergenceWarning, match="gap"):
        res = solve_regularized(pairwise_hinge_oracle(X, i, j, c), X.shape[1], C, tol=1e-12, max_iter=2)
    assert not res.converged


@pytest.mark.parametrize("bad,match", [
    (dict(C=0.0), "C"), (dict(C=-1.0), "C"), (dict(C=np.nan), "C"),
    (dict(c=np.array([1.0, -1.0, 1.0])), "pair_weights"),
    (dict(X_nan=True), "non-finite"),
    (dict(i=np.array([0, 1, 9])), "out of range"),
    (dict(j=np.array([0, -1, 2])), "out of range"),
    (dict(c=np.array([1.0, 1.0])), "mismatched"),
    (dict(j=np.array([0, 1])), "mismatched"),
])
def test_bad_input(bad, match):
    X = np.random.default_rng(0).normal(size=(4, 2))
    if bad.get("X_nan"):
        X[2, 1] = np.nan
    i, j, c = bad.get("i", np.array([0, 1, 2])), bad.get("j", np.array([1, 2, 3])), bad.get("c", np.ones(3))
    with pytest.raises(ValueError, match=match):
        solve_pairwise_hinge(X, i, j, c, bad.get("C", 1.0))


def test_regularized_bad_input():
    with pytest.raises(ValueError, match="C"):
        solve_regularized(lambda w: (0.0, np.zeros(2)), 2, 0.0)
    with pytest.raises(ValueError, match="non-finite"):
        solve_regularized(lambda w: (np.nan, np.zeros(2)), 2, 1.0)


@pytest.mark.parametrize("seed", range(3))
def test_regularized_matches_cvxpy_on_pairwise_hinge(seed):
    X, i, j, c, _ = _problem(seed)
    C = [0.1, 1.0, 10.0][seed]
    res = solve_regularized(pairwise_hinge_oracle(X, i, j, c), X.shape[1], C, tol=1e-9, max_iter=3000)
    ref, _ = _reference(X, i, j, c, C)
    assert res.converged and res.gap >= 0
    assert res.objective == pytest.approx(ref, rel=1e-6, abs=1e-9)
    assert res.objective - ref <= res.gap + 1e-7 * max(1.0, abs(ref))


@pytest.mark.parametrize("seed,C", [(0, 0.5), (1, 5.0)])
def test_regularized_matches_cvxpy_on_hinge_of_max(seed, C):
    """L(w) = sum_k v_k max(0, max_l (A_kl . w + b_kl)): a SLAM-like piecewise-linear loss."""
    rng = np.random.default_rng(seed)
    K, Lk, d = 15, 4, 5
    A = rng.normal(size=(K, Lk, d))
    b = rng.normal(size=(K, Lk))
    v = rng.uniform(0.5, 2.0, size=K)

    def oracle(w):
        vals = A @ w + b                                  # (K, Lk)
        arg = vals.argmax(axis=1)
        top = vals[np.arange(K), arg]
        on = top > 0
        return float(v[on] @ top[on]), (v[on, None] * A[np.arange(K), arg][on]).sum(axis=0)

    res = solve_regularized(oracle, d, C, tol=1e-9, max_iter=3000)
    w = cp.Variable(d)
    loss = sum(v[k] * cp.pos(cp.max(A[k] @ w + b[k])) for k in range(K))
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * loss))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    assert res.converged
    assert res.objective == pytest.approx(prob.value, rel=1e-6, abs=1e-9)
    assert res.objective - prob.value <= res.gap + 1e-7 * max(1.0, abs(prob.value))
    # warm start from the solution converges at once to the same value
    again = solve_regularized(oracle, d, C, tol=1e-9, w0=res.coef, max_iter=3000)
    assert again.objective == pytest.approx(res.objective, rel=1e-7)


def test_sampled_band_pairs_are_unbiased():
    """Each band pair enters the sampled Hessian with an expected weight equal to its exact weight."""
    from counterfactual_ltr.solvers.newton_direction import _hessian_pairs

    rng = np.random.default_rng(3)
    n = m = 20000                                 # pair k starts at row k, so the rows name the pairs
    d = 40                                        # cap = max(50 d, 4 n / d) = 2000 pairs: rate 0.1
    ib, jb = np.arange(m), rng.integers(0, n, m)
    h = rng.uniform(0.1, 5.0, m)
    draws, rate = 500, 2000 / m
    total = np.zeros(m)
    sampler = np.random.default_rng(0)
    for _ in range(draws):
        si, sj, sh = _hessian_pairs(ib, jb, h, n, d, sampler)
        assert 0.5 * rate * m < si.size < 2 * rate * m
        np.testing.assert_array_equal(sj, jb[si])
        total[si] += sh
    mean = total / draws
    se = h * np.sqrt((1 - rate) / (rate * draws))
    assert np.all(np.abs(mean - h) < 5 * se)
    assert mean.sum() == pytest.approx(h.sum(), rel=0.01)        # its standard error is ~1e-3
    # few band pairs: all of them, weights untouched
    si, sj, sh = _hessian_pairs(ib[:3000], jb[:3000], h[:3000], n, d, sampler)
    assert np.array_equal(si, ib[:3000]) and np.array_equal(sh, h[:3000])


def test_sampled_hessian_keeps_the_optimum(monkeypatch):
    """Newton directions from sampled band Hessians: same certified optimum as the cvxpy reference."""
    import counterfactual_ltr.solvers.newton_direction as solvers

    rng = np.random.default_rng(5)
    n, d, m = 300, 4, 4000
    # A cap of max(2 d, 0) = 8 pairs: every band of more than 16 pairs is sampled (the
    # default cap samples only the wide bands of large problems).
    monkeypatch.setattr(solvers, "_SAMPLE_PAIRS_PER_FEATURE", 2)
    monkeypatch.setattr(solvers, "_SAMPLE_MATVECS", 0)
    X = rng.normal(size=(n, d))
    i, j = rng.integers(0, n, m), rng.integers(0, n, m)
    c = rng.uniform(0.1, 3.0, m)
    sampled = []
    original = solvers._hessian_pairs

    def spy(ib, *args):
        out = original(ib, *args)
        sampled.append(out[0].size < ib.size)
        return out

    monkeypatch.setattr(solvers, "_hessian_pairs", spy)
    for C in (0.01, 1.0):
        res = solve_pairwise_hinge(X, i, j, c, C, tol=1e-9)
        ref, _ = _reference(X, i, j, c, C)
        assert res.converged
        assert res.objective == pytest.approx(ref, rel=1e-7)
        assert res.objective - ref <= res.gap + 1e-8 * ref
    assert any(sampled)


def test_incremental_rmatvec_matches_the_full_product():
    from counterfactual_ltr.solvers.explicit import _Rmatvec

    rng = np.random.default_rng(2)
    X = rng.normal(size=(1000, 7))
    product = _Rmatvec(X)
    g = rng.normal(size=1000)
    for changed in (0, 3, 150, 900, 10):          # few rows (updated), many rows (recomputed)
        g = g.copy()
        rows = rng.choice(1000, changed, replace=False)
        g[rows] = rng.normal(size=changed)
        np.testing.assert_allclose(product(g), X.T @ g, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
def test_rows_rmatvec_in_blocks_matches_the_gathered_product(sparse):
    import scipy.sparse as sps

    from counterfactual_ltr.solvers.explicit import _rows_rmatvec

    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 9)) * (rng.random((500, 9)) < 0.4)
    rows = np.sort(rng.choice(500, 77, replace=False))
    coeffs = rng.normal(size=77)
    expected = X[rows].T @ coeffs
    for chunk_bytes in (1, 8 * 9 * 10, 1 << 20):  # one row, 10 rows (a short last block), all at once
        got = _rows_rmatvec(sps.csr_matrix(X) if sparse else X, rows, coeffs, chunk_bytes=chunk_bytes)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_band_hessian_is_the_pair_laplacian_gram_in_any_blocks():
    from counterfactual_ltr.solvers.newton_direction import _band_hessian

    rng = np.random.default_rng(8)
    X = rng.normal(size=(60, 5))
    for m in (25, 400):                           # fewer pairs than rows (pair sums), more (Laplacian)
        ib, jb, h = rng.integers(0, 60, m), rng.integers(0, 60, m), rng.uniform(0.0, 3.0, m)
        D = X[ib] - X[jb]
        expected = D.T @ (h[:, None] * D)
        for pair_chunk_bytes in (1, 8 * 5 * 7, 1 << 23):
            for chunk_bytes in (1, 8 * 5 * 7, 1 << 26):
                H = _band_hessian(X, ib, jb, h, chunk_bytes=chunk_bytes, pair_chunk_bytes=pair_chunk_bytes)
                np.testing.assert_allclose(H, expected, rtol=1e-12, atol=1e-10)


def test_weighted_gram_with_negative_weights():
    from counterfactual_ltr._linalg import weighted_gram

    rng = np.random.default_rng(4)
    X, weights = rng.normal(size=(50, 6)), rng.normal(size=50)
    np.testing.assert_allclose(weighted_gram(X, weights), X.T @ (weights[:, None] * X), atol=1e-12)


def test_exact_pair_norms_only_where_screening_can_pay():
    from counterfactual_ltr.solvers.working_set import _exact_norms_pay

    rng = np.random.default_rng(6)
    n, m = 500, 20000
    X = rng.normal(size=(n, 5))
    i, j = rng.integers(0, n, m), rng.integers(0, n, m)
    z = rng.uniform(-2.0, 2.0, m)
    bound = np.full(m, 10.0)                      # the triangle bound decides nothing
    undecided = np.ones(m, dtype=bool)
    work = np.arange(m)
    exact = np.linalg.norm(X[i] - X[j], axis=1)
    for radius in (10.0, 1e-3):                   # a wide ball screens nothing, a narrow one most pairs
        share = np.mean(np.abs(z) > exact * radius)
        assert _exact_norms_pay(X, z, bound, undecided, work, i, j, radius, np.random.default_rng(0)) == (share > 0.1)


def _long_lists(seed):
    """Four queries of 120 rows, 6 clicked rows each: 119 pairs per click (the implicit path)."""
    from counterfactual_ltr.implicit_pairs import ClickPairs

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(480, 6))
    anchors = np.concatenate([q * 120 + rng.choice(120, 6, replace=False) for q in range(4)])
    return X, ClickPairs([0, 120, 240, 360, 480], anchors, rng.uniform(0.5, 3.0, anchors.size))


@pytest.mark.parametrize("implicit", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_min_decrease_stops_a_warm_solve_early_without_warning(implicit, seed):
    """Re-weighted warm start: the solve stops once a Newton step gains little, with a valid bound."""
    X, pairs = _long_lists(seed)
    C = 3.0
    w0 = solve_pairwise_hinge(X, pairs, None, None, C, tol=1e-10).coef
    new = pairs.with_weights(pairs.weights * np.random.default_rng(seed).uniform(0.3, 3.0, pairs.weights.size))
    args = (new, None, None) if implicit else new.explicit()
    exact = solve_pairwise_hinge(X, *args, C, w0=w0, tol=1e-10)
    s0 = X @ w0
    start = 0.5 * w0 @ w0 + C * float(new.weights @ new.hinge_sums(s0))
    gain = start - exact.objective
    assert exact.converged and not exact.stalled and gain > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        early = solve_pairwise_hinge(X, *args, C, w0=w0, tol=1e-10, min_decrease=0.01 * gain)
    assert early.stalled and not early.converged and early.n_iter < exact.n_iter
    # never worse than the warm start, and the certificate still bounds the optimum
    assert exact.objective - 1e-9 <= early.objective <= start + 1e-9
    assert early.dual_objective <= exact.objective + 1e-9 * abs(exact.objective)
    assert early.gap == pytest.approx(early.objective - early.dual_objective)
    s = X @ early.coef
    assert early.objective == pytest.approx(0.5 * early.coef @ early.coef + C * float(new.weights @ new.hinge_sums(s)),
                                            rel=1e-12)
    # a solve that never gains min_decrease in total goes on to its gap
    full = solve_pairwise_hinge(X, *args, C, w0=w0, tol=1e-10, min_decrease=2.0 * gain)
    assert full.converged and not full.stalled
    assert full.objective == pytest.approx(exact.objective, rel=1e-9)
