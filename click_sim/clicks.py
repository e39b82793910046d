"""Click models and simulated click logs."""

from __future__ import annotations

import numpy as np

from counterfactual_ltr._segments import check_finite_1d, order_within_queries, offsets_from_lengths
from counterfactual_ltr.clicklog import ClickLog
from counterfactual_ltr.datasets import DEFAULT_RELEVANCE_THRESHOLD, RankingDataset
from counterfactual_ltr.logging_policy import PlackettLucePolicy, segment_keys
from counterfactual_ltr.propensity import PositionBasedPropensity

__all__ = ["PositionBasedClickModel", "simulate_clicks", "ranker_scores"]


class PositionBasedClickModel:
    """Position-based click model of Joachims et al. (2017) / Agarwal et al. (2019, sec. 5.1).

    A document at position ``r`` is examined with probability
    ``p_r = (1 / r) ** eta``; an examined relevant document is clicked with
    probability ``eps_plus``, an examined irrelevant one with ``eps_minus``::

        P(click | r, relevant)   = p_r * eps_plus
        P(click | r, irrelevant) = p_r * eps_minus

    Examples
    --------
    >>> model = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    >>> model.click_probability([1, 2, 4], [1, 0, 1]).tolist()
    [1.0, 0.05, 0.25]
    """

    def __init__(self, eta: float = 1.0, eps_minus: float = 0.1, eps_plus: float = 1.0):
        for name, value in (("eps_minus", eps_minus), ("eps_plus", eps_plus)):
            if not (np.isfinite(value) and 0 <= value <= 1):
                raise ValueError(f"{name} must lie in [0, 1], got {value}")
        self.examination = PositionBasedPropensity(eta)  # validates eta >= 0
        self.eta = float(eta)
        self.eps_minus = float(eps_minus)
        self.eps_plus = float(eps_plus)

    def propensity_model(self) -> PositionBasedPropensity:
        """The true propensity model of this click model."""
        return PositionBasedPropensity(self.eta)

    def click_probability(self, positions, relevant) -> np.ndarray:
        """``p_r * (eps_plus if relevant else eps_minus)``, elementwise."""
        relevant = np.asarray(relevant).astype(bool)
        return self.examination(positions) * np.where(relevant, self.eps_plus, self.eps_minus)

    def __repr__(self) -> str:
        return f"PositionBasedClickModel(eta={self.eta}, eps_minus={self.eps_minus}, eps_plus={self.eps_plus})"


def ranker_scores(ranker, data: RankingDataset) -> np.ndarray:
    """Scores of every row: ``ranker.predict(data.X)``, or ``ranker`` itself if it is an array."""
    if hasattr(ranker, "predict"):
        scores = ranker.predict(data.X)
    elif callable(ranker):
        scores = ranker(data.X)
    else:
        scores = ranker
    return check_finite_1d(np.ravel(scores) if np.ndim(scores) > 1 and np.shape(scores)[-1] == 1 else scores,
                           "ranker scores", data.n_docs)


def simulate_clicks(data: RankingDataset, ranker, click_model: PositionBasedClickModel | None = None,
                    n_passes: int = 1, random_state=None, *,
                    relevance_threshold=DEFAULT_RELEVANCE_THRESHOLD, max_shown: int | None = None) -> ClickLog:
    """Simulate ``n_passes`` sessions of every query, ranked by ``ranker``.

    Each pass shows every query once (in data-set order) with its documents
    sorted by the ranker's scores (ties by row order), truncated to the top
    ``max_shown`` if given, and draws clicks from ``click_model`` against the
    binarised relevance ``y >= relevance_threshold``. Sessions without clicks
    are kept (they count in IPS averages). Vectorised over documents; the same
    ``random_state`` gives the same log.

    The log keeps the logging policy (``log.logging_policy``): the
    deterministic ranking, or the Plackett-Luce policy of a
    :class:`click_sim.StochasticRanker`, which samples a fresh ranking for
    every session.

    Parameters
    ----------
    ranker : object with ``predict(X)``, a callable, an array of scores per row, or a StochasticRanker
    click_model : PositionBasedClickModel (default eta=1, eps_minus=0.1, eps_plus=1)

    Examples
    --------
    >>> from click_sim import make_ranking
    >>> data = make_ranking(n_queries=30, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=2, random_state=0)
    >>> log.n_sessions
    60
    """
    if click_model is None:
        click_model = PositionBasedClickModel()
    n_passes = int(n_passes)
    if n_passes < 1:
        raise ValueError(f"n_passes must be >= 1, got {n_passes}")
    stochastic = callable(getattr(ranker, "sample_orders", None))  # e.g. StochasticRanker
    scores = ranker.scores(data) if stochastic else ranker_scores(ranker, data)
    order = order_within_queries(scores, data.query_offsets)
    lengths = data.query_lengths
    positions = np.arange(data.n_docs) - np.repeat(data.query_offsets[:-1], lengths) + 1
    keep = np.ones(data.n_docs, dtype=bool)
    if max_shown is not None:
        if int(max_shown) < 1:
            raise ValueError(f"max_shown must be >= 1, got {max_shown}")
        keep = positions <= max_shown
        order, positions = order[keep], positions[keep]
        lengths = np.minimum(lengths, max_shown)
    rng = np.random.default_rng(random_state)
    if stochastic:
        # A fresh Plackett-Luce ranking per pass, then its clicks; one pass in memory at a time.
        docs = []
        clicks = []
        segments = segment_keys(data.query_offsets)
        for _ in range(n_passes):
            shown = ranker.sample_orders(data, scores, rng, segments=segments)[keep]
            prob = click_model.click_probability(positions, data.y[shown] >= relevance_threshold)
            docs.append(shown)
            clicks.append(rng.random(len(shown)) < prob)
        docs, clicks = np.concatenate(docs), np.concatenate(clicks)
        policy = ranker.logging_policy(scores, max_shown)
    else:
        relevant = data.y[order] >= relevance_threshold
        prob = click_model.click_probability(positions, relevant)
        # One pass at a time keeps memory at one pass of random numbers.
        clicks = np.concatenate([rng.random(len(order)) < prob for _ in range(n_passes)])
        docs = np.tile(order, n_passes)
        policy = PlackettLucePolicy(scores, 0.0, max_shown)  # deterministic: exact expected examination
    session_query = np.tile(np.arange(data.n_queries), n_passes)
    offsets = offsets_from_lengths(np.tile(lengths, n_passes))
    return ClickLog(data, session_query, offsets, docs, clicks, logging_policy=policy)
