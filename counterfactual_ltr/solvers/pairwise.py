"""The entry point of the pairwise-hinge solver: inputs checked, the path chosen, BLAS threads limited.

:func:`solve_pairwise_hinge` takes pairs as index arrays (the explicit path, :mod:`.explicit`)
or as :class:`~counterfactual_ltr.surrogates.implicit_pairs.ClickPairs`, every clicked row against every
other row of its query; those are solved on sorted scores (:mod:`.implicit`) where the lists are
long (at least 64 pairs per click: there both paths cost about the same CPU time and the
implicit one needs no pair arrays), on their explicit pairs otherwise (screening and the
finisher pay on short lists). A sparse ``X``, or one with more than 2,000 features, takes its
Newton steps by conjugate gradients (:mod:`counterfactual_ltr.solvers.hessian_free`).
"""

from __future__ import annotations

import numpy as np

from . import hessian_free as _hf
from .._validation import check_real
from ..surrogates.implicit_pairs import ClickPairs
from .common import (SolverResult, check_C, check_max_iter, check_pairs, check_tol, check_w0, check_X, doc,
                     make_result)
from .explicit import solve_explicit
from .implicit import solve_implicit

__all__ = ["solve_pairwise_hinge", "uses_implicit_pairs"]

# Implicit pairs beat explicit ones from this many pairs per anchor (list length - 1) on.
_IMPLICIT_MIN_PAIRS_PER_ANCHOR = 64

# BLAS threads pay only for large products on idle cores; on small products, or on a busy
# machine, they cost several times the single-threaded time.
_THREADED_MIN_FLOPS = 1e10
_CONTROLLER = None


@doc
def solve_pairwise_hinge(X, pairs_i, pairs_j, pair_weights, C, *, margin=1.0, w0=None, tol=1e-6,
                         max_iter=1000, verbose=False, method="auto", min_decrease=0.0) -> SolverResult:
    """Minimise ``0.5||w||^2 + C sum_p c_p max(0, margin - (x_{i_p} - x_{j_p}).w)`` exactly.

    Parameters
    ----------
    X : (n_docs, d) array or scipy.sparse matrix
        Feature matrix; pairs index its rows. Pair features are never formed.
        A sparse ``X`` stays sparse (CSR) on the Hessian-free path.
    pairs_i, pairs_j : (n_pairs,) int arrays
        Rows of the preferred and the other document of each pair. Or
        ``pairs_i`` is a :class:`~counterfactual_ltr.surrogates.implicit_pairs.ClickPairs`
        (every clicked row against every other row of its query, never
        materialised) and ``pairs_j = pair_weights = None``; then lists with
        at least 64 pairs per click are solved on sorted scores (``O(n log n)``
        per evaluation whatever the number of pairs), shorter ones on explicit
        pairs (faster there, with screening).
    pair_weights : (n_pairs,) array, >= 0
        Weights ``c_p`` (zero-weight pairs are dropped, duplicates allowed).
    C : float > 0
        Weight of the hinge sum against ``0.5||w||^2``.
    margin : float
        The hinge's margin (1 for the ranking SVMs).
    w0 : (d,) array, optional
        Warm start (e.g. the solution for nearby weights).
    tol : float
        Stop when ``gap <= tol * max(1, |objective|)``.
    max_iter : int
        Newton iterations; on exhaustion a ``ConvergenceWarning`` is emitted
        and ``converged=False``.
    verbose : bool
        Print one line per iteration.
    method : {"auto", "newton", "newton_cg"}
        Newton steps from an explicit ``d x d`` Hessian (``"newton"``) or by
        conjugate gradients on Hessian-vector products (``"newton_cg"``, cost
        per iteration following the non-zeros of ``X``; see
        :mod:`counterfactual_ltr.solvers.hessian_free`). ``"auto"`` takes the latter
        for a sparse ``X`` or more than 2,000 features. Same objective, same
        certificate; the path is recorded in ``SolverResult.method``.
    min_decrease : float >= 0
        Also stop once a Newton step lowers the exact objective by less than this
        (absolute) amount, provided the solve has lowered it by at least this much
        since its start (else it goes on to its gap): ``SolverResult.stalled`` is then
        True, with no warning.
        For outer loops that need descent rather than a certificate, such as the
        convex-concave procedure of SVM PropDCG, whose later subproblems are done
        once their Newton steps gain little next to the outer objective's last
        decrease. The returned point is the best one evaluated, so never worse
        than the start (or the best point on the ray of a warm start).

    {returns_result}
        ``dual_objective`` is ``D(alpha) = margin sum(alpha) - 0.5||X^T g(alpha)||^2``
        at a feasible ``0 <= alpha_p <= C c_p``, so ``gap`` certifies ``coef``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(6, 3))
    >>> res = solve_pairwise_hinge(X, [0, 0, 1, 3], [1, 2, 2, 4], [1.0, 2.0, 1.0, 0.5], C=1.0)
    >>> res.converged and res.gap <= 1e-6 * max(1.0, res.objective)
    True
    >>> from counterfactual_ltr.surrogates.implicit_pairs import ClickPairs
    >>> pairs = ClickPairs([0, 3, 6], [0, 4], [1.0, 2.0])      # rows 0 and 4 clicked
    >>> a = solve_pairwise_hinge(X, pairs, None, None, C=1.0, tol=1e-9)
    >>> b = solve_pairwise_hinge(X, *pairs.explicit(), C=1.0, tol=1e-9)
    >>> bool(abs(a.objective - b.objective) <= 1e-8 * b.objective)
    True
    >>> import scipy.sparse as sp
    >>> c = solve_pairwise_hinge(sp.csr_matrix(X), [0, 0, 1, 3], [1, 2, 2, 4], [1.0, 2.0, 1.0, 0.5], C=1.0)
    >>> c.method, bool(abs(c.objective - res.objective) <= 1e-6 * res.objective)
    ('newton_cg', True)
    """
    with _blas_threads(np.shape(X)):
        return _solve_pairwise_hinge(X, pairs_i, pairs_j, pair_weights, C, margin=margin, w0=w0, tol=tol,
                                     max_iter=max_iter, verbose=verbose, method=method,
                                     min_decrease=min_decrease)


def uses_implicit_pairs(pairs: ClickPairs, n_features: int) -> bool:
    """Whether :func:`solve_pairwise_hinge` solves these click pairs on sorted scores (long lists).

    Parameters
    ----------
    pairs : ClickPairs
        Click pairs (see :class:`~counterfactual_ltr.surrogates.implicit_pairs.ClickPairs`).
    n_features : int
        Columns of ``X`` (the choice does not depend on them today).

    Returns
    -------
    bool
        At least 64 pairs per click on average.

    Examples
    --------
    >>> long, short = ClickPairs([0, 100], [3], [1.0]), ClickPairs([0, 10], [3], [1.0])
    >>> uses_implicit_pairs(long, 5), uses_implicit_pairs(short, 5)
    (True, False)
    """
    return pairs.anchors.size > 0 and pairs.n_pairs >= _IMPLICIT_MIN_PAIRS_PER_ANCHOR * pairs.anchors.size


def _solve_pairwise_hinge(X, pairs_i, pairs_j, pair_weights, C, *, margin, w0, tol, max_iter, verbose,
                          method="auto", min_decrease=0.0):
    C = check_C(C)
    min_decrease = check_real(min_decrease, "min_decrease", min_value=0.0)
    method = _hf.choose_method(X, method)
    X = check_X(X)
    if _hf.is_sparse(X) and (method == "newton" or _hf.dense_pays(X)):
        # The dense Hessian needs dense rows; and a small CSR X with many non-zeros (at most
        # 4M values, >= 10 % non-zero) is multiplied faster as a transient dense copy.
        X = X.toarray()
    n, d = X.shape
    if isinstance(pairs_i, ClickPairs):
        pairs = pairs_i
        if pairs_j is not None or pair_weights is not None:
            raise ValueError("with ClickPairs as pairs_i, pairs_j and pair_weights must be None "
                             "(the weights are the ClickPairs' own)")
        if pairs.n_rows != n:
            raise ValueError(f"the ClickPairs index {pairs.n_rows} rows but X has {n} rows")
        margin = float(margin)
        if not np.isfinite(margin):
            raise ValueError(f"margin must be finite, got {margin}")
        tol, max_iter = check_tol(tol), check_max_iter(max_iter)
        w = check_w0(w0, d)
        if uses_implicit_pairs(pairs, d):
            return _solve_implicit(X, pairs, C, margin, w, w0 is not None, tol, max_iter, verbose, method,
                                   min_decrease)
        pairs_i, pairs_j, pair_weights = pairs.explicit()
    i, j, c = check_pairs(pairs_i, pairs_j, pair_weights, n)
    margin = check_real(margin, "margin")
    tol, max_iter = check_tol(tol), check_max_iter(max_iter)
    w = check_w0(w0, d)
    return _solve_explicit(X, i, j, c, C, margin, w, w0 is not None, tol, max_iter, verbose, method, min_decrease)


# The two paths on checked inputs (a ConvergenceWarning of the result names the line in solve_pairwise_hinge).
def _solve_explicit(X, i, j, c, C, margin, w, warm, tol, max_iter, verbose, method, min_decrease):
    w, P, D, it, converged, history, stalled, method = solve_explicit(X, i, j, c, C, margin, w, warm, tol, max_iter,
                                                                      verbose, method, min_decrease)
    return make_result("solve_pairwise_hinge", w, P, D, it, converged, history, tol, method, stalled, stacklevel=4)


def _solve_implicit(X, pairs, C, margin, w, warm, tol, max_iter, verbose, method, min_decrease):
    ops = _hf.Products(X) if method == "newton_cg" else None
    w, P, D, it, converged, history, stalled = solve_implicit(X, pairs, C, margin, w, warm, tol, max_iter, verbose,
                                                              ops, min_decrease)
    return make_result("solve_pairwise_hinge", w, P, D, it, converged, history, tol, _hf.taken(method, ops),
                       stalled, stacklevel=4)


def _blas_threads(shape):
    """One BLAS thread unless the Hessian products are large (``n d^2 >= 1e10``) and a core is idle."""
    import os
    from contextlib import nullcontext

    n, d = (tuple(shape) + (1, 1))[:2]
    cores = os.cpu_count() or 1
    idle = cores - (os.getloadavg()[0] if hasattr(os, "getloadavg") else cores)
    if float(n) * d * d >= _THREADED_MIN_FLOPS and idle >= 1:
        return nullcontext()
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")
