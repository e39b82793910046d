"""What a model file may hold, per estimator class, and the checks of a loaded model's fitted state.

:data:`STATE` lists, for every class :mod:`counterfactual_ltr.model_files.persistence` saves, the names of
its fitted attributes and the kind of value each must hold; a file with another name (one
shadowing a method, say) or without one of them is refused (:data:`OPTIONAL_STATE` lists the
few a model may hold or not). :func:`check_state` checks every
value: the arrays that make the scores (``coef_``, the network's parameters, the
preprocessor's statistics) must be finite float64 arrays of the shapes ``n_features_in_``
implies; diagnostics must be real numbers, counts or flags of the right shape (a duality gap
may be infinite). ``save_model`` runs the same checks, so a file that would not load is never
written. A class registered for saving needs its entry here (a test checks every one has).
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["STATE", "OPTIONAL_STATE", "TRANSFORMER_STATE", "check_state", "check_transformer_state", "mlp_shapes", "MAX_FEATURES"]

#: Largest ``n_features_in_`` a model file may declare (LETOR sets have at most a few thousand).
MAX_FEATURES = 10_000_000
#: Largest width of a hidden layer of a saved network.
MAX_HIDDEN = 1_000_000


class _Fail(ValueError):
    """A state check that failed: the message says what, the caller adds the file and the entry."""


def _flag(value, ctx):
    if not isinstance(value, (bool, np.bool_)):
        raise _Fail(f"must be true or false, got {type(value).__name__}")
    return bool(value)


def _count(value, ctx, *, low=0, high=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise _Fail(f"must be a whole number, got {type(value).__name__} {value!r:.40}")
    value = int(value)
    if value < low or (high is not None and value > high):
        raise _Fail(f"must lie in [{low}, {high if high is not None else 'inf'}], got {value}")
    return value


def _real(value, ctx, *, finite=False):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise _Fail(f"must be a real number, got {type(value).__name__} {value!r:.40}")
    value = float(value)
    if finite and not np.isfinite(value):
        raise _Fail(f"must be finite, got {value}")
    return value


def _optional(kind):
    return lambda value, ctx: None if value is None else kind(value, ctx)


def _array(value, shape, *, kind="f", finite=True, what="numbers"):
    """``value`` as an array of dtype kind ``kind`` and ``shape`` (``None`` entries: any length)."""
    if isinstance(value, list):
        value = np.asarray(value) if value else np.zeros(0)
    if not isinstance(value, np.ndarray):
        raise _Fail(f"must be an array of {what}, got {type(value).__name__}")
    if value.dtype.kind != kind or (kind == "f" and value.dtype != np.float64):
        if not (kind == "i" and value.dtype.kind == "u" or kind == "f" and value.size == 0):
            raise _Fail(f"must hold {what} ({'float64' if kind == 'f' else 'integers'}), got dtype {value.dtype}")
    if len(value.shape) != len(shape) or any(s is not None and s != v for s, v in zip(shape, value.shape)):
        expected = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        raise _Fail(f"must have shape {expected}, got {value.shape}")
    if finite and value.size and kind == "f" and not np.all(np.isfinite(value)):
        raise _Fail(f"holds a non-finite value at index {np.argwhere(~np.isfinite(value))[0].tolist()}")
    return value


def _coef(value, ctx):
    return _array(value, (ctx["n_features"],))


def _reals(value, ctx):
    """A diagnostic series (an array or a list of numbers): real numbers, any length; inf/NaN allowed."""
    out = _array(value, (None,), finite=False, what="real numbers")
    return value if isinstance(value, list) else out


def _counts(value, ctx):
    out = _array(value, (None,), kind="i", what="counts")
    if out.size and out.min() < 0:
        raise _Fail(f"must hold counts >= 0, got {out.min()}")
    return value


def _n_features(value, ctx):
    return _count(value, ctx, low=1, high=MAX_FEATURES)


def _preprocessor(value, ctx):
    if value is not None:
        _check_transformer(value, ctx["n_features"])
    return value


_LINEAR = {"preprocessor_": _preprocessor, "coef_": _coef, "n_iter_": _count, "objective_": _real,
           "duality_gap_": _real, "converged_": _flag, "n_features_in_": _n_features}
_PROPENSITY_SVM = {**_LINEAR, "n_iter_": _counts, "objective_history_": _reals, "train_snips_history_": _reals,
                   "n_ccp_iter_": _count, "solve_seconds_": _reals, "inner_tol_": _reals}
_DEEP = {"preprocessor_": _preprocessor, "converged_": _flag, "initial_loss_": lambda v, c: _real(v, c, finite=True),
         "model_": lambda v, c: v,   # the network: checked as it is rebuilt (see mlp_shapes)
         "n_features_in_": _n_features, "loss_curve_": _reals, "n_iter_": _count, "learning_rates_": _reals,
         "t_": _count, "epoch_seconds_": _reals, "validation_scores_": _optional(_reals),
         "best_validation_score_": _optional(_real), "best_epoch_": _count, "n_train_clicks_": _count,
         "n_train_queries_": _count}
_GBDT = {"preprocessor_": _preprocessor, "n_features_in_": _n_features,
         "booster_": lambda v, c: v,   # the trees: parsed by LightGBM and checked as they are rebuilt
         "fit_seconds_": lambda v, c: _real(v, c, finite=True), "n_estimators_": _count, "best_iteration_": _count,
         "objective_history_": _reals, "validation_scores_": _optional(_reals), "n_train_clicks_": _count,
         "n_train_rows_": _count, "n_train_queries_": _count, "n_pairs_": _count}

#: Fitted attributes (name -> check) of every class a model file may hold.
STATE = {"RankSVM": _LINEAR, "SLAMRanker": _LINEAR, "SVMPropRank": _PROPENSITY_SVM, "SVMPropDCG": _PROPENSITY_SVM,
         "SVMPropRBP": _PROPENSITY_SVM, "DeepPropDCG": _DEEP, "GBDTPropDCG": _GBDT}

#: Keys of the record ``model_selection.grid_search`` stores as ``selection_``, each with its check.
_SELECTION = {"parameter": lambda v, c: _text(v), "grid": _reals, "mean_test_score": _reals,
              "std_test_score": _reals, "chosen": lambda v, c: _real(v, c, finite=True),
              "best_score": _real, "edge": lambda v, c: None if v is None else _choice(v, ("low", "high")),
              "extended": _reals, "max_extensions": _count, "scoring": lambda v, c: _text(v),
              "n_folds": lambda v, c: _count(v, c, low=2)}


def _text(value):
    if not isinstance(value, str) or len(value) > 200:
        raise _Fail(f"must be a string of at most 200 characters, got {type(value).__name__} {value!r:.40}")
    return value


def _choice(value, allowed):
    if value not in allowed:
        raise _Fail(f"must be one of {allowed}, got {value!r:.40}")
    return value


#: Keys of the record of a search over several parameters (``model_selection.search_record``).
_SEARCH = {"parameters": lambda v, c: _texts(v), "candidates": lambda v, c: [_grid_values(x, c) for x in _list(v)],
           "mean_test_score": _reals, "std_test_score": _reals, "chosen": lambda v, c: _grid_values(v, c),
           "best_score": _real,
           "edges": lambda v, c: _edges(v), "scoring": lambda v, c: _text(v),
           "n_folds": lambda v, c: _count(v, c, low=2)}


def _list(value):
    if not isinstance(value, (list, tuple)) or not value:
        raise _Fail(f"must be a non-empty list, got {type(value).__name__}")
    return value


def _texts(value):
    return [_text(v) for v in _list(value)]


def _grid_values(value, ctx):
    """One candidate of a search: a value per parameter, a finite number or (a choice) a short string."""
    if isinstance(value, np.ndarray):
        return [_real(v, ctx, finite=True) for v in _reals(value, ctx).tolist()]
    return [_text(v) if isinstance(v, str) else _real(v, ctx, finite=True) for v in _list(value)]


def _edges(value):
    if not isinstance(value, dict):
        raise _Fail(f"must be a dict of parameter -> edge, got {type(value).__name__}")
    return {_text(k): None if v is None else _choice(v, ("low", "high")) for k, v in value.items()}


def _tempering(value, ctx):
    """``{"strengths", "best_scores", "chosen"}``: the tempering strengths tried, their best scores, the choice."""
    if not isinstance(value, dict) or set(value) != {"strengths", "best_scores", "chosen"}:
        raise _Fail("must be {'strengths', 'best_scores', 'chosen'}")
    strengths = [_real(v, ctx, finite=True) for v in _list(value["strengths"])]
    scores = [_real(v, ctx) for v in _list(value["best_scores"])]
    chosen = _real(value["chosen"], ctx, finite=True)
    if len(scores) != len(strengths) or chosen not in strengths or not all(0 <= v <= 1 for v in strengths):
        raise _Fail("['strengths'] in [0, 1] with one best score each, ['chosen'] one of them")
    return {"strengths": strengths, "best_scores": scores, "chosen": chosen}


def _learners(value, ctx):
    """``select_learner``'s table: one entry per learner compared (see ``model_selection.learner_lines``)."""
    keys = {"names", "best_scores", "std_scores", "fold_scores", "chosen_params", "seconds", "failed", "best",
            "chosen", "reason", "noise", "leads", "lead_errors", "lead_unit"}
    if not isinstance(value, dict) or set(value) != keys:
        raise _Fail(f"must be a learner table with the keys {sorted(keys)}")
    names = _texts(value["names"])
    out = {"names": names, "best_scores": [_real(v, ctx) for v in _list(value["best_scores"])],
           "std_scores": [_real(v, ctx) for v in _list(value["std_scores"])],
           "leads": [_real(v, ctx) for v in _list(value["leads"])],
           "lead_errors": [_real(v, ctx) for v in _list(value["lead_errors"])],
           "lead_unit": _choice(value["lead_unit"], ("folds", "queries")),
           "fold_scores": [[_real(v, ctx) for v in _list(row)] for row in _list(value["fold_scores"])],
           "chosen_params": [_text(v) for v in _list(value["chosen_params"])],
           "seconds": [_real(v, ctx, finite=True) for v in _list(value["seconds"])],
           "failed": {_text(k): _text(v) for k, v in (value["failed"] or {}).items()},
           "best": _text(value["best"]), "chosen": _text(value["chosen"]), "reason": _long_text(value["reason"]), "noise": _real(value["noise"], ctx, finite=True)}
    if any(len(out[k]) != len(names) for k in ("best_scores", "std_scores", "fold_scores", "chosen_params",
                                                "seconds", "leads", "lead_errors")):
        raise _Fail("must hold one score, spread, fold scores, choice and time per learner")
    if out["best"] not in names or out["chosen"] not in names:
        raise _Fail("['best'] and ['chosen'] must be learners of ['names']")
    return out


def _long_text(value):
    if not isinstance(value, str) or len(value) > 2000:
        raise _Fail(f"must be a string of at most 2000 characters, got {type(value).__name__}")
    return value


#: Keys a selection record may hold beside its kind's own, each with its check.
_OPTIONAL_SELECTION = {"tempering": _tempering, "fold_scores": lambda v, c: _reals(v, c), "learners": _learners}


def _selection(value, ctx):
    """A grid-search record: exactly the keys of one kind (one parameter, or several), scores per value."""
    several = isinstance(value, dict) and "parameters" in value
    keys = _SEARCH if several else _SELECTION
    if isinstance(value, dict):           # records of other versions may lack the optional keys
        keys = {**keys, **{k: check for k, check in _OPTIONAL_SELECTION.items() if k in value}}
    if not isinstance(value, dict) or set(value) != set(keys):
        got = sorted(value) if isinstance(value, dict) else type(value).__name__
        raise _Fail(f"must be a grid-search record with the keys {sorted(keys)}, got {got}")
    out = {}
    for key, check in keys.items():
        try:
            out[key] = check(value[key], ctx)
        except _Fail as err:
            raise _Fail(f"[{key!r}] {err}") from None
    values = out["candidates"] if several else out["grid"]
    if not len(values) == len(out["mean_test_score"]) == len(out["std_test_score"]) >= 1:
        raise _Fail(f"[{'candidates' if several else 'grid'!r}] and its scores must have the same length, at least 1")
    if several:
        width = len(out["parameters"])
        if any(len(c) != width for c in values) or len(out["chosen"]) != width or set(out["edges"]) != \
                set(out["parameters"]):
            raise _Fail("['candidates'], ['chosen'] and ['edges'] must have one entry per parameter")
        if out["chosen"] not in values:
            raise _Fail("['chosen'] is not one of the candidates")
    elif out["chosen"] not in out["grid"]:
        raise _Fail(f"['chosen'] = {out['chosen']:g} is not on the grid")
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in out.items()}


def _feature_names(value, ctx):
    """The raw features' names (``feature_names_in_``): one distinct non-empty string per feature.

    Stored as a JSON list of strings (a model file's arrays hold numbers only), given back as
    scikit-learn keeps them, an object array of str; the export names the stack's features by them.
    """
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise _Fail(f"must be a list of names, got {type(value).__name__}")
    if len(value) != ctx["n_features"]:
        raise _Fail(f"holds {len(value)} names but the model has {ctx['n_features']} features")
    seen = set()
    for position, name in enumerate(value):
        if not isinstance(name, str) or not name or len(name) > 1000:
            raise _Fail(f"[{position}] must be a non-empty string of at most 1000 characters, got "
                        f"{type(name).__name__} {name!r:.40}")
        if name in seen:
            raise _Fail(f"[{position}] repeats the name {name!r:.40}")
        seen.add(name)
    return np.asarray(value, dtype=object)


#: Fitted attributes a model may hold or not (``click_sim.train_production_ranker`` records its queries;
#: ``model_selection.grid_search`` its record; a fit on a named feature table its ``feature_names_in_``).
OPTIONAL_STATE = {name: {"selection_": _selection, "feature_names_in_": _feature_names} for name in STATE}
OPTIONAL_STATE["RankSVM"]["training_queries_"] = _counts


def _ccp_lengths(state):
    n = state["n_ccp_iter_"]
    series = ("train_snips_history_", "n_iter_", "solve_seconds_", "inner_tol_")
    if len(state["objective_history_"]) != n + 1 or any(len(state[k]) != n for k in series):
        raise ValueError(f"the CCP diagnostics disagree with n_ccp_iter_ = {n}: objective_history_ holds one "
                         f"value more than it, {', '.join(series)} one per CCP iteration")


def _epoch_lengths(state):
    n = state["n_iter_"]
    series = ["loss_curve_", "learning_rates_", "epoch_seconds_"] + \
        (["validation_scores_"] if state["validation_scores_"] is not None else [])
    if any(len(state[k]) != n for k in series) or state["best_epoch_"] > n:
        raise ValueError(f"the training diagnostics disagree with n_iter_ = {n} epochs: {', '.join(series)} "
                         "hold one value per epoch and best_epoch_ is at most n_iter_")


# How the fitted attributes of a class must agree with each other.
_CONSISTENT = {"SVMPropRank": _ccp_lengths, "SVMPropDCG": _ccp_lengths, "SVMPropRBP": _ccp_lengths,
               "DeepPropDCG": _epoch_lengths}


def check_state(class_name: str, state: dict) -> dict:
    """Check the fitted attributes ``state`` of a ``class_name`` against :data:`STATE`; returns them checked.

    Parameters
    ----------
    class_name : str
        The estimator class.
    state : dict
        Attribute name -> decoded value.

    Returns
    -------
    dict

    Raises
    ------
    ValueError
        Naming the attribute: a missing or unexpected name, a wrong type, shape, dtype or a
        non-finite value where the scores depend on it.

    Examples
    --------
    >>> import numpy as np
    >>> good = {"preprocessor_": None, "coef_": np.ones(2), "n_iter_": 3, "objective_": 1.0,
    ...         "duality_gap_": 0.0, "converged_": True, "n_features_in_": 2}
    >>> check_state("RankSVM", good)["n_iter_"]
    3
    >>> check_state("RankSVM", {**good, "coef_": np.array([1.0, np.nan])})
    Traceback (most recent call last):
    ...
    ValueError: coef_: holds a non-finite value at index [1]
    """
    spec = STATE.get(class_name)
    if spec is None:
        raise ValueError(f"no list of fitted attributes for the class {class_name!r}")
    missing = sorted(set(spec) - set(state))
    if missing:
        raise ValueError(f"the fitted attributes {missing} are missing")
    optional = OPTIONAL_STATE.get(class_name, {})
    spec = {**spec, **{k: v for k, v in optional.items() if k in state}}
    unexpected = sorted(set(state) - set(spec))
    if unexpected:
        raise ValueError(f"{unexpected[0]!r} is not a fitted attribute of {class_name} "
                         f"(expected exactly {sorted(spec)})")
    ctx = {}
    ordered = ["n_features_in_"] + [name for name in spec if name != "n_features_in_"]
    out = {}
    for name in ordered:
        try:
            out[name] = spec[name](state[name], ctx)
        except _Fail as err:
            raise ValueError(f"{name}: {err}") from None
        if name == "n_features_in_":
            ctx["n_features"] = out[name]
    if class_name in _CONSISTENT:
        _CONSISTENT[class_name](out)
    return {name: out[name] for name in spec}


# ----------------------------------------------------------------------------- preprocessors

def _vector(positive=False, nonnegative=False):
    def check(value, ctx):
        out = _array(value, (ctx["n_features"],))
        if positive and np.any(out <= 0) or nonnegative and np.any(out < 0):
            raise _Fail(f"must hold values {'> 0' if positive else '>= 0'}")
        return value
    return check


def _samples_seen(value, ctx):
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return _counts(value, ctx) if value.dtype.kind in "iu" else _array(value, (ctx["n_features"],))
    if _real(value, ctx, finite=True) < 0:
        raise _Fail("must be >= 0")
    return value


def _quantiles(value, ctx):
    out = _array(value, (ctx["n_quantiles"], ctx["n_features"]))
    if np.any(np.diff(out, axis=0) < 0):
        raise _Fail("must be sorted within every column")
    return value


def _references(value, ctx):
    out = _array(value, (ctx["n_quantiles"],))
    if out.size and (out[0] < 0 or out[-1] > 1 or np.any(np.diff(out) <= 0)):
        raise _Fail("must increase strictly within [0, 1]")
    return value


#: Fitted attributes of the transformers a model file may hold as ``preprocessor``.
TRANSFORMER_STATE = {
    "StandardScaler": {"mean_": _optional(_vector()), "var_": _optional(_vector(nonnegative=True)),
                       "scale_": _optional(_vector(positive=True)), "n_samples_seen_": _samples_seen},
    "MinMaxScaler": {"min_": _vector(), "scale_": _vector(), "data_min_": _vector(), "data_max_": _vector(),
                     "data_range_": _vector(nonnegative=True), "n_samples_seen_": _samples_seen},
    "MaxAbsScaler": {"max_abs_": _vector(nonnegative=True), "scale_": _vector(positive=True),
                     "n_samples_seen_": _samples_seen},
    "RobustScaler": {"center_": _optional(_vector()), "scale_": _optional(_vector(positive=True))},
    "QuantileTransformer": {"n_quantiles_": lambda v, c: _count(v, c, low=1, high=100_000),
                            "quantiles_": _quantiles, "references_": _references},
}


def check_transformer_state(est, n_features: int) -> None:
    """Check a fitted preprocessor of a model file: its parameters, and its statistics for ``n_features`` columns.

    Parameters
    ----------
    est : scikit-learn transformer
        One of :data:`TRANSFORMER_STATE`'s classes, fitted.
    n_features : int
        The model's ``n_features_in_``: the preprocessor's input and output width.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.preprocessing import StandardScaler
    >>> check_transformer_state(StandardScaler().fit(np.eye(3)), 3)
    >>> check_transformer_state(StandardScaler().fit(np.eye(3)), 4)
    Traceback (most recent call last):
    ...
    ValueError: the StandardScaler's n_features_in_ is 3 but the model has 4 features
    """
    try:
        _check_transformer(est, n_features)
    except _Fail as err:
        raise ValueError(str(err)) from None


def _check_transformer(est, n_features: int) -> None:
    name = type(est).__name__
    spec = TRANSFORMER_STATE.get(name)
    if spec is None:
        raise _Fail(f"a {name} is not a transformer a model file may hold ({sorted(TRANSFORMER_STATE)})")
    try:
        est._validate_params()
    except (ValueError, TypeError) as err:
        raise _Fail(f"bad parameters of the {name}: {err}") from None
    state = {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}
    if state.get("n_features_in_") != n_features:
        raise _Fail(f"the {name}'s n_features_in_ is {state.get('n_features_in_')!r} but the model has "
                    f"{n_features} features")
    expected = set(spec) | {"n_features_in_"}
    if set(state) != expected:
        odd = sorted(set(state) ^ expected)
        raise _Fail(f"the {name}'s fitted attributes must be {sorted(expected)}; {odd[0]!r} differs")
    ctx = {"n_features": n_features}
    if "n_quantiles_" in spec:
        ctx["n_quantiles"] = spec["n_quantiles_"](state["n_quantiles_"], ctx)
    for key, check in spec.items():
        try:
            check(state[key], ctx)
        except _Fail as err:
            raise _Fail(f"the {name}'s {key}: {err}") from None


def mlp_shapes(n_features: int, hidden_layer_sizes) -> list[tuple]:
    """Shapes of the parameter arrays of an MLP (weights and biases of each layer, then the output).

    Computed before anything is allocated, so a file declaring layers its arrays do not hold
    is refused instead of initialising them.

    Parameters
    ----------
    n_features : int
        Input width.
    hidden_layer_sizes : sequence of int
        Widths of the hidden layers.

    Returns
    -------
    list of tuple

    Examples
    --------
    >>> mlp_shapes(3, [4])
    [(3, 4), (4,), (4, 1), (1,)]
    """
    if not isinstance(hidden_layer_sizes, (list, tuple)) or not hidden_layer_sizes:
        raise _Fail(f"model_: hidden_layer_sizes must be a non-empty list of widths, got {hidden_layer_sizes!r:.60}")
    sizes = [n_features]
    for k, width in enumerate(hidden_layer_sizes):
        try:
            sizes.append(_count(width, None, low=1, high=MAX_HIDDEN))
        except _Fail as err:
            raise _Fail(f"model_: hidden_layer_sizes[{k}] {err}") from None
    sizes.append(1)
    shapes = []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        shapes += [(fan_in, fan_out), (fan_out,)]
    return shapes
