"""Dense linear-algebra kernels shared by the Newton solvers."""

from __future__ import annotations

import numpy as np


def weighted_gram(X, weights):
    """``X' diag(weights) X`` as ``A'A - B'B``, ``A``/``B`` the rows scaled by ``sqrt(|weights|)``.

    NumPy computes ``A.T @ A`` as a symmetric rank-k update (BLAS ``syrk``):
    half the flops of a general product ``X.T @ (weights[:, None] * X)``, and
    several times faster.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> weighted_gram(X, np.array([2.0, -1.0])).round(12).tolist()   # 2 x1 x1' - x2 x2'
    [[-7.0, -8.0], [-8.0, -8.0]]
    """
    A = X * np.sqrt(np.maximum(weights, 0.0))[:, None]
    gram = A.T @ A
    negative = weights < 0
    if negative.any():
        B = X[negative] * np.sqrt(-weights[negative])[:, None]
        gram -= B.T @ B
    return gram


def pair_gram(X, i, j, h, chunk_bytes=1 << 23):
    """``sum_k h_k (x_{i_k} - x_{j_k})(x_{i_k} - x_{j_k})'`` for weights ``h >= 0``, pairs never formed at once.

    Blocks of pair differences are gathered into two reused buffers, scaled by
    ``sqrt(h)`` in place and summed as symmetric rank-k updates. Fresh gathers of
    whole blocks would cost page faults on every call.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> pair_gram(X, np.array([0, 1]), np.array([2, 2]), np.array([2.0, 1.0])).round(12).tolist()
    [[2.0, 0.0], [0.0, 1.0]]
    """
    d = X.shape[1]
    gram = np.zeros((d, d))
    step = max(1, chunk_bytes // (8 * max(d, 1)))
    first, second = np.empty((min(step, i.size), d)), np.empty((min(step, i.size), d))
    for start in range(0, i.size, step):
        k = min(step, i.size - start)
        diff = np.take(X, i[start:start + k], axis=0, out=first[:k])
        np.subtract(diff, np.take(X, j[start:start + k], axis=0, out=second[:k]), out=diff)
        diff *= np.sqrt(h[start:start + k])[:, None]
        gram += diff.T @ diff
    return gram
