"""Counterfactual learning to rank: learn and evaluate rankers from logged, position-biased clicks."""

from ._progress import show_progress
from .aggregate import ClickAggregate, aggregate_clicks
from .clicklog import ClickLog
from .datasets import RankingDataset, binarize
from .propensity import PositionBasedPropensity, TabularPropensity
from .propensity_estimation import estimate_propensities

__version__ = "0.1.0"
__all__ = ["RankingDataset", "binarize", "ClickLog", "ClickAggregate", "aggregate_clicks",
           "PositionBasedPropensity", "TabularPropensity", "estimate_propensities", "show_progress", "__version__"]
