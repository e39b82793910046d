"""Exported GBDTPropDCG trees score raw features as ``model.predict`` does, under independent readers.

Readers: ``lightgbm.Booster`` (LightGBM text), ``onnxruntime`` (ONNX), and the evaluators of
``tests/_tree_readers.py`` written from the OpenSearch LTR plugin's and Solr's documentation.
Models are fitted once per module; the whole file runs in a few seconds.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, QuantileTransformer, RobustScaler, StandardScaler

from _tree_readers import score_lightgbm_json, score_ranklib_ensemble, score_solr_mart, score_xgboost_json
from conftest import mq2008_available, mq2008_dir

lightgbm = pytest.importorskip("lightgbm")
onnxruntime = pytest.importorskip("onnxruntime", reason="format 'onnx' is checked with onnxruntime")
pytest.importorskip("onnxmltools", reason="format 'onnx' is written with onnxmltools")

from click_sim import load_letor, make_ranking, simulate_clicks, train_production_ranker  # noqa: E402
from counterfactual_ltr.estimators import GBDTPropDCG  # noqa: E402
from counterfactual_ltr.export._trees import TREE_WRITERS  # noqa: E402

FORMATS = ("lightgbm", "xgboost-json", "solr", "onnx", "vespa", "ranklib")
# Formats with no route for a missing value: the stack gives a feature a document lacks the value 0.
NO_NAN = ("solr", "ranklib")
RTOL = 1e-5


def score(fmt, exported, names, X):
    """The exported model's scores of raw ``X`` under the format's independent reader."""
    if fmt == "lightgbm":
        return lightgbm.Booster(model_str=exported).predict(np.asarray(X, dtype=np.float64))
    if fmt == "onnx":
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        session = onnxruntime.InferenceSession(exported, options, providers=["CPUExecutionProvider"])
        return session.run(["score"], {"features": np.asarray(X, dtype=np.float32)})[0][:, 0]
    if fmt == "xgboost-json":
        return score_xgboost_json(exported, names, X)
    if fmt == "vespa":          # the rank features Vespa hands the model, by the names in the dump
        refs = json.loads(exported)["feature_names"]
        return score_lightgbm_json(exported, {ref: X[:, j] for j, ref in enumerate(refs)})
    if fmt == "ranklib":
        return score_ranklib_ensemble(exported, X)
    return score_solr_mart(exported, X)


def reference(model, X):
    """``model.predict`` (which refuses NaN); with NaN, what it computes: the booster on the transformed rows."""
    if not np.isnan(X).any():
        return model.predict(X)
    pre = model.preprocessor_
    return model.booster_.predict(X if pre is None else pre.transform(X))


def assert_same(got, expected, what):
    """Equal within RTOL relative to each score, or to the largest score for scores near 0 (float32 sums)."""
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    scale = np.maximum(np.abs(expected), np.abs(expected).max())
    worst = np.max(np.abs(got - expected) / scale)
    assert worst <= RTOL, f"{what}: largest relative difference {worst:.3g}"


def names_for(width):
    return [f"feature_{j + 1}" for j in range(width)]


# ------------------------------------------------------------------------------------------ MQ2008
@pytest.fixture(scope="module")
def mq2008():
    if not mq2008_available():
        pytest.skip(f"MQ2008 not found at {mq2008_dir()}: set CLTR_DATA to the folder that contains MQ2008")
    train = load_letor(mq2008_dir() / "Fold1" / "train.txt")
    test = load_letor(mq2008_dir() / "Fold1" / "test.txt")
    ranker = train_production_ranker(train, random_state=0)
    log = simulate_clicks(train, ranker, n_passes=2, random_state=0)
    plain = GBDTPropDCG(n_estimators=30, num_leaves=7, random_state=0).fit(log)
    scaled = GBDTPropDCG(n_estimators=30, num_leaves=7, random_state=0, preprocessor=StandardScaler()).fit(log)
    return {"plain": plain, "scaled": scaled, "X": np.asarray(test.X, dtype=np.float64)}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["plain", "scaled"])
def test_mq2008_scores_match_predict(mq2008, fmt, kind):
    model, X = mq2008[kind], mq2008["X"]
    names = names_for(X.shape[1])
    exported = TREE_WRITERS[fmt](model, names)
    assert_same(score(fmt, exported, names, X), model.predict(X), f"{fmt} ({kind}) on MQ2008 Fold1 test")


def test_mq2008_lightgbm_text_is_exact_without_preprocessor(mq2008):
    model, X = mq2008["plain"], mq2008["X"]
    text = TREE_WRITERS["lightgbm"](model, names_for(X.shape[1]))
    booster = lightgbm.Booster(model_str=text)
    assert booster.feature_name() == names_for(X.shape[1])
    np.testing.assert_array_equal(booster.predict(X), model.predict(X))


# ------------------------------------------------------------------------- a raw log's feature table
@pytest.fixture(scope="module")
def trec_models():
    """GBDTPropDCG (plain and behind a scaler) on the TREC Session 2014 log joined to its impression features."""
    from conftest import trec_joined

    data, log, names = trec_joined()
    models = {"plain": GBDTPropDCG(n_estimators=30, num_leaves=7, random_state=0).fit(log),
              "scaled": GBDTPropDCG(n_estimators=30, num_leaves=7, random_state=0,
                                    preprocessor=StandardScaler()).fit(log)}
    return models, np.asarray(data.X, dtype=np.float64), names


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["plain", "scaled"])
def test_raw_log_feature_table(trec_models, fmt, kind):
    """Every tree format, with the table's column names as feature names, on every row of the table."""
    models, X, names = trec_models
    model = models[kind]
    assert model.booster_.num_trees() == 30 and np.ptp(model.predict(X)) > 0
    exported = TREE_WRITERS[fmt](model, names)
    assert_same(score(fmt, exported, names, X), model.predict(X), f"{fmt} ({kind}) on the TREC Session 2014 table")


# ------------------------------------------------------------------- NaN and integer-valued features
def _table(seed=0, n=600):
    """Integer-valued (categorical-looking) columns 0-2 and continuous 3-4, NaN in about 15% of cells."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(0, 5, n), rng.integers(0, 3, n), rng.integers(-2, 3, n),
                         rng.normal(size=n), rng.normal(scale=100.0, size=n)]).astype(np.float64)
    y = X[:, 0] - 2.0 * (X[:, 1] == 1) + np.sin(X[:, 3]) + 0.01 * X[:, 4] + rng.normal(scale=0.1, size=n)
    holes = rng.random(X.shape) < 0.15
    X[holes] = np.nan
    y[np.isnan(X[:, 0])] += 3.0         # a missing value that matters, so the trees learn its route
    return X, y


def _attached(booster, width, preprocessor=None, X=None):
    """A GBDTPropDCG holding ``booster`` (fitted by LightGBM on the table; GBDTPropDCG's fit refuses NaN)."""
    model = GBDTPropDCG()
    model.booster_, model.n_features_in_ = booster, width
    model.preprocessor_ = None if preprocessor is None else preprocessor.fit(X)
    return model


def _lgb(X, y, **params):
    base = {"objective": "regression", "num_leaves": 7, "min_data_in_leaf": 5, "verbose": -1, "seed": 0,
            "deterministic": True, "num_threads": 1}
    categorical = params.pop("categorical_feature", "auto")
    train_set = lightgbm.Dataset(X, label=y, categorical_feature=categorical, params={"verbose": -1})
    return lightgbm.train({**base, **params}, train_set, num_boost_round=30)


@pytest.fixture(scope="module")
def nan_models():
    X, y = _table()
    booster = _lgb(X, y)
    models = {"nan-trained": _attached(booster, X.shape[1]),
              "nan-trained+scaler": _attached(_lgb(StandardScaler().fit(X).transform(X), y), X.shape[1],
                                              StandardScaler(), X)}
    # GBDTPropDCG's own fit on the integer-valued table without NaN: its nodes have missing type None
    # (LightGBM scores NaN as 0 there); then asked about rows with NaN.
    data = make_ranking(n_queries=40, n_features=5, random_state=0)
    table, _ = _table(seed=2, n=data.X.shape[0])
    data.X[:] = np.where(np.isnan(table), 1.0, table)
    log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    models["fitted"] = GBDTPropDCG(n_estimators=30, num_leaves=7, min_child_samples=5, random_state=0).fit(log)
    models["fitted+scaler"] = GBDTPropDCG(n_estimators=30, num_leaves=7, min_child_samples=5, random_state=0,
                                          preprocessor=StandardScaler()).fit(log)
    Xt, _ = _table(seed=1)
    return models, Xt


def _boundary_rows(model, X):
    """Rows whose split feature sits on, and one float32 either side of, every raw threshold of the model."""
    pre = model.preprocessor_
    rows = []
    for info in model.booster_.dump_model()["tree_info"]:
        stack = [info["tree_structure"]]
        while stack:
            node = stack.pop()
            if "split_index" not in node:
                continue
            stack += [node["left_child"], node["right_child"]]
            j, t = node["split_feature"], node["threshold"]
            if abs(t) > 1e30:           # a split of missing values from all others
                continue
            if pre is not None:        # the raw value whose transform is t, roughly
                at = np.zeros((1, X.shape[1]))
                at[0, j] = t
                t = pre.inverse_transform(at)[0, j]
            centre = np.float32(t)
            for value in (np.nextafter(centre, np.float32(-np.inf)), centre, np.nextafter(centre, np.float32(np.inf))):
                row = np.nan_to_num(X[len(rows) % X.shape[0]].copy(), nan=0.0)
                row[j] = value
                rows.append(row)
    return np.asarray(rows, dtype=np.float32).astype(np.float64)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["nan-trained", "nan-trained+scaler", "fitted", "fitted+scaler"])
def test_nan_and_integer_features(nan_models, fmt, kind):
    models, X = nan_models
    model = models[kind]
    names = names_for(X.shape[1])
    exported = TREE_WRITERS[fmt](model, names)
    if fmt in NO_NAN:       # no NaN route: a missing feature is its default value (0) to the trees
        X = np.where(np.isnan(X), 0.0, X)
    assert_same(score(fmt, exported, names, X), reference(model, X), f"{fmt} ({kind}) with NaN")
    edges = _solr_reachable(fmt, _boundary_rows(model, X))
    assert_same(score(fmt, exported, names, edges), reference(model, edges),
                f"{fmt} ({kind}) one float32 either side of every threshold")


def _solr_reachable(fmt, edges):
    """For Solr, the rows without a raw value strictly inside (-1e-6, 1e-6) other than 0.

    Solr adds 1e-6f to every threshold it reads, and near 0 a float32 threshold plus 1e-6f moves in
    steps of about 1e-13, so a threshold there (LightGBM's 1e-35 zero split) is written as the
    nearest sum below it: values strictly between the two may go right (documented in write_solr).
    """
    if fmt != "solr":
        return edges
    return edges[~((np.abs(edges) < 1e-6) & (edges != 0)).any(axis=1)]


def test_nan_routes_are_learned_ones(nan_models):
    """The table's trees route NaN by a learned default side (missing type NaN), both ways."""
    models, _ = nan_models
    sides = {(n["missing_type"], n["default_left"]) for info in models["nan-trained"].booster_.dump_model()["tree_info"]
             for n in _nodes(info["tree_structure"])}
    assert ("NaN", True) in sides and ("NaN", False) in sides


def _nodes(node):
    if "split_index" in node:
        yield node
        yield from _nodes(node["left_child"])
        yield from _nodes(node["right_child"])


@pytest.mark.parametrize("pre", [MinMaxScaler(), MaxAbsScaler(), RobustScaler(), StandardScaler(with_mean=False)],
                         ids=["MinMaxScaler", "MaxAbsScaler", "RobustScaler", "StandardScaler(with_mean=False)"])
def test_every_foldable_scaler(nan_models, pre):
    """The trees of the NaN table behind each scaler the writers fold, NaN and threshold edges included."""
    models, X = nan_models
    model = _attached(models["nan-trained+scaler"].booster_, X.shape[1], pre, X)
    names = names_for(X.shape[1])
    edges = _boundary_rows(model, X)
    tiny = ((np.abs(edges) <= 1e-35) & (edges != 0)).any(axis=1)
    for fmt in FORMATS:
        exported = TREE_WRITERS[fmt](model, names)
        rows = np.where(np.isnan(X), 0.0, X) if fmt in NO_NAN else X
        assert_same(score(fmt, exported, names, rows), reference(model, rows), f"{fmt} behind {pre!r}")
        # LightGBM reads raw values within 1e-35 of 0 as 0, so its folded text cannot split them (documented)
        at = edges[~tiny] if fmt == "lightgbm" else _solr_reachable(fmt, edges)
        assert_same(score(fmt, exported, names, at), reference(model, at), f"{fmt} behind {pre!r}, edges")


def test_negative_scale_swaps_children(nan_models):
    models, X = nan_models
    model = models["fitted+scaler"]
    flipped = GBDTPropDCG()
    flipped.booster_, flipped.n_features_in_ = model.booster_, model.n_features_in_
    from sklearn.base import clone

    pre = clone(model.preprocessor_).fit(np.nan_to_num(X))
    pre.mean_, pre.scale_ = model.preprocessor_.mean_.copy(), model.preprocessor_.scale_.copy()
    pre.scale_[[0, 3]] *= -1.0
    flipped.preprocessor_ = pre
    Xf = np.nan_to_num(X, nan=1.0)
    names = names_for(X.shape[1])
    for fmt in FORMATS:
        assert_same(score(fmt, TREE_WRITERS[fmt](flipped, names), names, Xf), flipped.predict(Xf),
                    f"{fmt} with a negative scale")


# --------------------------------------------------------------------------------- formats' content
def test_formats_carry_names_and_order(nan_models):
    import onnx

    models, X = nan_models
    names = ["bm25", "pagerank", "click_rate", "age", "length"]
    model = models["fitted"]
    proto = onnx.load_from_string(TREE_WRITERS["onnx"](model, names))
    meta = {p.key: p.value for p in proto.metadata_props}
    assert json.loads(meta["feature_names"]) == names and "bm25, pagerank" in proto.doc_string
    assert [i.name for i in proto.graph.input] == ["features"] and [o.name for o in proto.graph.output] == ["score"]
    used = {n["split"] for t in json.loads(TREE_WRITERS["xgboost-json"](model, names)) for n in _xgb_nodes(t)}
    assert used <= set(names)
    solr = json.loads(TREE_WRITERS["solr"](model, names))
    assert [f["name"] for f in solr["features"]] == names
    assert all(tree["weight"] == "1" for tree in solr["params"]["trees"])


def _xgb_nodes(node):
    if "children" in node:
        yield node
        for child in node["children"]:
            yield from _xgb_nodes(child)


# ------------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize("fmt", FORMATS)
def test_refuses_width_mismatch_and_bad_names(nan_models, fmt):
    model = nan_models[0]["fitted"]
    with pytest.raises(ValueError, match=r"feature_names has 4 names but the model takes 5 features.*column 4"):
        TREE_WRITERS[fmt](model, names_for(4))
    with pytest.raises(ValueError, match=r"first extra name: 'feature_6'"):
        TREE_WRITERS[fmt](model, names_for(6))
    with pytest.raises(ValueError, match=r"'a' is given twice \(positions 0 and 2\)"):
        TREE_WRITERS[fmt](model, ["a", "b", "a", "c", "d"])
    with pytest.raises(ValueError, match=r"feature_names\[1\] must be a non-empty string"):
        TREE_WRITERS[fmt](model, ["a", "", "b", "c", "d"])
    with pytest.raises(ValueError, match="fitted GBDTPropDCG"):
        TREE_WRITERS[fmt](GBDTPropDCG(), names_for(5))


def test_refuses_names_lightgbm_cannot_carry(nan_models):
    model = nan_models[0]["fitted"]
    names = ["a", "two words", "c", "d", "e"]
    for fmt in ("lightgbm", "onnx"):
        with pytest.raises(ValueError, match=r"'two words' \(position 1\).*'xgboost-json' and 'solr' take any name"):
            TREE_WRITERS[fmt](model, names)
    for fmt in ("xgboost-json", "solr"):
        TREE_WRITERS[fmt](model, names)
    with pytest.raises(ValueError, match="'two words' is neither a Vespa field name"):
        TREE_WRITERS["vespa"](model, names)


@pytest.fixture(scope="module")
def unfoldable():
    X, y = _table()
    X = np.nan_to_num(X)
    categorical = _lgb(X, y, categorical_feature=[1], min_data_per_group=5, cat_smooth=1.0)
    linear = _lgb(X, y, linear_tree=True)
    zero = _lgb(np.where(X == 1.0, 0.0, X), y, zero_as_missing=True)
    return {"categorical split": _attached(categorical, 5), "linear tree": _attached(linear, 5),
            "zero as missing": _attached(zero, 5)}, X


@pytest.mark.parametrize("what", ["categorical split", "linear tree", "zero as missing"])
def test_refuses_what_a_format_cannot_hold(unfoldable, what):
    models, X = unfoldable
    model = models[what]
    text = json.dumps(model.booster_.dump_model())
    if what == "categorical split":
        assert '"=="' in text
    elif what == "zero as missing":
        assert '"Zero"' in text
    for fmt in ("xgboost-json", "solr", "onnx", "vespa", "ranklib"):
        with pytest.raises(ValueError, match=rf"{what.split()[0]}.*format '{fmt}' cannot hold it; 'lightgbm'"):
            TREE_WRITERS[fmt](model, names_for(5))
    # LightGBM's own text holds it as it is (no preprocessor to fold)
    booster = lightgbm.Booster(model_str=TREE_WRITERS["lightgbm"](model, names_for(5)))
    np.testing.assert_array_equal(booster.predict(X), model.booster_.predict(X))
    scaled = _attached(model.booster_, 5, StandardScaler(), X)
    with pytest.raises(ValueError, match=rf"format 'lightgbm' cannot hold it"):
        TREE_WRITERS["lightgbm"](scaled, names_for(5))


@pytest.mark.parametrize("pre, match", [
    (MinMaxScaler(clip=True), r"MinMaxScaler\(clip=True\): clipping is not affine"),
    (QuantileTransformer(n_quantiles=10), r"\(QuantileTransformer\) cannot be folded.*it can fold StandardScaler"),
])
def test_refuses_preprocessors_that_do_not_fold(nan_models, pre, match):
    models, X = nan_models
    model = _attached(models["fitted"].booster_, 5, pre, np.nan_to_num(X))
    for fmt in FORMATS:
        with pytest.raises(ValueError, match=match):
            TREE_WRITERS[fmt](model, names_for(5))


def test_export_model_routes_trees_to_their_writers(nan_models):
    """Through the public entry point: each tree format's output scores as the writer's; 'opensearch' is the
    plugin's _createmodel body around the XGBoost dump; a linear-only format is refused naming the others."""
    import json

    from counterfactual_ltr.export import FORMATS, export_model

    models, X = nan_models
    model = models["fitted+scaler"]
    X = X[~np.isnan(X).any(axis=1)]               # Solr has no route for NaN (a missing feature is its default)
    names = names_for(X.shape[1])
    for fmt in ("lightgbm", "solr", "onnx"):
        assert_same(score(fmt, export_model(model, fmt, feature_names=names), names, X), reference(model, X), fmt)
    body = json.loads(export_model(model, "opensearch", feature_names=names))
    assert body["model"]["model"]["type"] == "model/xgboost+json"
    assert_same(score("xgboost-json", body["model"]["model"]["definition"], names, X), reference(model, X),
                "opensearch")
    body = json.loads(export_model(model, "ranklib", feature_names=names))
    assert body["model"]["name"] == "cltr_gbdtpropdcg" and body["model"]["model"]["type"] == "model/ranklib"
    assert_same(score("ranklib", body["model"]["model"]["definition"], names, X), reference(model, X), "ranklib")
    assert {f for f, kinds in FORMATS.items() if "trees" in kinds} == {"solr", "opensearch", "onnx", "lightgbm",
                                                                       "vespa", "ranklib"}


def test_write_export_vespa_trees_writes_model_and_profile(nan_models, tmp_path):
    """Vespa: the JSON model for models/ and, beside it, the rank profile that calls lightgbm() on it."""
    from counterfactual_ltr.export import write_export

    models, X = nan_models
    model = models["fitted+scaler"]
    names = ["bm25(title)", "pagerank", "click_rate", "age", "3"]
    out = write_export(model, "vespa", tmp_path / "cltr_gbdtpropdcg.json", feature_names=names)
    dump = out.read_text()
    assert json.loads(dump)["feature_names"] == ["bm25(title)", "attribute(pagerank)", "attribute(click_rate)",
                                                 "attribute(age)", "attribute(f3)"]
    profile = (tmp_path / "cltr_gbdtpropdcg.profile").read_text()
    assert 'first-phase {\n        expression: lightgbm("cltr_gbdtpropdcg.json")' in profile
    assert profile.startswith("rank-profile cltr_gbdtpropdcg inherits default {")
    assert_same(score("vespa", dump, names, X), reference(model, X), "write_export vespa")
    with pytest.raises(ValueError, match="name the file \\*.json"):
        write_export(model, "vespa", tmp_path / "model.txt", feature_names=names)
    assert not (tmp_path / "model.txt").exists()


def test_tree_names_default_to_letor_numbers(nan_models):
    """Without feature_names a tree export names the features as the other kinds do: LETOR's numbers."""
    from counterfactual_ltr.export import export_model

    model = nan_models[0]["fitted"]
    assert json.loads(export_model(model, "vespa"))["feature_names"] == [f"attribute(f{j})" for j in range(1, 6)]
    assert "1=1 2=2 3=3 4=4 5=5" in json.loads(export_model(model, "ranklib"))["model"]["model"]["definition"]
