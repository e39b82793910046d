"""Newton on the position-based model's EM fixed point: same optimum as plain EM, replicates reported, refits."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from counterfactual_ltr import ClickLog
from counterfactual_ltr.propensity import estimate_propensities, reestimate
from counterfactual_ltr.propensity import _click_em
from counterfactual_ltr.propensity._click_em import pbm_em, pbm_newton


def _cells(seed, n_rows=60, K=4, varied=0.5):
    """A small simulated log as cells: some rows shown at one position, some at several."""
    rng = np.random.default_rng(seed)
    theta = 1.0 / np.arange(1, K + 1) ** 0.8
    alpha = rng.uniform(0.1, 0.8, n_rows)
    row, k = [], []
    for r in range(n_rows):
        m = rng.integers(2, K + 1) if rng.random() < varied else 1
        row += [r] * m
        k += sorted(rng.choice(np.arange(1, K + 1), m, replace=False).tolist())
    row, k = np.array(row), np.array(k)
    n = rng.integers(1, 30, row.size).astype(float)
    c = rng.binomial(n.astype(int), theta[k - 1] * alpha[row]).astype(float)
    return row, k, n, c, n_rows, K


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_newton_reaches_plain_em_maximum_likelihood(seed):
    row, k, n, c, n_rows, K = _cells(seed)
    em = pbm_em(row, k, n, c, n_rows, K, prior_strength=0.0, max_iter=20000, tol=1e-15)
    newton = pbm_newton(row, k, n, c, n_rows, K, prior_strength=0.0, max_iter=200, tol=1e-12)
    assert newton["converged"]
    assert newton["n_iter"] < 100
    assert newton["loglik"] >= em["loglik"] - 1e-9 * abs(em["loglik"])
    # theta is identified up to scale: compare theta_r / theta_1
    np.testing.assert_allclose(newton["theta"] / newton["theta"][0], em["theta"] / em["theta"][0], rtol=1e-3)


@pytest.mark.parametrize("seed", [0, 3])
def test_newton_finds_the_fixed_point_of_em_with_the_prior(seed):
    row, k, n, c, n_rows, K = _cells(seed, varied=0.8)
    em = pbm_em(row, k, n, c, n_rows, K, prior_strength=5.0, max_iter=20000, tol=1e-15)
    newton = pbm_newton(row, k, n, c, n_rows, K, prior_strength=5.0, max_iter=200, tol=1e-12)
    assert newton["converged"] and newton["n_iter"] < 100
    np.testing.assert_allclose(newton["theta"], em["theta"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(newton["mu"], em["mu"], rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(newton["alpha"], em["alpha"], rtol=1e-3, atol=1e-6)
    # warm-started at its own solution it stays there
    again = pbm_newton(row, k, n, c, n_rows, K, prior_strength=5.0, tol=1e-12, start=newton)
    assert again["converged"] and again["n_iter"] <= 1


def _log(seed=0, pages=1500, n_docs=6):
    rng = np.random.default_rng(seed)
    docs = np.array([rng.permutation(n_docs)[:5] for _ in range(pages)]).ravel()
    positions = np.tile(np.arange(1, 6), pages)
    queries = np.repeat(rng.integers(0, 30, pages), 5)
    attract = rng.uniform(0.2, 0.9, (30, n_docs))
    clicks = rng.random(docs.size) < (1 / positions) * attract[queries, docs]
    return ClickLog.from_events({"query": queries, "doc": docs, "position": positions, "click": clicks})


def test_reestimate_on_identical_weights_returns_the_same_curve():
    log = _log()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimate_propensities(log, "pbm", max_position=5, n_bootstrap=0)
    assert est.recipe_["method"] == "pbm" and est.recipe_["max_position"] == 5
    present = (np.bincount(log.session_query, minlength=log.n_queries) > 0).astype(float)
    again = reestimate(est, log, present)
    assert again.converged_
    np.testing.assert_allclose(again.relative_, est.relative_, rtol=1e-7)
    half = present.copy()
    half[::2] = 0
    other = reestimate(est, log, half)
    assert other.relative_.shape == (5,) and not np.allclose(other.relative_, est.relative_)
    with pytest.raises(ValueError, match="query_weights"):
        reestimate(est, log, np.ones(3))


def test_reestimate_harvest_keeps_options():
    log = _log(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimate_propensities(log, "harvest", max_position=5, n_bootstrap=0, prior_strength=2.0)
        again = reestimate(est, log, np.ones(log.n_queries))
    assert est.recipe_["options"] == {"prior_strength": 2.0, "monotone": True}     # the default shape, recorded
    np.testing.assert_allclose(again.relative_, est.relative_, rtol=1e-10)


def test_non_converged_replicates_are_warned_recorded_and_left_out(monkeypatch):
    calls = {"n": 0}
    original = _click_em.pbm_newton

    def flaky(*args, **kwargs):
        fit = original(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] > 1 and calls["n"] % 3 == 0:   # every third replicate "fails" and is far off
            fit = dict(fit, converged=False, theta=np.r_[fit["theta"][:1], np.full(len(fit["theta"]) - 1, 1e-3)])
        return fit

    monkeypatch.setattr(_click_em, "pbm_newton", flaky)
    log = _log(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = estimate_propensities(log, "pbm", max_position=5, n_bootstrap=9, random_state=0)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert any("3 of 9 bootstrap replicates did not converge" in m for m in messages)
    assert est.bootstrap_converged_.sum() == 6
    assert np.all(est.lower_[1:] > 1e-3)     # the failed replicates' values are not in the interval


def test_trec_pbm_says_where_theta_sits_at_its_cap():
    import os
    from pathlib import Path

    pd = pytest.importorskip("pandas")
    path = Path(os.environ.get("CLTR_DATA", "../shared/data")) / "real-logs" / "trec-session-2014" / "train.csv"
    if not path.exists():
        pytest.skip("the shared TREC log is not here (CLTR_DATA)")
    log = ClickLog.from_events(pd.read_csv(path), session="page")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = estimate_propensities(log, "pbm", n_bootstrap=0)
    assert est._full_fit["converged"] and est._full_fit["n_iter"] < 100
    assert any("theta is at its cap 1 at positions 2, 3" in str(w.message) for w in caught)
    assert est.at_cap_[1] and not est.at_cap_[7]
    np.testing.assert_allclose(est.relative_[7], 0.3644, atol=5e-4)   # plain EM after 20,000 steps: 0.3644
