"""Reliability of the data side: every bad input a clear, located error; never a silent wrong result.

LETOR parsing, click-log construction and frames, Parquet integrity, simulation and online-loop
inputs, and evaluation on degenerate logs. The hypothesis tests check the property "a ValueError or
TypeError naming the parameter / line, or a correct result" against independent references.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from click_sim import (PositionBasedClickModel, load_letor, make_ranking, make_separable_ranking, run_online,
                       simulate_clicks, train_production_ranker)
from counterfactual_ltr import ClickLog, RankingDataset
from counterfactual_ltr._segments import offsets_from_lengths
from counterfactual_ltr._validation import check_random_state
from counterfactual_ltr.evaluation import ips_estimate, snips_estimate, validation_report
from counterfactual_ltr.online import RandomRanker

COMPRESSORS = {"": open, ".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
HYPO = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _write(tmp_path, text: str, suffix: str = "", name: str = "data.txt"):
    path = tmp_path / (name + suffix)
    with COMPRESSORS[suffix](path, "wb") as fh:
        fh.write(text.encode())
    return path


def _letor_error(path, **kwargs) -> str:
    with pytest.raises(ValueError) as info:
        load_letor(path, **kwargs)
    message = str(info.value)
    assert str(path) in message, message
    return message


# ----------------------------------------------------------------------------- LETOR: indexing

def test_zero_index_in_one_based_file_is_an_error_not_a_shift(tmp_path):
    path = _write(tmp_path, "2 qid:1 1:0.5 2:1.0\n# c\n0 qid:1 0:7 1:0.1\n")
    message = _letor_error(path)
    assert re.search(r"\bline 3\b", message) and "zero_based" in message, message
    # asked for explicitly, the file is read zero-based: index 0 is the first column
    data = load_letor(path, zero_based=True)
    np.testing.assert_array_equal(data.X, [[0.0, 0.5, 1.0], [7.0, 0.1, 0.0]])


def test_one_based_file_keeps_its_columns(tmp_path):
    data = load_letor(_write(tmp_path, "1 qid:1 1:0.5 3:2\n0 qid:1 2:1\n"))
    np.testing.assert_array_equal(data.X, [[0.5, 0.0, 2.0], [0.0, 1.0, 0.0]])


@pytest.mark.parametrize("index", ["10000001", str(2**40), str(2**63), str(2**64 + 1)])
def test_huge_feature_index_is_a_located_error(tmp_path, index):
    path = _write(tmp_path, f"1 qid:1 1:0.5\n\n0 qid:1 1:1 {index}:3\n")
    message = _letor_error(path)
    assert re.search(r"\bline 3\b", message) and "n_features" in message, message


def test_wide_file_loads_with_explicit_n_features(tmp_path):
    path = _write(tmp_path, "1 qid:1 1:0.5 15000:2\n0 qid:1 2:1\n")
    _letor_error(path)  # beyond MAX_IMPLICIT_FEATURES without n_features
    data = load_letor(path, n_features=15000)
    assert data.X.shape == (2, 15000) and data.X[0, 14999] == 2.0
    assert re.search(r"\bline 1\b", _letor_error(path, n_features=14999))


@pytest.mark.parametrize("kwargs, exc", [
    (dict(n_features=2.5), ValueError), (dict(n_features="3"), TypeError), (dict(n_features=0), ValueError),
    (dict(zero_based=1), TypeError), (dict(zero_based="yes"), TypeError),
])
def test_load_letor_bad_options(tmp_path, kwargs, exc):
    path = _write(tmp_path, "1 qid:1 1:0.5\n")
    with pytest.raises(exc, match=next(iter(kwargs))):
        load_letor(path, **kwargs)


# ----------------------------------------------------------------------------- LETOR: malformed lines

MALFORMED = [
    ("1 qid:1 1:0.5\n0 1:0.3\n", 2, "qid"),                       # missing qid
    ("1 qid:1 1:0.5\n0 1:0.3 qid:1\n", 2, "qid"),                 # qid not after the label
    ("1 qid:1 1:0.5\nx qid:1 1:0.3\n", 2, "label"),               # non-numeric label
    ("1 qid:1 1:0.5\nnan qid:1 1:0.3\n", 2, "label"),             # NaN label
    ("1 qid:1 1:0.5\n1.5 qid:1 1:0.3\n", 2, "label"),             # fractional label
    ("1 qid:1 1:0.5\n-2 qid:1 1:0.3\n", 2, "label"),              # negative label
    ("1 qid:1 1:0.5\n1 qid:a 1:0.3\n", 2, "qid"),                 # non-integer qid
    (f"1 qid:{2**63} 1:0.5\n", 1, "qid"),                         # qid beyond int64
    ("1 qid:1 1:0.5\n1 qid:1 1:nan\n", 2, "finite"),              # NaN value
    ("1 qid:1 1:0.5\n1 qid:1 2:inf\n", 2, "finite"),              # inf value
    ("1 qid:1 1:0.5\n1 qid:1 2:1e999\n", 2, "finite"),            # overflowing value
    ("1 qid:1 1:0.5 1:0.7\n", 1, "repeated"),                     # duplicate index on a line
    ("1 qid:1 2:0.5 1:0.7\n", 1, "increase"),                     # decreasing indices
    ("1 qid:1 1:0.5 foo\n", 1, "index:value"),                    # bare token
    ("1 qid:1 a:0.5\n", 1, "index"),                              # non-integer index
    ("1 qid:1 -3:0.5\n", 1, "index"),                             # negative index
    ("1 qid:1 1:\n", 1, "finite"),                                # empty value
    ("1 qid:1 1:0.5\n0 qid:2 1:1\n0 qid:1 1:2\n", 3, "contiguous"),  # qid groups not contiguous
    ("1 qid:1 1:0.5\n0 qid:1 1_0:1\n", 2, "underscore"),        # int("1_0") would read index 10
    ("1 qid:1 1:0.5\n1_0 qid:1 1:1\n", 2, "underscore"),        # ... and label 10
]


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
@pytest.mark.parametrize("text, line, word", MALFORMED)
def test_malformed_line_is_named_in_the_decompressed_text(tmp_path, suffix, text, line, word):
    # two leading comment/blank lines shift every data line by 2
    path = _write(tmp_path, "# header\n\n" + text, suffix)
    message = _letor_error(path)
    assert re.search(rf"\bline {line + 2}\b", message), message
    assert word in message, message


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
@pytest.mark.parametrize("text", ["", "# only a comment\n\n"])
def test_file_without_data_lines(tmp_path, suffix, text):
    assert "no data lines" in _letor_error(_write(tmp_path, text, suffix))


def test_compressed_file_detected_by_content_not_name(tmp_path):
    path = tmp_path / "no_extension"
    path.write_bytes(gzip.compress(b"1 qid:4 1:0.5\n0 qid:4 2:0.25\n"))
    data = load_letor(path)
    np.testing.assert_array_equal(data.X, [[0.5, 0.0], [0.0, 0.25]])


def test_truncated_gz_is_a_named_error(tmp_path):
    good = gzip.compress(("1 qid:1 1:0.5\n" * 200).encode())
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(good[:len(good) // 2])
    _letor_error(path)


# ----------------------------------------------------------------------------- LETOR: hypothesis

_LABELS = ["0", "1", "2", "2.0", "-1", "1.5", "nan", "x", "", "1_0"]
_QIDS = ["qid:1", "qid:2", "qid:3", "qid:-4", "qid:x", "qid:1.5", f"qid:{2**64}", "", "qid:"]
_VALUES = ["0.5", "-1", "2e3", "0", "nan", "inf", "abc", "", "1_5"]


@st.composite
def _letor_line(draw):
    kind = draw(st.sampled_from(["data", "data", "data", "comment", "blank"]))
    if kind == "comment":
        return "# " + draw(st.sampled_from(["c", "1 qid:1 1:x"]))
    if kind == "blank":
        return draw(st.sampled_from(["", "   "]))
    label = draw(st.sampled_from(_LABELS[:3]) if draw(st.integers(0, 4)) else st.sampled_from(_LABELS))
    qid = draw(st.sampled_from(_QIDS[:3]) if draw(st.integers(0, 4)) else st.sampled_from(_QIDS))
    indices = sorted(draw(st.sets(st.integers(1, 6), max_size=4)))
    if draw(st.integers(0, 5)) == 0:
        indices.append(draw(st.sampled_from([0, 1, 3, 10**7, 2**40, 2**63])))
    pairs = []
    for index in indices:
        value = draw(st.sampled_from(_VALUES[:4]) if draw(st.integers(0, 5)) else st.sampled_from(_VALUES))
        pairs.append(f"{index}:{value}")
    tail = " # note" if draw(st.booleans()) else ""
    return " ".join(t for t in [label, qid, *pairs] if t) + tail


def _reference_parse(lines):
    """Independent reading of well-formed LETOR lines: (X, y, qid) as lists."""
    rows = []
    for line in lines:
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        feats = {int(k): float(v) for k, v in (t.split(":") for t in tokens[2:])}
        rows.append((int(float(tokens[0])), int(tokens[1][4:]), feats))
    width = max((max(f) for _, _, f in rows if f), default=1)
    X = np.zeros((len(rows), width))
    for r, (_, _, feats) in enumerate(rows):
        for k, v in feats.items():
            X[r, k - 1] = v
    return X, [r[0] for r in rows], [r[1] for r in rows]


@HYPO
@given(lines=st.lists(_letor_line(), min_size=0, max_size=8), suffix=st.sampled_from(["", ".gz"]))
def test_random_letor_text_loads_correctly_or_names_its_first_bad_line(tmp_path_factory, lines, suffix):
    tmp = tmp_path_factory.mktemp("letor")
    path = _write(tmp, "\n".join(lines) + "\n", suffix)
    try:
        data = load_letor(path)
    except ValueError as err:
        message = str(err)
        assert str(path) in message, message
        match = re.search(r"\bline (\d+)\b", message)
        if match is None:
            assert "no data lines" in message, message
            event("no data lines")
            return
        event("error at a line")
        n = int(match.group(1))
        assert 1 <= n <= len(lines) and lines[n - 1].split("#", 1)[0].strip(), message
        # the named line is the first bad one: everything before it loads (or holds no data)
        before = _write(tmp, "\n".join(lines[:n - 1]) + "\n", suffix, name="prefix.txt")
        try:
            load_letor(before)
        except ValueError as prefix_err:
            assert "no data lines" in str(prefix_err), (message, str(prefix_err))
        return
    event("loaded")
    X, y, qid = _reference_parse(lines)
    # mostly-zero files load as CSR (load_letor(sparse=None)); the values must be the same
    loaded = data.X.toarray() if data.is_sparse else data.X
    assert data.is_sparse == (np.count_nonzero(X) <= X.size / 3)
    assert np.all(np.isfinite(loaded))
    np.testing.assert_array_equal(loaded, X)
    assert data.y.tolist() == y and data.qid.tolist() == qid


# ----------------------------------------------------------------------------- RankingDataset

@pytest.mark.parametrize("X, y, qid, word", [
    (np.zeros((2, 1)), [1, 0], np.array([2**64 - 1] * 2, dtype=np.uint64), "qid"),
    (np.zeros((2, 1)), [1e300, 0], [1, 1], "y"),
    (np.array([["a"], ["b"]]), [1, 0], [1, 1], "X"),
    (np.zeros((2, 1)) + 1j, [1, 0], [1, 1], "X"),
    (np.zeros((2, 0)), [1, 0], [1, 1], "feature"),
])
def test_ranking_dataset_refuses_values_it_would_mangle(X, y, qid, word):
    with pytest.raises((ValueError, TypeError), match=word):
        RankingDataset(X, y, qid)


# ----------------------------------------------------------------------------- click logs

@pytest.fixture(scope="module")
def small():
    data = make_ranking(n_queries=25, n_docs=(2, 9), random_state=5)
    log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=5)
    return data, log


def _frame_of(log):
    return {c: log.to_frame()[c].to_numpy() for c in ("session", "qid", "doc", "position", "click")}


def test_empty_click_log_is_a_log_not_an_index_error(small):
    data, _ = small
    log = ClickLog(data, [], [0], [], [])
    assert len(log) == 0 and log.n_items == 0 and log.aggregate().n_clicks == 0


def test_from_frame_accepts_a_mapping_of_columns(small):
    data, log = small
    assert ClickLog.from_frame(_frame_of(log), data).equals(log)
    with pytest.raises(TypeError, match="frame"):
        ClickLog.from_frame([[0, 1]], data)
    with pytest.raises(TypeError, match="data"):
        ClickLog.from_frame(_frame_of(log), data.X)


def test_uint64_session_ids_never_wrap(small):
    data, log = small
    columns = _frame_of(log)
    columns["session"] = columns["session"].astype(np.uint64) + np.uint64(2**63)
    with pytest.raises(ValueError, match="session.*64-bit"):
        ClickLog.from_frame(columns, data)
    columns["session"] = columns["session"] - np.uint64(2**63)  # in range: read unchanged
    assert ClickLog.from_frame(columns, data).equals(log)
    with pytest.raises(ValueError, match="session_ids"):
        ClickLog(data, log.session_query, log.session_offsets, log.docs, log.clicks,
                 session_ids=np.full(log.n_sessions, 2**64 - 1, dtype=np.uint64))


@pytest.mark.parametrize("column, values, word", [
    ("click", lambda n: pd.array([True, None] + [False] * (n - 2), dtype="boolean"), "missing"),
    ("click", lambda n: np.r_[0.5, np.zeros(n - 1)], "0/1"),
    ("click", lambda n: np.r_[np.nan, np.zeros(n - 1)], "missing"),
    ("click", lambda n: np.array(["yes"] * n, dtype=object), "dtype"),
    ("session", lambda n: pd.array([None] + [1] * (n - 1), dtype="Int64"), "missing"),
    ("session", lambda n: np.arange(n) + 0.5, "integers"),
    ("doc", lambda n: np.array(["0"] * n, dtype=object), "integers"),
    ("position", lambda n: np.ones(n, dtype=bool), "integers"),
])
def test_frame_columns_with_values_that_would_be_mangled(small, column, values, word):
    data, log = small
    frame = log.to_frame()
    frame[column] = values(len(frame))
    with pytest.raises(ValueError, match=word) as info:
        ClickLog.from_frame(frame, data)
    assert repr(column) in str(info.value) or column in str(info.value)


def test_nullable_columns_without_missing_values_are_read(small):
    data, log = small
    frame = log.to_frame().astype({"session": "Int64", "doc": "Int64", "click": "boolean"})
    assert ClickLog.from_frame(frame, data).equals(log)
    float_clicks = log.to_frame().astype({"click": float})
    assert ClickLog.from_frame(float_clicks, data).equals(log)


def test_session_mixing_queries_and_repeated_rows_are_named(small):
    data, log = small
    frame = log.to_frame()
    # session 0 gets, as an extra position, a row of another query (with that query's qid)
    first = frame[frame.session == 0]
    other = int(data.rows_of([data.n_queries - 1])[0])
    extra = pd.DataFrame({"session": [0], "qid": [data.qid[other]], "doc": [other],
                          "position": [len(first) + 1], "click": [False]})
    with pytest.raises(ValueError, match="session 0 mixes queries"):
        ClickLog.from_frame(pd.concat([frame, extra], ignore_index=True), data)
    # session 1 shows its first row again at an extra position
    second = frame[frame.session == 1]
    again = second.iloc[[0]].assign(position=len(second) + 1)
    with pytest.raises(ValueError, match="session 1 shows row .* twice"):
        ClickLog.from_frame(pd.concat([frame, again], ignore_index=True), data)


@pytest.mark.parametrize("model, word", [
    (lambda pos: np.ones(len(pos) - 1), "shape"),
    (lambda pos: 1.0, "shape"),
    (lambda pos: np.ones((len(pos), 1)), "shape"),
    (lambda pos: np.array(["1"] * len(pos)), "dtype"),
    (lambda pos: np.where(pos > 1, np.nan, 1.0), "(0, 1]"),
])
def test_bad_propensity_model_is_named_at_the_point_of_use(small, model, word):
    data, log = small
    for use in (log.propensities, log.aggregate):
        with pytest.raises(ValueError, match=re.escape(word)) as info:
            use(model)
        assert "propensity model" in str(info.value)


@st.composite
def _sessions(draw):
    """A data set and sessions over it that may show a row twice (short sessions over long queries too)."""
    lengths = draw(st.lists(st.integers(1, 30), min_size=1, max_size=4))
    data = RankingDataset(np.zeros((sum(lengths), 1)), np.zeros(sum(lengths), int),
                          np.repeat(np.arange(len(lengths)), lengths))
    sessions, docs = [], []
    for _ in range(draw(st.integers(1, 6))):
        q = draw(st.integers(0, len(lengths) - 1))
        start = int(data.query_offsets[q])
        shown = draw(st.lists(st.integers(0, lengths[q] - 1), min_size=1, max_size=lengths[q]))
        sessions.append(q)
        docs.append([start + i for i in shown])
    return data, sessions, docs


@settings(max_examples=150, deadline=None)
@given(_sessions())
def test_repeated_row_check_agrees_with_a_reference(case):
    data, sessions, docs = case
    has_repeat = any(len(set(d)) < len(d) for d in docs)
    build = lambda: ClickLog(data, sessions, offsets_from_lengths([len(d) for d in docs]),  # noqa: E731
                             np.concatenate(docs), np.zeros(sum(map(len, docs)), bool))
    if has_repeat:
        first = next(i for i, d in enumerate(docs) if len(set(d)) < len(d))
        with pytest.raises(ValueError, match=rf"session {first} shows row \d+ twice"):
            build()
    else:
        assert build().n_items == sum(map(len, docs))


_FRAME_EDITS = ["none", "drop_column", "na", "float_column", "uint_big", "string_column", "value",
                "swap_rows", "duplicate_row", "empty"]


def _edit_frame(frame, kind, column, row, delta):
    frame = frame.copy()
    if kind == "drop_column":
        frame = frame.drop(columns=column)
    elif kind == "na":
        frame[column] = frame[column].astype("Int64" if column != "click" else "boolean")
        frame.loc[frame.index[row], column] = pd.NA
    elif kind == "float_column":
        frame[column] = frame[column].astype(float) + (0.5 if delta > 0 else 0.0)
    elif kind == "uint_big" and column != "click":
        frame[column] = frame[column].astype(np.uint64) + np.uint64(2**63 if delta > 0 else 0)
    elif kind == "string_column":
        frame[column] = frame[column].astype(str)
    elif kind == "value":
        if column == "click":
            frame[column] = frame[column].astype(float)
        frame.loc[frame.index[row], column] = frame[column].iloc[row] + delta if column != "click" else delta
    elif kind == "swap_rows":
        frame = frame.sample(frac=1.0, random_state=row)
    elif kind == "duplicate_row":
        frame = pd.concat([frame, frame.iloc[[row]]])
    elif kind == "empty":
        frame = frame.iloc[:0]
    return frame


@HYPO
@given(edits=st.lists(st.tuples(st.sampled_from(_FRAME_EDITS), st.sampled_from(
    ["session", "qid", "doc", "position", "click"]), st.integers(0, 10**6), st.integers(-3, 3)), max_size=3),
    as_dict=st.booleans())
def test_random_frames_give_a_clear_error_or_the_frame_itself(small, edits, as_dict):
    data, log = small
    frame = log.to_frame()
    for kind, column, row, delta in edits:
        if len(frame) == 0 or column not in frame.columns:
            break
        row = row % len(frame)
        try:
            frame = _edit_frame(frame, kind, column, row, delta)
        except (TypeError, ValueError, OverflowError):  # pandas refused the edit itself (test harness): skip it
            continue
    given_frame = {c: frame[c].to_numpy() for c in frame.columns} if as_dict else frame
    try:
        back = ClickLog.from_frame(given_frame, data)
    except (ValueError, TypeError) as err:
        assert str(err), "an error without a message"
        event(f"{type(err).__name__}")
        return
    event("rebuilt")
    # A correct result: the rebuilt log's rows are exactly the frame's rows (in session, position order).
    expected = frame.sort_values(["session", "position"]).reset_index(drop=True)
    got = back.to_frame()
    for c in ("session", "qid", "doc", "position"):
        np.testing.assert_array_equal(got[c].to_numpy(np.int64), expected[c].to_numpy(np.int64))
    np.testing.assert_array_equal(got["click"].to_numpy(bool), expected["click"].to_numpy(float) == 1)


# ----------------------------------------------------------------------------- Parquet integrity

def test_parquet_has_page_checksums_and_bad_files_are_named(small, tmp_path):
    import pyarrow.parquet as pq

    data, log = small
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    assert ClickLog.read_parquet(path, data).equals(log)
    raw = path.read_bytes()
    # zero a byte in the middle of the first data page of 'doc': caught by its page checksum
    meta = pq.ParquetFile(path).metadata.row_group(0).column(2)
    start = meta.data_page_offset
    bad = bytearray(raw)
    bad[start + (meta.total_compressed_size - (start - (meta.dictionary_page_offset or start))) // 2] ^= 0xFF
    (tmp_path / "flip.parquet").write_bytes(bytes(bad))
    for name, content in [("flip.parquet", None), ("cut.parquet", raw[: len(raw) // 2]),
                          ("text.parquet", b"session,qid\n1,2\n"), ("empty.parquet", b"")]:
        target = tmp_path / name
        if content is not None:
            target.write_bytes(content)
        with pytest.raises(ValueError) as info:
            ClickLog.read_parquet(target, data)
        assert str(target) in str(info.value)


def test_parquet_single_corruptions_never_give_a_different_log(small, tmp_path):
    """Seeded single-bit and single-byte corruptions: each read is a named ValueError or the same log."""
    data, log = small
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    raw = path.read_bytes()
    rng = np.random.default_rng(2024)
    target = tmp_path / "corrupt.parquet"
    outcomes = {"error": 0, "same": 0}
    for k in range(200):
        bad = bytearray(raw)
        where = int(rng.integers(len(bad)))
        if k % 2:
            bad[where] ^= 1 << int(rng.integers(8))
        else:
            bad[where] = (bad[where] + int(rng.integers(1, 256))) % 256
        target.write_bytes(bytes(bad))
        try:
            back = ClickLog.read_parquet(target, data)
        except ValueError as err:
            assert str(target) in str(err)
            outcomes["error"] += 1
            continue
        assert back.equals(log), f"corruption at byte {where} read back as a different log"
        outcomes["same"] += 1
    assert outcomes["error"] > 100  # most corruptions hit data pages or metadata and are caught


# ----------------------------------------------------------------------------- simulation inputs

@pytest.fixture(scope="module")
def sim_data():
    return make_ranking(n_queries=15, n_docs=(2, 8), random_state=1)


@pytest.mark.parametrize("kwargs, name", [
    (dict(n_passes=2.7), "n_passes"), (dict(n_passes="3"), "n_passes"), (dict(n_passes=0), "n_passes"),
    (dict(n_passes=np.nan), "n_passes"), (dict(n_passes=True), "n_passes"), (dict(n_passes=10**15), "n_passes"),
    (dict(relevance_threshold=np.nan), "relevance_threshold"),
    (dict(relevance_threshold=np.inf), "relevance_threshold"),
    (dict(relevance_threshold="1"), "relevance_threshold"),
    (dict(max_shown=2.5), "max_shown"), (dict(max_shown=0), "max_shown"), (dict(max_shown="5"), "max_shown"),
    (dict(random_state=1.5), "random_state"), (dict(random_state="seed"), "random_state"),
    (dict(random_state=-1), "random_state"), (dict(random_state=True), "random_state"),
    (dict(click_model="pbm"), "click_model"),
])
def test_simulate_clicks_bad_parameters_are_named(sim_data, kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        simulate_clicks(sim_data, sim_data.X[:, 0], **kwargs)


def test_simulate_clicks_integral_floats_and_huge_max_shown_are_exact(sim_data):
    scores = sim_data.X[:, 0]
    reference = simulate_clicks(sim_data, scores, n_passes=2, random_state=3)
    assert simulate_clicks(sim_data, scores, n_passes=2.0, random_state=3).equals(reference)
    assert simulate_clicks(sim_data, scores, n_passes=2, random_state=3, max_shown=2**70).equals(reference)


@pytest.mark.parametrize("scores, exc", [
    (lambda d: d.X[:, 0][:-1], ValueError), (lambda d: d.X[:, :2], ValueError),
    (lambda d: np.array(["a"] * d.n_docs), TypeError), (lambda d: d.X[:, 0] + 1j, TypeError),
    (lambda d: np.where(np.arange(d.n_docs) == 3, np.nan, 0.0), ValueError),
])
def test_simulate_clicks_bad_scores_are_named(sim_data, scores, exc):
    with pytest.raises(exc, match="scores"):
        simulate_clicks(sim_data, scores(sim_data), random_state=0)


@pytest.mark.parametrize("kwargs, name", [
    (dict(eta=np.nan), "eta"), (dict(eta=-1), "eta"), (dict(eta="1"), "eta"),
    (dict(eps_minus=np.inf), "eps_minus"), (dict(eps_minus=1.5), "eps_minus"), (dict(eps_plus="1"), "eps_plus"),
])
def test_click_model_bad_parameters_are_named(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        PositionBasedClickModel(**kwargs)


@pytest.mark.parametrize("call, name", [
    (lambda: make_ranking(n_queries=2.5), "n_queries"), (lambda: make_ranking(n_queries="10"), "n_queries"),
    (lambda: make_ranking(noise=np.nan), "noise"), (lambda: make_ranking(noise=np.inf), "noise"),
    (lambda: make_ranking(noise="1"), "noise"), (lambda: make_ranking(n_docs=(5,)), "n_docs"),
    (lambda: make_ranking(n_docs=(5, 7.5)), "n_docs"),
    (lambda: make_ranking(level_shares=(np.nan, 1, 1)), "level_shares"),
    (lambda: make_ranking(n_queries=2**70), "n_queries"), (lambda: make_ranking(random_state="x"), "random_state"),
    (lambda: make_separable_ranking(margin=np.nan), "margin"), (lambda: make_separable_ranking(n_docs=2.5), "n_docs"),
    (lambda: make_separable_ranking(random_state=0.5), "random_state"),
])
def test_synthetic_bad_parameters_are_named(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


@pytest.mark.parametrize("kwargs, name", [
    (dict(fraction=np.nan), "fraction"), (dict(fraction=0), "fraction"), (dict(fraction="0.1"), "fraction"),
    (dict(fraction=1.5), "fraction"), (dict(random_state="x"), "random_state"), (dict(C="1"), "C"),
])
def test_production_ranker_bad_parameters_are_named(sim_data, kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        train_production_ranker(sim_data, **kwargs)


def test_check_random_state():
    assert check_random_state(np.random.default_rng(1)).random() >= 0
    gen = np.random.default_rng(4)
    assert check_random_state(gen) is gen
    assert check_random_state(np.int64(3)).random() == np.random.default_rng(3).random()
    assert isinstance(check_random_state(np.random.RandomState(0)), np.random.Generator)
    for bad, exc in [(1.0, TypeError), ("1", TypeError), (True, TypeError), ([1, 2], TypeError), (-3, ValueError)]:
        with pytest.raises(exc, match="random_state"):
            check_random_state(bad)


_ANY_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.floats(allow_nan=True, allow_infinity=True),
                       st.sampled_from(["2", "", "nan"]), st.just([1, 2]))


def _mostly(valid):
    """Mostly valid values (so that whole valid calls happen), sometimes anything."""
    return st.integers(0, 5).flatmap(lambda branch: valid if branch else _ANY_VALUE)


@HYPO
@given(n_passes=_mostly(st.integers(1, 3) | st.just(2.0)), relevance_threshold=_mostly(st.floats(-1, 3)),
       max_shown=_mostly(st.none() | st.integers(1, 10)), eta=_mostly(st.floats(0, 3)),
       eps_minus=_mostly(st.floats(0, 1)), random_state=_mostly(st.none() | st.integers(0, 2**32)))
def test_random_simulation_parameters_clear_error_or_valid_log(sim_data, n_passes, relevance_threshold, max_shown,
                                                                eta, eps_minus, random_state):
    try:
        model = PositionBasedClickModel(eta=eta, eps_minus=eps_minus, eps_plus=1.0)
        log = simulate_clicks(sim_data, sim_data.X[:, 0], model, n_passes=n_passes, random_state=random_state,
                              relevance_threshold=relevance_threshold, max_shown=max_shown)
    except (ValueError, TypeError) as err:
        named = ("n_passes", "relevance_threshold", "max_shown", "eta", "eps_minus", "random_state")
        assert any(name in str(err) for name in named), str(err)
        event("error")
        return
    event("log")
    # a correct result: exactly n_passes passes of every query, top max_shown shown, clicks drawn
    # only where the model gives a positive probability
    passes = int(n_passes)
    assert log.n_sessions == passes * sim_data.n_queries
    shown = np.minimum(sim_data.query_lengths, sim_data.n_docs if max_shown is None else min(int(max_shown), sim_data.n_docs))
    np.testing.assert_array_equal(np.diff(log.session_offsets), np.tile(shown, passes))
    prob = model.click_probability(log.positions, sim_data.y[log.docs] >= relevance_threshold)
    assert np.all(np.isfinite(prob)) and not np.any(log.clicks & (prob == 0))


# ----------------------------------------------------------------------------- online loop

class _FixedLearner:
    """A learner whose rank() returns whatever ``make(n)`` builds: the loop must check it."""

    feedback_k = None

    def __init__(self, make):
        self.make = make

    def reset(self, n_features):
        return self

    def update(self, X, feedback):
        pass

    def rank(self, X):
        return self.make(len(X))

    def __repr__(self):
        return "FixedLearner"


@pytest.mark.parametrize("make, word", [
    (lambda n: np.zeros(n, dtype=int), "repeated"),
    (lambda n: np.arange(n - 1), "shape"),
    (lambda n: np.arange(1, n + 1), "outside"),
    (lambda n: -np.arange(1, n + 1), "outside"),
    (lambda n: np.arange(n) * 1.0, "integers"),
    (lambda n: np.arange(n)[None, :], "shape"),
    (lambda n: np.ones(n, dtype=bool), "integers"),
    (lambda n: None, "shape"),
])
def test_run_online_checks_every_ranking(sim_data, make, word):
    with pytest.raises(ValueError, match=word) as info:
        run_online(_FixedLearner(make), sim_data, T=3, random_state=0)
    message = str(info.value)
    assert "FixedLearner" in message and "round 0" in message and "query index" in message


def test_run_online_accepts_a_list_permutation(sim_data):
    res = run_online(_FixedLearner(lambda n: list(range(n))[::-1]), sim_data, T=4, random_state=0)
    assert res.n_rounds == 4 and np.all((res.ndcg >= 0) & (res.ndcg <= 1))


@pytest.mark.parametrize("kwargs, name", [
    (dict(T=2.5), "T"), (dict(T="3"), "T"), (dict(T=0), "T"), (dict(T=10**12), "T"),
    (dict(T=3, random_state="x"), "random_state"), (dict(T=3, relevance_threshold=np.nan), "relevance_threshold"),
])
def test_run_online_bad_parameters_are_named(sim_data, kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        run_online(RandomRanker(random_state=0), sim_data, **kwargs)


def test_run_online_refuses_a_non_learner(sim_data):
    with pytest.raises(TypeError, match="rank"):
        run_online(object(), sim_data, T=2)


# ----------------------------------------------------------------------------- evaluation

def test_ips_and_snips_refuse_a_log_without_clicks(sim_data):
    model = PositionBasedClickModel(eta=1.0, eps_minus=0.0, eps_plus=0.0)
    log = simulate_clicks(sim_data, sim_data.X[:, 0], model, n_passes=2, random_state=0)
    assert log.n_clicks == 0
    for estimate in (ips_estimate, snips_estimate):
        with pytest.raises(ValueError, match="no clicks"):
            estimate(log, sim_data.X[:, 0])


def test_validation_report_needs_rankers_and_metrics(sim_data):
    log = simulate_clicks(sim_data, sim_data.X[:, 0], n_passes=5, random_state=0)
    with pytest.raises(ValueError, match="rankers"):
        validation_report({}, log)
    with pytest.raises(ValueError, match="rankers"):
        validation_report([sim_data.X[:, 0]], log)
    with pytest.raises(ValueError, match="metrics"):
        validation_report({"a": sim_data.X[:, 0]}, log, metrics=())
    with pytest.raises(TypeError, match="scores"):
        ips_estimate(log, sim_data.X[:, 0] + 1j)
    with pytest.raises(ValueError, match="confidence"):
        ips_estimate(log, sim_data.X[:, 0], confidence=np.nan)


def test_other_silent_corners_are_errors(small):
    from counterfactual_ltr.evaluation import true_values
    from counterfactual_ltr.propensity import TabularPropensity, TrustBiasPropensity

    data, log = small
    with pytest.raises(ValueError, match="threshold"):
        data.relevance(np.nan)
    with pytest.raises(ValueError, match="relevance"):
        true_values(log, data.X[:, 0], np.full(data.n_docs, np.nan))
    with pytest.raises(TypeError, match="TabularPropensity"):
        TabularPropensity(["0.5"])
    with pytest.raises(TypeError, match="examination"):
        TrustBiasPropensity("a")
    with pytest.raises(ValueError, match="relevant"):
        PositionBasedClickModel().click_probability([1, 2], [np.nan, 1])
    with pytest.raises(ValueError, match="session_offsets"):
        ClickLog(data, [0], ["0", "1"], [0], [1])
    assert not log.equals(None) and log.equals(log)


def test_astronomical_whole_float_passes_is_a_clear_error(sim_data):
    """A whole-number float far beyond int64 (found by hypothesis) is refused by name, not an OverflowError."""
    with pytest.raises(ValueError, match="n_passes=.*too many for memory"):
        simulate_clicks(sim_data, sim_data.X[:, 0], n_passes=2.3e306)
