"""Logging policies: Plackett-Luce position probabilities (exact and Monte Carlo), StochasticRanker logs."""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest

from click_sim import PositionBasedClickModel, StochasticRanker, make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog, RankingDataset
from counterfactual_ltr._segments import order_within_queries
from counterfactual_ltr.logging_policy import PlackettLucePolicy, PositionProbabilities


def _data(lengths, seed=0):
    rng = np.random.default_rng(seed)
    qid = np.repeat(np.arange(len(lengths)), lengths)
    n = len(qid)
    return RankingDataset(rng.normal(size=(n, 2)), rng.integers(0, 3, n), qid)


def _brute_force(scores, K):
    """P(row at position k) of one query by summing the Plackett-Luce probability of every full permutation."""
    lam = np.exp(scores - scores.max())
    n = len(scores)
    P = np.zeros((n, min(K, n)))
    for perm in permutations(range(n)):
        p, left = 1.0, lam.sum()
        for d in perm:
            p *= lam[d] / left
            left -= lam[d]
        for k, d in enumerate(perm[:K]):
            P[d, k] += p
    return P


@pytest.mark.parametrize("K", [None, 2, 3])
def test_enumeration_matches_brute_force(K):
    data = _data([4, 5, 1, 3])
    scores = np.random.default_rng(1).normal(scale=2.0, size=data.n_docs)
    T = 0.7
    P = PlackettLucePolicy(scores, T, K).position_probabilities(data)
    assert P.n_samples is None  # exact
    for s, e in zip(data.query_offsets[:-1], data.query_offsets[1:]):
        ref = _brute_force(scores[s:e] / T, K or 99)
        np.testing.assert_allclose(P.probabilities[s:e, :ref.shape[1]], ref, atol=1e-12)
        assert np.all(P.probabilities[s:e, ref.shape[1]:] == 0)
    # each position of a query holds exactly one document, each document at most one position
    for s, e in zip(data.query_offsets[:-1], data.query_offsets[1:]):
        k = min(e - s, P.probabilities.shape[1])
        np.testing.assert_allclose(P.probabilities[s:e, :k].sum(axis=0), 1.0)
    assert np.all(P.probabilities.sum(axis=1) <= 1 + 1e-12)


def test_monte_carlo_agrees_with_exact_within_its_error():
    data = _data([6, 4, 7])
    scores = np.random.default_rng(2).normal(size=data.n_docs)
    exact = PlackettLucePolicy(scores, 1.0, 4).position_probabilities(data)
    mc = PlackettLucePolicy(scores, 1.0, 4, exact_limit=1, n_samples=4000, random_state=3).position_probabilities(data)
    assert exact.n_samples is None and mc.n_samples == 4000
    se = np.sqrt(exact.probabilities * (1 - exact.probabilities) / 4000) + 1e-12
    assert np.max(np.abs(mc.probabilities - exact.probabilities) / se) < 4.5
    alpha = 1.0 / np.arange(1, 5)
    z = (mc.expected(alpha) - exact.expected(alpha)) / mc.expected_stderr(alpha)
    assert np.max(np.abs(z)) < 4.5
    # the same seed gives the same matrix
    again = PlackettLucePolicy(scores, 1.0, 4, exact_limit=1, n_samples=4000, random_state=3).position_probabilities(data)
    np.testing.assert_array_equal(again.probabilities, mc.probabilities)


def test_temperature_zero_is_the_deterministic_ranking():
    data = _data([5, 3])
    scores = np.array([0.3, 2.0, 2.0, -1.0, 0.5, 1.0, 0.0, 3.0])  # a tie: row order wins
    P = PlackettLucePolicy(scores, 0.0, 3).position_probabilities(data).probabilities
    order = order_within_queries(scores, data.query_offsets)
    expected = np.zeros_like(P)
    for q, (s, e) in enumerate(zip(data.query_offsets[:-1], data.query_offsets[1:])):
        for k, row in enumerate(order[s:e][:3]):
            expected[row, k] = 1.0
    np.testing.assert_array_equal(P, expected)


def test_stochastic_ranker_log_follows_its_policy():
    """Position frequencies in a simulated log match the policy's probabilities (within 4.5 s.e.)."""
    data = make_ranking(n_queries=6, n_docs=(5, 8), random_state=4)
    scores = data.X[:, 0]
    n_passes = 3000
    log = simulate_clicks(data, StochasticRanker(scores, temperature=0.8), n_passes=n_passes, random_state=0,
                          max_shown=4)
    P = log.logging_policy.position_probabilities(data).probabilities
    counts = np.zeros_like(P)
    np.add.at(counts, (log.docs, log.positions - 1), 1.0)
    freq = counts / n_passes
    se = np.sqrt(P * (1 - P) / n_passes) + 1e-12
    assert np.max(np.abs(freq - P) / se) < 4.5
    assert log.logging_policy.temperature == 0.8 and log.logging_policy.max_shown == 4
    # reproducible, and sub-logs keep the policy
    again = simulate_clicks(data, StochasticRanker(scores, temperature=0.8), n_passes=20, random_state=0, max_shown=4)
    assert again.equals(simulate_clicks(data, StochasticRanker(scores, 0.8), n_passes=20, random_state=0,
                                        max_shown=4))
    assert log[:10].logging_policy is log.logging_policy


def test_deterministic_simulation_keeps_its_random_stream():
    """A plain ranker's log is the tiled ranking with clicks rng.random(n) < p per pass, as before."""
    data = make_ranking(n_queries=10, random_state=1)
    model = PositionBasedClickModel(1.0, 0.1, 1.0)
    log = simulate_clicks(data, data.X[:, 1], model, n_passes=3, random_state=7)
    order = order_within_queries(data.X[:, 1], data.query_offsets)
    positions = np.arange(data.n_docs) - np.repeat(data.query_offsets[:-1], data.query_lengths) + 1
    p = model.click_probability(positions, data.relevance()[order])
    rng = np.random.default_rng(7)
    expected = np.concatenate([rng.random(data.n_docs) < p for _ in range(3)])
    np.testing.assert_array_equal(log.clicks, expected)
    np.testing.assert_array_equal(log.docs, np.tile(order, 3))
    assert log.logging_policy.temperature == 0.0


@pytest.mark.parametrize("temperature", [0.0, -1.0, np.nan, "1"])
def test_stochastic_ranker_bad_temperature(temperature):
    data = make_ranking(n_queries=3, random_state=0)
    with pytest.raises((ValueError, TypeError)):
        simulate_clicks(data, StochasticRanker(data.X[:, 0], temperature), n_passes=1, random_state=0)


def test_user_supplied_position_probabilities(tiny_data):
    """A real log's user gives P(row at position) directly; bad matrices are refused with a clear error."""
    P = np.zeros((9, 2))
    P[[0, 1, 2], 0] = 1 / 3
    P[[0, 1, 2], 1] = 1 / 3
    probs = PositionProbabilities(P)
    log = ClickLog(tiny_data, [0], [0, 2], [1, 0], [1, 0], logging_policy=probs)
    assert log.logging_policy.position_probabilities(tiny_data) is probs
    frame_log = ClickLog.from_frame(log.to_frame(), tiny_data, logging_policy=probs)
    assert frame_log.logging_policy is probs
    with pytest.raises(ValueError, match="rows"):
        probs.position_probabilities(make_ranking(n_queries=2, random_state=0))
    with pytest.raises(ValueError, match="sum"):
        PositionProbabilities(np.full((3, 2), 0.6))
    with pytest.raises(ValueError, match="2-D"):
        PositionProbabilities(np.ones(3))
    with pytest.raises(ValueError, match="position_probabilities"):
        ClickLog(tiny_data, [0], [0, 2], [1, 0], [1, 0], logging_policy="uniform")
    with pytest.raises(ValueError, match="rows"):
        PlackettLucePolicy(np.zeros(4), 1.0).position_probabilities(tiny_data)
