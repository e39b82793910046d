"""The learner-choice benchmark runs end to end on a small synthetic set and reproduces select_learner's choice."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.filterwarnings("ignore"), pytest.mark.slow]


def test_a_quick_run_records_every_learner_and_the_choice(tmp_path):
    from experiments.benchmarks import bench_learner_choice

    summary = bench_learner_choice.main(["--quick", "--data", "synthetic", "--passes", "5", "--no-lgb",
                                         "--out", str(tmp_path)])
    run, = json.loads((tmp_path / "bench_learner_choice.json").read_text())["results"]["runs"]
    assert set(run["test"]) == {"svm-rank", "svm-proprank", "svm-propdcg", "gbdt-propdcg"}
    assert run["auto"] == run["test"][run["table"]["chosen"]] == run["auto_noise0"]
    row = summary["synthetic, 5 passes"]
    assert row["n_runs"] == 1 and sum(row["chosen"].values()) == 1
    assert row["selection_over_dearest"]["mean"] >= 1.0
