"""Counterfactual learning to rank: learn and evaluate rankers from logged, position-biased clicks.

What a user needs first is importable from here: data and click logs, propensity models and their
estimation from logs, the scikit-learn rankers, off-policy estimates, scorers and validation
reports, and model files. Everything else lives in its module (``metrics``, ``surrogates``,
``online``, ``logging_policy``, ...); ``docs/architecture.md`` shows which module owns each step.

>>> from click_sim import make_ranking, simulate_clicks
>>> from counterfactual_ltr import SVMPropRank, snips_estimate
>>> data = make_ranking(n_queries=30, random_state=0)
>>> log = simulate_clicks(data, data.X[:, 0], n_passes=20, random_state=0)
>>> ranker = SVMPropRank(C=1.0).fit(log)
>>> snips_estimate(log, ranker, n_bootstrap=0).value > 0
True
"""

from . import _moved

_moved.install()

from ._progress import show_progress
from ._version import __version__
from .logs.aggregate import ClickAggregate, aggregate_clicks
from .logs.clicklog import ClickLog
from .datasets import RankingDataset, binarize
from .estimators import DeepPropDCG, GBDTPropDCG, RankSVM, SLAMRanker, SVMPropDCG, SVMPropRank, SVMPropRBP
from .evaluation import (Comparison, Estimate, ValidationReport, clipped_ips_estimate, clipped_ips_scorer,
                         compare_rankers, dr_estimate, dr_scorer, fit_relevance, ips_estimate, ips_scorer,
                         policy_aware_estimate, policy_aware_scorer, snips_estimate, snips_scorer, validation_report)
from .model_files.persistence import load_model, save_model
from .propensity import (EstimatedPropensity, EstimatedTrustBias, PositionBasedPropensity, TabularPropensity,
                         TrustBiasPropensity, estimate_propensities)

__all__ = [
    # data and click logs
    "RankingDataset", "binarize", "ClickLog", "ClickAggregate", "aggregate_clicks",
    # propensity models and their estimation
    "PositionBasedPropensity", "TabularPropensity", "TrustBiasPropensity", "estimate_propensities",
    "EstimatedPropensity", "EstimatedTrustBias",
    # rankers
    "RankSVM", "SVMPropRank", "SVMPropDCG", "SVMPropRBP", "SLAMRanker", "DeepPropDCG", "GBDTPropDCG",
    # off-policy evaluation
    "ips_estimate", "snips_estimate", "clipped_ips_estimate", "dr_estimate", "policy_aware_estimate", "Estimate",
    "fit_relevance", "ips_scorer", "snips_scorer", "clipped_ips_scorer", "dr_scorer", "policy_aware_scorer",
    "validation_report", "ValidationReport", "compare_rankers", "Comparison",
    # model files, progress bars, version
    "save_model", "load_model", "show_progress", "__version__",
]


def __getattr__(name):
    """Old module paths as attributes (``counterfactual_ltr.clicklog``): see :mod:`._moved`."""
    return _moved.moved_attribute(__name__, name)
