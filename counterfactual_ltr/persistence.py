"""Model and propensity files that are safe to open: JSON plus numeric arrays, never code.

:func:`save_model` writes a fitted estimator to one ``.npz`` archive: an entry
``__meta__`` holds JSON text (the class name from a fixed list, its
hyper-parameters, scalar fitted attributes) and the other entries hold numeric
arrays. :func:`load_model` reads it with ``numpy.load(..., allow_pickle=False)``
and rebuilds the estimator from the fixed list of classes, so opening a model
file never executes code or unpickles objects. ``joblib``/``pickle`` also work
on the estimators, but only for files you trust: unpickling runs arbitrary code.

Propensity models have a JSON form too (:func:`propensity_to_dict`,
:func:`propensity_from_dict`, :func:`load_propensity`), the format of
``cltr propensity`` and of ``--propensity file.json``.
"""

from __future__ import annotations

import json
import numbers
import os
import zipfile

import numpy as np

from ._version import __version__

__all__ = ["save_model", "load_model", "propensity_to_dict", "propensity_from_dict", "load_propensity",
           "SAFE_TRANSFORMERS"]

FORMAT = "counterfactual-ltr model"
FORMAT_VERSION = 1
_META = "__meta__"
#: scikit-learn transformers a model file may hold as ``preprocessor`` (numeric fitted state only).
SAFE_TRANSFORMERS = ("StandardScaler", "MinMaxScaler", "MaxAbsScaler", "RobustScaler", "QuantileTransformer")


def _estimator_classes() -> dict:
    from .estimators import DeepPropDCG, GBDTPropDCG, RankSVM, SLAMRanker, SVMPropDCG, SVMPropRank, SVMPropRBP

    return {c.__name__: c for c in (RankSVM, SVMPropRank, SVMPropDCG, SVMPropRBP, SLAMRanker, DeepPropDCG,
                                    GBDTPropDCG)}


def _transformer_classes() -> dict:
    import sklearn.preprocessing as pre

    return {name: getattr(pre, name) for name in SAFE_TRANSFORMERS}


# ----------------------------------------------------------------------------- propensity models

def propensity_to_dict(model) -> dict:
    """JSON-ready description of a propensity model (a number is an ``eta``).

    Parameters
    ----------
    model : None, float (eta), PositionBasedPropensity, TabularPropensity or TrustBiasPropensity
        The model to describe (``None``: ``eta = 1``).

    Returns
    -------
    dict with ``"kind"`` (``"position_based"``, ``"tabular"`` or ``"trust_bias"``) and the model's numbers.

    Examples
    --------
    >>> from counterfactual_ltr.propensity import PositionBasedPropensity
    >>> propensity_to_dict(PositionBasedPropensity(eta=0.5, clip=0.1))
    {'kind': 'position_based', 'eta': 0.5, 'clip': 0.1}
    >>> propensity_from_dict(propensity_to_dict(2.0))
    PositionBasedPropensity(eta=2.0)
    """
    from .propensity_models import PositionBasedPropensity, TabularPropensity, TrustBiasPropensity, as_propensity_model

    model = as_propensity_model(model)
    if isinstance(model, PositionBasedPropensity):
        return {"kind": "position_based", "eta": model.eta, "clip": model.clip}
    if isinstance(model, TabularPropensity):
        return {"kind": "tabular", "values": model.values.tolist()}
    if isinstance(model, TrustBiasPropensity):
        return {"kind": "trust_bias", "examination": model.examination.tolist(),
                "eps_plus": model.eps_plus.tolist(), "eps_minus": model.eps_minus.tolist()}
    raise ValueError(f"cannot describe the propensity model {model!r} as JSON (supported: position-based, "
                     "tabular, trust-bias)")


def propensity_from_dict(spec: dict):
    """The propensity model described by :func:`propensity_to_dict`'s output.

    Parameters
    ----------
    spec : dict
        With ``"kind"``; a dict holding such a description under ``"propensity"``
        (the file ``cltr propensity`` writes) is accepted too.

    Returns
    -------
    PositionBasedPropensity, TabularPropensity or TrustBiasPropensity

    Examples
    --------
    >>> propensity_from_dict({"kind": "tabular", "values": [1.0, 0.5]})
    TabularPropensity([1.0, 0.5])
    """
    from .propensity_models import PositionBasedPropensity, TabularPropensity, TrustBiasPropensity

    if not isinstance(spec, dict):
        raise ValueError(f"a propensity description must be a JSON object, got {type(spec).__name__}")
    if "kind" not in spec and isinstance(spec.get("propensity"), dict):
        spec = spec["propensity"]
    kind = spec.get("kind")
    try:
        if kind == "position_based":
            return PositionBasedPropensity(eta=spec["eta"], clip=spec.get("clip"))
        if kind == "tabular":
            return TabularPropensity(spec["values"])
        if kind == "trust_bias":
            return TrustBiasPropensity(spec["examination"], eps_plus=spec["eps_plus"], eps_minus=spec["eps_minus"])
    except KeyError as err:
        raise ValueError(f"the {kind!r} propensity description lacks the field {err.args[0]!r}") from None
    raise ValueError(f"unknown propensity kind {kind!r} (expected 'position_based', 'tabular' or 'trust_bias')")


def load_propensity(spec):
    """A propensity model from a command-line style value: an ``eta`` or a JSON file.

    Parameters
    ----------
    spec : None, number, or str
        ``None`` -> the default (eta = 1); a number or numeric string -> position-based
        with that ``eta``; any other string -> path of a JSON file written by
        ``cltr propensity`` or :func:`propensity_to_dict`.

    Returns
    -------
    propensity model

    Examples
    --------
    >>> load_propensity("0.5")
    PositionBasedPropensity(eta=0.5)
    """
    from .propensity_models import PositionBasedPropensity, as_propensity_model

    if spec is None or isinstance(spec, numbers.Real):
        return as_propensity_model(spec)
    text = os.fspath(spec)
    try:
        return PositionBasedPropensity(float(text))
    except ValueError:
        pass
    if not os.path.isfile(text):
        raise ValueError(f"propensity {text!r} is neither a number (eta) nor an existing JSON file")
    try:
        with open(text, encoding="utf-8") as fh:
            payload = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
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
        if arr.dtype == object:
            raise ValueError(f"{where} holds non-numeric objects: a model file keeps numbers only")
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
            if not all(isinstance(k, str) for k in value):
                raise ValueError(f"{where} has non-string keys: cannot be saved as JSON")
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


def _decode(value, arrays, where: str):
    if isinstance(value, list):
        return [_decode(v, arrays, where) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1:
        raise ValueError(f"malformed model file: unexpected object at {where}")
    (tag, inner), = value.items()
    if tag == "__array__":
        if inner not in arrays:
            raise ValueError(f"malformed model file: array {inner!r} of {where} is missing")
        return arrays[inner]
    if tag == "__list__":
        return _decode(inner, arrays, where).tolist()
    if tag == "__tuple__":
        return tuple(_decode(v, arrays, where) for v in inner)
    if tag == "__dict__":
        return {k: _decode(v, arrays, f"{where}[{k!r}]") for k, v in inner.items()}
    if tag == "__float__":
        return float(inner)
    if tag == "__dtype__":
        return np.dtype(inner).type
    if tag == "__propensity__":
        return propensity_from_dict(inner)
    if tag == "__transformer__":
        classes = _transformer_classes()
        if inner.get("class") not in classes:
            raise ValueError(f"malformed model file: transformer class {inner.get('class')!r} is not allowed")
        est = classes[inner["class"]](**{k: _decode(v, arrays, f"{where}.{k}") for k, v in inner["params"].items()})
        for k, v in inner["state"].items():
            setattr(est, k, _decode(v, arrays, f"{where}.{k}"))
        return est
    raise ValueError(f"malformed model file: unknown tag {tag!r} at {where}")


# ----------------------------------------------------------------------------- estimators

def save_model(model, path) -> None:
    """Write a fitted estimator to ``path`` (an ``.npz`` archive of JSON and numeric arrays).

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
    fitted = {k: v for k, v in vars(model).items() if k.endswith("_") and not k.startswith("_")}
    if not fitted:
        raise ValueError(f"the {name} is not fitted: fit it before saving")
    writer = _Writer()
    params = {k: writer.value(v, f"{name}.{k}") for k, v in model.get_params(deep=False).items()}
    state = {}
    for k, v in fitted.items():
        if k == "model_":  # DeepPropDCG's network: its layer sizes and parameter arrays
            state[k] = {"__mlp__": {"hidden_layer_sizes": list(v.hidden_layer_sizes), "activation": v.activation,
                                    "dtype": v.dtype.name, "n_features": int(v.params[0].shape[0]),
                                    "params": [writer.array(p, f"{name}.model_") for p in v.params]}}
        elif k == "booster_":  # GBDTPropDCG's trees: LightGBM's own text model, as bytes
            state[k] = {"__booster__": writer.array(model.booster_to_array(), f"{name}.booster_")}
        else:
            state[k] = writer.value(v, f"{name}.{k}")
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "library_version": __version__,
            "class": name, "params": params, "state": state}
    arrays = dict(writer.arrays)
    arrays[_META] = np.array(json.dumps(meta))
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def load_model(path):
    """Read an estimator written by :func:`save_model`, without unpickling anything.

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
        archive, an unknown class); the message names the file.

    Examples
    --------
    See :func:`save_model`.
    """
    from .models import MLP

    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {k: archive[k] for k in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise ValueError(f"{path}: not a counterfactual-ltr model file ({err})") from None
    if _META not in arrays:
        raise ValueError(f"{path}: not a counterfactual-ltr model file (no {_META} entry)")
    try:
        meta = json.loads(str(arrays.pop(_META)))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: malformed model metadata ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path}: not a counterfactual-ltr model file")
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: model format version {meta.get('format_version')} is not supported "
                         f"(this library reads version {FORMAT_VERSION})")
    classes = _estimator_classes()
    if meta.get("class") not in classes:
        raise ValueError(f"{path}: unknown estimator class {meta.get('class')!r}")
    try:
        model = classes[meta["class"]](**{k: _decode(v, arrays, k) for k, v in meta["params"].items()})
        for k, v in meta["state"].items():
            if isinstance(v, dict) and "__mlp__" in v:
                spec = v["__mlp__"]
                net = MLP(tuple(spec["hidden_layer_sizes"]), spec["activation"], dtype=np.dtype(spec["dtype"]))
                net.initialize(spec["n_features"])
                net.set_parameters([_decode(p, arrays, "model_") for p in spec["params"]])
                v = net
            elif isinstance(v, dict) and "__booster__" in v:
                v = classes[meta["class"]].booster_from_array(_decode(v["__booster__"], arrays, k))
            else:
                v = _decode(v, arrays, k)
            setattr(model, k, v)
    except (KeyError, TypeError) as err:
        raise ValueError(f"{path}: malformed model file ({err!r})") from None
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    return model
