"""Model and propensity files that are safe to open: JSON plus numeric arrays, never code.

:func:`save_model` writes a fitted estimator to one ``.npz`` archive: an entry
``__meta__`` holds JSON text (the class name from a fixed list, its
hyper-parameters, scalar fitted attributes) and the other entries hold numeric
arrays. :func:`load_model` trusts nothing in it: it reads the archive without
unpickling and without allocating more than the file holds
(:mod:`counterfactual_ltr.model_files._untrusted`), rebuilds the estimator from the fixed
list of classes, and checks the parameters as ``fit`` does and every fitted
attribute against the class's list (:mod:`counterfactual_ltr.model_files._model_state`);
anything wrong is a ``ValueError`` naming the file and the entry.
``joblib``/``pickle`` also work on the estimators, but only for files you
trust: unpickling runs arbitrary code.

Propensity models have a JSON form too (:func:`propensity_to_dict`,
:func:`propensity_from_dict`, :func:`load_propensity`), the format of
``cltr propensity`` and of ``--propensity file.json``; every model class,
estimated ones included, reads back as the same function of the position.
"""

from __future__ import annotations

import json
import numbers
import os

import numpy as np

from ._model_state import OPTIONAL_STATE, STATE, check_state, mlp_shapes
from ._untrusted import loads_json, read_npz
from .._version import __version__

__all__ = ["save_model", "load_model", "propensity_to_dict", "propensity_from_dict", "load_propensity",
           "SAFE_TRANSFORMERS"]

FORMAT = "counterfactual-ltr model"
FORMAT_VERSION = 1
_META = "__meta__"
# Longest JSON a model file's header or a propensity file may hold (both are far smaller).
_MAX_JSON_BYTES = 1_000_000
#: A propensity file holds a cascade model's parameter per (query, document): a real log's is megabytes.
_MAX_PROPENSITY_BYTES = 256_000_000
# dtypes a parameter may name (DeepPropDCG's dtype).
_DTYPES = ("float32", "float64")
#: scikit-learn transformers a model file may hold as ``preprocessor`` (numeric fitted state only).
SAFE_TRANSFORMERS = ("StandardScaler", "MinMaxScaler", "MaxAbsScaler", "RobustScaler", "QuantileTransformer")


def _estimator_classes() -> dict:
    from ..estimators import DeepPropDCG, GBDTPropDCG, RankSVM, SLAMRanker, SVMPropDCG, SVMPropRank, SVMPropRBP

    return {c.__name__: c for c in (RankSVM, SVMPropRank, SVMPropDCG, SVMPropRBP, SLAMRanker, DeepPropDCG,
                                    GBDTPropDCG)}


def _transformer_classes() -> dict:
    import sklearn.preprocessing as pre

    return {name: getattr(pre, name) for name in SAFE_TRANSFORMERS}


# ----------------------------------------------------------------------------- propensity models

# Fields of each kind of propensity description: (required, optional).
_PROPENSITY_FIELDS = {
    "position_based": ({"eta"}, {"clip"}),
    "tabular": ({"values"}, set()),
    "trust_bias": ({"examination", "eps_plus", "eps_minus"}, set()),
    "estimated": ({"relative", "values", "eta"}, {"method", "lower", "upper", "confidence", "n_sessions", "bootstrap",
                                                  "bootstrap_converged", "recipe", "log_fingerprint"}),
    "estimated_trust_bias": ({"examination", "eps_plus", "eps_minus"}, {"intervals", "confidence", "n_sessions",
                                                                          "bootstrap"}),
    "cascade": ({"model", "query_ids", "doc_ids", "alpha", "alpha_prior", "min_propensity"},
                {"sigma", "sigma_prior", "gamma", "lambda"}),
}
_INTERVAL_PARTS = ("examination", "eps_plus", "eps_minus", "a", "b", "relative", "alpha", "beta")
_TRUST_PARTS = ("examination", "eps_plus", "eps_minus")


def _floats(values) -> list | None:
    return None if values is None else np.asarray(values, dtype=np.float64).tolist()


def propensity_to_dict(model) -> dict:
    """JSON-ready description of a propensity model (a number is an ``eta``), from which it is rebuilt exactly.

    Every model class round-trips as the same function of the position: an
    :class:`~counterfactual_ltr.propensity.EstimatedPropensity` keeps its
    estimate, its interval and the fitted power law that continues it beyond
    the estimated positions, and what its uncertainty needs: its bootstrap replicates, the
    recipe it was made with and the fingerprint of its log (so a comparison read from a file
    re-estimates it on the same log, or draws its replicates on another, as in Python); an
    :class:`~counterfactual_ltr.propensity.EstimatedTrustBias` keeps its parts and intervals.

    Parameters
    ----------
    model : None, float (eta), or a propensity model of :mod:`counterfactual_ltr.propensity`
        The model to describe (``None``: ``eta = 1``).

    Returns
    -------
    dict with ``"kind"`` (``"position_based"``, ``"tabular"``, ``"trust_bias"``, ``"estimated"`` or
    ``"estimated_trust_bias"``) and the model's numbers.

    Examples
    --------
    >>> from counterfactual_ltr.propensity import PositionBasedPropensity
    >>> propensity_to_dict(PositionBasedPropensity(eta=0.5, clip=0.1))
    {'kind': 'position_based', 'eta': 0.5, 'clip': 0.1}
    >>> propensity_from_dict(propensity_to_dict(2.0))
    PositionBasedPropensity(eta=2.0)
    """
    from ..propensity.estimation import EstimatedPropensity, EstimatedTrustBias
    from ..examination.propensity_models import PositionBasedPropensity, TabularPropensity, TrustBiasPropensity, as_propensity_model

    from ..propensity.click_models import CascadePropensity

    model = as_propensity_model(model)
    if isinstance(model, CascadePropensity):
        return _cascade_to_dict(model)
    if isinstance(model, EstimatedPropensity):
        spec = {"kind": "estimated", "method": str(model.method_), "relative": _floats(model.relative_),
                "values": _floats(model.values), "eta": float(model.eta_), "lower": _floats(model.lower_),
                "upper": _floats(model.upper_), "confidence": float(model.confidence_),
                "n_sessions": int(model.n_sessions_)}
        return spec | _uncertainty_fields(model)
    if isinstance(model, EstimatedTrustBias):
        return {"kind": "estimated_trust_bias", "examination": _floats(model.examination),
                "eps_plus": _floats(model.eps_plus), "eps_minus": _floats(model.eps_minus),
                "intervals": {k: [_floats(lo), _floats(hi)] for k, (lo, hi) in model.intervals_.items()},
                "confidence": float(model.confidence_), "n_sessions": int(model.n_sessions_),
                # the replicates of the three parts, so a comparison can propagate the estimate's error
                "bootstrap": {k: np.asarray(model.bootstrap_[k], dtype=np.float64).tolist()
                              for k in _TRUST_PARTS if k in (model.bootstrap_ or {})} or None}
    if type(model) is PositionBasedPropensity:
        return {"kind": "position_based", "eta": model.eta, "clip": model.clip}
    if type(model) is TabularPropensity:
        return {"kind": "tabular", "values": model.values.tolist()}
    if type(model) is TrustBiasPropensity:
        return {"kind": "trust_bias", "examination": model.examination.tolist(),
                "eps_plus": model.eps_plus.tolist(), "eps_minus": model.eps_minus.tolist()}
    raise ValueError(f"cannot describe the propensity model {model!r} as JSON (supported: position-based, "
                     "tabular, trust-bias and the estimates of estimate_propensities)")


def _uncertainty_fields(model) -> dict:
    """An estimate's replicates, recipe and log fingerprint as JSON fields (the recipe only if JSON can hold it)."""
    fields = {}
    if len(model.bootstrap_):
        fields["bootstrap"] = np.asarray(model.bootstrap_, dtype=np.float64).tolist()
        fields["bootstrap_converged"] = [bool(v) for v in model.bootstrap_converged_]
    recipe = getattr(model, "recipe_", None)
    if recipe is not None and model.log_fingerprint_ is not None:
        try:
            fields["recipe"] = json.loads(json.dumps(recipe))
        except (TypeError, ValueError):     # a user's relevance model: kept in Python only
            pass
        else:
            fields["log_fingerprint"] = model.log_fingerprint_
    return fields


def _restore_uncertainty(model, spec) -> None:
    """The replicates, recipe and log fingerprint of ``spec`` (checked) on ``model``."""
    from ..propensity.estimation import METHODS

    K = model.relative_.size
    if spec.get("bootstrap") is not None:
        rows = spec["bootstrap"]
        if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == K for r in rows):
            raise ValueError(f"field 'bootstrap' must be a list of replicates of {K} numbers each")
        boot = np.array([_number_list(r, "bootstrap") for r in rows]).reshape(len(rows), K)
        if not np.all(np.isfinite(boot) & (boot > 0)):
            raise ValueError("field 'bootstrap' must hold finite positive numbers (replicates of theta_r / theta_1)")
        converged = spec.get("bootstrap_converged", [True] * len(boot))
        if not isinstance(converged, list) or len(converged) != len(boot) or \
                not all(isinstance(v, bool) for v in converged):
            raise ValueError("field 'bootstrap_converged' must be a list of booleans, one per replicate")
        model.bootstrap_, model.bootstrap_converged_ = boot, np.array(converged, dtype=bool)
    recipe = spec.get("recipe")
    if recipe is not None:
        if not isinstance(recipe, dict) or set(recipe) != {"method", "max_position", "options"} or \
                recipe["method"] not in METHODS or not isinstance(recipe["options"], dict) or \
                recipe["max_position"] != K or isinstance(recipe["max_position"], bool):
            raise ValueError(f"field 'recipe' must be {{'method', 'max_position': {K}, 'options'}} as "
                             "estimate_propensities records it")
        fingerprint = spec.get("log_fingerprint")
        if not isinstance(fingerprint, str):
            raise ValueError("field 'recipe' needs the field 'log_fingerprint' (a string)")
        model.recipe_, model.log_fingerprint_ = recipe, fingerprint


def propensity_from_dict(spec: dict):
    """The propensity model described by :func:`propensity_to_dict`'s output.

    Parameters
    ----------
    spec : dict
        With ``"kind"`` and exactly the fields of that kind; a dict holding such a
        description under ``"propensity"`` (the file ``cltr propensity`` writes) is accepted too.

    Returns
    -------
    PositionBasedPropensity, TabularPropensity, TrustBiasPropensity, EstimatedPropensity or EstimatedTrustBias

    Raises
    ------
    ValueError
        An unknown kind, a missing or unknown field, values that are not a valid model,
        or an estimate whose normalised values or power law do not follow from its estimate.

    Examples
    --------
    >>> propensity_from_dict({"kind": "tabular", "values": [1.0, 0.5]})
    TabularPropensity([1.0, 0.5])
    """
    from ..examination.propensity_models import PositionBasedPropensity, TabularPropensity, TrustBiasPropensity

    if not isinstance(spec, dict):
        raise ValueError(f"a propensity description must be a JSON object, got {type(spec).__name__}")
    if "kind" not in spec and isinstance(spec.get("propensity"), dict):
        spec = spec["propensity"]
    kind = spec.get("kind")
    if kind not in _PROPENSITY_FIELDS:
        raise ValueError(f"unknown propensity kind {kind!r} (expected one of {sorted(_PROPENSITY_FIELDS)})")
    required, optional = _PROPENSITY_FIELDS[kind]
    missing = sorted(required - set(spec))
    if missing:
        raise ValueError(f"the {kind!r} propensity description lacks the field {missing[0]!r}")
    unknown = sorted(set(spec) - required - optional - {"kind"})
    if unknown:
        raise ValueError(f"the {kind!r} propensity description has the unknown field {unknown[0]!r} "
                         f"(fields: {sorted(required | optional)})")
    try:
        if kind == "position_based":
            return PositionBasedPropensity(eta=spec["eta"], clip=spec.get("clip"))
        if kind == "tabular":
            return TabularPropensity(_number_list(spec["values"], "values"))
        if kind == "trust_bias":
            return TrustBiasPropensity(*(_number_list(spec[k], k) for k in ("examination", "eps_plus", "eps_minus")))
        if kind == "estimated":
            return _estimated_from_dict(spec)
        if kind == "cascade":
            return _cascade_from_dict(spec)
        return _estimated_trust_bias_from_dict(spec)
    except TypeError as err:
        raise ValueError(f"the {kind!r} propensity description: {err}") from None


def _cascade_classes() -> dict:
    from ..propensity import click_models as cm

    return {"cm": cm.CascadeModel, "ubm": cm.UserBrowsingModel, "dcm": cm.DependentClickModel,
            "dbn": cm.DynamicBayesianNetworkModel, "sdbn": cm.SimplifiedDBNModel}


def _id_list(ids) -> list:
    """Ids as JSON values: strings stay strings, integers (64-bit too) become Python ints, exactly."""
    return [x if isinstance(x, str) else int(x) for x in np.asarray(ids, dtype=object).tolist()]


def _cascade_to_dict(model) -> dict:
    """A ``CascadePropensity``: its click model's name, ids and fitted parameters, enough to rebuild it."""
    click = model.click_model
    name = {cls: key for key, cls in _cascade_classes().items()}.get(type(click))
    if name is None or not hasattr(click, "alpha_"):
        raise ValueError(f"cannot describe {model!r} as JSON: its click model must be a fitted cascade model of "
                         "counterfactual_ltr.click_models")
    queries, docs = click.row_keys_
    out = {"kind": "cascade", "model": name, "query_ids": _id_list(queries), "doc_ids": _id_list(docs),
           "alpha": _floats(click.alpha_), "alpha_prior": float(click.alpha_prior_),
           "min_propensity": float(model.min_propensity)}
    if hasattr(click, "sigma_"):
        out |= {"sigma": _floats(click.sigma_), "sigma_prior": float(click.sigma_prior_), "gamma": float(click.gamma_)}
    if name == "ubm":
        out["gamma"] = np.asarray(click.gamma_, dtype=np.float64).tolist()
    if name == "dcm":
        out["lambda"] = _floats(click.lambda_)
    return out


def _cascade_from_dict(spec):
    """The ``CascadePropensity`` of :func:`_cascade_to_dict`'s output, every field checked."""
    from ..propensity.click_models import CascadePropensity

    classes = _cascade_classes()
    name = spec["model"]
    if name not in classes:
        raise ValueError(f"field 'model' must be one of {sorted(classes)}, got {name!r}")
    needs = {"dbn": {"sigma", "sigma_prior", "gamma"}, "sdbn": {"sigma", "sigma_prior", "gamma"}, "ubm": {"gamma"},
             "dcm": {"lambda"}, "cm": set()}[name]
    allowed = needs | {"model", "query_ids", "doc_ids", "alpha", "alpha_prior", "min_propensity", "kind"}
    missing, extra = sorted(needs - set(spec)), sorted(set(spec) - allowed)
    if missing or extra:
        raise ValueError(f"the 'cascade' description of a {name!r} model "
                         + (f"lacks the field {missing[0]!r}" if missing else f"has the unknown field {extra[0]!r}"))
    ids = []
    for field in ("query_ids", "doc_ids"):
        values = spec[field]
        if not isinstance(values, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool)
                                                   for v in values):
            raise ValueError(f"field {field!r} must be a list of string or integer ids")
        ids.append(np.asarray(values, dtype=object) if any(isinstance(v, str) for v in values)
                   else np.asarray(values, dtype=np.uint64 if values and max(values) >= 2**63 else np.int64))
    n = len(ids[0])
    if len(ids[1]) != n:
        raise ValueError(f"fields 'query_ids' and 'doc_ids' must have one entry per row ({n} and {len(ids[1])})")
    given = {}
    if name in ("dbn", "sdbn"):
        given["sigma"] = _unit_values(spec["sigma"], "sigma", n)
        given["sigma_prior"] = _unit_values(spec["sigma_prior"], "sigma_prior")
        gamma = _unit_values(spec["gamma"], "gamma")
        if name == "dbn":
            given["gamma"] = gamma
        elif gamma != 1.0:
            raise ValueError(f"field 'gamma' of an 'sdbn' model must be 1 (the SDBN's definition), got {gamma}")
    if name == "ubm":
        rows = spec["gamma"]
        if not isinstance(rows, list) or not rows or not all(isinstance(r, list) and len(r) == len(rows) + 1
                                                             for r in rows):
            raise ValueError("field 'gamma' of a 'ubm' model must be K lists of K + 1 numbers")
        K = len(rows)
        given["gamma"] = _unit_values([v for r in rows for v in r], "gamma", K * (K + 1)).reshape(K, K + 1)
    if name == "dcm":
        lam = spec["lambda"]
        given["lambda"] = _unit_values(lam, "lambda", len(lam) if isinstance(lam, list) and lam else 1)
    click = classes[name].from_parameters(*ids, _unit_values(spec["alpha"], "alpha", n),
                                          alpha_prior=_unit_values(spec["alpha_prior"], "alpha_prior"), **given)
    return CascadePropensity(click, spec["min_propensity"])


def _unit_values(value, name: str, size: int | None = None):
    """A field of probabilities in [0, 1]: a list of ``size`` numbers, or one number (``size`` None)."""
    values = _number_list(value if size is not None else [value], name)
    if (size is not None and values.shape != (size,)) or not np.all(np.isfinite(values) & (values >= 0)
                                                                    & (values <= 1)):
        raise ValueError(f"field {name!r} must hold {'one number' if size is None else f'{size} numbers'} in [0, 1]")
    return values if size is not None else float(values[0])


def _number_list(values, name: str) -> np.ndarray:
    """A JSON list of real numbers (not booleans or strings) as float64."""
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                               for v in values):
        raise ValueError(f"field {name!r} must be a list of numbers")
    return np.asarray(values, dtype=np.float64)


def _optional_list(spec, name: str, length: int):
    if spec.get(name) is None:
        return None
    values = _number_list(spec[name], name)
    if values.shape != (length,) or not np.all(np.isfinite(values)):
        raise ValueError(f"field {name!r} must hold {length} finite numbers, one per estimated position")
    return values


def _estimated_from_dict(spec):
    """An :class:`EstimatedPropensity` whose function is exactly the stored values and power law."""
    from .._validation import check_int, check_probability, check_real
    from ..propensity.estimation import METHODS, EstimatedPropensity
    from ..examination.propensity_models import check_propensities

    relative = _number_list(spec["relative"], "relative")
    method = spec.get("method", "given")
    if method not in METHODS + ("given",):
        raise ValueError(f"field 'method' must be one of {METHODS + ('given',)}, got {method!r}")
    model = EstimatedPropensity(relative, _optional_list(spec, "lower", relative.size),
                                _optional_list(spec, "upper", relative.size), method=method,
                                confidence=check_probability(spec.get("confidence", 0.95), "confidence",
                                                             include_zero=False, include_one=False),
                                n_sessions=check_int(spec.get("n_sessions", 0), "n_sessions", min_value=0))
    values = _number_list(spec["values"], "values")
    eta = check_real(spec["eta"], "eta")
    # The stored numbers define the function (so it is the same on every machine); they must follow
    # from the estimate, up to rounding, or the description was edited inconsistently.
    # (``"smooth"`` continues its table by the power law it fitted, not by one fitted to the table.)
    if values.shape != model.values.shape or not np.allclose(values, model.values, rtol=1e-9, atol=0) \
            or not (method == "smooth" or np.isclose(eta, model.eta_, rtol=1e-9, atol=1e-12)):
        raise ValueError("the 'estimated' propensity description is inconsistent: its 'values' and 'eta' must be "
                         "the estimate 'relative' divided by its maximum and the power law fitted to it")
    model.values = check_propensities(values, "field 'values'")
    model.eta_ = eta
    _restore_uncertainty(model, spec)
    return model


def _estimated_trust_bias_from_dict(spec):
    from .._validation import check_int, check_probability
    from ..propensity.estimation import EstimatedTrustBias

    parts = [_number_list(spec[k], k) for k in ("examination", "eps_plus", "eps_minus")]
    intervals = spec.get("intervals") or {}
    if not isinstance(intervals, dict):
        raise ValueError("field 'intervals' must be an object of name -> [lower, upper]")
    checked = {}
    for name, bounds in intervals.items():
        if name not in _INTERVAL_PARTS or not isinstance(bounds, list) or len(bounds) != 2:
            raise ValueError(f"field 'intervals' holds {name!r}: expected one of {_INTERVAL_PARTS} -> [lower, upper]")
        checked[name] = tuple(_optional_list({"b": b}, "b", parts[0].size) for b in bounds)
    boot = spec.get("bootstrap")
    if boot is not None:
        if not isinstance(boot, dict) or set(boot) != set(_TRUST_PARTS) or \
                not all(isinstance(rows, list) and rows and all(isinstance(r, list) and len(r) == parts[0].size
                                                               for r in rows) for rows in boot.values()) or \
                len({len(rows) for rows in boot.values()}) != 1:
            raise ValueError(f"field 'bootstrap' must map each of {_TRUST_PARTS} to the same number of replicates "
                             f"of {parts[0].size} numbers")
        boot = {k: np.array([_number_list(r, "bootstrap") for r in rows]) for k, rows in boot.items()}
        if not all(np.all(np.isfinite(v) & (v > 0) & (v <= 1)) for v in boot.values()):
            raise ValueError("field 'bootstrap' must hold probabilities in (0, 1]")
    return EstimatedTrustBias(*parts, intervals=checked, bootstrap=boot,
                              confidence=check_probability(spec.get("confidence", 0.95), "confidence",
                                                           include_zero=False, include_one=False),
                              n_sessions=check_int(spec.get("n_sessions", 0), "n_sessions", min_value=0))


def load_propensity(spec):
    """A propensity model from a command-line style value: an ``eta`` or a JSON file.

    Parameters
    ----------
    spec : None, number, or str
        ``None`` -> the default (eta = 1); a number or numeric string -> position-based
        with that ``eta`` (checked: ``eta >= 0``); any other string -> path of a JSON
        file written by ``cltr propensity`` or :func:`propensity_to_dict`.

    Returns
    -------
    propensity model

    Examples
    --------
    >>> load_propensity("0.5")
    PositionBasedPropensity(eta=0.5)
    """
    from ..examination.propensity_models import as_propensity_model

    if spec is None or isinstance(spec, numbers.Real):
        return as_propensity_model(spec)
    text = os.fspath(spec)
    try:
        eta = float(text)
    except ValueError:
        eta = None
    if eta is not None:
        try:
            return as_propensity_model(eta)
        except (ValueError, TypeError) as err:
            raise ValueError(f"propensity {text!r} is a number but not a valid eta: {err}") from None
    if not os.path.isfile(text):
        raise ValueError(f"propensity {text!r} is neither a number (eta) nor an existing JSON file")
    if os.path.getsize(text) > _MAX_PROPENSITY_BYTES:
        raise ValueError(f"{text}: larger than {_MAX_PROPENSITY_BYTES} bytes, not a propensity file")
    try:
        with open(text, encoding="utf-8") as fh:
            payload = loads_json(fh.read(), max_chars=_MAX_PROPENSITY_BYTES)
    except (UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{text}: not a JSON file ({err})") from None
    try:
        return propensity_from_dict(payload)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{text}: {err}") from None


# ----------------------------------------------------------------------------- encoding of values

class _Writer:
    """Turns parameters and fitted state into JSON values, moving arrays to numbered npz entries."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def array(self, value, where: str) -> dict:
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{where} holds values of dtype {arr.dtype}: a model file keeps real numbers only")
        key = f"a{len(self.arrays)}"
        self.arrays[key] = arr
        return {"__array__": key}

    def value(self, value, where: str):
        from sklearn.base import BaseEstimator

        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real):
            value = float(value)
            return value if np.isfinite(value) else {"__float__": repr(value)}
        if isinstance(value, np.ndarray):
            return self.array(value, where)
        if isinstance(value, tuple):
            return {"__tuple__": [self.value(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, list):
            if value and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in value):
                return {"__list__": self.array(np.asarray(value), where)}
            return [self.value(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            if value and all(isinstance(k, numbers.Integral) and not isinstance(k, (bool, np.bool_)) for k in value):
                # {feature index: sign} (monotone_constraints' documented form): integer keys kept as integers.
                return {"__int_keys__": [[int(k), self.value(v, f"{where}[{k!r}]")] for k, v in value.items()]}
            if not all(isinstance(k, str) for k in value):
                raise ValueError(f"{where} has keys that are neither all strings nor all integers: cannot be saved "
                                 f"as JSON (keys {list(value)[:5]!r})")
            return {"__dict__": {k: self.value(v, f"{where}[{k!r}]") for k, v in value.items()}}
        if isinstance(value, type) and issubclass(value, np.generic) or isinstance(value, np.dtype):
            return {"__dtype__": np.dtype(value).name}
        if isinstance(value, BaseEstimator) and type(value).__name__ in SAFE_TRANSFORMERS:
            return {"__transformer__": self.transformer(value, where)}
        try:
            return {"__propensity__": propensity_to_dict(value)}
        except (ValueError, TypeError):
            pass
        raise ValueError(f"{where} = {value!r} cannot be saved in a safe model file (numbers, strings, arrays, "
                         f"propensity models and the transformers {SAFE_TRANSFORMERS} only); "
                         "use joblib for trusted files")

    def transformer(self, est, where: str) -> dict:
        params = {k: self.value(v, f"{where}.{k}") for k, v in est.get_params(deep=False).items()}
        state = {k: self.value(v, f"{where}.{k}") for k, v in vars(est).items()
                 if k.endswith("_") and not k.startswith("_")}
        return {"class": type(est).__name__, "params": params, "state": state}


class _Reader:
    """Turns the JSON values of a model file back into parameters and state; every array entry used once at least."""

    def __init__(self, arrays: dict):
        self.arrays = arrays
        self.used: set[str] = set()

    def array(self, inner, where: str) -> np.ndarray:
        if not isinstance(inner, str) or inner not in self.arrays:
            raise ValueError(f"{where}: refers to the array entry {inner!r:.40}, which the file does not hold")
        self.used.add(inner)
        return self.arrays[inner]

    def value(self, value, where: str):
        if value is None or isinstance(value, (bool, str, int, float)):
            return value
        if isinstance(value, list):
            return [self.value(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, dict) or len(value) != 1:
            raise ValueError(f"{where}: unexpected value {json.dumps(value)[:60]}")
        (tag, inner), = value.items()
        if tag == "__array__":
            return self.array(inner, where)
        if tag == "__list__" and isinstance(inner, dict) and set(inner) == {"__array__"}:
            arr = self.array(inner["__array__"], where)
            if arr.ndim != 1 or arr.dtype.kind not in "iuf":
                raise ValueError(f"{where}: a list must be stored as a 1-D array of numbers, got {arr.dtype} "
                                 f"{arr.shape}")
            return arr.tolist()
        if tag == "__tuple__" and isinstance(inner, list):
            return tuple(self.value(v, f"{where}[{i}]") for i, v in enumerate(inner))
        if tag == "__dict__" and isinstance(inner, dict):
            return {k: self.value(v, f"{where}[{k!r}]") for k, v in inner.items()}
        if tag == "__int_keys__" and isinstance(inner, list) and inner:
            out = {}
            for pair in inner:
                if not (isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int) or pair[0] in out:
                    raise ValueError(f"{where}: an integer-keyed mapping holds {json.dumps(pair)[:40]}, not a new "
                                     "[integer key, value] pair")
                out[pair[0]] = self.value(pair[1], f"{where}[{pair[0]}]")
            return out
        if tag == "__float__" and inner in ("nan", "inf", "-inf"):
            return float(inner)
        if tag == "__dtype__" and inner in _DTYPES:
            return np.dtype(inner).type
        if tag == "__propensity__":
            return propensity_from_dict(inner)
        if tag == "__transformer__" and isinstance(inner, dict):
            return self.transformer(inner, where)
        raise ValueError(f"{where}: unexpected value {json.dumps(value)[:60]}")

    def transformer(self, inner: dict, where: str):
        classes = _transformer_classes()
        if set(inner) != {"class", "params", "state"} or inner["class"] not in classes:
            raise ValueError(f"{where}: a preprocessor must be one of {SAFE_TRANSFORMERS}, described by its class, "
                             "params and state")
        cls = classes[inner["class"]]
        params = _plain_dict(inner["params"], f"{where} parameters")
        unknown = sorted(set(params) - set(cls().get_params()))
        if unknown:
            raise ValueError(f"{where}: {unknown[0]!r} is not a parameter of {inner['class']}")
        est = cls(**{k: self.value(v, f"{where}.{k}") for k, v in params.items()})
        try:
            est._validate_params()
        except (ValueError, TypeError) as err:
            raise ValueError(f"{where}: bad parameters of the {inner['class']}: {err}") from None
        for k, v in _plain_dict(inner["state"], f"{where} state").items():
            if not (k.endswith("_") and not k.startswith("_")):
                raise ValueError(f"{where}: {k!r} is not a fitted attribute")
            setattr(est, k, self.value(v, f"{where}.{k}"))
        return est


def _plain_dict(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a JSON object, got {type(value).__name__}")
    return value


# ----------------------------------------------------------------------------- estimators

def save_model(model, path) -> None:
    """Write a fitted estimator to ``path`` (an ``.npz`` archive of JSON and numeric arrays).

    The fitted state is checked as :func:`load_model` checks it (the names of the
    class's fitted attributes, their types, shapes and finiteness), so a file that
    would not load is never written.

    Parameters
    ----------
    model : fitted RankSVM, SVMPropRank, SVMPropDCG, SVMPropRBP, SLAMRanker, DeepPropDCG or GBDTPropDCG
        Its hyper-parameters must be numbers, strings, propensity models or a
        ``preprocessor`` among :data:`SAFE_TRANSFORMERS`; anything else (a
        callable, a ``Generator`` as ``random_state``) raises ``ValueError``
        rather than being dropped.
    path : str or path-like
        Written as given (numpy adds ``.npz`` when the name lacks it).

    Returns
    -------
    None

    Examples
    --------
    >>> import os, tempfile
    >>> from click_sim import make_ranking
    >>> from counterfactual_ltr.estimators import RankSVM
    >>> data = make_ranking(n_queries=20, random_state=0)
    >>> model = RankSVM(C=1.0).fit(data)
    >>> path = os.path.join(tempfile.mkdtemp(), "ranker.npz")
    >>> save_model(model, path)
    >>> bool((load_model(path).predict(data) == model.predict(data)).all())
    True
    """
    classes = _estimator_classes()
    name = type(model).__name__
    if classes.get(name) is not type(model):
        raise ValueError(f"cannot save a {name}: safe model files hold {sorted(classes)}")
    names = list(STATE[name]) + [k for k in OPTIONAL_STATE.get(name, {}) if hasattr(model, k)]
    if not all(hasattr(model, k) for k in names):
        raise ValueError(f"the {name} is not fitted: fit it before saving")
    extra = sorted(k for k in vars(model) if k.endswith("_") and not k.startswith("_") and k not in names)
    if extra:
        raise ValueError(f"the {name} holds the attribute {extra[0]!r}, which is not one of its fitted attributes "
                         "and would not be saved")
    state = check_state(name, {k: getattr(model, k) for k in names})
    writer = _Writer()
    params = {k: writer.value(v, f"{name}.{k}") for k, v in model.get_params(deep=False).items()}
    encoded = {}
    for k, v in state.items():
        if k == "model_":  # DeepPropDCG's network: its layer sizes and parameter arrays
            encoded[k] = {"__mlp__": {"hidden_layer_sizes": list(v.hidden_layer_sizes), "activation": v.activation,
                                      "dtype": v.dtype.name, "n_features": int(v.params[0].shape[0]),
                                      "params": [writer.array(p, f"{name}.model_") for p in v.params]}}
        elif k == "feature_names_in_":  # names are text: a JSON list, not an (object) array entry
            encoded[k] = [str(n) for n in v]
        elif k == "booster_":  # GBDTPropDCG's trees: LightGBM's own text model, as bytes (no code)
            encoded[k] = {"__booster__": writer.array(model.booster_to_array(), f"{name}.booster_")}
        else:
            encoded[k] = writer.value(v, f"{name}.{k}")
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "library_version": __version__,
            "class": name, "params": params, "state": encoded}
    arrays = dict(writer.arrays)
    arrays[_META] = np.array(json.dumps(meta))
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def load_model(path):
    """Read an estimator written by :func:`save_model`, trusting nothing the file holds.

    Nothing is unpickled or executed, nothing is allocated beyond what the file
    holds (array sizes are checked against the archive before reading), the JSON
    header is bounded in size and nesting, and the model is checked before it
    is returned: the class's parameters as ``fit`` checks them, exactly the
    class's fitted attributes, each of the right type, dtype and shape (arrays
    consistent with ``n_features_in_``), finite where the scores depend on it,
    and a prediction on a probe row that is finite.

    Parameters
    ----------
    path : str or path-like
        A file written by :func:`save_model`.

    Returns
    -------
    the fitted estimator (same class, parameters and fitted state)

    Raises
    ------
    ValueError
        If the file is not a model file of this format (a pickle, a corrupt
        archive, an unknown class, a wrong or inconsistent entry); the message
        names the file and the entry.

    Examples
    --------
    See :func:`save_model`.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{path}: a folder, not a model file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such model file")
    try:
        arrays = read_npz(path, text_entries=(_META,), max_text_chars=_MAX_JSON_BYTES)
    except ValueError as err:
        raise ValueError(f"{path}: not a counterfactual-ltr model file ({err})") from None
    try:
        meta = _read_meta(arrays)
        model = _rebuild(meta, arrays)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    except (KeyError, TypeError, AttributeError, IndexError, OverflowError, ArithmeticError) as err:
        raise ValueError(f"{path}: malformed model file ({type(err).__name__}: {err})") from None
    return model


def _read_meta(arrays) -> dict:
    if _META not in arrays:
        raise ValueError(f"not a counterfactual-ltr model file (no {_META} entry)")
    meta_array = arrays.pop(_META)
    if meta_array.dtype.kind != "U" or meta_array.shape != ():
        raise ValueError(f"not a counterfactual-ltr model file ({_META} is not text)")
    meta = loads_json(str(meta_array), max_chars=_MAX_JSON_BYTES)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError("not a counterfactual-ltr model file")
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"model format version {meta.get('format_version')!r} is not supported "
                         f"(this library reads version {FORMAT_VERSION})")
    if set(meta) != {"format", "format_version", "library_version", "class", "params", "state"}:
        raise ValueError(f"malformed model file: unexpected header fields {sorted(meta)}")
    return meta


def _rebuild(meta: dict, arrays: dict):
    """The estimator of a model file's header and arrays, checked (see :func:`load_model`)."""
    classes = _estimator_classes()
    name = meta["class"]
    if name not in classes:
        raise ValueError(f"unknown estimator class {name!r}")
    cls = classes[name]
    reader = _Reader(arrays)
    params = _plain_dict(meta["params"], "params")
    unknown = sorted(set(params) - set(cls().get_params(deep=False)))
    if unknown:
        raise ValueError(f"params: {unknown[0]!r} is not a parameter of {name}")
    model = cls(**{k: reader.value(v, f"params.{k}") for k, v in params.items()})
    raw = _plain_dict(meta["state"], "state")
    state = {k: v for k, v in raw.items() if k not in ("model_", "booster_")}
    state = {k: reader.value(v, k) for k, v in state.items()}
    if "model_" in raw:
        state["model_"] = _rebuild_mlp(raw["model_"], reader, state.get("n_features_in_"))
    if "booster_" in raw:
        state["booster_"] = _rebuild_booster(cls, raw["booster_"], reader, state.get("n_features_in_"))
    state = check_state(name, state)
    unused = sorted(set(arrays) - reader.used)
    if unused:
        raise ValueError(f"the array entry {unused[0]!r} is not part of the model")
    for k, v in state.items():
        setattr(model, k, v)
    try:
        model._check_params(state["n_features_in_"])
    except (ValueError, TypeError) as err:
        raise ValueError(f"params: {err}") from None
    _probe(model, state["n_features_in_"])
    return model


def _rebuild_mlp(spec, reader: "_Reader", n_features):
    """DeepPropDCG's network from its description, shapes checked before any parameter is allocated."""
    from ..models import MLP

    spec = _plain_dict(spec, "model_")
    if set(spec) != {"__mlp__"} or not isinstance(spec["__mlp__"], dict):
        raise ValueError("model_: expected the description of a network")
    spec = spec["__mlp__"]
    if set(spec) != {"hidden_layer_sizes", "activation", "dtype", "n_features", "params"}:
        raise ValueError(f"model_: unexpected fields {sorted(spec)}")
    if spec["n_features"] != n_features or not isinstance(n_features, int):
        raise ValueError(f"model_: the network takes {spec['n_features']!r} features but n_features_in_ is "
                         f"{n_features!r}")
    if spec["dtype"] not in ("float32", "float64"):
        raise ValueError(f"model_: dtype must be float32 or float64, got {spec['dtype']!r}")
    shapes = mlp_shapes(n_features, spec["hidden_layer_sizes"])
    params = spec["params"]
    if not isinstance(params, list) or len(params) != len(shapes):
        raise ValueError(f"model_: expected {len(shapes)} parameter arrays")
    arrays = [reader.value(p, f"model_.params[{k}]") for k, p in enumerate(params)]
    for k, (arr, shape) in enumerate(zip(arrays, shapes)):
        if not isinstance(arr, np.ndarray) or arr.dtype != np.dtype(spec["dtype"]) or arr.shape != shape:
            raise ValueError(f"model_.params[{k}]: expected a {spec['dtype']} array of shape {shape}, got "
                             f"{getattr(arr, 'dtype', type(arr).__name__)} {getattr(arr, 'shape', '')}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"model_.params[{k}]: holds a non-finite value")
    net = MLP(tuple(spec["hidden_layer_sizes"]), spec["activation"], dtype=np.dtype(spec["dtype"]))
    net.initialize(n_features)
    net.set_parameters(arrays)
    return net


def _rebuild_booster(cls, spec, reader: "_Reader", n_features):
    """GBDTPropDCG's LightGBM booster from its text model (parsed by LightGBM, never executed)."""
    spec = _plain_dict(spec, "booster_")
    if set(spec) != {"__booster__"}:
        raise ValueError("booster_: expected a LightGBM text model")
    if not isinstance(n_features, int):
        raise ValueError(f"booster_: n_features_in_ is {n_features!r}, not a number of features")
    try:
        booster = cls.booster_from_array(reader.value(spec["__booster__"], "booster_"), n_features)
    except ValueError as err:
        raise ValueError(f"booster_: {err}") from None
    if booster.num_feature() != n_features:
        raise ValueError(f"booster_: the trees take {booster.num_feature()} features but n_features_in_ is "
                         f"{n_features!r}")
    return booster


def _probe(model, n_features: int) -> None:
    """A loaded model must score rows of zeros and ones to finite float scores, one per row."""
    probe = np.vstack([np.zeros(n_features), np.ones(n_features)])
    try:
        scores = np.asarray(model.predict(probe))
    except (ValueError, TypeError, AttributeError, IndexError, FloatingPointError) as err:
        raise ValueError(f"the model cannot score a row ({type(err).__name__}: {err})") from None
    if scores.shape != (2,) or scores.dtype.kind != "f" or not np.all(np.isfinite(scores)):
        raise ValueError(f"the model scores a row of zeros and one of ones as {scores!r:.80}, not two finite numbers")
