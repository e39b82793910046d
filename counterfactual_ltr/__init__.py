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

from typing import TYPE_CHECKING

from ._progress import show_progress
from ._version import __version__

# The exported names load on first use (PEP 562): ``import counterfactual_ltr`` and ``cltr --help``
# need none of scikit-learn, SciPy's statistics or pandas; each name's module is imported when the
# name is first looked up, and is the same object as an eager import would give.
_EXPORTS = {
    ".logs.aggregate": ("ClickAggregate", "aggregate_clicks"),
    ".logs.clicklog": ("ClickLog",),
    ".datasets": ("RankingDataset", "binarize"),
    ".estimators": ("DeepPropDCG", "GBDTPropDCG", "RankSVM", "SLAMRanker", "SVMPropDCG", "SVMPropRank", "SVMPropRBP"),
    ".evaluation": ("Comparison", "Estimate", "ValidationReport", "clipped_ips_estimate", "clipped_ips_scorer",
                    "compare_rankers", "dr_estimate", "dr_scorer", "fit_relevance", "ips_estimate", "ips_scorer",
                    "policy_aware_estimate", "policy_aware_scorer", "snips_estimate", "snips_scorer",
                    "validation_report"),
    ".learner_choice": ("select_learner",),
    ".model_files.persistence": ("load_model", "save_model"),
    ".propensity": ("EstimatedPropensity", "EstimatedTrustBias", "PositionBasedPropensity", "TabularPropensity",
                    "TrustBiasPropensity", "estimate_propensities"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

if TYPE_CHECKING:   # what static tools and IDEs read: the same names, imported eagerly
    from .datasets import RankingDataset, binarize
    from .estimators import DeepPropDCG, GBDTPropDCG, RankSVM, SLAMRanker, SVMPropDCG, SVMPropRank, SVMPropRBP
    from .evaluation import (Comparison, Estimate, ValidationReport, clipped_ips_estimate, clipped_ips_scorer,
                             compare_rankers, dr_estimate, dr_scorer, fit_relevance, ips_estimate, ips_scorer,
                             policy_aware_estimate, policy_aware_scorer, snips_estimate, snips_scorer,
                             validation_report)
    from .logs.aggregate import ClickAggregate, aggregate_clicks
    from .learner_choice import select_learner
    from .logs.clicklog import ClickLog
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
    "select_learner",
    # off-policy evaluation
    "ips_estimate", "snips_estimate", "clipped_ips_estimate", "dr_estimate", "policy_aware_estimate", "Estimate",
    "fit_relevance", "ips_scorer", "snips_scorer", "clipped_ips_scorer", "dr_scorer", "policy_aware_scorer",
    "validation_report", "ValidationReport", "compare_rankers", "Comparison",
    # model files, progress bars, version
    "save_model", "load_model", "show_progress", "__version__",
]


def __getattr__(name):
    """An exported name, imported from its module on first use; else an old module path (see :mod:`._moved`)."""
    if name in _HOME:
        import importlib

        value = getattr(importlib.import_module(_HOME[name], __name__), name)
        globals()[name] = value          # looked up once
        return value
    return _moved.moved_attribute(__name__, name)


def __dir__():
    return sorted(set(globals()) | set(__all__))
