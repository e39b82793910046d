"""``cltr export``: the saved model's export scores as the model does; bad input exits 2 with one line."""

import json

import numpy as np
import pytest

from _serving_readers import solr_linear_scores
from test_cli import cltr


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    from click_sim import make_ranking, simulate_clicks
    from sklearn.preprocessing import StandardScaler
    from counterfactual_ltr.estimators import SVMPropDCG
    from counterfactual_ltr.persistence import save_model

    folder = tmp_path_factory.mktemp("cltr_export")
    data = make_ranking(n_queries=30, n_features=3, random_state=0)
    data.X[:] = data.X * 10.0 + 3.0
    log = simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)
    model = SVMPropDCG(C=1.0, preprocessor=StandardScaler()).fit(log)
    save_model(model, folder / "model.npz")
    (folder / "names.txt").write_text("bm25\npagerank\nage\n\n")
    (folder / "short.txt").write_text("bm25\npagerank\n")
    return folder, data, model


def test_export_writes_what_the_api_writes(saved):
    folder, data, model = saved
    run = cltr("export", "model.npz", "--format", "solr", "--feature-names", "names.txt", "-o", "m.json",
               cwd=folder)
    assert run.returncode == 0, run.stderr
    assert "wrote m.json: SVMPropDCG as solr" in run.stdout
    text = (folder / "m.json").read_text()
    scores = solr_linear_scores(text, dict(zip(["bm25", "pagerank", "age"], data.X.T)))
    np.testing.assert_allclose(scores, model.predict(data.X), rtol=1e-5, atol=1e-5 * np.abs(scores).max())
    assert sorted(json.loads(text)["params"]["weights"]) == ["age", "bm25", "pagerank"]


def test_export_refusals_are_one_line_with_status_2(saved):
    folder, _, _ = saved
    run = cltr("export", "model.npz", "--format", "solr", "--feature-names", "short.txt", "-o", "m.json", cwd=folder)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1
    assert "has 2 names but the model takes 3 raw features" in run.stderr and "--feature-names short.txt" in run.stderr
    run = cltr("export", "model.npz", "--format", "xml", "-o", "m.json", cwd=folder)
    assert run.returncode == 2 and "'xml' is not one of" in run.stderr
    run = cltr("export", "model.npz", "--format", "lightgbm", "-o", "m.txt", cwd=folder)
    assert run.returncode == 2 and "formats that can: onnx, opensearch, ranklib, solr, vespa" in run.stderr
    assert not (folder / "m.txt").exists()
