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


def _recipe_part(tmp_path, name, passes, shift, seeds=range(4), arms=("recipe", "lgb_position", "svm_propdcg")):
    """A bench_tree_recipe result as the script writes it: the recipe ``shift`` above LightGBM in every run."""
    noise = [0.001, -0.002, 0.0015, -0.0005]
    runs = [{"dataset": "synthetic", "fold": 0, "seed": s, "n_train_clicks": 100, "production": 0.6,
             "chosen": {}, "lgb_position": 0.7 + 0.01 * s, "svm_propdcg": 0.7 + 0.01 * s + noise[s % 4],
             "recipe": 0.7 + 0.01 * s + shift + noise[s % 4]} for s in seeds]
    settings = {"passes": passes, "relevance_threshold": 2, "grid": {"n_estimators": [100]}, "arms": list(arms),
                "seeds": list(seeds), "folds": [1], "data": ["synthetic"], "selection": "CV", "clicks": "eta 1"}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"command": f"python -m experiments.bench_tree_recipe --passes {passes}",
                                "settings": settings, "results": {"runs": runs}, "seconds": 10.0, "cpu_seconds": 9.0}))
    return path


def test_bench_tree_recipe_merges_parts_and_the_results_page_says_holds_only_at_p_below_005(tmp_path):
    from experiments import _readme
    from experiments.benchmarks import bench_tree_recipe

    parts = [_recipe_part(tmp_path, "a", 30, 0.02), _recipe_part(tmp_path, "b", 100, 0.0)]
    summary = bench_tree_recipe.main(["--merge", *map(str, parts), "--out", str(tmp_path / "out")])
    assert set(summary) == {"synthetic, 30 passes", "synthetic, 100 passes"}
    assert summary["synthetic, 30 passes"]["paired"]["recipe - lgb_position"]["diff"] == pytest.approx(0.02)   # noise of mean 0
    payload = json.loads((tmp_path / "out" / "bench_tree_recipe.json").read_text())
    assert payload["settings"]["merged_from"] == [json.loads(p.read_text())["command"] for p in parts]
    assert payload["seconds"] >= 20.0 and payload["cpu_seconds"] >= 18.0        # the parts' time counted
    text, verdicts = _readme.tree_recipe_section(payload)
    said = {(what, verdict) for _, what, _, verdict, _ in verdicts}
    assert ("GBDTPropDCG, GBDT_GRID above LightGBM lambdarank, position= on synthetic, 30 passes", "holds") in said
    assert ("GBDTPropDCG, GBDT_GRID above LightGBM lambdarank, position= on synthetic, 100 passes", "not shown") in said
    assert "| synthetic, 100 passes | 4 |" in text and "SVM PropDCG" in text
    with pytest.raises(ValueError, match="in another part too"):
        bench_tree_recipe.merge([parts[0], parts[0]])
    # Parts with fewer arms: each pair of arms on the runs that have both.
    fewer = _recipe_part(tmp_path, "c", 30, 0.02, seeds=range(4, 8), arms=("recipe", "lgb_position"))
    fewer.write_text(fewer.read_text().replace('"svm_propdcg"', '"unused"'))
    runs, _ = bench_tree_recipe.merge([parts[0], fewer])
    row = bench_tree_recipe.summarise(runs)["synthetic, 30 passes"]
    assert row["paired"]["recipe - lgb_position"]["n"] == 8 and row["paired"]["recipe - svm_propdcg"]["n"] == 4
    other = json.loads(parts[1].read_text())
    other["settings"]["grid"] = {"n_estimators": [300]}
    parts[1].write_text(json.dumps(other))
    with pytest.raises(ValueError, match="only parts with the same settings can be merged"):
        bench_tree_recipe.merge(parts)
