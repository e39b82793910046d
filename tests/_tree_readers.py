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
# Verified against the plugin's source (opensearch-project/opensearch-learning-to-rank-base at commit
# af2d983f16d8fee79a01cdeaa1a6e7aa5b8475e5, 2026-08-07, read 2026-11-29): ranker/parser/XGBoostJsonParser.java
# requires nodeid, depth, split, split_condition, yes, no and exactly two children on a split, with
# children[0].nodeid == yes and children[1].nodeid == no, and `missing` (optional) equal to yes or no; a
# leaf needs nodeid and leaf; split_condition and leaf are parsed as floats; the split must name a feature
# of the set. ranker/dectree/NaiveAdditiveDecisionTree.java goes left when threshold > value, sends NaN to
# the `missing` child (to `no` when `missing` is absent), and sums the leaves in float; a feature the
# document does not match is NaN there (0 only with the opt-in "missing_as_zero" of the object form).
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
            if "nodeid" not in node:
                raise ValueError("a leaf needs nodeid and leaf")
            out[rows] = np.float32(node["leaf"])
            continue
        required = ("nodeid", "depth", "split", "split_condition", "yes", "no", "children")
        if any(key not in node for key in required) or len(node["children"]) != 2:
            raise ValueError(f"node {node.get('nodeid')}: a split needs {', '.join(required)} and two children")
        first, second = node["children"]
        if first.get("nodeid") != node["yes"] or second.get("nodeid") != node["no"]:
            raise ValueError(f"node {node['nodeid']}: children must be [yes, no] in that order")
        if "missing" in node and node["missing"] not in (node["yes"], node["no"]):
            raise ValueError(f"node {node['nodeid']}: missing must be yes or no")
        if node["split"] not in column:
            raise ValueError(f"node {node['nodeid']}: unknown feature {node['split']!r}")
        by_id = {child["nodeid"]: child for child in node["children"]}
        value = X[rows, column[node["split"]]]
        cond = np.float32(node["split_condition"])
        missing = np.isnan(value)
        below = ~missing & (value < cond)
        to_yes = below | (missing & (node.get("missing") == node["yes"]))
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
# Verified against Vespa's source (vespa-engine/vespa, model-integration/src/main/java/ai/vespa/
# rankingexpression/importer/lightgbm/LightGBMParser.java at commit 089e1742fd1f960213130f059069d3c09fc53b75
# and LightGBMNode.java at 3021f66, read 2026-11-29): the importer reads `objective` (binary*/cross_entropy
# wrap the sum in sigmoid, poisson/gamma/tweedie in exp), `feature_names`, `tree_info[*].tree_structure`
# and `pandas_categorical` (read without a null check: the key must be present, null allowed); a node is a
# leaf when it has neither child; a numeric split becomes `if(x < threshold, left, right)`, or
# `if(!(x >= threshold), left, right)` when default_left -- a STRICT comparison, NaN going left exactly
# when default_left; missing_type is not read; the threshold is parsed with Double.parseDouble.
# --------------------------------------------------------------------------------------------------
def score_lightgbm_json(text: str, features: dict) -> np.ndarray:
    """Scores under a LightGBM JSON dump; ``features`` maps each name in its ``feature_names`` to values."""
    dump = json.loads(text)
    for key in ("objective", "feature_names", "tree_info", "pandas_categorical"):
        if key not in dump:                     # Vespa's importer reads each of them unconditionally
            raise ValueError(f"Vespa's LightGBM importer needs the key {key!r}")
    if dump["objective"].startswith(("binary", "cross_entropy", "poisson", "gamma", "tweedie")):
        raise ValueError(f"objective {dump['objective']!r} makes Vespa transform the sum (not read here)")
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
            if "left_child" not in node and "right_child" not in node:
                out[rows] = float(node["leaf_value"])
                continue
            if node["decision_type"] == "==":
                raise ValueError("categorical split (==): not read here")
            value = columns[node["split_feature"]][rows]
            nan = np.isnan(value)
            # Vespa: x < threshold, or !(x >= threshold) with default_left (NaN left); missing_type unread
            left = (~nan & (value < float(node["threshold"]))) | (nan & bool(node.get("default_left", False)))
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
# Verified against the source the plugin loads (opensearch-learning-to-rank-base af2d983, build.gradle:
# com.o19s:RankyMcRankFace:0.3.0; o19s/RankyMcRankFace, read 2026-11-29): RankerFactory.loadRankerFromString
# picks the ranker by the first line less "## " (upper-cased: "LAMBDAMART", "LINEAR REGRESSION");
# parsing/ModelLineProducer.java drops lines starting with '#', trims each line and joins the rest;
# learning/tree/Ensemble.java (commit 648622d) takes a split's children BY POSITION, ignoring pos=:
# child 0 <feature>, 1 <threshold>, 2 left, 3 right, and a split whose first child is not <feature> is a
# leaf holding <output>; feature ids, thresholds, outputs and weights go through Integer.parseInt /
# Float.parseFloat after trim(); learning/tree/Split.java (commit 31a3fce) goes left when value <= threshold;
# Ensemble.eval sums tree output * weight in float. The plugin's DenseProgramaticDataPoint reads an
# unknown (NaN) value as 0 and RanklibRanker casts the score to float.
# --------------------------------------------------------------------------------------------------
def score_ranklib_ensemble(text: str, X, missing_value: float = 0.0) -> np.ndarray:
    """Scores of the rows of ``X`` (column ``j`` is RankLib feature id ``j + 1``) under a RankLib ensemble."""
    import xml.etree.ElementTree as ET

    if text.splitlines()[0].replace("## ", "").strip().upper() not in ("LAMBDAMART", "MART"):
        raise ValueError("a RankLib tree model's first line names it: '## LambdaMART' or '## MART'")
    # ModelLineProducer: lines starting with '#' (after leading blanks) dropped, the others trimmed and joined
    root = ET.fromstring("".join(line.strip() for line in text.splitlines() if not line.lstrip().startswith("#")))
    if root.tag != "ensemble":
        raise ValueError(f"expected <ensemble>, got <{root.tag}>")
    X = np.asarray(X, dtype=np.float32).copy()
    X[np.isnan(X)] = np.float32(missing_value)
    total = np.zeros(X.shape[0], dtype=np.float64)
    for tree in root.findall("tree"):
        weight = float(np.float32(float(tree.get("weight"))))
        if len(tree) == 0 or tree[0].tag != "split":
            raise ValueError("a <tree>'s first child must be its root <split>")
        out = np.zeros(X.shape[0], dtype=np.float64)
        stack = [(tree[0], np.arange(X.shape[0]))]
        while stack:
            node, rows = stack.pop()
            if rows.size == 0:
                continue
            children = list(node)                # by position, as RankLib's Ensemble reads them
            if not children:
                raise ValueError("an empty <split>")
            if children[0].tag != "feature":
                if children[0].tag != "output":
                    raise ValueError(f"a leaf's first child must be <output>, got <{children[0].tag}>")
                out[rows] = float(np.float32(float(children[0].text.strip())))
                continue
            if [c.tag for c in children[:4]] != ["feature", "threshold", "split", "split"]:
                raise ValueError(f"a split's children must be feature, threshold, split, split; got "
                                 f"{[c.tag for c in children]}")
            fid = int(children[0].text.strip())
            left = X[rows, fid - 1] <= np.float32(float(children[1].text.strip()))
            stack.append((children[2], rows[left]))
            stack.append((children[3], rows[~left]))
        total += weight * out
    return total
