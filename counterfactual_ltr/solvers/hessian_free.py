"""Hessian-free Newton steps and sparse feature matrices for :func:`~counterfactual_ltr.solvers.solve_pairwise_hinge`.

The solver's Newton system on the smoothed hinge is
``H u = -grad`` with ``H = I + X^T L X``, ``L`` the Laplacian of the pairs in
the smoothing band weighted ``C c_p / mu``. The dense path forms ``H``
(``2 n d^2`` flops and ``d^2`` memory per iteration). Here ``H`` is only ever
applied to a vector, ``H v = v + X^T (L (X v))``: two products with ``X``
(cost: its non-zeros) and one pass over the band pairs (explicit index arrays,
or sorted positions for :class:`~counterfactual_ltr.surrogates.implicit_pairs.ClickPairs`),
so an iteration costs ``O(nnz(X) + pairs)`` per conjugate-gradient step
and nothing grows like ``d^2``. The system is solved by preconditioned
conjugate gradients (Jacobi preconditioner ``1 + (X o X)^T deg(L)``, the
diagonal of ``H`` up to the pairs' cross terms) to a relative residual of
:data:`CG_RTOL` -- an inexact (truncated) Newton step; the solver's exact line
search and its duality-gap certificate are unchanged, so the result means
the same as on the dense path. This is the Newton-CG / TRON family of
LIBLINEAR (Lin, Weng & Keerthi 2008) applied to the smoothed hinge of the
continuation.

Chosen by ``method="auto"`` when ``X`` is a scipy.sparse matrix or has more
than :data:`DENSE_MAX_FEATURES` columns; ``method="newton"`` /
``"newton_cg"`` force either path (a sparse ``X`` on the dense path is
densified). The choice is recorded in ``SolverResult.method``.

The helpers for sparse ``X`` (checks, row norms, pair norms) let the rest of
the solver -- objective, dual point, screening -- run on CSR input as on
dense input.

Details that decide the speed (measurements: ``docs/solver-notes.md``):

* Late smoothing levels have few rows in the band: the products run on those
  rows only.
* CG's tolerance (forcing term) is ``min(0.1, sqrt(smoothed gap / |P|))``: a
  fixed 0.1 stalls at tight tolerances on ill-conditioned problems.
* A small CSR ``X`` with many non-zeros (at most 4M values, >= 10 % non-zero)
  is multiplied as a transient dense copy: scipy's per-call overhead exceeds
  the flops there.
* Screening uses the row-norm bound only: exact pair norms, one pass over every
  undecided pair's rows, cost more than the pairs they screen.
* At ``d <= DENSE_MAX_FEATURES`` a solve hands over to the explicit Hessian
  once a CG solve needs more than ``max(10, d / 8)`` steps: the propensity
  problems at large C need many CG steps per Newton step, and one Hessian
  (a BLAS-3 product) is then cheaper than those matrix-vector products.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["choose_method", "newton_cg_direction", "pcg", "cg_or_descent", "METHODS", "DENSE_MAX_FEATURES", "CG_RTOL"]

#: Names accepted by ``solve_pairwise_hinge(method=...)``.
METHODS = ("auto", "newton", "newton_cg")

#: Above this many features a dense ``d x d`` Hessian per iteration costs more than the
#: conjugate-gradient steps (one Hessian is ~``d / 2`` products with ``X``).
DENSE_MAX_FEATURES = 2000

#: Relative residual of the conjugate-gradient solve of every Newton system.
CG_RTOL = 0.1

#: Exponent of the default forcing term (1: quadratic, 0.5: superlinear local convergence).
FORCING_POWER = 1.0

#: CG "fails" above this relative residual (rounding on an ill-conditioned system).
FAIL_RESIDUAL = 0.5

#: Products with X run on the band's rows only when they are fewer than this share of the rows.
_RESTRICT_SHARE = 0.7

#: A sparse block of rows is multiplied densely inside CG when at least this share of it is
#: non-zero and it holds at most this many values (32 MiB).
_DENSE_BLOCK_DENSITY, _DENSE_BLOCK_VALUES = 0.1, 1 << 22

#: CG steps per Newton system before a solve switches to the explicit Hessian (d <= DENSE_MAX_FEATURES):
#: ``max(SWITCH_MIN_STEPS, d // SWITCH_DIVISOR)``. A Hessian is ~d/2 products with X but runs as
#: BLAS-3, several times faster per flop than CG's matrix-vector products.
SWITCH_MIN_STEPS, SWITCH_DIVISOR = 10, 8

#: Upper bound on conjugate-gradient steps per Newton system (never more than ``d``).
CG_MAX_ITER = 200


def is_sparse(X) -> bool:
    return sp.issparse(X)


def choose_method(X, method: str) -> str:
    """``"newton"`` (dense Hessian) or ``"newton_cg"`` (Hessian-free) for ``X`` under ``method``.

    Parameters
    ----------
    X : array or scipy.sparse matrix (n, d)
        The feature matrix.
    method : {"auto", "newton", "newton_cg"}
        ``"auto"``: Hessian-free for a sparse ``X`` or ``d > DENSE_MAX_FEATURES``.

    Returns
    -------
    str

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> choose_method(np.ones((3, 4)), "auto"), choose_method(sp.eye(3, format="csr"), "auto")
    ('newton', 'newton_cg')
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method != "auto":
        return method
    return "newton_cg" if is_sparse(X) or np.shape(X)[1] > DENSE_MAX_FEATURES else "newton"


def check_sparse_X(X) -> sp.csr_matrix:
    """``X`` as a float64 CSR matrix with finite values (``ValueError`` naming row and column otherwise)."""
    from ..datasets import checked_csr

    return checked_csr(X)


def centered_row_norms(X, sample_rows=4096, chunk_bytes=1 << 22) -> np.ndarray:
    """Upper bounds on ``||x_r - m||`` for every row (dense or sparse ``X``), ``m`` one fixed centre.

    Any ``m`` gives ``||x_i - x_j|| <= ||x_i - m|| + ||x_j - m||``; the mean of at most
    ``sample_rows`` evenly spaced rows is a good one without a pass over ``X``. Dense
    rows are centred block by block, one pass in all; sparse ones (never centred, that
    would fill them) from ``||x||^2 - 2 x.m + ||m||^2``, with a slack for the rounding
    of that difference.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [2.0, 0.0], [4.0, 0.0]])
    >>> centered_row_norms(X).round(9).tolist()           # m = (2, 0), plus a 1e-12 slack
    [2.0, 0.0, 2.0]
    """
    n, d = X.shape
    if n == 0:
        return np.zeros(0)
    m = np.asarray(X[::max(1, n // sample_rows)].mean(axis=0)).ravel()
    if is_sparse(X):
        sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        return np.sqrt(np.maximum(sq - 2.0 * (X @ m) + float(m @ m), 0.0)) + 1e-7 * np.sqrt(sq + float(m @ m))
    out = np.empty(n)
    step = max(1, chunk_bytes // (8 * max(d, 1)))
    for start in range(0, n, step):
        block = X[start:start + step] - m
        out[start:start + step] = np.sqrt(np.einsum("ij,ij->i", block, block))
    return out * (1.0 + 1e-12)


def pair_norms(X, i, j, chunk_bytes=1 << 21) -> np.ndarray:
    """``||x_i - x_j||`` per pair, in cache-sized row blocks (dense or sparse ``X``)."""
    out = np.empty(i.size)
    width = X.shape[1] if not is_sparse(X) else max(1, X.nnz // max(X.shape[0], 1))
    step = max(1, chunk_bytes // (8 * max(width, 1)))
    for start in range(0, i.size, step):
        diff = X[i[start:start + step]] - X[j[start:start + step]]
        if is_sparse(diff):
            out[start:start + step] = np.sqrt(np.asarray(diff.multiply(diff).sum(axis=1)).ravel())
        else:
            out[start:start + step] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    return out


def squared(X):
    """``X o X`` (kept for the Jacobi preconditioner of a whole solve)."""
    return X.multiply(X).tocsr() if is_sparse(X) else X * X


# --------------------------------------------------------------------------- band Laplacians
def explicit_band(ib, jb, h, n):
    """``(apply, degree)`` of ``L = sum_b h_b (e_i - e_j)(e_i - e_j)^T`` over explicit band pairs."""
    def apply(v):
        t = h * (v[ib] - v[jb])
        return np.bincount(ib, t, minlength=n) - np.bincount(jb, t, minlength=n)

    degree = np.bincount(ib, h, minlength=n) + np.bincount(jb, h, minlength=n)
    return apply, degree


def implicit_band(ev):
    """``(apply, degree)`` of the band Laplacian of a :class:`~counterfactual_ltr.surrogates.implicit_pairs._Smoothed`."""
    srt, lo, hi, n = ev.sorted, ev.lo, ev.hi, ev.n
    h = ev.Cc / ev.mu
    cover = np.cumsum(np.bincount(lo, h, minlength=n + 1) - np.bincount(hi, h, minlength=n + 1))[:n]
    degree = np.bincount(srt.pairs.anchors, h * (hi - lo), minlength=n).astype(np.float64)
    degree[srt.order] += cover
    return ev.laplacian, degree


def dense_band_hessian(X, ib, jb, h):
    """``X^T L X`` as a dense ``d x d`` array for a sparse ``X`` (the fallback of a failed CG solve)."""
    D = (X[ib] - X[jb]).tocsr()
    return np.asarray((D.T @ D.multiply(h[:, None]).tocsr()).todense())


def forcing(smooth_gap, objective) -> float:
    """CG's relative residual for one Newton system: ``min(CG_RTOL, sqrt(smoothed gap / max(1, |P|)))``.

    Loose far from the smoothed optimum, tightening as Newton converges on a
    smoothing level (the smoothed problem's own duality gap measures that, free of
    the scale of ``C``), so Newton's fast local convergence is kept; a fixed 0.1
    stalls at tight tolerances on ill-conditioned problems.
    """
    return min(CG_RTOL, float(np.sqrt(max(smooth_gap, 0.0) / max(1.0, abs(objective)))))


# --------------------------------------------------------------------------- Newton-CG
class Products:
    """``X`` with what every Newton system of one solve reuses.

    ``X o X`` (the preconditioner) is formed once. A block of rows of a sparse
    ``X`` whose products are cheaper dense (at least ``_DENSE_BLOCK_DENSITY``
    non-zero and at most ``_DENSE_BLOCK_VALUES`` values: scipy's per-product
    overhead then exceeds the flops) is densified for the CG products.

    At ``d <= DENSE_MAX_FEATURES`` a CG solve may take at most
    ``max(SWITCH_MIN_STEPS, d // SWITCH_DIVISOR)`` steps: beyond that an explicit
    ``d x d`` Hessian (one BLAS-3 product) is cheaper than the matrix-vector steps,
    so the solve switches to it for its remaining iterations (``switched``; the
    result's method is then ``"newton_cg+newton"``).
    """

    def __init__(self, X):
        self.X = X
        self._X2 = None
        d = X.shape[1]
        self.cap = max(SWITCH_MIN_STEPS, d // SWITCH_DIVISOR) if d <= DENSE_MAX_FEATURES else None
        self.switched = False

    @property
    def X2(self):
        if self._X2 is None:
            self._X2 = squared(self.X)
        return self._X2

    def block(self, rows=None):
        """``(X_rows, X2_rows)`` for the CG products (all rows when ``rows`` is None)."""
        X, X2 = (self.X, self.X2) if rows is None else (self.X[rows], self.X2[rows])
        if is_sparse(X) and dense_pays(X):
            return X.toarray(), X2
        return X, X2


def taken(method: str, ops) -> str:
    """The path a solve took: ``method``, or ``"newton_cg+newton"`` when CG handed over to the Hessian."""
    return "newton_cg+newton" if ops is not None and ops.switched else method


def dense_pays(X) -> bool:
    """Whether products with the sparse ``X`` are cheaper through a dense copy (small, many non-zeros)."""
    n, d = X.shape
    return X.nnz >= _DENSE_BLOCK_DENSITY * n * d and n * d <= _DENSE_BLOCK_VALUES


def newton_cg_direction(X, grad, laplacian, degree, rtol=None, max_iter=CG_MAX_ITER, w=None):
    """``(u, steps)``: ``u ~ -H^{-1} grad`` for ``H = I + X^T L X`` by preconditioned conjugate gradients.

    Parameters
    ----------
    X : (n, d) array, sparse matrix or :class:`Products`
        The features (a :class:`Products` keeps ``X o X`` and dense blocks over a solve).
    grad : (d,) array
        Gradient of the smoothed objective.
    laplacian : callable
        ``v -> L v`` for a length-``n`` vector.
    degree : (n,) array
        Diagonal of ``L`` (for the preconditioner).
    rtol : float, optional
        Relative residual ``||H u + grad|| <= rtol ||grad||`` at which CG stops. By default
        ``min(CG_RTOL, (||grad|| / max(1, ||w||))^FORCING_POWER)``: loose far from the optimum, tightening
        as the gradient vanishes so that Newton's fast local convergence is kept (a fixed 0.1 stalls at
        tight tolerances on ill-conditioned problems).
    max_iter : int
        Largest number of CG steps.
    w : (d,) array, optional
        The current iterate (scale of the default ``rtol``).

    Returns
    -------
    u : (d,) array or None
        A descent direction; None when CG did not reach ``rtol`` (rounding on a very
        ill-conditioned system) and ``d <= DENSE_MAX_FEATURES``: then the caller solves
        with the explicit Hessian (:func:`dense_band_hessian`). Above that ``d`` the
        inexact CG step (or, if its residual exceeds half of ``||grad||``, the
        preconditioned gradient) is returned.
    steps : int
        Conjugate-gradient steps taken (products with ``H``).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    >>> apply, degree = explicit_band(np.array([0, 1]), np.array([2, 2]), np.array([3.0, 1.0]), 3)
    >>> grad = np.array([1.0, -1.0])
    >>> u, steps = newton_cg_direction(X, grad, apply, degree, rtol=1e-12)
    >>> H = np.eye(2) + X.T @ (np.diag(degree) - np.array([[0, 0, 3], [0, 0, 1], [3, 1, 0]])) @ X
    >>> bool(np.allclose(u, -np.linalg.solve(H, grad)))
    True
    """
    ops = X if isinstance(X, Products) else Products(X)
    if ops.switched:
        return None, 0
    d = grad.shape[0]
    n = ops.X.shape[0]
    rows = np.flatnonzero(degree)
    if rows.size < _RESTRICT_SHARE * n:
        # Late smoothing levels: few rows touch a band pair and L is zero elsewhere, so the
        # products run on those rows of X only (a gather of their non-zeros, once per system).
        full = np.zeros(n)
        (X, X2), degree, whole = ops.block(rows), degree[rows], laplacian

        def laplacian(v):
            full[rows] = v
            return whole(full)[rows]
    else:
        X, X2 = ops.block()
    precond = 1.0 + np.asarray(X2.T @ degree).ravel()
    b = -grad
    b_norm = float(np.linalg.norm(b))
    if rtol is None:
        scale = max(1.0, float(np.linalg.norm(w))) if w is not None else 1.0
        rtol = min(CG_RTOL, (b_norm / scale) ** FORCING_POWER)
    if b_norm == 0.0:
        return np.zeros(d), 0
    limit = min(max_iter, d + 10) if ops.cap is None else min(max_iter, d + 10, ops.cap)
    u, steps, r_norm = pcg(lambda p: p + X.T @ laplacian(X @ p), b, precond, rtol * b_norm, limit)
    if r_norm <= rtol * b_norm and u.any():
        return u, steps
    if d <= DENSE_MAX_FEATURES:
        # Ill-conditioned (large C / mu): more CG steps than one explicit Hessian costs, or
        # rounding won. The caller takes this and every later step of the solve from the
        # explicit Hessian, affordable at this d.
        ops.switched = True
        return None, steps
    return cg_or_descent(u, r_norm, b, precond), steps


def cg_or_descent(u, r_norm, b, precond):
    """CG's solution ``u`` of ``H u = b``, or where CG failed the preconditioned steepest descent ``b / precond``.

    CG fails when it returns nothing or stops above :data:`FAIL_RESIDUAL` times ``||b||``
    (rounding on an ill-conditioned system); ``b / precond`` is still a descent step.

    Parameters
    ----------
    u : array (d,)
        CG's solution.
    r_norm : float
        Its residual norm ``||H u - b||``.
    b : array (d,)
        The right-hand side (minus the gradient).
    precond : array (d,)
        The diagonal preconditioner (positive).

    Returns
    -------
    array (d,)

    Examples
    --------
    >>> import numpy as np
    >>> cg_or_descent(np.zeros(2), 1.0, np.array([1.0, 2.0]), np.array([2.0, 2.0])).tolist()
    [0.5, 1.0]
    """
    if not (u.any() and r_norm <= FAIL_RESIDUAL * float(np.linalg.norm(b))):
        return b / precond
    return u


def pcg(H, b, precond, atol, limit):
    """``(u, steps, ||H u - b||)``: preconditioned conjugate gradients on ``H u = b`` from ``u = 0``.

    Parameters
    ----------
    H : callable
        ``v -> H v`` (positive definite).
    b : array (d,)
        The right-hand side.
    precond : array (d,)
        The diagonal preconditioner.
    atol : float
        Stop at this residual norm.
    limit : int
        Steps at most.

    Returns
    -------
    u : array (d,)
    steps : int
    r_norm : float
        ``||H u - b||``.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> u, steps, r = pcg(lambda v: A @ v, np.array([1.0, 2.0]), np.diag(A), 1e-12, 10)
    >>> bool(np.allclose(A @ u, [1.0, 2.0])), steps
    (True, 2)
    """
    u = np.zeros(b.shape[0])
    r = b.copy()
    z = r / precond
    p = z.copy()
    rz = float(r @ z)
    steps = 0
    r_norm = float(np.linalg.norm(b))
    for steps in range(1, limit + 1):
        Hp = H(p)
        pHp = float(p @ Hp)
        if not pHp > 0.0:                      # H is positive definite; only rounding gets here
            break
        alpha = rz / pHp
        u += alpha * p
        r -= alpha * Hp
        r_norm = float(np.linalg.norm(r))
        if r_norm <= atol:
            break
        z = r / precond
        rz_new = float(r @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return u, steps, r_norm
