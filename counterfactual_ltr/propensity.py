"""Observation propensities: the probability that a user examines a shown position.

A click log stores positions, never propensities; a propensity model turns
positions into propensities when the log is used. So the same log can be
read with the true model or a misspecified one, with or without clipping.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PositionBasedPropensity", "TabularPropensity", "check_propensities", "as_propensity_model"]


def check_propensities(q, where: str = "propensities") -> np.ndarray:
    """``q`` as float64, or ``ValueError`` if any value is outside (0, 1] or not finite."""
    q = np.asarray(q, dtype=np.float64)
    bad = np.flatnonzero(~(np.isfinite(q) & (q > 0) & (q <= 1)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{where} must lie in (0, 1]; index {i} holds {q.ravel()[i]}")
    return q


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
        eta = float(eta)
        if not np.isfinite(eta) or eta < 0:
            raise ValueError(f"eta must be a finite number >= 0, got {eta}")
        if clip is not None:
            clip = float(clip)
            if not (0 < clip <= 1):
                raise ValueError(f"clip (propensity floor) must lie in (0, 1], got {clip}")
        self.eta = eta
        self.clip = clip

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


def as_propensity_model(propensity):
    """``None`` -> ``PositionBasedPropensity(1.0)``; a number -> eta; a model is returned as is."""
    if propensity is None:
        return PositionBasedPropensity(1.0)
    if isinstance(propensity, (int, float, np.number)):
        return PositionBasedPropensity(float(propensity))
    if not callable(propensity):
        raise ValueError(f"propensity must be a propensity model (callable on positions), got {propensity!r}")
    return propensity
