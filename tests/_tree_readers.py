"""Independent readers of exported tree models, written from each stack's documentation.

They share no code with ``counterfactual_ltr.export`` (nor with LightGBM): each parses the
exported text itself and evaluates it the way the serving stack's documentation says the stack
does, in that stack's number type (Java ``float``: float32 features, thresholds and sums).
LightGBM text is read back by ``lightgbm.Booster(model_str=...)`` and ONNX by ``onnxruntime``
in the tests themselves.
"""

from __future__ import annotations

import json

import numpy as np

__all__ = ["score_xgboost_json", "score_solr_mart"]


def _as_float32_matrix(X, n_names):
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2 or X.shape[1] != n_names:
        raise ValueError(f"X has shape {X.shape}, expected (n, {n_names})")
    return X


# --------------------------------------------------------------------------------------------------
# OpenSearch / Elasticsearch LTR plugin, model type "model/xgboost+json".
# Written from: OpenSearch documentation, "Learning to Rank > Uploading trained models", section on
# XGBoost (OpenSearch 2.x, opensearch-project/opensearch-learning-to-rank-base plugin 2.x, the same
# format as o19s elasticsearch-learning-to-rank 1.5 "Uploading A Trained Model"): the definition is
# XGBoost's JSON tree dump (`Booster.get_dump(dump_format="json")`; XGBoost 2.x doc/dump.schema: a
# split node has nodeid, depth, split, split_condition, yes, no, missing, children; a leaf has nodeid
# and leaf). A document goes to the child `yes` when its feature value is below split_condition, else
# to `no`, and to `missing` when the value is missing (NaN); the score is the sum of the leaves of
# all trees (no base score is added by the plugin for a bare list of trees). Features are named by
# the feature set's names and carried as Java floats.
# --------------------------------------------------------------------------------------------------
def score_xgboost_json(definition: str, feature_names, X) -> np.ndarray:
    """Scores of the rows of ``X`` (columns in ``feature_names`` order) under an XGBoost JSON dump."""
    trees = json.loads(definition)
    if not isinstance(trees, list):
        raise ValueError("an xgboost+json definition is a JSON list of trees")
    column = {name: i for i, name in enumerate(feature_names)}
    X = _as_float32_matrix(X, len(column))
    total = np.zeros(X.shape[0], dtype=np.float32)
    for tree in trees:
        total += _xgb_tree(tree, column, X, np.arange(X.shape[0]))
    return total


def _xgb_tree(node, column, X, rows):
    out = np.zeros(X.shape[0], dtype=np.float32)
    stack = [(node, rows)]
    while stack:
        node, rows = stack.pop()
        if rows.size == 0:
            continue
        if "leaf" in node:
            out[rows] = np.float32(node["leaf"])
            continue
        by_id = {child["nodeid"]: child for child in node["children"]}
        value = X[rows, column[node["split"]]]
        cond = np.float32(node["split_condition"])
        missing = np.isnan(value)
        below = ~missing & (value < cond)
        to_yes = below | (missing & (node["missing"] == node["yes"]))
        to_no = ~to_yes
        stack.append((by_id[node["yes"]], rows[to_yes]))
        stack.append((by_id[node["no"]], rows[to_no]))
    return out


# --------------------------------------------------------------------------------------------------
# Solr LTR, class org.apache.solr.ltr.model.MultipleAdditiveTreesModel.
# Written from: Apache Solr Reference Guide 9.x (9.6), Query Guide, "Learning To Rank", section
# "Models" (MultipleAdditiveTreesModel) and the class's Javadoc (Solr 9.9 API docs): params.trees is
# a list of {weight, root}; a node is either {value} (a leaf) or {feature, threshold, left, right};
# the document goes left when its feature value is <= threshold, right otherwise; the score is the
# sum over the trees of weight times the leaf reached. Numbers may be given as strings; values,
# thresholds and weights are Java floats. A feature the document lacks is given its feature's
# default value (0 unless configured) by the feature store before the model sees it: here
# `missing_value` stands for that default.
# Verified against Solr's source (apache/solr, solr/modules/ltr/src/java/org/apache/solr/ltr/model/
# MultipleAdditiveTreesModel.java at commit 1a87471fb43eca419c69441f30b85f0fd94855ec, read 2026-11-29):
# RegressionTreeNode.setThreshold stores Float.parseFloat(threshold) + NODE_SPLIT_SLACK (1E-6f, a float
# sum), and scoreNode goes left when value <= that; a node without "feature" is a leaf ("value", default
# 0), a split needs threshold, left and right; a tree needs weight and root; a feature name not among
# the model's features scores the whole tree 0 (refused here); score = float sum of weight * leaf.
# --------------------------------------------------------------------------------------------------
def score_solr_mart(model_json: str, X, missing_value: float = 0.0) -> np.ndarray:
    """Scores of the rows of ``X`` (columns in the model's ``features`` order) under Solr's MART model."""
    model = json.loads(model_json)
    if model.get("class") != "org.apache.solr.ltr.model.MultipleAdditiveTreesModel":
        raise ValueError(f"not a MultipleAdditiveTreesModel: {model.get('class')!r}")
    names = [f["name"] for f in model["features"]]
    column = {name: i for i, name in enumerate(names)}
    X = _as_float32_matrix(X, len(names)).copy()
    X[np.isnan(X)] = np.float32(missing_value)
    total = np.zeros(X.shape[0], dtype=np.float32)
    slack = np.float32(1e-6)                  # Solr's NODE_SPLIT_SLACK, added to every threshold
    for tree in model["params"]["trees"]:
        if "weight" not in tree or "root" not in tree:
            raise ValueError("a MultipleAdditiveTreesModel tree needs weight and root")
        weight = np.float32(float(tree["weight"]))
        out = np.zeros(X.shape[0], dtype=np.float32)
        stack = [(tree["root"], np.arange(X.shape[0]))]
        while stack:
            node, rows = stack.pop()
            if rows.size == 0:
                continue
            if "feature" not in node:
                if "left" in node or "right" in node:
                    raise ValueError("a leaf (no feature) with left or right")
                out[rows] = np.float32(float(node.get("value", 0.0)))
                continue
            if any(key not in node for key in ("threshold", "left", "right")):
                raise ValueError(f"split on {node['feature']!r} lacks threshold, left or right")
            if node["feature"] not in column:
                raise ValueError(f"split on {node['feature']!r}, which is not among the model's features")
            threshold = np.float32(np.float32(float(node["threshold"])) + slack)
            left = X[rows, column[node["feature"]]] <= threshold
            stack.append((node["left"], rows[left]))
            stack.append((node["right"], rows[~left]))
        total += weight * out
    return total


# --------------------------------------------------------------------------------------------------
# Vespa, rank feature lightgbm("file.json").
# Written from: Vespa 8 documentation, "Ranking with LightGBM models" (the model is LightGBM's JSON
# dump, `booster.dump_model()` written with json.dump, placed in the application package's models/;
# features are referred to by the names in `feature_names` as rank features), and LightGBM 4.x's
# documentation of the dump (`Booster.dump_model`; the tree_structure node fields): a split node has
# split_feature (index into feature_names), threshold, decision_type ("<=": go to left_child when
# value <= threshold), default_left and missing_type ("None", "Zero", "NaN": a missing value goes to
# the left child when default_left, else right), left_child and right_child; a leaf has leaf_value;
# the score is the sum of the leaves of all trees (shrinkage is already in the leaf values). Vespa
# evaluates ranking expressions in double precision. Only the "<=" / "NaN" / "None" subset is read.
# --------------------------------------------------------------------------------------------------
def score_lightgbm_json(text: str, features: dict) -> np.ndarray:
    """Scores under a LightGBM JSON dump; ``features`` maps each name in its ``feature_names`` to values."""
    dump = json.loads(text)
    names = dump["feature_names"]
    missing = [n for n in names if n not in features]
    if missing:
        raise KeyError(f"the model uses features {missing}, which were not supplied")
    columns = [np.asarray(features[n], dtype=np.float64) for n in names]
    n = columns[0].shape[0]
    total = np.zeros(n, dtype=np.float64)
    for tree in dump["tree_info"]:
        out = np.zeros(n, dtype=np.float64)
        stack = [(tree["tree_structure"], np.arange(n))]
        while stack:
            node, rows = stack.pop()
            if rows.size == 0:
                continue
            if "split_feature" not in node:
                out[rows] = float(node["leaf_value"])
                continue
            if node["decision_type"] != "<=" or node["missing_type"] not in ("NaN", "None"):
                raise ValueError(f"unsupported node: {node['decision_type']!r}, {node['missing_type']!r}")
            value = columns[node["split_feature"]][rows]
            nan = np.isnan(value)
            left = (~nan & (value <= float(node["threshold"]))) | (nan & bool(node["default_left"]))
            stack.append((node["left_child"], rows[left]))
            stack.append((node["right_child"], rows[~left]))
        total += out
    return total


# --------------------------------------------------------------------------------------------------
# OpenSearch / Elasticsearch LTR plugin, model type "model/ranklib" holding a MART / LambdaMART model.
# Written from: the plugin's documentation ("Uploading A Trained Model", RankLib models; o19s plugin
# 1.5 / OpenSearch LTR 2.x, which load RankLib text through RankLib 2.8's loader) and RankLib's
# documentation of its saved models (Lemur Project wiki, "RankLib File Format" / "How to use": a
# LambdaMART or MART model is "##" comment lines then an <ensemble> of <tree id weight>, each a
# nested <split> with <feature> (a 1-based feature id), <threshold> and two <split pos="left|right">
# children, or an <output> at a leaf). A document goes left when its value <= threshold; thresholds
# and outputs are Java floats; the score is the sum of weight * output over the trees. The plugin
# gives a feature that does not match a document the value 0 (`missing_value` here).
# --------------------------------------------------------------------------------------------------
def score_ranklib_ensemble(text: str, X, missing_value: float = 0.0) -> np.ndarray:
    """Scores of the rows of ``X`` (column ``j`` is RankLib feature id ``j + 1``) under a RankLib ensemble."""
    import xml.etree.ElementTree as ET

    lines = [line for line in text.splitlines() if line.strip() and not line.strip().startswith("##")]
    if not text.startswith("## LambdaMART") and not text.startswith("## MART"):
        raise ValueError("a RankLib tree model starts with '## LambdaMART' or '## MART'")
    root = ET.fromstring("\n".join(lines))
    X = np.asarray(X, dtype=np.float32).copy()
    X[np.isnan(X)] = np.float32(missing_value)
    total = np.zeros(X.shape[0], dtype=np.float64)
    for tree in root.findall("tree"):
        weight = float(np.float32(float(tree.get("weight"))))
        out = np.zeros(X.shape[0], dtype=np.float64)
        stack = [(tree.find("split"), np.arange(X.shape[0]))]
        while stack:
            node, rows = stack.pop()
            if rows.size == 0:
                continue
            leaf = node.find("output")
            if leaf is not None:
                out[rows] = float(np.float32(float(leaf.text.strip())))
                continue
            fid = int(node.find("feature").text.strip())
            left = X[rows, fid - 1] <= np.float32(float(node.find("threshold").text.strip()))
            children = {child.get("pos"): child for child in node.findall("split")}
            stack.append((children["left"], rows[left]))
            stack.append((children["right"], rows[~left]))
        total += weight * out
    return total
