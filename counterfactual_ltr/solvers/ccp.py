"""The convex-concave procedure (CCP) of the propensity SVMs (Agarwal et al., SIGIR 2019, section 4.1).

Problem. For a concave rank weight ``lambda`` (DCG: ``-1/log2(1 + r)``; RBP; trust-bias
corrections), the propensity SVMs minimise

    F(w) = R(w) + (C/n) sum_j W_j lambda(1 + H_j(w)),   H_j(w) = sum_{y != j} max(0, 1 - (x_j - x_y).w)

(``R`` the regulariser, ``W_j`` the clicks' IPS weights of document ``j``, ``H_j`` the hinge
bound on its rank minus one). ``H_j`` is convex and ``lambda`` concave and non-decreasing, so
``F`` is a difference of convex functions. Each CCP step (Lipp & Boyd 2016; Yuille & Rangarajan
2003) replaces ``lambda`` by its tangent at the current hinge sums ``H_j(w_t)``:
``lambda(1 + H) <= lambda(1 + H_t) + lambda'(1 + H_t) (H - H_t)``. The result is the convex
SVM PropRank problem with the document weights ``W_j lambda'(1 + H_j(w_t))``
(:func:`linearised_weights`: the ``1/q'`` of the paper's section 4.1), a majoriser of ``F``
that touches it at ``w_t``. Minimising it cannot raise ``F`` (majorisation-minimisation):
``F(w_{t+1}) <= F_t(w_{t+1}) <= F_t(w_t) = F(w_t)``.

Stopping rule: the relative change ``|F(w_t) - F(w_{t+1})| / max(|F(w_{t+1})|, 1e-12)`` at or
below ``tol``; after ``max_iter`` steps a ``ConvergenceWarning``.

Inexact steps: a step far from the fixed point needs no exact subproblem. The first one (of
several) is solved to a relative duality gap of ``min(1e-4, tol / 10)``, the later ones to a
hundredth of the last decrease of ``F`` (relative to the subproblem's own objective, the
solver's unit), never looser than before and never tighter than ``solver_tol``. With ``descent``
(for solvers where every Newton step is costly) a later subproblem also stops once a Newton step
gains less than ``descent`` times the last decrease. The solvers return their best iterate, never
worse than the warm start where the majoriser touches ``F``, so ``F`` stays non-increasing.

Warm starts: every subproblem starts from the last solution (``w0``) and is handed the last
subproblem's result (the cutting-plane solver re-uses its support points).

A step whose linearisation is no majoriser (negative trust-bias weights under a non-affine
``lambda``) may raise ``F``: it is halved back towards the previous point until it does not (up
to 8 times), and the procedure stays put (and stops) if none helps.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._progress import progress

__all__ = ["CCPResult", "convex_concave", "linearised_weights"]

# Relative duality gap of the first of several subproblems: its solution is only a starting point.
_FIRST_INNER_TOL = 1e-4
# Later subproblems are solved to a duality gap of this fraction of the objective's last decrease.
_INNER_FACTOR = 0.01
# Halvings of a step that raised the objective (steps whose linearisation is no majoriser).
_BACKTRACKS = 8


@dataclass
class CCPResult:
    """Outcome of :func:`convex_concave`.

    Parameters
    ----------
    coef : array (n_features,)
        The last point (the objective never rose on the way).
    objective_history : array (n_steps + 1,)
        ``F`` at the start and after every step.
    n_iter : array (n_steps,)
        Solver iterations of every subproblem.
    seconds : array (n_steps,)
        Wall time of every subproblem's solve.
    inner_tol : array (n_steps,)
        Relative duality gap asked of every subproblem.
    converged : bool
        The relative change met ``tol`` (for an exact procedure: its one subproblem converged).
    result : SolverResult
        The last subproblem's.

    Examples
    --------
    >>> import numpy as np
    >>> CCPResult(np.zeros(1), np.array([1.0, 0.5]), np.array([3]), np.array([0.1]), np.array([1e-4]), True,
    ...           None).objective_history.tolist()
    [1.0, 0.5]
    """

    coef: np.ndarray
    objective_history: np.ndarray
    n_iter: np.ndarray
    seconds: np.ndarray
    inner_tol: np.ndarray
    converged: bool
    result: object


def linearised_weights(click_weights, rank_weight, hinge_sums):
    """The re-weighting rule of a CCP step: ``W_j lambda'(1 + H_j)`` per clicked document.

    Parameters
    ----------
    click_weights : array (n_clicked,)
        ``W_j``, the summed IPS weights of the clicks on document ``j``.
    rank_weight : LambdaWeight
        The rank weight ``lambda`` (see :func:`counterfactual_ltr.metrics.get_lambda`).
    hinge_sums : array (n_clicked,)
        ``H_j`` at the current point (the hinge bound on each document's rank minus one).

    Returns
    -------
    array (n_clicked,)
        The document weights of the convex subproblem (the ``1/q'`` of Agarwal et al., section 4.1).

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr.metrics import get_lambda
    >>> linearised_weights(np.array([2.0, 2.0]), get_lambda("dcg"), np.array([0.0, 2.0])).round(4).tolist()
    [1.4427, 0.1803]
    """
    return click_weights * rank_weight.derivative(1.0 + hinge_sums)


def convex_concave(objective, reweight, solve, start, *, tol, max_iter, solver_tol, exact=False, majorises=True,
                   descent=0.0, after_step=None, name="convex_concave"):
    """Minimise ``F`` by the convex-concave procedure (see the module docstring).

    Parameters
    ----------
    objective : callable ``w -> F(w)``
        The objective to minimise (never increases over the steps).
    reweight : callable ``w -> weights``
        The linearisation at ``w``: the weights of the convex subproblem (for the SVMs
        :func:`linearised_weights` of the hinge sums at ``w``).
    solve : callable ``(weights, w, warm, previous, tol, min_decrease) -> SolverResult``
        Solves the convex subproblem linearised at the current point ``w`` (``weights``) to the
        relative duality gap ``tol``. ``warm``: start from ``w`` and the previous step's result
        ``previous`` (False and None on the first step, where the solver starts cold);
        ``min_decrease`` as in :func:`~counterfactual_ltr.solvers.solve_pairwise_hinge` (0: to its gap).
    start : array (n_features,)
        The first point (the SVMs start at ``w = 0``).
    tol : float
        Relative change of ``F`` at which to stop.
    max_iter : int
        CCP steps at most; a lone step (1) is solved to ``solver_tol``.
    solver_tol : float
        The tightest relative duality gap asked of a subproblem.
    exact : bool, default False
        The subproblem is the problem itself (an affine ``lambda`` with non-negative weights, or
        nothing to rank): stop after the first step, converged as its solve.
    majorises : bool, default True
        Whether every linearisation bounds ``F`` from above; if not, steps that raise ``F`` are
        halved back.
    descent : float, default 0
        Later subproblems also stop once a Newton step gains less than ``descent`` times the
        last decrease of ``F`` (0: every subproblem solved to its gap).
    after_step : callable ``w -> None``, optional
        Called with the new point after every step (e.g. to record a training metric).
    name : str
        For the ``ConvergenceWarning`` after ``max_iter`` steps.

    Returns
    -------
    CCPResult

    Examples
    --------
    ``F(w) = 0.5 w^2 - 1 / (1 + H(w))``, ``H(w) = max(0, 1 - w)`` (``lambda(r) = -1/r``): linearised
    at ``w_t``, ``0.5 w^2 + lambda'(1 + H(w_t)) H(w)``, minimised by ``w = min(lambda'(1 + H(w_t)), 1)``.
    The procedure descends to the local minimum ``w = (3 - sqrt(5)) / 2``.

    >>> import numpy as np
    >>> from counterfactual_ltr.solvers import SolverResult
    >>> F = lambda w: 0.5 * w[0] ** 2 - 1.0 / (1.0 + max(0.0, 1.0 - w[0]))
    >>> reweight = lambda w: 1.0 / (1.0 + max(0.0, 1.0 - w[0])) ** 2
    >>> def solve(c, w, warm, previous, tol, min_decrease):
    ...     return SolverResult(np.array([min(c, 1.0)]), 0.0, 0.0, 0.0, 1, True)
    >>> out = convex_concave(F, reweight, solve, np.zeros(1), tol=1e-12, max_iter=200, solver_tol=1e-9)
    >>> out.converged, round(float(out.coef[0]), 5), bool(np.all(np.diff(out.objective_history) <= 0))
    (True, 0.38197, True)
    """
    coef = start
    history, iters, seconds, tols = [objective(coef)], [], [], []
    converged = False
    inner_tol, min_decrease = solver_tol, 0.0
    if max_iter > 1:                              # a lone step is solved exactly; a first step of many only loosely
        inner_tol = max(solver_tol, min(_FIRST_INNER_TOL, 0.1 * tol))
    result = None                                 # the last subproblem's solution warm-starts the next
    bar = progress(range(max_iter), desc=f"{name} CCP", unit="iter", leave=False)
    for _ in bar:
        weights = reweight(coef)
        tols.append(inner_tol)
        t0 = time.perf_counter()
        result = solve(weights, coef, bool(iters), result, inner_tol, min_decrease)
        seconds.append(time.perf_counter() - t0)
        new, value = result.coef, objective(result.coef)
        if not majorises:
            new, value = _backtrack(objective, coef, new, value, history[-1])
        coef = new
        iters.append(result.n_iter)
        if after_step is not None:
            after_step(coef)
        previous = history[-1]
        history.append(value)
        if exact:
            converged = result.converged
            break
        if abs(previous - value) / max(abs(value), 1e-12) <= tol:
            converged = True
            break
        # The subproblem is the majoriser up to a constant, so its absolute gap is what compares
        # with the objective's absolute decrease: relative to the subproblem's own objective.
        decrease = abs(previous - value) / max(1.0, abs(result.objective))
        inner_tol = max(solver_tol, min(inner_tol, _INNER_FACTOR * decrease))
        if descent:
            min_decrease = descent * abs(previous - value)
    bar.close()
    if not converged and not exact:
        warnings.warn(f"{name}: the convex-concave procedure stopped after {max_iter} iterations with relative "
                      f"objective change above tol={tol}", ConvergenceWarning, stacklevel=2)
    return CCPResult(coef, np.asarray(history), np.asarray(iters), np.asarray(seconds), np.asarray(tols), converged,
                     result)


def _backtrack(objective, coef, new, value, last):
    """Halve a step that raised the objective above ``last``; ``(coef, last)`` if no halving helps."""
    for _ in range(_BACKTRACKS):
        if value <= last:
            break
        new = 0.5 * (coef + new)
        value = objective(new)
    if value > last:
        return coef, last
    return new, value
