"""Click models and simulated click logs."""

from __future__ import annotations

import numpy as np

from counterfactual_ltr._validation import (check_int, check_optional_int, check_probability, check_random_state,
                                           check_real)
from counterfactual_ltr._segments import check_finite_1d, order_within_queries, offsets_from_lengths
from counterfactual_ltr.clicklog import ClickLog
from counterfactual_ltr.datasets import DEFAULT_RELEVANCE_THRESHOLD, RankingDataset
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
        self.eta = check_real(eta, "eta", min_value=0.0)
        self.eps_minus = check_probability(eps_minus, "eps_minus")
        self.eps_plus = check_probability(eps_plus, "eps_plus")
        self.examination = PositionBasedPropensity(self.eta)

    def propensity_model(self) -> PositionBasedPropensity:
        """The true propensity model of this click model."""
        return PositionBasedPropensity(self.eta)

    def click_probability(self, positions, relevant) -> np.ndarray:
        """``p_r * (eps_plus if relevant else eps_minus)``, elementwise."""
        relevant = np.asarray(relevant)
        if relevant.dtype.kind not in "biuf" or not np.all(np.isfinite(relevant)):
            raise ValueError("relevant must hold booleans or finite numbers (non-zero = relevant)")
        relevant = relevant.astype(bool)
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
    kind = np.asarray(scores).dtype.kind
    if kind not in "biuf":
        raise TypeError(f"ranker scores must be real numbers, got dtype {np.asarray(scores).dtype} "
                        f"from {type(ranker).__name__}")
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

    Parameters
    ----------
    ranker : object with ``predict(X)``, a callable, or an array of scores per row
    click_model : PositionBasedClickModel (default eta=1, eps_minus=0.1, eps_plus=1)

    Examples
    --------
    >>> from click_sim import make_ranking
    >>> data = make_ranking(n_queries=30, random_state=0)
    >>> log = simulate_clicks(data, data.X[:, 0], n_passes=2, random_state=0)
    >>> log.n_sessions
    60
    """
    if not isinstance(data, RankingDataset):
        raise TypeError(f"data must be a RankingDataset, got {type(data).__name__}")
    if click_model is None:
        click_model = PositionBasedClickModel()
    if not callable(getattr(click_model, "click_probability", None)):
        raise TypeError(f"click_model must be a click model (with click_probability), got {type(click_model).__name__}")
    n_passes = check_int(n_passes, "n_passes", min_value=1)
    relevance_threshold = check_real(relevance_threshold, "relevance_threshold")
    max_shown = check_optional_int(max_shown, "max_shown", min_value=1)
    rng = check_random_state(random_state)
    scores = ranker_scores(ranker, data)
    order = order_within_queries(scores, data.query_offsets)
    lengths = data.query_lengths
    positions = np.arange(data.n_docs) - np.repeat(data.query_offsets[:-1], lengths) + 1
    if max_shown is not None:
        max_shown = min(max_shown, int(lengths.max()))  # a huge Python int would overflow the comparison
        keep = positions <= max_shown
        order, positions = order[keep], positions[keep]
        lengths = np.minimum(lengths, max_shown)
    relevant = data.y[order] >= relevance_threshold
    prob = click_model.click_probability(positions, relevant)
    # One pass at a time keeps memory at one pass of random numbers.
    n = len(order)
    if n * n_passes > 2**40:
        raise ValueError(f"n_passes={n_passes} would simulate {n * n_passes:.3g} shown documents; too many for memory")
    clicks = np.empty(n * n_passes, dtype=bool)
    for p in range(n_passes):
        np.less(rng.random(n), prob, out=clicks[p * n:(p + 1) * n])
    docs = np.tile(order, n_passes)
    session_query = np.tile(np.arange(data.n_queries), n_passes)
    offsets = offsets_from_lengths(np.tile(lengths, n_passes))
    return ClickLog(data, session_query, offsets, docs, clicks)
