"""Counterfactual learning to rank: learn and evaluate rankers from logged, position-biased clicks."""

from .datasets import RankingDataset, binarize

__version__ = "0.1.0"
__all__ = ["RankingDataset", "binarize", "__version__"]
