"""Trust-bias (affine) correction in SVM PropRank / PropDCG training."""

import numpy as np
import pytest

from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
from counterfactual_ltr.estimators import SVMPropDCG, SVMPropRank
from counterfactual_ltr.estimators.svm import affine_click_weights

K = 8
R = np.arange(1, K + 1)
TRUST = PositionBasedClickModel(examination=1.0 / R, eps_plus=0.9, eps_minus=0.5 / R ** 0.5)


@pytest.fixture(scope="module")
def trust_log():
    data, w = make_ranking(n_queries=40, n_docs=(5, 8), random_state=4, return_ranker=True)
    return data, simulate_clicks(data, data.X @ w, TRUST, 3000, 0)


def test_affine_weights_unbiased_where_ips_is_biased(trust_log):
    """Monte Carlo: (click - beta)/alpha averages to the relevance; click/theta to eps+ R + eps- (1 - R)."""
    data, log = trust_log
    impressions = np.bincount(log.docs, minlength=data.n_docs)
    relevant = data.y >= 1
    position = np.zeros(data.n_docs, dtype=np.int64)
    position[log.docs] = log.positions  # deterministic logger: one position per document
    truth = TRUST.trust_model()
    alpha, beta = truth.alpha(position), truth.beta(position)
    p_click = alpha * relevant + beta
    affine = affine_click_weights(log, truth).weights / impressions
    ips = log.aggregate(TRUST.propensity_model()).weights / impressions
    # Standard errors of the per-document means; z-scores of a correct expectation stay within ~4.5.
    se_affine = np.sqrt(p_click * (1 - p_click) / impressions) / alpha
    assert np.max(np.abs(affine - relevant) / se_affine) < 4.5
    assert abs(np.mean((affine - relevant) / se_affine)) < 4.5 / np.sqrt(data.n_docs)
    # Plain IPS: irrelevant documents get eps-_r > 0 (biased up), relevant ones eps+ = 0.9 (biased down).
    theta = TRUST.propensity_model()(position)
    expected_ips = np.where(relevant, 0.9, 0.5 / position ** 0.5)
    se_ips = np.sqrt(p_click * (1 - p_click) / impressions) / theta
    assert np.max(np.abs(ips - expected_ips) / se_ips) < 4.5
    assert np.all(expected_ips[~relevant] > 0.15) and np.mean((ips - relevant)[~relevant] / se_ips[~relevant]) > 10


def test_proprank_with_trust_bias_ccp_is_monotone(trust_log):
    data, log = trust_log
    model = SVMPropRank(C=1.0, propensity=TRUST.trust_model()).fit(log)
    assert model.n_ccp_iter_ >= 2  # negative weights: a CCP, not one QP
    assert np.all(np.diff(model.objective_history_) <= 1e-9 * np.abs(model.objective_history_[:-1]).max())
    assert model.converged_
    plain = SVMPropRank(C=1.0, propensity=TRUST.propensity_model()).fit(log)
    assert plain.n_ccp_iter_ == 1
    assert not np.allclose(model.coef_, plain.coef_)


def test_propdcg_with_trust_bias_never_increases_objective(trust_log):
    data, log = trust_log
    model = SVMPropDCG(C=1.0, propensity=TRUST.trust_model()).fit(log)
    assert np.all(np.diff(model.objective_history_) <= 1e-9)
    assert model.objective_history_[-1] < model.objective_history_[0]


def test_affine_step_matches_cvxpy():
    """One CCP subproblem (positive hinges + the linearised negative ones) against cvxpy."""
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(0)
    data = make_ranking(n_queries=6, n_docs=(4, 6), n_features=4, random_state=1)
    from counterfactual_ltr.estimators.svm import click_pairs

    weights = rng.normal(size=data.n_docs)
    rows, Xl, i, j, _, owner, clicked = click_pairs(data, np.abs(weights))
    doc_w = weights[clicked]
    coef0 = rng.normal(size=data.n_features) * 0.3
    C_n = 0.7
    est = SVMPropRank(solver_tol=1e-10)
    result = est._affine_step(est._feasible_set(data.n_features), coef0, Xl, i, j, owner, doc_w, C_n, 1e-10,
                              warm=False, max_iter=1000)
    w = cp.Variable(data.n_features)
    pos, neg = doc_w[owner] > 0, doc_w[owner] < 0
    D = Xl[i] - Xl[j]
    active = neg & (1 - D @ coef0 > 0)
    lin = C_n * (-doc_w[owner[active]]) @ D[active]
    # The linear term enters as s * max(0, C_n + lin.w / s): >= lin.w + C_n s everywhere, equal near coef0.
    s = 10.0 * (1.0 + abs(float(lin @ coef0)) / C_n)
    assert C_n * s + lin @ coef0 > 0  # active (tight) at the linearisation point
    objective = (0.5 * cp.sum_squares(w) + C_n * doc_w[owner[pos]] @ cp.pos(1 - D[pos] @ w)
                 + cp.pos(C_n * s + lin @ w))
    cp.Problem(cp.Minimize(objective)).solve()
    np.testing.assert_allclose(result.coef, w.value, atol=1e-4)
