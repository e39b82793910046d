"""Independent readers of the exported serving formats, for the export tests.

Each reader evaluates a file the way the stack's documentation says the stack scores it, and
shares no code with ``counterfactual_ltr.export``: the tests compare its scores with
``model.predict``. Feature values are given as a dict ``name -> array`` (one value per document),
the way a stack hands a model the values of its named features.

Sources, as read for these readers:

* Solr Reference Guide 9.x, "Learning To Rank" (Models: LinearModel, NeuralNetworkModel;
  Normalizers: IdentityNormalizer, MinMaxNormalizer, StandardNormalizer). Solr holds weights,
  normaliser parameters and feature values as Java ``float``: the readers do the same.
* OpenSearch Learning to Rank plugin documentation (the o19s plugin, 2.x; the same text as the
  Elasticsearch LTR plugin 1.5 "Uploading A Trained Model"): ``model/linear`` whose definition is a
  JSON object feature -> weight, and ``feature_normalizers`` with ``standard`` (mean,
  standard_deviation) or ``min_max`` (minimum, maximum). Scores in ``float``.
* Vespa documentation (Vespa 8), "Ranking expressions" and the schema reference's
  ``rank-profile`` / ``first-phase`` / ``expression``: arithmetic on numbers and rank features
  such as ``attribute(name)``; the readers parse the sum-of-products subset (double precision).

Checked against the stacks' source on 2026-11-29 (read, not copied):

* apache/solr, solr/modules/ltr/src/java/org/apache/solr/ltr/: model/LinearModel.java (commit 19c29c5):
  every feature needs a weight (extra weights are ignored), weights are Numbers read as float, the score
  a float sum; model/NeuralNetworkModel.java (commit 1a87471): ``matrix`` has one row per unit and is read
  as List<List<Double>> (so entries must be JSON floats, not integers), ``bias`` as List<Double>, layer 0
  needs as many columns as features, the last layer one row; activations relu, leakyrelu (0.01), tanh,
  sigmoid (computed in double, cast to float), identity; norm/StandardNormalizer.java (commit 9f5b2c7):
  avg/std as strings or floats, (value - avg) / std in float, std must be > 0.
* opensearch-project/opensearch-learning-to-rank-base (commit af2d983): ranker/parser/LinearRankerParser.java
  reads the definition as an object feature -> number (a string weight or an unknown feature is refused),
  weights as float; feature/store/StandardFeatureNormDefinition.java: fields ``mean`` and
  ``standard_deviation`` (floats, std must be > 0); normalizer/StandardFeatureNormalizer.java:
  (value - mean) / std in float; feature/store/StoredLtrModel.java: ``feature_normalizers`` sits beside
  ``type`` and ``definition`` (a string or an object).
* o19s/RankyMcRankFace (the plugin's com.o19s:RankyMcRankFace:0.3.0): learning/LinearRegRank.java (commit
  c88c186) reads the first line that is neither empty nor starts with "##" as id:weight pairs, id 0 the
  constant, weights by Double.parseDouble; eval = constant + sum weight * float value in double.
"""

from __future__ import annotations

import json
import re

import numpy as np

F = np.float32


def _normalized(norm, values, where):
    """A Solr normaliser applied to a feature's values (Solr 9.x, "Feature Normalizers")."""
    if norm is None:
        return values
    cls = norm["class"].rsplit(".", 1)[-1]
    params = norm.get("params", {})
    if cls == "IdentityNormalizer":
        return values
    if cls == "StandardNormalizer":
        avg, std = F(float(params.get("avg", 0.0))), F(float(params.get("std", 1.0)))
        if not std > 0:
            raise ValueError(f"{where}: StandardNormalizer std must be positive")
        if any(not isinstance(params.get(k, ""), (str, float, int)) or isinstance(params.get(k), bool)
               for k in ("avg", "std")):
            raise ValueError(f"{where}: StandardNormalizer avg/std must be numbers or numeric strings")
        return ((values - avg) / std).astype(F)
    if cls == "MinMaxNormalizer":
        low, high = F(float(params["min"])), F(float(params["max"]))
        if not low < high:
            raise ValueError(f"{where}: MinMaxNormalizer min must be below max")
        return ((values - low) / (high - low)).astype(F)
    raise ValueError(f"{where}: unknown normalizer {cls}")


def _solr_inputs(model, features):
    """The model's feature values in its ``features`` order, normalised; every feature must be supplied."""
    columns = []
    for entry in model["features"]:
        name = entry["name"]
        if name not in features:
            raise KeyError(f"the model uses feature {name!r}, which the feature store does not supply")
        columns.append(_normalized(entry.get("norm"), np.asarray(features[name], dtype=F), name))
    return columns


def solr_linear_scores(text: str, features: dict) -> np.ndarray:
    """Scores of a Solr ``org.apache.solr.ltr.model.LinearModel``: sum of weight x normalised value."""
    model = json.loads(text)
    assert model["class"] == "org.apache.solr.ltr.model.LinearModel", model["class"]
    weights = model["params"]["weights"]
    names = [entry["name"] for entry in model["features"]]
    if set(weights) != set(names):  # Solr refuses a model whose weights and features differ
        raise ValueError(f"weights for {sorted(set(weights) ^ set(names))} without a feature, or the reverse")
    score = np.zeros(len(next(iter(features.values()))), dtype=F)
    for name, column in zip(names, _solr_inputs(model, features)):
        score = (score + F(weights[name]) * column).astype(F)
    return score


_SOLR_ACTIVATIONS = {"relu": lambda z: np.maximum(z, F(0)),
                     "leakyrelu": lambda z: np.where(z >= 0, z, F(0.01) * z),
                     "sigmoid": lambda z: (1.0 / (1.0 + np.exp(-z.astype(np.float64)))).astype(F),
                     "identity": lambda z: z}


def solr_network_scores(text: str, features: dict) -> np.ndarray:
    """Scores of a Solr ``NeuralNetworkModel``: each layer ``activation(matrix @ input + bias)``, one output."""
    model = json.loads(text)
    assert model["class"] == "org.apache.solr.ltr.model.NeuralNetworkModel", model["class"]
    a = np.stack(_solr_inputs(model, features))      # (inputs, documents)
    for k, layer in enumerate(model["params"]["layers"]):
        # Solr casts matrix and bias to List<List<Double>> / List<Double>: a JSON integer would not load
        entries = [v for row in layer["matrix"] for v in row] + list(layer["bias"])
        if not all(isinstance(v, float) for v in entries):
            raise ValueError(f"layer {k}: matrix and bias entries must be JSON floats (Solr reads them as Double)")
        matrix = np.asarray(layer["matrix"], dtype=F)  # one row per output unit
        bias = np.asarray(layer["bias"], dtype=F)
        if matrix.shape != (bias.shape[0], a.shape[0]):
            raise ValueError(f"layer {k}: matrix {matrix.shape} does not fit {a.shape[0]} inputs and "
                             f"{bias.shape[0]} biases")
        with np.errstate(over="ignore"):
            a = _SOLR_ACTIVATIONS[layer["activation"]]((matrix @ a + bias[:, None]).astype(F)).astype(F)
    if a.shape[0] != 1:
        raise ValueError(f"the last layer has {a.shape[0]} outputs; Solr wants one")
    return a[0]


def opensearch_linear_scores(text: str, features: dict) -> np.ndarray:
    """Scores of an LTR plugin ``_createmodel`` body of type ``model/linear`` (with its feature normalisers)."""
    body = json.loads(text)["model"]["model"]
    assert body["type"] == "model/linear", body["type"]
    definition = body["definition"]
    weights = json.loads(definition) if isinstance(definition, str) else definition
    for name, weight in weights.items():     # LinearRankerParser: VALUE_NUMBER only
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ValueError(f"weight of {name!r} must be a JSON number, got {weight!r}")
    normalizers = body.get("feature_normalizers", {})
    for name, norm in normalizers.items():
        if len(norm) != 1 or next(iter(norm)) not in ("standard", "min_max"):
            raise ValueError(f"normalizer of {name!r} must be one of standard, min_max")
        if "standard" in norm and not float(norm["standard"]["standard_deviation"]) > 0:
            raise ValueError(f"normalizer of {name!r}: standard_deviation must be positive")
    score = np.zeros(len(next(iter(features.values()))), dtype=F)
    for name, weight in weights.items():
        value = np.asarray(features[name], dtype=F)
        norm = normalizers.get(name)
        if norm is not None and "standard" in norm:
            value = ((value - F(norm["standard"]["mean"])) / F(norm["standard"]["standard_deviation"])).astype(F)
        elif norm is not None and "min_max" in norm:
            low, high = F(norm["min_max"]["minimum"]), F(norm["min_max"]["maximum"])
            value = ((value - low) / (high - low)).astype(F)
        score = (score + F(weight) * value).astype(F)
    return score


_TOKEN = re.compile(r"\s*(?:(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)"
                    r"|(?P<feature>[A-Za-z_]\w*\([^()]*\)(?:\.\w+)*)|(?P<op>[-+*]))")


def vespa_first_phase(text: str) -> str:
    """The first-phase expression of the (single) rank profile in ``text``, ``#`` comments dropped."""
    lines = [line.split("#", 1)[0] for line in text.splitlines()]
    body = "\n".join(lines)
    match = re.search(r"first-phase\s*\{\s*expression\s*(?::([^\n]*)|\{(.*?)\})", body, re.S)
    if match is None:
        raise ValueError("no first-phase expression found")
    return (match.group(1) or match.group(2)).strip()


def vespa_scores(text: str, features: dict) -> np.ndarray:
    """Evaluate a first-phase expression that is a sum of ``[-] number [* feature]`` / ``feature`` terms.

    ``features`` maps a rank feature as written (``attribute(f1)``, ``bm25(title)``) to its values.
    """
    expression = vespa_first_phase(text)
    tokens, position = [], 0
    while position < len(expression):
        match = _TOKEN.match(expression, position)
        if match is None or match.end() == position:
            if not expression[position:].strip():
                break
            raise ValueError(f"cannot parse the expression at {expression[position:position + 30]!r}")
        tokens.append((match.lastgroup, match.group(match.lastgroup)))
        position = match.end()
    n = len(next(iter(features.values())))
    total = np.zeros(n)
    i, sign = 0, 1.0
    while i < len(tokens):
        while tokens[i][0] == "op" and tokens[i][1] in "+-":   # unary or binary signs
            sign *= -1.0 if tokens[i][1] == "-" else 1.0
            i += 1
        factor = np.ones(n) * sign
        while True:
            kind, value = tokens[i]
            factor = factor * (float(value) if kind == "number" else np.asarray(features[value], dtype=np.float64))
            i += 1
            if i < len(tokens) and tokens[i] == ("op", "*"):
                i += 1
                continue
            break
        total += factor
        sign = 1.0
        if i < len(tokens) and tokens[i][1] not in "+-":
            raise ValueError(f"expected + or - after a term, got {tokens[i][1]!r}")
    return total


# RankLib's Linear Regression text inside the LTR plugin's "model/ranklib" (the plugin loads it with RankLib
# 2.8's loader, o19s fork RankyMcRankFace). Written from RankLib's documentation of its saved linear models
# (Lemur Project wiki, "RankLib How to use"; the saved file of ranker 9, Linear Regression): the first line
# "## Linear Regression", "##" comment lines, then one line of "id:weight" pairs; id is a 1-based feature
# id (the position in the plugin's feature set) and id 0 is a constant added to every score. Features are
# Java floats, weights and the sum doubles.
def ranklib_linear_scores(text: str, features_in_order) -> np.ndarray:
    """Scores under a ``model/ranklib`` linear body; ``features_in_order`` is the feature set's columns."""
    body = json.loads(text)["model"]["model"]
    if body["type"] != "model/ranklib":
        raise ValueError(f"not a RankLib model: {body['type']!r}")
    lines = body["definition"].splitlines()
    if lines[0].replace("## ", "").strip().upper() != "LINEAR REGRESSION":   # RankerFactory's lookup
        raise ValueError(f"not RankLib's Linear Regression text: {lines[0]!r}")
    model = [line for line in lines if line.strip() and not line.startswith("##")]
    if len(model) != 1:
        raise ValueError(f"expected one line of id:weight pairs, got {len(model)}")
    columns = [np.asarray(c, dtype=F).astype(np.float64) for c in features_in_order]
    score = np.zeros(columns[0].shape[0])
    for pair in model[0].split():
        fid, weight = pair.split(":")
        fid, weight = int(fid), float(weight)
        score += weight if fid == 0 else weight * columns[fid - 1]
    return score
