"""The convex-concave procedure (counterfactual_ltr.ccp): descent, fixed point, stopping rule, inexact steps."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from counterfactual_ltr.ccp import convex_concave, linearised_weights
from counterfactual_ltr.metrics import get_lambda
from counterfactual_ltr.solvers import SolverResult

GOLDEN = (3 - np.sqrt(5)) / 2


# F(w) = 0.5 w^2 + a lambda(1 + H(w)), lambda(r) = -1/r, H(w) = max(0, 1 - w): not convex in w.
def _problem(a=1.0):
    def F(w):
        return 0.5 * w[0] ** 2 - a / (1.0 + max(0.0, 1.0 - w[0]))

    def reweight(w):                               # a lambda'(1 + H(w_t))
        return a / (1.0 + max(0.0, 1.0 - w[0])) ** 2

    calls = []

    def solve(c, w, warm, previous, tol, min_decrease):
        """0.5 w^2 + c max(0, 1 - w) exactly: w = min(c, 1); records what the CCP asked."""
        calls.append(dict(c=c, w=w.copy(), warm=warm, previous=previous, tol=tol, min_decrease=min_decrease))
        coef = np.array([min(c, 1.0)])
        return SolverResult(coef, 0.5 * coef[0] ** 2 + c * max(0.0, 1.0 - coef[0]), 0.0, 0.0, len(calls), True)

    return F, reweight, solve, calls


def test_descends_to_a_stationary_point_of_the_nonconvex_objective():
    F, reweight, solve, _ = _problem()
    out = convex_concave(F, reweight, solve, np.zeros(1), tol=1e-13, max_iter=500, solver_tol=1e-9)
    assert out.converged
    # F'(w) = w - 1 / (2 - w)^2 = 0 on (0, 1) at w = (3 - sqrt 5) / 2
    assert out.coef[0] == pytest.approx(GOLDEN, abs=1e-5)
    assert np.all(np.diff(out.objective_history) <= 0)            # majorisation-minimisation
    assert out.objective_history[0] == F(np.zeros(1)) and out.objective_history[-1] == F(out.coef)
    assert len(out.n_iter) == len(out.seconds) == len(out.inner_tol) == len(out.objective_history) - 1


@settings(max_examples=30, deadline=None)
@given(st.floats(0.05, 3.0), st.floats(-0.5, 1.5))
def test_objective_never_increases_from_any_start(a, w0):
    F, reweight, solve, _ = _problem(a)
    out = convex_concave(F, reweight, solve, np.array([w0]), tol=1e-10, max_iter=300, solver_tol=1e-9)
    assert np.all(np.diff(out.objective_history) <= 1e-15)
    # the fixed point w = min(a / (2 - w)^2, 1) of the re-weighting, a stationary point of F
    w = out.coef[0]
    assert w == pytest.approx(min(a / (1.0 + max(0.0, 1.0 - w)) ** 2, 1.0), abs=1e-4)


def test_stopping_rule_is_the_relative_change():
    F, reweight, solve, _ = _problem()
    out = convex_concave(F, reweight, solve, np.zeros(1), tol=1e-3, max_iter=500, solver_tol=1e-9)
    h = out.objective_history
    changes = np.abs(np.diff(h)) / np.maximum(np.abs(h[1:]), 1e-12)
    assert changes[-1] <= 1e-3 and np.all(changes[:-1] > 1e-3)


def test_warns_when_max_iter_is_reached():
    F, reweight, solve, _ = _problem()
    with pytest.warns(ConvergenceWarning, match="stopped after 3 iterations"):
        out = convex_concave(F, reweight, solve, np.zeros(1), tol=0.0, max_iter=3, solver_tol=1e-9, name="demo")
    assert not out.converged and len(out.n_iter) == 3


def test_exact_procedure_is_one_step_converged_as_its_solve():
    F, reweight, solve, calls = _problem()
    out = convex_concave(F, reweight, solve, np.zeros(1), tol=0.0, max_iter=1, solver_tol=1e-9, exact=True)
    assert out.converged and len(calls) == 1
    assert calls[0]["tol"] == 1e-9                                # a lone step is solved to solver_tol


def test_warm_starts_and_inexact_subproblems():
    F, reweight, solve, calls = _problem()
    out = convex_concave(F, reweight, solve, np.zeros(1), tol=1e-9, max_iter=500, solver_tol=1e-8, descent=0.1)
    first, later = calls[0], calls[1:]
    assert not first["warm"] and first["previous"] is None and first["min_decrease"] == 0.0
    assert first["tol"] == max(1e-8, min(1e-4, 0.1 * 1e-9))       # a first step of many only loosely
    h = out.objective_history
    for k, call in enumerate(later, start=1):
        assert call["warm"] and call["previous"].n_iter == k       # the last result, at the last point
        np.testing.assert_array_equal(call["w"], [min(calls[k - 1]["c"], 1.0)])
        assert call["min_decrease"] == pytest.approx(0.1 * abs(h[k - 1] - h[k]))
        decrease = abs(h[k - 1] - h[k]) / max(1.0, abs(call["previous"].objective))
        assert call["tol"] == max(1e-8, min(calls[k - 1]["tol"], 0.01 * decrease))
    tols = out.inner_tol
    assert np.all(np.diff(tols) <= 0) and tols.min() >= 1e-8


def test_a_step_that_is_no_majoriser_is_halved_back():
    F, reweight, solve, _ = _problem()

    def overshoot(c, w, warm, previous, tol, min_decrease):       # a "solution" far past the optimum
        return SolverResult(np.array([5.0]), 0.0, 0.0, 0.0, 1, True)

    trusted = convex_concave(F, reweight, overshoot, np.zeros(1), tol=0.0, max_iter=2, solver_tol=1e-9)
    assert trusted.objective_history[1] > trusted.objective_history[0]          # taken as is
    out = convex_concave(F, reweight, overshoot, np.zeros(1), tol=0.0, max_iter=5, solver_tol=1e-9,
                         majorises=False)
    # From 0: 5 / 2^k, the first halving below F(0) is 0.625; from there none of 8 halvings helps,
    # so the CCP stays put (a zero change: converged).
    np.testing.assert_array_equal(out.coef, [0.625])
    h = out.objective_history
    assert h[1] == F(np.array([0.625])) < h[0] and h[2] == h[1] and out.converged


def test_linearised_weights_are_the_tangent_slopes():
    W, H = np.array([2.0, 0.5, 3.0]), np.array([0.0, 1.5, 7.0])
    for name, params in (("dcg", {}), ("rbp", {"p": 0.8})):
        lam = get_lambda(name, **params)
        h = 1e-6
        numeric = W * (lam.value(1.0 + H + h) - lam.value(1.0 + H - h)) / (2 * h)
        np.testing.assert_allclose(linearised_weights(W, lam, H), numeric, rtol=1e-6)
        # the tangent bounds the concave lambda from above: lambda(1 + H') <= lambda(1 + H) + lambda'(H' - H)
        other = H + np.array([3.0, -1.0, 0.5])
        assert np.all(W * lam.value(1.0 + other) <= W * lam.value(1.0 + H)
                      + linearised_weights(W, lam, H) * (other - H) + 1e-12)
