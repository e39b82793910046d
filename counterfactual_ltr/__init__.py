"""Counterfactual learning to rank: learn and evaluate rankers from logged, position-biased clicks."""

from .clicklog import ClickAggregate, ClickLog
from .datasets import RankingDataset, binarize
from .propensity import PositionBasedPropensity, TabularPropensity
from .propensity_estimation import estimate_propensities

__version__ = "0.1.0"
__all__ = ["RankingDataset", "binarize", "ClickLog", "ClickAggregate", "PositionBasedPropensity",
           "TabularPropensity", "estimate_propensities", "__version__"]
