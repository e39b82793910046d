"""experiments.trees (GBDTPropDCG against LightGBM's lambdarank and SVM PropDCG) and bench_trees run end to end.

The MQ2008 part runs in tests/test_experiments.py (every script's --quick mode, when the data is there); here
the synthetic part, which needs no shared data, and the results-page entry (docs/guide/results.md) made from its JSON.
"""

import json

import pytest

pytest.importorskip("lightgbm")


@pytest.mark.slow
def test_trees_quick_on_the_interaction_data(tmp_path, monkeypatch):
    from experiments import _readme, trees

    trees.main(["--quick", "--datasets", "synthetic", "--out", str(tmp_path)])
    payload = json.loads((tmp_path / "trees.json").read_text())
    summary = payload["results"]["summary"]["synthetic"]
    methods = {"production", *trees.METHODS, "skyline"}
    assert set(summary["rows"]) == methods
    for row in summary["rows"].values():
        assert 0 < row["avg_dcg"]["mean"] <= 1 and 0 <= row["ndcg10"]["mean"] <= 1
    assert {f"{a}-{b}" for a, b in trees.PAIRS} == set(summary["paired"])
    assert set(payload["results"]["claims"]) == {"synthetic: gbdt_propdcg beats lgb_position",
                                                 "synthetic: gbdt_propdcg beats svm_propdcg"}
    run = payload["results"]["runs"][0]
    assert run["gbdt_propdcg"]["selected"]["n_estimators"] in trees.QUICK_CHECKPOINTS
    assert run["lgb_position"]["n_train_rows"] > run["n_train_docs"] / 2      # session rows, not documents
    assert (tmp_path / "trees.png").exists()
    # The results-page entry is made from the JSON alone.
    monkeypatch.setattr(_readme, "load", lambda name: payload if name == "trees" else None)
    text, verdicts = _readme.trees_section(payload)
    assert "GBDTPropDCG (ours)" in text and len(verdicts) == 2


@pytest.mark.slow
def test_bench_trees_quick(tmp_path):
    from experiments import bench_trees

    rows = bench_trees.main(["--quick", "--leaves", "7", "--out", str(tmp_path)])
    assert rows and all(r["ours_cpu_s"] > 0 and r["lightgbm_cpu_s"] > 0 for r in rows)
    assert json.loads((tmp_path / "bench_trees.json").read_text())["results"]["rows"] == rows
