"""The names of the exported model's input features, in input order, and their checks.

A serving stack finds a feature by its name, so the names decide which value meets which weight:
they come from the caller, else from what the model was fitted on (``feature_names_in_``), else
LETOR's feature numbers ``"1".."n"``. A wrong count or a repeated name would silently misalign
weights, so both are refused here, naming the feature.
"""

from __future__ import annotations

import numpy as np


def letor_names(n_features: int) -> list[str]:
    """LETOR's feature numbers ``"1".."n"`` (``qid:... 1:0.3 2:0.7`` numbers features from 1)."""
    return [str(j) for j in range(1, n_features + 1)]


def fitted_names(model):
    """The column names the model (or its preprocessor) saw in ``fit``, or None."""
    for owner in (model, getattr(model, "preprocessor_", None)):
        names = getattr(owner, "feature_names_in_", None)
        if names is not None:
            return [str(n) for n in np.asarray(names).tolist()]
    return None


def resolve_names(model, n_features: int, feature_names=None) -> list[str]:
    """The ``n_features`` input names of ``model``: ``feature_names``, else fitted names, else LETOR numbers.

    A ValueError names the problem: a count that is not the model's width (with the first
    extra or the number missing), an empty or non-string name (with its position), a repeat.
    """
    if feature_names is None:
        names = fitted_names(model)
        source = "the model's feature_names_in_"
        if names is None:
            return letor_names(n_features)
    else:
        if isinstance(feature_names, (str, bytes)):
            raise ValueError("feature_names must be a list of names, one per feature, not one string")
        names = list(feature_names)
        source = "feature_names"
    for position, name in enumerate(names):
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{source}[{position}] is {name!r}: every feature needs a non-empty string name")
        if name != name.strip():
            raise ValueError(f"{source}[{position}] is {name!r}: a name must not start or end with blanks")
    if len(names) != n_features:
        detail = (f"the first one too many is {names[n_features]!r}" if len(names) > n_features
                  else f"{n_features - len(names)} missing after {names[-1]!r}" if names else "none given")
        raise ValueError(f"{source} has {len(names)} names but the model takes {n_features} raw features "
                         f"({detail})")
    seen = {}
    for position, name in enumerate(names):
        if name in seen:
            raise ValueError(f"{source} names feature {name!r} twice (positions {seen[name]} and {position}): "
                             "a serving stack would give both the same value")
        seen[name] = position
    return names
