"""The Hessian-free (Newton-CG) path of solve_pairwise_hinge: same optimum as the dense path and cvxpy, sparse X."""

import numpy as np
import pytest
import scipy.sparse as sp

import counterfactual_ltr.hessian_free as hf
import counterfactual_ltr.solvers.pairwise as solvers
from counterfactual_ltr.implicit_pairs import ClickPairs
from counterfactual_ltr.solvers import solve_pairwise_hinge


def _reference(X, i, j, c, C, margin=1.0):
    cp = pytest.importorskip("cvxpy")
    w = cp.Variable(X.shape[1])
    D = X[i] - X[j]
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * (c @ cp.pos(margin - D @ w))))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return prob.value


def _sparse_problem(seed, density=0.3):
    rng = np.random.default_rng(seed)
    n, d, m = int(rng.integers(20, 60)), int(rng.integers(3, 30)), int(rng.integers(40, 400))
    X = np.where(rng.random((n, d)) < density, rng.random((n, d)), 0.0)
    X[:, 0] = 0.0                                      # an all-zero column
    if d > 3:
        X[:, 1] = X[:, 2]                              # two equal columns (singular X^T X)
    i, j = rng.integers(0, n, m), rng.integers(0, n, m)
    c = rng.uniform(0, 5, m)
    c[rng.random(m) < 0.2] = 0.0
    C = [0.01, 0.1, 1.0, 10.0, 1000.0][seed % 5]
    return X, i, j, c, C


@pytest.fixture
def cg_only(monkeypatch):
    """CG never hands over to the explicit Hessian: the Hessian-free steps alone are tested."""
    monkeypatch.setattr(hf, "SWITCH_MIN_STEPS", 10**6)


@pytest.mark.parametrize("seed", range(10))
def test_newton_cg_matches_cvxpy_and_the_dense_path(seed, cg_only):
    X, i, j, c, C = _sparse_problem(seed)
    ref = _reference(X, i, j, c, C)
    cg = solve_pairwise_hinge(sp.csr_matrix(X), i, j, c, C, tol=1e-9)
    dense = solve_pairwise_hinge(X, i, j, c, C, tol=1e-9)
    assert cg.method.startswith("newton_cg") and dense.method == "newton"   # (+newton: rounding handed over)
    assert cg.converged and cg.gap >= 0
    assert cg.objective == pytest.approx(ref, rel=1e-6, abs=1e-9)
    assert cg.objective == pytest.approx(dense.objective, rel=1e-8, abs=1e-10)
    # the certificate is a bound on the true optimum
    assert cg.objective - ref <= cg.gap + 1e-7 * max(1.0, abs(ref))
    assert cg.dual_objective <= ref + 1e-7 * max(1.0, abs(ref))
    s = X @ cg.coef
    exact = 0.5 * cg.coef @ cg.coef + C * np.sum(c * np.maximum(0, 1 - (s[i] - s[j])))
    assert cg.objective == pytest.approx(exact, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_newton_cg_on_implicit_pairs_matches_cvxpy(seed, monkeypatch, cg_only):
    monkeypatch.setattr(solvers, "_IMPLICIT_MIN_PAIRS_PER_ANCHOR", 0)
    rng = np.random.default_rng(100 + seed)
    lengths = rng.integers(2, 20, size=8)
    offsets = np.r_[0, np.cumsum(lengths)]
    n = int(offsets[-1])
    anchors = rng.choice(n, size=12)
    pairs = ClickPairs(offsets, anchors, rng.uniform(0.1, 3.0, anchors.size))
    X = np.where(rng.random((n, 12)) < 0.4, rng.random((n, 12)), 0.0)
    C = [0.1, 1.0, 10.0, 100.0, 30.0, 0.01][seed]      # C = 1000 (9 s here) is in the explicit-pair test
    i, j, c = pairs.explicit()
    ref = _reference(X, i, j, c, C)
    res = solve_pairwise_hinge(sp.csr_matrix(X), pairs, None, None, C, tol=1e-9)
    dense = solve_pairwise_hinge(X, pairs, None, None, C, tol=1e-9, method="newton")
    assert res.method.startswith("newton_cg") and res.converged
    assert res.objective == pytest.approx(ref, rel=1e-6, abs=1e-9)
    assert res.objective == pytest.approx(dense.objective, rel=1e-8, abs=1e-10)
    assert res.dual_objective <= ref + 1e-7 * max(1.0, ref)


def test_method_choice_is_automatic_recorded_and_overridable(monkeypatch):
    X, i, j, c, C = _sparse_problem(3)
    Xs = sp.csr_matrix(X)
    assert solve_pairwise_hinge(X, i, j, c, C).method == "newton"
    assert solve_pairwise_hinge(Xs, i, j, c, C).method.startswith("newton_cg")
    assert solve_pairwise_hinge(X, i, j, c, C, method="newton_cg").method.startswith("newton_cg")
    forced = solve_pairwise_hinge(Xs, i, j, c, C, method="newton")   # densified
    assert forced.method == "newton"
    monkeypatch.setattr(hf, "DENSE_MAX_FEATURES", X.shape[1] - 1)     # "large d" -> Hessian-free
    assert solve_pairwise_hinge(X, i, j, c, C).method.startswith("newton_cg")
    with pytest.raises(ValueError, match="method must be one of"):
        solve_pairwise_hinge(X, i, j, c, C, method="cholesky")


@pytest.mark.parametrize("implicit", [False, True])
def test_switch_to_the_explicit_hessian_keeps_the_optimum(monkeypatch, implicit):
    monkeypatch.setattr(hf, "SWITCH_MIN_STEPS", 1)             # any CG solve of more than one step hands over
    monkeypatch.setattr(hf, "SWITCH_DIVISOR", 10**6)
    if implicit:
        monkeypatch.setattr(solvers, "_IMPLICIT_MIN_PAIRS_PER_ANCHOR", 0)
    rng = np.random.default_rng(9)
    pairs = ClickPairs([0, 10, 25, 40], [1, 12, 30, 31], [1.0, 2.0, 0.5, 1.5])
    X = np.where(rng.random((40, 15)) < 0.3, rng.random((40, 15)), 0.0)
    i, j, c = pairs.explicit()
    args = (pairs, None, None) if implicit else (i, j, c)
    res = solve_pairwise_hinge(sp.csr_matrix(X), *args, 100.0, tol=1e-9)
    assert res.method == "newton_cg+newton" and res.converged
    assert res.objective == pytest.approx(_reference(X, i, j, c, 100.0), rel=1e-6)


def test_warm_start_and_screening_on_sparse_X():
    rng = np.random.default_rng(5)
    n, d, m = 300, 40, 5000
    X = np.where(rng.random((n, d)) < 0.2, rng.random((n, d)), 0.0)
    i, j = rng.integers(0, n, m), rng.integers(0, n, m)
    c = rng.uniform(0.1, 3.0, m)
    Xs = sp.csr_matrix(X)
    cold = solve_pairwise_hinge(Xs, i, j, c, 10.0, tol=1e-10)
    dense = solve_pairwise_hinge(X, i, j, c, 10.0, tol=1e-10)
    assert cold.objective == pytest.approx(dense.objective, rel=1e-9)
    c2 = c * rng.uniform(0.5, 2.0, m)
    warm = solve_pairwise_hinge(Xs, i, j, c2, 10.0, tol=1e-10, w0=cold.coef)
    cold2 = solve_pairwise_hinge(X, i, j, c2, 10.0, tol=1e-10)
    assert warm.converged and warm.objective == pytest.approx(cold2.objective, rel=1e-9)


def test_sparse_X_errors_name_row_and_column():
    X = sp.csr_matrix(np.array([[0.0, 1.0], [np.nan, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match=r"non-finite value \(nan\) at row 1, column 0"):
        solve_pairwise_hinge(X, [0], [2], [1.0], 1.0)
    with pytest.raises(ValueError, match="out of range"):
        solve_pairwise_hinge(sp.csr_matrix(np.eye(3)), [0], [5], [1.0], 1.0)


def test_newton_cg_direction_solves_the_newton_system():
    rng = np.random.default_rng(0)
    n, d = 30, 8
    X = rng.normal(size=(n, d))
    ib, jb = rng.integers(0, n, 40), rng.integers(0, n, 40)
    h = rng.uniform(0.1, 10.0, 40)
    apply, degree = hf.explicit_band(ib, jb, h, n)
    D = X[ib] - X[jb]
    H = np.eye(d) + D.T @ (h[:, None] * D)
    grad = rng.normal(size=d)
    u, steps = hf.newton_cg_direction(X, grad, apply, degree, rtol=1e-12)
    np.testing.assert_allclose(u, -np.linalg.solve(H, grad), rtol=1e-8, atol=1e-10)
    assert 1 <= steps <= d
    # a loose tolerance still gives a descent direction
    u, _ = hf.newton_cg_direction(X, grad, apply, degree, rtol=0.5)
    assert u @ grad < 0
    # CG stopped short of rtol: the caller is told to use the explicit Hessian at this d
    u, steps = hf.newton_cg_direction(X, grad, apply, degree, rtol=1e-12, max_iter=2)
    assert u is None and steps == 2


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_centered_row_norms_bound_every_pair_difference(sparse, offset):
    """``||x_i - x_j|| <= r_i + r_j``, also where large common offsets cancel (the screening's bound)."""
    from counterfactual_ltr.hessian_free import centered_row_norms

    rng = np.random.default_rng(11)
    X = rng.normal(size=(3000, 6)) * (rng.random((3000, 6)) < 0.5)
    X[:, 0] += offset                             # a column offset that centring removes
    r = centered_row_norms(sp.csr_matrix(X) if sparse else X, sample_rows=100)
    i, j = rng.integers(0, 3000, 20000), rng.integers(0, 3000, 20000)
    assert np.all(np.linalg.norm(X[i] - X[j], axis=1) <= r[i] + r[j])
    # Centred, not raw, norms: far below ||x|| where every row shares the offset.
    assert np.median(r) < 0.5 * np.median(np.linalg.norm(X, axis=1)) or offset == 0.0
    if not sparse:                                # exact up to the rounding slack
        m = X[::30].mean(axis=0)
        np.testing.assert_allclose(r, np.linalg.norm(X - m, axis=1), rtol=1e-11)
