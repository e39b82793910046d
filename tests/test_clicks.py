"""The position-based click model and simulated click logs."""

from __future__ import annotations

import numpy as np
import pytest

from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
from counterfactual_ltr import RankingDataset

from conftest import least_squares_scores, requires_mq2008

# ----------------------------------------------------------------------------- model parameters


@pytest.mark.parametrize("kwargs", [
    dict(eta=-0.1), dict(eta=np.nan), dict(eta=np.inf),
    dict(eps_minus=-0.01), dict(eps_minus=1.01), dict(eps_plus=1.5), dict(eps_plus=-1), dict(eps_plus=np.nan),
])
def test_click_model_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        PositionBasedClickModel(**kwargs)


def test_click_probability_formula():
    model = PositionBasedClickModel(eta=2.0, eps_minus=0.2, eps_plus=0.9)
    p = model.click_probability([1, 2, 3, 4], [1, 0, 2, 0])
    np.testing.assert_allclose(p, [0.9, 0.25 * 0.2, 0.9 / 9, 0.2 / 16])
    assert model.propensity_model()([2]).tolist() == [0.25]


# ----------------------------------------------------------------------------- empirical click rates


def _position_design(n_queries=100, m=8):
    """Every query has ``m`` documents scored so that row ``j`` of a query is shown at position ``j + 1``;
    relevant positions are fixed: grades 2,0,1,0,0,1,0,2,... (grade 2 counts as relevant too)."""
    grades = np.resize([2, 0, 1, 0, 0, 1, 0, 2], m)
    y = np.tile(grades, n_queries)
    X = np.tile(-np.arange(m, dtype=float), n_queries)[:, None]  # decreasing scores: row order = rank order
    qid = np.repeat(np.arange(n_queries), m)
    return RankingDataset(X, y, qid), grades >= 1


@pytest.mark.parametrize("eta, eps_minus, eps_plus", [
    (0.0, 0.1, 1.0),
    (0.5, 0.3, 0.7),
    (1.0, 0.1, 1.0),
    (2.0, 0.0, 0.8),
    (1.0, 0.5, 0.5),
])
def test_click_through_rate_per_position(eta, eps_minus, eps_plus):
    m, n_passes = 8, 60
    data, relevant = _position_design(m=m)
    model = PositionBasedClickModel(eta=eta, eps_minus=eps_minus, eps_plus=eps_plus)
    log = simulate_clicks(data, data.X[:, 0], model, n_passes=n_passes, random_state=123)
    assert log.n_sessions == data.n_queries * n_passes and log.n_items == data.n_docs * n_passes
    positions = log.positions
    # the log shows row j of each query at position j + 1 (that is what the design ranks)
    np.testing.assert_array_equal(positions, (log.docs - data.query_offsets[data.query_index[log.docs]]) + 1)
    n = np.bincount(positions)[1:]
    ctr = np.bincount(positions, weights=log.clicks)[1:] / n
    r = np.arange(1, m + 1)
    expected = (1.0 / r) ** eta * np.where(relevant, eps_plus, eps_minus)
    se = np.sqrt(expected * (1 - expected) / n)
    zero = expected == 0
    np.testing.assert_array_equal(ctr[zero], 0.0)
    z = np.abs(ctr[~zero] - expected[~zero]) / np.where(se[~zero] > 0, se[~zero], np.inf)
    exact = se[~zero] == 0  # probability one: every item clicked
    np.testing.assert_array_equal(ctr[~zero][exact], expected[~zero][exact])
    assert np.all(z <= 3), f"|z| per position: {np.round(z, 2)}"


def test_eta_zero_means_no_position_bias():
    """With eta=0 every position is examined: click rates of relevant documents do not decay."""
    data, relevant = _position_design(m=8)
    log = simulate_clicks(data, data.X[:, 0], PositionBasedClickModel(eta=0, eps_minus=0, eps_plus=1),
                          n_passes=5, random_state=0)
    rel_item = relevant[log.positions - 1]
    assert np.all(log.clicks[rel_item]) and not np.any(log.clicks[~rel_item])


# ----------------------------------------------------------------------------- log structure


@pytest.fixture(scope="module")
def data():
    return make_ranking(n_queries=40, n_docs=(3, 25), random_state=7)


def test_log_structure_follows_the_ranking(data):
    rng = np.random.default_rng(0)
    scores = np.round(rng.standard_normal(data.n_docs), 1)  # rounded: many ties
    n_passes = 3
    log = simulate_clicks(data, scores, n_passes=n_passes, random_state=0)
    assert log.data is data
    assert log.n_sessions == n_passes * data.n_queries
    assert log.session_query.tolist() == list(range(data.n_queries)) * n_passes
    # expected display order, computed independently query by query (stable sort: ties keep row order)
    expected = []
    for s, e in zip(data.query_offsets[:-1], data.query_offsets[1:]):
        expected.extend((s + np.argsort(-scores[s:e], kind="stable")).tolist())
    assert log.docs.tolist() == expected * n_passes
    np.testing.assert_array_equal(np.diff(log.session_offsets), np.tile(data.query_lengths, n_passes))


def test_ranker_forms_agree(data):
    w = np.linspace(-1, 1, data.n_features)

    class Linear:
        def predict(self, X):
            return X @ w

    model = PositionBasedClickModel(eta=1, eps_minus=0.2, eps_plus=0.9)
    a = simulate_clicks(data, data.X @ w, model, n_passes=2, random_state=4)
    b = simulate_clicks(data, Linear(), model, n_passes=2, random_state=4)
    c = simulate_clicks(data, lambda X: X @ w, model, n_passes=2, random_state=4)
    assert a.equals(b) and a.equals(c)


def test_same_seed_same_log_different_seed_different_log(data):
    model = PositionBasedClickModel(eta=1, eps_minus=0.1, eps_plus=1)
    scores = data.X[:, 0]
    a = simulate_clicks(data, scores, model, n_passes=10, random_state=42)
    b = simulate_clicks(data, scores, model, n_passes=10, random_state=42)
    c = simulate_clicks(data, scores, model, n_passes=10, random_state=43)
    assert a.equals(b)
    np.testing.assert_array_equal(a.clicks, b.clicks)
    assert not a.equals(c)
    assert np.array_equal(a.docs, c.docs)  # same rankings, different clicks
    assert not np.array_equal(a.clicks, c.clicks)
    g = simulate_clicks(data, scores, model, n_passes=10, random_state=np.random.default_rng(42))
    assert g.equals(a)


@pytest.mark.parametrize("k", [1, 5, 10])
def test_max_shown_truncation(data, k):
    scores = data.X[:, 1]
    full = simulate_clicks(data, scores, n_passes=2, random_state=0)
    top = simulate_clicks(data, scores, n_passes=2, random_state=0, max_shown=k)
    lengths = np.diff(top.session_offsets)
    np.testing.assert_array_equal(lengths, np.minimum(np.tile(data.query_lengths, 2), k))
    assert top.positions.max() == k
    # the shown documents are the top-k of the full ranking, in the same order
    keep = full.positions <= k
    np.testing.assert_array_equal(top.docs, full.docs[keep])
    np.testing.assert_array_equal(top.session_query, full.session_query)


@pytest.mark.parametrize("kwargs", [dict(n_passes=0), dict(max_shown=0)])
def test_simulate_bad_arguments(data, kwargs):
    with pytest.raises(ValueError):
        simulate_clicks(data, data.X[:, 0], **kwargs)


@pytest.mark.parametrize("bad", ["nan", "short", "2d"])
def test_simulate_bad_scores(data, bad):
    scores = data.X[:, 0].copy()
    if bad == "nan":
        scores[5] = np.nan
    elif bad == "short":
        scores = scores[:-1]
    else:
        scores = np.c_[scores, scores]
    with pytest.raises(ValueError):
        simulate_clicks(data, scores, random_state=0)


def test_relevance_threshold(data):
    """With relevance_threshold=2 grade-1 documents behave as irrelevant (never clicked if eps_minus=0)."""
    model = PositionBasedClickModel(eta=0, eps_minus=0, eps_plus=1)
    log = simulate_clicks(data, data.X[:, 0], model, n_passes=2, random_state=0, relevance_threshold=2)
    np.testing.assert_array_equal(log.clicks, data.y[log.docs] >= 2)


# ----------------------------------------------------------------------------- MQ2008, as in the paper


@requires_mq2008
def test_mq2008_click_log_statistics(mq2008_fold1_train):
    """Fold1 train, eta=1, eps-=0.1, eps+=1, 100 passes: clicks per session and the share of clicks on
    irrelevant documents match the click model's exact expectation for the fixed ranking (4 s.e.)."""
    data = mq2008_fold1_train
    scores = least_squares_scores(data)
    model = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
    n_passes = 100
    log = simulate_clicks(data, scores, model, n_passes=n_passes, random_state=2019)
    assert log.n_sessions == 471 * n_passes and log.n_items == 9630 * n_passes

    # exact expectation of one pass, from the ranking computed here
    order = np.lexsort((-scores, data.query_index))
    pos = np.arange(data.n_docs) - data.query_offsets[data.query_index[order]] + 1
    irrelevant = data.y[order] == 0
    p = (1.0 / pos) * np.where(irrelevant, 0.1, 1.0)
    n_sessions = log.n_sessions
    exp_clicks = n_passes * p.sum()
    var_clicks = n_passes * np.sum(p * (1 - p))
    per_session = log.n_clicks / n_sessions
    assert abs(per_session - exp_clicks / n_sessions) <= 4 * np.sqrt(var_clicks) / n_sessions

    share_expected = p[irrelevant].sum() / p.sum()
    # delta method for the ratio I / C: Var(I - s C) = sum p (1 - p) (1[irr] - s)^2
    se_share = np.sqrt(n_passes * np.sum(p * (1 - p) * (irrelevant - share_expected) ** 2)) / exp_clicks
    share = np.count_nonzero(log.clicks & (data.y[log.docs] == 0)) / log.n_clicks
    assert abs(share - share_expected) <= 4 * se_share
    # a ranker that is better than random keeps the noise share below its share of documents
    assert share < np.mean(data.y == 0)
