"""The bundle method (BMRM) for ``0.5||w||^2 + C L(w)``, ``L`` convex and piecewise linear, given by an oracle.

Teo et al. (2010): cutting planes ``L(w) >= a_k.w + b_k`` from ``oracle(w) -> (L(w), subgradient)``;
the master problem is solved in its dual over the simplex by OSQP, warm-started from the previous
multipliers. It needs nothing but the oracle, so any convex piecewise-linear loss can use it
(SLAM does), and its certificate is exact: the multipliers are projected onto the simplex before
the dual value is taken, whatever OSQP's accuracy. It needs one oracle call per iteration but its
iteration count grows like ``C / eps``, so the pairwise hinge has its own Newton solver
(:func:`~counterfactual_ltr.solvers.solve_pairwise_hinge`); :func:`pairwise_hinge_oracle` is here
as a reference and for comparisons.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._validation import check_int
from .common import (MAX_WEIGHT_BOUND, SolverResult, aggregate_pairs, check_C, check_max_iter, check_tol, check_w0,
                     cutting_plane_record, doc, make_result)

__all__ = ["solve_regularized", "pairwise_hinge_oracle"]

# Planes whose multiplier stayed zero this many iterations leave the master problem.
_IDLE_PLANES = 50


def pairwise_hinge_oracle(X, pairs_i, pairs_j, pair_weights, margin=1.0):
    """``oracle(w) -> (L(w), subgradient)`` of ``L(w) = sum_p c_p max(0, margin - (x_i - x_j).w)``.

    Parameters
    ----------
    X : array (n, d)
        Feature matrix; the pairs index its rows.
    pairs_i, pairs_j : arrays of int
        Each pair prefers row ``i`` to row ``j``.
    pair_weights : array
        ``c_p >= 0``.
    margin : float, default 1.0
        The hinge's margin.

    Returns
    -------
    callable ``w -> (L(w), subgradient)``

    Examples
    --------
    >>> import numpy as np
    >>> oracle = pairwise_hinge_oracle(np.eye(2), [0], [1], [2.0])
    >>> value, grad = oracle(np.zeros(2))
    >>> value, grad.tolist()
    (2.0, [-2.0, 2.0])
    """
    X = np.asarray(X, dtype=np.float64)
    i, j = np.asarray(pairs_i, dtype=np.int64), np.asarray(pairs_j, dtype=np.int64)
    c = np.asarray(pair_weights, dtype=np.float64)
    n = X.shape[0]

    def oracle(w):
        s = X @ w
        z = margin - (s[i] - s[j])
        viol = z > 0
        return float(np.dot(c[viol], z[viol])), -(X.T @ aggregate_pairs(i[viol], j[viol], c[viol], n))

    return oracle


@doc
def solve_regularized(oracle, n_features, C, *, w0=None, tol=1e-6, max_iter=1000, verbose=False) -> SolverResult:
    """Minimise ``0.5||w||^2 + C L(w)`` for a convex piecewise-linear ``L`` given by an oracle.

    BMRM bundle method (Teo et al. 2010): cutting planes ``L(w) >= a_k.w + b_k``
    from ``oracle(w) -> (L(w), subgradient)``; the master problem is solved
    in its dual over the simplex, ``max_b  C b.B - 0.5 C^2 ||A^T b||^2``, by OSQP
    warm-started from the previous multipliers. The multipliers are projected
    onto the simplex before the dual value is taken, so the lower bound is
    certified whatever OSQP's accuracy; ``gap`` = best primal value minus the
    best lower bound. Planes idle for many iterations are dropped.

    Parameters
    ----------
    oracle : callable ``w -> (L(w), subgradient)``
        The loss ``L`` (convex, piecewise linear) and a subgradient at ``w``.
    n_features : int
        Length of ``w``.
    C : float > 0
        Weight of the loss against ``0.5||w||^2``.
    w0 : array (n_features,), optional
        Warm start.
    tol : float > 0, default 1e-6
        Relative duality gap at which to stop.
    max_iter : int, default 1000
        Iterations (oracle calls) before a ``ConvergenceWarning``.
    verbose : bool, default False
        Print one line per iteration.

    {returns_result}

    Examples
    --------
    >>> import numpy as np
    >>> oracle = pairwise_hinge_oracle(np.eye(2), [0], [1], [1.0])
    >>> result = solve_regularized(oracle, 2, C=10.0)
    >>> result.converged, np.round(result.coef, 4).tolist()   # margin reached: w0 - w1 = 1
    (True, [0.5, -0.5])
    """
    C = check_C(C)
    d = check_int(n_features, "n_features", min_value=1)
    tol, max_iter = check_tol(tol), check_max_iter(max_iter)
    w = _start(w0, d)
    bundle = _Bundle(d, C)
    best_P, best_w, best_D = np.inf, w.copy(), -np.inf
    history = []
    converged = False
    it = 0
    while True:
        L, g = _call(oracle, w, it, d, C)
        P = 0.5 * float(w @ w) + C * L
        if P < best_P:
            best_P, best_w = P, w.copy()
        bundle.add(g, L - float(g @ w))
        D = bundle.solve_master()
        best_D = max(best_D, D)
        if cutting_plane_record("solve_regularized", it, bundle.b.size, best_P, best_D, history, tol, verbose):
            converged = True
            break
        it += 1
        if it >= max_iter:
            break
        w = bundle.minimiser()
        bundle.drop_idle()
    return make_result("solve_regularized", best_w, best_P, best_D, it, converged, history, tol, "bmrm")


def _start(w0, d):
    """The starting point, with a ``ValueError`` where ``n_features`` is too large to allocate it."""
    try:
        return check_w0(w0, d)
    except (MemoryError, OverflowError) as err:
        raise ValueError(f"n_features = {d:.3g}: the weight vector cannot be allocated "
                         f"({type(err).__name__})") from None
    except ValueError as err:
        if "n_features" in str(err) or "w0" in str(err):
            raise
        raise ValueError(f"n_features = {d:.3g}: the weight vector cannot be allocated ({err})") from None


def _call(oracle, w, it, d, C):
    """``(L(w), subgradient)`` from the oracle, checked: ``d`` finite entries, a weight bound in float64."""
    try:
        L, g = oracle(w)
    except (TypeError, ValueError) as err:
        if it:
            raise
        raise type(err)(f"the oracle failed on a weight vector of n_features = {d} entries: {err}") from err
    g = np.asarray(g, dtype=np.float64)
    if g.size != d:
        raise ValueError(f"the oracle's subgradient has {g.size} entries but n_features = {d}")
    g = g.reshape(d)
    L = float(L)
    if not np.isfinite(L) or not np.all(np.isfinite(g)):
        raise ValueError(f"the oracle returned a non-finite value or subgradient at iteration {it} "
                         f"(at a point of norm {np.linalg.norm(w):.3g}; C = {C:g})")
    if it == 0 and not C * float(np.linalg.norm(g)) <= MAX_WEIGHT_BOUND:
        # The iterates are -C A^T beta: their norm reaches C times the subgradients' norm.
        raise ValueError(f"C = {C:g} is too large for this loss: C times the subgradient norm "
                         f"{np.linalg.norm(g):.3g} leaves float64 arithmetic (must stay below "
                         f"{MAX_WEIGHT_BOUND:g})")
    return L, g


class _Bundle:
    """The cutting planes ``L(w) >= a_k.w + b_k`` and the multipliers ``beta`` of the master's dual."""

    def __init__(self, d, C):
        self.C = C
        self.A, self.b = np.empty((0, d)), np.empty(0)
        self.idle = np.empty(0, dtype=np.int64)
        self.beta = np.empty(0)

    def add(self, a, b):
        self.A = np.vstack([self.A, a])
        self.b = np.append(self.b, b)
        self.idle = np.append(self.idle, 0)
        self.beta = np.append(self.beta, 0.0)

    def solve_master(self):
        """Multipliers of ``min_b 0.5 C^2 b.(A A^T) b - C B.b`` over the simplex; returns the dual value."""
        import osqp

        C, K = self.C, self.b.size
        Q = C * C * (self.A @ self.A.T)
        Q = 0.5 * (Q + Q.T) + 1e-12 * np.trace(Q) / K * np.eye(K)
        cons = sp.vstack([sp.csc_matrix(np.ones((1, K))), sp.eye(K, format="csc")], format="csc")
        lo = np.r_[1.0, np.zeros(K)]
        hi = np.r_[1.0, np.full(K, np.inf)]
        solver = osqp.OSQP()
        solver.setup(P=sp.triu(sp.csc_matrix(Q), format="csc"), q=-C * self.b, A=cons, l=lo, u=hi,
                     eps_abs=1e-9, eps_rel=1e-9, max_iter=4000, polishing=True, verbose=False)
        if self.beta.sum() > 0:
            solver.warm_start(x=self.beta / self.beta.sum())
        res = solver.solve(raise_error=False)
        x = res.x if res.x is not None and np.all(np.isfinite(res.x)) else np.full(K, 1.0 / K)
        # Projected onto the simplex: a feasible dual point whatever OSQP's accuracy.
        self.beta = _project_simplex(x)
        self.Ab = self.A.T @ self.beta
        return C * float(self.b @ self.beta) - 0.5 * C * C * float(self.Ab @ self.Ab)

    def minimiser(self):
        """The master's primal solution ``w = -C A^T beta``."""
        return -self.C * self.Ab

    def drop_idle(self):
        """Drop planes that stayed inactive for a while: keeps the master QP small."""
        self.idle = np.where(self.beta > 0, 0, self.idle + 1)
        keep = self.idle < _IDLE_PLANES
        if not keep.all():
            self.A, self.b, self.idle, self.beta = self.A[keep], self.b[keep], self.idle[keep], self.beta[keep]


def _project_simplex(v):
    """Euclidean projection onto ``{b >= 0, sum b = 1}`` (sort-based)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.arange(1, v.size + 1)
    rho = np.flatnonzero(u - css / k > 0)[-1]
    return np.maximum(v - css[rho] / (rho + 1.0), 0.0)
