"""What the estimators share: turning the argument of ``predict`` into a checked feature matrix."""

from __future__ import annotations

import numpy as np

from ..clicklog import ClickLog
from ..datasets import RankingDataset


def prediction_matrix(X, n_features: int) -> np.ndarray:
    """``X`` (array, RankingDataset, or ClickLog: its data set) as a finite float64 (n, n_features) array."""
    if isinstance(X, RankingDataset):
        X = X.X
    elif isinstance(X, ClickLog):
        X = X.data.X
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"X must be a numeric (n, {n_features}) array, a RankingDataset or a ClickLog ({err})") from None
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"X has shape {X.shape}, expected (n, {n_features})")
    bad = np.argwhere(~np.isfinite(X))
    if bad.size:
        raise ValueError(f"X holds a non-finite value at row {bad[0][0]}, column {bad[0][1]}")
    return X
