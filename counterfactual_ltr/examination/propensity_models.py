"""Propensity models: the probability that a user examines a shown position (and trusts it).

A click log stores positions, never propensities; a propensity model turns
positions into propensities when the log is used. So the same log can be
read with the true model or a misspecified one, with or without clipping.

This module holds the models and the checks every consumer of a log applies
(:func:`as_propensity_model`, :func:`propensities_at`, :func:`affine_parts`);
the click log, its aggregates and the estimators import them from here.
Users import them, with their estimation from logs, from
:mod:`counterfactual_ltr.propensity`.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._docs import fill_doc
from .._validation import check_optional_real, check_real

# The sections the per-position methods' docstrings share: a ``{name}`` line is filled from it at import.
_doc = fill_doc({
    "positions_sections": "Parameters\n----------\npositions : array of int >= 1\n    Positions (1 = top).\n\n"
                          "Returns\n-------\nndarray of float64, the shape of ``positions``",
})

__all__ = ["PositionBasedPropensity", "TabularPropensity", "TrustBiasPropensity", "check_propensities",
           "propensities_at",
           "as_propensity_model", "affine_parts", "is_affine", "resolve_propensity"]


def check_propensities(q, where: str = "propensities") -> np.ndarray:
    """``q`` as float64, or ``ValueError`` if any value is outside (0, 1] or not finite.

    Parameters
    ----------
    q : array-like
        Propensities.
    where : str
        What ``q`` is, for the error message.

    Returns
    -------
    array of float64

    Examples
    --------
    >>> check_propensities([1.0, 0.5]).tolist()
    [1.0, 0.5]
    """
    q = _real_array(q, where)
    bad = np.flatnonzero(~(np.isfinite(q) & (q > 0) & (q <= 1)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{where} must lie in (0, 1]; index {i} holds {q.ravel()[i]}")
    return q


def _real_array(values, name: str) -> np.ndarray:
    """``values`` as float64, or ``TypeError`` naming ``name`` (strings, objects and complex numbers are refused)."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64)


def _check_positions(positions) -> np.ndarray:
    positions = np.asarray(positions)
    if positions.size and (not np.issubdtype(positions.dtype, np.integer) or positions.min() < 1):
        raise ValueError("positions must be integers >= 1 (1 = top)")
    return positions


class PositionBasedPropensity:
    """Position-based examination model ``q(r) = (1 / r) ** eta``, optionally clipped.

    Parameters
    ----------
    eta : float >= 0
        Severity of the position bias (0: no bias).
    clip : float in (0, 1], optional
        Propensity floor: ``q = max(q, clip)``. Clipping bounds the IPS
        weights ``1/q`` by ``1/clip`` (less variance, some bias).

    Examples
    --------
    >>> PositionBasedPropensity(eta=1.0)([1, 2, 4]).tolist()
    [1.0, 0.5, 0.25]
    >>> PositionBasedPropensity(eta=1.0, clip=0.4)([1, 2, 4]).tolist()
    [1.0, 0.5, 0.4]
    """

    def __init__(self, eta: float = 1.0, clip: float | None = None):
        self.eta = check_real(eta, "eta", min_value=0.0)
        self.clip = check_optional_real(clip, "clip (propensity floor)", min_value=0.0, include_min=False,
                                        max_value=1.0)

    def __call__(self, positions) -> np.ndarray:
        positions = _check_positions(positions)
        q = np.power(positions.astype(np.float64), -self.eta)
        if self.clip is not None:
            np.maximum(q, self.clip, out=q)
        return q

    def __repr__(self) -> str:
        clip = "" if self.clip is None else f", clip={self.clip}"
        return f"PositionBasedPropensity(eta={self.eta}{clip})"

    def __eq__(self, other) -> bool:
        return isinstance(other, PositionBasedPropensity) and (self.eta, self.clip) == (other.eta, other.clip)

    def __hash__(self):
        return hash((self.eta, self.clip))


class TabularPropensity:
    """Propensity per position from a table: ``q(r) = values[r - 1]`` (e.g. estimated from logs).

    Positions beyond the table get the last value.

    Parameters
    ----------
    values : sequence of float in (0, 1]
        Propensity of positions 1, 2, ...

    Examples
    --------
    >>> TabularPropensity([1.0, 0.6, 0.3])([1, 3, 5]).tolist()
    [1.0, 0.3, 0.3]
    """

    def __init__(self, values):
        self.values = check_propensities(np.ravel(values), "TabularPropensity values")
        if self.values.size == 0:
            raise ValueError("TabularPropensity needs at least one value")

    def __call__(self, positions) -> np.ndarray:
        positions = _check_positions(positions)
        return self.values[np.minimum(positions, len(self.values)) - 1]

    def __repr__(self) -> str:
        return f"TabularPropensity({self.values.tolist()})"


def _per_position(values, name: str, *, low_open: bool) -> np.ndarray:
    values = np.atleast_1d(_real_array(values, name))
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{name} must be a scalar or a non-empty 1-D sequence per position")
    bad = np.flatnonzero(~(np.isfinite(values) & ((values > 0) if low_open else (values >= 0)) & (values <= 1)))
    if bad.size:
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise ValueError(f"{name} must lie in {interval}; position {bad[0] + 1} holds {values[bad[0]]}")
    return values


def _at_positions(values: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Per-position table lookup; positions beyond the table take its last value."""
    return values[np.minimum(positions, len(values)) - 1]


class TrustBiasPropensity:
    """Position bias with trust bias: an affine click model per position (Agarwal et al., WWW 2019).

    A document shown at position ``r`` is examined with probability
    ``theta_r``; an examined relevant document is clicked with probability
    ``eps_plus_r`` and an examined irrelevant one with ``eps_minus_r``. So the
    click probability is affine in the relevance ``R`` (Vardasbi et al., CIKM 2020)::

        P(click | r) = alpha_r * R + beta_r,   alpha_r = theta_r (eps_plus_r - eps_minus_r),
                                               beta_r  = theta_r eps_minus_r

    and ``(click - beta_r) / alpha_r`` is an unbiased estimate of ``R``. A
    plain propensity model is the special case ``alpha = q``, ``beta = 0``
    (see :func:`affine_parts`). Code that can only divide clicks by a
    propensity refuses this model rather than silently ignoring ``beta``.

    Parameters
    ----------
    examination : float or sequence
        ``theta_1 .. theta_K`` in (0, 1]; positions beyond ``K`` take ``theta_K``.
    eps_plus, eps_minus : float or sequence
        Per-position click probabilities of examined relevant / irrelevant
        documents, in [0, 1], with ``eps_plus > eps_minus`` at every position.

    Examples
    --------
    >>> model = TrustBiasPropensity([1.0, 0.5], eps_plus=[1.0, 0.9], eps_minus=[0.2, 0.1])
    >>> model.alpha([1, 2, 3]).round(6).tolist(), model.beta([1, 2, 3]).round(6).tolist()
    ([0.8, 0.4, 0.4], [0.2, 0.05, 0.05])
    """

    is_affine = True

    def __init__(self, examination, eps_plus=1.0, eps_minus=0.0):
        theta = _per_position(examination, "examination", low_open=True)
        plus = _per_position(eps_plus, "eps_plus", low_open=False)
        minus = _per_position(eps_minus, "eps_minus", low_open=False)
        K = max(len(theta), len(plus), len(minus))
        theta, plus, minus = (np.concatenate([v, np.full(K - len(v), v[-1])]) for v in (theta, plus, minus))
        bad = np.flatnonzero(plus <= minus)
        if bad.size:
            r = int(bad[0])
            raise ValueError(f"eps_plus must exceed eps_minus at every position; position {r + 1} has "
                             f"eps_plus={plus[r]}, eps_minus={minus[r]}")
        self.examination = theta
        self.eps_plus = plus
        self.eps_minus = minus

    @_doc
    def alpha(self, positions) -> np.ndarray:
        """``theta_r (eps_plus_r - eps_minus_r)``: the slope of the click probability in relevance.

        {positions_sections}
        """
        r = _check_positions(positions)
        return _at_positions(self.examination * (self.eps_plus - self.eps_minus), r)

    @_doc
    def beta(self, positions) -> np.ndarray:
        """``theta_r eps_minus_r``: the click probability of an irrelevant document.

        {positions_sections}
        """
        r = _check_positions(positions)
        return _at_positions(self.examination * self.eps_minus, r)

    def __call__(self, positions) -> np.ndarray:
        """Examination probabilities ``theta_r`` (not a propensity for plain IPS: see the class docstring)."""
        return _at_positions(self.examination, _check_positions(positions))

    def __repr__(self) -> str:
        return (f"TrustBiasPropensity({self.examination.tolist()}, eps_plus={self.eps_plus.tolist()}, "
                f"eps_minus={self.eps_minus.tolist()})")


def propensities_at(model, positions) -> np.ndarray:
    """``model(positions)`` checked: one real propensity in (0, 1] per position, errors naming the model.

    Parameters
    ----------
    model : callable propensity model
        Maps positions to propensities.
    positions : array of int (1-based)
        Positions to evaluate it at.

    Returns
    -------
    array of float64, the shape of ``positions``

    Examples
    --------
    >>> propensities_at(PositionBasedPropensity(1.0), [1, 4]).tolist()
    [1.0, 0.25]
    """
    if is_session_dependent(model):
        raise ValueError(f"{model!r} gives a propensity per shown result of a log (it depends on the clicks above "
                         "each result), not per position: use it with the log (ClickLog.aggregate, "
                         "ClickLog.propensities, a learner's fit(log)), not with positions or a count table")
    positions = np.asarray(positions)
    q = np.asarray(model(positions))
    if q.dtype.kind not in "iuf":
        raise ValueError(f"the propensity model {model!r} returned values of dtype {q.dtype}, expected real numbers")
    if q.shape != positions.shape:
        raise ValueError(f"the propensity model {model!r} returned shape {q.shape} for {positions.shape[0]} "
                         "positions; it must return one propensity per position")
    return check_propensities(q, f"propensities from the propensity model {model!r}")


def warn_if_extrapolated(model, largest_position: int) -> None:
    """Warn when an estimate of positions ``1..K`` is asked for clicks at positions beyond ``K``.

    An :class:`~counterfactual_ltr.propensity.EstimatedPropensity` continues its table by its fitted
    power law; for clicks the log shows there, that is an assumption the estimate did not measure.

    Parameters
    ----------
    model : propensity model
    largest_position : int
        The largest position at which the log has clicks.

    Examples
    --------
    >>> import warnings
    >>> from counterfactual_ltr.propensity import EstimatedPropensity
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_if_extrapolated(EstimatedPropensity([1.0, 0.5], method="harvest"), 4)
    >>> "positions 3-4" in str(caught[0].message)
    True
    """
    relative = getattr(model, "relative_", None)
    if relative is None or getattr(model, "method_", "given") == "given":
        return
    K = len(relative)
    if largest_position > K:
        warnings.warn(f"the log has clicks at positions up to {largest_position}, but the estimated propensity covers "
                      f"positions 1-{K}: positions {K + 1}-{largest_position} are extrapolated by its power law "
                      f"(1/r)^{model.eta_:.2f}, which the log did not measure there (estimate with "
                      f"max_position={largest_position}, or cut the log to the estimated positions)",
                      UserWarning, stacklevel=3)


def checked_item_propensities(model, log) -> np.ndarray:
    """``model.item_propensities(log)`` checked: one propensity in (0, 1] per shown result, errors naming the model.

    A custom model whose array is one value short would be used misaligned, and a 0 would turn an
    estimate into NaN: both are refused here, where every consumer reads them.

    Parameters
    ----------
    model : object with ``item_propensities(log)``
    log : ClickLog

    Returns
    -------
    ndarray of float64, shape (log.n_items,)

    Examples
    --------
    >>> import numpy as np
    >>> from counterfactual_ltr import ClickLog
    >>> class Half:
    ...     def item_propensities(self, log):
    ...         return np.full(log.n_items, 0.5)
    >>> log = ClickLog.from_events({"query": [0, 0], "doc": [1, 2], "position": [1, 2], "click": [1, 0]})
    >>> checked_item_propensities(Half(), log).tolist()
    [0.5, 0.5]
    """
    q = np.asarray(model.item_propensities(log), dtype=np.float64)
    if q.shape != (log.n_items,):
        raise ValueError(f"{type(model).__name__}.item_propensities(log) returned shape {q.shape}: it must give one "
                         f"propensity per shown result of the log ({log.n_items},), in the log's order")
    return check_propensities(q, f"the propensities of {type(model).__name__}.item_propensities(log)")


def is_session_dependent(model) -> bool:
    """Whether ``model`` gives propensities per shown result of a log (``item_propensities(log)``).

    Such a model (``counterfactual_ltr.propensity.CascadePropensity``) depends on the clicks above
    each result, so it needs the log's sessions, not positions alone.

    Parameters
    ----------
    model : object

    Returns
    -------
    bool
    """
    return callable(getattr(model, "item_propensities", None))


def is_affine(model) -> bool:
    """Whether ``model`` is an affine (trust-bias) click model rather than a plain propensity.

    Parameters
    ----------
    model : object
        A propensity model or anything else.

    Returns
    -------
    bool

    Examples
    --------
    >>> is_affine(PositionBasedPropensity(1.0)), is_affine(TrustBiasPropensity([1.0, 0.5], 1.0, 0.1))
    (False, True)
    """
    return bool(getattr(model, "is_affine", False))


def affine_parts(model, positions):
    """``(alpha, beta)`` per position: ``(q, 0)`` for a plain propensity model.

    The affine estimate of relevance is ``(click - beta) / alpha``; with
    ``beta = 0`` it is ordinary inverse propensity weighting.

    Parameters
    ----------
    model : None, float or propensity model (plain or trust-bias)
        As :func:`as_propensity_model` takes it.
    positions : array of int >= 1
        Positions (1 = top).

    Returns
    -------
    alpha, beta : arrays like ``positions``

    Examples
    --------
    >>> affine_parts(PositionBasedPropensity(1.0), [1, 2])[0].tolist()
    [1.0, 0.5]
    """
    model = as_propensity_model(model)
    if is_affine(model):
        alpha = check_propensities(model.alpha(positions), "alpha of the trust-bias model")
        return alpha, np.asarray(model.beta(positions), dtype=np.float64)
    q = propensities_at(model, positions)     # a per-result (cascade) model is refused there, with why
    return check_propensities(q, "propensities from the propensity model"), np.zeros_like(q)


def as_propensity_model(propensity):
    """``None`` -> ``PositionBasedPropensity(1.0)``; a number -> eta; a model is returned as is.

    Parameters
    ----------
    propensity : None, float (eta) or propensity model
        What a ``propensity=`` parameter was given.

    Returns
    -------
    propensity model (callable on positions)

    Examples
    --------
    >>> as_propensity_model(0.5)
    PositionBasedPropensity(eta=0.5)
    """
    if propensity is None:
        return PositionBasedPropensity(1.0)
    if isinstance(propensity, (bool, np.bool_)):
        raise TypeError(f"propensity must be a number (eta) or a propensity model, got {propensity!r}")
    if isinstance(propensity, (int, float, np.number)):
        return PositionBasedPropensity(float(propensity))
    if is_session_dependent(propensity):
        return propensity
    if not callable(propensity):
        raise ValueError(f"propensity must be a propensity model (callable on positions), got {propensity!r}")
    return propensity


def resolve_propensity(propensity=None, *rankers, default=None):
    """The examination model an estimate uses, and where it came from: one rule for logs and aggregates.

    An explicit ``propensity`` wins; else the propensity the rankers carry (a
    fitted estimator's ``propensity`` parameter: what it was trained under,
    ``None`` meaning eta = 1), which must then be the same for all of them;
    else ``default`` (``None``: ``PositionBasedPropensity(1.0)``; a click
    aggregate passes the model its weights were computed under). Score arrays
    and rankers without a ``propensity`` parameter carry none.

    Parameters
    ----------
    propensity : None, float (eta) or propensity model, default None
        What the caller's ``propensity=`` was given.
    *rankers : rankers or score arrays
        The rankers estimated on the same log.
    default : None, float or propensity model, default None
        The model when neither of the above gives one.

    Returns
    -------
    model : propensity model
    source : str
        ``"given"``, ``"the rankers' own"`` or ``"default"``.

    Raises
    ------
    ValueError
        If no ``propensity`` is given and the rankers carry different ones.

    Examples
    --------
    >>> from counterfactual_ltr.estimators import SVMPropDCG
    >>> resolve_propensity(None, SVMPropDCG(propensity=0.5))
    (PositionBasedPropensity(eta=0.5), "the rankers' own")
    >>> resolve_propensity(2.0, SVMPropDCG(propensity=0.5))
    (PositionBasedPropensity(eta=2.0), 'given')
    >>> resolve_propensity(None, [0.3, 0.1])
    (PositionBasedPropensity(eta=1.0), 'default')
    """
    if propensity is not None:
        return as_propensity_model(propensity), "given"
    carried = [as_propensity_model(r.propensity) for r in rankers
               if hasattr(r, "predict") and hasattr(r, "get_params") and "propensity" in r.get_params(deep=False)]
    if carried:
        if len({repr(m) for m in carried}) > 1:
            raise ValueError("the rankers were trained under different propensity models "
                             f"({', '.join(sorted({repr(m) for m in carried}))}): an estimate on one log needs the "
                             "log's one examination model; give propensity=...")
        return carried[0], "the rankers' own"
    return as_propensity_model(default), "default"
