"""Safe model files (JSON + arrays, no pickle) and the JSON form of propensity models."""

import json
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from click_sim import make_ranking, simulate_clicks
from counterfactual_ltr.estimators import DeepPropDCG, RankSVM, SLAMRanker, SVMPropDCG, SVMPropRank, SVMPropRBP
from counterfactual_ltr.persistence import (load_model, load_propensity, propensity_from_dict, propensity_to_dict,
                                            save_model)
from counterfactual_ltr.propensity import PositionBasedPropensity, TabularPropensity, TrustBiasPropensity

from conftest import REPO


@pytest.fixture(scope="module")
def data_and_log():
    data = make_ranking(n_queries=30, n_docs=(4, 10), n_features=5, random_state=2)
    data.X[:, 1] *= 1e4  # features of very different magnitudes, as in MSLR-WEB30K
    log = simulate_clicks(data, data.X[:, 0], n_passes=4, random_state=0)
    return data, log


def _fitted(kind, data, log):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "ranksvm":
            return RankSVM(C=2.0, preprocessor=StandardScaler()).fit(data)
        if kind == "proprank":
            return SVMPropRank(C=3.0, propensity=TabularPropensity([1.0, 0.7, 0.4])).fit(log)
        if kind == "propdcg":
            return SVMPropDCG(C=1.0, propensity=0.5, preprocessor=MinMaxScaler()).fit(log)
        if kind == "proprbp":
            return SVMPropRBP(C=1.0, p=0.7, propensity=PositionBasedPropensity(1.0, clip=0.2)).fit(log)
        if kind == "slam":
            # (feature 1 spans 1e4: unscaled, C = 10 is beyond what SLAM's bundle method resolves)
            return SLAMRanker(C=10.0, weights="ndcg@k", k=3, preprocessor=StandardScaler()).fit(data)
        if kind == "deep":
            return DeepPropDCG(hidden_layer_sizes=(4,), max_epochs=3, random_state=0,
                               preprocessor=StandardScaler()).fit(log)
    raise AssertionError(kind)


KINDS = ("ranksvm", "proprank", "propdcg", "proprbp", "slam", "deep")


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_predicts_identically(kind, data_and_log, tmp_path):
    data, log = data_and_log
    model = _fitted(kind, data, log)
    path = tmp_path / "model.npz"
    save_model(model, path)
    loaded = load_model(path)
    assert type(loaded) is type(model)
    assert repr(loaded.get_params()) == repr(model.get_params())
    np.testing.assert_array_equal(loaded.predict(data), model.predict(data))
    assert loaded.n_features_in_ == model.n_features_in_ == data.n_features


def test_loads_in_a_fresh_process_without_unpickling(data_and_log, tmp_path):
    """A fresh interpreter where pickle.loads would fail loads the model and predicts identically."""
    data, log = data_and_log
    model = _fitted("propdcg", data, log)
    save_model(model, tmp_path / "m.npz")
    np.save(tmp_path / "X.npy", data.X)
    code = ("import pickle, sys, numpy as np\n"
            "def refuse(*a, **k): raise RuntimeError('unpickling attempted')\n"
            "pickle.loads = pickle.load = refuse\n"
            "from counterfactual_ltr.persistence import load_model\n"
            f"m = load_model(r'{tmp_path / 'm.npz'}')\n"
            f"np.save(r'{tmp_path / 'scores.npy'}', m.predict(np.load(r'{tmp_path / 'X.npy'}')))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "scores.npy"), model.predict(data))


def test_refuses_pickles_object_arrays_and_unknown_classes(data_and_log, tmp_path):
    data, log = data_and_log
    with open(tmp_path / "p.npz", "wb") as fh:
        pickle.dump(RankSVM(), fh)
    with pytest.raises(ValueError, match="not a counterfactual-ltr model file"):
        load_model(tmp_path / "p.npz")
    # An archive whose arrays need pickle is refused by numpy (allow_pickle=False).
    save_model(_fitted("ranksvm", data, log), tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as archive:
        entries = {k: archive[k] for k in archive.files}
    meta = json.loads(str(entries["__meta__"]))
    entries["a0"] = np.array([object()], dtype=object)
    np.savez(tmp_path / "evil.npz", **entries)
    with pytest.raises(ValueError, match="evil.npz"):
        load_model(tmp_path / "evil.npz")
    meta["class"] = "os.system"
    entries["a0"] = np.zeros(1)
    entries["__meta__"] = np.array(json.dumps(meta))
    np.savez(tmp_path / "cls.npz", **entries)
    with pytest.raises(ValueError, match="unknown estimator class"):
        load_model(tmp_path / "cls.npz")


def test_unsaveable_parameters_raise_instead_of_being_dropped(data_and_log, tmp_path):
    from sklearn.decomposition import PCA

    data, log = data_and_log
    model = SVMPropRank(preprocessor=PCA(2)).fit(log)
    with pytest.raises(ValueError, match="preprocessor"):
        save_model(model, tmp_path / "m.npz")
    with pytest.raises(ValueError, match="not fitted"):
        save_model(SVMPropRank(), tmp_path / "m.npz")


@pytest.mark.parametrize("model", [PositionBasedPropensity(0.7), PositionBasedPropensity(1.0, clip=0.05),
                                   TabularPropensity([1.0, 0.5, 0.25]),
                                   TrustBiasPropensity([1.0, 0.6], eps_plus=[1.0, 0.9], eps_minus=[0.2, 0.1])])
def test_propensity_json_round_trip(model, tmp_path):
    spec = json.loads(json.dumps(propensity_to_dict(model)))
    again = propensity_from_dict(spec)
    assert repr(again) == repr(model)
    positions = np.arange(1, 8)
    np.testing.assert_array_equal(again(positions), model(positions))
    # The file of ``cltr propensity`` nests the description under "propensity".
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"method": "swap", "propensity": spec, "eta_": 0.7}))
    assert repr(load_propensity(str(path))) == repr(model)


def test_load_propensity_errors(tmp_path):
    assert repr(load_propensity("2")) == "PositionBasedPropensity(eta=2.0)"
    assert repr(load_propensity(None)) == "PositionBasedPropensity(eta=1.0)"
    with pytest.raises(ValueError, match="neither a number"):
        load_propensity("nowhere.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a JSON file"):
        load_propensity(str(tmp_path / "x.json"))
    (tmp_path / "y.json").write_text(json.dumps({"kind": "tabular"}))
    with pytest.raises(ValueError, match="lacks the field 'values'"):
        load_propensity(str(tmp_path / "y.json"))
