"""Constrained and sparse linear rankers: cvxpy references, feasibility, the line search, input errors."""

import pickle
import subprocess
import sys

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
from counterfactual_ltr.constrained import (_box_min, _exact_line_search, feasible_set,
                                            solve_constrained_hinge)
from counterfactual_ltr.estimators import RankSVM, SVMPropDCG, SVMPropRank, SVMPropRBP, click_pairs
from counterfactual_ltr.solvers import solve_pairwise_hinge

D = 5


def _problem(seed, n=30, n_pairs=120, d=D):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    i, j = rng.integers(0, n, n_pairs), rng.integers(0, n, n_pairs)
    keep = i != j
    return X, i[keep], j[keep], rng.uniform(0.2, 3.0, keep.sum())


def user_constraints(w):
    """w[0] >= w[1] + 0.05 and a norm ball on the feature group {2, 3} (module level: picklable)."""
    return [w[0] >= w[1] + 0.05, cp.norm(w[2:4]) <= 0.1]


KINDS = {
    "none": {},
    "monotone": {"monotone_constraints": [1, -1, 0, 1, 0]},
    "monotone_mapping": {"monotone_constraints": {4: -1, 2: 1}},
    "bounds": {"bounds": (-0.1, [0.2, 0.2, np.inf, 0.05, 0.3])},
    "user": {"constraints": user_constraints},
}


def _reference(X, i, j, c, C, fs, margin=1.0):
    """One slack per pair, explicit: the textbook QP / LP / SOCP, solved by Clarabel."""
    w = cp.Variable(X.shape[1])
    xi = cp.Variable(i.size)
    rho = fs.l1_ratio
    objective = rho * cp.norm1(w) + 0.5 * (1 - rho) * cp.sum_squares(w) + C * (c @ xi)
    cons = [xi >= 0, xi >= margin - (X[i] - X[j]) @ w]
    for k in range(X.shape[1]):
        if np.isfinite(fs.lower[k]):
            cons.append(w[k] >= fs.lower[k])
        if np.isfinite(fs.upper[k]):
            cons.append(w[k] <= fs.upper[k])
    if fs.constraints is not None:
        cons += fs.constraints(w)
    problem = cp.Problem(cp.Minimize(objective), cons)
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return problem.value


def _violation(coef, fs):
    """Largest violation of the box and of the user's constraints at ``coef``."""
    worst = max(float(np.max(fs.lower - coef)), float(np.max(coef - fs.upper)), 0.0)
    if fs.constraints is not None:
        w = cp.Variable(coef.size)
        w.value = coef
        worst = max([worst] + [float(np.max(c.violation())) for c in fs.constraints(w)])
    return worst


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("penalty", ["l2", "l1", "elasticnet"])
@pytest.mark.parametrize("C", [0.3, 30.0])
def test_matches_one_slack_per_pair_reference(penalty, kind, C):
    X, i, j, c = _problem(seed=len(kind) + int(C))
    fs = feasible_set(D, penalty=penalty, l1_ratio=0.3, **KINDS[kind])
    ref = _reference(X, i, j, c, C, fs)
    res = solve_constrained_hinge(X, i, j, c, C, feasible=fs, tol=1e-8)
    assert res.converged
    assert res.objective == pytest.approx(ref, rel=1e-6)
    assert _violation(res.coef, fs) <= 1e-8
    # The certified lower bound is a bound (box: exact; user constraints: to the solver's 1e-10).
    assert res.dual_objective <= ref + 1e-7 * abs(ref)
    # The whole-problem cvxpy path agrees too.
    ref_path = solve_constrained_hinge(X, i, j, c, C, feasible=fs, method="cvxpy", tol=1e-8)
    assert ref_path.objective == pytest.approx(ref, rel=1e-6)
    assert _violation(ref_path.coef, fs) <= 1e-8


def test_unconstrained_l2_cutting_plane_matches_newton():
    X, i, j, c = _problem(seed=7)
    newton = solve_pairwise_hinge(X, i, j, c, 2.0, tol=1e-10)
    cut = solve_constrained_hinge(X, i, j, c, 2.0, tol=1e-10)
    assert cut.objective == pytest.approx(newton.objective, rel=1e-8)
    np.testing.assert_allclose(cut.coef, newton.coef, atol=1e-4)


def test_warm_start_from_support_points_same_optimum():
    X, i, j, c = _problem(seed=3, n=60, n_pairs=400)
    fs = feasible_set(D, monotone_constraints=[1, 1, 0, 0, -1])
    first = solve_constrained_hinge(X, i, j, c, 5.0, feasible=fs, tol=1e-9)
    c2 = c * np.random.default_rng(1).uniform(0.5, 2.0, c.size)
    cold = solve_constrained_hinge(X, i, j, c2, 5.0, feasible=fs, tol=1e-9)
    warm = solve_constrained_hinge(X, i, j, c2, 5.0, feasible=fs, tol=1e-9, w0=first.coef,
                                   warm_points=first.support_points)
    assert first.support_points.shape[1] == D and len(first.support_points) >= 1
    assert warm.converged and warm.objective == pytest.approx(cold.objective, rel=1e-8)


def test_l1_gives_exact_zeros_and_a_path():
    X, i, j, c = _problem(seed=11, n=60, n_pairs=300, d=8)
    nonzeros = []
    for C in (0.01, 0.1, 1.0, 10.0):
        res = solve_constrained_hinge(X, i, j, c, C, feasible=feasible_set(8, penalty="l1"), tol=1e-9)
        assert res.objective == pytest.approx(_reference(X, i, j, c, C, feasible_set(8, penalty="l1")), rel=1e-6)
        nonzeros.append(int(np.count_nonzero(res.coef)))
    # Smallest C: the zero vector is optimal (every weight exactly 0); the largest uses more features.
    assert nonzeros[0] == 0 and nonzeros[-1] > nonzeros[1]


def _line_objective(t, w, u, z, delta, Cc, rho):
    v = w + t * u
    return rho * np.abs(v).sum() + 0.5 * (1 - rho) * v @ v + Cc @ np.maximum(z - t * delta, 0.0)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), rho=st.sampled_from([0.0, 0.4, 1.0]), n=st.integers(1, 40))
def test_exact_line_search_is_the_minimiser_on_the_segment(seed, rho, n):
    rng = np.random.default_rng(seed)
    d = 4
    w, u = rng.normal(size=d), rng.normal(size=d) * rng.choice([0.1, 1.0, 10.0])
    z, delta = rng.normal(size=n), rng.normal(size=n) * 3
    delta[rng.random(n) < 0.2] = 0.0
    Cc = rng.uniform(0, 5, n)
    t = _exact_line_search(w, u, z, delta, Cc, rho)
    assert 0.0 <= t <= 1.0
    grid = np.linspace(0.0, 1.0, 2001)
    best = min(_line_objective(s, w, u, z, delta, Cc, rho) for s in grid)
    assert _line_objective(t, w, u, z, delta, Cc, rho) <= best + 1e-9 * max(1.0, abs(best))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), rho=st.sampled_from([0.0, 0.5, 1.0]))
def test_box_minimum_closed_form(seed, rho):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=6) * 3
    lo = np.where(rng.random(6) < 0.3, -np.inf, rng.normal(size=6) - 1)
    hi = np.where(rng.random(6) < 0.3, np.inf, lo + rng.uniform(0, 3, 6))
    hi = np.where(np.isinf(lo), rng.normal(size=6), hi)
    value = _box_min(g, lo, hi, rho)
    # Brute force on a grid inside the box (truncated where it is unbounded), refined around its best.
    f = lambda x: rho * np.abs(x) + 0.5 * (1 - rho) * x ** 2 + g[:, None] * x  # noqa: E731
    a, b = np.maximum(lo, -50), np.minimum(hi, 50)
    grid = a[:, None] + (b - a)[:, None] * np.linspace(0, 1, 2001)[None, :]
    best = grid[np.arange(6), f(grid).argmin(axis=1)]
    step = (b - a) / 2000
    fine = np.clip(best[:, None] + step[:, None] * np.linspace(-1, 1, 2001)[None, :], a[:, None], b[:, None])
    # The kink at 0 (first-order errors) is added as a point; near smooth minima the grid is enough.
    fine = np.c_[fine, np.clip(0.0, a, b)]
    brute = f(fine).min(axis=1).sum()
    if np.isfinite(value):
        assert value <= brute + 1e-9
        assert value >= brute - 1e-6 * max(1.0, abs(brute))
    else:
        assert rho == 1.0 and value == -np.inf


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 1000), penalty=st.sampled_from(["l2", "l1", "elasticnet"]))
def test_box_constraints_hold_on_random_problems(seed, penalty):
    X, i, j, c = _problem(seed)
    rng = np.random.default_rng(seed)
    lower = np.where(rng.random(D) < 0.5, -np.inf, rng.uniform(-0.3, 0.1, D))
    upper = np.where(rng.random(D) < 0.5, np.inf, np.maximum(lower, -0.3) + rng.uniform(0, 0.3, D))
    signs = rng.integers(-1, 2, D)
    signs[(signs > 0) & (upper < 0)] = 0
    signs[(signs < 0) & (lower > 0)] = 0
    fs = feasible_set(D, monotone_constraints=signs, bounds=(lower, upper), penalty=penalty)
    res = solve_constrained_hinge(X, i, j, c, float(rng.uniform(0.1, 20)), feasible=fs, tol=1e-7)
    assert res.converged
    assert np.all(res.coef >= fs.lower - 1e-8) and np.all(res.coef <= fs.upper + 1e-8)
    assert np.all(res.coef[signs > 0] >= 0) and np.all(res.coef[signs < 0] <= 0)


# ----------------------------------------------------------------------------- estimators
def _small_log(seed=0, n_queries=10, n_passes=6, n_features=D):
    data = make_ranking(n_queries=n_queries, n_docs=(3, 8), n_features=n_features, random_state=seed)
    log = simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(1.0, 0.1, 1.0), n_passes, random_state=seed)
    return data, log


def test_auto_unconstrained_l2_takes_todays_newton_path(monkeypatch):
    import counterfactual_ltr.estimators.svm as svm

    data, log = _small_log(1)
    called = []
    monkeypatch.setattr(svm, "solve_constrained_hinge", lambda *a, **k: called.append(1))
    model = SVMPropRank(C=3.0).fit(log)
    assert not called
    agg = log.aggregate()
    _, Xl, i, j, w, _, _ = click_pairs(data, agg.weights)
    direct = solve_pairwise_hinge(Xl, i, j, w, 3.0 / agg.n_clicks, tol=1e-6, max_iter=1000)
    np.testing.assert_array_equal(model.coef_, direct.coef)
    dcg = SVMPropDCG(C=3.0).fit(log)
    assert not called and dcg.converged_


@pytest.mark.parametrize("kind", ["monotone", "bounds", "user"])
def test_constrained_propdcg_ccp(kind):
    _, log = _small_log(2, n_queries=15)
    model = SVMPropDCG(C=30.0, **KINDS[kind]).fit(log)
    fs = feasible_set(D, **KINDS[kind])
    assert _violation(model.coef_, fs) <= 1e-8
    assert np.all(np.diff(model.objective_history_) <= 1e-9 * abs(model.objective_history_[0]))
    # The same convex-concave path with every subproblem solved by cvxpy (one slack per pair).
    kw = dict(C=30.0, solver_tol=1e-9, tol=1e-6, **KINDS[kind])
    cut, ref = SVMPropDCG(**kw).fit(log), SVMPropDCG(solver="cvxpy", **kw).fit(log)
    assert cut.objective_ == pytest.approx(ref.objective_, rel=1e-6)


@pytest.mark.parametrize("penalty", ["l1", "elasticnet"])
def test_proprank_penalties_cutting_plane_equals_cvxpy(penalty):
    _, log = _small_log(3)
    kw = dict(C=5.0, penalty=penalty, l1_ratio=0.5, monotone_constraints={0: 1}, solver_tol=1e-9)
    cut = SVMPropRank(**kw).fit(log)
    ref = SVMPropRank(**kw, solver="cvxpy").fit(log)
    assert cut.objective_ == pytest.approx(ref.objective_, rel=1e-6)
    assert cut.coef_[0] >= 0
    # objective_ is the bound with lambda(1 + H) = 1 + H: the one-slack QP/LP value plus C/n * sum W.
    agg = log.aggregate()
    _, Xl, i, j, w, _, _ = click_pairs(agg.data, agg.weights)
    fs = feasible_set(D, penalty=penalty, l1_ratio=0.5, monotone_constraints={0: 1})
    qp = _reference(Xl, i, j, w, 5.0 / agg.n_clicks, fs)
    assert cut.objective_ == pytest.approx(qp + 5.0 / agg.n_clicks * agg.weights.sum(), rel=1e-6)


def test_ranksvm_and_rbp_accept_constraints():
    data, log = _small_log(4)
    rank = RankSVM(C=1.0, bounds=(-0.2, 0.2), tol=1e-8).fit(data.X, data.y, qid=data.qid)
    assert np.all(np.abs(rank.coef_) <= 0.2)
    rbp = SVMPropRBP(C=10.0, monotone_constraints=[-1] * D).fit(log)
    assert np.all(rbp.coef_ <= 0)


def test_sklearn_clone_params_and_pickle():
    _, log = _small_log(5)
    model = SVMPropDCG(C=3.0, monotone_constraints=[1, 0, 0, 0, -1], bounds=(None, 1.0), penalty="elasticnet",
                       l1_ratio=0.2, constraints=user_constraints)
    params = clone(model).get_params()
    assert params["monotone_constraints"] == [1, 0, 0, 0, -1] and params["constraints"] is user_constraints
    model.fit(log)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(log), model.predict(log))


@pytest.mark.parametrize("params, match", [
    ({"monotone_constraints": [1, 2, 0, 0, 0]}, "signs must be -1, 0 or \\+1"),
    ({"monotone_constraints": [1, 0.5, 0, 0, 0]}, "signs must be -1, 0 or \\+1"),
    ({"monotone_constraints": {7: 1}}, "feature index 7"),
    ({"monotone_constraints": [1, 0]}, "one -1/0/\\+1 per feature"),
    ({"bounds": ([0, 0, 0, 1, 0], 0.5)}, "lower 1.0 > upper 0.5"),
    ({"bounds": (None, -1.0), "monotone_constraints": {2: 1}}, "infeasible constraints at feature 2"),
    ({"bounds": (0.0, 1.0, 2.0)}, "pair \\(lower, upper\\)"),
    ({"constraints": lambda w: [w[0] >= 1, True]}, "not a cvxpy constraint"),
    ({"constraints": lambda w: 3.0}, "list of cvxpy constraints"),
    ({"constraints": lambda w: [w[0] >= 1, w[0] <= 0]}, "infeasible constraints"),
    ({"constraints": lambda w: [w[0] >= 1], "bounds": (None, 0.5)}, "infeasible constraints"),
    ({"constraints": "w[0] >= 1"}, "must be a callable"),
    ({"penalty": "l0"}, "penalty must be one of"),
    ({"penalty": "elasticnet", "l1_ratio": 1.5}, "l1_ratio must be <= 1"),
    ({"solver": "newton", "penalty": "l1"}, 'solver="newton"'),
    ({"solver": "newton", "monotone_constraints": {0: 1}}, 'solver="newton"'),
    ({"solver": "lbfgs"}, "solver must be one of"),
])
def test_bad_options_raise_before_solving(params, match, monkeypatch):
    import counterfactual_ltr.estimators.svm as svm

    def never(*args, **kwargs):
        raise AssertionError("a solver ran before the options were checked")

    monkeypatch.setattr(svm, "solve_constrained_hinge", never)
    monkeypatch.setattr(svm, "solve_pairwise_hinge", never)
    _, log = _small_log(6)
    for Estimator in (SVMPropRank, SVMPropDCG):
        with pytest.raises(ValueError, match=match):
            Estimator(**params).fit(log)


def test_solver_input_errors():
    X, i, j, c = _problem(0)
    with pytest.raises(ValueError, match="FeasibleSet for 5 features"):
        solve_constrained_hinge(X, i, j, c, 1.0, feasible=feasible_set(3))
    with pytest.raises(ValueError, match="method must be"):
        solve_constrained_hinge(X, i, j, c, 1.0, method="newton")
    with pytest.raises(TypeError, match="bounds upper must be numbers"):
        feasible_set(D, bounds=(None, "1"))


def test_cvxpy_is_imported_only_on_the_cvxpy_path():
    code = ("import sys; import counterfactual_ltr.estimators as e; from click_sim import make_ranking, "
            "simulate_clicks; import numpy as np; d = make_ranking(n_queries=8, n_features=4, random_state=0); "
            "log = simulate_clicks(d, d.X[:, 0], n_passes=3, random_state=0); "
            "e.SVMPropDCG(C=1.0).fit(log); e.SVMPropRank(C=1.0, monotone_constraints=[1, 0, 0, 0], "
            "bounds=(-1, 1), penalty='l1').fit(log); print('cvxpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_doctests():
    import doctest

    import counterfactual_ltr.constrained as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
