"""Bad inputs to the newest surfaces (issue 38) end in a ``ValueError`` naming what is wrong and where.

* A raw log (``ClickLog.from_events``, no features) is refused by every evaluation entry and every
  learner's ``fit`` with the same advice (join features with ``with_data``), never an
  ``AttributeError`` from deep inside.
* ``GBDTPropDCG``'s ``lgb_params`` are checked against LightGBM's own parameter tables; tree
  options that give a constant ranker warn; the dict form of ``monotone_constraints`` saves.
* Ids typed differently on the two sides of a join, resampling too small for its interval,
  a repeated row that would start a phantom page, and the ids the messages name.
* A table of bad inputs walked through the public entry points: none ends in ``AttributeError``,
  ``KeyError``, ``IndexError``, NumPy's conversion errors or an empty message.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import counterfactual_ltr as cltr
from counterfactual_ltr import ClickLog, RankingDataset
from counterfactual_ltr.evaluation import fit_relevance, session_contributions, true_click_values, true_values

FEATURES = "needs document features"


@pytest.fixture(scope="module")
def raw_log():
    return ClickLog.from_events({"query": ["q1"] * 3 + ["q2"] * 2, "doc": ["a", "b", "c", "a", "d"],
                                 "position": [1, 2, 3, 1, 2], "click": [1, 0, 0, 0, 1]})


class _Zero:
    def predict(self, X):
        return np.zeros(len(X))


SCORES = np.zeros(5)

# ----------------------------------------------------------------------------- 1. raw logs

RAW_LOG_ENTRIES = {
    **{name: (lambda log, f=getattr(cltr, name): f(log, SCORES), f"the {name.split('_estimate')[0].upper()} estimate")
       for name in ("ips_estimate", "snips_estimate", "clipped_ips_estimate", "dr_estimate",
                    "policy_aware_estimate")},
    **{name: (lambda log, f=getattr(cltr, name): f()(_Zero(), log), f"the {name.split('_scorer')[0].upper()} estimate")
       for name in ("ips_scorer", "snips_scorer", "clipped_ips_scorer", "dr_scorer", "policy_aware_scorer")},
    "session_contributions": (lambda log: session_contributions(log, SCORES), "session_contributions"),
    "true_values": (lambda log: true_values(log, SCORES, SCORES), "true_values"),
    "true_click_values": (lambda log: true_click_values(log, SCORES, SCORES), "true_click_values"),
    "fit_relevance": (lambda log: fit_relevance(log), "fit_relevance"),
    "compare_rankers scores": (lambda log: cltr.compare_rankers(log, SCORES), "compare_rankers"),
    "compare_rankers ranker": (lambda log: cltr.compare_rankers(log, _Zero(), _Zero()), "compare_rankers"),
    "compare_rankers several": (lambda log: cltr.compare_rankers(log, {"a": SCORES, "b": SCORES}), "compare_rankers"),
    "validation_report": (lambda log: cltr.validation_report({"a": _Zero()}, log), "validation_report"),
    "validation_report scores": (lambda log: cltr.validation_report({"a": SCORES}, log, estimators=["ips"]),
                                 "validation_report"),
    "aggregate": (lambda log: log.aggregate(), "the aggregate"),
    **{f"{name}.fit": (lambda log, e=name: getattr(cltr, e)().fit(log), "the aggregate")
       for name in ("RankSVM", "SVMPropRank", "SVMPropDCG", "SVMPropRBP", "SLAMRanker", "DeepPropDCG",
                    "GBDTPropDCG")},
}

@pytest.mark.parametrize("entry", sorted(RAW_LOG_ENTRIES))
def test_a_raw_log_is_refused_with_advice_by_every_evaluation_and_fit(entry, raw_log):
    call, who = RAW_LOG_ENTRIES[entry]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=FEATURES) as err:
            call(raw_log)
    assert who in str(err.value) and "with_data" in str(err.value)


def test_the_same_log_with_features_evaluates(raw_log):
    data = RankingDataset.from_frame({"query": ["q1"] * 3 + ["q2"] * 2, "doc": ["a", "b", "c", "a", "d"],
                                      "f": [3.0, 2.0, 1.0, 2.0, 1.0]})
    joined = raw_log.with_data(data)
    assert np.isfinite(cltr.snips_estimate(joined, data.X[:, 0], n_bootstrap=0).value)
    assert cltr.evaluation.on_policy_value(raw_log) > 0      # the logged rankings' value needs no features
