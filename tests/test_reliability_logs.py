"""Log files and the streamed aggregate: corruption is detected, ids do not wrap, sessions are checked on every path.

* Integrity: single-bit flips of logs written by every writer (``to_parquet``, ``write_click_log`` as
  ``cltr simulate`` uses it, Parquet and CSV, the partitioned simulation), anywhere in the file and
  in the Parquet footer, are detected or read back identical, by every reader; files without a
  digest (a user's own) still load; an edited CSV is refused until its digest file is removed.
  ``experiments/bench_log_integrity.py`` runs the same with 1,000 flips per writer.
* Ids and codes are checked against the type they are stored in.
* ``aggregate_clicks`` refuses what ``ClickLog.from_frame`` refuses (the same session checks,
  property-tested on mutated frames written to files in pieces) and reads the same file endings.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from click_sim import make_ranking, simulate_clicks
from click_sim.partitioned import simulate_clicks_partitioned
from counterfactual_ltr import ClickLog, aggregate_clicks
from counterfactual_ltr.files import read_click_log, write_click_log
from counterfactual_ltr.log_integrity import DIGEST_KEY, content_digest


@pytest.fixture(scope="module")
def data():
    return make_ranking(n_queries=25, n_docs=(3, 9), random_state=7)


@pytest.fixture(scope="module")
def log(data):
    from click_sim import SwapIntervention

    return simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=2,
                           intervention=SwapIntervention(0.3, max_position=3))


# ----------------------------------------------------------------------------- bit flips

def _flip_outcomes(raw: bytes, target, read, expected, positions, rng) -> dict:
    """Flip one random bit at each of ``positions``; count detected / identical / different reads."""
    counts = {"detected": 0, "identical": 0, "different": 0}
    for where in positions:
        bad = bytearray(raw)
        bad[where] ^= 1 << int(rng.integers(8))
        target.write_bytes(bytes(bad))
        try:
            back = read(target)
        except ValueError as err:
            assert str(target) in str(err) or target.name in str(err), err
            counts["detected"] += 1
            continue
        counts["identical" if expected(back) else "different"] += 1
    return counts


WRITERS = {
    "to_parquet": ("log.parquet", lambda log, p: log.to_parquet(p)),
    "write_click_log parquet": ("log.parquet", lambda log, p: write_click_log(log, p)),
    "write_click_log csv": ("log.csv", lambda log, p: write_click_log(log, p)),
    "write_click_log csv.gz": ("log.csv.gz", lambda log, p: write_click_log(log, p)),
}


def _readers(data, log):
    return {
        "read_click_log": (lambda p: read_click_log(p, data), lambda back: back.equals(log)),
        "aggregate_clicks": (lambda p: aggregate_clicks(p, data), lambda back: back.equals(log.aggregate())),
    }


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_single_bit_flips_are_detected_or_harmless(writer, data, log, tmp_path):
    name, write = WRITERS[writer]
    path = tmp_path / name
    write(log, path)
    raw = path.read_bytes()
    target = tmp_path / ("corrupt_" + name)
    if name.startswith("log.csv"):
        (tmp_path / (target.name + ".digest")).write_bytes((tmp_path / (name + ".digest")).read_bytes())
    rng = np.random.default_rng(abs(hash(writer)) % 2**32)
    readers = _readers(data, log)
    if writer == "to_parquet":
        readers["read_parquet"] = (lambda p: ClickLog.read_parquet(p, data), lambda back: back.equals(log))
    for reader, (read, same) in readers.items():
        counts = _flip_outcomes(raw, target, read, same, rng.integers(len(raw), size=60), rng)
        assert counts["different"] == 0, (writer, reader, counts)
        assert counts["detected"] > 0, (writer, reader, counts)


def test_flips_in_the_parquet_footer_are_detected_or_harmless(data, log, tmp_path):
    """The footer (schema, offsets, statistics, the digest itself) is outside every page checksum."""
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    raw = path.read_bytes()
    footer = struct.unpack("<i", raw[-8:-4])[0]
    rng = np.random.default_rng(5)
    positions = rng.integers(len(raw) - 8 - footer, len(raw), size=250)
    counts = _flip_outcomes(raw, tmp_path / "c.parquet", lambda p: ClickLog.read_parquet(p, data),
                            lambda back: back.equals(log), positions, rng)
    assert counts["different"] == 0 and counts["detected"] > 100, counts


def test_partitioned_simulation_files_carry_the_digest(data, tmp_path):
    files = simulate_clicks_partitioned(data, data.X[:, 1], n_passes=4, random_state=3, path=tmp_path / "sim",
                                        passes_per_partition=2, engine="serial")
    import pyarrow.parquet as pq

    for f in files:
        assert DIGEST_KEY in pq.ParquetFile(f).schema_arrow.metadata
    raw = open(files[0], "rb").read()
    bad = bytearray(raw)
    bad[len(raw) // 2] ^= 0x10
    open(files[0], "wb").write(bytes(bad))
    with pytest.raises(ValueError, match="part-00000"):
        aggregate_clicks(tmp_path / "sim", data)
    with pytest.raises(ValueError, match="part-00000"):
        ClickLog.read_parquet(tmp_path / "sim", data)


def test_a_changed_value_behind_intact_pages_is_caught_by_the_digest(data, log, tmp_path):
    """A file rewritten with one value changed but the old digest kept: page checksums pass, the digest does not."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    table = pq.read_table(path)
    frame = table.to_pandas()
    frame.loc[3, "click"] = not frame.loc[3, "click"]
    forged = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(table.schema.metadata)
    pq.write_table(forged, path, write_page_checksum=True)
    for read in (lambda: read_click_log(path, data), lambda: aggregate_clicks(path, data),
                 lambda: ClickLog.read_parquet(path, data)):
        with pytest.raises(ValueError, match=r"log\.parquet.*'click' does not match its digest"):
            read()


def test_files_without_a_digest_still_load(data, log, tmp_path):
    """Users bring their own files: a pandas-written Parquet or CSV file (no digest) is read as it is."""
    frame = log.to_frame()
    frame.to_parquet(tmp_path / "mine.parquet", index=False)
    frame.to_csv(tmp_path / "mine.csv", index=False)
    for name in ("mine.parquet", "mine.csv"):
        assert read_click_log(tmp_path / name, data).equals(log)
        assert aggregate_clicks(tmp_path / name, data).equals(log.aggregate())


def test_an_edited_csv_is_refused_until_its_digest_file_goes(data, log, tmp_path):
    path = tmp_path / "log.csv"
    write_click_log(log, path)
    text = path.read_text().splitlines()
    fields = text[5].split(",")
    fields[4] = "False" if fields[4] == "True" else "True"          # the click of one row
    text[5] = ",".join(fields)
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(ValueError, match=r"log\.csv.*digest"):
        read_click_log(path, data)
    (tmp_path / "log.csv.digest").unlink()
    assert read_click_log(path, data).n_clicks != log.n_clicks
    write_click_log(log, path)                                       # writing again gives a matching digest
    assert read_click_log(path, data).equals(log)
    log.to_frame().to_csv(path, index=False)                         # another tool rewrites it: same values, ok
    assert read_click_log(path, data).equals(log)


@pytest.mark.parametrize("digest", ['{"format": 1}', "not json", json.dumps({"format": "counterfactual-ltr log digest",
                                                                             "version": 1, "rows": 3, "columns": {}})])
def test_a_malformed_or_wrong_digest_is_an_error_naming_the_file(digest, data, log, tmp_path):
    import pyarrow.parquet as pq

    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({DIGEST_KEY: digest}), path)
    with pytest.raises(ValueError, match=r"log\.parquet"):
        ClickLog.read_parquet(path, data)


def test_content_digest_changes_with_any_value():
    frame = pd.DataFrame({"doc": np.arange(100), "click": np.zeros(100, bool)})
    base = content_digest(frame)
    for column in ("doc", "click"):
        changed = frame.copy()
        changed.loc[57, column] = True if column == "click" else 999
        assert content_digest(changed)["columns"][column] != base["columns"][column]


# ----------------------------------------------------------------------------- ids and codes

@pytest.mark.parametrize("column, value, needle", [
    ("logger", 2**32, "int32"),
    ("logger", 2**31, "int32"),
    ("logger", -1, ">= 0"),
    ("intervention", 2**32 + 2, "int32"),
    ("intervention", -(2**32) - 3, "int32"),
    ("intervention", 1, "does not fit"),
    ("intervention", 99, "does not fit"),
])
def test_ids_and_codes_are_checked_against_their_type(column, value, needle, data, log, tmp_path):
    """Logger ids 0 and 2**32 must not become one logger; code 2**32 + 2 must not become a swap with position 2."""
    frame = log.to_frame()
    frame[column] = np.where(frame["session"] == frame["session"].iloc[-1], value, 0).astype(np.int64)
    with pytest.raises(ValueError, match=needle):
        ClickLog.from_frame(frame, data)
    frame.to_parquet(tmp_path / "log.parquet", index=False)
    with pytest.raises(ValueError, match=needle):
        aggregate_clicks(tmp_path / "log.parquet", data)
    kwargs = {column: frame.groupby("session")[column].first().to_numpy()}
    with pytest.raises(ValueError, match=needle):
        ClickLog(data, log.session_query, log.session_offsets, log.docs, log.clicks, **kwargs)


def test_large_ids_that_fit_are_kept(data, log):
    frame = log.to_frame()
    frame["session"] += 2**40
    frame["logger"] = 2**31 - 1
    back = ClickLog.from_frame(frame, data)
    assert back.session_ids.min() == 2**40 and back.logger.max() == 2**31 - 1


# ----------------------------------------------------------------------------- the streamed aggregate

def _session_rows(frame, k):
    return frame[frame["session"] == frame["session"].unique()[k]]


MUTATIONS = {
    "duplicated session": lambda f, rng: pd.concat([f, _session_rows(f, 3)], ignore_index=True),
    "positions from 2": lambda f, rng: f.assign(position=f["position"] + 1),
    "one session from 2": lambda f, rng: f.assign(position=np.where(f["session"] == f["session"].iloc[0],
                                                                    f["position"] + 1, f["position"])),
    "gap": lambda f, rng: f.drop(index=f.index[(f["position"] == 2)][:1]),
    "row shown twice": lambda f, rng: f.assign(doc=np.where((f["position"] == 2) & (f["session"] == f["session"].iloc[0]),
                                                            f["doc"].iloc[0], f["doc"])),
    "mixed queries": lambda f, rng: f.assign(session=np.where(f["session"] == f["session"].iloc[-1],
                                                              f["session"].iloc[0], f["session"])),
    "logger varies": lambda f, rng: f.assign(logger=np.arange(len(f)) % 2),
    "fine": lambda f, rng: f,
    "fine, shuffled": lambda f, rng: f.sample(frac=1.0, random_state=int(rng.integers(1000))),
}


def _aggregate_or_error(source, data, **kwargs):
    try:
        return aggregate_clicks(source, data, **kwargs)
    except ValueError as err:
        return err


def _write_pieces(frame, folder, n_files, suffix, rng):
    folder.mkdir()
    cuts = np.sort(rng.choice(np.arange(1, len(frame)), size=n_files - 1, replace=False)) if n_files > 1 else []
    for k, part in enumerate(np.split(np.arange(len(frame)), cuts)):
        piece = frame.iloc[part]
        path = folder / f"part-{k:03d}{suffix}"
        piece.to_csv(path, index=False) if suffix.startswith(".csv") else piece.to_parquet(path, index=False)
    return folder


@pytest.mark.slow      # 40 examples, some on Dask and in batches of 5 rows: 6 s and more
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=st.sampled_from(sorted(MUTATIONS)), n_files=st.integers(1, 4), batch_size=st.integers(5, 400),
       suffix=st.sampled_from([".parquet", ".pq", ".csv"]), engine=st.sampled_from(["pyarrow", "dask"]),
       seed=st.integers(0, 10**6))
def test_the_streamed_aggregate_refuses_what_from_frame_refuses(mutation, n_files, batch_size, suffix, engine,
                                                                seed, data, log, tmp_path_factory):
    """The same frame, in memory and written in pieces: both paths refuse it, or give the same aggregate."""
    rng = np.random.default_rng(seed)
    frame = MUTATIONS[mutation](log.to_frame(), rng).reset_index(drop=True)
    try:
        expected = ClickLog.from_frame(frame, data).aggregate()
    except ValueError:
        expected = None
    folder = _write_pieces(frame, tmp_path_factory.mktemp("pieces") / "log", n_files, suffix, rng)
    got = _aggregate_or_error(folder, data, batch_size=batch_size, engine=engine)
    if expected is None:
        assert isinstance(got, ValueError), (mutation, got)
    else:
        assert not isinstance(got, ValueError), (mutation, got)
        assert got.equals(expected) and got.n_sessions == log.n_sessions


def test_a_log_folder_is_read_with_exactly_the_readers_endings(data, log, tmp_path):
    frame = log.to_frame()
    first, second = frame[frame["session"] < 30], frame[frame["session"] >= 30]
    (tmp_path / "pq").mkdir()
    first.to_parquet(tmp_path / "pq" / "a.pq", index=False)
    second.to_parquet(tmp_path / "pq" / "b.pq", index=False)
    assert aggregate_clicks(tmp_path / "pq", data).equals(log.aggregate())       # not "no Parquet files"
    (tmp_path / "mixed").mkdir()
    first.to_parquet(tmp_path / "mixed" / "a.parquet", index=False)
    write_click_log(ClickLog.from_frame(second, data), tmp_path / "mixed" / "b.csv.gz")
    (tmp_path / "mixed" / "_SUCCESS").write_text("")                            # bookkeeping of other tools
    assert aggregate_clicks(tmp_path / "mixed", data).equals(log.aggregate())
    (tmp_path / "mixed" / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match=r"notes\.txt: not a log file"):
        aggregate_clicks(tmp_path / "mixed", data)
    with pytest.raises(ValueError, match="unknown click-log file type"):
        aggregate_clicks([tmp_path / "mixed" / "notes.txt"], data)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no Parquet or CSV files"):
        aggregate_clicks(tmp_path / "empty", data)
    with pytest.raises(ValueError, match="session"):
        frame.drop(columns="session").to_parquet(tmp_path / "nosession.parquet", index=False)
        aggregate_clicks(tmp_path / "nosession.parquet", data)


def test_duplicated_files_are_not_counted_twice(data, log, tmp_path):
    log.to_parquet(tmp_path / "a.parquet")
    with pytest.raises(ValueError, match="positions must run 1..n"):
        aggregate_clicks([tmp_path / "a.parquet", tmp_path / "a.parquet"], data)
    (tmp_path / "copy").mkdir()
    log.to_parquet(tmp_path / "copy" / "a.parquet")
    log.to_parquet(tmp_path / "copy" / "b.parquet")
    with pytest.raises(ValueError, match="positions must run 1..n"):
        aggregate_clicks(tmp_path / "copy", data, engine="dask")


def test_the_integrity_benchmark_holds_with_fewer_flips(capsys):
    """experiments/bench_log_integrity.py with 100 + 100 flips per file (its full run takes 1,000 + 1,000)."""
    from experiments import bench_log_integrity

    results = bench_log_integrity.main(["--quick", "--seed", "3"])
    assert len(results) == 8
    assert all(c["different"] == 0 for c in results.values()), results
    assert all(c["detected"] > 0 for c in results.values()), results
    assert "holds" in capsys.readouterr().out


@pytest.mark.parametrize("column, value, needle", [
    ("clicks", [0.5], "clicks"), ("docs", [0.7], "docs"), ("impressions", [np.nan], "impressions"),
    ("positions", [2**40], "position"), ("positions", [0], "position"), ("docs", ["a"], "docs"),
    ("impressions", [2**63 + 5], "impressions"), ("clicks", [3], "more clicks than impressions"),
])
def test_a_count_table_holds_whole_counts_in_range(column, value, needle, data):
    """ClickAggregate.from_table: 2.7 clicks or position 2**40 are errors, not truncated or wrapped counts."""
    from counterfactual_ltr.aggregate import ClickAggregate

    table = {"docs": [0], "positions": [1], "clicks": [1], "impressions": [2]} | {column: value}
    with pytest.raises(ValueError, match=needle):
        ClickAggregate.from_table(data, table["docs"], table["positions"], table["clicks"], table["impressions"], 1)
    with pytest.raises(ValueError, match="n_sessions"):
        ClickAggregate.from_table(data, [0], [1], [1], [2], 2.5)
