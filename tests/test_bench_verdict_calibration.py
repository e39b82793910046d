"""The verdict-calibration benchmark: its exact truth, its hardest null, and a tiny run of its table."""

import itertools

import numpy as np
import pytest

from experiments.benchmarks import bench_verdict_calibration as bench


def _hand_case():
    alpha = np.array([[0.5, 0.2, 0.1], [0.3, 0.6, 0.05]])
    theta = np.array([1.0, 0.4])
    m2 = 1.0 / np.log2(3.0)
    pi = np.array([1 / 10, 1 / 11])
    pi /= pi.sum()
    return alpha, theta, m2, pi


@pytest.mark.parametrize("estimator", ["ips", "snips"])
def test_truth_is_exact_for_a_deterministic_logger(estimator):
    alpha, theta, m2, pi = _hand_case()
    # drift 0: the logger always shows the top 2 by alpha: (0.5, 0.2) and (0.6, 0.3)
    v_log = np.array([0.5 + 0.2 * 0.4 * m2, 0.6 + 0.3 * 0.4 * m2])
    scores = np.array([[0.0, 1.0, 2.0], [3.0, 2.0, 1.0]])            # shows (0.1, 0.2) and (0.3, 0.6)
    v_c = np.array([0.1 + 0.2 * 0.4 * m2, 0.3 + 0.6 * 0.4 * m2])
    expected = pi @ (v_c - v_log)
    if estimator == "snips":
        expected /= pi @ np.array([0.7, 0.9])
    truth = bench.Truth(alpha, theta, 0.0, 2, np.random.default_rng(0), estimator=estimator)
    assert truth(scores) == pytest.approx(expected, rel=1e-12)
    assert truth(np.log(alpha)) == pytest.approx(0.0, abs=1e-15)    # the logger's own ranking
    assert truth.se == 0.0


def test_logger_value_matches_plackett_luce_enumeration():
    alpha, theta, m2, _ = _hand_case()
    drift = 0.5
    w = alpha ** (1 / drift)                                         # log alpha + drift Gumbel: Plackett-Luce
    gain = np.array([1.0, 0.4 * m2])
    exact_v, exact_a = np.zeros(2), np.zeros(2)
    for q in range(2):
        for perm in itertools.permutations(range(3)):
            p, left = 1.0, w[q].sum()
            for d in perm:
                p *= w[q, d] / left
                left -= w[q, d]
            exact_v[q] += p * (alpha[q, list(perm[:2])] @ gain)
            exact_a[q] += p * alpha[q, list(perm[:2])].sum()
    V, A = bench.logger_value_exact(alpha, theta, drift, 2)          # the recursion over placed subsets
    np.testing.assert_allclose(V, exact_v, rtol=1e-12)
    np.testing.assert_allclose(A, exact_a, rtol=1e-12)
    V, A, var_v, var_a, _ = bench.logger_value(alpha, theta, drift, 2, np.random.default_rng(1), n_draws=4000)
    assert np.all(np.abs(V - exact_v) <= 5 * np.sqrt(var_v) + 1e-12)   # the Monte Carlo, within its s.e.
    assert np.all(np.abs(A - exact_a) <= 5 * np.sqrt(var_a) + 1e-12)
    assert np.all(np.sqrt(var_v) < 2e-3)


def test_exact_logger_value_keeps_tiny_weights():
    # a sharp logger (drift 0.1) puts weights alpha ** 10 far apart; all shown: A is the sum of alpha
    alpha = np.random.default_rng(0).beta(1.0, 3.0, size=(50, 10))
    theta = (1.0 / np.arange(1, 11)) ** 1.2
    V, A = bench.logger_value_exact(alpha, theta, 0.1, 10)
    np.testing.assert_allclose(A, alpha.sum(1), rtol=1e-12)
    V0, _ = bench.logger_value_exact(alpha, theta, 0.0, 10)
    assert np.all(V <= V0 + 1e-12)                                   # no ranking beats sorting by alpha


def test_hardest_null_is_the_smallest_scale_at_or_below_zero():
    rng = np.random.default_rng(3)
    alpha = rng.beta(1.0, 3.0, size=(40, 10))
    theta = (1.0 / np.arange(1, 11)) ** 1.2
    truth = bench.Truth(alpha, theta, 0.3, 10, np.random.default_rng(4), n_draws=400)
    f0, noise = np.log(alpha), rng.gumbel(size=alpha.shape)
    s, t, s_below = bench.hardest_null_scale(truth, f0, noise, grid=64)
    assert np.isfinite(s) and s > 0
    assert t == truth(f0 + s * noise) <= 0
    assert truth(f0 + s_below * noise) > 0 and s - s_below < 1e-5
    assert truth(f0) > 0                                             # the ideal is better than a drifting logger


def test_tiny_run_prints_the_table(capsys):
    bench.main(["--queries", "40", "--pages", "200", "--logs", "1", "--method", "true", "--drifts", "0.3",
                "--candidates", "10", "--bootstrap", "40", "--truth-draws", "200", "--grid", "32"])
    out = capsys.readouterr().out
    assert "40 queries" in out and "seeds 0..0" in out and "(1/r)^1.2" in out
    assert "drift 0.3, 10 candidates (10 shown): null scale s =" in out
    header = next(line for line in out.splitlines() if "null->better" in line)
    for column in ("method", "cov-or-cannot", "ideal->better", "null verdicts", "fail", "warned (logs)", "cpu s/log"):
        assert column in header
    row = next(line for line in out.splitlines() if line.strip().startswith("true "))
    assert row.count("|") == header.count("|")
    assert "true     drift 0.3, 10 cands:" in out


def test_methods_option_and_old_alias():
    parse = lambda argv: bench._methods(type("A", (), argv)())    # noqa: E731
    assert parse({"method": None, "methods": "auto, true"}) == ["auto", "true"]
    assert parse({"method": "pbm", "methods": "auto,true"}) == ["pbm"]
