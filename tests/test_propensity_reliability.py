"""Propensities that consumers must refuse or warn about: custom per-result propensities that do not fit the
log, estimates asked beyond the positions they cover, and harvest on a log with no click to divide by."""

import warnings

import numpy as np
import pandas as pd
import pytest

from click_sim import make_ranking, simulate_clicks
from counterfactual_ltr import ClickLog, SVMPropDCG, estimate_propensities
from counterfactual_ltr.evaluation import compare_rankers
from counterfactual_ltr.propensity import EstimatedPropensity


@pytest.fixture(scope="module")
def setting():
    data = make_ranking(n_queries=30, random_state=0)
    return data, simulate_clicks(data, data.X[:, 0], n_passes=5, random_state=0, max_shown=10)


class _PerResult:
    """A custom session-dependent propensity returning ``values(log)``."""

    def __init__(self, values):
        self.values = values

    def item_propensities(self, log):
        return self.values(log)


@pytest.mark.parametrize("values, expected", [
    (lambda log: np.full(log.n_items - 1, 0.5), "returned shape"),
    (lambda log: np.where(np.arange(log.n_items) == 3, 0.0, 0.5), "must lie in \\(0, 1\\]; index 3"),
    (lambda log: np.full(log.n_items, np.nan), "must lie in \\(0, 1\\]"),
])
def test_custom_item_propensities_that_do_not_fit_the_log_are_refused(setting, values, expected):
    data, log = setting
    with pytest.raises(ValueError, match=expected):
        compare_rankers(log, data.X[:, 1], propensity=_PerResult(values), n_bootstrap=0, value="relevance")
    with pytest.raises(ValueError, match=expected):
        log.propensities(_PerResult(values))


def test_an_estimate_asked_beyond_its_positions_says_so(setting):
    data, log = setting
    short = EstimatedPropensity(1.0 / np.arange(1, 6), method="harvest")
    for action in (lambda: SVMPropDCG(propensity=short).fit(log),
                   lambda: compare_rankers(log, data.X[:, 1], propensity=short, n_bootstrap=0),
                   lambda: compare_rankers(log, data.X[:, 1], propensity=short, n_bootstrap=0, value="relevance")):
        with pytest.warns(UserWarning, match="positions 6-10 are extrapolated"):
            action()
    covering = EstimatedPropensity(1.0 / np.arange(1, 11), method="harvest")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        covering_aggregate = log.aggregate(covering)      # covers every clicked position: no word
    assert covering_aggregate.n_clicks == log.n_clicks


def test_harvest_without_clicks_at_position_one_names_it():
    rng = np.random.default_rng(0)
    pages = 300
    docs = np.array([rng.permutation(4) for _ in range(pages)]).ravel()
    positions = np.tile(np.arange(1, 5), pages)
    clicks = (positions > 1) & (rng.random(docs.size) < 0.3)          # never a click at position 1
    log = ClickLog.from_events(pd.DataFrame({"query": 0, "doc": docs, "position": positions, "click": clicks,
                                             "page": np.repeat(np.arange(pages), 4)}), session="page")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)                 # no division warning leaks out
        with pytest.raises(ValueError, match="no click at position 1"):
            estimate_propensities(log, "harvest", max_position=4, n_bootstrap=0)


def test_a_trust_bias_file_keeps_its_replicates_for_the_comparisons(tmp_path):
    import json

    from click_sim import PositionBasedClickModel
    from counterfactual_ltr.model_files.persistence import load_propensity, propensity_to_dict

    data = make_ranking(n_queries=60, random_state=0)
    log = simulate_clicks(data, [data.X[:, 0], data.X[:, 1], data.X[:, 0] + data.X[:, 2]],
                          PositionBasedClickModel(eta=1.0, eps_minus=0.1), n_passes=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trust = estimate_propensities(log, "trust_em", max_position=5, n_bootstrap=30, random_state=0)
    path = tmp_path / "trust.json"
    path.write_text(json.dumps({"propensity": propensity_to_dict(trust)}))
    loaded = load_propensity(str(path))
    for part in ("examination", "eps_plus", "eps_minus"):
        np.testing.assert_allclose(loaded.bootstrap_[part], trust.bootstrap_[part])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compare_rankers(log, data.X[:, 1], propensity=loaded, n_bootstrap=200, random_state=0)
    assert "replicates on its own log" in c.propensity_uncertainty
    spec = json.loads(path.read_text())
    spec["propensity"]["bootstrap"]["eps_plus"][0][0] = 1.5
    path.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="probabilities in \\(0, 1\\]"):
        load_propensity(str(path))
