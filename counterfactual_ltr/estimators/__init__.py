"""scikit-learn estimators that learn rankers from full labels or from click logs."""

from .deep import DeepPropDCG
from .gbdt import GBDT_GRID, GBDTPropDCG
from .slam import SLAMRanker
from .svm import RankSVM, SVMPropDCG, SVMPropRank, SVMPropRBP, click_pair_set, click_pairs

__all__ = ["RankSVM", "SVMPropRank", "SVMPropDCG", "SVMPropRBP", "SLAMRanker", "DeepPropDCG", "GBDTPropDCG",
           "GBDT_GRID", "click_pairs", "click_pair_set"]
