"""The svm_rank side-by-side benchmark: its objective formula and model reader (svm_rank itself is not needed)."""

import numpy as np
import pytest

from experiments.bench_svm_rank import main, make_problem, rank_objective, read_svm_rank_model


def test_rank_objective_is_rank_svms_objective():
    from counterfactual_ltr.estimators import RankSVM

    data = make_problem(n_queries=30)
    model = RankSVM(C=3.0, tol=1e-8).fit(data)
    assert rank_objective(data, model.coef_, 3.0) == pytest.approx(model.objective_, rel=1e-12)


def test_reads_the_linear_weights_of_an_svm_rank_model(tmp_path):
    header = ["SVM-light Version V6.20", "0 # kernel type", "3 # kernel parameter -d", "1 # kernel parameter -g",
              "1 # kernel parameter -s", "1 # kernel parameter -r", "empty# kernel parameter -u",
              "6 # highest feature index", "6 # number of training documents",
              "2 # number of support vectors plus 1", "0 # threshold b, each following line is a SV"]
    path = tmp_path / "model.dat"
    path.write_text("\n".join(header + ["1 1:1.5 3:-0.25 5:0.75 #"]) + "\n")
    np.testing.assert_array_equal(read_svm_rank_model(path, 5), [1.5, 0.0, -0.25, 0.0, 0.75])


def test_quick_run_prints_our_side(capsys):
    main(["--quick", "--no-propensity"])
    out = capsys.readouterr().out
    assert "CSR X, auto" in out and "path=newton_cg" in out and "svm_rank" not in out
