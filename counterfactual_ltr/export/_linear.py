"""Linear rankers for Solr's LinearModel, the OpenSearch/Elasticsearch LTR plugin and a Vespa rank profile.

A linear ranker scores ``((x[:, columns] - shift) / scale) @ coef`` (the preprocessor read by
``_affine``). Its form here is on raw columns: the model's weights spread to the raw width with 0
on the columns a selector dropped (shift 0, scale 1 there). Solr's and the LTR plugin's linear
models have no constant term, so the scaling is written as their own per-feature standard
normaliser (``(x - avg) / std``) and the weights are the model's own; Vespa's expression, RankLib's
Linear Regression and ONNX take a constant, so there it is folded: ``x @ (coef / scale) + bias``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from ._affine import affine_of


@dataclass
class LinearForm:
    """A linear ranker on raw columns: weights (0 on dropped columns), the scaling before them, the raw names."""

    kind: str
    coef: np.ndarray
    shift: np.ndarray
    scale: np.ndarray
    names: list

    @property
    def scaled(self) -> bool:
        """Whether a preprocessor stands between the raw features and the weights."""
        return bool(np.any(self.shift != 0) or np.any(self.scale != 1))

    def folded(self):
        """``(weights, bias)`` on raw features: ``x @ weights + bias`` is the model's score."""
        weights = self.coef / self.scale
        return weights, float(-(self.shift * weights).sum())


def linear_form(model, names_of) -> LinearForm:
    """The :class:`LinearForm` of a fitted linear ranker (``coef_``, optional ``preprocessor_``)."""
    coef = np.asarray(model.coef_, dtype=np.float64)
    if coef.ndim != 1 or not np.all(np.isfinite(coef)):
        raise ValueError(f"{type(model).__name__}.coef_ must be a finite 1-D array of weights, got shape {coef.shape}")
    chain, shift, scale = affine_of(model, coef.shape[0])
    raw_coef, raw_shift, raw_scale = np.zeros(chain.n_raw), np.zeros(chain.n_raw), np.ones(chain.n_raw)
    raw_coef[chain.columns], raw_shift[chain.columns], raw_scale[chain.columns] = coef, shift, scale
    return LinearForm(type(model).__name__, raw_coef, raw_shift, raw_scale, names_of(chain.n_raw))


def model_name(kind: str) -> str:
    """The name the stacks store the model under: ``cltr_<class name in lower case>``."""
    return "cltr_" + kind.lower()


def solr_linear(form: LinearForm) -> str:
    """Solr LTR ``LinearModel`` JSON (for PUT to ``/solr/<collection>/schema/model-store``)."""
    features = []
    for name, avg, std in zip(form.names, form.shift, form.scale):
        entry = {"name": name}
        if form.scaled:
            entry["norm"] = {"class": "org.apache.solr.ltr.norm.StandardNormalizer",
                             "params": {"avg": repr(float(avg)), "std": repr(float(std))}}
        features.append(entry)
    weights = {name: float(w) for name, w in zip(form.names, form.coef)}
    body = {"class": "org.apache.solr.ltr.model.LinearModel", "name": model_name(form.kind),
            "features": features, "params": {"weights": weights}}
    return json.dumps(body, indent=2) + "\n"


def opensearch_linear(form: LinearForm) -> str:
    """The LTR plugin's ``_createmodel`` request body with a ``model/linear`` definition (a JSON string)."""
    definition = json.dumps({name: float(w) for name, w in zip(form.names, form.coef)}, indent=1)
    model = {"type": "model/linear", "definition": definition}
    if form.scaled:
        model["feature_normalizers"] = {name: {"standard": {"mean": float(avg), "standard_deviation": float(std)}}
                                        for name, avg, std in zip(form.names, form.shift, form.scale)}
    return json.dumps({"model": {"name": model_name(form.kind), "model": model}}, indent=2) + "\n"


# RankLib's text model, as the OpenSearch/Elasticsearch LTR plugin reads it for "model/ranklib": the plugin
# (o19s elasticsearch-learning-to-rank 1.5.x / opensearch-learning-to-rank-base 2.x) parses the definition
# with RankLib's RankerFactory.loadRankerFromString, through o19s' RankyMcRankFace (0.3.0 in the plugin's
# build.gradle, checked 2026-11-29), a fork of RankLib 2.8. The first line names the ranker
# ("## Linear Regression" -> LinearRegRank); other "##" lines are comments; the model line is "id:weight"
# pairs where id is the 1-based position of a feature in the plugin's feature set and id 0 is the constant
# (LinearRegRank keeps it as its last weight and adds it to
# every score). Coordinate Ascent's text ("## Coordinate Ascent") has no constant, so Linear Regression's
# is written: it carries the folded scaler exactly.
_RANKLIB_LINEAR_HEADER = "## Linear Regression"


def ranklib_text_names(names, fmt: str = "ranklib") -> list:
    """The feature names, checked to fit on one RankLib comment line (no line breaks)."""
    for i, name in enumerate(names):
        if "\n" in name or "\r" in name:
            raise ValueError(f"feature name {name!r} (position {i}) holds a line break, which format {fmt!r} "
                             "cannot carry in its feature list")
    return list(names)


def ranklib_linear(form: LinearForm) -> str:
    """The LTR plugin's ``_createmodel`` body with a ``model/ranklib`` definition: RankLib's Linear Regression text.

    The scaler is folded into the weights and RankLib's constant (feature id ``0``), so the model
    scores raw feature values; feature ``j`` (0-based column) is RankLib id ``j + 1``, its position
    in the plugin's feature set, which must list the features in ``form.names`` order.
    """
    names = ranklib_text_names(form.names)
    weights, bias = form.folded()
    pairs = " ".join([f"0:{float(bias)!r}"] + [f"{j + 1}:{float(w)!r}" for j, w in enumerate(weights)])
    text = (f"{_RANKLIB_LINEAR_HEADER}\n## Lambda = 0 (exported by counterfactual_ltr.export from {form.kind}; "
            f"raw features, scaler folded in)\n## Features (id = position in the feature set): "
            + " ".join(f"{j + 1}={name}" for j, name in enumerate(names)) + f"\n{pairs}\n")
    return ranklib_body(form.kind, text)


def ranklib_body(kind: str, definition: str) -> str:
    """The plugin's ``_createmodel`` request body around a RankLib text ``definition``."""
    model = {"type": "model/ranklib", "definition": definition}
    return json.dumps({"model": {"name": model_name(kind), "model": model}}, indent=2) + "\n"


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RANK_FEATURE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\([^()]*\)(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def vespa_reference(name: str) -> str:
    """The Vespa rank feature of a feature name: ``attribute(name)``, a rank feature as given, ``attribute(fN)``.

    A LETOR feature number ``N`` becomes ``attribute(fN)`` (a Vespa field name cannot start with a digit).
    """
    if name.isdigit():
        return f"attribute(f{name})"
    if _IDENTIFIER.match(name):
        return f"attribute({name})"
    if _RANK_FEATURE.match(name):
        return name
    raise ValueError(f"feature name {name!r} is neither a Vespa field name (letters, digits, _), a rank feature such "
                     "as bm25(title), nor a LETOR feature number: Vespa cannot refer to it")


def _number(value: float) -> str:
    """A float in full precision, always with a decimal point (1e-05 -> 1.0e-05)."""
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + ("e" + exponent if exponent else "")


def vespa_linear(form: LinearForm) -> str:
    """A Vespa rank profile whose first-phase expression is ``sum_j w_j * feature_j + bias`` on raw features."""
    weights, bias = form.folded()
    refs = [vespa_reference(name) for name in form.names]
    first = {}
    for name, ref in zip(form.names, refs):
        if first.setdefault(ref, name) != name:
            raise ValueError(f"feature names {first[ref]!r} and {name!r} are both {ref} in Vespa: rename one")
    lines = [f"{'-' if w < 0 else '+'} {_number(abs(w))} * {ref}" for w, ref in zip(weights, refs)]
    lines[0] = lines[0].removeprefix("+ ")
    lines.append(f"{'-' if bias < 0 else '+'} {_number(abs(bias))}")
    body = "\n".join(" " * 12 + line for line in lines)
    header = (f"# {form.kind} exported by counterfactual_ltr.export: {len(refs)} features, input order "
              f"{', '.join(refs)}\n")
    return (header + f"rank-profile {model_name(form.kind)} inherits default {{\n"
            "    first-phase {\n        expression {\n" + body + "\n        }\n    }\n}\n")
