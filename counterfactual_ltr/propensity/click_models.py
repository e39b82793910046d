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

from . import _cascade_em as em
from ._click_em import pbm_em
from .._docs import fill_doc
from .._validation import check_bool, check_int, check_real
from ..logs.clicklog import ClickLog
from ..ids import factorize, format_id, id_column, match
from ._results import EstimatedPropensity, IdentificationWarning
from ..examination.propensity_models import as_propensity_model, propensities_at

__all__ = ["PositionBasedModel", "RankOnlyModel", "DocumentOnlyModel", "CascadeModel", "UserBrowsingModel",
           "DependentClickModel", "DynamicBayesianNetworkModel", "SimplifiedDBNModel", "CascadePropensity"]

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


def _probabilities(value, name: str, owner: str, shape: tuple) -> np.ndarray:
    """``value`` as float64 of ``shape``, every entry a probability, or a ValueError naming it."""
    if np.asarray(value).dtype == bool:           # True is not a probability of 1 but a mistaken argument
        raise ValueError(f"{owner}.from_parameters: {name} must be numbers, got booleans {value!r:.80}")
    try:
        values = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{owner}.from_parameters: {name} must be numbers, got {value!r:.80}") from None
    if values.shape != shape or 0 in shape:
        raise ValueError(f"{owner}.from_parameters: {name} must have shape {shape} (non-empty), got {values.shape}")
    bad = ~(np.isfinite(values) & (values >= 0) & (values <= 1))
    if bad.any():
        at = np.argwhere(bad)[0] if values.ndim else ()
        raise ValueError(f"{owner}.from_parameters: {name} must be probabilities in [0, 1]; "
                         f"{name}{list(map(int, at)) if len(at) else ''} is {float(values[tuple(at)])}")
    return values


def _given_ids(query_ids, doc_ids, owner: str) -> tuple:
    """The given (query id, document id) pairs as a log keeps its ids, or a ValueError naming the column.

    Read as a log reads an id column (:func:`~counterfactual_ltr.ids.id_column`): integers stay
    integers and strings strings, so the pairs match a log by the same ids as a fitted model's do
    (``1`` and ``"1"`` are different ids). A column mixing strings with numbers is refused rather
    than made text, which would match a log whose id is ``"1"`` and miss one whose id is ``1``.
    """
    import pandas as pd

    columns = {}
    for label, ids in (("query_ids", query_ids), ("doc_ids", doc_ids)):
        if isinstance(ids, (pd.Series, pd.Index, pd.api.extensions.ExtensionArray)):
            columns[label] = pd.Series(ids, copy=False).reset_index(drop=True)
        elif isinstance(ids, np.ndarray):
            columns[label] = pd.Series(ids.ravel())
        else:
            columns[label] = pd.Series(list(np.ravel(np.asarray(ids, dtype=object))), dtype=None)
    n, m = len(columns["query_ids"]), len(columns["doc_ids"])
    if n != m or n == 0:
        raise ValueError(f"{owner}.from_parameters: query_ids and doc_ids must be one non-empty entry per pair "
                         f"(got {n} and {m})")
    frame = pd.DataFrame(columns)
    try:
        return tuple(id_column(frame, label) for label in columns)
    except ValueError as err:
        raise ValueError(f"{owner}.from_parameters: {str(err).replace('frame row', 'entry')}; give each id "
                         "column one type, the type the logs' ids have") from None


def _refuse_repeated_pairs(keys, alpha, owner: str) -> None:
    """ValueError naming the first (query, document) pair given more than once: a pair has one set of parameters."""
    (q, _), (d, docs) = (factorize(ids) for ids in keys)
    pair = q * len(docs) + d
    _, first_of, inverse = np.unique(pair, return_index=True, return_inverse=True)
    again = np.flatnonzero(first_of[inverse] != np.arange(len(pair)))
    if again.size:
        i = int(again[0])
        first = int(first_of[inverse][i])
        same = "the same alpha" if alpha[first] == alpha[i] else f"alpha {alpha[first]:g} and {alpha[i]:g}"
        raise ValueError(f"{owner}.from_parameters: the pair (query {format_id(keys[0][i])}, document "
                         f"{format_id(keys[1][i])}) is given twice, at entries {first} and {i} ({same}); "
                         "give each (query, document) pair once")


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

    def _marginal_click_probability(self, log) -> np.ndarray:
        """``P(click)`` of every shown result not conditioned on other clicks (what perplexity scores)."""
        return self._click_probability(log)

    def predict_click_proba(self, log) -> np.ndarray:
        """The model's probability of a click on every shown result of ``log``, given the clicks above it.

        For a model whose clicks do not depend on each other (position-based, click-rate baselines)
        it is the click probability itself; for a cascade model it is ``P(C_r = 1 | C_<r)``, the
        factor of the chain rule that ``log_likelihood`` sums.

        Parameters
        ----------
        log : ClickLog

        Returns
        -------
        ndarray (n_items,)
        """
        log = _check_log(log, "predict_click_proba")
        return np.asarray(self._click_probability(log), dtype=np.float64)

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

        ``P(click)`` is the model's click probability not conditioned on the page's other clicks
        (Chuklin, Markov and de Rijke 2015, sec. 5.3, and PyClick's ``Perplexity``); for the
        position-based model and the click-rate baselines it is the same as the conditional one.

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
        by_position = check_bool(by_position, "by_position")
        p = np.clip(self._marginal_click_probability(log), _EPS, 1 - _EPS)
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


_CASCADE_PARAMS = {"cascade_params": """Parameters
----------
prior_strength : float >= 0, default 5.0
    Pseudo-observations of the Beta prior on every per-document probability (attractiveness,
    and satisfaction for DBN/SDBN), at the pooled estimate over the training log (0: plain
    maximum likelihood, which gives a document shown once and clicked ``alpha = 1``). The
    default is the position-based model's; on the held-out pages of ``bench_pyclick`` (TREC and
    a sparse simulated log) 5 predicted better than 0.5, 1 or 2 for every model
    (``docs/click-models.md``).
max_iter : int, default 1000
    Most EM iterations (a ``ConvergenceWarning`` if they do not converge).
tol : float, default 1e-7
    Stop when the mean log-likelihood per shown result changes by less than this.""",
                   "method_param": """method : {"counting", "em"}, default "counting"
    ``"counting"``: the closed-form maximum of the likelihood with the user stopping at a page's
    last click (Chuklin, Markov and de Rijke 2015, sec. 4.2; PyClick's estimator; ``max_iter`` and
    ``tol`` unused). ``"em"``: EM on the model's own likelihood, in which the user may have gone
    on below the last click without clicking (sec. 4.3). Counting is the default because its
    held-out perplexity was the better one on both splits of ``bench_pyclick`` (TREC Session 2014
    and DBN clicks), in a third to a sixth of EM's time; EM has the better conditional log-likelihood
    everywhere, the better perplexity on clicks simulated from the model itself, and recovers its
    parameters where counting is biased (``docs/click-models.md``)."""}


def _check_method(model) -> str:
    if model.method not in ("em", "counting"):
        raise ValueError(f"{type(model).__name__}: method must be 'em' or 'counting', got {model.method!r}")
    return model.method


class _CascadeModel(_ClickModel):
    """Shared fitting and prediction of the cascade family over a session x rank grid (``_cascade_em``).

    A (query, document) pair never seen in training gets the prior: ``alpha_prior_`` (the pooled
    attractiveness of the training log, the Beta prior's mean) and, for DBN/SDBN, ``sigma_prior_``.
    """

    _name = ""

    def __init__(self, prior_strength: float = 5.0, max_iter: int = 1000, tol: float = 1e-7):
        self.prior_strength = prior_strength
        self.max_iter = max_iter
        self.tol = tol

    def _check_params(self):
        return (check_real(self.prior_strength, "prior_strength", min_value=0),
                check_int(self.max_iter, "max_iter", min_value=1),
                check_real(self.tol, "tol", min_value=0, include_min=False))

    def fit(self, log, y=None):
        """Fit the model's parameters to the clicks of ``log`` (raw or joined to a data set).

        Parameters
        ----------
        log : ClickLog
            The training sessions (pages).
        y : None
            Ignored (scikit-learn's signature).

        Returns
        -------
        self
        """
        log = _check_log(log, f"{type(self).__name__}.fit")
        s, max_iter, tol = self._check_params()
        if log.n_clicks == 0 and self._given:       # CM has no parameter beyond attractiveness: 0 is its estimate
            names = " and ".join(f"{name}_" for name in self._given)
            warnings.warn(f"{type(self).__name__}: the log has no clicks, so {names} (what happens after a click "
                          "and how far users read) are not identified by it: their values come from the prior and "
                          "the estimator's start, not from the clicks", IdentificationWarning, stacklevel=2)
        g = em.grid(log.session_offsets, log.positions)
        R = em._spread(g, log.docs, fill=0, dtype=np.int64)
        C = em._spread(g, log.clicks.astype(np.float64))
        K = int(log.positions.max())
        fit = self._fit_grid(em, R, C, g["mask"], g["pos"], log.n_rows, K, s, max_iter, tol)
        self.n_iter_, self.converged_ = fit["n_iter"], fit["converged"]
        self.loglik_history_ = np.asarray(fit.get("history", []))
        if not self.converged_:
            warnings.warn(f"{type(self).__name__} did not converge in max_iter={max_iter} iterations "
                          f"(tol={tol})", ConvergenceWarning, stacklevel=2)
        never = np.bincount(log.docs, minlength=log.n_rows) == 0
        self.alpha_prior_ = float(fit["mu"])
        self.alpha_ = np.where(never, self.alpha_prior_, fit["alpha"])
        if "sigma" in fit:
            clicked_rows = np.bincount(log.docs, weights=log.clicks, minlength=log.n_rows) > 0
            self.sigma_prior_ = float(fit["mu_sigma"])
            self.sigma_ = np.where(clicked_rows | (s > 0), fit["sigma"], self.sigma_prior_)
            self.sigma_[never] = self.sigma_prior_
        self.row_keys_ = log.row_keys()
        return self

    def _params(self):   # pragma: no cover - each model defines it
        raise NotImplementedError

    #: What :meth:`from_parameters` takes besides ``alpha``: name -> shape ("pairs", "scalar", "K", "K x K+1").
    _given: dict = {}

    @classmethod
    def from_parameters(cls, query_ids, doc_ids, alpha, *, alpha_prior=None, **parameters):
        """The model with given parameters instead of fitted ones.

        For parameters that come from elsewhere: the true users of a simulation (what a fitted
        model would give with no estimation error), another system's estimates, or a fitted model's
        parameters edited. The model predicts clicks, scores logs and gives cascade-aware
        propensities (:class:`CascadePropensity`) as a fitted one does; a log's results are matched
        to the given pairs by their ids, and a pair not given gets ``alpha_prior``.

        Parameters
        ----------
        query_ids, doc_ids : array-like (n_pairs,)
            The (query id, document id) of every pair, e.g. ``log.row_keys()`` of a log joined to a
            data set (one pair per row of the data set). Each pair once; each column of one type,
            integers or strings, matched to a log's ids by value and type (``1`` is not ``"1"``).
        alpha : array-like (n_pairs,) of probabilities
            Attractiveness of each pair.
        alpha_prior : float in [0, 1], optional
            Attractiveness of a pair not given (default: the mean of ``alpha``).
        **parameters
            The model's other parameters, named as its fitted attributes without the trailing
            underscore: UBM ``gamma`` (K, K + 1); DCM ``lambda`` (K,), passed as
            ``**{"lambda": ...}`` or ``lambda_=``; DBN ``sigma`` (n_pairs,) and ``gamma`` (a float);
            SDBN ``sigma``; DBN and SDBN take ``sigma_prior`` (default: the mean of ``sigma``).

        Returns
        -------
        model
            Ready to use, with ``n_iter_ = 0`` (nothing was fitted).

        Notes
        -----
        In the example, the result below the skip is examined with ``0.9 P(E_2 = 1 | C_2 = 0) =
        0.9 (0.36 x 0.5) / (0.36 x 0.5 + 0.64) = 0.198``: a skip is also evidence that the user had
        stopped.

        Examples
        --------
        >>> from counterfactual_ltr import ClickLog
        >>> log = ClickLog.from_events({"query": ["q"] * 3, "doc": ["a", "b", "c"], "position": [1, 2, 3],
        ...                             "click": [1, 0, 0]})
        >>> users = DynamicBayesianNetworkModel.from_parameters(["q", "q", "q"], ["a", "b", "c"], [0.5, 0.5, 0.5],
        ...                                                     sigma=[0.6, 0.6, 0.6], gamma=0.9)
        >>> users.predict_examination_proba(log).round(3).tolist()   # (1 - 0.6) 0.9 after the click; the skip
        [1.0, 0.36, 0.198]
        """
        name = cls.__name__
        given = {("lambda" if key == "lambda_" else key): value for key, value in parameters.items()}
        allowed = dict(cls._given, **({"sigma_prior": "scalar"} if "sigma" in cls._given else {}))
        unknown = sorted(set(given) - set(allowed))
        missing = sorted(set(cls._given) - set(given))
        if unknown or missing:
            raise ValueError(f"{name}.from_parameters takes alpha" + "".join(f", {k}" for k in allowed)
                             + (f"; {unknown[0]!r} is not one of them" if unknown else f"; {missing[0]!r} is missing"))
        keys = _given_ids(query_ids, doc_ids, name)
        n = len(keys[0])
        model = cls()
        model.row_keys_ = keys
        model.alpha_ = _probabilities(alpha, "alpha", name, (n,))
        _refuse_repeated_pairs(keys, model.alpha_, name)
        model.alpha_prior_ = float(_probabilities(model.alpha_.mean() if alpha_prior is None else alpha_prior,
                                                  "alpha_prior", name, ()))
        for key, shape in cls._given.items():
            K = np.shape(given[key])[0] if np.ndim(given[key]) >= 1 else 0      # positions, for "K" shapes
            want = {"pairs": (n,), "scalar": (), "K": (K,), "K x K+1": (K, K + 1)}[shape]
            value = _probabilities(given[key], key, name, want)
            setattr(model, key + "_", float(value) if shape == "scalar" else value)
        if "sigma" in cls._given:
            prior = given.get("sigma_prior", model.sigma_.mean())
            model.sigma_prior_ = float(_probabilities(prior, "sigma_prior", name, ()))
        if getattr(cls, "_fixed_gamma", None) is not None:     # SDBN: gamma is 1 by definition
            model.gamma_ = cls._fixed_gamma
        model.n_iter_, model.converged_, model.loglik_history_ = 0, True, np.zeros(0)
        return model

    def _tables(self, log):
        log = _check_log(log, type(self).__name__)
        if not hasattr(self, "alpha_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet: call fit(log) first")
        index = self._row_index(log)[log.docs]
        seen = index >= 0
        at = np.maximum(index, 0)
        g = em.grid(log.session_offsets, log.positions)
        A = em._spread(g, np.where(seen, self.alpha_[at], self.alpha_prior_))
        params = self._params()
        if hasattr(self, "sigma_"):
            params["Sg"] = em._spread(g, np.where(seen, self.sigma_[at], self.sigma_prior_))
        C = em._spread(g, log.clicks.astype(np.float64))
        return em, g, A, C, params

    def _click_probability(self, log) -> np.ndarray:
        em, g, A, C, params = self._tables(log)
        _, P = em.conditional(self._name, A, C, g["mask"], g["pos"], **params)
        return P[g["at"]]

    def _marginal_click_probability(self, log) -> np.ndarray:
        em, g, A, _, params = self._tables(log)
        return em.marginal(self._name, A, g["mask"], g["pos"], **params)[g["at"]]

    def predict_examination_proba(self, log) -> np.ndarray:
        """``P(E_r = 1 | C_<r)``: the examination of every shown result given the clicks above it.

        This is the propensity of a click there in the sense of Vardasbi et al. (SIGIR 2020):
        it depends on the session, not on the position alone.

        Parameters
        ----------
        log : ClickLog

        Returns
        -------
        ndarray (n_items,)
        """
        em, g, A, C, params = self._tables(log)
        E, _ = em.conditional(self._name, A, C, g["mask"], g["pos"], **params)
        return E[g["at"]]


@fill_doc(_CASCADE_PARAMS)
class CascadeModel(_CascadeModel):
    """The cascade model (CM): the user scans down, clicks the first attractive result and stops.

    ``P(E_1 = 1) = 1``, ``P(C_r = 1 | E_r = 1) = alpha_qd``, ``E_{r+1} = E_r (1 - C_r)`` (Craswell et
    al. 2008; Chuklin, Markov and de Rijke 2015, sec. 3.3). Fitted in closed form (sec. 4.2):
    ``alpha_qd`` is the click rate of the pair over the results up to a page's first click. A click
    below the first has probability 0 under CM (scored at 1e-10 in the likelihood).

    {cascade_params}

    Attributes
    ----------
    alpha_ : ndarray (n_rows,)
        Attractiveness of every (query, document) of the training log.
    alpha_prior_ : float
        Attractiveness of a pair never seen in training (the pooled rate).
    row_keys_ : tuple of arrays
    n_iter_ : int
        1 (closed form).
    converged_ : bool

    Examples
    --------
    >>> from counterfactual_ltr import ClickLog
    >>> log = ClickLog.from_events({"query": ["q"] * 4, "doc": [1, 2, 2, 1], "position": [1, 2, 1, 2],
    ...                             "click": [0, 1, 1, 0]})
    >>> CascadeModel(prior_strength=0).fit(log).alpha_.round(6).tolist()     # kept inside (0, 1) by 1e-10
    [0.0, 1.0]
    """

    _name = "cm"

    def _fit_grid(self, em, R, C, mask, pos, n_rows, K, s, max_iter, tol):
        alpha, mu = em.cm_fit(R, C, mask, n_rows, s)
        return {"alpha": alpha, "mu": mu, "n_iter": 1, "converged": True}

    def _params(self):
        return {}


@fill_doc(_CASCADE_PARAMS)
class UserBrowsingModel(_CascadeModel):
    """The user browsing model (UBM): examination depends on the position and the last click above.

    ``P(C_r = 1 | C_<r) = gamma[r, r'] alpha_qd`` with ``r'`` the position of the last click above
    ``r`` (0 without one) (Dupret and Piwowarski 2008; Chuklin, Markov and de Rijke 2015, sec. 3.4),
    fitted by EM (sec. 4.3; see ``_cascade_em.ubm_em``).

    {cascade_params}

    Attributes
    ----------
    alpha_ : ndarray (n_rows,)
    gamma_ : ndarray (K, K + 1)
        ``gamma_[r - 1, r']``: examination at position ``r`` after a last click at ``r'`` (0: none).
        Entries the log never shows stay at EM's start, 0.5.
    alpha_prior_ : float
    row_keys_ : tuple of arrays
    n_iter_ : int
    converged_ : bool

    Examples
    --------
    >>> from click_sim.cascade import simulate_cascade_events
    >>> from counterfactual_ltr import ClickLog
    >>> frame, _ = simulate_cascade_events(300, "ubm", n_queries=10, n_shown=4, random_state=0)
    >>> model = UserBrowsingModel().fit(ClickLog.from_events(frame, session="session"))
    >>> model.gamma_.shape
    (4, 5)
    """

    _name = "ubm"
    _given = {"gamma": "K x K+1"}

    def _fit_grid(self, em, R, C, mask, pos, n_rows, K, s, max_iter, tol):
        fit = em.ubm_em(R, C, mask, pos, n_rows, K, s, max_iter, tol)
        self.gamma_ = fit["gamma"]
        return fit

    def _params(self):
        return {"gamma": self.gamma_}


@fill_doc(_CASCADE_PARAMS)
class DependentClickModel(_CascadeModel):
    """The dependent click model (DCM): a cascade where the user may go on after a click.

    ``P(E_1 = 1) = 1``; a skipped result passes examination on; after a click at position ``r`` the
    next result is examined with probability ``lambda_r`` (Guo, Liu and Wang 2009; Chuklin, Markov
    and de Rijke 2015, sec. 3.5). Fitted by default in closed form (sec. 4.2, ``_cascade_em.dcm_counts``):
    every result down to a page's last click ``l`` counts as examined and the user as stopped at
    ``l``, so ``alpha_qd = clicks / impressions at or above the last click`` (every impression of
    a page without clicks counts) and ``lambda_r = 1 - (last clicks at r) / (clicks at r)``, with
    the Beta prior of ``prior_strength`` on ``alpha``; or by EM on the full likelihood
    (``method="em"``, sec. 4.3, ``_cascade_em.dcm_em``).

    {cascade_params, method_param}

    Attributes
    ----------
    alpha_ : ndarray (n_rows,)
    lambda_ : ndarray (K,)
        Probability of examining on after a click at positions ``1..K`` (0.5 where training has no click).
    alpha_prior_ : float
    row_keys_ : tuple of arrays
    n_iter_ : int
        EM iterations (1 with ``method="counting"``).
    converged_ : bool

    Examples
    --------
    >>> from click_sim.cascade import simulate_cascade_events
    >>> from counterfactual_ltr import ClickLog
    >>> frame, _ = simulate_cascade_events(300, "dcm", n_queries=10, n_shown=4, random_state=0)
    >>> log = ClickLog.from_events(frame, session="session")
    >>> model = DependentClickModel().fit(log)           # closed form: one pass of counting
    >>> model.lambda_.shape, model.n_iter_
    ((4,), 1)
    >>> em = DependentClickModel(method="em").fit(log)   # the full likelihood: users may go on unseen
    >>> bool(em.lambda_[0] > model.lambda_[0])
    True
    """

    _name = "dcm"
    _given = {"lambda": "K"}

    def __init__(self, prior_strength: float = 5.0, max_iter: int = 1000, tol: float = 1e-7,
                 method: str = "counting"):
        super().__init__(prior_strength, max_iter, tol)
        self.method = method

    def _fit_grid(self, em, R, C, mask, pos, n_rows, K, s, max_iter, tol):
        if _check_method(self) == "counting":
            fit = em.dcm_counts(R, C, mask, pos, n_rows, K, s)
        else:
            fit = em.dcm_em(R, C, mask, pos, n_rows, K, s, max_iter, tol)
        self.lambda_ = fit["lam"]
        return fit

    def _params(self):
        return {"lam": self.lambda_}


@fill_doc(_CASCADE_PARAMS)
class DynamicBayesianNetworkModel(_CascadeModel):
    """The dynamic Bayesian network model (DBN): attractiveness, satisfaction and perseverance.

    ``P(E_1 = 1) = 1``, ``C_r = E_r A_r``; after a click the user is satisfied with probability
    ``sigma_qd`` and stops; otherwise (or after a skip) examines the next result with probability
    ``gamma`` (Chapelle and Zhang 2009; Chuklin, Markov and de Rijke 2015, sec. 3.8), fitted by EM
    (see ``_cascade_em.dbn_em``).

    {cascade_params}

    Attributes
    ----------
    alpha_ : ndarray (n_rows,)
    sigma_ : ndarray (n_rows,)
        Satisfaction after a click on every (query, document) of the training log.
    gamma_ : float
        Perseverance (probability of examining the next result when not satisfied).
    alpha_prior_, sigma_prior_ : float
        The values of a pair never seen in training (pooled estimates).
    row_keys_ : tuple of arrays
    n_iter_ : int
    converged_ : bool

    Examples
    --------
    >>> from click_sim.cascade import simulate_cascade_events
    >>> from counterfactual_ltr import ClickLog
    >>> frame, _ = simulate_cascade_events(300, "dbn", n_queries=10, n_shown=4, random_state=0)
    >>> model = DynamicBayesianNetworkModel().fit(ClickLog.from_events(frame, session="session"))
    >>> 0 < model.gamma_ <= 1
    True
    """

    _name = "dbn"
    _fixed_gamma = None
    _given = {"sigma": "pairs", "gamma": "scalar"}

    def _fit_grid(self, em, R, C, mask, pos, n_rows, K, s, max_iter, tol):
        fit = em.dbn_em(R, C, mask, n_rows, s, max_iter, tol, fix_gamma=self._fixed_gamma)
        self.gamma_ = float(fit["gamma"])
        return fit

    def _params(self):
        return {"gamma": self.gamma_}


@fill_doc(_CASCADE_PARAMS)
class SimplifiedDBNModel(DynamicBayesianNetworkModel):
    """The simplified DBN (SDBN): the DBN with ``gamma = 1`` (a user stops only when satisfied).

    Chuklin, Markov and de Rijke 2015, sec. 3.8 and 4.2. Fitted by default in closed form
    (sec. 4.2, ``_cascade_em.sdbn_counts``): every result down to a page's last click counts as
    examined and the user as satisfied there, so ``alpha_qd = clicks / impressions at or above the
    last click`` and ``sigma_qd = (clicks that were a page's last) / clicks``, both with the Beta
    prior of ``prior_strength``. Those counts assume the user never examines below an unsatisfying
    last click, which the model itself does not say; ``method="em"`` maximises the model's own
    likelihood instead (sec. 4.3, ``_cascade_em.sdbn_em``; the fixed point of the DBN's EM with
    ``gamma`` fixed at 1).

    {cascade_params, method_param}

    Attributes
    ----------
    alpha_, sigma_ : ndarray (n_rows,)
    gamma_ : float
        1.
    alpha_prior_, sigma_prior_ : float
    row_keys_ : tuple of arrays
    n_iter_ : int
        EM iterations (1 with ``method="counting"``).
    converged_ : bool

    Examples
    --------
    >>> from click_sim.cascade import simulate_cascade_events
    >>> from counterfactual_ltr import ClickLog
    >>> frame, _ = simulate_cascade_events(300, "sdbn", n_queries=10, n_shown=4, random_state=0)
    >>> log = ClickLog.from_events(frame, session="session")
    >>> model = SimplifiedDBNModel().fit(log)
    >>> model.gamma_, model.n_iter_
    (1.0, 1)
    >>> em = SimplifiedDBNModel(method="em").fit(log)
    >>> bool(em.log_likelihood(log) > model.log_likelihood(log))
    True
    """

    _name = "sdbn"
    _fixed_gamma = 1.0
    _given = {"sigma": "pairs"}

    def __init__(self, prior_strength: float = 5.0, max_iter: int = 1000, tol: float = 1e-7,
                 method: str = "counting"):
        super().__init__(prior_strength, max_iter, tol)
        self.method = method

    def _fit_grid(self, em, R, C, mask, pos, n_rows, K, s, max_iter, tol):
        if _check_method(self) == "counting":
            fit = em.sdbn_counts(R, C, mask, pos, n_rows, K, s)
        else:
            fit = em.sdbn_em(R, C, mask, pos, n_rows, K, s, max_iter, tol)
        self.gamma_ = 1.0
        return fit


class CascadePropensity:
    """Cascade-aware propensities: each shown result's examination given the clicks above it.

    When users behave like a cascade, whether a result was examined depends on the clicks above it
    in its session, not on its position alone; Vardasbi, Oosterhuis and de Rijke (SIGIR 2020,
    "Cascade model-based propensity estimation for counterfactual learning to rank") weight each
    click by ``1 / P(E_r = 1 | C_<r)`` from a fitted cascade model (DBN, DCM; UBM too), which is
    unbiased where position-based IPS is not. A learner's aggregate sums these per-click inverse
    propensities per document (``ClickLog.aggregate``), so every propensity learner takes this
    object where it takes a position-based model, given the log (not a pre-built aggregate, whose
    count table has no sessions).

    Parameters
    ----------
    click_model : fitted UserBrowsingModel, DependentClickModel, DynamicBayesianNetworkModel, ...
        Any fitted model with ``predict_examination_proba(log)``.
    min_propensity : float in (0, 1], default 0.01
        Propensities below are raised to it (clipping bounds the weight of a click the model
        thought nearly unexamined: variance for a little bias).

    Examples
    --------
    >>> from click_sim.cascade import simulate_cascade_events
    >>> from counterfactual_ltr import ClickLog
    >>> frame, _ = simulate_cascade_events(500, "dbn", n_queries=20, n_shown=5, random_state=0)
    >>> log = ClickLog.from_events(frame, session="session")
    >>> q = CascadePropensity(DynamicBayesianNetworkModel().fit(log)).item_propensities(log)
    >>> q.shape == (log.n_items,) and bool((q > 0).all() and (q <= 1).all())
    True
    """

    def __init__(self, click_model, min_propensity: float = 0.01):
        if not callable(getattr(click_model, "predict_examination_proba", None)):
            raise ValueError(f"click_model must be a fitted cascade click model with predict_examination_proba, "
                             f"got {type(click_model).__name__}")
        self.click_model = click_model
        self.min_propensity = check_real(min_propensity, "min_propensity", min_value=0, max_value=1,
                                         include_min=False)

    def item_propensities(self, log) -> np.ndarray:
        """``max(P(E_r = 1 | C_<r), min_propensity)`` of every shown result of ``log``.

        Parameters
        ----------
        log : ClickLog
            The sessions whose results are weighted (raw or joined).

        Returns
        -------
        ndarray (n_items,)
        """
        return np.clip(self.click_model.predict_examination_proba(log), self.min_propensity, 1.0)

    def __repr__(self) -> str:
        return f"CascadePropensity({type(self.click_model).__name__}, min_propensity={self.min_propensity})"
