"""Learner parameters checked in ``fit`` whatever the others, one rule refusing a runaway C, and the edges of use.

* Options used only in some combinations (``l1_ratio`` with a penalty other than elastic net,
  constraints that never bear on the weights, a relevance model without ``predict_proba``) are
  errors in every combination.
* ``C``: every learner with one refuses, before any solving, a C whose scale
  ``kappa = C L(0) R^2 / margin^2`` exceeds its solver's limit; the limit's neighbourhood is
  tested on both sides, with the time a refused fit takes.
* A preprocessor whose width changes between fit and predict, and a ranker whose ``predict``
  returns the right number of values in the wrong shape, are errors naming them.
* Regression EM on a deterministic logger's log warns at the call; ``DeepPropDCG(dtype=np.int64)``
  is a clear error.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from sklearn.preprocessing import FunctionTransformer

from click_sim import PositionBasedClickModel, StochasticRanker, make_ranking, simulate_clicks
from counterfactual_ltr.estimators import DeepPropDCG, RankSVM, SLAMRanker, SVMPropDCG, SVMPropRank, SVMPropRBP
from counterfactual_ltr.estimators._base import C_SCALE_LIMITS, c_scale
from counterfactual_ltr.evaluation import clipped_ips_estimate, dr_estimate, ips_estimate, snips_estimate
from counterfactual_ltr.propensity import IdentificationWarning, estimate_propensities


@pytest.fixture(scope="module")
def data():
    data = make_ranking(n_queries=30, n_features=5, random_state=0)
    return data.subset(np.arange(29)) if data.n_docs % 2 else data      # an even number of rows


@pytest.fixture(scope="module")
def log(data):
    return simulate_clicks(data, data.X[:, 0], n_passes=3, random_state=0)


SVMS = (RankSVM, SVMPropRank, SVMPropDCG, SVMPropRBP)


def _fit(cls, data, log, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(**params).fit(data if cls is RankSVM else log)


# ----------------------------------------------------------------------------- options of some combinations

@pytest.mark.parametrize("cls", SVMS)
@pytest.mark.parametrize("penalty", ["l2", "l1", "elasticnet"])
@pytest.mark.parametrize("l1_ratio", [5, -0.1, float("nan"), "0.5"])
def test_l1_ratio_is_checked_whatever_the_penalty(cls, penalty, l1_ratio, data, log):
    with pytest.raises((ValueError, TypeError), match="l1_ratio"):
        _fit(cls, data, log, penalty=penalty, l1_ratio=l1_ratio)


def _constraints(kind):
    import cvxpy as cp

    return {"fresh variable": lambda w: [cp.Variable() >= 0],
            "fresh vector": lambda w: [cp.Variable(w.shape) >= 0],
            "constants": lambda w: [cp.Constant(1.0) >= 0],
            "empty": lambda w: [],
            "one of two misses w": lambda w: [w[0] >= 0, cp.Variable() <= 1]}[kind]


@pytest.mark.parametrize("cls", SVMS)
@pytest.mark.parametrize("kind", ["fresh variable", "fresh vector", "constants", "empty", "one of two misses w"])
def test_constraints_that_never_bear_on_the_weights_are_refused(cls, kind, data, log):
    with pytest.raises(ValueError, match="constraint"):
        _fit(cls, data, log, constraints=_constraints(kind))


def test_constraints_through_an_auxiliary_variable_are_accepted(data, log):
    """w[0] <= t, t <= 0.1: the constraint on t bears on w through t."""
    import cvxpy as cp

    def constraints(w):
        t = cp.Variable()
        return [w[0] <= t, t <= 0.1]

    model = _fit(SVMPropRank, data, log, C=10.0, constraints=constraints)
    assert model.coef_[0] <= 0.1 + 1e-6


@pytest.mark.parametrize("relevance_model, needle", [
    ("Ridge", "classifier"), ("LinearSVC", "predict_proba"), ("KNeighborsClassifier", "sample_weight"),
    ("object", "classifier"),
])
def test_the_relevance_model_must_be_a_weighted_probabilistic_classifier(relevance_model, needle, data):
    import sklearn.linear_model
    import sklearn.neighbors
    import sklearn.svm

    model = {"Ridge": sklearn.linear_model.Ridge, "LinearSVC": sklearn.svm.LinearSVC,
             "KNeighborsClassifier": sklearn.neighbors.KNeighborsClassifier, "object": object}[relevance_model]()
    log = simulate_clicks(data, data.X[:, 0], n_passes=2, random_state=0)
    with pytest.raises(TypeError, match=f"relevance_model.*{needle}|{needle}.*relevance_model"):
        estimate_propensities(log, "em", relevance_model=model, n_bootstrap=0)


# ----------------------------------------------------------------------------- C

def _kappa(cls, C, X, **params):
    """kappa as the learner computes it, read by switching its check for a recorder."""
    from counterfactual_ltr.estimators import slam, svm

    seen = []
    record = lambda est, C_s, loss, rows, *, solver, margin=1.0: seen.append((c_scale(C_s, loss, rows, margin), solver))
    saved = svm.check_C_scale, slam.check_C_scale
    svm.check_C_scale = slam.check_C_scale = record
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls(C=C, max_iter=3, **params).fit(X)
    finally:
        svm.check_C_scale, slam.check_C_scale = saved
    return seen[0]


@pytest.mark.parametrize("cls, X, params", [
    (SLAMRanker, "data", {}), (SLAMRanker, "log", {}), (RankSVM, "data", {}), (SVMPropRank, "log", {}),
    (SVMPropDCG, "log", {}), (SVMPropRBP, "log", {}), (SVMPropDCG, "log", {"penalty": "l1"}),
    (RankSVM, "log", {"bounds": (-1.0, 1.0)}),
])
def test_one_rule_refuses_a_runaway_c_at_once_for_every_learner(cls, X, params, data, log):
    """Just above the learner's limit: refused at once, naming C and the largest C accepted; just below: fitted."""
    X = data if X == "data" else log
    kappa, solver = _kappa(cls, 1.0, X, **params)
    limit = C_SCALE_LIMITS[solver]
    too_large = 2.0 * limit / kappa
    start = time.process_time()
    with pytest.raises(ValueError, match=r"C = .* is too large for this data.*largest C accepted on this data is"):
        cls(C=too_large, **params).fit(X)
    assert time.process_time() - start < 2.0
    assert _kappa(cls, 0.5 * limit / kappa, X, **params)[0] <= limit


@pytest.mark.parametrize("C", [1e12, 1e30])
def test_the_issues_slam_case_is_refused_at_once(C, data):
    start = time.process_time()
    with pytest.raises(ValueError, match="SLAMRanker: C = .* too large"):
        SLAMRanker(C=C).fit(data)
    assert time.process_time() - start < 2.0


def test_c_scale_is_the_bound_on_optimal_score_differences(data):
    """0.5||w*||^2 <= C L(0): two rows' optimal scores differ by at most sqrt(2 kappa) margins (RankSVM, exact)."""
    from counterfactual_ltr._segments import within_query_pairs

    i, j = within_query_pairs(data.query_offsets)
    keep = data.y[i] > data.y[j]
    for C in (0.1, 10.0, 1000.0):
        model = RankSVM(C=C, tol=1e-10).fit(data)
        kappa = c_scale(C / data.n_queries, float(keep.sum()), data.X)
        scores = data.X @ model.coef_
        spread = max(np.ptp(scores[data.query_offsets[q]:data.query_offsets[q + 1]]) for q in range(data.n_queries))
        assert spread <= np.sqrt(2 * kappa)


def test_deep_prop_dcg_has_no_c_and_refuses_an_integer_dtype(log):
    for dtype in (np.int64, np.int32, np.float16, "bool", np.complex128):
        with pytest.raises(ValueError, match="dtype must be float32 or float64"):
            DeepPropDCG(dtype=dtype, hidden_layer_sizes=(3,), max_epochs=1).fit(log)
    with pytest.raises(TypeError, match="dtype"):
        DeepPropDCG(dtype="not a dtype", hidden_layer_sizes=(3,), max_epochs=1).fit(log)
    assert "C" not in DeepPropDCG().get_params()


# ----------------------------------------------------------------------------- edges of use

def _narrowing():
    """A transformer that keeps every column on the training rows and drops two on short inputs."""
    return FunctionTransformer(lambda X: X if X.shape[0] > 50 else X[:, :-2])


@pytest.mark.parametrize("cls", [RankSVM, SVMPropDCG, SLAMRanker, DeepPropDCG])
def test_a_preprocessor_that_changes_width_is_named(cls, data, log):
    params = {"hidden_layer_sizes": (3,), "max_epochs": 1} if cls is DeepPropDCG else {}
    model = _fit(cls, data, log if cls is DeepPropDCG else data if cls in (RankSVM, SLAMRanker) else log,
                 preprocessor=_narrowing(), **params)
    with pytest.raises(ValueError, match="preprocessor turned .* fitted on 5 columns"):
        model.predict(data.X[:10])


class _Halves:
    def predict(self, X):
        return np.zeros((len(X) // 2, 2))


class _Column:
    def predict(self, X):
        return np.asarray(X)[:, :1]


@pytest.mark.parametrize("estimate", [ips_estimate, snips_estimate, clipped_ips_estimate, dr_estimate])
def test_a_ranker_with_misshapen_scores_is_refused(estimate, log):
    with pytest.raises(ValueError, match=r"_Halves\.predict returned shape \(\d+, 2\)"):
        estimate(log, _Halves())
    # (n, 1) is one score per row: accepted, equal to the flat scores
    assert estimate(log, _Column()).value == pytest.approx(estimate(log, log.data.X[:, 0]).value)


def test_an_aggregate_refuses_misshapen_scores_too(log):
    agg = log.aggregate()
    for value in (agg.ips_value, agg.snips_value):
        with pytest.raises(ValueError, match=r"_Halves\.predict returned shape"):
            value(_Halves())


@pytest.mark.parametrize("ranker, warns", [("deterministic", True), ("stochastic", False)])
def test_regression_em_warns_on_a_deterministic_logger(ranker, warns):
    data = make_ranking(n_queries=150, random_state=1)
    logger = data.X[:, 0] if ranker == "deterministic" else StochasticRanker(data.X[:, 0], 1.0)
    log = simulate_clicks(data, logger, PositionBasedClickModel(eta=1.0), n_passes=30, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimate_propensities(log, "em", max_position=4, n_bootstrap=5, random_state=0)
    found = [w for w in caught if issubclass(w.category, IdentificationWarning)]
    assert bool(found) == warns
    if warns:
        message = str(found[0].message)
        assert "one position" in message and "intervals" in message
        assert found[0].filename == __file__         # at the caller's line, not inside the library
    for method in ("swap", "harvest", "trust_em"):   # the other methods do not warn about it
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                estimate_propensities(log, method, max_position=4, n_bootstrap=0)
            except ValueError:
                pass
        assert not [w for w in caught if issubclass(w.category, IdentificationWarning)]


def test_a_max_position_beyond_every_session_is_refused_before_allocating(log):
    start = time.process_time()
    for K in (log.session_offsets[1] + 5, 2**40):
        with pytest.raises(ValueError, match="is never shown"):
            estimate_propensities(log, "em", max_position=K, n_bootstrap=0)
    assert time.process_time() - start < 2.0


# ----------------------------------------------------------------------------- options that are booleans

@pytest.mark.parametrize("value", ["no", "False", 0, 1, None, [False]])
def test_boolean_options_take_booleans_only(value, data, log):
    """An option read by truthiness would take 'no' as on: every one is a ValueError naming the option."""
    from counterfactual_ltr.click_models import RankOnlyModel
    from counterfactual_ltr.evaluation import compare_rankers, validation_report
    from counterfactual_ltr.model_selection import grid_search
    from counterfactual_ltr.models import LinearModel

    calls = {"propagate_propensity": lambda: compare_rankers(log, data.X[:, 1], propagate_propensity=value),
             "propagate_propensity ": lambda: validation_report({"f1": data.X[:, 1]}, log, propagate_propensity=value),
             "shuffle": lambda: DeepPropDCG(shuffle=value).fit(log),
             "early_stopping": lambda: DeepPropDCG(early_stopping=value).fit(log),
             "by_position": lambda: RankOnlyModel().fit(log).perplexity(log, by_position=value),
             "extend": lambda: grid_search(SVMPropRank(), log, "C", [1.0], cv=2, extend=value),
             "fit_intercept": lambda: LinearModel(2, fit_intercept=value)}
    for name, call in calls.items():
        with pytest.raises(ValueError, match=f"{name.strip()} must be True or False, got "):
            call()


def test_numpy_booleans_are_booleans(data, log):
    from counterfactual_ltr._validation import check_bool
    from counterfactual_ltr.click_models import RankOnlyModel

    assert check_bool(np.bool_(False), "x") is False and check_bool(np.array(True), "x") is True
    model = RankOnlyModel().fit(log)
    assert model.perplexity(log, by_position=np.True_).shape == (int(log.positions.max()),)
