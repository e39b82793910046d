"""Stochastic logging policies for simulated click logs."""

from __future__ import annotations

import numpy as np

from counterfactual_ltr._validation import check_real
from counterfactual_ltr.examination.logging_policy import PlackettLucePolicy, sample_plackett_luce_orders

from .clicks import ranker_scores

__all__ = ["StochasticRanker"]


class StochasticRanker:
    """A ranker whose every session's ranking is sampled by Plackett-Luce over ``scores / temperature``.

    :func:`click_sim.simulate_clicks` asks it for one ranking per session
    (the Gumbel-max trick, vectorised over all queries of a pass) and stores
    its :class:`~counterfactual_ltr.examination.logging_policy.PlackettLucePolicy` in the
    log, from which the policy-aware estimator computes every document's
    expected examination. ``temperature`` near 0 approaches the deterministic
    ranking; large values approach a uniformly random one.

    Parameters
    ----------
    ranker : object with ``predict(X)``, a callable, or an array of scores per row
        The ranker whose scores are sampled around.
    temperature : float > 0, default 1.0
        Divides the scores before sampling: small values sample close to the
        ranker's own ranking, large values close to a uniform one.

    Examples
    --------
    >>> from click_sim import make_ranking, simulate_clicks
    >>> data = make_ranking(n_queries=20, random_state=0)
    >>> log = simulate_clicks(data, StochasticRanker(data.X[:, 0], temperature=0.5), n_passes=3,
    ...                       random_state=0, max_shown=5)
    >>> log.logging_policy.temperature, log.logging_policy.max_shown, log.n_sessions
    (0.5, 5, 60)
    """

    def __init__(self, ranker, temperature: float = 1.0):
        self.ranker = ranker
        self.temperature = temperature

    def __repr__(self) -> str:
        return f"StochasticRanker({self.ranker!r}, temperature={self.temperature})"

    def scores(self, data) -> np.ndarray:
        """The underlying ranker's scores of every row (validated).

        Parameters
        ----------
        data : RankingDataset
            The rows to score.

        Returns
        -------
        ndarray of float64, shape (n_docs,)
        """
        return ranker_scores(self.ranker, data)

    def _temperature(self) -> float:
        return check_real(self.temperature, "temperature", min_value=0.0, include_min=False)

    def sample_orders(self, data, scores, rng, *, segments=None) -> np.ndarray:
        """One sampled ranking of every query (row indices query by query, best first).

        Parameters
        ----------
        data : RankingDataset
            The queries to rank.
        scores : ndarray of shape (n_docs,)
            The ranker's scores of every row (:meth:`scores`).
        rng : numpy Generator
            Draws the rankings.
        segments : ndarray of shape (n_docs,), optional
            The query index of every row, when the caller has it already.

        Returns
        -------
        ndarray of int64, shape (n_docs,)
        """
        return sample_plackett_luce_orders(scores / self._temperature(), data.query_offsets, rng, segments=segments)

    def logging_policy(self, scores, max_shown=None) -> PlackettLucePolicy:
        """The policy the log keeps: Plackett-Luce over ``scores / temperature``, top ``max_shown`` shown.

        Parameters
        ----------
        scores : ndarray of shape (n_docs,)
            The ranker's scores of every row (:meth:`scores`).
        max_shown : int, optional
            Number of top positions shown (default: the whole list).

        Returns
        -------
        PlackettLucePolicy
        """
        return PlackettLucePolicy(scores, self._temperature(), max_shown)
