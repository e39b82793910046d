"""What the estimators share: turning the argument of ``predict`` into a checked feature matrix."""

from __future__ import annotations

import numpy as np

from ..aggregate import ClickAggregate
from ..clicklog import ClickLog
from ..datasets import RankingDataset


def click_aggregate(log, propensity, estimator: str) -> ClickAggregate:
    """The aggregate a propensity learner trains on, from a :class:`ClickLog` or a :class:`ClickAggregate`.

    Both give the same weights (an aggregate is re-weighted under ``propensity``
    from its count table), so ``fit(log)`` and ``fit(log.aggregate())`` agree exactly.
    """
    if isinstance(log, ClickLog):
        agg = log.aggregate(propensity)
    elif isinstance(log, ClickAggregate):
        agg = log.reweight(propensity)
    else:
        raise ValueError(f"{estimator}.fit needs a ClickLog or a ClickAggregate, got {type(log).__name__}")
    if agg.n_clicks == 0:
        raise ValueError("the click log has no clicks: nothing to learn from")
    return agg


def prediction_matrix(X, n_features: int) -> np.ndarray:
    """``X`` (array, RankingDataset, or ClickLog/ClickAggregate: its data set) as a finite float64 (n, d) array."""
    if isinstance(X, RankingDataset):
        X = X.X
    elif isinstance(X, (ClickLog, ClickAggregate)):
        X = X.data.X
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"X has shape {X.shape}, expected (n, {n_features})")
    bad = np.argwhere(~np.isfinite(X))
    if bad.size:
        raise ValueError(f"X holds a non-finite value at row {bad[0][0]}, column {bad[0][1]}")
    return X
