"""Click aggregates: in-memory, streamed (pyarrow) and Dask paths agree exactly; learners fit on them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from click_sim import make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog, PositionBasedPropensity, TabularPropensity, aggregate_clicks
from counterfactual_ltr.aggregate import ClickAggregate, _merge_keys, count_table
from counterfactual_ltr.estimators import RankSVM, SLAMRanker, SVMPropDCG, SVMPropRank, SVMPropRBP
from counterfactual_ltr.evaluation import ips_estimate, snips_estimate


@pytest.fixture(scope="module")
def data():
    return make_ranking(n_queries=40, n_docs=(3, 15), random_state=5)


@pytest.fixture(scope="module")
def log(data):
    return simulate_clicks(data, data.X[:, 0] + 0.3 * data.X[:, 1], n_passes=30, random_state=11)


def _write_shuffled_parts(log, directory, n_parts, seed=0):
    """The log's frame in random row order, split into ``n_parts`` Parquet files (one nested folder too)."""
    frame = log.to_frame().sample(frac=1.0, random_state=seed).reset_index(drop=True)
    (directory / "nested").mkdir()
    for k, part in enumerate(np.array_split(np.arange(len(frame)), n_parts)):
        where = directory / ("nested" if k % 2 else "") / f"part-{k}.parquet"
        frame.iloc[part].to_parquet(where, index=False)
    return directory


def test_count_table_matches_a_direct_count(log):
    docs, pos, clicks, imps = count_table(log.docs, log.positions, log.clicks)
    frame = log.to_frame()
    expected = frame.groupby(["doc", "position"])["click"].agg(["sum", "size"]).reset_index()
    np.testing.assert_array_equal(docs, expected["doc"])
    np.testing.assert_array_equal(pos, expected["position"])
    np.testing.assert_array_equal(clicks, expected["sum"])
    np.testing.assert_array_equal(imps, expected["size"])
    # the sort path (sparse keys) gives the same table as the dense path
    far = count_table(log.docs.astype(np.int64) * 10**6, log.positions, log.clicks)
    np.testing.assert_array_equal(far[0] // 10**6, docs)
    np.testing.assert_array_equal(far[1], pos)
    np.testing.assert_array_equal(far[2], clicks)
    np.testing.assert_array_equal(far[3], imps)
    # sparse keys with counts other than one impression per item (merged tables): np.unique
    keys = (log.docs.astype(np.int64) * 10**6 << 32) | log.positions
    merged = _merge_keys(keys, 2 * log.clicks.astype(np.int64), np.full(keys.size, 3))
    np.testing.assert_array_equal(merged[2], 2 * clicks)
    np.testing.assert_array_equal(merged[3], 3 * imps)


def test_aggregate_weights_are_the_ips_sums(log):
    q = PositionBasedPropensity(1.5)
    agg = log.aggregate(q)
    clicked = np.flatnonzero(log.clicks)
    expected = np.bincount(log.docs[clicked], weights=1.0 / q(log.positions[clicked]), minlength=log.data.n_docs)
    np.testing.assert_allclose(agg.weights, expected, rtol=1e-12)
    assert agg.n_clicks == log.n_clicks and agg.n_sessions == log.n_sessions
    assert agg.n_impressions == log.n_items


def test_reweight_equals_aggregating_again(log):
    base = log.aggregate()
    for model in (PositionBasedPropensity(0.5), TabularPropensity([1.0, 0.7, 0.4, 0.2]), 2.0):
        assert base.reweight(model).equals(log.aggregate(model))
    legacy = ClickAggregate(log.data, base.weights, base.click_counts, base.queries, base.n_sessions, base.n_clicks)
    with pytest.raises(ValueError, match="count table"):
        legacy.reweight(1.0)


def test_streamed_aggregate_equals_in_memory_exactly(log, tmp_path):
    _write_shuffled_parts(log, tmp_path, n_parts=5)
    for batch_size in (97, 1 << 20):
        agg = aggregate_clicks(tmp_path, log.data, PositionBasedPropensity(1.2), batch_size=batch_size)
        assert agg.equals(log.aggregate(PositionBasedPropensity(1.2)))
    single = tmp_path / "single.parquet"
    log.to_parquet(single)
    assert aggregate_clicks(single, log.data).equals(log.aggregate())
    # Half of the shuffled files holds parts of sessions: checked as ClickLog.from_frame checks a frame, refused.
    with pytest.raises(ValueError, match="positions must run 1..n"):
        aggregate_clicks(str(tmp_path / "nested" / "*.parquet"), log.data)


@pytest.mark.parametrize("cls", [SVMPropRank, SVMPropDCG, SVMPropRBP, SLAMRanker])
def test_learners_fit_on_aggregates_identically(cls, log):
    params = {"C": 3.0, "propensity": PositionBasedPropensity(0.8)}
    from_log = cls(**params).fit(log)
    from_agg = cls(**params).fit(log.aggregate())          # re-weighted under the estimator's propensity
    np.testing.assert_array_equal(from_log.coef_, from_agg.coef_)


def test_naive_ranksvm_fits_on_aggregates_identically(log):
    np.testing.assert_array_equal(RankSVM(C=2.0).fit(log).coef_, RankSVM(C=2.0).fit(log.aggregate(0.7)).coef_)


def test_point_estimates_from_aggregates_match_the_log(log):
    scores = log.data.X[:, 2] - log.data.X[:, 0]
    agg = log.aggregate(1.3)
    for metric in ("dcg", "avg_rank"):
        assert agg.ips_value(scores, metric=metric) == pytest.approx(
            ips_estimate(log, scores, metric=metric, propensity=1.3).value, rel=1e-12)
        assert agg.snips_value(scores, metric=metric) == pytest.approx(
            snips_estimate(log, scores, metric=metric, propensity=1.3).value, rel=1e-12)


def test_bad_sources_name_the_file(log, tmp_path):
    frame = log.to_frame()
    missing = tmp_path / "missing.parquet"
    frame.drop(columns=["position"]).to_parquet(missing, index=False)
    with pytest.raises(ValueError, match=r"missing\.parquet.*position"):
        aggregate_clicks(missing, log.data)
    text = tmp_path / "text.parquet"
    text.write_text("session,qid\n1,2\n")
    with pytest.raises(ValueError, match=r"text\.parquet: not a readable Parquet file"):
        aggregate_clicks(text, log.data)
    bad_doc = tmp_path / "bad_doc.parquet"
    frame.assign(doc=frame["doc"] + log.data.n_docs).to_parquet(bad_doc, index=False)
    with pytest.raises(ValueError, match=r"bad_doc\.parquet.*missing from the data set"):
        aggregate_clicks(bad_doc, log.data)
    bad_qid = tmp_path / "bad_qid.parquet"
    frame.assign(qid=frame["qid"] + 1).to_parquet(bad_qid, index=False)
    with pytest.raises(ValueError, match=r"bad_qid\.parquet.*qid"):
        aggregate_clicks(bad_qid, log.data)
    # The column checks are those of ClickLog.from_frame, prefixed with the file.
    gap = tmp_path / "gap.parquet"
    frame.assign(click=pd.array([None] + [True] * (len(frame) - 1), dtype="boolean")).to_parquet(gap, index=False)
    with pytest.raises(ValueError, match=r"gap\.parquet.*'click' has a missing value"):
        aggregate_clicks(gap, log.data)
    wrap = tmp_path / "wrap.parquet"
    frame.assign(doc=frame["doc"].astype(np.uint64) + np.uint64(2**63)).to_parquet(wrap, index=False)
    with pytest.raises(ValueError, match=r"wrap\.parquet.*64-bit signed range"):
        aggregate_clicks(wrap, log.data)
    with pytest.raises(ValueError, match="no Parquet or CSV files"):
        aggregate_clicks(tmp_path / "nothing" / "*.parquet", log.data)
    with pytest.raises(ValueError, match="engine"):
        aggregate_clicks(missing, log.data, engine="spark")
    with pytest.raises(ValueError, match="ClickLog or a ClickAggregate"):
        SVMPropRank().fit(frame)


def test_partitioned_simulation_is_bit_identical_to_serial(data, tmp_path):
    from click_sim import simulate_clicks_partitioned

    serial = simulate_clicks(data, data.X[:, 1], n_passes=7, random_state=3, max_shown=6)
    files = simulate_clicks_partitioned(data, data.X[:, 1], n_passes=7, random_state=3, max_shown=6,
                                        path=tmp_path / "sim", passes_per_partition=3, engine="processes",
                                        n_workers=2)
    assert len(files) == 3
    assert ClickLog.read_parquet(tmp_path / "sim", data).equals(serial)
    with pytest.raises(ValueError, match="already holds Parquet files"):
        simulate_clicks_partitioned(data, data.X[:, 1], n_passes=2, random_state=3, path=tmp_path / "sim")
    with pytest.raises(TypeError, match="random_state"):
        simulate_clicks_partitioned(data, data.X[:, 1], random_state=np.random.default_rng(0), path=tmp_path / "x")
    from click_sim import StochasticRanker

    for ranker in ([data.X[:, 0], data.X[:, 1]], StochasticRanker(data.X[:, 0], 1.0)):
        with pytest.raises(ValueError, match="one deterministic ranker"):
            simulate_clicks_partitioned(data, ranker, random_state=0, path=tmp_path / "y")


# ------------------------------------------------------------------ on a Dask cluster
@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed", reason="Dask is an optional extra: pip install '.[dask]'")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=40)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.mark.slow      # starts the module's LocalCluster: 5-8 s
def test_dask_aggregation_equals_in_memory(dask_client, log, tmp_path):
    import dask.dataframe as dd

    _write_shuffled_parts(log, tmp_path, n_parts=4, seed=1)
    agg = aggregate_clicks(tmp_path, log.data, 0.9, engine="dask")
    assert agg.equals(log.aggregate(0.9))
    frame = dd.from_pandas(log.to_frame(), npartitions=3)
    assert aggregate_clicks(frame, log.data, engine="dask").equals(log.aggregate())
    broken = tmp_path / "broken.parquet"
    log.to_frame().assign(doc=-1).to_parquet(broken, index=False)
    with pytest.raises(ValueError, match=r"broken\.parquet"):
        aggregate_clicks(broken, log.data, engine="dask")


@pytest.mark.slow      # a grid search on the LocalCluster: about 7 s
def test_dask_partitioned_simulation_and_grid_search(dask_client, data, tmp_path, monkeypatch):
    import joblib
    from sklearn.model_selection import GridSearchCV, GroupKFold

    from click_sim import simulate_clicks_partitioned
    from counterfactual_ltr.datasets import RankingDataset
    from counterfactual_ltr.evaluation import snips_scorer

    simulate_clicks_partitioned(data, data.X[:, 0], n_passes=6, random_state=8, path=tmp_path / "sim",
                                passes_per_partition=2, engine="dask")
    log = ClickLog.read_parquet(tmp_path / "sim", data)
    assert log.equals(simulate_clicks(data, data.X[:, 0], n_passes=6, random_state=8))

    grid = {"C": [0.1, 1.0, 10.0]}
    def search():
        return GridSearchCV(SVMPropRank(), grid, cv=GroupKFold(3), scoring=snips_scorer("dcg"), n_jobs=2)

    local = search().fit(log, groups=log.groups)
    # Count how often the data set is serialised to be sent (dask's tokenize also pickles, to hash; not sent).
    import traceback

    sent = []
    original = RankingDataset.__reduce_ex__

    def counting_reduce(self, protocol):
        if not any("tokenize" in frame.filename for frame in traceback.extract_stack()):
            sent.append(1)
        return original(self, protocol)

    monkeypatch.setattr(RankingDataset, "__reduce_ex__", counting_reduce, raising=False)
    with joblib.parallel_config(backend="dask", scatter=[log]):
        remote = search().fit(log, groups=log.groups)
    assert remote.best_params_ == local.best_params_
    np.testing.assert_allclose(remote.cv_results_["mean_test_score"], local.cv_results_["mean_test_score"],
                               rtol=1e-12)
    assert len(sent) == 1, f"the data set was sent {len(sent)} times for 9 tasks (scattered: once)"
    sent.clear()
    with joblib.parallel_config(backend="dask"):      # without scatter: shipped with every task
        search().fit(log, groups=log.groups)
    assert len(sent) >= 9


def test_preprocessor_and_score_on_aggregates(log):
    from sklearn.preprocessing import StandardScaler

    params = {"C": 1.0, "preprocessor": StandardScaler()}
    from_log = SVMPropDCG(**params).fit(log)
    from_agg = SVMPropDCG(**params).fit(log.aggregate())
    np.testing.assert_array_equal(from_log.coef_, from_agg.coef_)
    np.testing.assert_array_equal(from_log.predict(log.data.X), from_agg.predict(log.data.X))
    assert from_agg.score(log.aggregate()) == pytest.approx(from_log.score(log), rel=1e-12)


def test_constrained_learners_fit_on_aggregates_identically(log):
    params = {"C": 300.0, "monotone_constraints": [1] + [0] * (log.data.n_features - 1), "penalty": "elasticnet",
              "l1_ratio": 0.2}
    from_log = SVMPropDCG(**params).fit(log)
    from_agg = SVMPropDCG(**params).fit(log.aggregate())
    np.testing.assert_array_equal(from_log.coef_, from_agg.coef_)
    assert np.any(from_agg.coef_ != 0) and from_agg.coef_[0] >= 0
