"""The experiment protocol's own pieces (experiments._cltr): fixed click counts, LambdaRank's
click groups, paired statistics and the avg DCG readings."""

import numpy as np
import pytest

from click_sim import PositionBasedClickModel, make_ranking, simulate_clicks
from experiments import _cltr


@pytest.fixture(scope="module")
def data():
    return make_ranking(n_queries=40, random_state=3)


def test_simulate_n_clicks_is_the_shortest_prefix_and_seeded(data):
    model = PositionBasedClickModel(eta=1.0, eps_minus=0.1)
    scores = data.X[:, 0]
    log, passes = _cltr.simulate_n_clicks(data, scores, model, 500, random_state=7, relevance_threshold=1)
    per_session = np.add.reduceat(log.clicks.astype(int), log.session_offsets[:-1])
    assert log.n_clicks >= 500 and log.n_clicks - per_session[-1] < 500  # one session fewer falls short
    # It is a prefix of one long seeded simulation, whatever number of passes was tried first.
    full = simulate_clicks(data, scores, model, n_passes=passes + 3, random_state=7, relevance_threshold=1)
    assert log.equals(full[:log.n_sessions])
    assert passes == int(np.ceil(log.n_sessions / data.n_queries))
    again, _ = _cltr.simulate_n_clicks(data, scores, model, 500, random_state=7, relevance_threshold=1)
    assert again.equals(log)


def test_simulate_run_needs_one_size(data):
    with pytest.raises(ValueError, match="exactly one"):
        _cltr.simulate_run(data, data, seed=0, n_passes=2, n_clicks=100, production=data.X[:, 0])


def test_click_label_groups_keep_every_clicked_session_once_with_its_count(data):
    model = PositionBasedClickModel(eta=1.0, eps_minus=0.1)
    log = simulate_clicks(data, data.X[:, 0], model, n_passes=30, random_state=1, relevance_threshold=1)
    rows, labels, groups, weights = _cltr.click_label_groups(log)
    offsets = np.r_[0, np.cumsum(groups)]
    # Expand the weighted groups back into sessions and compare with the clicked sessions of the log.
    expanded = sorted((tuple(rows[a:b]), tuple(labels[a:b])) for a, b in zip(offsets[:-1], offsets[1:])
                      for _ in range(int(weights[a])))
    per_session = np.add.reduceat(log.clicks.astype(int), log.session_offsets[:-1])
    so = log.session_offsets
    original = sorted((tuple(log.docs[so[i]:so[i + 1]]), tuple(log.clicks[so[i]:so[i + 1]].astype(float)))
                      for i in np.flatnonzero(per_session > 0))
    assert expanded == original
    assert len(groups) < len(original)  # repeated sessions were merged
    assert np.all(weights == np.repeat(weights[offsets[:-1]], groups))  # one weight per group


def test_paired_against_scipy_and_by_hand():
    from scipy import stats

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=12), rng.normal(size=12)
    out = _cltr.paired(a, b)
    d = a - b
    assert out["diff"] == pytest.approx(d.mean())
    assert out["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(12))
    assert out["p"] == pytest.approx(stats.ttest_rel(a, b).pvalue)
    assert out["wins"] == int((d > 0).sum()) and out["n"] == 12


def test_readings_of_avg_dcg_by_hand():
    from click_sim import RankingDataset

    # One query, labels by score order 2, 0, 1, 2: label-2 docs at ranks 1 and 4, label 1 at rank 3.
    data = RankingDataset(np.eye(4), np.array([2, 0, 1, 2]), np.zeros(4, dtype=int))
    scores = np.array([4.0, 3.0, 2.0, 1.0])
    m = _cltr.test_metrics(scores, data, threshold=2)
    assert m["avg_dcg"] == pytest.approx((1 / np.log(2) + 1 / np.log(5)) / 2)
    assert m["avg_dcg_log2_rel2"] == pytest.approx((1 + 1 / np.log2(5)) / 2)
    assert m["avg_dcg_ln_rel1"] == pytest.approx((1 / np.log(2) + 1 / np.log(4) + 1 / np.log(5)) / 3)
    assert m["avg_rank"] == pytest.approx(2.5)
    assert _cltr.test_metrics(scores, data, threshold=1)["avg_dcg"] == m["avg_dcg_ln_rel1"]
