"""Raw click logs (issue 27): events with the ids a real log has, features joined by id."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog, RankingDataset, SVMPropRank
from counterfactual_ltr.raw_events import MissingFeaturesWarning

REPO = Path(__file__).resolve().parents[1]


def trec_dir() -> Path:
    """The shared TREC Session 2014 log: ``$CLTR_DATA/real-logs/...`` else ``<repo>/../shared/data/real-logs/...``."""
    root = Path(os.environ["CLTR_DATA"]) if os.environ.get("CLTR_DATA") else REPO.parent / "shared" / "data"
    return root / "real-logs" / "trec-session-2014"


requires_trec = pytest.mark.skipif(not (trec_dir() / "train.csv").is_file(),
                                   reason=f"the shared TREC Session 2014 log is not at {trec_dir()}")


def _events():
    """Two queries with string ids, document ids beyond 2**63, a gap at position 3 of page 'p2'."""
    big = 2**63 + np.array([5, 7, 9], dtype=np.uint64)
    return pd.DataFrame({
        "page": ["p1", "p1", "p1", "p2", "p2", "p3"],
        "query": ["98435_1", "98435_1", "98435_1", "98435_1", "98435_1", "x"],
        "doc": np.array([big[0], big[1], big[2], big[1], big[0], big[0]], dtype=np.uint64),
        "position": [1, 2, 3, 1, 4, 1],
        "click": [0, 1, 0, 1, 0, 0],
        "extra": ["ignored"] * 6,
    })


def test_ids_kept_exactly_and_positions_as_recorded():
    events = _events()
    log = ClickLog.from_events(events, session="page")
    assert log.data is None and len(log) == 3 and log.n_queries == 2 and log.n_rows == 4
    assert log.doc_ids.dtype == np.uint64 and log.query_ids.tolist() == ["98435_1", "x"]
    assert log.positions.tolist() == [1, 2, 3, 1, 4, 1]
    frame = log.to_frame()
    assert frame["doc"].dtype == np.uint64 and frame["doc"].tolist() == events["doc"].tolist()
    assert frame["session"].tolist() == events["page"].tolist()
    back = ClickLog.from_events(frame, session="session")
    pd.testing.assert_frame_equal(back.to_frame(), frame)


def test_shuffled_rows_give_the_same_log():
    events = _events()
    shuffled = events.sample(frac=1.0, random_state=3)
    a = ClickLog.from_events(events, session="page").to_frame()
    b = ClickLog.from_events(shuffled, session="page").to_frame()
    pd.testing.assert_frame_equal(a, b)
    assert ClickLog.from_events(shuffled, session="page").equals(ClickLog.from_events(events, session="page"))
    changed = events.assign(click=[0, 1, 0, 1, 0, 1])
    assert not ClickLog.from_events(changed, session="page").equals(ClickLog.from_events(events, session="page"))


def test_pages_without_session_column_are_cut_where_query_changes_or_position_does_not_increase():
    frame = pd.DataFrame({"query": [1, 1, 1, 1, 2, 2], "doc": [10, 11, 12, 10, 10, 13],
                          "position": [1, 2, 5, 1, 1, 2], "click": [0, 0, 1, 0, 1, 0]})
    log = ClickLog.from_events(frame)
    assert np.diff(log.session_offsets).tolist() == [3, 1, 2]
    assert log.query_ids[log.session_query].tolist() == [1, 1, 2]
    assert log.positions.tolist() == [1, 2, 5, 1, 1, 2]


def test_same_int_and_string_ids_are_different_documents():
    frame = pd.DataFrame({"query": ["q", "q"], "doc": ["1", "2"], "position": [1, 2], "click": [0, 1]})
    log = ClickLog.from_events(frame)
    assert log.doc_ids.tolist() == ["1", "2"]


def test_integer_ids_held_as_python_objects_are_read_as_integers():
    frame = pd.DataFrame({"query": np.array([7, 7], dtype=object), "doc": np.array([2**64 - 1, np.int32(3)], dtype=object),
                          "position": [1, 2], "click": [0, 1]})
    log = ClickLog.from_events(frame)
    assert log.query_ids.dtype == np.int64 and log.doc_ids.dtype == np.uint64
    assert log.doc_ids.tolist() == [2**64 - 1, 3]
    with pytest.raises(ValueError, match="column 'doc' holds negative ids and ids beyond 2\\*\\*63 - 1"):
        ClickLog.from_events(frame.assign(doc=np.array([-1, 2**64 - 1], dtype=object)))


@pytest.mark.parametrize("change, column, row", [
    (lambda f: f.assign(position=[1, 2, 2, 1, 4, 1]), "position", "frame row 2"),   # duplicate (page, position)
    (lambda f: f.assign(query=["a", "a", "b", "a", "a", "x"]), "query", "frame row 2"),  # a page with two queries
    (lambda f: f.assign(position=[1, 2, 3, 0, 4, 1]), "position", "frame row 3"),
    (lambda f: f.assign(position=[1, 2, 3, -1, 4, 1]), "position", "frame row 3"),
    (lambda f: f.assign(query=["a", None, "a", "a", "a", "x"]), "query", "frame row 1"),
    (lambda f: f.assign(doc=[1.0, 2.0, np.nan, 1.0, 2.0, 3.0]), "doc", "frame row 2"),
    (lambda f: f.assign(doc=[1.5, 2.0, 3.0, 1.0, 2.0, 3.0]), "doc", "float"),
    (lambda f: f.assign(click=[0, 1, np.nan, 0, 0, 0]), "click", "frame row 2"),
    (lambda f: f.assign(click=[0, 2, 0, 0, 0, 0]), "click", "frame row 1"),
    (lambda f: f.assign(doc=["a", 3, "b", "a", "b", "c"]), "doc", "frame row 1"),
    (lambda f: f.assign(page=["p1", None, "p1", "p2", "p2", "p3"]), "page", "frame row 1"),
])
def test_bad_events_name_the_column_and_a_row(change, column, row):
    with pytest.raises(ValueError) as err:
        ClickLog.from_events(change(_events()), session="page")
    assert repr(column) in str(err.value) and row in str(err.value)


def test_missing_column_is_named():
    with pytest.raises(ValueError, match="no column 'clicked'"):
        ClickLog.from_events(_events(), click="clicked")


# ----------------------------------------------------------------------------- joining features


@pytest.fixture(scope="module")
def letor_path():
    """A simulated log over a data set, and the same log and features as a user's raw tables."""
    data = make_ranking(n_queries=40, random_state=1)
    log = simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(eta=1.0), n_passes=6, random_state=2)
    frame = log.to_frame()
    events = pd.DataFrame({"sid": frame["session"], "q": frame["qid"].map(lambda q: f"query-{q}"),
                           "d": frame["doc"].astype(np.uint64) + np.uint64(2**63), "pos": frame["position"],
                           "clicked": frame["click"].astype(int)}).sample(frac=1.0, random_state=0)
    table = pd.DataFrame(data.X, columns=[f"f{j}" for j in range(data.n_features)])
    table.insert(0, "q", [f"query-{q}" for q in data.qid])
    table.insert(1, "d", np.arange(data.n_docs, dtype=np.uint64) + np.uint64(2**63))
    table["grade"] = data.y
    return data, log, events, table


def _raw(events):
    return ClickLog.from_events(events, query="q", doc="d", position="pos", click="clicked", session="sid")


def test_joined_raw_log_gives_the_same_model_bit_for_bit(letor_path):
    data, log, events, table = letor_path
    features = RankingDataset.from_frame(table, query="q", doc="d", label="grade")
    joined = _raw(events).with_data(features)
    np.testing.assert_array_equal(features.X, data.X)
    assert joined.session_ids.tolist() == log.session_ids.tolist()
    np.testing.assert_array_equal(joined.docs, log.docs)
    np.testing.assert_array_equal(joined.clicks, log.clicks)
    a = SVMPropRank(C=1.0).fit(log)
    b = SVMPropRank(C=1.0).fit(joined)
    assert np.array_equal(a.coef_, b.coef_) and a.coef_.any()


def test_join_without_labels_serves_learning(letor_path):
    data, log, events, table = letor_path
    features = RankingDataset.from_frame(table.drop(columns="grade"), query="q", doc="d")
    assert not features.has_labels
    model = SVMPropRank(C=1.0).fit(_raw(events).with_data(features))
    assert np.array_equal(model.coef_, SVMPropRank(C=1.0).fit(log).coef_)
    with pytest.raises(ValueError, match="no relevance labels"):
        features.relevance()


def test_missing_features_are_named_or_dropped_with_counts(letor_path):
    data, log, events, table = letor_path
    raw = _raw(events)
    shown = np.unique(log.docs)
    missing_rows = shown[:2]
    partial = RankingDataset.from_frame(table.drop(index=missing_rows), query="q", doc="d")
    n_missing_items = int(np.isin(log.docs, missing_rows).sum())
    with pytest.raises(ValueError, match=r"2 shown \(query, document\) pairs .* e\.g\. \(query 'query-"):
        raw.with_data(partial)
    with pytest.warns(MissingFeaturesWarning, match=f"dropped {n_missing_items} of {log.n_items} shown results"):
        rows = raw.with_data(partial, missing="drop_rows")
    assert rows.n_items == log.n_items - n_missing_items
    hit = np.bincount(log.item_session, weights=np.isin(log.docs, missing_rows), minlength=len(log)) > 0
    with pytest.warns(MissingFeaturesWarning, match=f"and {int(hit.sum())} of {len(log)} sessions"):
        sessions = raw.with_data(partial, missing="drop_sessions")
    assert len(sessions) == len(log) - hit.sum()
    assert np.isin(sessions.session_ids, log.session_ids[~hit]).all()


def test_feature_table_errors():
    with pytest.raises(ValueError, match=r"holds \(query 'a', doc 1\) more than once"):
        RankingDataset.from_frame({"query": ["a", "a"], "doc": [1, 1], "f": [0.0, 1.0]})
    with pytest.raises(ValueError, match="feature column 'f' holds nan"):
        RankingDataset.from_frame({"query": ["a", "a"], "doc": [1, 2], "f": [0.0, np.nan]})


def test_with_data_refuses_a_page_showing_a_document_twice():
    log = ClickLog.from_events({"query": ["q", "q"], "doc": ["a", "a"], "position": [1, 2], "click": [1, 0]})
    assert log.n_items == 2
    data = RankingDataset.from_frame({"query": ["q"], "doc": ["a"], "f": [1.0]})
    with pytest.raises(ValueError, match="twice"):
        log.with_data(data)


@requires_trec
def test_trec_log_loads_as_it_comes():
    frame = pd.read_csv(trec_dir() / "train.csv")
    log = ClickLog.from_events(frame, session="page")
    assert (len(log), log.n_items, log.n_clicks) == (2872, 28720, 1293)
    assert log.n_queries == frame["query"].nunique()
    assert log.to_frame()["doc"].tolist() == frame.sort_values(["page", "position"])["doc"].tolist()


def test_raw_log_files_round_trip_with_their_digest(tmp_path):
    from counterfactual_ltr.files import read_click_log, write_click_log

    log = ClickLog.from_events(_events(), session="page")
    for name in ("raw.parquet", "raw.csv"):
        write_click_log(log, tmp_path / name)
        back = read_click_log(tmp_path / name, session="session")
        pd.testing.assert_frame_equal(back.to_frame(), log.to_frame())
    frame = pd.read_csv(tmp_path / "raw.csv")
    frame.loc[1, "query"] = "98435_2"          # an edited id: the digest beside the file no longer matches
    frame.to_csv(tmp_path / "raw.csv", index=False)
    with pytest.raises(ValueError, match="column 'query' does not match its digest"):
        read_click_log(tmp_path / "raw.csv", session="session")


def test_gbdt_learner_takes_a_joined_log(letor_path):
    pytest.importorskip("lightgbm")
    from counterfactual_ltr import GBDTPropDCG

    data, log, events, table = letor_path
    joined = _raw(events).with_data(RankingDataset.from_frame(table, query="q", doc="d", label="grade"))
    a = GBDTPropDCG(n_estimators=5, random_state=0).fit(log).predict(data)
    b = GBDTPropDCG(n_estimators=5, random_state=0).fit(joined).predict(joined.data)
    np.testing.assert_array_equal(a, b)


def test_on_policy_value_of_a_raw_log_counts_clicks_at_their_recorded_positions():
    from counterfactual_ltr.evaluation.click_value import on_policy_value

    log = ClickLog.from_events({"query": ["q", "q"], "doc": ["a", "b"], "position": [1, 4], "click": [0, 1]})
    assert on_policy_value(log, metric="dcg") == pytest.approx(1 / np.log2(5))


def test_grid_search_and_the_aggregate_take_a_joined_log(letor_path):
    from sklearn.model_selection import GridSearchCV, GroupKFold

    from counterfactual_ltr import snips_scorer

    data, log, events, table = letor_path
    joined = _raw(events).with_data(RankingDataset.from_frame(table, query="q", doc="d"))
    assert joined.groups.dtype == object and joined.groups[0].startswith("query-")
    search = GridSearchCV(SVMPropRank(), {"C": [0.1, 1.0]}, cv=GroupKFold(2), scoring=snips_scorer())
    search.fit(joined, groups=joined.groups)
    assert search.best_params_["C"] in (0.1, 1.0)
    np.testing.assert_array_equal(joined.aggregate().weights, log.aggregate().weights)


def test_string_ids_that_look_like_numbers_or_missing_values_round_trip_through_csv(tmp_path):
    from counterfactual_ltr.files import read_click_log, write_click_log

    log = ClickLog.from_events({"query": ["007", "NA", "NA", "7"], "doc": ["123", "NULL", "4.5", "nan"],
                                "position": [1, 1, 2, 1], "click": [1, 0, 1, 0]})
    write_click_log(log, tmp_path / "ids.csv")
    back = read_click_log(tmp_path / "ids.csv", session="session")
    pd.testing.assert_frame_equal(back.to_frame(), log.to_frame())
    assert back.to_frame()["doc"].tolist() == ["123", "NULL", "4.5", "nan"]
    # An empty id is refused from a frame as a user's CSV reads it (missing), issue 38.
    with pytest.raises(ValueError, match="column 'doc' has an empty id at frame row 1"):
        ClickLog.from_events({"query": ["q", "q"], "doc": ["a", ""], "position": [1, 2], "click": [1, 0]})


@pytest.mark.slow      # 300,000 CSV rows written and read: about 6 s
def test_csv_ids_that_look_like_numbers_until_a_late_row_are_all_strings(tmp_path):
    """pandas types a CSV column per internal chunk by default: ids numeric for 300,000 rows and then 'abc'
    would come back as a mixture of ints and strings; the reader types the whole column."""
    from counterfactual_ltr.aggregate import aggregate_clicks
    from counterfactual_ltr.files import read_click_log

    n = 300_000
    doc = np.arange(n).astype(str).astype(object)
    doc[-1] = "abc"
    frame = pd.DataFrame({"query": np.repeat(np.arange(n // 10), 10), "doc": doc,
                          "position": np.tile(np.arange(1, 11), n // 10), "click": np.arange(n) % 7 == 0})
    frame.to_csv(tmp_path / "mixed.csv", index=False)
    log = read_click_log(tmp_path / "mixed.csv")
    assert log.doc_ids.dtype == object and log.doc_ids[log.docs][[0, -1]].tolist() == ["0", "abc"]
    data = RankingDataset.from_frame(frame[["query", "doc"]].assign(f=0.0), features=["f"])
    with pytest.raises(ValueError, match=r"column 'doc' holds integers from row \d+ of .*mixed.csv and other values .* of .*mixed.csv: .*batch_size"):
        aggregate_clicks(tmp_path / "mixed.csv", data, batch_size=100_000, doc="doc")
    assert aggregate_clicks(tmp_path / "mixed.csv", data, batch_size=n, doc="doc").n_clicks == log.n_clicks


def test_a_foreign_csv_keeps_ids_as_written(tmp_path):
    """A CSV written by another tool (no digest) says nothing of types: '00123' and '123' are two queries,
    not one integer, and integers written plainly (int64, uint64 beyond 2**63) are read as integers."""
    from counterfactual_ltr.aggregate import aggregate_clicks
    from counterfactual_ltr.files import read_click_log

    frame = pd.DataFrame({"page": [1, 1, 2, 2, 3, 3], "query": ["00123", "00123", "123", "123", "+5", "+5"],
                          "doc": ["18446744073709551615", "-4", "7", "18446744073709551615", "7", "-4"],
                          "position": [1, 2, 1, 2, 1, 2], "click": [1, 0, 0, 1, 0, 0]})
    frame.to_csv(tmp_path / "foreign.csv", index=False)
    assert not (tmp_path / "foreign.csv.digest").exists()
    log = read_click_log(tmp_path / "foreign.csv", session="page")
    assert log.n_queries == 3 and sorted(log.query_ids.tolist()) == ["+5", "00123", "123"]
    # one uint64 beyond 2**63 and one negative do not share an integer type: the doc ids stay the text
    assert set(log.doc_ids.tolist()) == {"18446744073709551615", "-4", "7"}
    pd.DataFrame({"doc": ["18446744073709551615", "7"]}).assign(query="q", position=[1, 2], click=[1, 0]) \
        .to_csv(tmp_path / "big.csv", index=False)
    assert read_click_log(tmp_path / "big.csv").doc_ids.dtype == np.uint64
    # the feature table and the streamed aggregate read the same ids the same way
    table = frame[["query", "doc"]].drop_duplicates().assign(f=np.arange(6.0))
    table.to_csv(tmp_path / "features.csv", index=False)
    from counterfactual_ltr.log_integrity import read_log_frame

    data = RankingDataset.from_frame(read_log_frame([tmp_path / "features.csv"], ids=["query", "doc"]),
                                     features=["f"])
    assert data.n_queries == 3
    streamed = aggregate_clicks(tmp_path / "foreign.csv", data, session="page", propensity=1.0)
    joined = log.with_data(data).aggregate(propensity=1.0)
    np.testing.assert_array_equal(streamed.weights, joined.weights)
    np.testing.assert_array_equal(streamed.click_counts, joined.click_counts)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(-2 ** 63, 2 ** 64 - 1).map(str),
                          st.text(alphabet="0123456789-+ a", min_size=1, max_size=22)), min_size=1, max_size=6))
def test_ids_read_as_text_write_back_as_the_same_text(texts):
    from counterfactual_ltr.ids import ids_from_text

    ids = ids_from_text(pd.Series(texts, dtype=str))
    assert [str(v) for v in ids.tolist()] == texts
    assert ids.dtype in (np.int64, np.uint64) or all(isinstance(v, str) for v in ids.tolist())
