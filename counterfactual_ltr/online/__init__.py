"""Online learning to rank: learners that rank one query per round and learn from its feedback.

All learners follow the protocol of :mod:`counterfactual_ltr.online._base`
(``rank`` / ``update`` / ``feedback_k``); ``click_sim.run_online`` runs them.
"""

from ._base import Feedback, OnlineLearner, RandomRanker, check_learning_rate, make_schedule

__all__ = ["Feedback", "OnlineLearner", "RandomRanker", "check_learning_rate", "make_schedule"]

from .topk import (SURROGATE_MIN_K, TopKFeedbackRanker, estimate_score_gradient, inclusion_probabilities,  # noqa: E402
                   kl_listnet_gradient_estimate, ranksvm_gradient_estimate, smooth_dcg_gradient_estimate,
                   squared_gradient_estimate)

__all__ += ["TopKFeedbackRanker", "SURROGATE_MIN_K", "estimate_score_gradient", "inclusion_probabilities",
            "squared_gradient_estimate", "kl_listnet_gradient_estimate", "smooth_dcg_gradient_estimate",
            "ranksvm_gradient_estimate"]

from .perceptrons import MaxPairPerceptron, SLAMPerceptron  # noqa: E402
from .listnet import OnlineListNet  # noqa: E402

__all__ += ["SLAMPerceptron", "MaxPairPerceptron", "OnlineListNet"]
