"""One path for a propensity's estimation error: its replicates, their failures, and intervals that count them.

Every consumer that puts an estimated propensity's error into an answer (``compare_rankers``,
``validation_report``, ``cltr evaluate``) takes it from here:

* :func:`replicate_models`: a propensity model per resample of the log's queries. An estimate
  made on this log (its ``recipe_`` and :func:`~counterfactual_ltr.propensity.estimation.log_fingerprint`)
  is re-estimated on each resample, so its error is paired with the comparison's; one made on
  another log gives its own bootstrap replicates; a trust-bias estimate gives its replicates of
  every part. A given propensity has none, and a cascade click model's fit has none: the result
  says why.
* A replicate *fails* when its curve is not finite and at least ``MIN_RELATIVE`` at every
  position (below it a fit's floor, not the log, sets it), when its fit did not converge, or when
  ``"pbm"``'s ``theta`` sits at its bound 1 below position 1. A failure is what the log lacks, not noise to drop:
  :func:`percentile_interval` puts each failed replicate beyond both ends (``-inf`` in the lower
  tail, ``+inf`` in the upper), so a few failures widen the interval and more than ``alpha / 2`` of
  them make it unbounded, a "cannot tell".
* :func:`percentile_spread`: the standard deviation that the central replicates imply (their
  central 68 % half-width), so that one extreme replicate cannot inflate it to thousands.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..examination.propensity_models import TrustBiasPropensity, is_session_dependent

__all__ = ["Replicates", "replicate_models", "percentile_interval", "percentile_spread", "failed_curves",
           "MIN_RELATIVE"]

#: A replicate below this theta_r / theta_1 anywhere has reached a fit's floor, not an examination (a weight
#: of a million): it fails.
MIN_RELATIVE = 1e-6


@dataclass
class Replicates:
    """Propensity models for resamples of a log's queries (``None`` where a replicate failed), and how they were made.

    Parameters
    ----------
    models : list or None
        One propensity model per resample, ``None`` for a failed replicate; ``None`` when the
        propensity has no replicates at all (``how`` says why).
    how : str
        ``"re-estimated"``, ``"replicates of its own log"``, or the reason there are none.

    Examples
    --------
    >>> Replicates([None, None], "re-estimated").n_failed
    2
    """

    models: list | None
    how: str

    @property
    def n_failed(self) -> int:
        """How many replicates failed."""
        return 0 if self.models is None else sum(m is None for m in self.models)


def failed_curves(curves, method: str | None = None) -> np.ndarray:
    """Which rows of ``curves`` are failures (see the module docstring).

    Parameters
    ----------
    curves : array (B, K)
        Replicates of ``theta_r / theta_1`` at positions ``1..K``.
    method : str, optional
        The estimation method (``"pbm"``: a replicate at the bound 1 below position 1 fails too).

    Returns
    -------
    bool array (B,)

    Examples
    --------
    >>> import numpy as np
    >>> failed_curves([[1.0, 0.5], [1.0, np.nan], [1.0, 1e-7], [1.0, 1.0]], "pbm").tolist()
    [False, True, True, True]
    """
    c = np.asarray(curves, dtype=np.float64)
    bad = ~np.all(np.isfinite(c) & (c >= MIN_RELATIVE), axis=1)
    if method == "pbm":       # theta_k = theta_1 = 1: the cap, not the log, sets it
        bad |= np.any(c[:, 1:] >= 1.0 - 1e-9, axis=1)
    return bad


def replicate_models(model, log, query_weights, random_state=None) -> Replicates:
    """A replicate of ``model`` for every row of ``query_weights`` (``(B, log.n_queries)`` resample multiplicities).

    Parameters
    ----------
    model : propensity model
        Estimated (by :func:`~counterfactual_ltr.propensity.estimate_propensities`), or given.
    log : ClickLog
        The log being evaluated.
    query_weights : array (B, log.n_queries)
        The comparison's resamples of the queries.
    random_state : int, Generator or None
        Seeds the replicates that draw (``"smooth"``).

    Returns
    -------
    Replicates

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import PositionBasedPropensity
    >>> replicate_models(PositionBasedPropensity(1.0), None, np.ones((3, 2))).how
    'it is given, not estimated'
    """
    from .estimation import EstimatedPropensity, EstimatedTrustBias, replicate_curves

    if isinstance(model, EstimatedTrustBias):
        boot = getattr(model, "bootstrap_", {}) or {}
        if not all(k in boot for k in ("examination", "eps_plus", "eps_minus")):
            return Replicates(None, "a trust-bias estimate without bootstrap replicates")
        B = query_weights.shape[0]
        rows = np.arange(B) % len(boot["examination"])
        models = []
        for r in rows:
            ex, plus, minus = (np.asarray(boot[k][r], dtype=np.float64) for k in ("examination", "eps_plus",
                                                                                  "eps_minus"))
            try:
                models.append(TrustBiasPropensity(ex, eps_plus=plus, eps_minus=np.minimum(minus, plus - 1e-9)))
            except ValueError:
                models.append(None)
        return Replicates(models, "replicates of its own log")
    if is_session_dependent(model):
        return Replicates(None, f"it is a cascade model's examination per shown result ({model!r}), whose fit has "
                                "no bootstrap replicates")
    curves, how = replicate_curves(model, log, query_weights, random_state=random_state)
    if curves is None:
        return Replicates(None, how)
    method = (getattr(model, "recipe_", None) or {}).get("method", getattr(model, "method_", None))
    bad = failed_curves(curves, method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models = [None if b else EstimatedPropensity(c) for c, b in zip(curves, bad)]
    return Replicates(models, how)


def percentile_interval(values, level: float, n_failed: int = 0) -> tuple[float, float]:
    """The central ``level`` percentile interval of ``values``, with ``n_failed`` replicates beyond both ends.

    Non-finite ``values`` count as failed too. The ends are order statistics taken outwards (no
    interpolation); an end that the failures reach is infinite.

    Parameters
    ----------
    values : array (B,)
        The replicates of a quantity.
    level : float in (0, 1)
        Coverage of the interval.
    n_failed : int, default 0
        Replicates that failed besides ``values``.

    Returns
    -------
    (float, float)

    Examples
    --------
    >>> import numpy as np
    >>> percentile_interval(np.arange(100.0), 0.9)
    (4.0, 95.0)
    >>> lo, hi = percentile_interval(np.arange(100.0), 0.9, n_failed=10)
    >>> bool(np.isinf(lo) and np.isinf(hi))
    True
    """
    v = np.asarray(values, dtype=np.float64)
    finite = v[np.isfinite(v)]
    failed = n_failed + (v.size - finite.size)
    if finite.size == 0:
        return -np.inf, np.inf
    tail = (1.0 - level) / 2
    # outward order statistics (no interpolation towards an infinite failure)
    low = np.quantile(np.r_[np.full(failed, -np.inf), finite], tail, method="lower")
    high = np.quantile(np.r_[finite, np.full(failed, np.inf)], 1.0 - tail, method="higher")
    return float(low), float(high)


def percentile_spread(values, n_failed: int = 0) -> float:
    """A standard deviation read from the central 68 % of the replicates (failures beyond both ends).

    Parameters
    ----------
    values : array (B,)
        The replicates of a quantity.
    n_failed : int, default 0
        Replicates that failed besides ``values``.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(0, 2, 4000)
    >>> round(percentile_spread(x), 1), round(percentile_spread(np.r_[x, 1e9]), 1)
    (2.0, 2.0)
    """
    low, high = percentile_interval(values, 0.6827, n_failed)
    return float((high - low) / 2)
