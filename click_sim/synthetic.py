"""Synthetic ranking data sets."""

from __future__ import annotations

import numpy as np
import scipy.sparse
import scipy.special

from counterfactual_ltr._validation import check_int, check_random_state, check_real
from counterfactual_ltr.datasets import RankingDataset

__all__ = ["make_separable_ranking", "make_ranking"]


def _positive_int(value, name: str, minimum: int = 1) -> int:
    # The upper bound keeps absurd sizes a named error instead of a failed allocation deep in NumPy.
    return check_int(value, name, min_value=minimum, max_value=2**31 - 1)


def make_separable_ranking(n_queries: int = 1000, n_docs: int = 20, n_features: int = 20,
                           n_levels: int = 5, margin: float = 0.5, random_state=None,
                           return_ranker: bool = False):
    """Margin-separable graded ranking data (the simulated set of Chaudhuri & Tewari, JAIR).

    Every query has ``n_docs`` documents with relevance levels drawn
    uniformly from ``{0, ..., n_levels - 1}``. Documents of level ``l`` are
    drawn from their own Gaussian ``N(mu_l, I)`` (level means ``mu_l ~
    N(0, I)``), and a unit-norm ranker ``w*`` drawn from a Gaussian separates
    the levels with margin: the component of a level-``l`` document along
    ``w*`` is set to ``l * 2 * margin + u`` with ``u ~ U[0, margin]``, so for
    any two documents with ``R_i > R_j``::

        w* . x_i - w* . x_j >= margin.

    Returns a :class:`RankingDataset`, and ``w*`` too when
    ``return_ranker=True``.

    Parameters
    ----------
    n_queries : int, default 1000
        Number of queries.
    n_docs : int, default 20
        Documents per query.
    n_features : int, default 20
        Number of features.
    n_levels : int, default 5
        Relevance levels 0 .. n_levels - 1.
    margin : float > 0, default 0.5
        Gap along ``w*`` between documents of different levels.
    random_state : int, Generator or None
        Seed of every random draw.
    return_ranker : bool, default False
        Also return the separating ranker ``w*``.

    Returns
    -------
    RankingDataset, or ``(data, w_star)`` with ``return_ranker``

    Examples
    --------
    >>> import numpy as np
    >>> data, w = make_separable_ranking(50, random_state=0, return_ranker=True)
    >>> round(float(np.linalg.norm(w)), 6), data.n_docs
    (1.0, 1000)
    """
    n_queries = _positive_int(n_queries, "n_queries")
    n_docs = _positive_int(n_docs, "n_docs", 2)
    n_features = _positive_int(n_features, "n_features")
    n_levels = _positive_int(n_levels, "n_levels", 2)
    margin = check_real(margin, "margin", min_value=0.0, include_min=False)
    rng = check_random_state(random_state)
    w = rng.standard_normal(n_features)
    w /= np.linalg.norm(w)
    level_means = rng.standard_normal((n_levels, n_features))
    n = n_queries * n_docs
    y = rng.integers(0, n_levels, size=n)
    X = level_means[y] + rng.standard_normal((n, n_features))
    # Replace the component along w* by a level-ordered value with a gap of `margin`.
    along = y * (2.0 * margin) + rng.uniform(0.0, margin, size=n)
    X += np.outer(along - X @ w, w)
    qid = np.repeat(np.arange(n_queries), n_docs)
    data = RankingDataset(X, y, qid, name="separable")
    return (data, w) if return_ranker else data


def _level_shares(level_shares, n_levels: int) -> np.ndarray:
    """``level_shares`` as ``n_levels`` finite positive floats, or a ``TypeError``/``ValueError`` saying why not."""
    shares = np.asarray(level_shares)
    if shares.dtype.kind not in "iuf":
        raise TypeError(f"level_shares must hold numbers, got {level_shares!r}")
    shares = shares.astype(np.float64)
    if shares.shape != (n_levels,) or not np.all(np.isfinite(shares) & (shares > 0)):
        raise ValueError(f"level_shares must hold {n_levels} finite positive shares, got {level_shares}")
    return shares


def _length_bounds(n_docs) -> tuple[int, int]:
    """``(low, high)`` list lengths from an int or a pair (not checked for ``low <= high``)."""
    if np.ndim(n_docs) == 0:
        lo = hi = _positive_int(n_docs, "n_docs")
        return lo, hi
    if len(n_docs) != 2:
        raise ValueError(f"n_docs must be an int or a (min, max) pair, got {n_docs!r}")
    return _positive_int(n_docs[0], "n_docs[0]"), _positive_int(n_docs[1], "n_docs[1]")


def _features(rng, n: int, n_features: int, correlation: float, density: float) -> np.ndarray:
    """Standard Gaussian features, made correlated through one shared factor and sparse when asked."""
    X = rng.standard_normal((n, n_features))
    if correlation > 0:
        # One factor shared by all columns of a row: corr(x_a, x_b) = correlation.
        X = np.sqrt(1.0 - correlation) * X + np.sqrt(correlation) * rng.standard_normal((n, 1))
    if density < 1:
        # Sparse values in [0, 1]: the Gaussian's CDF keeps the (correlated) ordering.
        X = np.where(rng.random((n, n_features)) < density, scipy.special.ndtr(X), 0.0)
    return X


def _draw(rng, n_queries, length_range, n_features, correlation, density, noise, interactions):
    """``(lengths, X, w*, latent relevance)`` of :func:`make_ranking`, in its order of random draws."""
    if interactions > 0 and n_features < 2:
        raise ValueError(f"interactions needs n_features >= 2 (pairs of features), got {n_features}")
    lengths = rng.integers(length_range[0], length_range[1] + 1, size=n_queries)
    n = int(lengths.sum())
    w = rng.standard_normal(n_features)
    w /= np.linalg.norm(w)
    X = _features(rng, n, n_features, correlation, density)
    query_shift = np.repeat(rng.standard_normal(n_queries) * 0.5, lengths)
    latent = X @ w + query_shift + noise * rng.standard_normal(n)
    if interactions > 0:                 # drawn last: the default's stream is unchanged
        latent += _interaction_term(rng, X, interactions, w)
    return lengths, X, w, latent


def _interaction_term(rng, X, share: float, w) -> np.ndarray:
    """What turns ``X w`` into ``sqrt(1 - share) X w + sqrt(share) g(X)`` (see :func:`make_ranking`)."""
    k = X.shape[1] // 2
    signs = rng.choice([-1.0, 1.0], size=k)
    products = X[:, 0:2 * k:2] * X[:, 1:2 * k:2]
    linear = X @ w
    return (np.sqrt(1.0 - share) - 1.0) * linear + np.sqrt(share) * (products @ signs) / np.sqrt(k)


def make_ranking(n_queries: int = 200, n_docs=(5, 40), n_features: int = 10, n_levels: int = 3,
                 noise: float = 1.0, level_shares=(0.65, 0.22, 0.13), random_state=None,
                 return_ranker: bool = False, *, density: float = 1.0, correlation: float = 0.0,
                 sparse: bool = False, interactions: float = 0.0):
    """Non-separable graded ranking data with varying list lengths.

    Features are standard Gaussian; a hidden unit-norm linear model ``w*``
    plus a per-query offset and Gaussian ``noise`` gives a latent relevance,
    cut by global quantile thresholds into ``n_levels`` grades whose shares
    are ``level_shares`` (default close to MQ2008's 0/1/2 shares). List
    lengths are uniform in ``[n_docs[0], n_docs[1]]`` (or fixed when
    ``n_docs`` is an int). Some queries end up with no relevant document,
    as in real data.

    Two options make the features look like web-search feature sets rather
    than white noise (the solvers' hard cases):

    * ``density < 1``: sparse features in ``[0, 1]`` -- each value is
      non-zero with probability ``density`` and then uniform in ``(0, 1]``
      (as the normalised sparse features of web LTR samples), centred only
      through ``w*``; columns with no non-zero value stay constant 0.
    * ``correlation > 0``: every row shares one latent factor, so any two
      features have correlation ``correlation`` (ill-conditioned ``X^T X``).

    Long candidate lists are ``n_docs=1000`` (an int fixes the length).

    ``interactions = a > 0``: relevance from feature interactions, which no linear ranker can follow.
    The latent relevance is ``sqrt(1 - a) X w* + sqrt(a) g(X)`` (plus offset and noise), ``g(X) =
    sum_k sign_k x_{2k} x_{2k+1} / sqrt(K)`` over ``K = n_features // 2`` disjoint feature pairs
    (random signs): with Gaussian features each product has variance 1 and no correlation with any
    feature. The signs are drawn last, so ``a = 0`` (the default) gives the same data as before.

    Parameters
    ----------
    n_queries : int, default 200
        Number of queries.
    n_docs : int or (low, high), default (5, 40)
        Documents per query (uniform in the range).
    n_features : int, default 10
        Number of features.
    n_levels : int, default 3
        Relevance grades 0 .. n_levels - 1.
    noise : float >= 0, default 1.0
        Standard deviation of the latent relevance noise.
    level_shares : sequence of float, default (0.65, 0.22, 0.13)
        Shares of the grades.
    random_state : int, Generator or None
        Seed of every random draw.
    return_ranker : bool, default False
        Also return the hidden ranker ``w*``.
    density : float in (0, 1], default 1
        Share of non-zero feature values (see above).
    correlation : float in [0, 1), default 0
        Correlation of any two features through one shared factor.
    sparse : bool, default False
        Return ``X`` as a scipy.sparse CSR matrix (same values).
    interactions : float in [0, 1], default 0
        Share ``a`` of the latent relevance (before noise) that comes from products of feature
        pairs (see above); needs ``n_features >= 2`` when positive.

    Returns
    -------
    RankingDataset, or ``(data, w_star)`` with ``return_ranker``

    Examples
    --------
    >>> data = make_ranking(n_queries=10, random_state=0)
    >>> data.n_queries, int(data.y.max()) <= 2
    (10, True)
    >>> sparse = make_ranking(n_queries=20, n_docs=15, n_features=300, density=0.3, random_state=0)
    >>> bool(abs((sparse.X != 0).mean() - 0.3) < 0.02), float(sparse.X.min()), float(sparse.X.max()) <= 1
    (True, 0.0, True)
    >>> csr = make_ranking(n_queries=20, n_docs=15, n_features=300, density=0.3, random_state=0, sparse=True)
    >>> csr.is_sparse, bool((csr.X.toarray() == sparse.X).all())
    (True, True)
    >>> nonlinear = make_ranking(n_queries=10, interactions=1.0, random_state=0)
    >>> bool((nonlinear.X == data.X).all()), bool((nonlinear.y == data.y).all())    # same features, new grades
    (True, False)
    """
    n_queries = _positive_int(n_queries, "n_queries")
    n_features = _positive_int(n_features, "n_features")
    n_levels = _positive_int(n_levels, "n_levels", 2)
    shares = _level_shares(level_shares, n_levels)
    noise = check_real(noise, "noise", min_value=0.0)
    lo, hi = _length_bounds(n_docs)
    density = check_real(density, "density", min_value=0.0, max_value=1.0, include_min=False)
    correlation = check_real(correlation, "correlation", min_value=0.0, max_value=1.0, include_max=False)
    interactions = check_real(interactions, "interactions", min_value=0.0, max_value=1.0)
    if hi < lo:
        raise ValueError(f"n_docs range is empty: {n_docs}")
    lengths, X, w, latent = _draw(check_random_state(random_state), n_queries, (lo, hi), n_features, correlation,
                                  density, noise, interactions)
    thresholds = np.quantile(latent, np.cumsum(shares / shares.sum())[:-1])
    y = np.searchsorted(thresholds, latent, side="right")
    qid = np.repeat(np.arange(n_queries), lengths)
    if not isinstance(sparse, (bool, np.bool_)):
        raise TypeError(f"sparse must be True or False, got {sparse!r}")
    data = RankingDataset(scipy.sparse.csr_matrix(X) if sparse else X, y, qid, name="synthetic")
    return (data, w) if return_ranker else data
