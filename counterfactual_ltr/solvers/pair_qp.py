"""Exact solution of a small explicit pairwise-hinge problem by a primal-dual interior-point method.

The problem, with the pair differences as explicit rows ``z_k`` of ``Z`` (``K x d``)::

    P(w) = 0.5 ||w||^2 - q.w + sum_k c_k max(0, margin - z_k.w)

and its dual box QP::

    D(lam) = margin sum(lam) - 0.5 ||q + Z^T lam||^2,   0 <= lam_k <= c_k,   w = q + Z^T lam.

The smoothing-Newton solver of :mod:`~counterfactual_ltr.solvers` uses it as a
*finisher*: near the optimum, the few hundred pairs closest to the kink form
``Z``, every other pair is held on its current side (a violated one moves into
``q`` and the constant), and this restricted problem is solved to the duality
gap asked. Where the sides are right its solution is the full problem's, and
the exact certificate computed on all pairs proves it; where they are not,
the solution is still a feasible dual point and a primal candidate.

Method: Mehrotra's predictor-corrector on the KKT system of the box QP
(complementarity ``lam s = 0`` and ``(c - lam) t = 0`` with multipliers ``s, t >= 0``;
``t - s`` is the hinge argument ``margin - z.w``). Each Newton system
``(Z Z^T + Dg) dlam = r`` with ``Dg = s / lam + t / (c - lam)`` is solved in
whichever space is smaller: with ``K <= d`` directly (``Z Z^T`` formed once),
otherwise through ``w``: ``(I + Z^T Dg^-1 Z) dw = Z^T Dg^-1 r`` and
``dlam = Dg^-1 (r - Z dw)`` (Sherman-Morrison-Woodbury, as in Ferris & Munson
2002 for SVMs), a ``d x d`` Cholesky per iteration. The iteration count does
not depend on how many pairs change side, which is what makes smoothing-Newton
steps crawl on such problems (a few pairs enter the band per step).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from .._linalg import weighted_gram

# Fraction of the way to the boundary an interior-point step may go.
_STEP_FRACTION = 0.99
_TINY = 1e-300


def solve_pair_dual(Z, q, c, margin, atol, max_iter=40):
    """Solve the box-constrained pair dual to an absolute duality gap ``atol``.

    Parameters
    ----------
    Z : ndarray of shape (n_pairs, n_features)
        Pair differences ``x_i - x_j``, one row per pair.
    q : ndarray of shape (n_features,)
        Linear term of the primal (the aggregate of pairs held violated).
    c : ndarray of shape (n_pairs,)
        Upper bounds of the dual variables (``C`` times the pair weights), all > 0.
    margin : float
        The hinge's margin.
    atol : float
        Absolute duality gap at which to stop.
    max_iter : int, default 40
        Interior-point iterations at most.

    Returns
    -------
    lam : ndarray of shape (n_pairs,)
        Dual point in the box ``[0, c]`` (always feasible, converged or not).
    w : ndarray of shape (n_features,)
        ``q + Z^T lam``.
    gap : float
        ``P(w) - D(lam)`` at the returned point.

    Examples
    --------
    One pair ``z = (1, 0)``, no linear term, ``c = 10``: the optimum puts the pair
    exactly on the margin, ``w = (1, 0)``, ``lam = 1``.

    >>> import numpy as np
    >>> lam, w, gap = solve_pair_dual(np.array([[1.0, 0.0]]), np.zeros(2), np.array([10.0]), 1.0, 1e-10)
    >>> lam.round(6).tolist(), w.round(6).tolist(), gap < 1e-10
    ([1.0], [1.0, 0.0], True)
    """
    n_pairs, d = Z.shape
    c = np.asarray(c, dtype=np.float64)
    if n_pairs == 0:
        w = np.array(q, dtype=np.float64)
        return np.zeros(0), w, 0.0
    small = n_pairs <= d
    G = Z @ Z.T if small else None
    lam = 0.5 * c
    w = q + Z.T @ lam
    h = margin - Z @ w                         # hinge arguments; t - s = h at the optimum
    # Multipliers strictly positive and roughly balanced with the bounds' slack.
    shift = max(float(np.abs(h).max()), 1e-8 * max(abs(margin), 1.0))
    s = np.maximum(-h, 0.0) + shift
    t = np.maximum(h, 0.0) + shift
    best = (np.inf, lam, w)
    for it in range(max_iter + 1):               # the last pass only evaluates the last step
        gap = float(np.dot(c, np.maximum(h, 0.0)) - np.dot(lam, h))
        # P - D = sum c max(0, h) - sum lam h, from P = 0.5|w|^2 - q.w + sum c max(0, h) and
        # D = margin sum(lam) - 0.5|w|^2 with w = q + Z^T lam.
        if gap < best[0]:
            best = (gap, lam.copy(), w.copy())
        if gap <= atol or it == max_iter:
            break
        upper = c - lam
        r_d = t - s - h                        # gradient of -D plus the multipliers' terms
        mu = (float(lam @ s) + float(upper @ t)) / (2.0 * n_pairs)
        Dg = s / lam + t / upper
        solve = _newton_system(Z, G, Dg)
        if solve is None:
            break

        def direction(rho_lo, rho_up):
            dlam = solve(-r_d + rho_lo / lam - rho_up / upper)
            return dlam, (rho_lo - s * dlam) / lam, (rho_up + t * dlam) / upper

        # Predictor (sigma = 0), then the centred corrector with its second-order terms.
        dl, ds, dt = direction(-lam * s, -upper * t)
        a = _step(lam, upper, s, t, dl, ds, dt)
        mu_aff = (float((lam + a * dl) @ (s + a * ds)) + float((upper - a * dl) @ (t + a * dt))) / (2.0 * n_pairs)
        sigma = (mu_aff / mu) ** 3 if mu > 0 else 0.0
        dl, ds, dt = direction(sigma * mu - lam * s - dl * ds, sigma * mu - upper * t + dl * dt)
        a = _step(lam, upper, s, t, dl, ds, dt)
        # Rounding can land exactly on a bound (the step stops short of it in exact arithmetic):
        # keep the iterate interior, c - lam > 0 included.
        lam = np.clip(lam + a * dl, _TINY, np.nextafter(c, 0.0))
        s, t = np.maximum(s + a * ds, _TINY), np.maximum(t + a * dt, _TINY)
        w = q + Z.T @ lam
        h = margin - Z @ w
    gap, lam, w = best
    return lam, w, gap


def _newton_system(Z, G, Dg):
    """Solver of ``(Z Z^T + diag(Dg)) x = r``, or None if it is numerically singular."""
    try:
        if G is not None:                      # few pairs: the K x K system itself
            M = G.copy()
            M[np.diag_indices_from(M)] += Dg
            factor = scipy.linalg.cho_factor(M, overwrite_a=True, check_finite=False)
            return lambda r: scipy.linalg.cho_solve(factor, r, check_finite=False)
        inv = 1.0 / Dg
        M = weighted_gram(Z, inv)
        M[np.diag_indices_from(M)] += 1.0
        factor = scipy.linalg.cho_factor(M, overwrite_a=True, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        return None

    def solve(r):
        dw = scipy.linalg.cho_solve(factor, Z.T @ (inv * r), check_finite=False)
        return inv * (r - Z @ dw)
    return solve


def _step(lam, upper, s, t, dl, ds, dt):
    """Longest step (times ``_STEP_FRACTION``, at most 1) keeping ``lam`` in its box and ``s, t > 0``."""
    ratio = 1.0
    for value, change in ((lam, dl), (upper, -dl), (s, ds), (t, dt)):
        falling = change < 0
        if falling.any():
            ratio = min(ratio, float(np.min(-value[falling] / change[falling])))
    return min(1.0, _STEP_FRACTION * ratio)
