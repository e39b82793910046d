"""Learners under hostile input: every bad hyper-parameter is a named error, every degenerate fit says so.

The property of the hypothesis tests: a ``ValueError``/``TypeError`` whose message names the
parameter, or a fit whose weights and predictions are finite -- never another exception type,
never NaN. The fixed cases pin the examples of issue 11 (no truncation of counts, no NaN/inf
tolerances, no ``max()`` hiding ``solver_tol=-1``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from click_sim import make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog, RankingDataset, metrics, solvers, surrogates
from counterfactual_ltr.estimators import RankSVM, SLAMRanker, SVMPropDCG, SVMPropRank, SVMPropRBP
from counterfactual_ltr.estimators.deep import DeepPropDCG
from counterfactual_ltr.online import (Feedback, MaxPairPerceptron, OnlineListNet, SLAMPerceptron,
                                       TopKFeedbackRanker)

DATA = make_ranking(n_queries=8, n_docs=(3, 6), n_features=3, random_state=0)
LOG = simulate_clicks(DATA, DATA.X[:, 0], n_passes=2, random_state=0)

# Values of every kind a hostile user passes where a number belongs.
ODD = [2.5, float("nan"), float("inf"), float("-inf"), -1, 0, "1", True, None, [1], 1j]


def _fit(est):
    if isinstance(est, (RankSVM, SLAMRanker)):
        return est.fit(DATA.X, DATA.y, qid=DATA.qid)
    return est.fit(LOG)


def _outputs(model):
    """Weights and predictions of a fitted learner (batch estimator or online learner)."""
    out = [np.asarray(model.predict(DATA.X))]
    if hasattr(model, "coef_"):
        out.append(np.asarray(model.coef_))
    return out


def _clear_error_or_finite(make, name):
    """Run ``make()``: a TypeError/ValueError naming ``name``, or a model with finite outputs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning etc. are legal outcomes here
        try:
            model = make()
        except (TypeError, ValueError) as err:
            assert name in str(err), f"{type(err).__name__} does not name {name!r}: {err}"
            return None
    for out in _outputs(model):
        assert np.all(np.isfinite(out)), f"{name}: non-finite output {out}"
    return model


# --------------------------------------------------------------------------- fixed cases of the issue


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")  # margin=1e308 overflows before the error
@pytest.mark.parametrize("make, name, kind", [
    (lambda: SVMPropDCG(max_ccp_iter=2.5), "max_ccp_iter", ValueError),
    (lambda: SVMPropDCG(max_iter=2.5), "max_iter", ValueError),
    (lambda: SVMPropDCG(solver_tol=-1), "solver_tol", ValueError),
    (lambda: SVMPropDCG(solver_tol=float("nan")), "solver_tol", ValueError),
    (lambda: SVMPropDCG(tol=float("inf")), "tol", ValueError),
    (lambda: SVMPropDCG(C="1"), "C", TypeError),
    (lambda: SVMPropRank(C=None), "C", TypeError),
    (lambda: SVMPropRBP(p=1.0), "p", ValueError),
    (lambda: SVMPropRBP(p="0.5"), "p", TypeError),
    (lambda: RankSVM(max_iter=float("inf")), "max_iter", ValueError),
    (lambda: RankSVM(tol=True), "tol", TypeError),
    (lambda: SLAMRanker(max_iter=2.5), "max_iter", ValueError),
    (lambda: SLAMRanker(threshold=float("nan"), weights="ap"), "threshold", ValueError),
    (lambda: SLAMRanker(weights="ndcg@k", k=2.5), "k", ValueError),
    (lambda: DeepPropDCG(max_epochs=2.5), "max_epochs", ValueError),
    (lambda: DeepPropDCG(batch_size="10"), "batch_size", TypeError),
    (lambda: DeepPropDCG(learning_rate=float("nan")), "learning_rate", ValueError),
    (lambda: DeepPropDCG(beta1=1.0), "beta1", ValueError),
    (lambda: DeepPropDCG(epsilon=0.0), "epsilon", ValueError),
    (lambda: DeepPropDCG(hidden_layer_sizes=(2.5,)), "hidden_layer_sizes", ValueError),
    (lambda: DeepPropDCG(hidden_layer_sizes="ab"), "hidden_layer_sizes", TypeError),
    (lambda: DeepPropDCG(random_state="seed"), "random_state", TypeError),
    (lambda: DeepPropDCG(hidden_layer_sizes=(2,), max_epochs=1, alpha=1e308), "alpha", ValueError),
    (lambda: SLAMRanker(margin=1e308), "margin", ValueError),
    (lambda: DeepPropDCG(activation=["relu"]), "activation", ValueError),
    (lambda: DeepPropDCG(metric_params=5), "metric_params", TypeError),
    (lambda: DeepPropDCG(lr_schedule=np.array([1.0, 2.0])), "lr_schedule", ValueError),
    (lambda: SVMPropRBP(p=0.5, C=[1.0]), "C", TypeError),
])
def test_bad_estimator_parameter_is_a_named_error(make, name, kind):
    est = make()
    with pytest.raises(kind, match=name):
        _fit(est)


def test_huge_batch_size_is_one_batch():
    from counterfactual_ltr.estimators.deep import query_batches

    assert query_batches([0, 4, 8, 9], 2**70).tolist() == query_batches([0, 4, 8, 9], 9).tolist() == [0, 3]
    a = DeepPropDCG(hidden_layer_sizes=(2,), max_epochs=2, batch_size=2**70, random_state=0).fit(LOG)
    b = DeepPropDCG(hidden_layer_sizes=(2,), max_epochs=2, batch_size=LOG.data.n_docs, random_state=0).fit(LOG)
    np.testing.assert_array_equal(a.predict(DATA.X), b.predict(DATA.X))


def test_whole_float_counts_are_accepted_unchanged():
    # 3.0 is a whole number: accepted, and the stored parameter is not rewritten (scikit-learn convention).
    est = SVMPropDCG(max_ccp_iter=3.0, max_iter=50.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(LOG)
    assert est.max_ccp_iter == 3.0 and isinstance(est.max_ccp_iter, float)
    assert est.n_ccp_iter_ <= 3


@pytest.mark.parametrize("make, name, kind", [
    (lambda: TopKFeedbackRanker(k=2.5), "k", ValueError),
    (lambda: TopKFeedbackRanker(radius=float("nan")), "radius", ValueError),
    (lambda: TopKFeedbackRanker(gamma="0.1"), "gamma", TypeError),
    (lambda: TopKFeedbackRanker(eta_power=float("nan")), "eta", ValueError),
    (lambda: TopKFeedbackRanker(surrogate=["squared"]), "surrogate", ValueError),
    (lambda: TopKFeedbackRanker(random_state="seed").reset(3), "random_state", TypeError),
    (lambda: TopKFeedbackRanker(random_state=-1).reset(3), "random_state", ValueError),
    (lambda: TopKFeedbackRanker(k=np.array(2.5)).feedback_k, "k", ValueError),
    (lambda: SLAMPerceptron(weights="ndcg@k", k=2.5), "k", ValueError),
    (lambda: SLAMPerceptron(threshold="1"), "threshold", TypeError),
    (lambda: MaxPairPerceptron(margin=float("inf")), "margin", ValueError),
    (lambda: OnlineListNet(eta_power="x"), "eta", TypeError),
    (lambda: OnlineListNet(eta=True), "eta", TypeError),
])
def test_bad_online_parameter_is_a_named_error(make, name, kind):
    with pytest.raises(kind, match=name):
        make()


@pytest.mark.parametrize("make", [lambda: TopKFeedbackRanker(), lambda: SLAMPerceptron(),
                                  lambda: MaxPairPerceptron(), lambda: OnlineListNet()])
def test_online_learner_never_resets_silently_on_another_width(make):
    learner = _run_rounds(make())
    before = learner.coef_.copy()
    with pytest.raises(ValueError, match="reset"):
        learner.rank(np.zeros((4, DATA.n_features + 1)))
    np.testing.assert_array_equal(learner.coef_, before)
    with pytest.raises(ValueError, match="shape"):
        learner.predict(np.zeros((4, DATA.n_features + 1)))
    with pytest.raises(ValueError, match="non-finite"):
        learner.predict(np.full((2, DATA.n_features), np.nan))
    with pytest.raises(ValueError, match="no weights"):
        make().predict(DATA.X)


@pytest.mark.parametrize("make", [lambda: TopKFeedbackRanker(eta=1e308), lambda: SLAMPerceptron(eta=1e308),
                                  lambda: MaxPairPerceptron(eta=1e308), lambda: OnlineListNet(eta=1e308),
                                  lambda: TopKFeedbackRanker("ranksvm", eta=1e308)])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the overflow itself, before the error
def test_online_overflow_is_an_error_never_nan_weights(make):
    learner = make()
    try:
        _run_rounds(learner, rounds=8)
    except ValueError as err:
        assert "eta" in str(err)
    assert np.all(np.isfinite(learner.coef_))


def test_topk_projection_of_an_overflowing_step_is_exact():
    # With eta = 1e308 the projected step lands on the sphere of radius U along -z, as the algebra says.
    learner = _run_rounds(TopKFeedbackRanker("ranksvm", eta=1e308, radius=2.0), rounds=8)
    assert np.linalg.norm(learner.coef_) == pytest.approx(2.0) or not np.any(learner.coef_)


X6 = np.random.default_rng(0).normal(size=(6, 3))


@pytest.mark.parametrize("kwargs, name, kind", [
    ({"tol": -1e-3}, "tol", ValueError), ({"tol": "1e-3"}, "tol", TypeError),
    ({"max_iter": 2.5}, "max_iter", ValueError), ({"max_iter": None}, "max_iter", TypeError),
    ({"C": float("inf")}, "C", ValueError), ({"C": [1.0]}, "C", TypeError),
    ({"margin": float("nan")}, "margin", ValueError),
])
def test_bad_solver_parameter_is_a_named_error(kwargs, name, kind):
    with pytest.raises(kind, match=name):
        solvers.solve_pairwise_hinge(X6, [0, 1], [2, 3], [1.0, 1.0], **{"C": 1.0, **kwargs})
    if name != "margin":
        oracle = solvers.pairwise_hinge_oracle(X6, [0, 1], [2, 3], [1.0, 1.0])
        with pytest.raises(kind, match=name):
            solvers.solve_regularized(oracle, 3, **{"C": 1.0, **kwargs})


@pytest.mark.parametrize("n_features", [1e308, 2**70, np.array(2.0), 4])
def test_regularized_solver_names_a_wrong_n_features(n_features):
    oracle = solvers.pairwise_hinge_oracle(X6, [0, 1], [2, 3], [1.0, 1.0])
    with pytest.raises(ValueError, match="n_features"):
        solvers.solve_regularized(oracle, n_features, 1.0)


def test_solver_c_beyond_float_range_is_a_named_error():
    with pytest.raises(ValueError, match="C = 1e"):
        solvers.solve_pairwise_hinge(X6, [0, 1], [2, 3], [1.0, 1.0], 1e300)
    oracle = solvers.pairwise_hinge_oracle(X6, [0, 1], [2, 3], [1.0, 1.0])
    with pytest.raises(ValueError, match="C = 1e"):
        solvers.solve_regularized(oracle, 3, 1e300)
    with pytest.raises(ValueError, match="C = .* too large"):  # the solver sees C / n_clicks
        SVMPropRank(C=1e300).fit(LOG)


@pytest.mark.parametrize("C", [1e10, 1e20, 1e60])
def test_solver_at_huge_c_warns_instead_of_failing(C):
    # Past float64's resolution the Newton system or the smoothing breaks down: a warning, a finite point.
    with pytest.warns(ConvergenceWarning):
        res = solvers.solve_pairwise_hinge(X6, [0, 1, 2, 0], [2, 3, 4, 5], np.ones(4), C)
    assert not res.converged and np.all(np.isfinite(res.coef))


@pytest.mark.parametrize("call, name, kind", [
    (lambda s, y, o: metrics.ndcg(s, y, o, k=2.5), "k", ValueError),
    (lambda s, y, o: metrics.dcg(s, y, o, k="3"), "k", TypeError),
    (lambda s, y, o: metrics.rbp(s, y, o, p=float("nan")), "p", ValueError),
    (lambda s, y, o: metrics.average_precision(s, y, o, threshold="1"), "threshold", TypeError),
    (lambda s, y, o: metrics.ndcg(s, y, o, no_relevant=True), "no_relevant", TypeError),
    (lambda s, y, o: surrogates.pairwise_hinge(s, y, o, margin=float("nan")), "margin", ValueError),
    (lambda s, y, o: surrogates.lambda_hinge_bound(s, y, o, margin=0.0), "margin", ValueError),
    (lambda s, y, o: surrogates.slam_loss(s, y, o, weights="ndcg@k", k=1.5), "k", ValueError),
    (lambda s, y, o: surrogates.smooth_dcg_at1_loss(s, y, o, epsilon="0.1"), "epsilon", TypeError),
    (lambda s, y, o: metrics.get_lambda("prec@k", k=2.5), "k", ValueError),
])
def test_bad_metric_and_surrogate_parameter_is_a_named_error(call, name, kind):
    with pytest.raises(kind, match=name):
        call(DATA.X[:, 0], DATA.y, DATA.query_offsets)


# --------------------------------------------------------------------------- propensity models


@pytest.mark.parametrize("make", [
    lambda p: SVMPropRank(propensity=p), lambda p: SVMPropDCG(propensity=p), lambda p: SLAMRanker(propensity=p),
    lambda p: DeepPropDCG(hidden_layer_sizes=(2,), max_epochs=1, propensity=p),
    lambda p: DeepPropDCG(hidden_layer_sizes=(2,), max_epochs=1, early_stopping=True, propensity=p),
])
def test_estimators_take_propensities_only_through_the_checked_path(make, monkeypatch):
    # propensities_at validates what a propensity model returns (values, shape), for logs and
    # aggregates alike; an estimator that called the model itself would bypass those checks.
    import counterfactual_ltr.aggregate
    import counterfactual_ltr.clicklog

    calls = []

    def spy(model, positions):
        calls.append(model)
        raise ValueError("propensities checked here")

    monkeypatch.setattr(counterfactual_ltr.aggregate, "propensities_at", spy)
    monkeypatch.setattr(counterfactual_ltr.clicklog, "propensities_at", spy)
    with pytest.raises(ValueError, match="checked here"):
        make(0.5).fit(LOG)
    assert calls


# --------------------------------------------------------------------------- degenerate solutions


def _one_document_clicks_log():
    """Queries 0-2 have one candidate each and all the clicks; query 3 (three candidates) has none."""
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.5, 0.2], [0.1, 0.9], [0.3, 0.3]])
    data = RankingDataset(X, [1, 1, 1, 0, 1, 0], [0, 1, 2, 3, 3, 3])
    return ClickLog(data, [0, 1, 2, 3], [0, 1, 2, 3, 6], [0, 1, 2, 3, 4, 5], [1, 1, 1, 0, 0, 0])


@pytest.mark.parametrize("make", [
    lambda: SVMPropDCG(), lambda: SVMPropRank(), lambda: SVMPropRBP(), lambda: RankSVM(),
])
def test_no_pairs_warns_and_reports_nothing_learned(make):
    log = _one_document_clicks_log()
    with pytest.warns(UserWarning, match="single candidate document"):
        model = make().fit(log)
    assert np.all(model.coef_ == 0)
    assert model.converged_ is False or model.converged_ == False  # noqa: E712 (numpy bool)
    assert np.all(np.asarray(model.n_iter_) == 0)
    assert np.all(np.isfinite(model.predict(log.data.X)))


def test_features_equal_within_pairs_warn():
    # Every clicked query's documents share their features: no weight changes any hinge.
    X = np.repeat(np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]]), 3, axis=0)
    data = RankingDataset(X, [1, 0, 0] * 3, np.repeat([0, 1, 2], 3))
    log = simulate_clicks(data, np.zeros(9), n_passes=20, random_state=0)
    for est in (SVMPropDCG(), SVMPropRank()):
        with pytest.warns(UserWarning, match="features do not differ"):
            model = est.fit(log)
        assert np.all(model.coef_ == 0)


def test_tiny_c_zero_solution_warns_and_large_c_does_not():
    with pytest.warns(UserWarning, match="C is too small"):
        SVMPropRank(C=1e-9).fit(LOG)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert np.any(SVMPropRank(C=10.0).fit(LOG).coef_ != 0)


@pytest.mark.parametrize("learning_rate", [1e4, 1e6, 1e10])
@pytest.mark.parametrize("hidden, activation", [((8,), "sigmoid"), ((), "identity"), ((4,), "relu")])
def test_deep_propdcg_divergence_warns_stops_and_keeps_finite_weights(learning_rate, hidden, activation):
    data = make_ranking(n_queries=40, random_state=0)
    log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    model = DeepPropDCG(hidden_layer_sizes=hidden, activation=activation, learning_rate=learning_rate,
                        max_epochs=20, random_state=0)
    with pytest.warns(ConvergenceWarning, match="diverged at epoch"):
        model.fit(log)
    assert model.converged_ is False and model.n_iter_ < 20 and len(model.loss_curve_) == model.n_iter_
    assert model.loss_curve_[-1] > model.initial_loss_ + 100 * max(1.0, abs(model.initial_loss_))
    scores = model.predict(data.X)
    assert np.all(np.isfinite(scores))
    # The restored parameters are those the lowest-loss epoch started from: their loss is near the best.
    assert model.objective(log) <= model.initial_loss_ + 1e-6 * max(1.0, abs(model.initial_loss_)) + \
        abs(min(model.loss_curve_) - model.initial_loss_) + 1.0


def test_deep_propdcg_divergence_in_the_first_epoch_restores_the_initial_parameters():
    # Several batches per epoch: the first epoch's own steps blow up; the initial parameters come back.
    data = make_ranking(n_queries=40, random_state=0)
    log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    model = DeepPropDCG(hidden_layer_sizes=(8,), learning_rate=1e6, batch_size=50, max_epochs=5, random_state=0)
    with pytest.warns(ConvergenceWarning, match="diverged at epoch 1"):
        model.fit(log)
    assert model.n_iter_ == 1 and model.converged_ is False
    assert model.objective(log) == pytest.approx(model.initial_loss_, rel=1e-12)


def test_deep_propdcg_sane_fit_converges_without_warning():
    data = make_ranking(n_queries=40, random_state=0)
    log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = DeepPropDCG(hidden_layer_sizes=(8,), learning_rate=1e-2, max_epochs=10, random_state=0).fit(log)
    assert model.converged_ is True and model.n_iter_ == 10
    assert model.loss_curve_[-1] < model.initial_loss_


def test_deep_propdcg_uphill_training_is_reported():
    # lr = 100 does not blow up past the divergence bound but ends above the initial loss.
    data = make_ranking(n_queries=40, random_state=0)
    log = simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0)
    with pytest.warns(ConvergenceWarning, match="above the initial"):
        model = DeepPropDCG(hidden_layer_sizes=(8,), activation="relu", learning_rate=100.0, max_epochs=20,
                            random_state=0).fit(log)
    assert model.converged_ is False and model.n_iter_ == 20


# --------------------------------------------------------------------------- property-based

_REALS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**6),
                   st.sampled_from(ODD))
# Counts: bounded so that an accepted value keeps the fit short (1e300 epochs is legal, but slow).
_COUNTS = st.one_of(st.floats(-5, 40, allow_nan=False), st.integers(-5, 40),
                    st.sampled_from(ODD + [np.int64(3), np.array(3.0)]))
_PROB = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

ESTIMATOR_PARAMS = {
    RankSVM: ({"C": _REALS, "tol": _REALS, "max_iter": _COUNTS}, {}),
    SVMPropRank: ({"C": _REALS, "solver_tol": _REALS, "max_iter": _COUNTS}, {}),
    SVMPropDCG: ({"C": _REALS, "tol": _REALS, "solver_tol": _REALS, "max_iter": _COUNTS, "max_ccp_iter": _COUNTS},
                 {}),
    SVMPropRBP: ({"C": _REALS, "p": _REALS, "max_ccp_iter": _COUNTS}, {}),
    SLAMRanker: ({"C": _REALS, "margin": _REALS, "tol": _REALS, "max_iter": _COUNTS, "threshold": _REALS},
                 {"max_iter": 50}),
    DeepPropDCG: ({"alpha": _REALS, "learning_rate": _REALS, "batch_size": _COUNTS, "max_epochs": _COUNTS,
                   "validation_fraction": _REALS, "n_iter_no_change": _COUNTS, "tol": _REALS, "margin": _REALS,
                   "beta1": _REALS, "beta2": _REALS, "epsilon": _REALS},
                  {"hidden_layer_sizes": (3,), "max_epochs": 3, "early_stopping": True}),
}


@pytest.mark.parametrize("cls", list(ESTIMATOR_PARAMS), ids=lambda c: c.__name__)
@_PROB
@given(data=st.data())
def test_estimator_hyper_parameters_clear_error_or_finite_fit(cls, data):
    strategies, base = ESTIMATOR_PARAMS[cls]
    name = data.draw(st.sampled_from(sorted(strategies)), label="parameter")
    value = data.draw(strategies[name], label="value")
    if cls is DeepPropDCG and name == "max_epochs" and isinstance(value, (int, float)) and value > 5:
        value = 5  # keep each example short; larger counts take the same path
    _clear_error_or_finite(lambda: _fit(cls(**{**base, name: value})), name)


ONLINE_PARAMS = {
    TopKFeedbackRanker: {"k": _COUNTS, "eta": _REALS, "gamma": _REALS, "radius": _REALS, "eta_power": _REALS,
                         "gamma_power": _REALS, "epsilon": _REALS},
    SLAMPerceptron: {"eta": _REALS, "margin": _REALS, "threshold": _REALS},
    MaxPairPerceptron: {"eta": _REALS, "margin": _REALS, "threshold": _REALS},
    OnlineListNet: {"eta": _REALS, "eta_power": _REALS},
}


def _run_rounds(learner, rounds=3):
    learner = learner.reset(DATA.n_features)
    for q in range(rounds):
        lo, hi = DATA.query_offsets[q], DATA.query_offsets[q + 1]
        X, y = DATA.X[lo:hi], DATA.y[lo:hi]
        shown = learner.rank(X)
        k = learner.feedback_k
        learner.update(X, Feedback(shown, y[shown] if k is None else y[shown][:k]))
    return learner


@pytest.mark.parametrize("cls", list(ONLINE_PARAMS), ids=lambda c: c.__name__)
@_PROB
@given(data=st.data())
def test_online_hyper_parameters_clear_error_or_finite_run(cls, data):
    strategies = ONLINE_PARAMS[cls]
    name = data.draw(st.sampled_from(sorted(strategies)), label="parameter")
    value = data.draw(strategies[name], label="value")
    # The schedule powers are reported as part of the rate they shape ("eta schedule power").
    named = name.replace("_power", "")
    _clear_error_or_finite(lambda: _run_rounds(cls(**{name: value})), named)


@_PROB
@given(name=st.sampled_from(["C", "tol", "max_iter", "margin"]), value=_REALS)
def test_solver_parameters_clear_error_or_finite_point(name, value):
    if name == "max_iter" and isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1000:
        value = 1000

    def solve():
        return solvers.solve_pairwise_hinge(X6, [0, 1, 2], [2, 3, 4], [1.0, 0.5, 2.0], **{"C": 1.0, name: value})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = solve()
        except (TypeError, ValueError) as err:
            assert name in str(err)
            return
    assert np.all(np.isfinite(res.coef)) and np.isfinite(res.objective)
