"""counterfactual_ltr.export: every format scores raw features as model.predict does, under a reader that
shares no code with the writer (tests/_serving_readers.py; onnxruntime for ONNX); refusals name why."""

import json

import numpy as np
import pytest

from _serving_readers import (opensearch_linear_scores, ranklib_linear_scores, solr_linear_scores,
                              solr_network_scores, vespa_scores)
from counterfactual_ltr.export import FORMATS, export_model, write_export

RTOL = 1e-5


def _close(got, expected):
    """Equal within RTOL relative (of each score, or of the largest score for scores near 0)."""
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(np.abs(expected).max(), 1e-12)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), expected, rtol=RTOL, atol=RTOL * scale)


def _by_name(X, names):
    return {name: X[:, j] for j, name in enumerate(names)}


def _vespa_refs(names):
    return [f"attribute(f{n})" if n.isdigit() else f"attribute({n})" for n in names]


def _onnx_scores(content, X):
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(content, options, providers=["CPUExecutionProvider"])
    return session.run(["score"], {"features": np.asarray(X, dtype=np.float32)})[0]


def check_linear(model, X, names=None):
    """All linear formats against model.predict on X (names: given to the export, else LETOR numbers)."""
    expected = model.predict(X)
    shown = names or [str(j) for j in range(1, X.shape[1] + 1)]
    features = _by_name(X, shown)
    _close(solr_linear_scores(export_model(model, "solr", feature_names=names), features), expected)
    _close(opensearch_linear_scores(export_model(model, "opensearch", feature_names=names), features), expected)
    _close(vespa_scores(export_model(model, "vespa", feature_names=names), _by_name(X, _vespa_refs(shown))),
           expected)
    _close(ranklib_linear_scores(export_model(model, "ranklib", feature_names=names), X.T), expected)
    pytest.importorskip("onnx")
    _close(_onnx_scores(export_model(model, "onnx", feature_names=names), X), expected)


# ----------------------------------------------------------------------------- MQ2008 Fold1

@pytest.fixture(scope="module")
def mq2008(mq2008_fold1_train):
    from click_sim import load_letor, simulate_clicks
    from conftest import mq2008_dir

    train = mq2008_fold1_train
    test = load_letor(mq2008_dir() / "Fold1" / "test.txt")
    log = simulate_clicks(train, train.X[:, 0], n_passes=2, random_state=0)
    return train, test, log


@pytest.mark.parametrize("scaler", [None, "StandardScaler", "MaxAbsScaler", "MinMaxScaler", "RobustScaler"])
def test_svm_propdcg_on_mq2008(mq2008, scaler):
    import sklearn.preprocessing as pre
    from counterfactual_ltr.estimators import SVMPropDCG

    train, test, log = mq2008
    model = SVMPropDCG(C=10.0, max_iter=30, preprocessor=None if scaler is None else getattr(pre, scaler)())
    model.fit(log)
    assert np.any(model.coef_ != 0)
    check_linear(model, test.X)


def test_ranksvm_and_slam_on_mq2008(mq2008):
    from counterfactual_ltr.estimators import RankSVM, SLAMRanker

    train, test, log = mq2008
    model = RankSVM(C=0.1).fit(train)
    assert np.any(model.coef_ != 0)
    check_linear(model, test.X)
    # SLAM's optimum on MQ2008 is w = 0 (its max-over-lower-grades hinge; see test_slam): the export of
    # a model that ties everything is checked here, and a SLAM with weights on synthetic data below
    with pytest.warns(UserWarning, match="w = 0"):
        model = SLAMRanker(C=1.0).fit(train)
    check_linear(model, test.X)


def test_slam_with_weights_and_a_scaler():
    from click_sim import make_ranking
    from sklearn.preprocessing import StandardScaler
    from counterfactual_ltr.estimators import SLAMRanker

    data = make_ranking(n_queries=30, n_features=5, noise=0.1, random_state=0)
    data.X[:] = data.X * 20.0 + 7.0
    model = SLAMRanker(C=10.0, tol=1e-4, preprocessor=StandardScaler()).fit(data)
    assert np.any(model.coef_ != 0)
    check_linear(model, data.X, ["a", "b", "c", "d", "e"])


# ----------------------------------------------------------------------------- a raw log's feature table

@pytest.fixture(scope="module")
def trec_table():
    """The TREC Session 2014 log's impression features (named columns) and its training clicks on them."""
    from conftest import trec_joined

    return trec_joined(("train", "test"))


def test_linear_on_a_raw_log_feature_table(trec_table):
    from sklearn.preprocessing import StandardScaler
    from counterfactual_ltr.estimators import SVMPropDCG

    data, log, names = trec_table
    model = SVMPropDCG(C=10.0, preprocessor=StandardScaler()).fit(log)
    assert np.any(model.coef_ != 0)
    check_linear(model, data.X, names)


def test_mlp_on_a_raw_log_feature_table(trec_table):
    from sklearn.preprocessing import StandardScaler
    from counterfactual_ltr.estimators import DeepPropDCG

    data, log, names = trec_table
    model = DeepPropDCG(hidden_layer_sizes=(8,), activation="relu", learning_rate=1e-2, max_epochs=2,
                        random_state=0, preprocessor=StandardScaler()).fit(log)
    expected = model.predict(data.X)
    _close(solr_network_scores(export_model(model, "solr", feature_names=names), _by_name(data.X, names)), expected)
    pytest.importorskip("onnx")
    _close(_onnx_scores(export_model(model, "onnx", feature_names=names), data.X), expected)


# ----------------------------------------------------------------------------- synthetic data

@pytest.fixture(scope="module")
def synthetic():
    from click_sim import make_ranking, simulate_clicks

    data = make_ranking(n_queries=40, n_features=5, random_state=0)
    # raw features of very different magnitudes and offsets, as a raw-log feature table has
    data.X[:] = data.X * np.array([1.0, 100.0, 0.01, 5.0, 1000.0]) + np.array([0.0, 50.0, -3.0, 1.0, 2e4])
    return data, simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)


SCALERS = {"standard": lambda pre: pre.StandardScaler(), "robust": lambda pre: pre.RobustScaler(),
           "minmax(-1, 2)": lambda pre: pre.MinMaxScaler(feature_range=(-1, 2))}


@pytest.mark.parametrize("learner, scaler", [("SVMPropRBP", "standard"), ("SVMPropRank", "minmax(-1, 2)"),
                                             ("SVMPropRank", "robust")])
def test_linear_with_names_and_a_scaler(synthetic, learner, scaler):
    import sklearn.preprocessing
    from counterfactual_ltr import estimators

    data, log = synthetic
    preprocessor = SCALERS[scaler](sklearn.preprocessing)
    model = getattr(estimators, learner)(C=1.0, max_iter=30, preprocessor=preprocessor).fit(log)
    assert np.any(model.coef_ != 0)
    check_linear(model, data.X, ["bm25", "pagerank", "age", "clicks_7d", "length"])


def test_online_learner_weights(synthetic):
    from counterfactual_ltr.online import SLAMPerceptron

    data, _ = synthetic
    learner = SLAMPerceptron()
    learner.coef_ = np.array([0.5, -0.01, 2.0, 0.0, 1e-4])
    check_linear(learner, data.X)


@pytest.mark.parametrize("activation", ["sigmoid", "relu", "tanh", "identity"])
def test_deep_propdcg(synthetic, activation):
    from sklearn.preprocessing import StandardScaler
    from counterfactual_ltr.estimators import DeepPropDCG

    data, log = synthetic
    model = DeepPropDCG(hidden_layer_sizes=(8, 4), activation=activation, learning_rate=1e-2, max_epochs=3,
                        random_state=0, preprocessor=StandardScaler()).fit(log)
    expected = model.predict(data.X)
    if activation == "tanh":
        with pytest.raises(ValueError, match="tanh.*formats that can hold it: onnx"):
            export_model(model, "solr")
    else:
        _close(solr_network_scores(export_model(model, "solr"), _by_name(data.X, list("12345"))), expected)
    pytest.importorskip("onnx")
    _close(_onnx_scores(export_model(model, "onnx"), data.X), expected)


def test_onnx_any_batch_size_and_documented_names(synthetic):
    onnx = pytest.importorskip("onnx")
    from counterfactual_ltr.estimators import RankSVM

    data, _ = synthetic
    model = RankSVM(C=1.0).fit(data)
    names = ["a", "b", "c", "d", "e"]
    content = export_model(model, "onnx", feature_names=names)
    for n in (1, 7, data.n_docs):
        _close(_onnx_scores(content, data.X[:n]), model.predict(data.X[:n]))
    proto = onnx.load_from_string(content)
    props = {p.key: p.value for p in proto.metadata_props}
    assert json.loads(props["feature_names"]) == names
    assert "a, b, c, d, e" in proto.doc_string and "a, b, c, d, e" in proto.graph.input[0].doc_string


# ----------------------------------------------------------------------------- refusals and names

@pytest.fixture(scope="module")
def ranksvm(synthetic):
    from counterfactual_ltr.estimators import RankSVM

    return RankSVM(C=1.0).fit(synthetic[0])


def test_a_format_that_cannot_hold_the_model_lists_those_that_can(synthetic):
    from counterfactual_ltr.estimators import DeepPropDCG, GBDTPropDCG

    model = DeepPropDCG(hidden_layer_sizes=(3,), max_epochs=1, random_state=0).fit(synthetic[1])
    for fmt in ("opensearch", "vespa", "lightgbm"):
        with pytest.raises(ValueError, match=rf"'{fmt}' format cannot hold DeepPropDCG .*formats that can: onnx, "
                                             "solr"):
            export_model(model, fmt)
    with pytest.raises(ValueError, match="'lightgbm' format cannot hold DeepPropDCG"):
        export_model(model, "lightgbm")
    with pytest.raises(ValueError, match="fitted GBDTPropDCG"):
        export_model(GBDTPropDCG(), "vespa", feature_names=["a"])


def test_unknown_format_unfitted_model_and_unfoldable_scaler(ranksvm, synthetic):
    from sklearn.preprocessing import MinMaxScaler, QuantileTransformer
    from counterfactual_ltr.estimators import SVMPropDCG

    with pytest.raises(ValueError, match="format='pmml' is not one of solr, opensearch, vespa, onnx"):
        export_model(ranksvm, "pmml")
    with pytest.raises(ValueError, match="SVMPropDCG is not fitted"):
        export_model(SVMPropDCG(), "solr")
    model = SVMPropDCG(C=1.0, max_iter=5, preprocessor=QuantileTransformer(n_quantiles=10)).fit(synthetic[1])
    with pytest.raises(ValueError, match=r"preprocessor \(QuantileTransformer\) cannot be folded.*it can fold StandardScaler"):
        export_model(model, "solr")
    model = SVMPropDCG(C=1.0, max_iter=5, preprocessor=MinMaxScaler(clip=True)).fit(synthetic[1])
    with pytest.raises(ValueError, match=r"MinMaxScaler\(clip=True\)"):
        export_model(model, "vespa")


def test_feature_names_are_checked(ranksvm):
    with pytest.raises(ValueError, match="has 4 names but the model takes 5 raw features .1 missing after 'd'"):
        export_model(ranksvm, "solr", feature_names=list("abcd"))
    with pytest.raises(ValueError, match="the first one too many is 'f'"):
        export_model(ranksvm, "solr", feature_names=list("abcdef"))
    with pytest.raises(ValueError, match="names feature 'a' twice .positions 0 and 3"):
        export_model(ranksvm, "solr", feature_names=list("abcae"))
    with pytest.raises(ValueError, match=r"feature_names\[2\] is ''"):
        export_model(ranksvm, "solr", feature_names=["a", "b", "", "d", "e"])
    with pytest.raises(ValueError, match="'my feature' is neither a Vespa field name"):
        export_model(ranksvm, "vespa", feature_names=["a", "b", "c", "d", "my feature"])
    with pytest.raises(ValueError, match=r"'f2' and '2' are both attribute\(f2\) in Vespa"):
        export_model(ranksvm, "vespa", feature_names=["a", "f2", "c", "2", "e"])


def test_fitted_feature_names_are_the_default(ranksvm):
    import copy

    model = copy.deepcopy(ranksvm)
    model.feature_names_in_ = np.array(["q", "r", "s", "t", "u"], dtype=object)
    assert sorted(json.loads(export_model(model, "solr"))["params"]["weights"]) == list("qrstu")
    text = export_model(model, "vespa", feature_names=["bm25(title)", "b", "c", "d", "e"])
    assert "* bm25(title)" in text and "* attribute(b)" in text


def test_write_export_writes_text_and_bytes(ranksvm, tmp_path):
    assert write_export(ranksvm, "solr", tmp_path / "m.json").read_text().startswith("{")
    pytest.importorskip("onnx")
    assert write_export(ranksvm, "onnx", tmp_path / "m.onnx").read_bytes()[:2] != b"{"
    assert set(FORMATS) == {"solr", "opensearch", "vespa", "onnx", "lightgbm", "ranklib"}


def test_ranklib_linear_text(ranksvm):
    """RankLib's Linear Regression text: its header first, the constant as id 0, ids 1..n in feature order."""
    body = json.loads(export_model(ranksvm, "ranklib", feature_names=["a", "b", "c", "d", "e"]))
    assert body["model"]["name"] == "cltr_ranksvm" and body["model"]["model"]["type"] == "model/ranklib"
    lines = body["model"]["model"]["definition"].splitlines()
    assert lines[0] == "## Linear Regression" and "1=a 2=b 3=c 4=d 5=e" in lines[2]
    assert [pair.split(":")[0] for pair in lines[-1].split()] == ["0", "1", "2", "3", "4", "5"]
    with pytest.raises(ValueError, match=r"'b\\nc' \(position 1\) holds a line break"):
        export_model(ranksvm, "ranklib", feature_names=["a", "b\nc", "d", "e", "f"])
