"""A fitted scaler as ``(x - shift) / scale`` per raw feature, the form every writer folds or writes out.

The rankers apply their ``preprocessor_`` before the model, so an exported model must do the same
to score raw features as ``model.predict`` does. The scalers the toolkit offers are per-feature
affine maps; each is read here into one ``(shift, scale)`` pair per feature (identity without a
preprocessor). Anything else (a non-affine transform, a clipping MinMaxScaler, a step that changes
the width) is refused by name rather than exported wrong.
"""

from __future__ import annotations

import numpy as np

#: The preprocessors an export can fold (scikit-learn class names).
FOLDABLE = ("StandardScaler", "RobustScaler", "MaxAbsScaler", "MinMaxScaler")


def affine_of(model, n_features: int):
    """``(shift, scale)``, float64 arrays of length ``n_features``: the model's input is ``(x - shift) / scale``.

    ``n_features`` is the width of the model's own input; a preprocessor of another width is refused.
    """
    pre = getattr(model, "preprocessor_", None)
    if pre is None:
        return np.zeros(n_features), np.ones(n_features)
    from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, RobustScaler, StandardScaler

    name = type(pre).__name__
    if isinstance(pre, StandardScaler):
        shift = pre.mean_ if pre.mean_ is not None else 0.0
        scale = pre.scale_ if pre.scale_ is not None else 1.0
    elif isinstance(pre, RobustScaler):
        shift = pre.center_ if pre.center_ is not None else 0.0
        scale = pre.scale_ if pre.scale_ is not None else 1.0
    elif isinstance(pre, MaxAbsScaler):
        shift, scale = 0.0, pre.scale_
    elif isinstance(pre, MinMaxScaler):
        if pre.clip:
            raise ValueError("the model's preprocessor is MinMaxScaler(clip=True): clipping is not a weighted sum, "
                             "so no exported weights can reproduce it; refit with clip=False")
        # sklearn: x * scale_ + min_  ==  (x - (-min_ / scale_)) / (1 / scale_)
        shift, scale = -pre.min_ / pre.scale_, 1.0 / pre.scale_
    else:
        raise ValueError(f"the model's preprocessor is {name}, which an export cannot fold into weights (it can "
                         f"fold {', '.join(FOLDABLE)}); refit with one of them or without a preprocessor")
    width = int(getattr(pre, "n_features_in_", n_features))
    shift = np.broadcast_to(np.asarray(shift, dtype=np.float64), (width,)).copy()
    scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), (width,)).copy()
    if width != n_features:
        raise ValueError(f"the model's {name} takes {width} features but the model {n_features}")
    bad = np.flatnonzero(~np.isfinite(shift) | ~np.isfinite(scale) | (scale <= 0))
    if bad.size:
        raise ValueError(f"the model's {name} has a non-finite or non-positive scale at feature {bad[0]}")
    return shift, scale
