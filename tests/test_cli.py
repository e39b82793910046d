"""The ``cltr`` command: end to end through subprocesses, against the Python API; errors; every --help."""

import json
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import dump_svmlight_file

from click_sim import PositionBasedClickModel, load_letor, make_ranking, simulate_clicks, train_production_ranker
from counterfactual_ltr import ClickLog
from counterfactual_ltr.cli import MODELS, main
from counterfactual_ltr.evaluation import snips_estimate, ips_estimate
from counterfactual_ltr.files import read_click_log
from counterfactual_ltr.persistence import load_model

from conftest import REPO, mq2008_dir, requires_mq2008

COMMANDS = ("simulate", "propensity", "fit", "evaluate", "predict", "export", "experiments")


def cltr(*args, cwd):
    """Run ``python -m counterfactual_ltr.cli`` in a fresh process, the repository on the path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "counterfactual_ltr.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _write_letor(data, path):
    dump_svmlight_file(data.X, data.y, str(path), query_id=data.qid, zero_based=False)


@pytest.fixture(scope="module")
def synthetic_files(tmp_path_factory):
    """train/vali/test LETOR files of a synthetic data set (train gzipped)."""
    import gzip
    import shutil

    folder = tmp_path_factory.mktemp("cltr_synthetic")
    data = make_ranking(n_queries=150, n_docs=(5, 15), n_features=6, random_state=0)
    parts = {"train": np.arange(0, 80), "vali": np.arange(80, 115), "test": np.arange(115, 150)}
    for name, queries in parts.items():
        _write_letor(data.subset(queries), folder / f"{name}.txt")
    with open(folder / "train.txt", "rb") as src, gzip.open(folder / "train.txt.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    return folder


def _workflow(folder, train, vali, test, *, passes, grid, cv):
    """simulate -> fit (grid) -> evaluate -> predict through subprocesses; returns the output paths."""
    out = {"train_log": folder / "train_log.parquet", "vali_log": folder / "vali_log.csv",
           "model": folder / "model.npz", "report": folder / "report.json", "html": folder / "report.html",
           "scores": folder / "scores.tsv"}
    # The validation log and the HTML report are made in-process (same code, no interpreter start-up).
    assert main(["simulate", str(vali), "--passes", str(passes), "--seed", "4", "-o", str(out["vali_log"]), "-q"]) == 0
    steps = [
        ("simulate", train, "--passes", passes, "--eta", 1, "--eps-minus", 0.1, "--seed", 3, "-o", out["train_log"]),
        ("fit", out["train_log"], train, "--model", "svm-proprank", "--C", grid, "--cv", cv,
         "--scoring", "snips-dcg", "--scale", "standard", "-o", out["model"]),
        ("evaluate", out["model"], out["vali_log"], vali, "--metrics", "dcg,avg_rank", "-o", out["report"]),
        ("predict", out["model"], test, "-o", out["scores"]),
    ]
    for step in steps:
        result = cltr(*step, cwd=folder)
        assert result.returncode == 0, f"{step[0]} failed: {result.stderr}"
        assert "Traceback" not in result.stderr
        assert "it/s" not in result.stderr and "%|" not in result.stderr  # no progress bars off a terminal
        assert result.stdout.startswith(("wrote", "chose"))
    assert main(["evaluate", str(out["model"]), str(out["vali_log"]), str(vali), "-o", str(out["html"]), "-q"]) == 0
    return out


def _check_against_api(out, train, vali, test, *, passes, grid, cv):
    from sklearn.preprocessing import StandardScaler

    from counterfactual_ltr.cli import MAX_GRID_EXTENSIONS
    from counterfactual_ltr.estimators import SVMPropRank
    from counterfactual_ltr.model_selection import grid_search
    from counterfactual_ltr.evaluation import snips_scorer

    train_data, vali_data, test_data = load_letor(train), load_letor(vali), load_letor(test)
    click_model = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    # The logs are the ones the Python API simulates with the same seeds.
    expected = simulate_clicks(train_data, train_production_ranker(train_data, 0.01, random_state=3), click_model,
                               n_passes=passes, random_state=3)
    train_log = read_click_log(out["train_log"], train_data)
    assert train_log.equals(expected)
    vali_log = read_click_log(out["vali_log"], vali_data)
    assert vali_log.equals(simulate_clicks(vali_data, train_production_ranker(vali_data, 0.01, random_state=4),
                                           click_model, n_passes=passes, random_state=4))
    # The model is grid_search's choice (the grid extended at a binding edge), refitted on the whole log.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = grid_search(SVMPropRank(preprocessor=StandardScaler()), train_log, "C",
                               [float(c) for c in grid.split(",")], cv=cv, scoring=snips_scorer("dcg"),
                               scoring_name="snips-dcg", extend=True, max_extensions=MAX_GRID_EXTENSIONS)
    model = load_model(out["model"])
    assert isinstance(model, SVMPropRank) and model.C == expected.C == expected.selection_["chosen"]
    np.testing.assert_allclose(model.coef_, expected.coef_, rtol=1e-10, atol=1e-12)
    assert model.selection_ == expected.selection_   # the record of the search is in the model file
    # The report's numbers are the API's estimates.
    report = json.loads(out["report"].read_text())
    estimates = report["rankers"]["model"]
    for metric in ("dcg", "avg_rank"):
        snips = snips_estimate(vali_log, model, metric=metric)
        ips = ips_estimate(vali_log, model, metric=metric)
        assert estimates[metric]["snips"]["value"] == pytest.approx(snips.value, rel=1e-12)
        assert estimates[metric]["ips"]["ci_low"] == pytest.approx(ips.ci_low, rel=1e-12)
    html = out["html"].read_text()
    assert "<table" in html or "<pre>" in html
    assert "data:image/png;base64," in html
    # The scores are the loaded model's predictions, digit for digit.
    scores = pd.read_csv(out["scores"], sep="\t")
    assert list(scores.columns) == ["qid", "row", "score", "rank"]
    np.testing.assert_array_equal(scores["score"].to_numpy(), model.predict(test_data))
    np.testing.assert_array_equal(scores["qid"].to_numpy(), test_data.qid)
    from counterfactual_ltr.metrics import ranks

    np.testing.assert_array_equal(scores["rank"].to_numpy(), ranks(model.predict(test_data), qid=test_data.qid))


@pytest.mark.slow      # the CLI's whole workflow in processes: about 10 s
def test_workflow_on_synthetic_data(synthetic_files):
    folder = synthetic_files
    args = dict(passes=4, grid="0.1,10", cv=2)
    out = _workflow(folder, folder / "train.txt.gz", folder / "vali.txt", folder / "test.txt", **args)
    _check_against_api(out, folder / "train.txt.gz", folder / "vali.txt", folder / "test.txt", **args)


@requires_mq2008
@pytest.mark.slow
def test_workflow_on_mq2008(tmp_path):
    fold = mq2008_dir() / "Fold1"
    args = dict(passes=2, grid="1,100", cv=2)
    out = _workflow(tmp_path, fold / "train.txt", fold / "vali.txt", fold / "test.txt", **args)
    _check_against_api(out, fold / "train.txt", fold / "vali.txt", fold / "test.txt", **args)


# ----------------------------------------------------------------------------- help and errors

@pytest.mark.parametrize("command", (None,) + COMMANDS)
def test_every_help_works(command, capsys):
    args = ["--help"] if command is None else [command, "--help"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Usage:" in text
    if command is not None:
        assert "Example" in text and "cltr " + command in text


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    """A LETOR file, a log over it (Parquet and CSV) and a fitted model file, made in-process."""
    from counterfactual_ltr.estimators import SVMPropRank
    from counterfactual_ltr.files import write_click_log
    from counterfactual_ltr.persistence import save_model

    folder = tmp_path_factory.mktemp("cltr_small")
    data = make_ranking(n_queries=30, n_docs=(4, 8), n_features=4, random_state=1)
    _write_letor(data, folder / "data.txt")
    data = load_letor(folder / "data.txt")
    log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    write_click_log(log, folder / "log.parquet")
    write_click_log(log, folder / "log.csv")
    save_model(SVMPropRank().fit(log), folder / "model.npz")
    (folder / "bad.txt").write_text("1 qid:1 1:0.5\nnot-a-label qid:1 1:0.2\n")
    frame = log.to_frame().drop(columns="position")
    frame.to_csv(folder / "no_position.csv", index=False)
    (folder / "garbage.parquet").write_bytes(b"not parquet at all")
    with open(folder / "model.pkl", "wb") as fh:
        pickle.dump(SVMPropRank(), fh)
    (folder / "propensity.json").write_text(json.dumps({"kind": "position_based", "eta": 0.5}))
    (folder / "bad_propensity.json").write_text(json.dumps({"kind": "magic"}))
    # The same log raw (string query ids, document ids beyond 2**63) and its features keyed by those ids.
    raw = log.to_frame()
    raw = pd.DataFrame({"page": raw["session"], "q": "query-" + raw["qid"].astype(str),
                        "d": raw["doc"].astype(np.uint64) + np.uint64(2**63), "pos": raw["position"],
                        "clicked": raw["click"].astype(int)})
    raw.to_csv(folder / "raw.csv", index=False)
    raw.assign(pos=0).to_csv(folder / "raw_bad_position.csv", index=False)
    table = pd.DataFrame(data.X, columns=[f"f{j}" for j in range(data.n_features)])
    table.insert(0, "q", [f"query-{q}" for q in data.qid])
    table.insert(1, "d", np.arange(data.n_docs, dtype=np.uint64) + np.uint64(2**63))
    table.to_csv(folder / "features.csv", index=False)
    table.iloc[1:].to_csv(folder / "features_missing.csv", index=False)
    table.assign(extra=1.0).to_csv(folder / "features_extra.csv", index=False)
    table.to_csv(folder / "features_csv.parquet", index=False)
    return folder


def _bad(args, capsys, folder, expected):
    """The command exits with 2 and one line on stderr naming the problem, no traceback."""
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        status = main([str(a) for a in args])
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("cltr: error:"), err
    assert "Traceback" not in err
    assert expected.lower() in err.lower(), err


@pytest.mark.parametrize("args, expected", [
    (("predict", "missing.npz", "data.txt", "-o", "s.tsv"), "does not exist"),
    (("predict", "model.npz", "bad.txt", "-o", "s.tsv"), "line 2"),
    (("predict", "model.pkl", "data.txt", "-o", "s.tsv"), "not a counterfactual-ltr model file"),
    (("predict", "data.txt", "data.txt", "-o", "s.tsv"), "not a counterfactual-ltr model file"),
    (("fit", "log.parquet", "data.txt", "--C", "1,abc", "-o", "m.npz"), "--C"),
    (("fit", "log.parquet", "data.txt", "--C", "-1", "-o", "m.npz"), "out of range"),
    (("fit", "log.parquet", "data.txt", "--model", "svm-magic", "-o", "m.npz"), "--model"),
    (("fit", "log.parquet", "data.txt", "--scoring", "snips-magic", "-o", "m.npz"), "--scoring"),
    (("fit", "log.parquet", "data.txt", "--cv", "1", "-o", "m.npz"), "--cv"),
    (("fit", "log.parquet", "data.txt", "--propensity", "nowhere.json", "-o", "m.npz"), "--propensity"),
    (("fit", "log.parquet", "data.txt", "--propensity", "bad_propensity.json", "-o", "m.npz"), "magic"),
    (("fit", "log.parquet", "data.txt", "--model", "deep", "--C", "1", "-o", "m.npz"), "--alpha"),
    (("fit", "garbage.parquet", "data.txt", "-o", "m.npz"), "garbage.parquet"),
    (("fit", "no_position.csv", "data.txt", "-o", "m.npz"), "position"),
    (("fit", "data.txt", "data.txt", "-o", "m.npz"), "unknown click-log file type"),
    (("fit", "data.txt", "log.parquet", "-o", "m.npz"), "looks like a Parquet file, not a LETOR/SVMlight file: DATA "
                                                         "comes after LOG"),
    (("evaluate", "model.npz", "data.txt", "log.csv", "-o", "r.md"), "looks like a CSV file"),
    (("simulate", "data.txt", "--eta", "-1", "-o", "l.parquet"), "--eta"),
    (("simulate", "data.txt", "--passes", "0", "-o", "l.parquet"), "--passes"),
    (("simulate", "data.txt", "-o", "l.txt"), "unknown click-log file type"),
    (("evaluate", "model.npz", "log.csv", "data.txt", "-o", "r.pdf"), ".html"),
    (("evaluate", "model.npz", "log.csv", "data.txt", "--metrics", "magic", "-o", "r.md"), "magic"),
    (("experiments", "no_such_experiment"), "unknown experiment"),
    (("propensity", "raw.csv", "--method", "pbm", "--session", "page"), "no column 'query'"),
    (("propensity", "raw_bad_position.csv", "--method", "pbm", "--query", "q", "--doc", "d", "--position", "pos",
      "--click", "clicked"), "column 'pos'"),
    (("propensity", "raw.csv", "--method", "pbm", "--query", "q", "--doc", "d", "--position", "pos", "--click",
      "clicked", "--holdout", "1.5"), "--holdout"),
    (("propensity", "log.csv", "data.txt", "--method", "pbm", "--query", "q"), "without DATA"),
    (("fit", "raw.csv", "--query", "q", "--doc", "d", "--position", "pos", "--click", "clicked", "-o", "m.npz"),
     "give DATA"),
    (("fit", "raw.csv", "data.txt", "--features", "features.csv", "-o", "m.npz"), "not both"),
    (("fit", "raw.csv", "--features", "features_missing.csv", "--query", "q", "--doc", "d", "--position", "pos",
      "--click", "clicked", "--session", "page", "-o", "m.npz"), "have no features"),
    (("fit", "raw.csv", "--features", "features.csv", "--doc", "nope", "--query", "q", "-o", "m.npz"), "'nope'"),
    (("evaluate", "model.npz", "raw.csv", "--features", "features.csv", "--query", "q", "--doc", "d",
      "--position", "pos", "--click", "clicked", "--session", "page", "-o", "r.pdf"), ".html"),
])
def test_bad_input_exits_2_with_one_line(args, expected, small_files, capsys):
    _bad(args, capsys, small_files, expected)


RAW = ("--query", "q", "--doc", "d", "--position", "pos", "--click", "clicked", "--session", "page")


@pytest.mark.parametrize("args, expected", [
    (("fit", "raw.csv", "--features", "features_missing.csv", *RAW, "-o", "m.npz"),
     "give them features or use --missing drop-sessions or drop-rows"),
    (("fit", "raw.csv", "--features", "data.txt", *RAW, "-o", "m.npz"),
     "--features data.txt: this is a LETOR/SVMlight file, not a feature table keyed by ids"),
    (("fit", "raw.csv", "data.txt", "-o", "m.npz"), "raw.csv may be a raw log, keyed by query and document ids "
                                                    "rather than DATA's rows: give its feature table with --features"),
    (("propensity", "raw.csv", "data.txt", "--method", "pbm"), "raw.csv may be a raw log, keyed by query and "
     "document ids rather than DATA's rows: give it without DATA, its columns named with --query/--doc/"),
    (("fit", "raw.csv", "data.txt", *RAW, "-o", "m.npz"),
     "name a raw log's columns: a raw log takes its feature table as --features FILE, not DATA"),
    (("evaluate", "model.npz", "raw.csv", *RAW, "-o", "r.json"),
     "(a raw log, keyed by ids, takes its feature table as --features FILE instead of DATA)"),
    (("fit", "raw.csv", "--features", "features_csv.parquet", *RAW, "-o", "m.npz"),
     "it starts like a CSV file: if it is one, give it a .csv name"),
    (("predict", "model.npz", "--features", "features_extra.csv", "--query", "q", "--doc", "d", "-o", "s.tsv"),
     "the table has 5 feature columns (f0, f1, f2, f3, extra) and the model model.npz takes 4"),
    (("evaluate", "model.npz", "raw.csv", "--features", "features_extra.csv", *RAW, "-o", "r.json"),
     "the table has 5 feature columns (f0, f1, f2, f3, extra) and the model model takes 4"),
    (("fit", "log.parquet", "data.txt", "--C", "", "-o", "m.npz"), "--C: needs at least one value"),
    (("fit", "log.parquet", "data.txt", "--model", "deep", "--alpha", "", "-o", "m.npz"),
     "--alpha: needs at least one value"),
    (("fit", "log.parquet", "data.txt", "--model", "gbdt-propdcg", "--objective", "", "-o", "m.npz"),
     "--objective: '' is not one of propdcg, ips_lambdarank"),
    (("fit", "log.parquet", "data.txt", "--model", "gbdt-propdcg", "--num-leaves", "", "-o", "m.npz"),
     "--num-leaves: needs at least one value"),
    (("propensity", "log.parquet", "data.txt", "--method", "pbm", "--max-position", "50"), "lower --max-position"),
    (("predict", "model.npz", "features.csv", "-o", "s.tsv"), "is scored with 'cltr predict MODEL --features FILE'"),
    (("evaluate", "model.npz", "log.parquet", "data.txt", "--confidence", "0.9999", "-o", "r.json"),
     "2000 resamples of the queries (what cltr evaluate draws) are too few for a 99.99% BCa interval: at least "
     "20001 put one replicate beyond each end (fewer give the extreme replicates as its bounds); lower --confidence"),
    (("simulate", "features.csv", "-o", "l.parquet"), "takes no click log or feature table"),
    (("propensity", "data.txt", "log.csv", "--method", "pbm"), "e.g. 'cltr propensity LOG DATA', or give a raw log"),
])
def test_hints_are_in_the_command_lines_words(args, expected, small_files, capsys):
    """Each hint names what is wrong with the command line's own options, files and spelling."""
    if "gbdt-propdcg" in args:
        pytest.importorskip("lightgbm")
    _bad(args, capsys, small_files, expected)


@pytest.mark.parametrize("python, command, cli", [
    ("give them features or pass missing='drop_sessions' or 'drop_rows'", "fit",
     "give them features or use --missing drop-sessions or drop-rows"),
    ("nothing is left to join; use repeated='keep_first'", "evaluate", "nothing is left to join; use --repeated "
                                                                        "keep-first"),
    ("(repeated='drop_pages' or 'keep_first' drops such pages)", "fit", "(--repeated drop-pages or keep-first drops such pages)"),
    ("or repeated='raise'", "fit", "or --repeated error"),
    ("with_data(missing='drop_rows'): dropped 1 of 9", "fit", "--missing drop-rows: dropped 1 of 9"),
    ("lower max_position or use n_bootstrap=0", "propensity", "lower --max-position or use --bootstrap 0"),
    ("lower max_position or use n_bootstrap=0", "predict", "lower max_position or use n_bootstrap=0"),
    ("monotone=False fits better; random_state", "propensity", "--no-monotone fits better; --seed"),
    ("propagate_propensity=False", "evaluate", "--known-propensity"),
    ("raw.csv: the frame has no column 'query' (the query column); it has ['q']", "propensity",
     "raw.csv: the file has no column 'query' (the query column, named by --query COL); it has ['q']"),
    ("(20 or more), or baseline=None for each ranker's estimates alone", "evaluate", "(20 or more)"),
])
def test_python_spellings_become_the_command_lines(python, command, cli):
    from counterfactual_ltr.cli import _cli_spelling

    assert _cli_spelling(python, command) == cli


def test_missing_features_dropped_by_option_warn_in_the_command_lines_words(small_files, monkeypatch, capsys):
    """--missing drop-rows joins the rest, and the warning on stderr names the option as the command line spells it."""
    monkeypatch.chdir(small_files)
    with warnings.catch_warnings():        # printed as outside pytest: through warnings.formatwarning
        warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: sys.stderr.write(
            warnings.formatwarning(message, category, filename, lineno, line))
        assert main(["fit", "raw.csv", "--features", "features_missing.csv", *RAW, "--missing", "drop-rows", "--C",
                     "1", "--cv", "2", "-o", "m_missing_cli.npz"]) == 0
    err = capsys.readouterr().err
    assert "cltr: MissingFeaturesWarning: --missing drop-rows: dropped 3 of" in err, err


def test_swap_simulation_and_propensity_estimation_match_the_api(small_files, monkeypatch):
    """simulate --intervention swap, then propensity --method swap: the Python API's log and estimate."""
    from click_sim import SwapIntervention
    from counterfactual_ltr.propensity import estimate_propensities

    monkeypatch.chdir(small_files)
    assert main(["simulate", "data.txt", "--passes", "40", "--intervention", "swap:0.5:4", "--seed", "3",
                 "-o", "swap.parquet", "-q"]) == 0
    data = load_letor(small_files / "data.txt")
    production = train_production_ranker(data, fraction=0.01, random_state=3)
    expected = simulate_clicks(data, production, PositionBasedClickModel(), n_passes=40, random_state=3,
                               intervention=SwapIntervention(0.5, 4))
    log = ClickLog.read_parquet(small_files / "swap.parquet", data)
    assert log.equals(expected) and np.any(log.intervention > 0)
    assert main(["propensity", "swap.parquet", "data.txt", "--method", "swap", "--max-position", "4",
                 "--bootstrap", "20", "--seed", "1", "-o", "swap.json", "-q"]) == 0
    payload = json.loads((small_files / "swap.json").read_text())
    model = estimate_propensities(expected, "swap", max_position=4, n_bootstrap=20, random_state=1)
    np.testing.assert_allclose(payload["relative_"], model.relative_, rtol=1e-12)
    np.testing.assert_allclose(payload["lower_"], model.lower_, rtol=1e-12)
    assert payload["eta_"] == pytest.approx(model.eta_, rel=1e-12)
    assert main(["fit", "swap.parquet", "data.txt", "--C", "1", "--cv", "2", "--propensity", "swap.json", "-q",
                 "-o", "swap_model.npz"]) == 0
    fitted = load_model(small_files / "swap_model.npz")
    chosen = fitted.selection_["tempering"]["chosen"]          # an estimate with an interval: tempering chosen too
    assert fitted.selection_["tempering"]["strengths"] == [0.0, 0.5, 1.0]
    np.testing.assert_allclose(fitted.propensity([1, 2, 3, 4]), model.tempered(chosen)([1, 2, 3, 4]), rtol=1e-12)
    assert main(["fit", "swap.parquet", "data.txt", "--C", "1", "--cv", "2", "--propensity", "swap.json", "-q",
                 "--tempering", "0", "-o", "plain.npz"]) == 0
    plain = load_model(small_files / "plain.npz")
    np.testing.assert_allclose(plain.propensity([1, 2, 3, 4]), model([1, 2, 3, 4]), rtol=1e-12)
    assert "tempering" not in plain.selection_


@pytest.mark.parametrize("args, expected", [
    (("--tempering", "0.5"), "--tempering"),                                      # eta, not an estimate
    (("--tempering", "2", "--propensity", "swap.json"), "--tempering"),           # out of [0, 1]
    (("--tempering", "0.5", "--model", "svm-rank", "--propensity", "swap.json"), "--tempering"),
])
def test_bad_tempering_exits_2(args, expected, small_files, capsys):
    from counterfactual_ltr.persistence import propensity_to_dict
    from counterfactual_ltr.propensity import EstimatedPropensity

    if not (small_files / "swap.json").exists():      # an estimate with an interval, as cltr propensity writes
        estimate = EstimatedPropensity([1.0, 0.5, 0.33, 0.25], [1.0, 0.4, 0.2, 0.1], [1.0, 0.6, 0.5, 0.4],
                                       method="swap")
        (small_files / "swap.json").write_text(json.dumps({"propensity": propensity_to_dict(estimate)}))
    _bad(("fit", "log.parquet", "data.txt", "--C", "1", "--cv", "2", "-o", "t.npz") + args, capsys, small_files,
         expected)


@pytest.mark.parametrize("spec", ["swap", "swap:2", "swap:0.5:1", "shuffle:x", "magic:0.5"])
def test_bad_intervention_exits_2(spec, small_files, capsys):
    _bad(("simulate", "data.txt", "--intervention", spec, "-o", "l.parquet"), capsys, small_files, "--intervention")


def test_fit_reads_propensity_file_and_eta_alike(small_files, monkeypatch):
    """--propensity file.json and --propensity 0.5 give the same model; the default is eta = 1."""
    monkeypatch.chdir(small_files)
    common = ["fit", "log.parquet", "data.txt", "--C", "1", "--cv", "2", "--quiet"]
    assert main(common + ["--propensity", "propensity.json", "-o", "a.npz"]) == 0
    assert main(common + ["--propensity", "0.5", "-o", "b.npz"]) == 0
    assert main(common + ["-o", "c.npz"]) == 0
    a, b, c = (load_model(small_files / f"{n}.npz") for n in "abc")
    assert repr(a.propensity) == repr(b.propensity) == "PositionBasedPropensity(eta=0.5)"
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert repr(c.propensity) == "PositionBasedPropensity(eta=1.0)"
    assert not np.allclose(a.coef_, c.coef_)


def test_evaluate_markdown_names_every_model(small_files, monkeypatch):
    monkeypatch.chdir(small_files)
    assert main(["evaluate", "model.npz", "model.npz", "log.csv", "data.txt", "-o", "r.md", "-q"]) == 0
    text = (small_files / "r.md").read_text()
    assert text.startswith("# Offline evaluation: 2 candidates against the logging policy")
    assert "| logging policy (baseline) |" in text and "| model |" in text and "| dcg of clicks (SNIPS) |" in text


@pytest.mark.filterwarnings("ignore::UserWarning")  # SLAM on few clicks may give w = 0 (documented)
@pytest.mark.parametrize("model", sorted(MODELS))
def test_fit_builds_every_model(model, small_files, monkeypatch):
    monkeypatch.chdir(small_files)
    extra = {"deep": ["--alpha", "1e-6,1e-3", "--epochs", "2", "--hidden", "3"],
             "gbdt-propdcg": ["--n-estimators", "5,10", "--num-leaves", "4"]}.get(model, ["--C", "1,10"])
    assert main(["fit", "log.parquet", "data.txt", "--model", model, "--cv", "2", "--scale", "maxabs", "-q",
                 "-o", f"{model}.npz", *extra]) == 0
    loaded = load_model(small_files / f"{model}.npz")
    assert type(loaded).__name__ == MODELS[model]
    assert type(loaded.preprocessor_).__name__ == "MaxAbsScaler"
    data = load_letor(small_files / "data.txt")
    assert np.all(np.isfinite(loaded.predict(data)))


def test_propensity_command_writes_what_fit_reads(small_files, monkeypatch):
    """With an estimation function present, its result is written as JSON that --propensity reads back."""
    from types import SimpleNamespace

    from counterfactual_ltr import propensity
    from counterfactual_ltr.propensity import PositionBasedPropensity

    calls = []

    def fake_estimate(log, method, **options):
        calls.append((log.n_sessions, method))
        return SimpleNamespace(propensity_=PositionBasedPropensity(0.7), eta_=0.7,
                               intervals_=np.array([[1.0, 1.0], [0.55, 0.68]]))

    monkeypatch.setattr(propensity, "estimate_propensities", fake_estimate, raising=False)
    monkeypatch.chdir(small_files)
    assert main(["propensity", "log.csv", "data.txt", "--method", "swap", "-o", "est.json", "-q"]) == 0
    payload = json.loads((small_files / "est.json").read_text())
    assert calls == [(90, "swap")]
    assert payload["method"] == "swap" and payload["eta_"] == 0.7
    assert payload["intervals_"] == [[1.0, 1.0], [0.55, 0.68]]
    assert main(["fit", "log.csv", "data.txt", "--C", "1", "--cv", "2", "--propensity", "est.json", "-q",
                 "-o", "est_model.npz"]) == 0
    assert repr(load_model(small_files / "est_model.npz").propensity) == "PositionBasedPropensity(eta=0.7)"


def test_simulate_with_a_saved_logging_ranker(small_files, monkeypatch):
    """--ranker MODEL logs with that model: the same log as simulate_clicks with it in Python."""
    from counterfactual_ltr.persistence import save_model

    monkeypatch.chdir(small_files)
    data = load_letor(small_files / "data.txt")
    production = train_production_ranker(data, fraction=0.2, random_state=0)
    save_model(production, small_files / "production.npz")
    assert main(["simulate", "data.txt", "--ranker", "production.npz", "--passes", "2", "--eta", "0.5",
                 "--max-shown", "3", "--seed", "7", "-q", "-o", "logged.csv.gz"]) == 0
    expected = simulate_clicks(data, production, PositionBasedClickModel(eta=0.5), n_passes=2, random_state=7,
                               max_shown=3)
    assert read_click_log(small_files / "logged.csv.gz", data).equals(expected)


def test_experiments_found_without_importing_them():
    from counterfactual_ltr import cli as cli_module

    assert cli_module._experiments_folder() == REPO / "experiments"
    assert "table3" in cli_module._experiment_scripts(REPO / "experiments")


def test_experiments_missing_or_without_their_extra_is_one_line(small_files, capsys, monkeypatch):
    from counterfactual_ltr import cli as cli_module

    monkeypatch.setattr(cli_module, "EXPERIMENT_NEEDS", ("matplotlib", "no_such_module_for_cltr"))
    _bad(("experiments", "table3"), capsys, small_files, "pip install 'counterfactual-ltr[experiments]'")
    monkeypatch.setattr(cli_module, "_experiments_folder", lambda: None)
    _bad(("experiments", "table3"), capsys, small_files, "source checkout")


def test_experiments_extra_matches_pyproject():
    tomllib = pytest.importorskip("tomllib")
    from counterfactual_ltr.cli import EXPERIMENT_NEEDS

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["experiments"]
    assert sorted(r.split(">")[0].split("=")[0].split("[")[0] for r in extra) == sorted(EXPERIMENT_NEEDS)


def test_experiments_run_as_a_child_of_the_folder_found(tmp_path, monkeypatch):
    """The arguments and the exit status pass through, and the package found runs, not one in the current folder."""
    from counterfactual_ltr import cli as cli_module

    found = tmp_path / "found" / "experiments"
    decoy = tmp_path / "cwd" / "experiments"
    for folder, status in ((found, 3), (decoy, 4)):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "_cltr.py").write_text("")
        (folder / "demo_script.py").write_text("")
        (folder / "__main__.py").write_text(
            f"import pathlib, sys\npathlib.Path({str(tmp_path / 'argv.txt')!r}).write_text(' '.join(sys.argv[1:]))\n"
            f"sys.exit({status})\n")
    monkeypatch.setattr(cli_module, "_experiments_folder", lambda: found)
    monkeypatch.chdir(decoy.parent)
    assert main(["experiments", "demo_script", "--quick", "--out", "somewhere", "-q"]) == 3
    assert (tmp_path / "argv.txt").read_text() == "demo_script --quick --out somewhere --quiet"


def test_raw_log_commands_match_the_api(small_files, monkeypatch, capsys):
    """propensity on a raw log with --holdout prints the curve and perplexities; fit --features is the LETOR fit."""
    from counterfactual_ltr import ClickLog, RankingDataset, SVMPropRank
    from counterfactual_ltr.persistence import load_model

    monkeypatch.chdir(small_files)
    columns = ["--query", "q", "--doc", "d", "--position", "pos", "--click", "clicked", "--session", "page"]
    assert main(["propensity", "raw.csv", "--method", "pbm", "--max-position", "2", "--bootstrap", "0",
                 "--holdout", "0.3", "-o", "raw_pbm.json"] + columns) == 0
    out = capsys.readouterr().out
    assert "position  2:" in out and "held-out click perplexity" in out and "rank-only" in out
    payload = json.loads((small_files / "raw_pbm.json").read_text())
    assert set(payload["held_out_perplexity"]) == {"position-based", "position-based with the pbm estimate",
                                                   "rank-only", "document-only"}
    assert len(payload["support_"]) == 2
    assert main(["fit", "raw.csv", "--features", "features.csv", "--C", "1", "--cv", "2", "-q", "-o", "raw.npz"]
                + columns) == 0
    assert main(["fit", "log.parquet", "data.txt", "--C", "1", "--cv", "2", "-q", "-o", "letor.npz"]) == 0
    assert np.array_equal(load_model(small_files / "raw.npz").coef_, load_model(small_files / "letor.npz").coef_)
    assert main(["evaluate", "raw.npz", "raw.csv", "--features", "features.csv", "-q", "-o", "raw_report.json"]
                + columns) == 0


def _estimated_propensity_file(folder):
    """An estimate from another (drifting) log, written as `cltr propensity` writes it: it carries its replicates."""
    from click_sim.raw import simulate_raw_events
    from counterfactual_ltr import estimate_propensities
    from counterfactual_ltr.persistence import propensity_to_dict

    frame, _ = simulate_raw_events(800, n_queries=40, n_shown=8, drift=1.0, random_state=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimate_propensities(ClickLog.from_events(frame, session="session"), "harvest", max_position=8,
                                    n_bootstrap=30, random_state=0)
    (folder / "estimated.json").write_text(json.dumps({"propensity": propensity_to_dict(est)}))


@pytest.mark.parametrize("propensity, known", [(None, False), ("1", False), ("propensity.json", False),
                                               ("estimated.json", False), ("estimated.json", True)])
def test_evaluate_and_compare_rankers_give_the_same_numbers(small_files, monkeypatch, propensity, known):
    """One comparison, one set of numbers: the command line and the Python call on the same log and options."""
    from counterfactual_ltr import ClickLog, load_model
    from counterfactual_ltr.evaluation import compare_rankers
    from counterfactual_ltr.persistence import load_propensity

    monkeypatch.chdir(small_files)
    if propensity == "estimated.json":
        _estimated_propensity_file(small_files)
    extra = ([] if propensity is None else ["--propensity", propensity]) + (["--known-propensity"] if known else [])
    assert main(["evaluate", "model.npz", "log.parquet", "data.txt", "-o", "r.json", "--metrics", "dcg,avg_rank",
                 "-q", *extra]) == 0
    found = json.loads((small_files / "r.json").read_text())["comparisons"]
    data = load_letor(small_files / "data.txt")
    log = ClickLog.read_parquet(small_files / "log.parquet", data)
    prop = 1.0 if propensity == "1" else None if propensity is None else load_propensity(small_files / propensity)
    for metric in ("dcg", "avg_rank"):
        c = compare_rankers(log, load_model(small_files / "model.npz"), baseline="logging", metric=metric,
                            propensity=prop, random_state=0, propagate_propensity=not known,
                            value="relevance" if found[metric]["model"]["value"] == "relevance" else None)
        cli = found[metric]["model"]
        assert cli["verdict"] == c.verdict and cli["reasons"] == list(c.reasons)
        for key in ("difference", "ci_low", "ci_high", "p_value", "lower_bound", "stderr"):
            assert cli[key] == pytest.approx(getattr(c, key), rel=1e-12, abs=1e-15), (metric, key)
        assert cli["propensity_uncertainty"] == c.propensity_uncertainty
        if propensity == "estimated.json":
            assert c.propensity_uncertainty.startswith("treated as known" if known else "propensity drawn from its "
                                                       "replicates on its own log")


def test_predict_scores_a_feature_table_by_id(small_files, monkeypatch):
    from counterfactual_ltr import load_model

    monkeypatch.chdir(small_files)
    assert main(["predict", "model.npz", "--features", "features.csv", "--query", "q", "--doc", "d",
                 "-o", "by_id.tsv", "-q"]) == 0
    assert main(["predict", "model.npz", "data.txt", "-o", "by_row.tsv", "-q"]) == 0
    by_id = pd.read_csv(small_files / "by_id.tsv", sep="\t", dtype={"q": str, "d": str})
    by_row = pd.read_csv(small_files / "by_row.tsv", sep="\t")
    assert list(by_id.columns) == ["q", "d", "score", "rank"]
    table = pd.read_csv(small_files / "features.csv", dtype={"q": str, "d": str})
    assert by_id["q"].tolist() == table["q"].tolist() and by_id["d"].tolist() == table["d"].tolist()
    np.testing.assert_array_equal(by_id["score"], by_row["score"])         # the same rows, the same model
    np.testing.assert_array_equal(by_id["rank"], by_row["rank"])
    assert load_model(small_files / "model.npz") is not None


def test_predict_needs_data_or_features(small_files, capsys):
    _bad(("predict", "model.npz", "-o", "s.tsv"), capsys, small_files, "give DATA")
    _bad(("predict", "model.npz", "data.txt", "--features", "features.csv", "-o", "s.tsv"), capsys, small_files,
         "not both")


def test_pages_showing_a_document_twice_are_dropped_kept_first_or_refused(small_files, monkeypatch, capsys):
    monkeypatch.chdir(small_files)
    raw = pd.read_csv(small_files / "raw.csv", dtype={"q": str, "d": str})
    first = raw["page"].iloc[0]
    page = raw[raw["page"] == first]
    repeat = page.iloc[[0]].assign(pos=page["pos"].max() + 1)
    pd.concat([raw, repeat]).sort_values(["page", "pos"], kind="stable").to_csv("raw_repeat.csv", index=False)
    args = ["fit", "raw_repeat.csv", "--features", "features.csv", "--query", "q", "--doc", "d", "--position", "pos",
            "--click", "clicked", "--session", "page", "--C", "1", "-o", "m_rep.npz"]
    with pytest.warns(UserWarning, match=r"1 of \d+ pages show a document twice \(page .*\): dropped those 1 pages"):
        assert main(args) == 0
    with pytest.warns(UserWarning, match="kept each document's first showing"):
        assert main(args + ["--repeated", "keep-first"]) == 0
    _bad(args + ["--repeated", "error"], capsys, small_files, "use --repeated drop-pages or keep-first")


def test_quiet_silences_warnings_for_its_run_only(small_files, monkeypatch, capsys):
    """-q: no warnings on stderr; the warning filters are restored after the command."""
    monkeypatch.chdir(small_files)
    raw = pd.read_csv(small_files / "raw.csv", dtype={"q": str, "d": str})
    page = raw[raw["page"] == raw["page"].iloc[0]]
    repeat = page.iloc[[0]].assign(pos=page["pos"].max() + 1)        # a page that shows a document twice
    pd.concat([raw, repeat]).sort_values(["page", "pos"], kind="stable").to_csv("raw_quiet.csv", index=False)
    args = ["fit", "raw_quiet.csv", "--features", "features.csv", "--query", "q", "--doc", "d", "--position", "pos",
            "--click", "clicked", "--session", "page", "--C", "1", "-o", "m_quiet.npz"]
    with pytest.warns(UserWarning, match="show a document twice"):
        assert main(args) == 0
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        filters = list(warnings.filters)
        assert main(args + ["-q"]) == 0
        assert warnings.filters == filters                # restored after the command
    quiet = capsys.readouterr()
    assert caught == [] and quiet.err == "" and quiet.out == ""


def test_features_command_writes_the_impression_table(small_files, monkeypatch):
    """cltr features equals impression_features on the same frames; a missing column exits 2 naming it."""
    from counterfactual_ltr.logs import impression_features

    monkeypatch.chdir(small_files)
    assert main(["features", "raw.csv", "--query", "q", "--doc", "d", "--position", "pos", "--session", "page",
                 "-o", "impressions.csv", "-q"]) == 0
    written = pd.read_csv(small_files / "impressions.csv", dtype={"q": str, "d": str})
    expected = impression_features(pd.read_csv(small_files / "raw.csv", dtype={"q": str, "d": str}), query="q",
                                   doc="d", position="pos", page="page")
    pd.testing.assert_frame_equal(written, expected, check_dtype=False)
    assert (written["log_shown"] > 0).all() and written["page_share"].between(0, 1).all()


def test_features_command_refuses_a_log_without_the_columns(small_files, capsys):
    _bad(("features", "raw.csv", "--session", "page", "-o", "f.csv"), capsys, small_files, "'query'")
