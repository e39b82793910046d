"""What every solver of the toolkit shares: the result, the checks of its inputs, pair aggregation.

:func:`~counterfactual_ltr.solvers.solve_pairwise_hinge`, the bundle method and the constrained
solvers of :mod:`counterfactual_ltr.solvers.constrained` validate their inputs the same way, aggregate
pair values per document the same way and report a :class:`SolverResult`, so they share these.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from . import hessian_free as _hf
from .._docs import fill_doc
from .._segments import check_finite_1d
from .._validation import check_int, check_real

__all__ = ["SolverResult", "make_result", "aggregate_pairs", "check_C", "check_X", "check_pairs", "check_pair_index",
           "check_w0", "check_max_iter", "check_tol", "MAX_WEIGHT_BOUND", "bracket_step", "slope_line_search",
           "cutting_plane_record"]

# Sections the solvers' docstrings share: a ``{name, ...}`` line is filled from it at import.
DOCS = {
    "returns_result": "Returns\n-------\nSolverResult",
    "newton_stop": "tol : float\n    Relative duality gap at which to stop.\n"
                   "max_iter : int\n    Newton iterations at most.\n"
                   "verbose : bool\n    Print one line per iteration.",
    "w": "Parameters\n----------\nw : array (n_features,)\n    The weights.",
}
doc = fill_doc(DOCS)

# Above this bound on the norm of the weights, squares of weights and objective values leave
# float64's range: no meaningful solution exists.
MAX_WEIGHT_BOUND = 1e100


@dataclass
class SolverResult:
    """Outcome of a solver.

    ``objective`` is the exact primal value at ``coef``; ``dual_objective`` a
    certified lower bound of the optimum; ``gap = objective - dual_objective >= 0``
    bounds the sub-optimality of ``coef``. ``history`` holds one
    ``(objective, dual_objective)`` row per iteration.

    Parameters
    ----------
    coef : array (n_features,)
        The weights returned (the best point found).
    objective, dual_objective, gap : float
        Exact primal value at ``coef``, the best certified lower bound, their difference.
    n_iter : int
        Iterations taken.
    converged : bool
        The relative gap met the tolerance asked.
    history : array (n_iter, 2)
        ``(objective, dual_objective)`` of the best points after every iteration.
    method : str
        The path taken: ``"newton"`` (dense Hessian), ``"newton_cg"`` (Hessian-free,
        see :mod:`counterfactual_ltr.solvers.hessian_free`) or ``"bmrm"``.
    stalled : bool
        Stopped, as asked by ``min_decrease``, because a Newton step lowered the
        objective by less than that after the solve had lowered it by at least that
        (``converged`` is then False; ``gap`` still bounds the sub-optimality).

    Examples
    --------
    >>> import numpy as np
    >>> r = SolverResult(np.zeros(2), objective=1.0, dual_objective=0.9, gap=0.1, n_iter=3, converged=False)
    >>> r.gap, r.converged
    (0.1, False)
    """

    coef: np.ndarray
    objective: float
    dual_objective: float
    gap: float
    n_iter: int
    converged: bool
    history: np.ndarray = field(default_factory=lambda: np.empty((0, 2)), repr=False)
    method: str = "newton"
    stalled: bool = False


@doc
def make_result(name, w, P, D, n_iter, converged, history, tol, method="newton", stalled=False, stacklevel=3):
    """The :class:`SolverResult` of a solve ending at ``w``, warning if it neither converged nor stalled.

    Parameters
    ----------
    name : str
        The solver, for the warning.
    w : array (n_features,)
        The weights to return.
    P, D : float
        Exact primal value at ``w`` and the best dual value (a lower bound of the optimum).
    n_iter : int
        Iterations taken.
    converged : bool
        Whether the solve met its tolerance.
    history : list of (P, D)
        Best primal and dual values after every iteration.
    tol : float
        The relative gap that was asked (for the warning).
    method : str, default "newton"
        The path taken (see :class:`SolverResult`).
    stalled : bool, default False
        Stopped on purpose (``min_decrease``): no warning.
    stacklevel : int, default 3
        As in :func:`warnings.warn`, counted from the caller of this function.

    {returns_result}

    Examples
    --------
    >>> import numpy as np
    >>> make_result("demo", np.zeros(2), 1.0, 0.99, 5, True, [(1.0, 0.99)], 1e-2).gap
    0.01...
    """
    gap = max(P - D, 0.0)
    if not converged and not stalled:
        warnings.warn(f"{name} stopped after {n_iter} iterations with duality gap {gap:.3g} "
                      f"(relative {gap / max(1.0, abs(P)):.3g} > tol={tol:g})", ConvergenceWarning,
                      stacklevel=stacklevel)
    return SolverResult(coef=w, objective=float(P), dual_objective=float(P - gap), gap=float(gap),
                        n_iter=int(n_iter), converged=bool(converged),
                        history=np.asarray(history, dtype=np.float64).reshape(-1, 2), method=method,
                        stalled=bool(stalled))


def aggregate_pairs(i, j, a, n_docs):
    """Per-document sum of pair values: ``+a`` on the first row of a pair, ``-a`` on the second.

    Parameters
    ----------
    i, j : int arrays (n_pairs,)
        The two rows of every pair.
    a : array (n_pairs,)
        One value per pair.
    n_docs : int
        Rows of ``X`` (length of the result).

    Returns
    -------
    array (n_docs,)

    Examples
    --------
    >>> import numpy as np
    >>> aggregate_pairs(np.array([0, 0]), np.array([1, 2]), np.array([1.0, 2.0]), 3).tolist()
    [3.0, -1.0, -2.0]
    """
    return np.bincount(i, a, minlength=n_docs) - np.bincount(j, a, minlength=n_docs)


def bracket_step(t, f1, f2, lo, hi):
    """One step of the line searches' safeguarded 1-D Newton on an increasing derivative.

    The root of ``f(t)`` (the derivative of a convex objective along a direction) lies in
    ``[lo, hi]``; ``f1 = f(t)`` and ``f2 = f'(t)`` narrow the bracket and give the next trial,
    the Newton step where it falls inside the bracket, else doubling (no upper end yet) or
    bisection.

    Parameters
    ----------
    t : float
        The trial step just evaluated.
    f1, f2 : float
        The derivative and its slope at ``t``.
    lo, hi : float
        The bracket before the evaluation (``hi = inf``: no upper end yet).

    Returns
    -------
    lo, hi : float
        The narrowed bracket.
    t_next : float
        The next trial step.
    collapsed : bool
        The bracket is narrower than float64 resolution (stop).

    Examples
    --------
    >>> bracket_step(1.0, 2.0, 1.0, 0.0, float("inf"))   # f(1) > 0; the Newton step -1 is outside: bisect
    (0.0, 1.0, 0.5, False)
    """
    if f1 < 0:
        lo = t
    else:
        hi = t
    nt = t - f1 / f2 if f2 > 0 else np.inf
    if not lo < nt < hi:
        nt = 2.0 * t if hi == np.inf else 0.5 * (lo + hi)
    return lo, hi, nt, hi - lo <= 1e-13 * hi


def slope_line_search(slope, f0, rtol, t0=1.0, max_eval=30):
    """Step ``t >= 0`` where the derivative ``slope(t)[0]`` of a convex function falls to ``rtol |f0|``.

    Safeguarded 1-D Newton (:func:`bracket_step`) on the derivative; for searches whose every
    evaluation is costly (a round trip to a cluster's partitions), ``rtol = 0.1`` is a strong
    Wolfe condition, enough for Newton.

    Parameters
    ----------
    slope : callable
        ``t -> (f(t), f'(t))``, the derivative along the direction and its slope.
    f0 : float
        ``f(0)``; not negative means no descent direction (0 is returned).
    rtol : float
        Stop at ``|f(t)| <= rtol |f0|``.
    t0 : float, default 1
        The first trial (the Newton step).
    max_eval : int, default 30
        Evaluations at most.

    Returns
    -------
    float
        The step (the bracket's lower end where the search ran out).

    Examples
    --------
    >>> round(slope_line_search(lambda t: (4.0 * t - 3.0, 4.0), -3.0, 1e-12), 12)   # minimiser of 2 t^2 - 3 t
    0.75
    """
    if not f0 < 0:                               # not a descent direction (numerically)
        return 0.0
    lo, hi, t = 0.0, np.inf, t0
    for _ in range(max_eval):
        f1, f2 = slope(t)
        if abs(f1) <= rtol * -f0:
            return t
        lo, hi, nt, collapsed = bracket_step(t, f1, f2, lo, hi)
        if collapsed:
            break
        t = nt
    return lo if lo > 0 else t


def cutting_plane_record(name, it, n_planes, best_P, best_D, history, tol, verbose) -> bool:
    """Record a cutting-plane iteration (history, the verbose line); True when the relative gap meets ``tol``.

    Parameters
    ----------
    name : str
        The solver, for the verbose line.
    it, n_planes : int
        The iteration and the number of cutting planes.
    best_P, best_D : float
        Best primal and dual values so far.
    history : list
        Appended ``(best_P, best_D)``.
    tol : float
        Relative duality gap at which to stop.
    verbose : bool
        Print one line.

    Returns
    -------
    bool

    Examples
    --------
    >>> history = []
    >>> cutting_plane_record("demo", 0, 1, 1.0, 0.5, history, 1e-6, False), history
    (False, [(1.0, 0.5)])
    """
    history.append((best_P, best_D))
    gap = best_P - best_D
    if verbose:
        print(f"[{name}] it={it:3d} planes={n_planes} P={best_P:.10g} D={best_D:.10g} "
              f"rel gap={gap / max(1.0, abs(best_P)):.2e}")
    return gap <= tol * max(1.0, abs(best_P))

def check_C(C) -> float:
    """The regularisation weight ``C``: a real number > 0.

    Parameters
    ----------
    C : real
        The weight of the loss against the regulariser.

    Returns
    -------
    float

    Examples
    --------
    >>> check_C(2)
    2.0
    """
    return check_real(C, "C", min_value=0.0, include_min=False)


def check_X(X):
    """A dense ``X`` as a finite float64 2-D array, a sparse one as a finite float64 CSR matrix.

    Parameters
    ----------
    X : array-like (n_docs, n_features) or scipy.sparse matrix
        The feature matrix.

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix

    Raises
    ------
    ValueError
        Not 2-D, or a non-finite value (named with its row and column).

    Examples
    --------
    >>> check_X([[1, 2], [3, 4]]).dtype
    dtype('float64')
    >>> check_X([[1.0, float("nan")]])
    Traceback (most recent call last):
    ...
    ValueError: X holds a non-finite value (nan) at row 0, column 1
    """
    if _hf.is_sparse(X):
        return _hf.check_sparse_X(X)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_docs, n_features), got shape {X.shape}")
    # Row blocks bound the temporary boolean array on very large X.
    step = max(1, (1 << 22) // max(X.shape[1], 1))
    for start in range(0, X.shape[0], step):
        block = X[start:start + step]
        if not np.isfinite(block).all():
            r, c = np.argwhere(~np.isfinite(block))[0]
            raise ValueError(f"X holds a non-finite value ({block[r, c]}) at row {start + r}, column {c}")
    return X


def check_pairs(pairs_i, pairs_j, pair_weights, n_docs: int):
    """``(i, j, c)``: pairs as row indices of ``X`` with finite weights ``>= 0``, one of each per pair.

    Parameters
    ----------
    pairs_i, pairs_j : array-like of int (n_pairs,)
        The preferred and the other row of every pair.
    pair_weights : array-like (n_pairs,)
        ``c_p``, finite and ``>= 0``.
    n_docs : int
        Rows of ``X``.

    Returns
    -------
    tuple of arrays ``(i, j, c)``

    Raises
    ------
    ValueError
        Mismatched lengths, indices out of range or not integers, weights not finite or negative.

    Examples
    --------
    >>> i, j, c = check_pairs([0, 1], [2, 2], [1, 0.5], 3)
    >>> i.tolist(), j.tolist(), c.tolist()
    ([0, 1], [2, 2], [1.0, 0.5])
    >>> check_pairs([0, 1], [2, 2], [1, -0.5], 3)
    Traceback (most recent call last):
    ...
    ValueError: pair_weights must be >= 0, got -0.5 at index 1
    """
    c = check_finite_1d(pair_weights, "pair_weights")
    i = check_pair_index(pairs_i, "pairs_i", n_docs, c.shape[0])
    j = check_pair_index(pairs_j, "pairs_j", n_docs, c.shape[0])
    if c.size and c.min() < 0:
        k = int(np.argmin(c))
        raise ValueError(f"pair_weights must be >= 0, got {c[k]} at index {k}")
    return i, j, c


def check_pair_index(idx, name: str, n_docs: int, n: int | None) -> np.ndarray:
    """Row indices of one side of the pairs (``name``): 1-D integers in ``[0, n_docs)``, ``n`` of them.

    Parameters
    ----------
    idx : array-like of int
        The row indices.
    name : str
        The parameter's name, for the messages.
    n_docs : int
        Rows of ``X``.
    n : int or None
        The number of pairs (None: any).

    Returns
    -------
    int64 array

    Examples
    --------
    >>> check_pair_index([0, 2], "pairs_i", 3, 2).tolist()
    [0, 2]
    >>> check_pair_index([0, 3], "pairs_i", 3, 2)
    Traceback (most recent call last):
    ...
    ValueError: pairs_i[1] = 3 is out of range for X with 3 rows
    """
    arr = np.asarray(idx)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has length {arr.shape[0]}, expected {n} (mismatched lengths)")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if arr.dtype == bool or not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integer row indices")
    arr = arr.astype(np.int64)
    bad = np.flatnonzero((arr < 0) | (arr >= n_docs))
    if bad.size:
        raise ValueError(f"{name}[{bad[0]}] = {arr[bad[0]]} is out of range for X with {n_docs} rows")
    return arr


def check_w0(w0, d: int) -> np.ndarray:
    """The warm start as a fresh float64 array of ``d`` finite values (zeros when None).

    Parameters
    ----------
    w0 : array-like (d,) or None
        The warm start, if any.
    d : int
        Number of features.

    Returns
    -------
    array (d,)

    Examples
    --------
    >>> check_w0(None, 2).tolist(), check_w0([1, 2], 2).tolist()
    ([0.0, 0.0], [1.0, 2.0])
    """
    if w0 is None:
        return np.zeros(d)
    w0 = check_finite_1d(w0, "w0", d)
    return np.array(w0, dtype=np.float64)


def check_max_iter(max_iter) -> int:
    """The iteration limit: a whole number >= 1.

    Parameters
    ----------
    max_iter : int
        Iterations at most.

    Returns
    -------
    int

    Examples
    --------
    >>> check_max_iter(10.0)
    10
    """
    return check_int(max_iter, "max_iter", min_value=1)


def check_tol(tol) -> float:
    """The relative duality gap asked: a real number >= 0.

    Parameters
    ----------
    tol : real
        Relative duality gap at which to stop.

    Returns
    -------
    float

    Examples
    --------
    >>> check_tol(1e-6)
    1e-06
    """
    return check_real(tol, "tol", min_value=0.0)
