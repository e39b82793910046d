"""Feature selectors, constant features and Pipelines of scalers and selectors fold into every export.

For each model kind (linear SVM, Deep PropDCG's MLP, GBDTPropDCG's trees) fitted with a selector
or a scaler+selector Pipeline on MQ2008 Fold1 (which has constant features: columns 6-10 and 43)
and on the raw-log feature table, the exported model's scores under the independent readers
(tests/_serving_readers.py, tests/_tree_readers.py, onnxruntime, lightgbm) equal ``model.predict``
within 1e-5 relative. Unfoldable steps are refused by name.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.feature_selection import SelectKBest, VarianceThreshold, f_regression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, MaxAbsScaler, MinMaxScaler, RobustScaler, StandardScaler

from _serving_readers import (opensearch_linear_scores, ranklib_linear_scores, solr_linear_scores,
                              solr_network_scores, vespa_scores)
from _tree_readers import score_lightgbm_json, score_ranklib_ensemble, score_solr_mart, score_xgboost_json
from counterfactual_ltr.export import export_model

RTOL = 1e-5

PREPROCESSORS = {
    "selector": lambda: VarianceThreshold(),
    "scaler+selector": lambda: make_pipeline(StandardScaler(), VarianceThreshold()),
    "selector+minmax+robust": lambda: make_pipeline(VarianceThreshold(1e-4), MinMaxScaler((-1, 2)), RobustScaler()),
    "maxabs+selector+standard(no mean)": lambda: make_pipeline(MaxAbsScaler(), VarianceThreshold(),
                                                               StandardScaler(with_mean=False)),
}


def _close(got, expected, what=""):
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    scale = np.maximum(np.abs(expected), np.abs(expected).max())
    worst = float(np.max(np.abs(got - expected) / scale))
    assert worst <= RTOL, f"{what}: largest relative difference {worst:.3g}"


def _dense(X):
    return np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)


def _onnx(content, X):
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(content, options, providers=["CPUExecutionProvider"])
    out = session.run(["score"], {"features": np.asarray(X, dtype=np.float32)})[0]
    return out.reshape(-1)


def _vespa_ref(name):
    return f"attribute(f{name})" if name.isdigit() else f"attribute({name})"


def check_linear_formats(model, X, names):
    expected = model.predict(X)
    by_name = {n: X[:, j] for j, n in enumerate(names)}
    _close(solr_linear_scores(export_model(model, "solr", feature_names=names), by_name), expected, "solr")
    _close(opensearch_linear_scores(export_model(model, "opensearch", feature_names=names), by_name), expected,
           "opensearch")
    _close(vespa_scores(export_model(model, "vespa", feature_names=names),
                        {_vespa_ref(n): X[:, j] for j, n in enumerate(names)}), expected, "vespa")
    _close(ranklib_linear_scores(export_model(model, "ranklib", feature_names=names), X.T), expected, "ranklib")
    _close(_onnx(export_model(model, "onnx", feature_names=names), X), expected, "onnx")


def check_mlp_formats(model, X, names):
    expected = model.predict(X)
    _close(solr_network_scores(export_model(model, "solr", feature_names=names),
                               {n: X[:, j] for j, n in enumerate(names)}), expected, "solr")
    _close(_onnx(export_model(model, "onnx", feature_names=names), X), expected, "onnx")


def check_tree_formats(model, X, names):
    lightgbm = pytest.importorskip("lightgbm")
    from counterfactual_ltr.export._trees import TREE_WRITERS

    expected = model.predict(X)
    _close(lightgbm.Booster(model_str=TREE_WRITERS["lightgbm"](model, names)).predict(X), expected, "lightgbm")
    _close(score_xgboost_json(TREE_WRITERS["xgboost-json"](model, names), names, X), expected, "xgboost-json")
    _close(score_solr_mart(TREE_WRITERS["solr"](model, names), X), expected, "solr")
    _close(score_ranklib_ensemble(TREE_WRITERS["ranklib"](model, names), X), expected, "ranklib")
    dump = TREE_WRITERS["vespa"](model, names)
    refs = json.loads(dump)["feature_names"]
    _close(score_lightgbm_json(dump, {r: X[:, j] for j, r in enumerate(refs)}), expected, "vespa")
    pytest.importorskip("onnxmltools")
    _close(_onnx(export_model(model, "onnx", feature_names=names), X), expected, "onnx")


def _fit(kind, preprocessor, log):
    from counterfactual_ltr.estimators import DeepPropDCG, GBDTPropDCG, SVMPropDCG

    if kind == "linear":
        return SVMPropDCG(C=10.0, max_iter=30, preprocessor=preprocessor).fit(log)
    if kind == "mlp":
        return DeepPropDCG(hidden_layer_sizes=(8,), activation="relu", learning_rate=1e-2, max_epochs=2,
                           random_state=0, preprocessor=preprocessor).fit(log)
    pytest.importorskip("lightgbm")
    return GBDTPropDCG(n_estimators=20, num_leaves=7, random_state=0, preprocessor=preprocessor).fit(log)


CHECKS = {"linear": check_linear_formats, "mlp": check_mlp_formats, "trees": check_tree_formats}


@pytest.fixture(scope="module")
def mq2008(mq2008_fold1_train):
    from click_sim import load_letor, simulate_clicks
    from conftest import mq2008_dir

    test = load_letor(mq2008_dir() / "Fold1" / "test.txt")
    log = simulate_clicks(mq2008_fold1_train, mq2008_fold1_train.X[:, 0], n_passes=2, random_state=0)
    return _dense(test.X), log


@pytest.mark.parametrize("kind", ["linear", "mlp", "trees"])
@pytest.mark.parametrize("pre", list(PREPROCESSORS))
def test_mq2008_selectors_and_pipelines_fold(mq2008, kind, pre):
    X, log = mq2008
    model = _fit(kind, PREPROCESSORS[pre](), log)
    kept = model.preprocessor_.transform(X[:1]).shape[1]
    assert kept < X.shape[1], "the selector dropped no column: the test would not test selection"
    CHECKS[kind](model, X, [str(j) for j in range(1, X.shape[1] + 1)])


@pytest.mark.parametrize("kind", ["linear", "mlp", "trees"])
def test_raw_log_table_scaler_and_selector(kind):
    from conftest import trec_joined

    data, log, names = trec_joined(("train", "test"))
    X = _dense(data.X)
    model = _fit(kind, make_pipeline(StandardScaler(), VarianceThreshold(1e-3)), log)
    CHECKS[kind](model, X, list(names))


def test_constant_features_fold_exactly(mq2008):
    """StandardScaler on MQ2008's constant columns (sklearn sets their scale to 1): the dropped mean is exact."""
    from counterfactual_ltr.export._affine import chain_of

    X, log = mq2008
    model = _fit("linear", StandardScaler(), log)
    constant = np.flatnonzero(model.preprocessor_.var_ == 0)
    assert constant.size and np.all(model.preprocessor_.scale_[constant] == 1.0)
    chain = chain_of(model, model.coef_.shape[0])
    forward = np.stack([chain.forward(X[:, chain.columns[k]], k) for k in range(chain.width)], axis=1)
    np.testing.assert_array_equal(forward, model.preprocessor_.transform(X))
    check_linear_formats(model, X, [str(j) for j in range(1, X.shape[1] + 1)])


def test_supervised_selector_in_a_pipeline(mq2008):
    """A SelectKBest (fitted with labels outside the ranker) in a Pipeline, attached to fitted models."""
    from counterfactual_ltr.estimators import RankSVM

    X, _ = mq2008
    rng = np.random.default_rng(0)
    y = X[:, 3] + 0.5 * X[:, 20] + rng.normal(0, 0.1, X.shape[0])
    pipe = make_pipeline(VarianceThreshold(), StandardScaler(), SelectKBest(f_regression, k=12)).fit(X, y)
    model = RankSVM()
    model.coef_ = rng.normal(size=12)
    model.preprocessor_, model.n_features_in_ = pipe, X.shape[1]
    names = [f"feat{j}" for j in range(X.shape[1])]
    check_linear_formats(model, X, names)
    solr = json.loads(export_model(model, "solr", feature_names=names))
    dropped = [n for n, keep in zip(names, _support(pipe, X.shape[1])) if not keep]
    assert len(dropped) == X.shape[1] - 12
    assert all(solr["params"]["weights"][n] == 0.0 for n in dropped)


def _support(pipe, width):
    keep = np.arange(width)
    for step in pipe:
        if hasattr(step, "get_support"):
            keep = keep[step.get_support()]
    mask = np.zeros(width, dtype=bool)
    mask[keep] = True
    return mask


@pytest.mark.parametrize("step, name", [
    (lambda: __import__("sklearn.decomposition", fromlist=["PCA"]).PCA(n_components=3), "PCA"),
    (lambda: FunctionTransformer(np.tanh), "FunctionTransformer"),
])
@pytest.mark.parametrize("kind", ["linear", "trees"])
def test_unfoldable_steps_are_refused_by_name(mq2008, step, name, kind):
    X, log = mq2008
    model = _fit(kind, make_pipeline(StandardScaler(), step()), log)
    for fmt in ("solr", "vespa", "onnx"):
        with pytest.raises(ValueError, match=rf"step '{name.lower()}' of the model's preprocessor \({name}\) "
                                             r"cannot be folded.*feature selectors"):
            export_model(model, fmt)
