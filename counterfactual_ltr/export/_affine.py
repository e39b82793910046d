"""A fitted preprocessor as the columns it keeps and per-column affine steps, the form every writer folds.

The rankers apply their ``preprocessor_`` before the model, so an exported model must do the same
to score raw features as ``model.predict`` does. What can be folded is what keeps the model's
input an affine function of one raw column each: the scalers (``StandardScaler``, ``RobustScaler``,
``MaxAbsScaler``, ``MinMaxScaler`` without ``clip``), feature selectors (anything with
``get_support()``: ``VarianceThreshold``, ``SelectKBest``, ``SelectFromModel`` ...) and a
``Pipeline`` of these in any order. Such a chain is read into :class:`Chain`: model input ``k`` is
``f_k(x[columns[k]])`` with ``f_k`` the scalers' elementwise operations in their own order. Linear
and MLP writers fold it into weights (zero on the dropped columns), tree writers into thresholds.
Anything else (PCA, a FunctionTransformer, a clipping MinMaxScaler) is refused naming the step.
The chain is checked against the preprocessor's own ``transform`` on probe rows when read.
"""

from __future__ import annotations

import numpy as np

#: The scalers an export can fold (scikit-learn class names); selectors (``get_support()``) and
#: ``Pipeline`` chains of both fold too.
FOLDABLE = ("StandardScaler", "RobustScaler", "MaxAbsScaler", "MinMaxScaler")
_CAN = (f"it can fold {', '.join(FOLDABLE)} (MinMaxScaler without clip), feature selectors (get_support(), e.g. "
        "VarianceThreshold, SelectKBest) and a Pipeline of these")


class Chain:
    """Raw features -> model input: ``input[:, k] = f_k(x[:, columns[k]])``, ``f_k`` elementwise affine steps.

    ``steps`` is a list of ``(op, values)``, ``op`` one of ``- / * +`` and ``values`` one float64 per
    model input: the operations the scalers' ``transform`` performs, in order, so :meth:`forward`
    gives bit for bit what the preprocessor gives.
    """

    def __init__(self, columns, steps, n_raw: int):
        self.columns = np.asarray(columns, dtype=np.int64)
        self.steps = steps
        self.n_raw = int(n_raw)
        self.width = self.columns.shape[0]

    @property
    def selects(self) -> bool:
        """Whether some raw column does not reach the model (or columns are reordered)."""
        return self.width != self.n_raw or not np.array_equal(self.columns, np.arange(self.n_raw))

    def forward(self, x, k):
        """The model input ``k`` of raw value(s) ``x`` of column ``columns[k]``, in float64 as sklearn computes it."""
        x = np.asarray(x, dtype=np.float64)
        for op, values in self.steps:
            v = values[k]
            x = x - v if op == "-" else x / v if op == "/" else x * v if op == "*" else x + v
        return x

    def inverse(self, t, k) -> float:
        """An approximate raw value whose model input ``k`` is ``t``."""
        x = float(t)
        for op, values in reversed(self.steps):
            v = float(values[k])
            x = x + v if op == "-" else x * v if op == "/" else x / v if op == "*" else x - v
        return x

    def increasing(self, k) -> bool:
        sign = 1.0
        for op, values in self.steps:
            if op in "/*":
                sign *= np.sign(values[k])
        return sign > 0

    def shift_scale(self):
        """``(shift, scale)`` per model input: ``input[:, k] = (x[:, columns[k]] - shift[k]) / scale[k]``."""
        shift, scale = np.zeros(self.width), np.ones(self.width)
        for op, v in self.steps:          # (x - s) / c, then one more step, is again (x - s') / c'
            if op == "-":
                shift = shift + v * scale
            elif op == "+":
                shift = shift - v * scale
            elif op == "/":
                scale = scale * v
            else:
                scale = scale / v
        return shift, scale


def _flatten(pre, where):
    """``[(where, step), ...]``: the steps of a (nested) Pipeline in order, or the preprocessor itself."""
    from sklearn.pipeline import Pipeline

    if isinstance(pre, Pipeline):
        out = []
        for name, step in pre.steps:
            if step is None or (isinstance(step, str) and step == "passthrough"):
                continue
            out += _flatten(step, f"step {name!r} of {where}")
        return out
    return [(where, pre)]


def _scaler_steps(step, where):
    """The elementwise ``(op, values)`` of a scaler, or None when ``step`` is not one the export folds."""
    from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, RobustScaler, StandardScaler

    if isinstance(step, StandardScaler):
        return ([("-", step.mean_)] if step.with_mean else []) + ([("/", step.scale_)] if step.with_std else [])
    if isinstance(step, RobustScaler):
        return (([("-", step.center_)] if step.with_centering else [])
                + ([("/", step.scale_)] if step.with_scaling else []))
    if isinstance(step, MaxAbsScaler):
        return [("/", step.scale_)]
    if isinstance(step, MinMaxScaler):
        if step.clip:
            raise ValueError(f"{where} is MinMaxScaler(clip=True): clipping is not affine, so no exported weights "
                             "or thresholds reproduce it; refit with clip=False")
        return [("*", step.scale_), ("+", step.min_)]
    return None


def read_chain(pre, n_model: int, n_raw: int | None = None) -> Chain:
    """The :class:`Chain` of a fitted preprocessor (None: the identity) feeding a model of width ``n_model``.

    A ValueError names the step that cannot be folded and says what can, or the width that does not fit.
    """
    if pre is None:
        return Chain(np.arange(n_model), [], n_model)
    n_raw = int(getattr(pre, "n_features_in_", n_model if n_raw is None else n_raw))
    columns = np.arange(n_raw)
    steps = []
    for where, step in _flatten(pre, "the model's preprocessor"):
        label = f"{where} ({type(step).__name__})"
        ops = _scaler_steps(step, where)
        if ops is not None:
            for op, values in ops:
                values = np.broadcast_to(np.asarray(values, dtype=np.float64).reshape(-1), (columns.shape[0],))
                bad = np.flatnonzero(~np.isfinite(values) | ((values == 0) if op in "/*" else False))
                if bad.size:
                    raise ValueError(f"{label} has an unusable {'scale' if op in '/*' else 'offset'} "
                                     f"{values[bad[0]]!r} for its input column {bad[0]}")
                steps.append((op, values.copy()))
        elif hasattr(step, "get_support"):
            keep = np.asarray(step.get_support(), dtype=bool)
            if keep.shape != columns.shape:
                raise ValueError(f"{label} selects among {keep.shape[0]} columns but receives {columns.shape[0]}")
            columns = columns[keep]
            steps = [(op, values[keep]) for op, values in steps]
        else:
            raise ValueError(f"{label} cannot be folded into an exported model: {_CAN}; refit with those or "
                             "without a preprocessor")
    if columns.shape[0] != n_model:
        raise ValueError(f"the model's preprocessor gives {columns.shape[0]} columns but the model takes {n_model}")
    chain = Chain(columns, steps, n_raw)
    _check(chain, pre)
    return chain


def _check(chain: Chain, pre):
    """Refuse a chain whose forward map is not bit for bit the preprocessor's ``transform`` on probe rows."""
    probe = np.array([0.0, 1.0, -3.25, 1e6, 0.1])[:, None] + np.arange(chain.n_raw)[None, :] * 0.5
    raw = probe[:, chain.columns]
    mine = np.stack([chain.forward(raw[:, k], k) for k in range(chain.width)], axis=1).reshape(probe.shape[0], -1)
    theirs = pre.transform(probe.copy())
    theirs = np.asarray(theirs.toarray() if hasattr(theirs, "toarray") else theirs, dtype=np.float64)
    if theirs.shape != mine.shape or not np.array_equal(mine, theirs):
        raise ValueError(f"the model's preprocessor {type(pre).__name__} does not transform as its fitted "
                         "parameters say (another scikit-learn version?): it cannot be folded exactly")


def chain_of(model, n_model: int) -> Chain:
    """The :class:`Chain` of ``model.preprocessor_`` (identity without one) for a model of width ``n_model``."""
    return read_chain(getattr(model, "preprocessor_", None), n_model)


def affine_of(model, n_model: int):
    """``(chain, shift, scale)``: model input ``k`` is ``(x[:, chain.columns[k]] - shift[k]) / scale[k]``.

    ``shift`` and ``scale`` have one float64 per model input; ``chain.n_raw`` is the raw width.
    """
    chain = chain_of(model, n_model)
    shift, scale = chain.shift_scale()
    bad = np.flatnonzero(~np.isfinite(shift) | ~np.isfinite(scale) | (scale <= 0))
    if bad.size:
        raise ValueError(f"the model's preprocessor has a non-finite or non-positive scale for model input {bad[0]}")
    return chain, shift, scale
