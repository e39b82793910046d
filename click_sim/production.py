"""Production rankers: the rankers whose rankings generate the click logs."""

from __future__ import annotations

import numpy as np

from counterfactual_ltr._validation import check_random_state, check_real
from counterfactual_ltr.datasets import RankingDataset

__all__ = ["train_production_ranker"]


def train_production_ranker(data: RankingDataset, fraction: float = 0.01, random_state=None, *, C: float = 1.0):
    """A linear Ranking SVM trained on a random ``fraction`` of the queries (Agarwal et al. 2019, sec. 5.1).

    Draws ``max(1, round(fraction * n_queries))`` queries at random, among
    those with at least two different grades (queries with a single grade
    carry no pairwise preference), and fits
    :class:`counterfactual_ltr.estimators.RankSVM` on their graded labels.
    Returns the fitted ranker (``predict(X)`` gives scores); its
    ``training_queries_`` attribute records the chosen query indices.

    Parameters
    ----------
    data : RankingDataset
        Labelled training data.
    fraction : float in (0, 1], default 0.01
        Share of the queries trained on.
    random_state : int, Generator or None
        Seed of the draw of the queries.
    C : float > 0, default 1.0
        Regularisation constant of the Ranking SVM.

    Returns
    -------
    RankSVM

    Examples
    --------
    >>> from click_sim import make_ranking
    >>> data = make_ranking(n_queries=200, random_state=0)
    >>> ranker = train_production_ranker(data, fraction=0.05, random_state=0)
    >>> len(ranker.training_queries_), ranker.predict(data.X).shape == (data.n_docs,)
    (10, True)
    """
    from counterfactual_ltr.estimators import RankSVM

    if not isinstance(data, RankingDataset):
        raise TypeError(f"data must be a RankingDataset, got {type(data).__name__}")
    fraction = check_real(fraction, "fraction", min_value=0.0, include_min=False, max_value=1.0)
    C = check_real(C, "C", min_value=0.0, include_min=False)
    rng = check_random_state(random_state)
    q_index = data.query_index
    y_min = np.full(data.n_queries, np.iinfo(np.int64).max)
    y_max = np.full(data.n_queries, np.iinfo(np.int64).min)
    np.minimum.at(y_min, q_index, data.y)
    np.maximum.at(y_max, q_index, data.y)
    informative = np.flatnonzero(y_max > y_min)
    if informative.size == 0:
        raise ValueError("no query has two different relevance grades: a Ranking SVM cannot be trained")
    n_train = min(max(1, int(round(fraction * data.n_queries))), informative.size)
    queries = np.sort(rng.choice(informative, size=n_train, replace=False))
    train = data.subset(queries)
    ranker = RankSVM(C=C).fit(train.X, train.y, qid=train.qid)
    ranker.training_queries_ = queries
    return ranker
