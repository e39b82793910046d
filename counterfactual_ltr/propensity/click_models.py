"""Click models fitted to a log, checked on held-out clicks: which propensity estimate to trust.

A propensity estimate from a real log cannot be checked against labels it does not have; the
click-model literature's standard check is how well the model predicts clicks it was not
fitted on (Chuklin, Markov and de Rijke, Click Models for Web Search, 2015, ch. 5). Three models,
fitted objects with the same methods:

* :class:`PositionBasedModel`: ``P(click) = theta_rank alpha(query, document)``, fitted by EM
  (see :mod:`counterfactual_ltr.propensity._click_em` for the E and M steps and the Beta prior on ``alpha``
  that keeps EM from overfitting rarely shown documents); ``propensity_`` is its
  ``theta_r / theta_1`` as a propensity model every learner takes.
* :class:`RankOnlyModel`: the click rate by position (no document effect).
* :class:`DocumentOnlyModel`: the click rate by (query, document), shrunk to the overall click
  rate by the same prior (no position effect).

A model fitted on one log applies to another log of the same site: (query, document) pairs are
matched by their original ids (``log.query_ids``, ``log.doc_ids``); pairs never seen in training
get the prior attractiveness ``prior_mean_`` at the position they are shown (the pooled
attractiveness of the training documents shown around there; for :class:`DocumentOnlyModel` the
overall click rate). Positions beyond the largest
one seen in training take the last position's parameter.

``log_likelihood(log)`` is the mean natural-log probability of the observed click or skip per
shown result; ``perplexity(log)`` the mean over positions of ``2 ** (-mean log2 P(observed))``
at that position, and ``perplexity(log, by_position=True)`` the per-position values (1 is
perfect; a model that predicts 0.5 everywhere scores 2).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning

from ._click_em import pbm_em
from .._validation import check_int, check_real
from ..logs.clicklog import ClickLog
from ..ids import match
from ._results import EstimatedPropensity, IdentificationWarning
from ..examination.propensity_models import as_propensity_model, propensities_at

__all__ = ["PositionBasedModel", "RankOnlyModel", "DocumentOnlyModel"]

_EPS = 1e-10


def _check_log(log, what: str) -> ClickLog:
    if not isinstance(log, ClickLog):
        raise TypeError(f"{what} takes a ClickLog, got {type(log).__name__}")
    if log.n_items == 0:
        raise ValueError(f"{what}: the log shows no results")
    return log


def _id_type(ids) -> str:
    """``"integer"`` or ``"string"`` (or ``"other"``) for an id column, by its dtype or its first value."""
    ids = np.asarray(ids)
    if ids.dtype.kind in "iu":
        return "integer"
    if ids.dtype.kind in "US":
        return "string"
    if ids.size and ids.dtype.kind == "O":
        first = ids[0]
        if isinstance(first, str):
            return "string"
        if isinstance(first, (int, np.integer)):
            return "integer"
    return "other"


def _cells(log):
    """Impressions and clicks per (row, position) of the log: row, position, n, c."""
    positions = log.positions.astype(np.int64)
    K = int(positions.max())
    key = log.docs.astype(np.int64) * K + positions - 1
    unique, inverse = np.unique(key, return_inverse=True)
    n = np.bincount(inverse).astype(np.float64)
    c = np.bincount(inverse, weights=log.clicks)
    return unique // K, unique % K + 1, n, c, K


def _unseen_prior(mu, row, k, n, n_rows, K, s) -> np.ndarray:
    """The attractiveness of a pair never seen in training, by position: EM's prior means, shrunk.

    EM's prior mean of group ``g`` (the rows whose mean position rounds to ``g``) is the pooled
    attractiveness of those rows, and goes to 0 (EM's floor, 1e-10) where they got no click: an
    unseen pair shown there would get ``P(click)`` near 0 and cost a held-out click some 33 bits.
    One level up the same Beta prior shrinks it:
    ``mu'_g = (mu_g n_g + s' m) / (n_g + s')``, with ``n_g`` the impressions of group ``g``, ``m =
    sum_g mu_g n_g / sum_g n_g`` the pooled attractiveness of all rows and ``s' = max(s, 1)``
    pseudo-impressions (Chuklin, Markov and de Rijke 2015, sec. 4.2, for the model; a Beta-binomial
    posterior mean for the prior). It is positive whenever the log has a click, and moves little
    where a group has many impressions.
    """
    from ._click_em import prior_group

    home = prior_group(row, k, n, n_rows)
    shown = np.bincount(home, weights=np.bincount(row, weights=n, minlength=n_rows), minlength=K)
    mu = np.asarray(mu, dtype=np.float64)[:K]
    pooled = float(mu @ shown / max(shown.sum(), _EPS))
    strength = max(float(s), 1.0)
    return (mu * shown + strength * pooled) / (shown + strength)


def _warn_unidentified(row, k, c, K) -> None:
    """``IdentificationWarning`` where the log cannot tell position from attractiveness.

    ``theta_k`` is identified (up to the prior) only by clicks and by (query, document) pairs shown at
    ``k`` and at another position: a log without clicks, or where no pair was shown at two positions
    (one page, a deterministic ranker), leaves ``theta`` to the prior and EM's start, and a position
    shown only to pairs never seen elsewhere is fitted the same way.
    """
    if not np.any(c > 0):
        warnings.warn("PositionBasedModel: the log has no clicks; theta and the attractiveness are not identified "
                      "(every click probability goes to 0)", IdentificationWarning, stacklevel=3)
        return
    varied = np.bincount(row)[row] > 1
    if not varied.any():
        warnings.warn("PositionBasedModel: no (query, document) pair is shown at two positions (one page, or a "
                      "ranker that never varies), so theta is not identified by the log: its values come from the "
                      "prior on attractiveness and EM's start, not from the clicks", IdentificationWarning,
                      stacklevel=3)
        return
    support = np.bincount(k[varied] - 1, minlength=K)
    unseen = np.flatnonzero(support == 0) + 1
    if unseen.size:
        warnings.warn(f"PositionBasedModel: positions {', '.join(map(str, unseen))} show no (query, document) pair "
                      "that is also shown at another position: theta there is not identified by the log",
                      IdentificationWarning, stacklevel=3)


class _ClickModel(BaseEstimator):
    """The shared held-out checks: every model gives ``P(click)`` per shown result of a log."""

    def _click_probability(self, log) -> np.ndarray:   # pragma: no cover - each model defines it
        raise NotImplementedError

    def _row_index(self, log) -> np.ndarray:
        """The training row of each of ``log``'s rows, matched by (query id, document id); -1 if unseen.

        ``ValueError`` when no pair matches and an id column is of another type than in training
        (text ids against integer ids: ``"17"`` is not ``17``, so every pair would be scored as unseen).
        """
        if not hasattr(self, "row_keys_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet: call fit(log) first")
        keys = log.row_keys()
        index = match(keys, self.row_keys_)
        if index.size and np.all(index < 0):
            for name, held_out, trained in zip(("query", "document"), keys, self.row_keys_):
                a, b = _id_type(held_out), _id_type(trained)
                if a != b:
                    raise ValueError(f"{type(self).__name__}: the log's {name} ids are {a}s and the training log's "
                                     f"are {b}s, so no (query, document) pair of it was seen in training; read both "
                                     "logs with the same id types (e.g. both CSVs through read_click_log or "
                                     "ClickLog.from_events on frames whose id columns have one type)")
        return index

    def _row_values(self, log, values, default) -> np.ndarray:
        """``values`` of the training rows, looked up for ``log``'s rows by (query id, document id)."""
        index = self._row_index(log)
        return np.where(index >= 0, values[np.maximum(index, 0)], default)

    def _position_values(self, log, values) -> np.ndarray:
        return values[np.minimum(log.positions, len(values)) - 1]

    def log_likelihood(self, log) -> float:
        """Mean natural-log probability of the observed click or skip, per shown result of ``log``.

        Parameters
        ----------
        log : ClickLog
            Held-out (or training) sessions.

        Returns
        -------
        float
        """
        log = _check_log(log, "log_likelihood")
        p = np.clip(self._click_probability(log), _EPS, 1 - _EPS)
        return float(np.mean(np.where(log.clicks, np.log(p), np.log1p(-p))))

    def perplexity(self, log, by_position: bool = False):
        """Click perplexity: the mean over positions of ``2 ** (-mean log2 P(observed click))`` there.

        Parameters
        ----------
        log : ClickLog
            Held-out (or training) sessions.
        by_position : bool, default False
            Return the per-position values (positions ``1..max``; NaN at a position the log
            never shows, which the mean leaves out).

        Returns
        -------
        float, or ndarray (max position,) with ``by_position``
        """
        log = _check_log(log, "perplexity")
        p = np.clip(self._click_probability(log), _EPS, 1 - _EPS)
        log2 = np.where(log.clicks, np.log2(p), np.log2(1 - p))
        k = log.positions.astype(np.int64) - 1
        shown = np.bincount(k)
        with np.errstate(invalid="ignore", divide="ignore"):
            per = 2.0 ** (-np.bincount(k, weights=log2) / shown)
        per[shown == 0] = np.nan
        return per if by_position else float(np.nanmean(per))


class PositionBasedModel(_ClickModel):
    """The position-based click model, ``P(click) = theta_rank alpha(query, document)``, fitted by EM.

    Parameters
    ----------
    prior_strength : float >= 0, default 5.0
        Pseudo-impressions of the Beta prior on every attractiveness, at the pooled
        attractiveness of the documents shown around the same position (0: plain EM, which
        overfits rarely shown documents: see the module docstring).
    max_iter : int, default 10000
        Most EM iterations (a warning if they do not converge).
    tol : float, default 1e-8
        Stop when the mean log-likelihood per impression changes by less than this.
    propensity : propensity model, optional
        Keep ``theta`` at this model's propensities (e.g. an ``estimate_propensities`` result,
        divided by their maximum over ``1..K``) and fit only ``alpha``: the held-out perplexity
        then scores that estimate of the position bias against the others.

    Attributes
    ----------
    theta_ : ndarray (K,)
        Examination probability at positions ``1..K`` (K: the training log's largest position).
    alpha_ : ndarray (n_rows,)
        Attractiveness of every (query, document) of the training log.
    prior_mean_ : ndarray (K,)
        The prior mean of attractiveness by placement: of the training rows whose mean position
        rounds to ``r``, shrunk towards the pooled attractiveness by ``max(prior_strength, 1)``
        pseudo-impressions so that it cannot collapse to 0 (formula in ``_unseen_prior``); a pair
        never seen in training and shown at ``r`` gets ``prior_mean_[r-1]``.
    row_keys_ : tuple of arrays
        (query id, document id) of every entry of ``alpha_``.
    propensity_ : EstimatedPropensity
        ``theta_r / theta_1`` as a propensity model (method ``"pbm"``, no interval: see
        ``estimate_propensities(log, "pbm")`` for bootstrap intervals).
    n_iter_ : int
    converged_ : bool

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import ClickLog
    >>> rng = np.random.default_rng(0)
    >>> docs = np.array([rng.permutation(5) for _ in range(2000)]).ravel()
    >>> positions = np.tile(np.arange(1, 6), 2000)
    >>> clicks = rng.random(docs.size) < (1 / positions) * np.array([0.9, 0.7, 0.5, 0.3, 0.1])[docs]
    >>> log = ClickLog.from_events({"query": ["q"] * docs.size, "doc": docs, "position": positions,
    ...                             "click": clicks})
    >>> model = PositionBasedModel().fit(log)
    >>> np.round(model.propensity_.relative_, 1).tolist()
    [1.0, 0.5, 0.3, 0.3, 0.2]
    >>> model.perplexity(log) < RankOnlyModel().fit(log).perplexity(log)
    True
    """

    def __init__(self, prior_strength: float = 5.0, max_iter: int = 10000, tol: float = 1e-8, propensity=None):
        self.prior_strength = prior_strength
        self.max_iter = max_iter
        self.tol = tol
        self.propensity = propensity

    def fit(self, log, y=None):
        """Fit ``theta`` and ``alpha`` to the log's clicks.

        Parameters
        ----------
        log : ClickLog
            The training sessions (with or without a data set).
        y : None
            Ignored (scikit-learn's signature).

        Returns
        -------
        self
        """
        log = _check_log(log, "PositionBasedModel.fit")
        s = check_real(self.prior_strength, "prior_strength", min_value=0)
        max_iter = check_int(self.max_iter, "max_iter", min_value=1)
        tol = check_real(self.tol, "tol", min_value=0, include_min=False)
        row, k, n, c, K = _cells(log)
        if self.propensity is None:
            _warn_unidentified(row, k, c, K)
        start = None
        if self.propensity is not None:    # theta given: EM fits alpha only, from its usual start
            theta = propensities_at(as_propensity_model(self.propensity), np.arange(1, K + 1))
            start = {"theta": theta / theta.max(), "alpha": np.full(log.n_rows, min(max(c.sum() / n.sum(), 1e-3), 0.5))}
        fit = pbm_em(row, k, n, c, log.n_rows, K, prior_strength=s, max_iter=max_iter, tol=tol, start=start,
                     fix_theta=start is not None)
        if not fit["converged"]:
            warnings.warn(f"PositionBasedModel did not converge in max_iter={max_iter} iterations",
                          ConvergenceWarning, stacklevel=2)
        self.theta_, self.alpha_ = fit["theta"], fit["alpha"]
        self.prior_mean_ = _unseen_prior(fit["mu"], row, k, n, log.n_rows, K, s)
        never = np.bincount(log.docs, minlength=log.n_rows) == 0
        self.alpha_[never] = self.prior_mean_[0]   # rows of the data set never shown (no placement to go by)
        self.n_iter_, self.converged_ = fit["n_iter"], fit["converged"]
        self.row_keys_ = log.row_keys()
        self.propensity_ = EstimatedPropensity(self.theta_ / self.theta_[0], method="pbm", n_sessions=len(log))
        return self

    def _click_probability(self, log) -> np.ndarray:
        index = self._row_index(log)[log.docs]
        alpha = np.where(index >= 0, self.alpha_[np.maximum(index, 0)], self._position_values(log, self.prior_mean_))
        return self._position_values(log, self.theta_) * alpha


class RankOnlyModel(_ClickModel):
    """Click rate by position: ``P(click at rank r)`` the training log's click-through rate there.

    Attributes
    ----------
    ctr_ : ndarray (K,)
        Click rate at positions ``1..K`` (a position never shown in training: the overall rate).

    Examples
    --------
    >>> from counterfactual_ltr import ClickLog
    >>> log = ClickLog.from_events({"query": ["q", "q", "q", "q"], "doc": [1, 2, 2, 1],
    ...                             "position": [1, 2, 1, 2], "click": [1, 0, 0, 0]})
    >>> RankOnlyModel().fit(log).ctr_.tolist()
    [0.5, 0.0]
    """

    def fit(self, log, y=None):
        """Count clicks and impressions per position.

        Parameters
        ----------
        log : ClickLog
            The training sessions.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        log = _check_log(log, "RankOnlyModel.fit")
        k = log.positions.astype(np.int64) - 1
        shown = np.bincount(k)
        clicks = np.bincount(k, weights=log.clicks)
        self.ctr_ = np.where(shown > 0, clicks / np.maximum(shown, 1), log.n_clicks / log.n_items)
        self.row_keys_ = log.row_keys()
        return self

    def _click_probability(self, log) -> np.ndarray:
        if not hasattr(self, "ctr_"):
            raise ValueError("this RankOnlyModel is not fitted yet: call fit(log) first")
        return self._position_values(log, self.ctr_)


class DocumentOnlyModel(_ClickModel):
    """Click rate by (query, document), whatever the position, shrunk to the overall click rate.

    Parameters
    ----------
    prior_strength : float >= 0, default 1.0
        Pseudo-impressions at the overall click rate added to every pair's counts (0: the raw
        rate, which gives a pair never clicked in training probability 0).

    Attributes
    ----------
    ctr_ : ndarray (n_rows,)
        Smoothed click rate of every (query, document) of the training log.
    prior_mean_ : float
        The overall click rate: pairs never seen in training get it.
    row_keys_ : tuple of arrays

    Examples
    --------
    >>> from counterfactual_ltr import ClickLog
    >>> log = ClickLog.from_events({"query": ["q", "q", "q", "q"], "doc": [1, 2, 2, 1],
    ...                             "position": [1, 2, 1, 2], "click": [1, 0, 0, 0]})
    >>> model = DocumentOnlyModel(prior_strength=0).fit(log)
    >>> model.ctr_.tolist(), model.prior_mean_
    ([0.5, 0.0], 0.25)
    """

    def __init__(self, prior_strength: float = 1.0):
        self.prior_strength = prior_strength

    def fit(self, log, y=None):
        """Count clicks and impressions per (query, document).

        Parameters
        ----------
        log : ClickLog
            The training sessions.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        log = _check_log(log, "DocumentOnlyModel.fit")
        s = check_real(self.prior_strength, "prior_strength", min_value=0)
        shown = np.bincount(log.docs, minlength=log.n_rows)
        clicks = np.bincount(log.docs, weights=log.clicks, minlength=log.n_rows)
        self.prior_mean_ = log.n_clicks / log.n_items
        self.ctr_ = np.where(shown > 0, (clicks + s * self.prior_mean_) / np.maximum(shown + s, _EPS),
                             self.prior_mean_)
        self.row_keys_ = log.row_keys()
        return self

    def _click_probability(self, log) -> np.ndarray:
        return self._row_values(log, self.ctr_, self.prior_mean_)[log.docs]
