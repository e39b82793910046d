"""The interior-point finisher: the box-constrained pair dual against Clarabel, and its use in the solver."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from counterfactual_ltr.pair_qp import solve_pair_dual

cp = pytest.importorskip("cvxpy")


def _dual_reference(Z, q, c, margin):
    lam = cp.Variable(Z.shape[0])
    prob = cp.Problem(cp.Maximize(margin * cp.sum(lam) - 0.5 * cp.sum_squares(q + Z.T @ lam)), [lam >= 0, lam <= c])
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return prob.value


def _primal(Z, q, c, margin, w):
    return 0.5 * w @ w - q @ w + c @ np.maximum(margin - Z @ w, 0.0)


@pytest.mark.parametrize("K, d", [(1, 2), (8, 20), (60, 10), (400, 30)])
@pytest.mark.parametrize("margin", [1.0, 0.3])
def test_matches_clarabel_in_both_newton_spaces(K, d, margin):
    """K <= d solves the K x K system, K > d the d x d one; both reach the reference optimum."""
    rng = np.random.default_rng(K + d)
    Z = rng.normal(size=(K, d)) * (rng.random((K, d)) < 0.6)
    q = rng.normal(size=d)
    c = rng.uniform(0.05, 5.0, K)
    ref = _dual_reference(Z, q, c, margin)
    atol = 1e-10 * max(1.0, abs(ref))
    lam, w, gap = solve_pair_dual(Z, q, c, margin, atol=atol)
    assert np.all(lam >= 0) and np.all(lam <= c)
    np.testing.assert_allclose(w, q + Z.T @ lam, atol=1e-12 * max(1.0, np.abs(w).max()))
    D = margin * lam.sum() - 0.5 * w @ w
    P = _primal(Z, q, c, margin, w)
    assert P - D == pytest.approx(gap, abs=1e-9 * max(1.0, abs(P)))
    assert gap <= atol
    assert D == pytest.approx(ref, rel=1e-8, abs=1e-8)
    assert D <= ref + 1e-8 * max(1.0, abs(ref)) <= P + 2e-8 * max(1.0, abs(ref))


def test_duplicate_and_dependent_pairs():
    """Pair cycles make Z Z^T singular (x_a - x_y, x_b - x_y, x_a - x_b): the optimum is still reached."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 5))
    a, b = rng.integers(0, 30, 200), rng.integers(0, 30, 200)
    Z = X[a] - X[b]
    c = rng.uniform(0.5, 2.0, 200)
    lam, w, gap = solve_pair_dual(Z, np.zeros(5), c, 1.0, atol=1e-9)
    ref = _dual_reference(Z, np.zeros(5), c, 1.0)
    assert gap <= 1e-9
    assert 1.0 * lam.sum() - 0.5 * w @ w == pytest.approx(ref, rel=1e-8)


def test_no_pairs_and_an_unreachable_tolerance():
    lam, w, gap = solve_pair_dual(np.zeros((0, 3)), np.array([1.0, 2.0, 3.0]), np.zeros(0), 1.0, atol=1e-9)
    assert lam.size == 0 and w.tolist() == [1.0, 2.0, 3.0] and gap == 0.0
    # atol 0 cannot be met in floating point: the best point of max_iter is returned, feasible
    rng = np.random.default_rng(0)
    Z, c = rng.normal(size=(50, 4)), rng.uniform(0.1, 1.0, 50)
    lam, w, gap = solve_pair_dual(Z, np.zeros(4), c, 1.0, atol=0.0, max_iter=5)
    assert np.all((lam >= 0) & (lam <= c)) and gap >= 0.0
    assert gap == pytest.approx(_primal(Z, np.zeros(4), c, 1.0, w) - (lam.sum() - 0.5 * w @ w), abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), K=st.integers(1, 80), d=st.integers(1, 12),
       scale=st.sampled_from([1e-3, 1.0, 1e3]))
def test_any_returned_point_is_a_feasible_bound(seed, K, d, scale):
    """Whatever happens, lam is in its box and P(w) - D(lam) >= 0 is the reported gap (weak duality)."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(K, d))
    q = rng.normal(size=d)
    c = scale * rng.uniform(0.01, 1.0, K)
    lam, w, gap = solve_pair_dual(Z, q, c, 1.0, atol=1e-8 * max(1.0, scale), max_iter=40)
    assert np.all(lam >= 0) and np.all(lam <= c)
    D = lam.sum() - 0.5 * w @ w
    P = _primal(Z, q, c, 1.0, w)
    assert P - D >= -1e-9 * max(1.0, abs(P))
    assert gap == pytest.approx(P - D, abs=1e-8 * max(1.0, abs(P)))


def test_finisher_ends_the_solve_at_the_reference_optimum(monkeypatch):
    """Near-kink pairs solved exactly: same certified optimum as Clarabel, in fewer Newton steps."""
    import counterfactual_ltr.solvers.finisher as solvers
    from counterfactual_ltr.solvers import solve_pairwise_hinge

    rng = np.random.default_rng(7)
    n, d, m = 400, 30, 5000
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.3)     # sparse-like rows: a degenerate kink set
    i, j = rng.integers(0, n, m), rng.integers(0, n, m)
    c = rng.uniform(0.1, 2.0, m)
    calls = []
    original = solvers._finish_on_kink

    def spy(*args):
        out = original(*args)
        calls.append(out[3] - out[4])                             # exact full-problem gap after it
        return out

    monkeypatch.setattr(solvers, "_finish_on_kink", spy)
    with_finisher = solve_pairwise_hinge(X, i, j, c, 10.0, tol=1e-8)
    monkeypatch.setattr(solvers, "_FINISH_START", 0.0)
    without = solve_pairwise_hinge(X, i, j, c, 10.0, tol=1e-8)
    w = cp.Variable(d)
    D = X[i] - X[j]
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + 10.0 * (c @ cp.pos(1 - D @ w))))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    assert calls and with_finisher.converged and without.converged
    for res in (with_finisher, without):
        assert res.objective == pytest.approx(prob.value, rel=1e-7)
        assert res.dual_objective <= prob.value * (1 + 1e-9)
    assert min(calls) <= 1e-8 * with_finisher.objective          # the finisher itself closed the gap
    assert with_finisher.n_iter < without.n_iter
