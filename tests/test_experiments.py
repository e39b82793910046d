"""Every reproduction script runs in --quick mode and writes its JSON (and PNG) with the expected fields."""

import json

import pytest

from experiments.__main__ import scripts

from conftest import REPO, requires_mq2008

# Scripts that need the shared MQ2008 data; the others make their own data.
SYNTHETIC_ONLY = {"slam_fig1_separable", "report_screenshot"}   # report_screenshot: --quick is synthetic


# Top-level result fields each script must write (what its figure or table is made of).
EXPECTED_FIELDS = {
    "table3": {"rows", "paired", "clicks", "share_of_ndcg10_gap_closed", "snips_C_within_one_step_of_test_best",
               "test_avg_dcg_lost_by_snips_choice", "runs", "paper_avg_dcg_letor"},
    "fig23_learning_curve": {"x", "summary", "paired_propdcg_minus_proprank", "paired", "C_at_grid_edge", "production",
                             "runs"},
    "fig4_eta": {"x", "summary", "paired_propdcg_minus_proprank", "paired", "C_at_grid_edge", "production", "runs"},
    "fig5_noise": {"x", "summary", "paired_propdcg_minus_proprank", "production", "runs"},
    "fig6_misspecification": {"x", "summary", "paired_propdcg_minus_proprank", "production", "runs"},
    "fig7_ccp": {"curves", "n_train_clicks"},
    "deep_propdcg": {"passes", "clicks", "curve", "table3_row", "paired_deep_minus_svm", "paper_table3", "runs"},
    "slam_fig1_separable": {"summary", "tuning", "curves", "paper"},
    "slam_fig23_mq2008": {"ap", "ndcg10", "paper"},
    "slam_batch_table": {"rows"},
    "topk_fig1_mq2008": {"aistats", "early"},
    "propensity_estimation": {"recovery", "sessions_for_10pct", "table", "runs", "trust_training"},
    "trees": {"summary", "claims", "runs"},
    "paired_comparison": {"first_logs", "per_log", "must_hold"},
    "report_screenshot": {"report", "verdicts", "data", "rankers"},
}


def test_every_script_has_expected_fields():
    assert set(scripts()) == set(EXPECTED_FIELDS)


# These tests check that a script runs end to end and writes its fields, not its numbers: where a
# script's --quick run is long, a smaller C grid / fewer seeds exercise the same code paths.
# fig7_ccp keeps its grid: its test checks the CCP objective's monotonicity up to C = 1e4.
SMOKE_ARGS = {"table3": ["--seeds", "1"], "slam_fig23_mq2008": ["--T", "1000"]}   # a smoke run: fields, not figures
SMOKE_GRIDS = {"experiments._cltr": {"QUICK_C_GRID": (1.0, 100.0)},
               "experiments.slam_batch_table": {"C_GRID_QUICK": (0.1, 10.0), "QUICK_QUERIES": 40}}


def _run(name, tmp_path, monkeypatch=None):
    import importlib

    if monkeypatch is not None and name != "fig7_ccp":
        for module, values in SMOKE_GRIDS.items():
            for attr, value in values.items():
                monkeypatch.setattr(importlib.import_module(module), attr, value)
    importlib.import_module(f"experiments.{name}").main(["--quick", "--out", str(tmp_path)] + SMOKE_ARGS.get(name, []))
    payload = json.loads((tmp_path / f"{name}.json").read_text())
    assert payload["name"] == name
    assert payload["settings"] and payload["results"]
    assert "command" in payload and "environment" in payload
    assert any(p.suffix == ".png" for p in tmp_path.iterdir())
    missing = EXPECTED_FIELDS.get(name, set()) - set(payload["results"])
    assert not missing, f"{name} results lack {missing}"
    return payload


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name == "slam_fig1_separable"
                                  else name for name in sorted(SYNTHETIC_ONLY & set(scripts()))])   # slam: ~10 s
def test_synthetic_script_quick(name, tmp_path):
    _run(name, tmp_path)


@pytest.mark.slow
@requires_mq2008
@pytest.mark.parametrize("name", sorted(set(scripts()) - SYNTHETIC_ONLY))
def test_mq2008_script_quick(name, tmp_path, monkeypatch):
    payload = _run(name, tmp_path, monkeypatch)
    if name == "table3":
        rows = payload["results"]["rows"]
        assert set(rows) == {"production", "naive", "lambdarank", "proprank", "propdcg", "skyline", "ideal"}
        for row in rows.values():
            assert {"avg_dcg", "ndcg10", "avg_rank", "avg_dcg_ln_rel1", "avg_dcg_log2_rel2"} <= set(row)
        # Every row is a ranking of the test set: none above the ideal ranking's avg DCG.
        assert all(row["avg_dcg"]["mean"] <= rows["ideal"]["avg_dcg"]["mean"] + 1e-12 for row in rows.values())
        assert payload["results"]["paired"]["propdcg-proprank"]["avg_dcg"]["n"] == len(payload["results"]["runs"])
    if name in ("fig23_learning_curve", "fig4_eta", "fig5_noise", "fig6_misspecification"):
        results = payload["results"]
        for series in results["summary"].values():
            assert len(series["avg_dcg"]) == len(results["x"])
            assert all(0 < point["mean"] < 1 for point in series["avg_dcg"])
    if name == "fig4_eta":
        # Training and selection use the true click model's eta, not the estimators' default.
        for run in payload["results"]["runs"]:
            assert run["propensity"] == f"PositionBasedPropensity(eta={run['x']})"
    if name in ("fig4_eta", "fig5_noise", "fig6_misspecification"):
        # The number of training clicks is fixed (as in the paper), whatever eta or the noise.
        for run in payload["results"]["runs"]:
            assert run["n_clicks"] <= run["n_train_clicks"] <= run["n_clicks"] + 10
    if name == "fig7_ccp":
        for curve in payload["results"]["curves"].values():
            objective = curve["objective"]
            assert all(b <= a + 1e-9 * abs(a) for a, b in zip(objective, objective[1:]))


def test_quick_runs_write_elsewhere_than_the_committed_results():
    from experiments._common import QUICK_RESULTS, RESULTS, parser

    assert parser("x").parse_args(["--quick"]).out == QUICK_RESULTS != RESULTS
    assert parser("x").parse_args([]).out == RESULTS
    assert str(parser("x").parse_args(["--quick", "--out", "elsewhere"]).out) == "elsewhere"


@pytest.mark.slow      # two Python processes importing the experiments: about 6 s
def test_unknown_experiment_is_one_line_from_any_directory(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-m", "experiments", "no_such_script"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "unknown experiment 'no_such_script'" in result.stderr
    listing = subprocess.run([sys.executable, "-m", "experiments", "--help"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0 and "table3" in listing.stdout


def test_demo_help_does_not_run_the_demo(capsys):
    from click_sim.demo import cli

    with pytest.raises(SystemExit) as exit_info:
        cli(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--seed" in out and "Test NDCG@10" not in out


def test_the_demo_promises_figures_only_where_matplotlib_draws_them():
    from click_sim.demo import report_line

    assert "figures" in report_line("r.html", True) and "no figures" not in report_line("r.html", True)
    without = report_line("r.html", False)
    assert "no figures, as matplotlib is not installed" in without and "pip install matplotlib" in without
    quickstart = " ".join((REPO / "docs" / "guide" / "quickstart.md").read_text(encoding="utf-8").split())
    assert "with figures when matplotlib is installed: a plain `pip install .` leaves it out" in quickstart


def test_grid_edge_tells_a_binding_edge_from_a_tie():
    from experiments._cltr import edge_stats, grid_edge

    grid = (0.1, 1.0, 10.0)
    assert grid_edge({0.1: 0.5, 1.0: 0.6, 10.0: 0.4}, grid) == (None, False)
    assert grid_edge({"0.1": 0.5, "1.0": 0.5, "10.0": 0.4}, grid) == ("low", False)  # same ranking: a tie
    assert grid_edge({0.1: 0.7, 1.0: 0.5, 10.0: 0.4}, grid) == ("low", True)
    assert grid_edge({0.1: 0.3, 1.0: 0.5, 10.0: 0.5}, grid) == (None, False)  # the first of ties is chosen
    assert grid_edge({0.1: 0.3, 1.0: 0.5, 10.0: 0.6}, grid) == ("high", True)
    stats = edge_stats([{"vali_snips_dcg": {0.1: 0.5, 1.0: 0.5, 10.0: 0.4}},
                        {"vali_snips_dcg": {0.1: 0.3, 1.0: 0.5, 10.0: 0.6}},
                        {"vali_snips_dcg": {0.1: 0.3, 1.0: 0.7, 10.0: 0.6}}], grid)
    assert (stats["n"], stats["low"], stats["high"], stats["binding"]) == (3, 1, 1, 1)
    assert stats["share_at_edge"] == pytest.approx(2 / 3) and stats["share_binding"] == pytest.approx(1 / 3)


def _part(tmp_path, name, seeds, **settings):
    runs = [{"series": "", "x": x, "seed": s, "naive": {"avg_dcg": 0.5 + s / 100}} for x in (2, 20) for s in seeds]
    payload = {"command": f"part {name}", "seconds": 10.0,
               "settings": {"C_grid": [1.0, 10.0], "seeds": seeds, "quick": False, **settings},
               "results": {"runs": runs, "production": {str(s): {"avg_dcg": 0.4} for s in seeds},
                           "skyline": {"avg_dcg": 0.7}}}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(payload))
    return path


def test_merge_parts_unites_seed_ranges_and_refuses_other_settings(tmp_path):
    from experiments._cltr import merge_parts

    settings = {"C_grid": (1.0, 10.0), "quick": False}
    a, b = _part(tmp_path, "a", [0, 1]), _part(tmp_path, "b", [2])
    records, production, sky, merged, seconds = merge_parts([a, b], settings)
    assert sorted((r["x"], r["seed"]) for r in records) == [(x, s) for x in (2, 20) for s in (0, 1, 2)]
    assert list(production) == [0, 1, 2] and sky == {"avg_dcg": 0.7} and seconds == 20.0
    assert merged["seeds"] == [0, 1, 2] and merged["merged_from"] == ["part a", "part b"]
    with pytest.raises(ValueError, match="C_grid"):
        merge_parts([a, _part(tmp_path, "c", [3], C_grid=[1.0, 100.0])], settings)
    with pytest.raises(ValueError, match="seed 1"):
        merge_parts([a, _part(tmp_path, "d", [1])], settings)
