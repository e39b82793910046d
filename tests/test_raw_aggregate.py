"""``aggregate_clicks`` on raw logs (issue 27): streamed and on Dask, equal to the in-memory join."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from click_sim.raw import simulate_raw_events
from counterfactual_ltr import ClickLog, RankingDataset
from counterfactual_ltr.aggregate import aggregate_clicks
from counterfactual_ltr.raw_events import MissingFeaturesWarning


def _features(frame, *, drop=0, seed=0):
    """A feature table keyed by the log's (query, doc) pairs, ``drop`` of them left out."""
    keys = frame[["query", "doc"]].drop_duplicates().iloc[drop:]
    rng = np.random.default_rng(seed)
    return RankingDataset.from_frame(keys.assign(f=rng.normal(size=len(keys))), query="query", doc="doc",
                                     features=["f"])


def _big_ids(frame):
    """Document ids beyond 2**63 (uint64) and query ids as strings."""
    codes = pd.factorize(frame["doc"])[0].astype(np.uint64)
    return frame.assign(doc=codes + np.uint64(2**63 + 11), query="q" + frame["query"].astype(str))


def _write(frame, folder, kind, n_parts=3):
    paths = []
    for k, rows in enumerate(np.array_split(np.arange(len(frame)), n_parts)):
        path = folder / f"part{k}.{kind}"
        part = frame.iloc[rows]
        part.to_parquet(path, index=False) if kind == "parquet" else part.to_csv(path, index=False)
        paths.append(str(path))
    return paths


def _same(agg, ref):
    assert agg.n_sessions == ref.n_sessions and agg.n_clicks == ref.n_clicks
    for a, b in zip(agg.table, ref.table):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(agg.weights, ref.weights)


@pytest.fixture(scope="module")
def events():
    """Pages with string page ids, shuffled rows, drifting rankings and gaps (every 7th row not logged)."""
    frame, _ = simulate_raw_events(1500, n_queries=120, shuffle=True, random_state=3)
    frame = frame[np.arange(len(frame)) % 7 != 3].reset_index(drop=True)
    return _big_ids(frame)


@pytest.fixture(scope="module")
def runs():
    """Pages without page ids: consecutive rows, with gaps."""
    frame, _ = simulate_raw_events(1500, n_queries=120, session_ids=False, random_state=4)
    return frame[np.arange(len(frame)) % 5 != 2].reset_index(drop=True)


@pytest.mark.parametrize("kind", ["parquet", "csv"])
# batch_size 97: about 150 batches per run, 10-30 s (slow); one batch per file is quick
@pytest.mark.parametrize("batch_size", [pytest.param(97, marks=pytest.mark.slow), 1 << 20])
def test_streamed_raw_aggregate_equals_the_joined_log(events, runs, tmp_path, kind, batch_size):
    for name, frame, session in (("pages", events, "session"), ("runs", runs, None)):
        folder = tmp_path / name
        folder.mkdir()
        data = _features(frame)
        ref = ClickLog.from_events(frame, session=session).with_data(data).aggregate(0.8)
        # batch_size 97 cuts pages across batches and files; the page column spreads pages over buckets
        agg = aggregate_clicks(_write(frame, folder, kind), data, 0.8, batch_size=batch_size, session=session,
                               query="query")
        _same(agg, ref)


@pytest.mark.slow      # a LocalCluster and four aggregates on it: 10-35 s
def test_raw_aggregate_on_dask_equals_the_joined_log(events, runs, tmp_path):
    distributed = pytest.importorskip("distributed")
    dd = pytest.importorskip("dask.dataframe")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster):
        for name, frame, session in (("pages", events, "session"), ("runs", runs, None)):
            folder = tmp_path / name
            folder.mkdir()
            data = _features(frame)
            ref = ClickLog.from_events(frame, session=session).with_data(data).aggregate()
            _same(aggregate_clicks(_write(frame, folder, "parquet", n_parts=4), data, engine="dask",
                                   batch_size=50, session=session, doc="doc"), ref)
            # a Dask DataFrame whose partitions cut pages (runs) or scatter them (shuffled pages)
            _same(aggregate_clicks(dd.from_pandas(frame, npartitions=5, sort=False), data, engine="dask",
                                   session=session, doc="doc"), ref)


@pytest.mark.slow      # batches of 100 rows: 5-10 s each
@pytest.mark.parametrize("missing", ["drop_sessions", "drop_rows"])
def test_dropping_join_warns_once_with_the_counts_of_the_in_memory_join(events, tmp_path, missing):
    data = _features(events, drop=25)
    with pytest.warns(MissingFeaturesWarning) as expected:
        ref = ClickLog.from_events(events, session="session").with_data(data, missing=missing).aggregate()
    paths = _write(events, tmp_path, "parquet")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        agg = aggregate_clicks(paths, data, batch_size=100, session="session", missing=missing)
    _same(agg, ref)
    dropped = [w for w in seen if issubclass(w.category, MissingFeaturesWarning)]
    assert len(dropped) == 1 and str(dropped[0].message) == str(expected[0].message)


@pytest.mark.slow      # batches of 100 rows: 5-10 s
def test_missing_features_raise_after_the_whole_log_with_the_in_memory_count(events, tmp_path):
    data = _features(events, drop=25)
    with pytest.raises(ValueError) as expected:
        ClickLog.from_events(events, session="session").with_data(data)
    count = str(expected.value).split(" shown")[0]
    assert int(count) >= 25
    with pytest.raises(ValueError, match=rf"^{count} shown \(query, document\) pairs .* no features"):
        aggregate_clicks(_write(events, tmp_path, "parquet"), data, batch_size=100, session="session")


def _page_log():
    return pd.DataFrame({"page": ["a", "a", "b", "b", "c", "c"], "query": ["q", "q", "q", "q", "r", "r"],
                         "doc": [1, 2, 2, 1, 1, 3], "position": [1, 2, 1, 3, 1, 2], "click": [0, 1, 1, 0, 0, 0]})


@pytest.mark.parametrize("change, words", [
    (lambda f: f.assign(position=[1, 2, 1, 1, 1, 2]), r"column 'position': a page holds position 1 twice"),
    (lambda f: f.assign(query=["q", "q", "q", "r", "r", "r"]), r"column 'query': a page's rows carry two queries"),
    (lambda f: f.assign(position=[1, 2, 1, 0, 1, 2]), r"column 'position' must hold 1-based .* row 1 of .*b\.parquet"),
    (lambda f: f.assign(doc=[1, 2, 2, None, 1, 3]), r"column 'doc' has a missing value at row 1 of .*b\.parquet"),
    (lambda f: f.assign(click=[0, 1, 1, 2, 0, 0]), r"column 'click' must hold booleans or 0/1; row 1 of .*b\.parquet"),
    (lambda f: f.assign(doc=[1, 2, 2, 2, 1, 3]), r"page 'b' shows document 2 twice"),
])
@pytest.mark.parametrize("engine", ["pyarrow", "dask"])
def test_bad_raw_rows_name_the_column_the_file_and_the_row(tmp_path, change, words, engine):
    pytest.importorskip("dask")
    frame = change(_page_log())
    data = RankingDataset.from_frame(pd.DataFrame({"query": ["q", "q", "r", "r"], "doc": [1, 2, 1, 3],
                                                   "f": [0.0, 1.0, 2.0, 3.0]}), features=["f"])
    # the bad rows sit in the second file: the message names it
    paths = [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]
    frame.iloc[:2].to_parquet(paths[0], index=False)
    frame.iloc[2:].reset_index(drop=True).to_parquet(paths[1], index=False)
    with pytest.raises(ValueError, match=words) as err:
        aggregate_clicks(paths, data, engine=engine, session="page", repeated="raise")
    if "row" in words:
        assert "b.parquet" in str(err.value) and "row 1 of" in str(err.value)


def test_raw_options_name_a_missing_column_and_check_their_values(events, tmp_path):
    paths = _write(events, tmp_path, "parquet", n_parts=1)
    data = _features(events)
    with pytest.raises(ValueError, match=r"lacks the column 'page' \(the session column\)"):
        aggregate_clicks(paths, data, session="page")
    with pytest.raises(ValueError, match="missing must be"):
        aggregate_clicks(paths, data, session="session", missing="skip")


def test_ids_of_both_64_bit_kinds_across_csv_batches_are_kept_exactly(tmp_path):
    """A CSV whose doc ids fit int64 in one batch and need uint64 in the next: no float in between."""
    docs = np.array([5, 6, 2**63 + 5, 2**63 + 6], dtype=np.uint64)
    frame = pd.DataFrame({"query": ["q", "q", "r", "r"], "doc": docs, "position": [1, 2, 1, 2],
                          "click": [1, 0, 0, 1]})
    frame.to_csv(tmp_path / "log.csv", index=False)
    data = RankingDataset.from_frame(frame.assign(f=[0.0, 1.0, 2.0, 3.0]), features=["f"])
    agg = aggregate_clicks(tmp_path / "log.csv", data, batch_size=2, doc="doc")
    _same(agg, ClickLog.from_events(frame).with_data(data).aggregate())
    assert agg.table[0].tolist() == [0, 1, 2, 3] and agg.n_sessions == 2


def test_a_page_without_id_showing_a_document_twice_is_named_by_its_row(tmp_path):
    frame = _page_log().drop(columns="page").assign(doc=[1, 2, 2, 2, 1, 3], position=[1, 2, 1, 2, 1, 2])
    data = RankingDataset.from_frame(pd.DataFrame({"query": ["q", "q", "r", "r"], "doc": [1, 2, 1, 3],
                                                   "f": [0.0, 1.0, 2.0, 3.0]}), features=["f"])
    frame.to_parquet(tmp_path / "log.parquet", index=False)
    with pytest.raises(ValueError, match=r"the page of row 3 of .*log\.parquet shows document 2 twice"):
        aggregate_clicks(tmp_path / "log.parquet", data, doc="doc", repeated="raise")


def _messages(caught, category):
    return [str(w.message) for w in caught if issubclass(w.category, category)]


def _with_repeats(frame, seed):
    """Some pages show one of their documents again further down; some rows are logged twice in a row."""
    rng = np.random.default_rng(seed)
    frame = frame.reset_index(drop=True)
    position, query = frame["position"].to_numpy(), frame["query"].to_numpy()
    start = np.flatnonzero(np.r_[True, (position[1:] <= position[:-1]) | (query[1:] != query[:-1])])
    end = np.r_[start[1:], len(frame)] - 1
    start, end = start[end > start], end[end > start]
    pick = rng.choice(len(end), size=12, replace=False)      # last row of a page: show its first row again
    again = end[pick]
    rows = frame.loc[again].copy()
    rows["doc"] = frame.loc[start[pick], "doc"].to_numpy()
    rows["position"] += 1
    twice = rng.choice(np.setdiff1d(end, again), size=6, replace=False)  # a clicked last row logged twice
    frame.loc[twice, "click"] = 1
    extra = pd.concat([rows, frame.loc[twice]])
    order = np.argsort(np.r_[np.arange(len(frame)), extra.index.to_numpy() + 0.5], kind="stable")
    return pd.concat([frame, extra]).iloc[order].reset_index(drop=True)


@pytest.mark.parametrize("repeated", ["drop_pages", "keep_first"])
@pytest.mark.parametrize("batch_size", [13, 97, 1 << 20])
def test_streamed_repeats_and_repeated_rows_agree_with_the_log_in_memory(runs, tmp_path, repeated, batch_size):
    """Pages showing a document twice and rows logged twice, wherever batches and files cut them."""
    from counterfactual_ltr.clicklog import RepeatedDocumentWarning
    from counterfactual_ltr.raw_events import RepeatedRowWarning

    # 13-row batches are slow (pandas' fixed cost per batch): a quarter of the log, some 230 batches,
    # cuts pages at every offset as well as the whole of it would
    frame = _with_repeats(runs if batch_size > 13 else runs.iloc[:3000], seed=batch_size)
    data = _features(frame)
    with warnings.catch_warnings(record=True) as expected:
        warnings.simplefilter("always")
        ref = ClickLog.from_events(frame).with_data(data, repeated=repeated).aggregate(0.7)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        agg = aggregate_clicks(_write(frame, tmp_path, "csv", n_parts=4), data, 0.7, batch_size=batch_size,
                               repeated=repeated, doc="doc")
    _same(agg, ref)
    # one warning of each kind for the whole log, with the in-memory counts
    for category, count in ((RepeatedDocumentWarning, r"^(\d+) of (\d+) pages"), (RepeatedRowWarning, r"^(\d+) page")):
        mine, theirs = _messages(seen, category), _messages(expected, category)
        assert len(mine) == 1 and len(theirs) == 1, (category, mine, theirs)
        assert re.match(count, mine[0]).groups() == re.match(count, theirs[0]).groups()
        assert "part" in mine[0] or category is RepeatedDocumentWarning


def test_repeated_rows_on_dask_warn_once_from_the_workers(runs, tmp_path):
    """The warnings of pages counted on the workers reach the caller, counted once."""
    distributed = pytest.importorskip("distributed")
    from counterfactual_ltr.clicklog import RepeatedDocumentWarning
    from counterfactual_ltr.raw_events import RepeatedRowWarning

    frame = _with_repeats(runs, seed=1)
    data = _features(frame)
    with warnings.catch_warnings(record=True) as expected:
        warnings.simplefilter("always")
        ref = ClickLog.from_events(frame).with_data(data).aggregate()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            agg = aggregate_clicks(_write(frame, tmp_path, "parquet", n_parts=5), data, engine="dask",
                                   batch_size=40, doc="doc")
    _same(agg, ref)
    for category in (RepeatedDocumentWarning, RepeatedRowWarning):
        mine, theirs = _messages(seen, category), _messages(expected, category)
        assert len(mine) == 1 and mine[0].split(" ")[0] == theirs[0].split(" ")[0]


def test_repeated_option_is_checked_and_raw_only(tmp_path):
    frame = _page_log()
    data = RankingDataset.from_frame(pd.DataFrame({"query": ["q", "q", "r", "r"], "doc": [1, 2, 1, 3],
                                                   "f": [0.0, 1.0, 2.0, 3.0]}), features=["f"])
    frame.to_parquet(tmp_path / "log.parquet", index=False)
    with pytest.raises(ValueError, match="repeated must be 'drop_pages', 'keep_first' or 'raise', got 'drop'"):
        aggregate_clicks(tmp_path / "log.parquet", data, session="page", repeated="drop")
    # every page repeats a document: nothing left to count, said as with_data says it
    frame.assign(doc=[1, 1, 2, 2, 3, 3]).to_parquet(tmp_path / "all.parquet", index=False)
    with pytest.raises(ValueError, match=r"every page shows a document twice \(page 'a' .*repeated='keep_first'"):
        aggregate_clicks(tmp_path / "all.parquet", data, session="page")
