"""Models of examination: how likely a shown result is to be looked at, and what a logger shows.

The first step of the flow: functions of position (and of trust), not of any log, so that the
log, its aggregate and every learner can take them.

* :mod:`.propensity_models`: :class:`PositionBasedPropensity` (``p_r = (1/r)^eta``),
  :class:`TabularPropensity`, :class:`TrustBiasPropensity`, and the helpers that resolve a
  propensity argument (``as_propensity_model``, ``propensities_at``);
* :mod:`.logging_policy`: a logger's probabilities of placing each document at each position
  (for the policy-aware estimate).

Their estimation from a log is above the logs, in :mod:`counterfactual_ltr.propensity`.
"""

from .propensity_models import (PositionBasedPropensity, TabularPropensity, TrustBiasPropensity, affine_parts,
                                as_propensity_model, check_propensities, is_affine, propensities_at)

__all__ = ["PositionBasedPropensity", "TabularPropensity", "TrustBiasPropensity", "check_propensities",
           "propensities_at", "as_propensity_model", "affine_parts", "is_affine"]
