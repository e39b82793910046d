"""Logging policies: how likely the logger was to show each document at each position.

The policy-aware estimator (Oosterhuis & de Rijke, CIKM 2020) divides a
click not by the propensity of the position where the document happened to
be shown but by its *expected* examination under the logging policy::

    rho(d) = sum_k P_logger(d at position k) * alpha_k

(``alpha_k`` the examination, or the affine slope under trust bias, at
position ``k``; positions below the cutoff have ``alpha = 0``). So a click log
must carry, or the user must supply, the matrix ``P(d at k)``. A logging
policy here is any object with ``position_probabilities(data) ->
PositionProbabilities``:

* :class:`PlackettLucePolicy`: the logger sampled each session's ranking by
  Plackett-Luce over ``scores / temperature`` (``temperature = 0``: the
  deterministic ranking) and showed the top ``max_shown``;
* :class:`PositionProbabilities` itself: a user with a real log who knows the
  probabilities of their logger gives them directly (a matrix per data-set row).

``PlackettLucePolicy`` computes the probabilities exactly where feasible (a
deterministic logger; or enumeration of every ordered top-``K`` prefix when a
query has at most ``exact_limit`` of them) and otherwise by a seeded Monte
Carlo over ``n_samples`` rankings, whose standard error is kept with the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from math import perm

import numpy as np

from .._segments import (check_finite_1d, offsets_from_lengths, rank_within_queries,
                        segment_ids)
from .._validation import check_int, check_optional_int, check_real

__all__ = ["PositionProbabilities", "PlackettLucePolicy", "sample_plackett_luce_orders", "segment_keys"]


@dataclass(frozen=True)
class PositionProbabilities:
    """``probabilities[d, k - 1] = P(the logger shows data-set row d at position k)``.

    Each row sums to at most 1 (the rest is the probability of not being
    shown). ``n_samples`` is ``None`` when the matrix is exact, else the
    number of Monte Carlo rankings per query it was estimated from.

    Parameters
    ----------
    probabilities : array (n_docs, n_positions)
        ``P(row d at position k)``; rows sum to at most 1 (less when a row may
        not be shown).
    n_samples : int, optional
        Number of Monte Carlo rankings behind the estimate; ``None`` when exact.

    Examples
    --------
    >>> import numpy as np
    >>> P = PositionProbabilities(np.array([[0.5, 0.5], [0.5, 0.5]]))
    >>> P.expected(np.array([1.0, 0.5])).tolist()
    [0.75, 0.75]
    """

    probabilities: np.ndarray
    n_samples: int | None = None

    def __post_init__(self):
        P = np.asarray(self.probabilities, dtype=np.float64)
        if P.ndim != 2 or P.shape[1] == 0:
            raise ValueError(f"position probabilities must be a 2-D array (n_docs, n_positions), got shape {P.shape}")
        bad = np.flatnonzero(~np.isfinite(P).all(axis=1) | (P < 0).any(axis=1) | (P.sum(axis=1) > 1 + 1e-9))
        if bad.size:
            raise ValueError(f"position probabilities of row {bad[0]} must be finite, >= 0 and sum to <= 1, "
                             f"got {P[bad[0]].tolist()[:10]}")
        object.__setattr__(self, "probabilities", P)

    def position_probabilities(self, data) -> "PositionProbabilities":
        """The matrix itself (so a :class:`PositionProbabilities` is a logging policy), checked against ``data``.

        Parameters
        ----------
        data : RankingDataset
            The data set of the log (its number of rows must match).

        Returns
        -------
        PositionProbabilities
        """
        if self.probabilities.shape[0] != data.n_docs:
            raise ValueError(f"position probabilities have {self.probabilities.shape[0]} rows but the data set has "
                             f"{data.n_docs}")
        return self

    def _per_position(self, alpha) -> np.ndarray:
        alpha = np.asarray(alpha, dtype=np.float64)
        return alpha[np.minimum(np.arange(self.probabilities.shape[1]), len(alpha) - 1)]

    def expected(self, alpha) -> np.ndarray:
        """``sum_k P(d at k) alpha[k - 1]`` per row (positions beyond ``alpha`` take its last value).

        Parameters
        ----------
        alpha : float or array (K,)
            A value per position (e.g. the examination propensities).

        Returns
        -------
        ndarray of float64, shape (n_docs,)
        """
        return self.probabilities @ self._per_position(alpha)

    def expected_stderr(self, alpha) -> np.ndarray:
        """Monte Carlo standard error of :meth:`expected` per row (zeros when exact).

        Parameters
        ----------
        alpha : float or array (K,)
            A value per position, as for :meth:`expected`.

        Returns
        -------
        ndarray of float64, shape (n_docs,)
        """
        if self.n_samples is None:
            return np.zeros(self.probabilities.shape[0])
        alpha = self._per_position(alpha)
        mean = self.probabilities @ alpha
        var = np.maximum(self.probabilities @ alpha**2 - mean**2, 0.0)
        return np.sqrt(var / self.n_samples)


def sample_plackett_luce_orders(scores, query_offsets, rng, *, segments=None) -> np.ndarray:
    """One Plackett-Luce ranking of every query at once (Gumbel-max trick).

    Sorting ``scores + Gumbel noise`` within each query samples the ranking
    ``d_1, d_2, ...`` with probability ``prod_i exp(s_{d_i}) / sum_{j >= i} exp(s_{d_j})``.
    Returns row indices query by query, best first (as ``order_within_queries``).
    ``segments`` (the query index of every row, see :func:`segment_keys`) may
    be passed to save recomputing it.

    Parameters
    ----------
    scores : array (n_docs,)
        Plackett-Luce log-weights (scores divided by the temperature).
    query_offsets : array (n_queries + 1,)
        Query boundaries (see ``docs/conventions.md``).
    rng : numpy Generator
        Draws the Gumbel noise.
    segments : array (n_docs,), optional
        The query index of every row, when the caller has it already.

    Returns
    -------
    array (n_docs,) of row indices

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> sorted(sample_plackett_luce_orders(np.zeros(3), [0, 3], rng).tolist())
    [0, 1, 2]
    """
    scores = np.asarray(scores, dtype=np.float64)
    if segments is None:
        segments = segment_keys(query_offsets)
    # Sort all rows by perturbed score, then (stably) by query: two plain sorts beat a two-key lexsort,
    # and a stable sort of small integers is a radix sort. Ties have probability zero.
    by_score = np.argsort(-(scores + rng.gumbel(size=scores.shape)))
    return by_score[np.argsort(segments[by_score], kind="stable")]


def segment_keys(query_offsets) -> np.ndarray:
    """Query index of every row in the smallest integer type (fast stable sorts).

    Parameters
    ----------
    query_offsets : array (n_queries + 1,)
        Query boundaries (see ``docs/conventions.md``).

    Returns
    -------
    array (n_docs,) of int16, int32 or int64

    Examples
    --------
    >>> segment_keys([0, 2, 3]).tolist()
    [0, 0, 1]
    """
    seg = segment_ids(query_offsets)
    n = len(query_offsets) - 1
    return seg.astype(np.int16 if n < 2**15 else np.int32 if n < 2**31 else np.int64)


class PlackettLucePolicy:
    """A logger that ranks by Plackett-Luce over ``scores / temperature`` and shows the top ``max_shown``.

    Parameters
    ----------
    scores : array (n_docs,)
        The logger's score of every data-set row.
    temperature : float >= 0
        0 is the deterministic ranking by ``scores`` (ties by row order).
    max_shown : int, optional
        Number of positions shown (default: every document).
    exact_limit : int
        Enumerate every ordered top-``K`` prefix of a query (exact
        probabilities) when it has at most this many; otherwise Monte Carlo.
    n_samples : int
        Rankings per query of the Monte Carlo (its standard error is kept).
    random_state : int or Generator
        Seed of the Monte Carlo.

    Examples
    --------
    >>> import numpy as np
    >>> policy = PlackettLucePolicy(np.log([2.0, 1.0]), temperature=1.0)
    >>> from counterfactual_ltr import RankingDataset
    >>> data = RankingDataset(np.eye(2), [1, 0], [1, 1])
    >>> policy.position_probabilities(data).probabilities.round(4).tolist()
    [[0.6667, 0.3333], [0.3333, 0.6667]]
    """

    def __init__(self, scores, temperature=1.0, max_shown=None, *, exact_limit=20_000, n_samples=2_000,
                 random_state=0):
        self.scores = check_finite_1d(scores, "logging scores")
        self.temperature = check_real(temperature, "temperature", min_value=0.0)
        self.max_shown = check_optional_int(max_shown, "max_shown", min_value=1)
        self.exact_limit = check_int(exact_limit, "exact_limit", min_value=1)
        self.n_samples = check_int(n_samples, "n_samples", min_value=1)
        self.random_state = random_state
        self._cache = None

    def __repr__(self) -> str:
        return (f"PlackettLucePolicy(<{len(self.scores)} scores>, temperature={self.temperature}, "
                f"max_shown={self.max_shown})")

    def _check(self, data):
        if len(self.scores) != data.n_docs:
            raise ValueError(f"the logging policy has {len(self.scores)} scores but the data set has {data.n_docs} rows")

    def position_probabilities(self, data) -> PositionProbabilities:
        """``P(row d at position k)``, exact where feasible, else seeded Monte Carlo (cached).

        Parameters
        ----------
        data : RankingDataset
            The data set whose rows the scores belong to.

        Returns
        -------
        PositionProbabilities
        """
        self._check(data)
        if self._cache is not None and self._cache[0] is data:
            return self._cache[1]
        lengths = data.query_lengths
        K = int(lengths.max() if self.max_shown is None else min(self.max_shown, lengths.max()))
        P = np.zeros((data.n_docs, K))
        if self.temperature == 0:
            ranks = rank_within_queries(self.scores, data.query_offsets)
            shown = ranks <= K
            P[np.flatnonzero(shown), ranks[shown] - 1] = 1.0
            result = PositionProbabilities(P)
        else:
            s = self.scores / self.temperature
            prefixes = np.array([perm(int(n), min(K, int(n))) for n in lengths])
            exact = prefixes <= self.exact_limit
            for n in np.unique(lengths[exact]):
                self._enumerate(P, s, data.query_offsets, np.flatnonzero(exact & (lengths == n)), int(n), min(K, int(n)))
            n_samples = None
            if not exact.all():
                n_samples = self.n_samples
                self._monte_carlo(P, s, data, np.flatnonzero(~exact), K)
            result = PositionProbabilities(P, n_samples)
        self._cache = (data, result)
        return result

    @staticmethod
    def _enumerate(P, s, offsets, queries, n, K):
        """Exact marginals of queries of length ``n``: every ordered top-``K`` prefix, its PL probability."""
        prefixes = np.array(list(permutations(range(n), K)), dtype=np.int64)  # (n_prefixes, K)
        rows = offsets[queries][:, None] + np.arange(n)  # (n_queries, n)
        logits = s[rows]
        lam = np.exp(logits - logits.max(axis=1, keepdims=True))  # (n_queries, n)
        chosen = lam[:, prefixes]  # (n_queries, n_prefixes, K)
        remaining = lam.sum(axis=1)[:, None, None] - np.cumsum(chosen, axis=2) + chosen
        prob = np.prod(chosen / remaining, axis=2)  # (n_queries, n_prefixes)
        for k in range(K):  # K <= a handful of positions; vectorised over queries and prefixes
            np.add.at(P[:, k], rows[:, prefixes[:, k]].ravel(), prob.ravel())

    def _monte_carlo(self, P, s, data, queries, K):
        """Average position indicators over ``n_samples`` Gumbel-max rankings of the given queries."""
        rows = data.rows_of(queries)
        offsets = offsets_from_lengths(data.query_lengths[queries])
        seg = segment_ids(offsets)
        rng = np.random.default_rng(self.random_state)
        counts = np.zeros(len(rows) * K)
        local_start = offsets[seg]
        keys = segment_keys(offsets)
        for _ in range(self.n_samples):  # a loop over samples; each is vectorised over every document
            order = sample_plackett_luce_orders(s[rows], offsets, rng, segments=keys)
            position = np.arange(len(order)) - local_start + 1  # 1-based position of order[i]
            keep = position <= K
            counts += np.bincount(order[keep] * K + position[keep] - 1, minlength=len(rows) * K)
        P[rows] = counts.reshape(len(rows), K) / self.n_samples
