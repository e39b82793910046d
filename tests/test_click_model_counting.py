"""DCM and SDBN fitted by counting (``method="counting"``, the default) and by the fast EM (``method="em"``).

Checks, each of which a wrong count or a wrong E-step fails:

* counting is the maximum of the stop-at-the-last-click likelihood (written out here page by page
  and maximised numerically by scipy on tiny logs), and that likelihood is a lower bound of the
  model's own (``log_likelihood``);
* where nothing is hidden below a page's last click, counting and EM give the same ``alpha``;
* EM's end point is a maximum of the model's own likelihood (no numerical optimum above it), and
  the SDBN's EM ends where the DBN's EM with ``gamma`` fixed at 1 ends;
* counting recovers the simulated parameters when the simulated users do stop at the last click
  (``click_sim.cascade.cascade_clicks`` with a last result every examining user clicks), and
  misses ``lambda`` on ordinary DCM clicks, where EM recovers it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from click_sim.cascade import cascade_clicks, simulate_cascade_events
from counterfactual_ltr import ClickLog
from counterfactual_ltr.click_models import DependentClickModel, DynamicBayesianNetworkModel, SimplifiedDBNModel

MODELS = {"dcm": DependentClickModel, "sdbn": SimplifiedDBNModel}


def _log(pages):
    """A raw log from a list of (query, docs, clicks) pages."""
    rows = [{"session": i, "query": q, "doc": int(d), "position": j + 1, "click": int(c)}
            for i, (q, docs, clicks) in enumerate(pages) for j, (d, c) in enumerate(zip(docs, clicks))]
    return ClickLog.from_events(pd.DataFrame(rows), session="session")


def _random_pages(seed, n_pages=40, L=4, n_docs=5, p_click=0.35):
    rng = np.random.default_rng(seed)
    return [(f"q{rng.integers(2)}", rng.choice(n_docs, size=L, replace=False), rng.random(L) < p_click)
            for _ in range(n_pages)]


def _stop_at_last_click_loglik(name, log, alpha, cont):
    """Sum over pages of the log-likelihood with the user examining down to the last click and stopping there.

    ``alpha`` per training row; ``cont`` the probability of going on after a click: per position
    (DCM's ``lambda``) or per row (SDBN's ``1 - sigma``).
    """
    total = 0.0
    for i in range(len(log)):
        sl = slice(log.session_offsets[i], log.session_offsets[i + 1])
        rows, clicks, pos = log.docs[sl], log.clicks[sl].astype(bool), log.positions[sl]
        last = np.flatnonzero(clicks)[-1] if clicks.any() else len(clicks) - 1
        for j in range(last + 1):
            a = alpha[rows[j]]
            total += np.log(a) if clicks[j] else np.log(1 - a)
            if clicks[j]:
                c = cont[pos[j] - 1] if name == "dcm" else cont[rows[j]]
                total += np.log(1 - c) if j == last else np.log(c)
    return total


@pytest.mark.parametrize("name", list(MODELS))
def test_counting_maximises_the_stop_at_last_click_likelihood_which_bounds_the_model_likelihood(name):
    log = _log(_random_pages(11))
    model = MODELS[name](prior_strength=0.0).fit(log)
    assert model.n_iter_ == 1 and model.converged_
    n_rows, K = log.n_rows, int(log.positions.max())
    n_cont = K if name == "dcm" else n_rows

    def split(x):
        return x[:n_rows], x[n_rows:]

    def loss(x):
        return -_stop_at_last_click_loglik(name, log, *split(x))

    eps = 1e-7
    best = minimize(loss, np.full(n_rows + n_cont, 0.5), method="L-BFGS-B", bounds=[(eps, 1 - eps)] * (n_rows + n_cont),
                    options={"ftol": 1e-14, "gtol": 1e-10, "maxiter": 5000})
    alpha, cont = split(best.x)
    np.testing.assert_allclose(model.alpha_, alpha, atol=2e-4)
    clicked_at = np.bincount(log.positions[log.clicks > 0] - 1, minlength=K) > 0
    if name == "dcm":
        np.testing.assert_allclose(model.lambda_[clicked_at], cont[clicked_at], atol=2e-4)
        ours = (model.alpha_, model.lambda_)
    else:
        clicked = np.bincount(log.docs, weights=log.clicks, minlength=n_rows) > 0
        np.testing.assert_allclose(1 - model.sigma_[clicked], cont[clicked], atol=2e-4)
        ours = (model.alpha_, 1 - model.sigma_)
    bound = _stop_at_last_click_loglik(name, log, *ours)
    assert bound >= -best.fun - 1e-6
    # The model's own likelihood sums over what happened below the last click: it is larger.
    assert model.log_likelihood(log) * log.n_items > bound + 1e-3


@pytest.mark.parametrize("prior", [0.0, 5.0])
@pytest.mark.parametrize("name", list(MODELS))
def test_counting_and_em_agree_where_nothing_is_hidden(name, prior):
    """Pages whose last click is on their last result, and pages without clicks: the counts are complete."""
    rng = np.random.default_rng(3)
    pages = []
    for _ in range(60):
        clicks = rng.random(4) < 0.4
        if clicks.any():
            clicks[-1] = True
        pages.append((f"q{rng.integers(3)}", rng.choice(6, size=4, replace=False), clicks))
    log = _log(pages)
    counted = MODELS[name](prior_strength=prior).fit(log)
    em = MODELS[name](prior_strength=prior, method="em", tol=1e-12).fit(log)
    np.testing.assert_allclose(em.alpha_, counted.alpha_, atol=1e-9)
    assert em.alpha_prior_ == pytest.approx(counted.alpha_prior_, abs=1e-12)
    if name == "dcm":   # every click above the last result was followed by another: lambda_1..3 = 1
        np.testing.assert_allclose(em.lambda_[:3], counted.lambda_[:3], atol=1e-9)
        # nothing hidden: once lambda_1..3 reach 1 (EM starts them at most at 0.95) nothing changes,
        # so EM stops at its second or third check of the log-likelihood
        assert len(em.loglik_history_) <= 3
    # (SDBN's sigma differs: a last click on a page's last result says nothing of satisfaction under
    # the model, while counting calls it satisfied.)


@pytest.mark.parametrize("name", list(MODELS))
def test_em_ends_at_a_maximum_of_the_model_likelihood(name):
    log = _log(_random_pages(5, n_pages=30, L=4, n_docs=4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        em = MODELS[name](prior_strength=0.0, method="em", tol=1e-13, max_iter=20000).fit(log)
    n_rows, K = log.n_rows, int(log.positions.max())

    def loss(x):
        probe = MODELS[name](method="em")
        probe.row_keys_, probe.alpha_, probe.alpha_prior_ = em.row_keys_, x[:n_rows], em.alpha_prior_
        if name == "dcm":
            probe.lambda_ = x[n_rows:]
        else:
            probe.sigma_, probe.sigma_prior_, probe.gamma_ = x[n_rows:], em.sigma_prior_, 1.0
        return -probe.log_likelihood(log) * log.n_items

    x0 = np.r_[em.alpha_, em.lambda_ if name == "dcm" else em.sigma_]
    for start in (x0, np.full_like(x0, 0.5)):
        best = minimize(loss, start, method="L-BFGS-B", bounds=[(1e-9, 1 - 1e-9)] * x0.size,
                        options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 5000})
        assert -best.fun <= -loss(x0) + 1e-6     # no point the optimiser finds beats EM's
    assert em.log_likelihood(log) == pytest.approx(em.loglik_history_[-1], abs=1e-9)


def test_sdbn_em_ends_where_the_dbn_em_with_gamma_fixed_at_one_ends():
    from counterfactual_ltr.propensity import _cascade_em as em

    frame, _ = simulate_cascade_events(2000, "sdbn", n_queries=30, n_shown=6, random_state=2)
    log = ClickLog.from_events(frame, session="session")
    g = em.grid(log.session_offsets, log.positions)
    R = em._spread(g, log.docs, fill=0, dtype=np.int64)
    C = em._spread(g, log.clicks.astype(np.float64))
    K = int(log.positions.max())
    dbn = em.dbn_em(R, C, g["mask"], log.n_rows, 5.0, 5000, 1e-13, fix_gamma=1.0)
    fast = em.sdbn_em(R, C, g["mask"], g["pos"], log.n_rows, K, 5.0, 5000, 1e-13)
    np.testing.assert_allclose(fast["alpha"], dbn["alpha"], atol=1e-6)
    np.testing.assert_allclose(fast["sigma"], dbn["sigma"], atol=1e-6)
    assert fast["history"][-1] == pytest.approx(dbn["history"][-1], abs=1e-10)


def _stopping_users(model, n_pages=20_000, seed=0):
    """Pages whose last result every examining user clicks: nobody goes on below the last click unseen.

    10 queries of 8 candidate documents (attractiveness 0.1-0.7, satisfaction 0.2-0.8); each page
    shows 4 of them in random order, then the query's sure result (attractiveness 1).
    """
    rng = np.random.default_rng(seed)
    n_q, n_c, L = 10, 8, 5
    alpha = rng.uniform(0.1, 0.7, size=(n_q, n_c))
    sigma = rng.uniform(0.2, 0.8, size=(n_q, n_c))
    q = rng.integers(n_q, size=n_pages)
    shown = np.argsort(rng.random((n_pages, n_c)), axis=1)[:, :L - 1]
    page_alpha = np.c_[alpha[q[:, None], shown], np.ones(n_pages)]
    page_sigma = np.c_[sigma[q[:, None], shown], np.full(n_pages, 0.5)]
    lam = np.array([0.8, 0.6, 0.4, 0.2, 0.5])
    clicks = cascade_clicks(model, page_alpha, sigma=page_sigma, lam=lam, random_state=rng)
    docs = np.c_[shown, np.full(n_pages, n_c)]
    log = ClickLog.from_events({"session": np.repeat(np.arange(n_pages), L), "query": np.repeat(q, L),
                                "doc": docs.ravel(), "position": np.tile(np.arange(1, L + 1), n_pages),
                                "click": clicks.ravel().astype(int)}, session="session")
    queries, candidates = log.row_keys()
    candidates = np.asarray(candidates).astype(int)
    real = candidates < n_c
    at = (np.asarray(queries).astype(int)[real], candidates[real])
    return log, real, alpha[at], sigma[at], lam


@pytest.mark.parametrize("name", list(MODELS))
def test_counting_recovers_the_parameters_when_users_stop_at_the_last_click(name):
    log, real, alpha, sigma, lam = _stopping_users(name)
    model = MODELS[name](prior_strength=0.0).fit(log)
    assert np.abs(model.alpha_[real] - alpha).mean() < 0.02
    if name == "dcm":
        np.testing.assert_allclose(model.lambda_[:4], lam[:4], atol=0.03)
    else:
        assert np.abs(model.sigma_[real] - sigma).mean() < 0.04


def test_counting_misses_lambda_where_users_go_on_unseen_and_em_does_not():
    """The stop-at-the-last-click counts are biased on ordinary DCM clicks: the tolerances can fail."""
    frame, truth = simulate_cascade_events(20_000, "dcm", n_queries=100, random_state=0)
    log = ClickLog.from_events(frame, session="session")
    counted = DependentClickModel(prior_strength=0.0).fit(log)
    em = DependentClickModel(prior_strength=0.0, method="em").fit(log)
    assert np.all(counted.lambda_[1:8] < truth["lam"][1:8] - 0.05)
    np.testing.assert_allclose(em.lambda_[:8], truth["lam"][:8], atol=0.05)


def test_method_is_checked_and_the_dcm_propensity_is_fitted_by_em():
    from counterfactual_ltr import estimate_propensities

    log = _log(_random_pages(1))
    for cls in MODELS.values():
        with pytest.raises(ValueError, match="method must be 'em' or 'counting'"):
            cls(method="newton").fit(log)
    prop = estimate_propensities(log, "dcm")
    assert prop.click_model.method == "em" and prop.click_model.n_iter_ > 1
    assert DependentClickModel().get_params()["method"] == "counting"
    assert DynamicBayesianNetworkModel().get_params().get("method") is None
