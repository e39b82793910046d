"""Every ``cltr`` command on a table of bad inputs: exit status 0 or 2, never a traceback.

Status 2 comes with exactly one line on stderr, ``cltr: error: ...``, naming the problem; status 0
means the input was acceptable after all (a warning may be printed). The table covers missing,
empty, binary, truncated and corrupted files of every kind the commands read (LETOR data, click
logs in Parquet and CSV, model files, propensity files), files of the wrong kind or of another
data set, bad option values (out of range, NaN, inf, text), and outputs that cannot be written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from click_sim import load_letor, make_ranking, simulate_clicks
from counterfactual_ltr.cli import main
from counterfactual_ltr.estimators import SVMPropRank
from counterfactual_ltr.files import write_click_log
from counterfactual_ltr.persistence import save_model

from conftest import REPO


def _letor(data, path):
    dump_svmlight_file(data.X, data.y, str(path), query_id=data.qid, zero_based=False)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Good files, and bad ones of every kind the commands read."""
    d = tmp_path_factory.mktemp("cltr_bad")
    rng = np.random.default_rng(0)
    _letor(make_ranking(n_queries=30, n_docs=(4, 8), n_features=4, random_state=1), d / "data.txt")
    _letor(make_ranking(n_queries=5, n_docs=(4, 8), n_features=4, random_state=2), d / "other.txt")
    data = load_letor(d / "data.txt")
    log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    write_click_log(log, d / "log.parquet")
    write_click_log(log, d / "log.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_model(SVMPropRank().fit(log), d / "model.npz")
    for name in ("empty.txt", "empty.parquet", "empty.csv", "empty.npz", "empty.json"):
        (d / name).write_bytes(b"")
    for name in ("garbage.parquet", "garbage.npz", "garbage.csv", "garbage.txt", "garbage.json"):
        (d / name).write_bytes(rng.integers(0, 256, 400, dtype=np.uint8).tobytes())
    for name in ("log.parquet", "model.npz"):
        raw = (d / name).read_bytes()
        (d / f"trunc_{name}").write_bytes(raw[: len(raw) // 2])
        flipped = bytearray(raw)
        flipped[len(raw) // 3] ^= 0x08
        (d / f"flip_{name}").write_bytes(bytes(flipped))
    frame = log.to_frame()
    frame.drop(columns="click").to_csv(d / "noclick.csv", index=False)
    frame.assign(click="yes").to_csv(d / "strclick.csv", index=False)
    frame.assign(doc=10**6).to_parquet(d / "fardoc.parquet", index=False)
    frame.assign(session=1).to_parquet(d / "onesession.parquet", index=False)
    frame.assign(logger=2**32).to_parquet(d / "bigcode.parquet", index=False)
    frame.assign(doc=frame["doc"].astype(float) + 0.5).to_csv(d / "halfdoc.csv", index=False)
    (d / "header.csv").write_text("session,qid,doc,position,click\n")
    (d / "dir.parquet").mkdir()
    (d / "adir").mkdir()
    (d / "p_bad.json").write_text('{"kind": "tabular", "values": [2]}')
    (d / "p_nest.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "p_list.json").write_text("[1, 2]")
    (d / "p_extra.json").write_text(json.dumps({"kind": "position_based", "eta": 1.0, "clips": 0.1}))
    (d / "bad.txt").write_text("1 qid:1 1:0.5\nnot-a-label qid:1 1:0.2\n")
    (d / "big_index.txt").write_text("1 qid:1 99999999:0.5\n")
    (d / "nan.txt").write_text("1 qid:1 1:nan 2:0.3\n0 qid:1 1:0.1 2:0.2\n")
    meta_model = np.load(d / "model.npz")
    entries = {k: meta_model[k] for k in meta_model.files}
    meta = json.loads(str(entries["__meta__"]))
    meta["state"]["predict"] = 1
    entries["__meta__"] = np.array(json.dumps(meta))
    np.savez(d / "shadow.npz", **entries)
    key = meta["state"]["coef_"]["__array__"]
    entries[key] = np.full_like(entries[key], np.nan)
    del meta["state"]["predict"]
    entries["__meta__"] = np.array(json.dumps(meta))
    np.savez(d / "nan_model.npz", **entries)
    _raw_files(d, data, log)
    return d


def _raw_files(d, data, log):
    """A raw log keyed by string ids, its feature table, and bad variants of both (issue 38)."""
    import pandas as pd

    frame = log.to_frame()
    raw = pd.DataFrame({"page": frame["session"], "q": "q" + frame["qid"].astype(str), "d": "d" + frame["doc"].astype(str),
                        "pos": frame["position"], "clicked": frame["click"].astype(int)})
    raw.to_csv(d / "raw.csv", index=False)
    table = pd.DataFrame(data.X, columns=[f"f{j}" for j in range(data.n_features)])
    table.insert(0, "q", [f"q{q}" for q in data.qid])
    table.insert(1, "d", [f"d{j}" for j in range(data.n_docs)])
    table.to_csv(d / "features.csv", index=False)
    raw.assign(q=frame["qid"], d=frame["doc"]).to_csv(d / "raw_int_ids.csv", index=False)
    raw.assign(pos=0).to_csv(d / "raw_pos0.csv", index=False)
    raw.assign(clicked="yes").to_csv(d / "raw_strclick.csv", index=False)
    pd.concat([raw.iloc[:1], raw]).to_csv(d / "raw_dup.csv", index=False)
    raw.drop(columns="pos").to_csv(d / "raw_nopos.csv", index=False)
    raw.iloc[:0].to_csv(d / "raw_header.csv", index=False)
    twice = raw.copy()
    twice.loc[1, "d"] = twice.loc[0, "d"]                 # page 0 shows its first document twice
    twice.to_csv(d / "raw_twice.csv", index=False)
    with_text = table.astype({"f1": object})
    with_text.loc[2, "f1"] = "abc"
    with_text.to_csv(d / "features_text.csv", index=False)
    pd.concat([table, table.iloc[:1]]).to_csv(d / "features_dup.csv", index=False)
    table.drop(columns="f2").to_csv(d / "features_nof2.csv", index=False)
    table.assign(d=np.arange(data.n_docs)).to_csv(d / "features_int_docs.csv", index=False)
    table.iloc[:0].to_csv(d / "features_header.csv", index=False)
    table.assign(f0=np.nan).to_csv(d / "features_nan.csv", index=False)


SIM = ("simulate", "data.txt", "-o", "x.parquet")
PROP = ("propensity", "log.parquet", "data.txt", "-o", "p.json", "--method", "em")
FIT = ("fit", "log.parquet", "data.txt", "-o", "m.npz")
EVAL = ("evaluate", "model.npz", "log.parquet", "data.txt", "-o", "r.md")
PRED = ("predict", "model.npz", "data.txt", "-o", "s.tsv")

BAD = [  # (arguments, a word the one-line message must hold)
    (("nonsense",), "no such command"), (("--bogus",), "no such option"), (("simulate",), "missing argument"),
    (SIM + ("--passes", "-1"), "--passes"), (SIM + ("--passes", "abc"), "--passes"), (SIM + ("--passes", "1e3"), "--passes"),
    (SIM + ("--passes", str(10**12)), "memory"), (SIM + ("--eta", "nan"), "eta"), (SIM + ("--eta", "inf"), "eta"),
    (SIM + ("--eta", "1e400"), "eta"), (SIM + ("--eps-plus", "nan"), "eps_plus"), (SIM + ("--max-shown", "0"), "--max-shown"),
    (SIM + ("--seed", "-5"), "random_state"), (SIM + ("--ranker", "garbage.npz"), "garbage.npz"),
    (SIM + ("--ranker", "flip_model.npz"), "flip_model.npz"), (SIM + ("--ranker", "trunc_model.npz"), "trunc_model.npz"),
    (SIM + ("--ranker", "data.txt"), "data.txt"), (SIM + ("--ranker", "shadow.npz"), "'predict'"),
    (SIM + ("--ranker", "nan_model.npz"), "coef_"), (SIM + ("--ranker", "missing.npz"), "does not exist"),
    (SIM + ("--intervention", "swap:nan"), "--intervention"), (SIM + ("--intervention", "shuffle:0"), "--intervention"),
    (SIM + ("--intervention", ""), "--intervention"),
    (("simulate", "data.txt", "-o", "x.txt"), "unknown click-log file type"),
    (("simulate", "data.txt", "-o", "nodir/x.parquet"), "does not exist"),
    (("simulate", "data.txt", "-o", "adir"), "is a directory"), (("simulate", "data.txt", "-o", "dir.parquet"), "directory"),
    (("simulate", "empty.txt", "-o", "x.parquet"), "empty.txt"), (("simulate", "garbage.txt", "-o", "x.parquet"), "garbage.txt"),
    (("simulate", "bad.txt", "-o", "x.parquet"), "line 2"), (("simulate", "missing.txt", "-o", "x.parquet"), "does not exist"),
    (("simulate", "adir", "-o", "x.parquet"), "directory"), (("simulate", "big_index.txt", "-o", "x.parquet"), "feature index"),
    (("simulate", "nan.txt", "-o", "x.parquet"), "nan"),
    (("propensity", "log.parquet", "data.txt", "-o", "p.json", "--method", "swap"), "swap"),
    (("propensity", "log.parquet", "data.txt", "-o", "p.json", "--method", "magic"), "--method"),
    (PROP + ("--max-position", "1"), "--max-position"), (PROP + ("--max-position", "500"), "position"),
    (PROP + ("--bootstrap", "-1"), "--bootstrap"),
    (("propensity", "log.parquet", "other.txt", "-o", "p.json", "--method", "em"), "log.parquet"),
    (("propensity", "log.parquet", "data.txt", "-o", "nodir/p.json", "--method", "em"), "does not exist"),
    (("propensity", "log.parquet", "data.txt", "-o", "adir", "--method", "em"), "directory"),
    (FIT + ("--C", "0"), "--C"), (FIT + ("--C", "nan"), "--C"), (FIT + ("--C", "1e400"), "--C"), (FIT + ("--C", ",,"), "--C"),
    (FIT + ("--C", "1e300"), "too large"), (FIT + ("--model", "slam", "--C", "1e12"), "too large"),
    (FIT + ("--alpha", "1"), "--alpha"), (FIT + ("--model", "deep", "--alpha", "-1"), "--alpha"),
    (FIT + ("--model", "deep", "--alpha", "nan"), "--alpha"), (FIT + ("--model", "deep", "--epochs", "0"), "--epochs"),
    (FIT + ("--model", "deep", "--hidden", "0"), "--hidden"), (FIT + ("--model", "deep", "--hidden", str(10**9)), "hidden"),
    (FIT + ("--cv", "0"), "--cv"), (FIT + ("--cv", "1000"), "--cv 1000 folds of queries need at least 1000 queries"), (FIT + ("--scoring", "ips-"), "--scoring"),
    (FIT + ("--scoring", "dcg"), "--scoring"), (FIT + ("--propensity", "-1"), "not a valid eta"),
    (FIT + ("--propensity", "nan"), "not a valid eta"), (FIT + ("--propensity", "inf"), "not a valid eta"),
    (FIT + ("--propensity", "garbage.json"), "garbage.json"), (FIT + ("--propensity", "empty.json"), "empty.json"),
    (FIT + ("--propensity", "p_bad.json"), "p_bad.json"), (FIT + ("--propensity", "p_nest.json"), "nested"),
    (FIT + ("--propensity", "p_list.json"), "JSON object"), (FIT + ("--propensity", "p_extra.json"), "clips"),
    (FIT + ("--propensity", "adir"), "neither a number"), (FIT + ("--scale", "magic"), "--scale"),
    (FIT + ("--seed", "x"), "--seed"), (("fit", "log.parquet", "data.txt", "-o", "nodir/m.npz"), "does not exist"),
    (("fit", "log.parquet", "data.txt", "-o", "adir"), "directory"),
    (("evaluate", "garbage.npz", "log.parquet", "data.txt", "-o", "r.md"), "garbage.npz"),
    (("evaluate", "flip_model.npz", "log.parquet", "data.txt", "-o", "r.md"), "flip_model.npz"),
    (("evaluate", "shadow.npz", "log.parquet", "data.txt", "-o", "r.md"), "shadow.npz"),
    (("evaluate", "empty.npz", "log.parquet", "data.txt", "-o", "r.md"), "empty.npz"),
    (("evaluate", "model.npz", "log.parquet", "data.txt", "-o", "r.pdf"), ".html"),
    (EVAL + ("--metrics", ","), "--metrics"), (EVAL + ("--metrics", "magic"), "magic"),
    (EVAL + ("--metrics", "prec@k"), "prec@k"), (EVAL + ("--confidence", "1"), "--confidence"),
    (EVAL + ("--confidence", "nan"), "confidence"), (EVAL + ("--propensity", "0.5abc"), "--propensity"),
    (("evaluate", "model.npz", "log.parquet", "data.txt", "-o", "nodir/r.md"), "does not exist"),
    (("predict", "model.npz", "other.txt", "-o", "s.tsv", "--bogus"), "--bogus"),
    (("predict", "flip_model.npz", "data.txt", "-o", "s.tsv"), "flip_model.npz"),
    (("predict", "nan_model.npz", "data.txt", "-o", "s.tsv"), "nan_model.npz"),
    (("predict", "model.npz", "big_index.txt", "-o", "s.tsv"), "big_index.txt"),
    (("predict", "model.npz", "empty.txt", "-o", "s.tsv"), "empty.txt"),
    (("predict", "model.npz", "data.txt", "-o", "nodir/s.tsv"), "does not exist"),
    (("predict", "model.npz", "data.txt", "-o", "adir"), "directory"),
    (("experiments", "nosuch"), "unknown experiment"), (("experiments", "table3", "--bogus"), "--bogus"),
]
# The newer surfaces (issue 38): raw logs joined with --features, --session, the tree options, cltr propensity's
# options on a raw log.
RAW = ("--query", "q", "--doc", "d", "--position", "pos", "--click", "clicked", "--session", "page")
RFIT = ("fit", "raw.csv", "--features", "features.csv", "-o", "m.npz", "--C", "1", "--cv", "2") + RAW
REVAL = ("evaluate", "model.npz", "raw.csv", "--features", "features.csv", "-o", "r.md") + RAW
RPROP = ("propensity", "raw.csv", "-o", "p.json", "--method", "pbm", "--max-position", "4") + RAW
TREE = ("fit", "log.parquet", "data.txt", "-o", "m.npz", "--model", "gbdt-propdcg", "--cv", "2", "--n-estimators", "2")
BAD += [
    (("fit", "raw_int_ids.csv", "--features", "features.csv", "-o", "m.npz") + RAW, "integers"),
    (("fit", "raw.csv", "--features", "features_int_docs.csv", "-o", "m.npz") + RAW, "strings"),
    (("fit", "raw.csv", "--features", "features_text.csv", "-o", "m.npz") + RAW, "features_text.csv"),
    (("fit", "raw.csv", "--features", "features_dup.csv", "-o", "m.npz") + RAW, "features_dup.csv"),
    (("fit", "raw.csv", "--features", "features_header.csv", "-o", "m.npz") + RAW, "features_header.csv"),
    (("fit", "raw.csv", "--features", "features_nan.csv", "-o", "m.npz") + RAW, "features_nan.csv"),
    (("fit", "raw.csv", "--features", "garbage.csv", "-o", "m.npz") + RAW, "garbage.csv"),
    (("fit", "raw.csv", "--features", "empty.csv", "-o", "m.npz") + RAW, "empty.csv"),
    (("fit", "raw.csv", "--features", "missing.csv", "-o", "m.npz") + RAW, "does not exist"),
    (("fit", "raw.csv", "--features", "features.csv", "-o", "m.npz", "--label", "nope") + RAW, "nope"),
    (("fit", "raw.csv", "--features", "features.csv", "-o", "m.npz") + RAW[:-2] + ("--session", "nope"), "nope"),
    (("fit", "raw.csv", "--features", "features.csv", "-o", "m.npz", "--query", "nope"), "nope"),
    (("fit", "raw.csv", "--features", "features.csv", "-o", "m.npz"), ""),
    (("evaluate", "model.npz", "raw.csv", "--features", "features_int_docs.csv", "-o", "r.md") + RAW, "strings"),
    (("evaluate", "model.npz", "raw_twice.csv", "--features", "features.csv", "-o", "r.md") + RAW, "twice"),
    (REVAL + ("--confidence", "2"), "confidence"),
    (("propensity", "raw_pos0.csv", "-o", "p.json", "--method", "pbm") + RAW, "pos"),
    (("propensity", "raw_strclick.csv", "-o", "p.json", "--method", "pbm") + RAW, "clicked"),
    (("propensity", "raw_nopos.csv", "-o", "p.json", "--method", "pbm") + RAW, "pos"),
    (("propensity", "raw_header.csv", "-o", "p.json", "--method", "pbm") + RAW, ""),
    (("propensity", "raw_dup.csv", "-o", "p.json", "--method", "pbm") + RAW, "raw_dup.csv"),
    (RPROP + ("--method", "em"), "features"), (RPROP + ("--holdout", "1"), "--holdout"),
    (RPROP + ("--holdout", "-0.5"), "--holdout"), (RPROP + ("--holdout", "nan"), "holdout"),
    (RPROP + ("--max-position", "0"), "--max-position"), (RPROP + ("--bootstrap", "-2"), "--bootstrap"),
    (RPROP + ("--method", "swap"), ""), (("propensity", "raw.csv", "-o", "p.json", "--method", "pbm") + RAW[:-2] + ("--session", "nope"), "nope"),
    (TREE + ("--min-child-samples", "0"), "--min-child-samples"), (TREE + ("--num-leaves", "1"), "--num-leaves"),
    (TREE + ("--learning-rate", "nan"), "--learning-rate"), (TREE + ("--learning-rate", "0"), "--learning-rate"),
    (TREE + ("--num-leaves", "2.5"), "--num-leaves"), (TREE + ("--n-estimators", "x"), "--n-estimators"),
    (TREE + ("--C", "1"), "--C"), (("fit", "log.parquet", "data.txt", "-o", "m.npz", "--n-estimators", "3"), "tree"),
]
# Every command that reads a log, on every bad log file.
BAD_LOGS = ["garbage.parquet", "trunc_log.parquet", "flip_log.parquet", "empty.parquet", "empty.csv", "header.csv",
            "garbage.csv", "noclick.csv", "strclick.csv", "fardoc.parquet", "onesession.parquet", "bigcode.parquet",
            "halfdoc.csv", "dir.parquet", "missing.parquet", "data.txt"]
for name in BAD_LOGS:
    BAD += [(("propensity", name, "data.txt", "-o", "p.json", "--method", "em"), ""),
            (("fit", name, "data.txt", "-o", "m.npz", "--C", "1", "--cv", "2"), ""),
            (("evaluate", "model.npz", name, "data.txt", "-o", "r.md"), "")]
for name in ("garbage.txt", "empty.txt", "bad.txt", "nan.txt", "missing.txt", "other.txt"):
    BAD += [(("predict", "model.npz", name, "-o", "s.tsv"), ""), (("fit", "log.parquet", name, "-o", "m.npz"), "")]


def _run(args, folder, capsys):
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            status = main([str(a) for a in args])
    finally:
        os.chdir(cwd)
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.mark.parametrize("args, needle", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_exits_0_or_2_with_one_line(args, needle, folder, capsys):
    status, out, err = _run(args, folder, capsys)
    assert "Traceback" not in out + err
    assert status in (0, 2), (status, err)
    if status == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("cltr: error:"), err
        assert needle.lower() in lines[0].lower(), lines[0]


@pytest.mark.parametrize("name", ["trunc_log.parquet", "flip_log.parquet", "fardoc.parquet", "onesession.parquet",
                                  "bigcode.parquet", "header.csv", "missing.parquet"])
def test_a_bad_log_is_never_accepted(name, folder, capsys):
    """These logs are wrong (or corrupted where it changes the content): status 2 naming the file, never 0."""
    status, _, err = _run(("evaluate", "model.npz", name, "data.txt", "-o", "r.md"), folder, capsys)
    assert status == 2 and name in err, err


@pytest.mark.parametrize("source", [("log.parquet", "data.txt"), ("raw.csv", "--features", "features.csv") + RAW])
def test_a_constant_tree_model_is_not_written(source, folder, capsys):
    """Trees of one leaf: exit 2 and the reason on the last line (the folds' warnings may come before)."""
    status, out, err = _run(("fit", *source, "-o", "const.npz", "--model", "gbdt-propdcg", "--cv", "2",
                             "--n-estimators", "2", "--min-child-samples", "100000"), folder, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in out + err and status == 2 and not (folder / "const.npz").exists()
    assert lines[-1].startswith("cltr: error: the fitted GBDTPropDCG ranks every document equal")
    assert "--min-child-samples" in lines[-1]


def test_cltr_alone_prints_its_usage(folder, capsys):
    status, out, err = _run((), folder, capsys)
    assert status == 2 and err == ""
    assert out.startswith("Usage: cltr") and "Commands:" in out and len(out.splitlines()) > 10


@pytest.mark.slow      # four Python processes importing the library: 10 s and more
def test_the_console_entry_point_exits_with_the_same_statuses(folder):
    """Through a real process (python -m counterfactual_ltr): statuses and stderr as in-process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    for args, status in [((), 2), (("predict", "shadow.npz", "data.txt", "-o", "s.tsv"), 2),
                         (("evaluate", "model.npz", "flip_log.parquet", "data.txt", "-o", "r.md"), None),
                         (("predict", "model.npz", "data.txt", "-o", "s.tsv"), 0)]:
        result = subprocess.run([sys.executable, "-m", "counterfactual_ltr", *args], cwd=folder, env=env,
                                capture_output=True, text=True, timeout=300)
        assert "Traceback" not in result.stderr, result.stderr
        assert result.returncode in (0, 2) if status is None else result.returncode == status, result.stderr


def test_cltr_propensity_keeps_the_estimate_fit_uses(folder, capsys, tmp_path):
    """The JSON of ``cltr propensity`` reads back as the estimate itself, its power-law tail included."""
    from click_sim import SwapIntervention
    from counterfactual_ltr.persistence import load_propensity
    from counterfactual_ltr.propensity import EstimatedPropensity, estimate_propensities

    data = load_letor(folder / "data.txt")
    log = simulate_clicks(data, data.X[:, 0], n_passes=200, random_state=4, intervention=SwapIntervention(0.5, 4))
    write_click_log(log, tmp_path / "swap.parquet")
    status, _, err = _run(("propensity", tmp_path / "swap.parquet", "data.txt", "--method", "swap", "--max-position",
                           "4", "--bootstrap", "10", "-o", tmp_path / "p.json"), folder, capsys)
    assert status == 0, err
    estimate = estimate_propensities(log, "swap", max_position=4, n_bootstrap=10, random_state=0)
    again = load_propensity(str(tmp_path / "p.json"))
    positions = np.arange(1, 1001)
    assert isinstance(again, EstimatedPropensity)
    np.testing.assert_array_equal(again(positions), estimate(positions))
