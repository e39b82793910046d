"""``onnx_dtype="float64"``: ONNX models of every kind take and give doubles and equal ``model.predict``
within 1e-9 relative on MQ2008 Fold1 and the raw-log table (float32, the default, is ~1e-5 there)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.feature_selection import VarianceThreshold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from counterfactual_ltr.export import export_model, write_export

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


def _run(content, X, dtype):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(content, options, providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].type == f"tensor({'double' if dtype == np.float64 else 'float'})"
    out = session.run(["score"], {"features": np.asarray(X, dtype=dtype)})[0]
    assert out.dtype == dtype
    return out.reshape(-1)


def _relative(got, expected):
    return float(np.max(np.abs(got - expected)) / np.abs(expected).max())


def _fit(kind, log):
    from counterfactual_ltr.estimators import DeepPropDCG, GBDTPropDCG, SVMPropDCG

    pre = make_pipeline(StandardScaler(), VarianceThreshold())
    if kind == "linear":
        return SVMPropDCG(C=10.0, max_iter=30, preprocessor=pre).fit(log)
    if kind == "mlp":
        return DeepPropDCG(hidden_layer_sizes=(8, 4), activation="sigmoid", learning_rate=1e-2, max_epochs=2,
                           random_state=0, preprocessor=pre).fit(log)
    pytest.importorskip("lightgbm")
    return GBDTPropDCG(n_estimators=30, num_leaves=15, random_state=0, preprocessor=pre).fit(log)


@pytest.fixture(scope="module")
def mq2008(mq2008_fold1_train):
    from click_sim import load_letor, simulate_clicks
    from conftest import mq2008_dir

    test = load_letor(mq2008_dir() / "Fold1" / "test.txt")
    X = test.X.toarray() if hasattr(test.X, "toarray") else np.asarray(test.X)
    return X, simulate_clicks(mq2008_fold1_train, mq2008_fold1_train.X[:, 0], n_passes=2, random_state=0)


@pytest.mark.parametrize("kind", ["linear", "mlp", "trees"])
def test_float64_onnx_equals_predict_on_mq2008(mq2008, kind):
    X, log = mq2008
    model = _fit(kind, log)
    expected = model.predict(X)
    assert _relative(_run(export_model(model, "onnx", onnx_dtype="float64"), X, np.float64), expected) <= 1e-9
    assert _relative(_run(export_model(model, "onnx"), X, np.float32), expected) <= 1e-5


@pytest.mark.parametrize("kind", ["linear", "mlp", "trees"])
def test_float64_onnx_equals_predict_on_the_raw_log_table(kind):
    from conftest import trec_joined

    data, log, names = trec_joined(("train", "test"))
    X = data.X.toarray() if hasattr(data.X, "toarray") else np.asarray(data.X)
    model = _fit(kind, log)
    content = export_model(model, "onnx", feature_names=list(names), onnx_dtype="float64")
    assert _relative(_run(content, X, np.float64), model.predict(X)) <= 1e-9


def test_float64_trees_route_nan_as_lightgbm(mq2008):
    X, log = mq2008
    model = _fit("trees", log)
    Xn = X[:200].copy()
    Xn[::3, :] = np.nan
    expected = model.booster_.predict(model.preprocessor_.transform(Xn))
    assert _relative(_run(export_model(model, "onnx", onnx_dtype="float64"), Xn, np.float64), expected) <= 1e-9


def test_onnx_dtype_is_checked(mq2008):
    from counterfactual_ltr.estimators import RankSVM

    model = RankSVM()
    model.coef_ = np.ones(3)
    with pytest.raises(ValueError, match="onnx_dtype='float16' is not one of float32, float64"):
        export_model(model, "onnx", onnx_dtype="float16")
    with pytest.raises(ValueError, match="onnx_dtype='float64' applies to the onnx format only, not 'solr'"):
        export_model(model, "solr", onnx_dtype="float64")


def test_cli_onnx_dtype(tmp_path, mq2008):
    from click_sim import make_ranking
    from counterfactual_ltr.estimators import RankSVM
    from counterfactual_ltr.persistence import save_model
    from test_cli import cltr

    data = make_ranking(n_queries=20, n_features=4, random_state=0)
    model = RankSVM(C=1.0, preprocessor=StandardScaler()).fit(data)
    save_model(model, tmp_path / "model.npz")
    run = cltr("export", "model.npz", "--format", "onnx", "--onnx-dtype", "float64", "-o", "m.onnx", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    got = _run((tmp_path / "m.onnx").read_bytes(), data.X, np.float64)
    assert _relative(got, model.predict(data.X)) <= 1e-9
    assert write_export(model, "onnx", tmp_path / "w.onnx", onnx_dtype="float64").read_bytes() == \
        (tmp_path / "m.onnx").read_bytes()
