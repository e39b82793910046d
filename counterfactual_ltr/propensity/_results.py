"""The results of propensity estimation: :class:`EstimatedPropensity`, :class:`EstimatedTrustBias`, and
:class:`IdentificationWarning`.

Kept apart from :mod:`.estimation` so that the click models (which build an
``EstimatedPropensity``) and the estimation (whose ``"auto"`` scores candidates with the click
models) import them without importing each other.
"""

from __future__ import annotations

import numpy as np

from .._docs import fill_doc
from ..examination.propensity_models import TabularPropensity, TrustBiasPropensity

__all__ = ["EstimatedPropensity", "EstimatedTrustBias", "IdentificationWarning"]


class IdentificationWarning(UserWarning):
    """An estimate whose data cannot tell position from relevance: its value and intervals rest on a model's form.

    Examples
    --------
    >>> issubclass(IdentificationWarning, UserWarning)
    True
    """



def _fit_eta(relative: np.ndarray) -> float:
    """Least-squares power law ``log(theta_r / theta_1) = -eta log r`` over the estimated positions."""
    r = np.arange(1, len(relative) + 1, dtype=np.float64)
    logr = np.log(r)
    return float(-np.sum(logr * np.log(relative)) / np.sum(logr * logr))


def _plot(ax, estimate, lower, upper, truth, label):
    import matplotlib.pyplot as plt

    if ax is None:
        ax = plt.figure(figsize=(5, 3.5)).gca()
    r = np.arange(1, len(estimate) + 1)
    if lower is not None:
        ax.fill_between(r, lower, upper, alpha=0.25, label="95% interval" if label else None)
    ax.plot(r, estimate, "o-", label=label)
    if truth is not None:
        true = np.asarray(truth(r) if callable(truth) else truth, dtype=np.float64)[:len(r)]
        ax.plot(r, true / true[0], "k--", label="truth")
    ax.set_xlabel("position")
    ax.set_ylabel("theta_r / theta_1")
    ax.legend()
    return ax


_doc = fill_doc({"plot": """\
Parameters
----------
ax : matplotlib Axes, optional
    Where to draw (default: a new figure).
truth : array or propensity model, optional
    The true curve, drawn normalised to position 1.

Returns
-------
matplotlib Axes"""})

class EstimatedPropensity(TabularPropensity):
    """Position propensities estimated from a log: ``theta_r / theta_1`` with bootstrap intervals.

    ``values`` are the estimates at positions ``1..K`` divided by their
    maximum (so they lie in (0, 1]; the maximum is position 1 unless the
    curve rises). Beyond ``K`` the fitted power law continues the table:
    ``q(r) = values[K-1] * (K / r) ** eta_``.

    Parameters
    ----------
    relative : array (K,)
        Estimated ``theta_r / theta_1`` at positions ``1..K`` (positive).
    lower, upper : array (K,), optional
        Interval bounds of ``relative``.
    bootstrap : array (n_bootstrap, K), optional
        Bootstrap replicates of ``relative``.
    method : str, default "given"
        The estimation method that made it (``"swap"``, ``"harvest"``, ``"em"``).
    confidence : float, default 0.95
        Level of the interval.
    n_sessions : int, default 0
        Sessions the estimate used.

    Attributes
    ----------
    relative_ : array (K,)
        Estimated ``theta_r / theta_1``.
    lower_, upper_ : array (K,) or None
        Bootstrap percentile interval of ``relative_`` (None without bootstrap).
    confidence_ : float
    eta_ : float
        Least-squares power law fitted to ``relative_``.
    bootstrap_ : array (n_bootstrap, K)
        The bootstrap replicates of ``relative_``.
    method_ : str
    n_sessions_ : int
        Sessions the estimate used.
    support_ : int array (K,) or None
        ``"pbm"``, ``"harvest"``: per position, the (query, document) pairs shown there and at
        another position (what identifies it).
    pair_support_ : int array (K, K) or None
        ``"harvest"``: per position pair, the (query, document) pairs shown at both.
    bootstrap_converged_ : bool array (n_bootstrap,)
        Whether each replicate's fit converged (``"pbm"``; True elsewhere). Replicates that did not
        are kept in ``bootstrap_`` but left out of ``lower_`` and ``upper_``.
    at_cap_ : bool array (K,) or None
        ``"pbm"``: positions whose ``theta`` sits at its bound 1 in the fit on the whole log (there
        the bound, not the log, sets the value; a warning says so).
    borrowed_ : array (K,) or None
        ``"smooth"``: per position, the share of its deviation from the power law that the fit shrinks
        away (0: the log sets it; near 1: it is borrowed from the power law, and its interval is wide).
    recipe_ : dict or None
        ``{"method", "max_position", "options"}`` as given to :func:`estimate_propensities`: what
        :func:`reestimate` refits on a replicate of the log.
    log_fingerprint_ : str or None
        The digest of the log it was estimated from (``log_fingerprint``): a comparison on the same
        log re-estimates it on each resample; on another log it draws its replicates.

    Examples
    --------
    >>> model = EstimatedPropensity([1.0, 0.5, 1 / 3], method="swap")
    >>> model([1, 3, 6]).round(3).tolist(), round(model.eta_, 3)
    ([1.0, 0.333, 0.167], 1.0)
    """

    def __init__(self, relative, lower=None, upper=None, *, bootstrap=None, method="given", confidence=0.95,
                 n_sessions=0):
        relative = np.asarray(relative, dtype=np.float64)
        if relative.ndim != 1 or relative.size < 2 or not np.all(np.isfinite(relative) & (relative > 0)):
            raise ValueError(f"the estimated propensities must be positive and finite at >= 2 positions, "
                             f"got {relative.tolist()}")
        super().__init__(relative / relative.max())
        self.relative_ = relative
        self.lower_ = None if lower is None else np.asarray(lower, dtype=np.float64)
        self.upper_ = None if upper is None else np.asarray(upper, dtype=np.float64)
        self.bootstrap_ = np.empty((0, relative.size)) if bootstrap is None else np.asarray(bootstrap)
        self.confidence_ = confidence
        self.eta_ = _fit_eta(relative)
        self.method_ = method
        self.n_sessions_ = n_sessions
        self.support_ = self.pair_support_ = None
        self.recipe_ = self.at_cap_ = self.borrowed_ = None
        self.log_fingerprint_ = None      # which log it was made from (estimation.log_fingerprint)
        self.bootstrap_converged_ = np.ones(len(self.bootstrap_), dtype=bool)

    def __call__(self, positions) -> np.ndarray:
        q = super().__call__(positions)
        positions = np.asarray(positions)
        K = len(self.values)
        beyond = positions > K
        if np.any(beyond):
            q = q.copy()
            q[beyond] = self.values[-1] * (K / positions[beyond]) ** self.eta_
        return q

    @property
    def rises_at_(self) -> list:
        """The positions where the estimate is above the one before it (empty: it is non-increasing).

        Examples
        --------
        >>> EstimatedPropensity([1.0, 0.4, 0.5, 0.2]).rises_at_
        [3]
        """
        return [int(k) + 2 for k in np.flatnonzero(np.diff(self.relative_) > 0)]

    def tempered(self, strength: float) -> "EstimatedPropensity":
        """The estimate moved towards the upper end of its interval, position by position: tempered click weights.

        ``q_r = relative_r^(1 - s) * upper_r^s`` (geometric interpolation; ``s = strength``):
        at a position the log pins down the interval is narrow and little changes; at one it
        barely identifies, the weight ``1 / q_r`` falls towards the smallest the log supports, so
        a learner fitted under it cannot be turned around by a few heavily weighted clicks
        there. Choose ``strength`` by cross-validation as ``C`` (``cltr fit --tempering``).

        Parameters
        ----------
        strength : float in [0, 1]
            0: the estimate itself; 1: the upper end of its interval.

        Returns
        -------
        EstimatedPropensity
            Without interval or replicates (it is a weighting, not an estimate to evaluate with).

        Examples
        --------
        >>> est = EstimatedPropensity([1.0, 0.25], lower=[1.0, 0.1], upper=[1.0, 1.0], method="harvest")
        >>> est.tempered(0.5).relative_.tolist()
        [1.0, 0.5]
        """
        from .._validation import check_real

        s = check_real(strength, "strength", min_value=0.0, max_value=1.0)
        if s > 0 and self.upper_ is None:
            raise ValueError("tempered: the estimate has no interval (estimate it with n_bootstrap > 0)")
        upper = self.relative_ if self.upper_ is None else np.maximum(self.upper_, self.relative_)
        relative = np.exp((1.0 - s) * np.log(self.relative_) + s * np.log(upper))
        model = EstimatedPropensity(relative / relative[0], method=self.method_, confidence=self.confidence_,
                                    n_sessions=self.n_sessions_)
        model.tempering_ = s
        return model

    @_doc
    def plot(self, ax=None, truth=None):
        """Estimate against position with its interval (and ``truth``: a curve or propensity model).

        {plot}
        """
        return _plot(ax, self.relative_, self.lower_, self.upper_, truth, f"{self.method_} estimate")

    def __repr__(self) -> str:
        return f"EstimatedPropensity(method={self.method_!r}, relative={np.round(self.relative_, 4).tolist()})"


class EstimatedTrustBias(TrustBiasPropensity):
    """A trust-bias model estimated from a log (``"trust_em"``), with bootstrap intervals.

    Parameters
    ----------
    examination, eps_plus, eps_minus : arrays (K,)
        As in :class:`~counterfactual_ltr.propensity.TrustBiasPropensity`.
    intervals : dict, optional
        See ``intervals_``.
    bootstrap : dict of arrays, optional
        Bootstrap replicates of each part, keyed as ``intervals``.
    confidence : float, default 0.95
        Level of the intervals.
    n_sessions : int, default 0
        Sessions the estimate used.

    Attributes
    ----------
    relative_ : array (K,)
        ``theta_r / theta_1``; ``lower_``, ``upper_`` its interval.
    intervals_ : dict
        ``{"examination" | "eps_plus" | "eps_minus" | "alpha" | "beta": (lower, upper)}``.
    eta_ : float
        Power law fitted to ``relative_``.
    a_, b_ : array (K,)
        Identified click rates ``theta_k eps+_k`` and ``theta_k eps-_k``.

    Examples
    --------
    >>> model = EstimatedTrustBias([1.0, 0.5], [0.9, 0.9], [0.3, 0.1])
    >>> model.alpha([1, 2]).round(3).tolist(), round(model.eta_, 3)
    ([0.6, 0.4], 1.0)
    """

    def __init__(self, examination, eps_plus, eps_minus, *, intervals=None, bootstrap=None, confidence=0.95,
                 n_sessions=0):
        super().__init__(examination, eps_plus=eps_plus, eps_minus=eps_minus)
        self.relative_ = self.examination / self.examination[0]
        self.intervals_ = dict(intervals or {})
        self.lower_, self.upper_ = self.intervals_.get("relative", (None, None))
        self.bootstrap_ = {} if bootstrap is None else bootstrap
        self.confidence_ = confidence
        self.eta_ = _fit_eta(self.relative_)
        self.a_ = self.examination * self.eps_plus
        self.b_ = self.examination * self.eps_minus
        self.method_ = "trust_em"
        self.n_sessions_ = n_sessions

    @_doc
    def plot(self, ax=None, truth=None):
        """Examination estimate against position with its interval (and ``truth``: the true examination).

        {plot}
        """
        return _plot(ax, self.relative_, self.lower_, self.upper_, truth, "trust_em estimate")
