"""The online interaction loop: a learner ranks a query, the environment reveals top-k labels."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from counterfactual_ltr._segments import offsets_from_lengths
from counterfactual_ltr._validation import check_int, check_optional_int, check_random_state, check_real
from counterfactual_ltr.datasets import DEFAULT_RELEVANCE_THRESHOLD, RankingDataset, dense_features
from counterfactual_ltr.online import Feedback

__all__ = ["run_online", "OnlineResult", "query_stream"]


@dataclass
class OnlineResult:
    """Per-round record of an online run.

    ``queries[t]`` is the query shown in round ``t``; ``ndcg_at_10``,
    ``ndcg`` (full list) and ``ap`` are the per-round values of the shown
    ranking against the full labels (queries without relevant documents
    score 0, the LETOR convention). ``rankings`` holds the shown rankings
    back to back (data-set rows), ``ranking_offsets`` their boundaries.

    Parameters
    ----------
    queries : ndarray of int, shape (T,)
        Query index of every round.
    ndcg_at_10, ndcg, ap : ndarrays of shape (T,)
        ``NDCG@10``, full-list NDCG and AP of the ranking shown in every round.
    rankings : ndarray of int
        The shown rankings (data-set rows), round after round.
    ranking_offsets : ndarray of int, shape (T + 1,)
        Round ``t`` showed ``rankings[ranking_offsets[t]:ranking_offsets[t + 1]]``.
    seconds : float, default 0.0
        Wall time of the run.

    Examples
    --------
    >>> from click_sim import make_ranking
    >>> from counterfactual_ltr.online import RandomRanker
    >>> data = make_ranking(n_queries=5, random_state=0)
    >>> result = run_online(RandomRanker(random_state=0), data, T=3, random_state=0)
    >>> result.queries.shape, result.ndcg_at_10.shape
    ((3,), (3,))
    """

    queries: np.ndarray
    ndcg_at_10: np.ndarray
    ndcg: np.ndarray
    ap: np.ndarray
    rankings: np.ndarray = field(repr=False)
    ranking_offsets: np.ndarray = field(repr=False)
    seconds: float = 0.0

    @property
    def n_rounds(self) -> int:
        return len(self.queries)

    @staticmethod
    def time_average(values) -> np.ndarray:
        """Running mean ``(1/t) * sum_{s<=t} values[s]``.

        Parameters
        ----------
        values : array of shape (T,)
            One value per round (e.g. ``result.ndcg``).

        Returns
        -------
        ndarray of float64, shape (T,)
        """
        values = np.asarray(values, dtype=np.float64)
        return np.cumsum(values) / np.arange(1, len(values) + 1)

    @property
    def cumulative_ndcg_loss(self) -> np.ndarray:
        """Cumulative NDCG-induced loss ``sum_{s<=t} (1 - NDCG_s)`` (full list)."""
        return np.cumsum(1.0 - self.ndcg)


def _check_ranking(ranking, n: int, learner, t: int, q: int) -> np.ndarray:
    """``ranking`` as an int64 array if it is a permutation of ``0 .. n-1``, else ``ValueError`` naming who and when."""
    ranking = np.asarray(ranking)
    where = f"learner {learner!r}, round {t}, query index {q}"
    if ranking.ndim != 1 or ranking.shape[0] != n:
        raise ValueError(f"{where}: rank() returned shape {ranking.shape}; it must rank all {n} rows of the query "
                         "(a 1-D permutation of 0..n-1)")
    if n and not np.issubdtype(ranking.dtype, np.integer):
        raise ValueError(f"{where}: rank() returned dtype {ranking.dtype}; row indices must be integers")
    ranking = ranking.astype(np.int64, copy=False)
    if n and (ranking.min() < 0 or ranking.max() >= n):
        bad = ranking[(ranking < 0) | (ranking >= n)][0]
        raise ValueError(f"{where}: rank() returned row {bad}, outside 0..{n - 1}")
    seen = np.zeros(n, dtype=bool)
    seen[ranking] = True
    if not seen.all():
        raise ValueError(f"{where}: rank() returned a repeated row (row {int(np.flatnonzero(~seen)[0])} is missing); "
                         "a ranking must be a permutation of the query's rows")
    return ranking


def query_stream(n_queries: int, T: int, rng: np.random.Generator) -> np.ndarray:
    """``T`` query indices: random permutations of all queries, one after another.

    Parameters
    ----------
    n_queries : int
        Number of queries to draw from.
    T : int
        Number of indices.
    rng : numpy Generator
        Draws the permutations.

    Returns
    -------
    array (T,) of int

    Examples
    --------
    >>> import numpy as np
    >>> sorted(query_stream(3, 6, np.random.default_rng(0)).tolist())
    [0, 0, 1, 1, 2, 2]
    """
    n_queries = check_int(n_queries, "n_queries", min_value=1)
    T = check_int(T, "T", min_value=1, max_value=10**8)
    n_epochs = -(-T // n_queries)
    return np.concatenate([rng.permutation(n_queries) for _ in range(n_epochs)])[:T]


def run_online(learner, data: RankingDataset, T: int, random_state=None, *,
               relevance_threshold=DEFAULT_RELEVANCE_THRESHOLD, reset: bool = True) -> OnlineResult:
    """Run ``learner`` for ``T`` rounds on the queries of ``data`` in random order.

    Each round draws the next query (random order, every query once per
    epoch, repeated when ``T`` exceeds the number of queries), asks
    ``learner.rank(X_q)``, reveals the graded labels of the top
    ``learner.feedback_k`` shown documents (all when None) through a
    :class:`~counterfactual_ltr.online.Feedback`, and calls
    ``learner.update``. Metrics are computed once, vectorised, after the loop.

    Parameters
    ----------
    learner : online learner (``rank``, ``update``, ``feedback_k``; see :mod:`counterfactual_ltr.online`)
        The learner to run.
    data : RankingDataset
        The queries shown, with the labels revealed as feedback.
    T : int >= 1
        Number of rounds.
    random_state : int, Generator or None
        Seed of the order of the queries.
    relevance_threshold : float, default 1
        Grades at or above it are relevant for AP.
    reset : bool, default True
        Reset the learner to the data's number of features first.

    Returns
    -------
    OnlineResult

    Examples
    --------
    >>> from click_sim import make_ranking, run_online
    >>> from counterfactual_ltr.online import RandomRanker
    >>> data = make_ranking(n_queries=20, random_state=0)
    >>> res = run_online(RandomRanker(random_state=0), data, T=50, random_state=0)
    >>> res.ndcg_at_10.shape
    (50,)
    """
    import time

    from counterfactual_ltr.metrics import average_precision, ndcg

    if not isinstance(data, RankingDataset):
        raise TypeError(f"data must be a RankingDataset, got {type(data).__name__}")
    for method in ("rank", "update") + (("reset",) if reset else ()):
        if not callable(getattr(learner, method, None)):
            raise TypeError(f"learner {learner!r} has no {method}() method (see counterfactual_ltr.online)")
    # Each round is a Python call to the learner: 10**8 rounds already take hours. The cap turns an
    # absurd T into a named error before the query stream is allocated.
    T = check_int(T, "T", min_value=1, max_value=10**8)
    relevance_threshold = check_real(relevance_threshold, "relevance_threshold")
    rng = check_random_state(random_state)
    if reset:
        from counterfactual_ltr.online import OnlineLearner

        if isinstance(learner, OnlineLearner):    # keeps the columns' names for an export, as a batch fit does
            learner.reset(data.n_features, feature_names=data.feature_names)
        else:                                     # any object with rank/update/reset(n_features)
            learner.reset(data.n_features)
    queries = query_stream(data.n_queries, T, rng)
    offsets = data.query_offsets
    lengths = np.diff(offsets)[queries]
    ranking_offsets = offsets_from_lengths(lengths)
    rankings = np.empty(ranking_offsets[-1], dtype=np.int64)
    X_all, y_all = dense_features(data.X), data.y          # online learners update on dense rows
    k = check_optional_int(learner.feedback_k, f"feedback_k of learner {learner!r}", min_value=0)
    start_time = time.perf_counter()
    for t, q in enumerate(queries):
        s, e = offsets[q], offsets[q + 1]
        X = X_all[s:e]
        ranking = _check_ranking(learner.rank(X), e - s, learner, t, q)
        shown = e - s if k is None else min(k, e - s)
        learner.update(X, Feedback(ranking, y_all[s + ranking[:shown]]))
        rankings[ranking_offsets[t]:ranking_offsets[t + 1]] = s + ranking
    seconds = time.perf_counter() - start_time
    labels = y_all[rankings]
    # The shown order as scores: first shown gets the highest score.
    pseudo_scores = -np.arange(len(rankings), dtype=np.float64)
    return OnlineResult(
        queries=queries,
        ndcg_at_10=ndcg(pseudo_scores, labels, ranking_offsets, k=10, reduce=None),
        ndcg=ndcg(pseudo_scores, labels, ranking_offsets, reduce=None),
        ap=average_precision(pseudo_scores, labels, ranking_offsets, threshold=relevance_threshold, reduce=None),
        rankings=rankings,
        ranking_offsets=ranking_offsets,
        seconds=seconds,
    )
