"""Propensity models and the ClickLog container: validation, frames, Parquet, aggregation, model selection."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog, PositionBasedPropensity, TabularPropensity
from counterfactual_ltr._segments import offsets_from_lengths

# ----------------------------------------------------------------------------- propensity models


def test_position_based_propensity_values():
    r = np.arange(1, 11)
    np.testing.assert_allclose(PositionBasedPropensity(eta=1.0)(r), 1.0 / r)
    np.testing.assert_allclose(PositionBasedPropensity(eta=2.0)(r), 1.0 / r**2)
    np.testing.assert_allclose(PositionBasedPropensity(eta=0.5)(r), r**-0.5)
    np.testing.assert_array_equal(PositionBasedPropensity(eta=0.0)(r), 1.0)


def test_position_based_propensity_clip_is_a_floor():
    r = np.arange(1, 21)
    clipped = PositionBasedPropensity(eta=1.0, clip=0.2)(r)
    np.testing.assert_allclose(clipped, np.maximum(1.0 / r, 0.2))
    assert clipped.min() == 0.2 and clipped[0] == 1.0
    np.testing.assert_array_equal(PositionBasedPropensity(eta=1.0, clip=1.0)(r), 1.0)


@pytest.mark.parametrize("kwargs", [dict(eta=-1), dict(eta=np.nan), dict(clip=0), dict(clip=-0.1),
                                    dict(clip=1.5), dict(clip=np.nan)])
def test_position_based_propensity_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        PositionBasedPropensity(**kwargs)


@pytest.mark.parametrize("positions", [[0, 1], [1, -2], [1.5, 2.0]])
def test_propensity_bad_positions(positions):
    with pytest.raises(ValueError):
        PositionBasedPropensity(1.0)(np.array(positions))


def test_tabular_propensity():
    model = TabularPropensity([1.0, 0.6, 0.3])
    np.testing.assert_array_equal(model([1, 2, 3, 4, 9]), [1.0, 0.6, 0.3, 0.3, 0.3])


@pytest.mark.parametrize("values", [[1.0, 0.0], [1.2, 0.5], [1.0, -0.3], [1.0, np.nan], []])
def test_tabular_propensity_rejects_values_outside_unit_interval(values):
    with pytest.raises(ValueError):
        TabularPropensity(values)


# ----------------------------------------------------------------------------- a hand-made log

# data: 3 queries (qid 10: rows 0-2, qid 4: rows 3-4, qid 7: rows 5-8) from conftest.tiny_data
SESSIONS = [0, 2, 0, 1]
DOCS = [[2, 0, 1], [8, 5, 7, 6], [0, 1], [4, 3]]
CLICKS = [[0, 1, 1], [1, 0, 0, 1], [1, 0], [0, 0]]


def _hand_log(data, **kwargs):
    lengths = [len(d) for d in DOCS]
    return ClickLog(data, SESSIONS, offsets_from_lengths(lengths), np.concatenate(DOCS),
                    np.concatenate(CLICKS), **kwargs)


def test_hand_log_basics(tiny_data):
    log = _hand_log(tiny_data)
    assert len(log) == 4 and log.shape == (4,) and log.n_items == 11 and log.n_clicks == 5
    assert log.positions.tolist() == [1, 2, 3, 1, 2, 3, 4, 1, 2, 1, 2]
    assert log.item_session.tolist() == [0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3]
    assert log.groups.tolist() == [10, 7, 10, 4]
    assert log.clicks.dtype == bool
    np.testing.assert_allclose(log.propensities(), 1.0 / log.positions)
    np.testing.assert_allclose(log.propensities(2.0), 1.0 / log.positions**2)
    assert log.nbytes > 0


def test_log_propensities_with_bad_model(tiny_data):
    log = _hand_log(tiny_data)
    for bad in (lambda pos: np.zeros(len(pos)), lambda pos: np.full(len(pos), 1.5),
                lambda pos: np.where(pos > 2, np.nan, 1.0), lambda pos: -1.0 / pos):
        with pytest.raises(ValueError):
            log.propensities(bad)
        with pytest.raises(ValueError):
            log.aggregate(bad)
    with pytest.raises(ValueError):
        log.propensities("not a model")


def _raises(data, session_query, lengths, docs, clicks):
    with pytest.raises(ValueError) as info:
        ClickLog(data, session_query, offsets_from_lengths(lengths), docs, clicks)
    return str(info.value)


def test_construction_errors(tiny_data):
    d = tiny_data
    # row missing from the data set
    assert "9" in _raises(d, [0], [3], [0, 1, 9], [0, 0, 0])
    _raises(d, [0], [3], [0, -1, 2], [0, 0, 0])
    # row of another query (row 3 belongs to query 1)
    assert "session 1" in _raises(d, [1, 0], [2, 3], [3, 4, 0, 3, 2], [0] * 5)
    # the same row twice in one session
    _raises(d, [0], [3], [0, 1, 0], [0, 0, 0])
    # mismatched lengths
    _raises(d, [0], [3], [0, 1, 2], [0, 0])
    _raises(d, [0, 1], [3], [0, 1, 2], [0, 0, 0])
    with pytest.raises(ValueError):
        ClickLog(d, [0], [0, 4], [0, 1, 2], [0, 0, 0])
    # empty session
    _raises(d, [0, 1], [3, 0], [0, 1, 2], [0, 0, 0])
    # bad click values, bad query index, non-integer rows, not a data set
    _raises(d, [0], [3], [0, 1, 2], [0, 2, 0])
    _raises(d, [3], [3], [0, 1, 2], [0, 0, 0])
    _raises(d, [0], [3], [0.0, 1.0, 2.0], [0, 0, 0])
    with pytest.raises(ValueError):
        ClickLog(d.X, [0], [0, 3], [0, 1, 2], [0, 0, 0])


def test_same_row_in_different_sessions_is_fine(tiny_data):
    log = ClickLog(tiny_data, [0, 0], [0, 3, 6], [0, 1, 2, 0, 1, 2], [1, 0, 0, 1, 0, 0])
    assert log.n_clicks == 2


def test_selection(tiny_data):
    log = _hand_log(tiny_data, session_ids=[100, 101, 102, 103])
    sub = log[[3, 1]]
    assert sub.data is log.data
    assert sub.session_ids.tolist() == [103, 101]
    assert sub.docs.tolist() == DOCS[3] + DOCS[1]
    assert sub.clicks.astype(int).tolist() == CLICKS[3] + CLICKS[1]
    assert sub.positions.tolist() == [1, 2, 1, 2, 3, 4]
    assert log[np.array([True, False, True, False])].session_ids.tolist() == [100, 102]
    assert log[1:3].session_ids.tolist() == [101, 102]
    assert log[2].session_ids.tolist() == [102]
    assert log[np.array([0, 2]), ...].equals(log[[0, 2]])
    with pytest.raises(IndexError):
        log[0, 1]


# ----------------------------------------------------------------------------- frames and Parquet


@pytest.fixture(scope="module")
def sim():
    data = make_ranking(n_queries=50, n_docs=(2, 20), random_state=1)
    log = simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(eta=1, eps_minus=0.1, eps_plus=1),
                          n_passes=6, random_state=1)
    return data, log


def test_to_frame(tiny_data):
    log = _hand_log(tiny_data)
    frame = log.to_frame()
    assert list(frame.columns) == ["session", "qid", "doc", "position", "click", "logger", "intervention"]
    assert frame["logger"].tolist() == [0] * log.n_items and frame["intervention"].tolist() == [0] * log.n_items
    assert len(frame) == log.n_items
    assert frame["session"].tolist() == [0] * 3 + [1] * 4 + [2] * 2 + [3] * 2
    assert frame["qid"].tolist() == [10] * 3 + [7] * 4 + [10] * 2 + [4] * 2
    assert frame["doc"].tolist() == sum(DOCS, [])
    assert frame["position"].tolist() == [1, 2, 3, 1, 2, 3, 4, 1, 2, 1, 2]
    assert frame["click"].astype(int).tolist() == sum(CLICKS, [])


def test_from_frame_round_trip(sim):
    data, log = sim
    back = ClickLog.from_frame(log.to_frame(), data)
    assert back.equals(log)
    rng = np.random.default_rng(0)
    shuffled = log.to_frame().sample(frac=1.0, random_state=rng.integers(1 << 31)).reset_index(drop=True)
    back = ClickLog.from_frame(shuffled, data)
    assert back.equals(log)
    pd.testing.assert_frame_equal(back.to_frame(), log.to_frame())


def test_from_frame_keeps_session_ids_of_a_sub_log(sim):
    data, log = sim
    sub = log[np.arange(5, log.n_sessions, 7)]
    back = ClickLog.from_frame(sub.to_frame(), data)
    assert back.equals(sub)
    assert back.session_ids.tolist() == list(range(5, log.n_sessions, 7))


def test_from_frame_errors(sim):
    data, log = sim
    frame = log.to_frame()
    # a gap in the positions of a session
    gap = frame.drop(index=frame.index[(frame["session"] == 3) & (frame["position"] == 2)])
    assert len(gap) == len(frame) - 1
    with pytest.raises(ValueError, match="session 3"):
        ClickLog.from_frame(gap, data)
    # a repeated position
    rep = frame.copy()
    rep.loc[(rep["session"] == 4) & (rep["position"] == 2), "position"] = 1
    with pytest.raises(ValueError):
        ClickLog.from_frame(rep, data)
    # qid that disagrees with the data set
    bad_qid = frame.copy()
    bad_qid.loc[10, "qid"] = bad_qid.loc[10, "qid"] + 1000
    with pytest.raises(ValueError, match="qid"):
        ClickLog.from_frame(bad_qid, data)
    # missing columns
    for column in ("session", "qid", "doc", "position", "click"):
        with pytest.raises(ValueError, match=column):
            ClickLog.from_frame(frame.drop(columns=column), data)
    # rows outside the data set, non-integer rows, empty frame
    out = frame.copy()
    out.loc[0, "doc"] = data.n_docs
    with pytest.raises(ValueError):
        ClickLog.from_frame(out, data)
    with pytest.raises(ValueError):
        ClickLog.from_frame(frame.astype({"doc": float}), data)
    with pytest.raises(ValueError):
        ClickLog.from_frame(frame.iloc[:0], data)


def test_parquet_round_trip(sim, tmp_path):
    data, log = sim
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    back = ClickLog.read_parquet(path, data)
    assert back.equals(log)
    pd.testing.assert_frame_equal(back.to_frame(), log.to_frame())
    assert pd.read_parquet(path).shape == (log.n_items, 7)
    sub = log[np.arange(1, log.n_sessions, 3)]
    sub.to_parquet(tmp_path / "sub.parquet")
    assert ClickLog.read_parquet(tmp_path / "sub.parquet", data).equals(sub)


def test_equals_is_not_trivial(sim):
    data, log = sim
    flipped = ClickLog(data, log.session_query, log.session_offsets, log.docs, ~log.clicks, log.session_ids)
    assert not log.equals(flipped)
    copy = make_ranking(n_queries=50, n_docs=(2, 20), random_state=1)
    other_data = ClickLog(copy, log.session_query, log.session_offsets, log.docs, log.clicks, log.session_ids)
    assert not log.equals(other_data)  # same numbers, another data-set object


# ----------------------------------------------------------------------------- aggregation


@pytest.mark.parametrize("propensity", [None, 0.5, PositionBasedPropensity(2.0, clip=0.05),
                                        TabularPropensity([1.0, 0.7, 0.4, 0.2])])
def test_aggregate_matches_groupby(sim, propensity):
    data, log = sim
    frame = log.to_frame()
    if propensity is None:
        q = 1.0 / frame["position"].to_numpy(float)
    elif isinstance(propensity, float):
        q = frame["position"].to_numpy(float) ** -propensity
    else:
        q = propensity(frame["position"].to_numpy())
    frame["w"] = np.where(frame["click"], 1.0 / q, 0.0)
    by_doc = frame.groupby("doc").agg(w=("w", "sum"), c=("click", "sum"))
    expected_w = np.zeros(data.n_docs)
    expected_c = np.zeros(data.n_docs, dtype=np.int64)
    expected_w[by_doc.index] = by_doc["w"]
    expected_c[by_doc.index] = by_doc["c"]
    agg = log.aggregate(propensity)
    assert agg.data is data
    np.testing.assert_allclose(agg.weights, expected_w, rtol=1e-12)
    np.testing.assert_array_equal(agg.click_counts, expected_c)
    clicked_queries = np.unique(data.query_index[frame.loc[frame["click"], "doc"]])
    np.testing.assert_array_equal(agg.queries, clicked_queries)
    assert agg.n_sessions == log.n_sessions and agg.n_clicks == log.n_clicks == frame["click"].sum()


def test_aggregate_hand_log(tiny_data):
    log = _hand_log(tiny_data)
    agg = log.aggregate()
    # clicks: row 0 at pos 2 and pos 1 -> 2 + 1; row 1 at pos 3 -> 3; row 8 at pos 1 -> 1; row 6 at pos 4 -> 4
    expected = np.zeros(9)
    expected[[0, 1, 8, 6]] = [3.0, 3.0, 1.0, 4.0]
    np.testing.assert_allclose(agg.weights, expected)
    assert agg.click_counts.tolist() == [2, 1, 0, 0, 0, 0, 1, 0, 1]
    assert agg.queries.tolist() == [0, 2]


def test_aggregate_of_doubled_log_is_twice(sim):
    data, log = sim
    lengths = np.diff(log.session_offsets)
    doubled = ClickLog(data, np.r_[log.session_query, log.session_query], offsets_from_lengths(np.r_[lengths, lengths]),
                       np.r_[log.docs, log.docs], np.r_[log.clicks, log.clicks])
    a, b = log.aggregate(), doubled.aggregate()
    np.testing.assert_array_equal(b.weights, 2 * a.weights)
    np.testing.assert_array_equal(b.click_counts, 2 * a.click_counts)
    np.testing.assert_array_equal(b.queries, a.queries)
    assert b.n_sessions == 2 * a.n_sessions and b.n_clicks == 2 * a.n_clicks
    # the same through frames: concatenate with renumbered sessions
    f = log.to_frame()
    g = f.assign(session=f["session"] + log.n_sessions)
    via_frame = ClickLog.from_frame(pd.concat([g, f], ignore_index=True), data)
    np.testing.assert_array_equal(via_frame.aggregate().weights, 2 * a.weights)


def test_aggregate_of_log_without_clicks(tiny_data):
    log = ClickLog(tiny_data, [1], [0, 2], [3, 4], [0, 0])
    agg = log.aggregate()
    assert agg.n_clicks == 0 and agg.queries.size == 0
    np.testing.assert_array_equal(agg.weights, 0.0)


# ----------------------------------------------------------------------------- scikit-learn model selection


def test_group_kfold_on_a_log(sim):
    from sklearn.model_selection import GroupKFold

    data, log = sim
    seen = []
    for train, test in GroupKFold(n_splits=3).split(log, groups=log.groups):
        tr, te = log[train], log[test]
        assert tr.data is log.data and te.data is log.data  # no feature copy
        assert set(tr.groups).isdisjoint(te.groups)
        assert len(tr) + len(te) == len(log)
        np.testing.assert_array_equal(te.session_ids, log.session_ids[test])
        seen.append(set(te.groups))
    assert set().union(*seen) == set(data.query_ids)


def _dummy():
    from sklearn.base import BaseEstimator

    class FirstFeature(BaseEstimator):
        def fit(self, X, y=None):
            assert isinstance(X, ClickLog)
            return self

        def predict(self, X):
            return X[:, 0]

    return FirstFeature()


def _cross_validate(log, metric):
    from sklearn.model_selection import GroupKFold, cross_validate

    from counterfactual_ltr.evaluation import snips_estimate, snips_scorer

    cv = GroupKFold(n_splits=3)
    result = cross_validate(_dummy(), log, groups=log.groups, cv=cv, scoring=snips_scorer(metric),
                            error_score="raise")
    assert len(result["test_score"]) == 3
    # each fold's score is the SNIPS estimate of the first feature on the held-out sessions
    for score, (_, test) in zip(result["test_score"], cv.split(log, groups=log.groups)):
        expected = snips_estimate(log[test], log.data.X[:, 0], metric=metric).value
        assert np.isclose(score, expected)
    return result


def test_cross_validate_with_snips_scorer_callable_metric(sim):
    data, log = sim
    _cross_validate(log, lambda r: 1.0 / np.log2(1.0 + r))


def test_cross_validate_with_snips_scorer_dcg(sim):
    pytest.importorskip("counterfactual_ltr.metrics", reason="counterfactual_ltr.metrics is not written yet")
    data, log = sim
    _cross_validate(log, "dcg")
