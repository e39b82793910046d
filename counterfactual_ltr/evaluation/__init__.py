"""Off-policy evaluation of rankers from click logs: IPS, SNIPS, clipped IPS, doubly robust, policy-aware.

Everything is imported from here; the parts, one concern each:

* :mod:`~counterfactual_ltr.evaluation.offpolicy`: the estimators (their
  formulas are in its docstring), :class:`Estimate` with its intervals and
  diagnostics, and the true values the estimators target;
* :mod:`~counterfactual_ltr.evaluation.relevance`: the doubly robust
  estimator's relevance model, cross-fitted by query;
* :mod:`~counterfactual_ltr.evaluation.click_value`: the logged rankings'
  on-policy metric of clicks, and a ranker's estimate of the same quantity;
* :mod:`~counterfactual_ltr.evaluation.compare`: paired comparisons of rankers
  on the same sessions (:func:`compare_rankers`): interval, p-value and a
  lower confidence bound on the improvement;
* :mod:`~counterfactual_ltr.evaluation.scorers`: scikit-learn scorers for
  model selection on click logs;
* :mod:`~counterfactual_ltr.evaluation.report`: validation reports (a verdict
  per candidate, detailed tables, figures; HTML, Markdown, JSON).

The rank weights of the metrics (:func:`~counterfactual_ltr.metrics.metric_weight`,
:data:`~counterfactual_ltr.metrics.LOWER_IS_BETTER`) live with the metrics and
are re-exported here.
"""

from ..metrics import metric_weight
from .offpolicy import (ESTIMATORS, Estimate, EstimateWarning, clipped_ips_estimate, dr_estimate, ips_estimate,
                        policy_aware_estimate, session_contributions, snips_estimate, true_values)
# Public attributes of this module before it was split (the diagnostics' thresholds), kept importable from here.
from ..metrics import LOWER_IS_BETTER  # noqa: F401
from .offpolicy import BOOTSTRAP_BLOCKS, MAX_POLICY_ERROR, MAX_UNSHOWN_MASS, MAX_WEIGHT_SHARE, MIN_ESS  # noqa: F401
from .relevance import RelevanceFit, fit_relevance
from .click_value import on_policy_value, true_click_values
from .compare import Comparison, TrustRules, compare_rankers
from .report import ValidationReport, validation_report
from .scorers import clipped_ips_scorer, dr_scorer, ips_scorer, policy_aware_scorer, snips_scorer

__all__ = ["Estimate", "EstimateWarning", "ips_estimate", "snips_estimate", "clipped_ips_estimate",
           "dr_estimate", "policy_aware_estimate", "RelevanceFit", "fit_relevance",
           "ips_scorer", "snips_scorer", "clipped_ips_scorer", "dr_scorer", "policy_aware_scorer",
           "metric_weight", "ValidationReport", "validation_report", "true_values", "session_contributions",
           "ESTIMATORS", "Comparison", "TrustRules", "compare_rankers", "on_policy_value", "true_click_values"]
