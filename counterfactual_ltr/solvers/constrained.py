"""Constrained and sparse linear ranking SVMs: monotone features, bounds, L1 / elastic net, cvxpy constraints.

Problem. Over a feasible set ``F`` of weight vectors,

    min_{w in F}  R(w) + C sum_p c_p max(0, margin - (x_{i_p} - x_{j_p}) . w),
    R(w) = rho ||w||_1 + 0.5 (1 - rho) ||w||^2,

with ``rho = 0`` (``penalty="l2"``, today's problem), ``1`` (``"l1"``) or
``l1_ratio`` (``"elasticnet"``). ``F`` is the box ``lower <= w <= upper``
(monotone constraints are signs of weights: for a linear score, ``+1`` means
``w_k >= 0``, the score never goes down when feature ``k`` goes up), and,
optionally, the cvxpy constraints a user callable returns for a cvxpy variable
``w``.

Method (:func:`solve_constrained_hinge`, ``method="cutting_plane"``): a
cutting-plane method that keeps the pair structure (no slack per pair). The
hinge sum ``L`` is bounded below by planes ``L(w) >= a_k.w + b_k`` from
:func:`~counterfactual_ltr.solvers.pairwise_hinge_oracle` (plus the plane
``L >= 0``); the master problem ``min_{w in F} R(w) + C max_k (a_k.w + b_k)``
carries the constraints and is a QP (an LP when ``rho = 1``) in ``d + 1``
variables (``2d + 1`` with L1) solved by Clarabel directly for the box, or
through cvxpy (Clarabel) with user constraints. (OSQP stalls on these
masters: their planes are large and nearly parallel; an interior-point
method solves them to 1e-10.)
To cut the number of iterations, the best point moves by an exact line search
towards each master solution and the next plane is taken close to the best
point (OCAS, Franc & Sonnenburg 2008): several times fewer iterations than
plain BMRM (:func:`~counterfactual_ltr.solvers.solve_regularized`). Timings:
``python -m experiments.benchmarks.bench_constraints`` and ``docs/solver-notes.md``.
Feasibility is kept exactly: box solutions are clipped to the box, the line
search stays on the segment between two feasible points.

Certificate: the master's plane multipliers ``theta`` (projected onto the
simplex) give the Lagrangian lower bound
``C b.theta + min_{w in box} R(w) + C (A^T theta).w``, in closed form
coordinate by coordinate, so ``gap`` is exact whatever the QP accuracy. With
user constraints the lower bound is the cvxpy master's optimal value, to the
accuracy of the interior-point solver (tolerances 1e-10).

Warm start: ``w0`` starts the best point, and ``warm_points`` (the points
whose planes supported the previous solution, ``result.support_points``) are
re-evaluated under the new pair weights, so a convex-concave loop (SVM
PropDCG) re-solves from a model of the new objective near the old optimum.

``method="cvxpy"`` solves the whole problem through cvxpy with one slack per
pair (pair features are formed): a reference for small problems.

Nothing here imports cvxpy unless user constraints or ``method="cvxpy"`` are
used.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .._segments import check_finite_1d
from .._validation import check_probability
from . import SolverResult
from .common import (aggregate_pairs, check_C, check_max_iter, check_pairs, check_tol, check_X, cutting_plane_record,
                     doc, make_result)

__all__ = ["FeasibleSet", "ConstrainedResult", "feasible_set", "check_penalty", "solve_constrained_hinge",
           "PENALTIES", "SOLVERS"]

PENALTIES = ("l2", "l1", "elasticnet")
SOLVERS = ("auto", "newton", "cutting_plane", "cvxpy")
# Master tolerance (Clarabel): user constraints must hold to 1e-8 at the solution.
_CLARABEL_TOL = 1e-10
# OCAS: the next plane is taken this far from the best point towards the master solution.
_OCAS_MU = 0.1
# L1: weights below this share of the largest are tried at exactly zero at the end.
_SPARSE_ROUNDING = 1e-6
# Planes whose multiplier stayed zero this many iterations leave the master.
_IDLE_PLANES = 50


@dataclass(frozen=True)
class FeasibleSet:
    """A validated feasible set and penalty for a linear ranker (see :func:`feasible_set`).

    Parameters
    ----------
    lower, upper : arrays (n_features,)
        Per-feature bounds (``-inf``/``inf`` where free), monotone signs included.
    l1_ratio : float, default 0
        ``rho`` of the penalty ``rho ||w||_1 + 0.5 (1 - rho) ||w||^2``.
    constraints : callable or None
        The user's ``w -> list of cvxpy constraints``.
    solver : str, default "auto"
        The method asked for (see :func:`feasible_set`).

    Examples
    --------
    >>> fs = feasible_set(3, monotone_constraints=[1, 0, -1])
    >>> fs.lower.tolist(), fs.upper.tolist(), fs.is_box
    ([0.0, -inf, -inf], [inf, inf, 0.0], True)
    """

    lower: np.ndarray
    upper: np.ndarray
    l1_ratio: float = 0.0
    constraints: object = None
    solver: str = "auto"

    @property
    def n_features(self) -> int:
        return self.lower.shape[0]

    @property
    def is_box(self) -> bool:
        """No user constraint: the feasible set is the box ``lower <= w <= upper``."""
        return self.constraints is None

    @property
    def unconstrained_l2(self) -> bool:
        """Today's problem: L2 penalty, no constraint of any kind."""
        return (self.l1_ratio == 0.0 and self.is_box and not np.isfinite(self.lower).any()
                and not np.isfinite(self.upper).any())

    @property
    def method(self) -> str:
        """``"newton"`` for unconstrained L2 under ``"auto"``, else the cutting-plane method (or as asked)."""
        if self.solver == "auto":
            return "newton" if self.unconstrained_l2 else "cutting_plane"
        return self.solver

    @doc
    def penalty(self, w) -> float:
        """``R(w) = l1_ratio ||w||_1 + 0.5 (1 - l1_ratio) ||w||^2``.

        {w}

        Returns
        -------
        float
        """
        return _penalty(np.asarray(w, dtype=np.float64), self.l1_ratio)

    @doc
    def project(self, w) -> np.ndarray:
        """Clip to the box (exact feasibility of the box part).

        {w}

        Returns
        -------
        array (n_features,)
        """
        return np.clip(w, self.lower, self.upper)


def _check_signs(monotone_constraints, d: int) -> np.ndarray:
    """-1/0/+1 per feature from a sequence of length ``d`` or a mapping ``{feature index: sign}``."""
    signs = np.zeros(d)
    if monotone_constraints is None:
        return signs
    if isinstance(monotone_constraints, Mapping):
        items = list(monotone_constraints.items())
    else:
        if isinstance(monotone_constraints, (str, bytes)) or not hasattr(monotone_constraints, "__len__"):
            raise TypeError("monotone_constraints must be a sequence of -1/0/+1 per feature or a mapping "
                            f"{{feature index: sign}}, got {type(monotone_constraints).__name__}")
        values = list(np.asarray(monotone_constraints, dtype=object).ravel())
        if np.ndim(monotone_constraints) != 1 or len(values) != d:
            raise ValueError(f"monotone_constraints has shape {np.shape(monotone_constraints)}, expected ({d},): "
                             "one -1/0/+1 per feature")
        items = list(enumerate(values))
    for k, sign in items:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral) or not 0 <= k < d:
            raise ValueError(f"monotone_constraints: feature index {k!r} is not an integer in [0, {d})")
        if isinstance(sign, (bool, np.bool_)) or not isinstance(sign, numbers.Real) or sign not in (-1, 0, 1):
            raise ValueError(f"monotone_constraints[{k}] = {sign!r}: signs must be -1, 0 or +1")
        signs[int(k)] = float(sign)
    return signs


def _check_bounds(bounds, d: int):
    lower, upper = np.full(d, -np.inf), np.full(d, np.inf)
    if bounds is None:
        return lower, upper
    if isinstance(bounds, (str, bytes)) or not hasattr(bounds, "__len__") or len(bounds) != 2:
        raise ValueError("bounds must be a pair (lower, upper), each None, a number or one value per feature")
    out = []
    for name, value, default in (("lower", bounds[0], lower), ("upper", bounds[1], upper)):
        if value is None:
            out.append(default)
            continue
        arr = np.asarray(value)
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
            raise TypeError(f"bounds {name} must be numbers, got {arr.dtype} values")
        arr = np.broadcast_to(arr.astype(np.float64), (d,)) if arr.ndim == 0 else arr.astype(np.float64)
        if arr.shape != (d,):
            raise ValueError(f"bounds {name} has shape {arr.shape}, expected ({d},) or a scalar")
        if np.isnan(arr).any():
            raise ValueError(f"bounds {name} is NaN at feature {int(np.flatnonzero(np.isnan(arr))[0])}")
        out.append(np.array(arr))
    lower, upper = out
    if np.isposinf(lower).any() or np.isneginf(upper).any():
        k = int(np.flatnonzero(np.isposinf(lower) | np.isneginf(upper))[0])
        raise ValueError(f"bounds at feature {k}: lower = {lower[k]}, upper = {upper[k]} leave no value")
    bad = np.flatnonzero(lower > upper)
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"bounds at feature {k}: lower {lower[k]} > upper {upper[k]}")
    return lower, upper


def feasible_set(n_features, *, monotone_constraints=None, bounds=None, penalty="l2", l1_ratio=0.5,
                 constraints=None, solver="auto") -> FeasibleSet:
    """Validate the constraint options of a linear ranker, before any solving.

    Parameters
    ----------
    n_features : int
        Length of the weight vector.
    monotone_constraints : sequence of -1/0/+1 per feature, or mapping {feature index: sign}, optional
        LightGBM's convention: ``+1`` the score never decreases when the
        feature increases (``w_k >= 0``), ``-1`` never increases, ``0`` free.
    bounds : (lower, upper), optional
        Each None, a number, or one value per feature (``-inf``/``inf`` free).
    penalty : {"l2", "l1", "elasticnet"}
        The regulariser (see :class:`FeasibleSet`).
    l1_ratio : float in [0, 1]
        Share of L1 in the elastic net, ``l1_ratio ||w||_1 + 0.5 (1 - l1_ratio) ||w||^2``
        (used only by ``"elasticnet"``, checked whatever the penalty).
    constraints : callable, optional
        ``w -> list of cvxpy constraints`` on a cvxpy variable ``w`` of shape
        ``(n_features,)``. Called once here, on a fresh variable, to check
        what it returns and that the feasible set is not empty.
    solver : {"auto", "newton", "cutting_plane", "cvxpy"}
        ``"auto"``: Newton for the unconstrained L2 problem, cutting planes otherwise.

    Returns
    -------
    FeasibleSet

    Raises
    ------
    ValueError
        Signs outside {-1, 0, 1}, bounds with lower > upper, monotone signs
        that contradict the bounds, a callable that returns non-cvxpy objects,
        an empty feasible set, ``"newton"`` with any constraint or penalty
        other than L2.

    Examples
    --------
    >>> fs = feasible_set(4, monotone_constraints=[1, 0, -1, 0], bounds=(None, 2.0))
    >>> fs.lower.tolist(), fs.upper.tolist()
    ([0.0, -inf, -inf, -inf], [2.0, 2.0, 0.0, 2.0])
    >>> fs.method
    'cutting_plane'
    >>> feasible_set(2, monotone_constraints={1: 2})
    Traceback (most recent call last):
    ...
    ValueError: monotone_constraints[1] = 2: signs must be -1, 0 or +1
    """
    from .._validation import check_int

    d = check_int(n_features, "n_features", min_value=1)
    rho = check_penalty(penalty, l1_ratio, solver)
    signs = _check_signs(monotone_constraints, d)
    given_lower, given_upper = _check_bounds(bounds, d)
    lower = np.where(signs > 0, np.maximum(given_lower, 0.0), given_lower)
    upper = np.where(signs < 0, np.minimum(given_upper, 0.0), given_upper)
    bad = np.flatnonzero(lower > upper)
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"infeasible constraints at feature {k}: monotone sign {int(signs[k]):+d} "
                         f"but bounds [{given_lower[k]}, {given_upper[k]}]")
    if constraints is not None and not callable(constraints):
        raise ValueError(f"constraints must be a callable w -> list of cvxpy constraints, got "
                         f"{type(constraints).__name__}")
    fs = FeasibleSet(lower=lower, upper=upper, l1_ratio=float(rho), constraints=constraints, solver=solver)
    if solver == "newton" and not fs.unconstrained_l2:
        raise ValueError('solver="newton" solves only the unconstrained L2 problem; use "auto", '
                         '"cutting_plane" or "cvxpy" with constraints or an L1 / elastic-net penalty')
    if constraints is not None:
        _check_user_constraints(fs)
    return fs


def check_penalty(penalty="l2", l1_ratio=0.5, solver="auto") -> float:
    """The share of L1 in the penalty, with ``penalty``, ``l1_ratio`` and ``solver`` checked.

    ``l1_ratio`` is checked whatever the penalty (a value out of [0, 1] is an error even
    where only ``"elasticnet"`` would use it), so that no combination hides a bad value.

    Parameters
    ----------
    penalty : {"l2", "l1", "elasticnet"}
        The regulariser.
    l1_ratio : float in [0, 1]
        Share of L1 in the elastic net.
    solver : {"auto", "newton", "cutting_plane", "cvxpy"}
        The solver asked for.

    Returns
    -------
    float
        0 for L2, 1 for L1, ``l1_ratio`` for the elastic net.

    Examples
    --------
    >>> check_penalty("elasticnet", 0.3)
    0.3
    >>> check_penalty("l2", 5)
    Traceback (most recent call last):
    ...
    ValueError: l1_ratio must be <= 1.0, got 5.0
    """
    if not isinstance(penalty, str) or penalty not in PENALTIES:
        raise ValueError(f"penalty must be one of {PENALTIES}, got {penalty!r}")
    if not isinstance(solver, str) or solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    ratio = check_probability(l1_ratio, "l1_ratio")
    return {"l2": 0.0, "l1": 1.0}.get(penalty, float(ratio))


def _user_constraints(fs: FeasibleSet, w):
    """The user's constraints on cvxpy variable ``w``, checked to be a list of cvxpy constraints."""
    import cvxpy as cp

    try:
        out = fs.constraints(w)
    except Exception as exc:  # the callable's own error, with where it came from
        raise ValueError(f"the constraints callable failed on a cvxpy variable of shape {w.shape}: "
                         f"{type(exc).__name__}: {exc}") from exc
    if isinstance(out, cp.constraints.constraint.Constraint):
        out = [out]
    if not isinstance(out, (list, tuple)):
        raise ValueError(f"the constraints callable must return a list of cvxpy constraints, got "
                         f"{type(out).__name__}")
    for k, c in enumerate(out):
        if not isinstance(c, cp.constraints.constraint.Constraint):
            raise ValueError(f"the constraints callable returned a {type(c).__name__} at position {k}, "
                             "not a cvxpy constraint (write e.g. w[3] >= w[5], not a bool or a number)")
        if not c.is_dcp():
            raise ValueError(f"constraint {k} returned by the constraints callable is not convex (DCP): {c}")
    if not out:
        raise ValueError("the constraints callable returned no constraint: leave constraints=None instead")
    _check_involve_weights(out, w)
    return list(out)


def _check_involve_weights(constraints, w) -> None:
    """Every constraint must bear on ``w``: directly, or through variables that constraints on ``w`` also hold.

    A constraint on other variables only (a fresh ``cp.Variable()``, constants) is accepted by
    cvxpy and changes nothing: refused, naming it.
    """
    reached = {w.id}
    pending = [(k, {v.id for v in c.variables()}) for k, c in enumerate(constraints)]
    grew = True
    while grew:
        grew = False
        for k, ids in pending:
            if ids & reached and not ids <= reached:
                reached |= ids
                grew = True
    for k, ids in pending:
        if not ids & reached:
            raise ValueError(f"constraint {k} returned by the constraints callable never involves the weights w "
                             f"(it constrains {'only constants' if not ids else 'other variables'}): "
                             f"{constraints[k]}")


def _box_constraints(w, fs: FeasibleSet):
    lo, hi = np.isfinite(fs.lower), np.isfinite(fs.upper)
    out = []
    if lo.any():
        out.append(w[np.flatnonzero(lo)] >= fs.lower[lo])
    if hi.any():
        out.append(w[np.flatnonzero(hi)] <= fs.upper[hi])
    return out


def _check_user_constraints(fs: FeasibleSet):
    """Types, convexity, and a non-empty feasible set (one small feasibility problem)."""
    import cvxpy as cp

    w = cp.Variable(fs.n_features)
    cons = _user_constraints(fs, w) + _box_constraints(w, fs)
    prob = cp.Problem(cp.Minimize(0), cons)
    prob.solve(solver=cp.CLARABEL)
    if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise ValueError("infeasible constraints: no weight vector satisfies the constraints callable "
                         "together with the bounds and monotone constraints")
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise ValueError(f"could not check the constraints for feasibility (cvxpy status {prob.status})")


@dataclass
class ConstrainedResult(SolverResult):
    """:class:`~counterfactual_ltr.solvers.SolverResult` plus ``support_points``.

    ``support_points`` (k, d): the points whose planes support the final cutting-plane model; pass
    them as ``warm_points`` to re-solve a re-weighted problem.

    Parameters
    ----------
    coef, objective, dual_objective, gap, n_iter, converged, history, method, stalled : see SolverResult
        As in :class:`~counterfactual_ltr.solvers.SolverResult`.
    support_points : array (k, n_features)
        The points whose planes support the final model.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    >>> fs = feasible_set(2, bounds=([0.0, 0.0], [1.0, 1.0]))
    >>> result = solve_constrained_hinge(X, np.array([0, 0]), np.array([1, 2]), np.ones(2), 1.0, feasible=fs)
    >>> bool(np.all((result.coef >= 0) & (result.coef <= 1))), result.support_points.shape[1]
    (True, 2)
    """

    support_points: np.ndarray = field(default_factory=lambda: np.empty((0, 0)), repr=False)


# --------------------------------------------------------------------------- objective pieces
def _penalty(w, rho):
    return rho * float(np.abs(w).sum()) + 0.5 * (1.0 - rho) * float(w @ w)


def _box_min(g, lower, upper, rho):
    """``min_{lower <= w <= upper} sum_k rho |w_k| + 0.5 (1 - rho) w_k^2 + g_k w_k`` (closed form)."""
    if rho < 1.0:
        # Soft-threshold, then clip: the minimiser of a convex 1-D function over an interval.
        w = -np.sign(g) * np.maximum(np.abs(g) - rho, 0.0) / (1.0 - rho)
    else:
        w = np.where(g < -1.0, np.inf, np.where(g > 1.0, -np.inf, 0.0))
    w = np.clip(w, lower, upper)
    with np.errstate(invalid="ignore"):
        terms = rho * np.abs(w) + 0.5 * (1.0 - rho) * w * w + g * w
    terms[w == 0] = 0.0
    terms[np.isinf(w)] = -np.inf                  # L1 with a slope steeper than 1 towards a free side
    return float(terms.sum())


def _lower_bound(theta, A, b, C, fs):
    """Lagrangian bound ``min_{w in box} R(w) + C theta.(A w + b)`` for ``theta`` on the simplex.

    The plane ``L >= 0`` is always valid, so mass may move onto it: with the L1
    penalty and an unbounded coordinate whose slope exceeds 1 (the bound would
    be -inf), theta is shrunk until every such slope is 1.
    """
    theta = np.maximum(theta, 0.0)
    total = theta.sum()
    if total <= 0:
        return _box_min(np.zeros(A.shape[1]), fs.lower, fs.upper, fs.l1_ratio)
    theta = theta / total
    g = C * (A.T @ theta)
    scale = 1.0
    if fs.l1_ratio == 1.0:
        steep = ((g < -1.0) & np.isposinf(fs.upper)) | ((g > 1.0) & np.isneginf(fs.lower))
        if steep.any():
            scale = float(1.0 / np.abs(g[steep]).max())
    return C * scale * float(b @ theta) + _box_min(scale * g, fs.lower, fs.upper, fs.l1_ratio)


def _exact_line_search(w, u, z, delta, Cc, rho):
    """``argmin_{t in [0, 1]}`` of ``R(w + t u) + sum_p Cc_p max(0, z_p - t delta_p)``, exactly.

    The derivative is nondecreasing and piecewise linear in ``t`` with upward
    jumps at the kinks ``z_p / delta_p`` (and ``-w_k / u_k`` for L1); only the
    kinks inside (0, 1) are sorted.
    """
    q0, q1 = (1.0 - rho) * float(w @ u), (1.0 - rho) * float(u @ u)
    # Right derivative at t = 0: active pairs (z > 0, or z = 0 and growing) contribute -Cc delta.
    Cd = Cc * delta
    active = (z > 0) | ((z == 0) & (delta < 0))
    slope = q0 - float(np.dot(Cd, active))
    # A pair's kink z / delta lies in (0, 1) iff its hinge argument changes sign strictly inside.
    z1 = z - delta
    inside = ((z > 0) & (z1 < 0)) | ((z < 0) & (z1 > 0))
    kink_t = [z[inside] / delta[inside]]
    kink_j = [np.abs(Cd[inside])]
    if rho > 0:
        sgn = np.where(w != 0, np.sign(w), np.sign(u))
        slope += rho * float(sgn @ u)
        mov = u != 0
        tk = -w[mov] / u[mov]
        ins = (tk > 0) & (tk < 1)
        kink_t.append(tk[ins])
        kink_j.append(2.0 * rho * np.abs(u[mov])[ins])
    kt, kj = np.concatenate(kink_t), np.concatenate(kink_j)
    order = np.argsort(kt)
    kt, kj = kt[order], kj[order]
    starts = np.r_[0.0, kt]                        # piece m covers [starts[m], ends[m])
    ends = np.r_[kt, 1.0]
    base = slope + np.r_[0.0, np.cumsum(kj)]       # derivative at t = starts[m] + 0 minus q1 t
    # First piece whose derivative at its end is >= 0 holds the minimiser.
    at_end = base + q1 * ends
    m = int(np.argmax(at_end >= 0)) if (at_end >= 0).any() else len(ends) - 1
    if at_end[m] < 0:
        return 1.0
    if base[m] + q1 * starts[m] >= 0:
        return float(starts[m])
    return float(min(max(-base[m] / q1, starts[m]), ends[m]))


# --------------------------------------------------------------------------- master problems
class _BoxMaster:
    """``min_{w in box} R(w) + xi, xi >= C (a_k.w + b_k)`` by Clarabel (interior point).

    ``xi`` is in objective units (``C`` times the hinge) so that plane rows and
    the objective are of comparable scale whatever ``C``. An interior-point
    method because the planes are large and nearly parallel: a first-order QP
    solver (OSQP) stalls on them; Clarabel solves each master to 1e-10, LPs
    (``rho = 1``) included.
    """

    def __init__(self, fs: FeasibleSet, C: float):
        self.fs, self.C, self.d = fs, C, fs.n_features
        box = np.flatnonzero(np.isfinite(fs.lower) | np.isfinite(fs.upper))
        self.up = box[np.isfinite(fs.upper[box])]
        self.dn = box[np.isfinite(fs.lower[box])]

    def solve(self, A, b):
        import clarabel

        d, rho, C = self.d, self.fs.l1_ratio, self.C
        K = b.size
        l1 = rho > 0
        nv = d + (d if l1 else 0) + 1                     # w, (s >= |w|), xi
        # Rows G x <= h: planes C a_k.w - xi <= -C b_k first, then |w| <= s, then the box.
        # Built dense (a few hundred rows of at most 2d + 1 columns): faster than sparse stacking.
        n_box = self.up.size + self.dn.size
        G = np.zeros((K + (2 * d if l1 else 0) + n_box, nv))
        G[:K, :d], G[:K, -1] = C * A, -1.0
        h = np.empty(G.shape[0])
        h[:K] = -C * b
        r = K
        if l1:
            k = np.arange(d)
            G[r + k, k], G[r + k, d + k] = 1.0, -1.0
            G[r + d + k, k], G[r + d + k, d + k] = -1.0, -1.0
            h[r:r + 2 * d] = 0.0
            r += 2 * d
        G[r + np.arange(self.up.size), self.up] = 1.0
        h[r:r + self.up.size] = self.fs.upper[self.up]
        r += self.up.size
        G[r + np.arange(self.dn.size), self.dn] = -1.0
        h[r:] = -self.fs.lower[self.dn]
        G = sp.csc_matrix(G)
        q = np.r_[np.zeros(d), np.full(d if l1 else 0, rho), 1.0]
        P = sp.diags(np.r_[np.full(d, 1.0 - rho), np.zeros(nv - d)], format="csc")
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = _CLARABEL_TOL
        sol = clarabel.DefaultSolver(P, q, G, h, [clarabel.NonnegativeConeT(G.shape[0])], settings).solve()
        x, z = np.asarray(sol.x), np.asarray(sol.z)
        if x.size != nv or not np.all(np.isfinite(x)) or not np.all(np.isfinite(z)):
            return None, np.zeros(K)
        return self.fs.project(x[:d]), np.maximum(z[:K], 0.0)


class _CvxpyMaster:
    """The same master with the user's cvxpy constraints (Clarabel); lower bound = its optimal value."""

    def __init__(self, fs: FeasibleSet, C: float):
        import cvxpy as cp

        self.cp, self.fs, self.C = cp, fs, C
        self.w = cp.Variable(fs.n_features)
        self.xi = cp.Variable()
        self.base = _user_constraints(fs, self.w) + _box_constraints(self.w, fs)
        rho = fs.l1_ratio
        self.reg = (rho * cp.norm1(self.w) if rho > 0 else 0) + \
                   (0.5 * (1.0 - rho) * cp.sum_squares(self.w) if rho < 1 else 0)

    def solve(self, A, b):
        cp = self.cp
        planes = self.xi >= A @ self.w + b
        prob = cp.Problem(cp.Minimize(self.reg + self.C * self.xi), self.base + [planes])
        try:
            prob.solve(solver=cp.CLARABEL, tol_gap_abs=_CLARABEL_TOL, tol_gap_rel=_CLARABEL_TOL,
                       tol_feas=_CLARABEL_TOL)
        except cp.error.SolverError:
            return None, np.zeros(b.size), -np.inf
        if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or self.w.value is None:
            return None, np.zeros(b.size), -np.inf
        theta = np.maximum(np.asarray(planes.dual_value, dtype=np.float64).reshape(-1), 0.0)
        bound = float(prob.value) if prob.status == cp.OPTIMAL else -np.inf
        return np.array(self.w.value, dtype=np.float64), theta, bound


# --------------------------------------------------------------------------- solver
def solve_constrained_hinge(X, pairs_i, pairs_j, pair_weights, C, *, feasible=None, margin=1.0,
                            method="cutting_plane", w0=None, warm_points=None, tol=1e-6, max_iter=1000,
                            verbose=False) -> ConstrainedResult:
    """Minimise ``R(w) + C sum_p c_p max(0, margin - (x_{i_p} - x_{j_p}).w)`` over a feasible set.

    Parameters
    ----------
    X, pairs_i, pairs_j, pair_weights, C, margin
        As :func:`~counterfactual_ltr.solvers.solve_pairwise_hinge`.
    feasible : FeasibleSet, optional
        From :func:`feasible_set` (bounds, monotone signs, penalty, user
        constraints). Default: unconstrained L2.
    method : {"cutting_plane", "cvxpy"}
        The cutting-plane method (see the module docstring) or the whole
        problem through cvxpy with one slack per pair (small problems only).
    w0 : (d,) array, optional
        Warm start (projected onto the box).
    warm_points : (k, d) array, optional
        Points whose planes, re-evaluated under these pair weights, start the
        model (``support_points`` of a previous result).
    tol : float
        Relative duality gap at which to stop.
    max_iter : int
        Cutting-plane iterations before a ``ConvergenceWarning``.
    verbose : bool, default False
        Print one line per iteration.

    Returns
    -------
    ConstrainedResult
        ``coef`` feasible (box constraints exactly, user constraints to the
        cvxpy solver's 1e-10), ``objective`` its exact value, ``gap`` the
        certified gap (see the module docstring for user constraints).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(6, 3))
    >>> fs = feasible_set(3, monotone_constraints=[1, 1, 0], penalty="l1")
    >>> res = solve_constrained_hinge(X, [0, 0, 1, 3], [1, 2, 2, 4], [1.0, 2.0, 1.0, 0.5], 1.0, feasible=fs)
    >>> res.converged, bool(res.coef[:2].min() >= 0)
    (True, True)
    """
    C = check_C(C)
    X = check_X(X)
    n, d = X.shape
    i, j, c = check_pairs(pairs_i, pairs_j, pair_weights, n)
    margin = float(margin)
    if not np.isfinite(margin):
        raise ValueError(f"margin must be finite, got {margin}")
    tol, max_iter = check_tol(tol), check_max_iter(max_iter)
    fs = feasible if feasible is not None else feasible_set(d)
    if not isinstance(fs, FeasibleSet) or fs.n_features != d:
        raise ValueError(f"feasible must be a FeasibleSet for {d} features (see feasible_set)")
    if method not in ("cutting_plane", "cvxpy"):
        raise ValueError(f'method must be "cutting_plane" or "cvxpy", got {method!r}')
    w = fs.project(np.zeros(d) if w0 is None else check_finite_1d(w0, "w0", d))
    keep = c > 0
    if not keep.all():
        i, j, c = i[keep], j[keep], c[keep]
    if method == "cvxpy":
        return _solve_cvxpy(X, i, j, c, C, margin, fs, tol)
    if warm_points is not None:
        warm_points = np.asarray(warm_points, dtype=np.float64).reshape(-1, d)
    return _cutting_plane(X, i, j, c, C, margin, fs, w, warm_points, tol, max_iter, verbose)


def _cutting_plane(X, i, j, c, C, margin, fs, w, warm_points, tol, max_iter, verbose):
    n, d = X.shape
    rho = fs.l1_ratio
    Cc = C * c
    master = _BoxMaster(fs, C) if fs.is_box else _CvxpyMaster(fs, C)

    # The plane L >= 0 (row 0) keeps the master bounded from the first iteration.
    A, b, pts = np.zeros((1, d)), np.zeros(1), np.zeros((1, d))

    def add_plane(point, z):
        """Plane of ``L`` at ``point`` from its hinge arguments ``z``; returns ``L(point)``."""
        nonlocal A, b, pts
        viol = z > 0
        L = float(np.dot(c[viol], z[viol]))
        g = -(X.T @ aggregate_pairs(i[viol], j[viol], c[viol], n))
        A = np.vstack([A, g])
        b = np.append(b, L - float(g @ point))
        pts = np.vstack([pts, point])
        return L

    def hinge_args(point):
        s = X @ point
        return margin - (s[i] - s[j])

    for p in ([] if warm_points is None else warm_points):
        add_plane(p, hinge_args(p))
    best_w, z_best = w, hinge_args(w)
    best_P = _penalty(w, rho) + C * add_plane(w, z_best)
    idle = np.zeros(b.size, dtype=np.int64)
    best_D, history, converged, it = -np.inf, [], False, 0
    theta = np.zeros(b.size)
    while True:
        if fs.is_box:
            w_c, theta = master.solve(A, b)
            D = _lower_bound(theta, A, b, C, fs)
        else:
            w_c, theta, D = master.solve(A, b)
        best_D = max(best_D, D)
        if cutting_plane_record("solve_constrained_hinge", it, b.size, best_P, best_D, history, tol, verbose):
            converged = True
            break
        it += 1
        if it >= max_iter or w_c is None:
            break
        # OCAS step: exact line search from the best point towards the master solution, then a
        # plane near the new best point. Along w + t u the hinge arguments are z - t delta, so
        # one product X u serves the line search, the new best point and the plane.
        u = w_c - best_w
        su = X @ u
        delta = su[i] - su[j]
        t = _exact_line_search(best_w, u, z_best, delta, Cc, rho)
        base_w, base_z = best_w, z_best
        if t > 0:
            cand, z_cand = best_w + t * u, z_best - t * delta
            P_cand = _penalty(cand, rho) + float(np.dot(Cc, np.maximum(z_cand, 0.0)))
            if P_cand < best_P:
                best_P, best_w, z_best = P_cand, cand, z_cand
        tau = t + _OCAS_MU * (1.0 - t)            # the cut point, on the same segment
        cut, z_cut = base_w + tau * u, base_z - tau * delta
        P_cut = _penalty(cut, rho) + C * add_plane(cut, z_cut)
        if P_cut < best_P:
            best_P, best_w, z_best = P_cut, cut, z_cut
        # Keep the master small: planes idle for long leave (never the plane L >= 0).
        idle = np.append(np.where(theta > 0, 0, idle + 1), 0)
        drop = idle >= _IDLE_PLANES
        drop[0] = False
        if drop.any():
            A, b, pts, idle = A[~drop], b[~drop], pts[~drop], idle[~drop]
    support = pts[1:theta.size][theta[1:] > 0] if theta.size > 1 else np.empty((0, d))
    # Points on segments between feasible points: projecting only removes rounding; the reported
    # objective is recomputed from scratch at the returned point.
    if fs.is_box:
        best_w = fs.project(best_w)
    objective = lambda v: _penalty(v, rho) + float(np.dot(Cc, np.maximum(hinge_args(v), 0.0)))  # noqa: E731
    P = objective(best_w)
    if rho > 0:
        # A sparse model should have exact zeros: the best point is a mix of master solutions, so
        # weights that are zero at the optimum may be tiny instead. Zero them when the result is
        # still certified to the tolerance (and feasible: 0 inside the box).
        tiny = (np.abs(best_w) <= _SPARSE_ROUNDING * np.abs(best_w).max()) & (best_w != 0)
        tiny &= (fs.lower <= 0) & (fs.upper >= 0)
        if tiny.any() and fs.is_box:
            sparse = np.where(tiny, 0.0, best_w)
            P_sparse = objective(sparse)
            if P_sparse - best_D <= tol * max(1.0, abs(P_sparse)) or P_sparse <= P:
                best_w, P = sparse, P_sparse
    converged = converged and P - best_D <= tol * max(1.0, abs(P))
    result = make_result("solve_constrained_hinge", best_w, P, best_D, it, converged, history, tol)
    return ConstrainedResult(**vars(result), support_points=support)


def _solve_cvxpy(X, i, j, c, C, margin, fs, tol):
    """The whole problem in cvxpy, one slack per pair (Clarabel); a reference for small problems."""
    import cvxpy as cp

    d = X.shape[1]
    w = cp.Variable(d)
    xi = cp.Variable(i.size, nonneg=True)
    rho = fs.l1_ratio
    reg = (rho * cp.norm1(w) if rho > 0 else 0) + (0.5 * (1.0 - rho) * cp.sum_squares(w) if rho < 1 else 0)
    cons = [xi >= margin - (X[i] - X[j]) @ w] + _box_constraints(w, fs)
    if fs.constraints is not None:
        cons += _user_constraints(fs, w)
    prob = cp.Problem(cp.Minimize(reg + C * (c @ xi)), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=_CLARABEL_TOL, tol_gap_rel=_CLARABEL_TOL, tol_feas=_CLARABEL_TOL)
    if w.value is None:
        raise ValueError(f"cvxpy could not solve the problem (status {prob.status})")
    coef = np.array(w.value, dtype=np.float64)
    if fs.is_box:
        coef = fs.project(coef)
    s = X @ coef
    P = _penalty(coef, rho) + C * float(np.dot(c, np.maximum(margin - (s[i] - s[j]), 0.0)))
    D = float(prob.value) if prob.status == cp.OPTIMAL else -np.inf
    ok = prob.status == cp.OPTIMAL and P - D <= tol * max(1.0, abs(P))
    result = make_result("solve_constrained_hinge", coef, P, min(D, P), 1, ok, [(P, D)], tol)
    return ConstrainedResult(**vars(result), support_points=np.empty((0, d)))
