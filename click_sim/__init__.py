"""Click simulation: ranking data, click models, production rankers, click logs, online loop."""

from counterfactual_ltr.logs.clicklog import ClickLog
from counterfactual_ltr.datasets import RankingDataset, binarize

from .cascade import cascade_clicks, simulate_cascade_events
from .clicks import PositionBasedClickModel, SwapIntervention, TopNShuffle, simulate_clicks
from .datapath import data_dir, data_path
from .letor import load_letor
from .online import OnlineResult, run_online
from .partitioned import simulate_clicks_partitioned
from .production import train_production_ranker
from .stochastic import StochasticRanker
from .synthetic import make_ranking, make_separable_ranking

__all__ = [
    "RankingDataset", "binarize", "load_letor", "make_ranking", "make_separable_ranking",
    "PositionBasedClickModel", "SwapIntervention", "TopNShuffle", "simulate_clicks", "ClickLog",
    "train_production_ranker", "run_online", "OnlineResult", "simulate_clicks_partitioned", "StochasticRanker",
    "cascade_clicks", "simulate_cascade_events", "data_dir", "data_path",
]
