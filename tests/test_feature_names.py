"""Feature names from a feature table's columns: kept by the data set, the fitted ranker, its model file and its export.

A ranker fitted on a raw log joined to a named feature table must export with the table's column
names (a serving stack finds features by name); a LETOR-fitted ranker has none and exports LETOR's
numbers; a model file written before names were kept still loads.
"""

import json

import numpy as np
import pandas as pd
import pytest

from click_sim import make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog, RankingDataset
from counterfactual_ltr.export import export_model
from counterfactual_ltr.persistence import load_model, save_model

NAMES = ["bm25", "pagerank", "age"]


@pytest.fixture(scope="module")
def tables():
    """A generated data set, its click log as raw events, and its features as a table with named columns."""
    data = make_ranking(n_queries=30, n_features=3, random_state=0)
    log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    table = pd.DataFrame(data.X, columns=NAMES)
    table.insert(0, "query", [f"q{q}" for q in data.qid])
    table.insert(1, "doc", [f"d{i}" for i in range(data.n_docs)])
    raw = log.to_frame()
    raw = pd.DataFrame({"page": raw["session"], "query": "q" + raw["qid"].astype(str),
                        "doc": "d" + raw["doc"].astype(str), "position": raw["position"],
                        "click": raw["click"].astype(int)})
    return data, log, table, raw


def _named_log(table, raw):
    return ClickLog.from_events(raw, session="page").with_data(RankingDataset.from_frame(table))


def test_the_data_set_keeps_the_table_columns():
    table = {"query": [1, 1, 2], "doc": [5, 6, 5], "bm25": [0.1, 0.2, 0.3], "age": [3.0, 2.0, 1.0]}
    data = RankingDataset.from_frame(table)
    assert data.feature_names == ["bm25", "age"]
    assert data.subset([1]).feature_names == ["bm25", "age"]
    assert RankingDataset.from_frame(table, features=["age"]).feature_names == ["age"]
    assert RankingDataset(np.eye(2), [0, 1], [1, 1]).feature_names is None
    with pytest.raises(ValueError, match="feature_names has 1 names but X has 2 feature columns"):
        RankingDataset(np.eye(2), [0, 1], [1, 1], feature_names=["a"])
    with pytest.raises(ValueError, match=r"names column 'a' twice \(positions 0 and 1\)"):
        RankingDataset(np.eye(2), [0, 1], [1, 1], feature_names=["a", "a"])
    with pytest.raises(ValueError, match=r"feature_names\[1\] is ''"):
        RankingDataset(np.eye(2), [0, 1], [1, 1], feature_names=["a", ""])


def test_a_fit_on_a_named_table_keeps_the_names_through_its_model_file(tables, tmp_path):
    from sklearn.preprocessing import StandardScaler
    from counterfactual_ltr.estimators import SVMPropDCG

    data, log, table, raw = tables
    model = SVMPropDCG(C=1.0, preprocessor=StandardScaler()).fit(_named_log(table, raw))
    assert model.feature_names_in_.tolist() == NAMES and model.feature_names_in_.dtype == object
    assert sorted(json.loads(export_model(model, "solr"))["params"]["weights"]) == sorted(NAMES)
    save_model(model, tmp_path / "named.npz")
    loaded = load_model(tmp_path / "named.npz")
    assert loaded.feature_names_in_.tolist() == NAMES and loaded.feature_names_in_.dtype == object
    np.testing.assert_array_equal(loaded.predict(data.X), model.predict(data.X))
    # A refit on data without names forgets the old ones, and its file has none (as files written before).
    model.fit(log)
    assert not hasattr(model, "feature_names_in_")
    save_model(model, tmp_path / "unnamed.npz")
    assert not hasattr(load_model(tmp_path / "unnamed.npz"), "feature_names_in_")
    assert sorted(json.loads(export_model(model, "solr"))["params"]["weights"]) == ["1", "2", "3"]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_every_learner_keeps_the_names(tables):
    from counterfactual_ltr.estimators import GBDTPropDCG, SLAMRanker

    _, _, table, raw = tables
    log = _named_log(table, raw)
    assert GBDTPropDCG(n_estimators=2, num_leaves=3).fit(log).feature_names_in_.tolist() == NAMES
    labelled = RankingDataset.from_frame(table.assign(grade=np.arange(len(table)) % 3), label="grade")
    assert SLAMRanker().fit(labelled).feature_names_in_.tolist() == NAMES


def test_a_model_file_with_bad_names_is_refused(tables, tmp_path):
    from counterfactual_ltr.estimators import SVMPropDCG

    _, _, table, raw = tables
    model = SVMPropDCG(C=1.0).fit(_named_log(table, raw))
    model.feature_names_in_ = np.array(["bm25", "bm25", "age"], dtype=object)
    with pytest.raises(ValueError, match=r"feature_names_in_: \[1\] repeats the name 'bm25'"):
        save_model(model, tmp_path / "bad.npz")
    model.feature_names_in_ = np.array(["bm25"], dtype=object)
    with pytest.raises(ValueError, match="feature_names_in_: holds 1 names but the model has 3 features"):
        save_model(model, tmp_path / "bad.npz")


def test_cltr_fit_on_a_feature_table_then_export_writes_its_columns(tables, tmp_path, monkeypatch):
    from counterfactual_ltr.cli import main

    data, log, table, raw = tables
    monkeypatch.chdir(tmp_path)
    table.to_csv("table.csv", index=False)
    raw.to_csv("raw.csv", index=False)
    assert main(["fit", "raw.csv", "--features", "table.csv", "--session", "page", "--C", "1", "--cv", "2",
                 "-o", "model.npz"]) == 0
    assert main(["export", "model.npz", "--format", "solr", "-o", "model.json"]) == 0
    weights = json.loads((tmp_path / "model.json").read_text())["params"]["weights"]
    assert sorted(weights) == sorted(NAMES)


def test_a_letor_fitted_model_exports_letor_numbers(tables, tmp_path, monkeypatch):
    from sklearn.datasets import dump_svmlight_file
    from counterfactual_ltr.cli import main
    from counterfactual_ltr.files import write_click_log

    data, log, _, _ = tables
    monkeypatch.chdir(tmp_path)
    dump_svmlight_file(data.X, data.y, "data.txt", query_id=data.qid, zero_based=False)
    write_click_log(log, "log.parquet")
    assert main(["fit", "log.parquet", "data.txt", "--C", "1", "--cv", "2", "-o", "model.npz"]) == 0
    assert not hasattr(load_model("model.npz"), "feature_names_in_")
    assert main(["export", "model.npz", "--format", "solr", "-o", "model.json"]) == 0
    assert sorted(json.loads((tmp_path / "model.json").read_text())["params"]["weights"]) == ["1", "2", "3"]


# ------------------------------------------------------------------------------ online learners
@pytest.mark.parametrize("learner", ["SLAMPerceptron", "MaxPairPerceptron", "OnlineListNet", "TopKFeedbackRanker"])
def test_online_learners_keep_the_data_sets_names(tables, learner):
    """run_online on a named data set gives the learner feature_names_in_, and its export uses them."""
    from click_sim.online import run_online
    from counterfactual_ltr import online

    data, _, table, _ = tables
    named = RankingDataset.from_frame(table.assign(label=data.y), label="label")
    model = getattr(online, learner)(**({"eta": 0.1} if learner == "OnlineListNet" else {}))
    run_online(model, named, T=50, random_state=0)
    assert list(model.feature_names_in_) == NAMES
    assert json.loads(export_model(model, "solr"))["params"]["weights"].keys() == set(NAMES)
    run_online(model, data, T=5, random_state=0)               # a LETOR-like data set forgets them
    assert not hasattr(model, "feature_names_in_")
    assert sorted(json.loads(export_model(model, "solr"))["params"]["weights"]) == ["1", "2", "3"]
    with pytest.raises(ValueError, match="feature_names has 2 names but n_features is 3"):
        model.reset(3, feature_names=["a", "b"])


# ------------------------------------------------------------------------------ Dask data
def test_dask_fit_keeps_the_frames_feature_columns(tables):
    """A linear SVM fitted on RankingDataset.from_dask (or its click aggregate) names features by the frame's columns."""
    dd = pytest.importorskip("dask.dataframe")
    pytest.importorskip("dask.distributed")
    import warnings

    from dask.distributed import Client, LocalCluster

    from counterfactual_ltr.estimators import RankSVM, SVMPropDCG
    from counterfactual_ltr.logs import aggregate_clicks

    data, log, table, _ = tables
    frame = dd.from_pandas(table.assign(label=data.y), npartitions=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                               silence_logs=50)
    with cluster, Client(cluster) as client:
        ddata = RankingDataset.from_dask(frame, query="query", doc="doc", features=NAMES, label="label",
                                         client=client)
        assert ddata.feature_names == NAMES
        model = RankSVM(C=1.0).fit(ddata)
        assert list(model.feature_names_in_) == NAMES
        assert set(json.loads(export_model(model, "solr"))["params"]["weights"]) == set(NAMES)
        mem, mq, md = ddata.to_dataset()
        lf = log.to_frame()
        lf["qid"], lf["doc"] = "q" + lf["qid"].astype(str), "d" + lf["doc"].astype(str)
        agg = aggregate_clicks(dd.from_pandas(lf, npartitions=1), ddata, engine="dask")
        model = SVMPropDCG(C=1.0).fit(agg)
        assert list(model.feature_names_in_) == NAMES
