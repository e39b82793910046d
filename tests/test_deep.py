"""Deep PropDCG: the objective and its gradients through the surrogate, the estimator's behaviour, training."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog
from counterfactual_ltr.estimators import DeepPropDCG
from counterfactual_ltr.estimators.deep import (DivergenceError, deep_propdcg_objective, paper_lr_schedule,
                                                query_batches)
from counterfactual_ltr.estimators.svm import SVMPropDCG, click_pair_set
from counterfactual_ltr.models import ACTIVATIONS, MLP

# ---------------------------------------------------------------------------- helpers


def _log(seed=0, n_queries=40, n_passes=5, n_features=5, n_docs=(4, 12)):
    data = make_ranking(n_queries=n_queries, n_docs=n_docs, n_features=n_features, random_state=seed)
    log = simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(1.0, 0.1, 1.0), n_passes, random_state=seed)
    return data, log


def _train_arrays(log):
    agg = log.aggregate()
    data = agg.data
    rows = data.rows_of(agg.queries)
    lengths = data.query_lengths[agg.queries]
    offsets = np.r_[0, np.cumsum(lengths)]
    return data.X[rows], agg.weights[rows], offsets, agg.n_clicks


def _explicit_bound(scores, W, offsets, lam=lambda r: -1.0 / np.log2(1.0 + r)):
    """sum_j W_j lambda(1 + H_j), H_j = sum_{y != j} max(0, 1 - (s_j - s_y)), with explicit loops over pairs."""
    total = 0.0
    for q in range(len(offsets) - 1):
        for j in range(offsets[q], offsets[q + 1]):
            if W[j] == 0:
                continue
            H = sum(max(0.0, 1.0 - (scores[j] - scores[y])) for y in range(offsets[q], offsets[q + 1]) if y != j)
            total += W[j] * lam(1.0 + H)
    return total


def _numeric(model, f, h=1e-6):
    out = []
    for p in model.params:
        g = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + h
            up = f()
            p[idx] = old - h
            down = f()
            p[idx] = old
            g[idx] = (up - down) / (2 * h)
        out.append(g)
    return out


# ------------------------------------------------------------------ objective and gradients


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("alpha", [0.0, 0.3])
def test_objective_gradient_through_surrogate(activation, alpha):
    """Chain rule surrogate -> MLP (and the weight-decay term) against central finite differences."""
    _, log = _log(seed=1, n_queries=6, n_passes=4, n_features=3)
    X, W, offsets, n = _train_arrays(log)
    net = MLP((4,), activation, random_state=3).initialize(X.shape[1])
    net.params[1][:] = np.linspace(-0.5, 0.5, 4)
    obj, grads = deep_propdcg_objective(net, X, W, offsets, alpha=alpha, n_clicks=n)
    numeric = _numeric(net, lambda: deep_propdcg_objective(net, X, W, offsets, alpha=alpha, n_clicks=n)[0])
    for a, b in zip(grads, numeric):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-8)
    # The objective is the explicit bound (per click) plus the penalty.
    scores = net.predict(X)
    penalty = 0.5 * alpha * sum(np.sum(p * p) for p in net.params if p.ndim == 2)
    assert obj == pytest.approx(_explicit_bound(scores, W, offsets) / n + penalty, rel=1e-12)


def test_linear_network_is_the_svm_propdcg_bound():
    """One layer + identity: the Deep PropDCG objective is the SVM PropDCG hinge bound sum_j W_j lambda(1 + H_j)."""
    data, log = _log(seed=2, n_queries=10, n_passes=6, n_features=4)
    X, W, offsets, n = _train_arrays(log)
    net = MLP((), "identity").initialize(X.shape[1])
    w = np.random.default_rng(0).standard_normal(X.shape[1])
    net.set_parameters([w[:, None], np.array([0.25])])
    obj, grads = deep_propdcg_objective(net, X, W, offsets, n_clicks=n)
    assert obj == pytest.approx(_explicit_bound(X @ w, W, offsets) / n, rel=1e-12)
    # ... and SVM PropDCG's objective 0.5||w||^2 + (C/n) sum_j W_j lambda(1 + H_j) with C = 1, alpha = 1.
    from counterfactual_ltr.metrics import get_lambda

    agg = log.aggregate()
    _, Xl, pairs, clicked = click_pair_set(data, agg.weights)
    svm_obj = SVMPropDCG(C=1.0)._objective(w, Xl, pairs, agg.weights[clicked], get_lambda("dcg"), 1.0 / n)
    obj_alpha1, _ = deep_propdcg_objective(net, X, W, offsets, alpha=1.0, n_clicks=n)
    assert obj_alpha1 == pytest.approx(svm_obj, rel=1e-12)
    # The bias does not change the bound; its gradient vanishes.
    assert abs(grads[1][0]) < 1e-12


def test_objective_other_metric_and_divergence_detection():
    _, log = _log(seed=3, n_queries=6, n_passes=3, n_features=3)
    X, W, offsets, n = _train_arrays(log)
    net = MLP((), "identity").initialize(X.shape[1])
    obj, _ = deep_propdcg_objective(net, X, W, offsets, metric="avg_rank")
    assert obj == pytest.approx(_explicit_bound(net.predict(X), W, offsets, lam=lambda r: r))
    net.params[0][0, 0] = np.inf
    with pytest.raises(DivergenceError, match="non-finite"):
        deep_propdcg_objective(net, X, W, offsets)


# ------------------------------------------------------------------------- estimator


def test_training_reduces_the_loss_and_learns():
    data, log = _log(seed=4, n_queries=80, n_passes=10, n_features=5)
    params = dict(hidden_layer_sizes=(16,), learning_rate=1e-2, batch_size=200, random_state=0)
    short = DeepPropDCG(max_epochs=1, **params).fit(log)
    model = DeepPropDCG(max_epochs=40, **params).fit(log)
    assert model.n_iter_ == 40 and len(model.loss_curve_) == 40 and model.t_ > 40
    assert model.loss_curve_[-1] < model.loss_curve_[0]
    assert model.objective(log) < short.objective(log)
    # The learned ranker puts relevant documents higher than the logging ranker (feature 0) did.
    from counterfactual_ltr.evaluation import true_values

    rel = data.relevance()
    learned = true_values(log, model, rel)["snips"]
    logging = true_values(log, data.X[:, 0], rel)["snips"]
    assert learned > logging


def test_same_seed_bit_identical_pickle_and_clone():
    data, log = _log(seed=5)
    params = dict(hidden_layer_sizes=(8,), learning_rate=5e-3, max_epochs=5, batch_size=50)
    a = DeepPropDCG(random_state=7, **params).fit(log)
    b = DeepPropDCG(random_state=7, **params).fit(log)
    c = DeepPropDCG(random_state=8, **params).fit(log)
    assert np.array_equal(a.predict(data.X), b.predict(data.X))
    assert not np.array_equal(a.predict(data.X), c.predict(data.X))
    restored = pickle.loads(pickle.dumps(a))
    assert np.array_equal(restored.predict(data.X), a.predict(data.X))
    fresh = clone(a)
    assert fresh.get_params() == a.get_params() and not hasattr(fresh, "model_")
    assert np.array_equal(fresh.fit(log).predict(data.X), a.predict(data.X))
    assert a.get_params()["hidden_layer_sizes"] == (8,)  # parameters unchanged by fit


def test_aggregation_makes_passes_free():
    """Repeating every session twice doubles W and n: the same per-click objective, the same model."""
    data, log = _log(seed=6, n_passes=3)
    doubled = log[np.r_[np.arange(len(log)), np.arange(len(log))]]
    params = dict(hidden_layer_sizes=(6,), learning_rate=1e-2, max_epochs=3, random_state=0)
    a = DeepPropDCG(**params).fit(log).predict(data.X)
    b = DeepPropDCG(**params).fit(doubled).predict(data.X)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_divergence_raises_cleanly():
    data, log = _log(seed=7)
    model = DeepPropDCG(hidden_layer_sizes=(4,), activation="identity", learning_rate=1e200, max_epochs=5,
                        random_state=0)
    with pytest.raises(FloatingPointError, match="epoch"):
        model.fit(log)
    with pytest.raises(NotFittedError):
        model.predict(data.X)
    # A refit that diverges removes the previous model instead of leaving it (or NaNs) behind.
    model.set_params(learning_rate=1e-3).fit(log)
    with pytest.raises(ValueError, match="diverged at epoch"):
        model.set_params(learning_rate=1e300).fit(log)
    assert not hasattr(model, "model_")


@pytest.mark.parametrize("params, match", [
    ({"alpha": -1.0}, "alpha"), ({"learning_rate": 0.0}, "learning_rate"), ({"learning_rate": -1e-3}, "learning_rate"),
    ({"batch_size": 0}, "batch_size"), ({"batch_size": 2.5}, "batch_size"), ({"max_epochs": 0}, "max_epochs"),
    ({"activation": "softmax"}, "activation"), ({"lr_schedule": "cosine"}, "lr_schedule"),
    ({"validation_fraction": 1.0}, "validation_fraction"), ({"hidden_layer_sizes": (0,)}, "hidden_layer_sizes"),
])
def test_bad_parameters(params, match):
    _, log = _log(seed=8, n_queries=10, n_passes=2)
    with pytest.raises(ValueError, match=match):
        DeepPropDCG(**params).fit(log)


def test_bad_inputs():
    data, log = _log(seed=9, n_queries=10, n_passes=2)
    with pytest.raises(ValueError, match="ClickLog"):
        DeepPropDCG().fit(data.X)
    no_clicks = ClickLog(log.data, log.session_query, log.session_offsets, log.docs, np.zeros(log.n_items, bool))
    with pytest.raises(ValueError, match="no clicks"):
        DeepPropDCG().fit(no_clicks)
    with pytest.raises(ValueError, match="validation"):
        DeepPropDCG(max_epochs=1).fit(log, validation_log=no_clicks)
    with pytest.raises(NotFittedError):
        DeepPropDCG().predict(data.X)
    model = DeepPropDCG(hidden_layer_sizes=(3,), max_epochs=1, random_state=0).fit(log)
    with pytest.raises(ValueError, match="shape"):
        model.predict(data.X[:, :2])
    X = data.X.copy()
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="row 3"):
        model.predict(X)


def test_early_stopping_keeps_the_best_epoch():
    data, log = _log(seed=10, n_queries=60, n_passes=5)
    vdata, vlog = _log(seed=11, n_queries=40, n_passes=5)
    model = DeepPropDCG(hidden_layer_sizes=(16,), learning_rate=3e-2, max_epochs=40, early_stopping=True,
                        n_iter_no_change=3, random_state=0).fit(log, validation_log=vlog)
    assert len(model.validation_scores_) == model.n_iter_ == len(model.loss_curve_)
    assert model.best_validation_score_ == max(model.validation_scores_)
    assert model.validation_scores_[model.best_epoch_ - 1] == model.best_validation_score_
    from counterfactual_ltr.evaluation import snips_estimate

    assert snips_estimate(vlog, model, metric="dcg").value == pytest.approx(model.best_validation_score_, abs=1e-12)
    # Without a validation log, a fraction of the training queries is held out.
    held = DeepPropDCG(hidden_layer_sizes=(4,), max_epochs=3, early_stopping=True, random_state=0).fit(log)
    assert len(held.validation_scores_) == 3 and held.n_train_queries_ < len(log.aggregate().queries)


def test_lr_schedules_and_batches():
    assert [paper_lr_schedule(e, 750, 1e-6) for e in (0, 299, 300, 499, 500, 749)] == [
        1e-6, 1e-6, 1e-7, 1e-7, 1e-8, 1e-8]
    _, log = _log(seed=12, n_queries=10, n_passes=2)
    model = DeepPropDCG(hidden_layer_sizes=(3,), learning_rate=1e-2, lr_schedule="paper", max_epochs=15,
                        random_state=0).fit(log)
    assert model.learning_rates_ == pytest.approx([1e-2] * 6 + [1e-3] * 4 + [1e-4] * 5)
    # Batches hold whole queries and about batch_size documents.
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, size=200)
    offsets = np.r_[0, np.cumsum(lengths)]
    bounds = query_batches(offsets, 100)
    assert bounds[0] == 0 and bounds[-1] == 200 and np.all(np.diff(bounds) >= 1)
    sizes = offsets[bounds[1:]] - offsets[bounds[:-1]]
    assert np.all(sizes[:-1] > 100 - 40) and np.all(sizes < 100 + 40)
    assert abs(sizes.mean() - 100) < 15
