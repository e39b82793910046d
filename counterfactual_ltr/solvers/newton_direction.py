"""The Newton direction of the explicit path: the band Hessian, exact or sampled, or conjugate gradients.

On a smoothing level ``mu`` the smoothed objective's Hessian is ``H = I + (C/mu) X^T L X``,
``L`` the Laplacian of the pairs inside the quadratic band ``0 < z < mu``. The dense path forms
it and solves by Cholesky: one ``d x d`` matrix, which for ``d`` up to a few thousand costs less
than the many products with ``X`` conjugate gradients would need (the smoothed Hessian's
condition number grows like ``C / mu``). ``X^T L X`` is summed over the rows that touch a
band pair, block by block (memory: two row blocks of ``X``), or over the pairs as symmetric
rank-k updates where there are fewer pairs than rows.

A band of many more pairs than features (the wide bands of the first levels on large data) is
replaced by an unbiased Bernoulli sample of them, weights divided by the rate: only the
direction changes; the line search and the certificate stay exact. With fewer band pairs than
features the band Hessian misses directions, and a Levenberg-Marquardt weight on the identity
(``0.5 / t`` after a step cut to ``t``, halved back after full steps) shortens steps there.

Sparse or very wide ``X``: conjugate gradients on Hessian-vector products
(:mod:`counterfactual_ltr.solvers.hessian_free`), handing over to the dense Hessian where CG needs
more steps than a Hessian costs.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from . import hessian_free as _hf
from .._linalg import pair_gram

__all__ = ["newton_direction", "damping"]

# A band Hessian over many more pairs than features is estimated from a random sample of its
# pairs, weighted up: at least this many per feature (fewer made Newton steps noticeably worse) ...
_SAMPLE_PAIRS_PER_FEATURE = 50
# ... and as many as make it cost about this many products of X with a vector.
_SAMPLE_MATVECS = 4
# Bands up to this multiple of the cap are taken whole (a sample would save little).
_SAMPLE_SLACK = 2


def newton_direction(X, grad, i, j, Cc, band, mu, damp, ops, rng, rtol):
    """The Newton step ``u = -H^{-1} grad``, ``H = I + X^T L X`` over the band pairs (weights ``Cc / mu``).

    Parameters
    ----------
    X : array (n_docs, d) or scipy.sparse matrix
        Feature matrix; the pairs index its rows.
    grad : array (d,)
        Gradient of the smoothed objective (or of the path-following model).
    i, j : int arrays (n_pairs,)
        The working pairs.
    Cc : array (n_pairs,)
        ``C`` times the pair weights.
    band : bool array (n_pairs,)
        The pairs in the quadratic band.
    mu : float
        The smoothing level (band pairs weigh ``Cc / mu``).
    damp : float
        The identity's weight where the band holds fewer pairs than features (see :func:`damping`).
    ops : :class:`~counterfactual_ltr.solvers.hessian_free.Products` or None
        The Hessian-free path (conjugate gradients to the relative residual ``rtol``), or the dense one.
    rng : numpy Generator
        Draws the sample of a wide band.
    rtol : float or None
        CG's relative residual (Hessian-free path).

    Returns
    -------
    array (d,) or None
        None if the dense Newton system is numerically singular (``C / mu`` so large that
        the identity is lost in rounding).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> u = newton_direction(X, np.array([1.0, -1.0]), np.array([0]), np.array([1]), np.array([2.0]),
    ...                      np.array([True]), 1.0, 1.0, None, np.random.default_rng(0), None)
    >>> u.round(6).tolist()                # (I + 2 (e0 - e1)(e0 - e1)^T)^-1 (-1, 1)
    [-0.2, 0.2]
    """
    n, d = X.shape
    u = None
    if ops is not None:
        u, _ = _hf.newton_cg_direction(ops, grad, *_hf.explicit_band(i[band], j[band], Cc[band] / mu, n), rtol=rtol)
    if u is None:                                # dense path, or CG lost to rounding
        ib, jb, hb = _hessian_pairs(i[band], j[band], Cc[band] / mu, n, d, rng)
        H = (_hf.dense_band_hessian if _hf.is_sparse(X) else _band_hessian)(X, ib, jb, hb)
        # Damping only where the band leaves directions without curvature (fewer pairs than d).
        H[np.diag_indices_from(H)] += damp if np.count_nonzero(band) < d else 1.0
        try:
            u = -scipy.linalg.cho_solve(scipy.linalg.cho_factor(H, overwrite_a=True), grad)
        except (np.linalg.LinAlgError, ValueError):
            return None
    return u


def damping(damp, t):
    """Levenberg-Marquardt weight of the identity in the Newton matrix after a step of length ``t``.

    With fewer band pairs than features the band Hessian is singular: in the directions
    it misses, the Newton step trusts the identity (the regulariser) alone, overshoots
    to the next kinks, and the exact line search returns ``t << 1``. Scaling the
    identity by ``0.5 / t`` shortens the next step there (the band's large curvature
    is unchanged); steps of full length halve the weight back towards 1.

    Parameters
    ----------
    damp : float
        The weight before the step.
    t : float
        The step length the line search took.

    Returns
    -------
    float

    Examples
    --------
    >>> damping(1.0, 0.01), damping(50.0, 1.0)
    (50.0, 25.0)
    """
    return damp if t <= 0.0 else max(1.0, damp * 0.5 / t)


def _band_hessian(X, ib, jb, h, chunk_bytes=1 << 26, pair_chunk_bytes=1 << 23):
    """``X^T L X`` for the weighted pair Laplacian ``L = sum_b h_b (e_i - e_j)(e_i - e_j)^T``, ``h >= 0``.

    ``L X`` is formed row block by row block over the documents that touch a
    pair, so memory stays at two blocks of ``X`` whatever the number of pairs.
    """
    n, d = X.shape
    deg = np.bincount(ib, h, minlength=n) + np.bincount(jb, h, minlength=n)
    rows = np.flatnonzero(deg)
    if ib.size <= rows.size:
        # Few pairs (late smoothing levels, sampled bands): sum of outer products of pair differences.
        H = pair_gram(X, ib, jb, h, chunk_bytes=pair_chunk_bytes)
        return 0.5 * (H + H.T)
    A = sp.csr_matrix((h, (ib, jb)), shape=(n, n))
    A = (A + A.T).tocsr()                            # symmetric adjacency
    H = np.zeros((d, d))
    step = max(1, chunk_bytes // (8 * max(d, 1)))
    for start in range(0, rows.size, step):
        r = rows[start:start + step]
        contiguous = r[-1] - r[0] + 1 == r.size       # slices avoid copying X
        Xr = X[r[0]:r[-1] + 1] if contiguous else X[r]
        LX = deg[r, None] * Xr - A[r] @ X
        H += Xr.T @ LX
    return 0.5 * (H + H.T)


def _hessian_pairs(ib, jb, h, n, d, rng):
    """The band pairs a Newton Hessian is built from: all of them, or an unbiased sample.

    ``X^T L X`` costs ``2 d^2`` flops per band row, an objective and gradient
    evaluation ``4 n d``. Where the band holds more than twice ``cap = max(50 d, 4 n / d)``
    pairs, each is kept with probability ``cap / |band|`` and its weight divided by
    that probability, so the sampled Laplacian's expectation is the exact one. The
    Newton step needs only a direction: the line search and the certificate use the
    exact objective.
    """
    cap = max(_SAMPLE_PAIRS_PER_FEATURE * d, _SAMPLE_MATVECS * n // max(d, 1))
    if ib.size <= _SAMPLE_SLACK * cap:
        return ib, jb, h
    rate = cap / ib.size
    take = rng.random(ib.size) < rate
    return ib[take], jb[take], h[take] / rate
