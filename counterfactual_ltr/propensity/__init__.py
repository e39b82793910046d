"""Examination estimated from click logs, and click models with held-out perplexity.

The third step of the flow: it reads logs (:mod:`counterfactual_ltr.logs`) and produces the
examination models of :mod:`counterfactual_ltr.examination`, which every learner takes.

* :mod:`.estimation`: :func:`estimate_propensities` (swap interventions, harvesting, EM, trust
  EM, the position-based click model) with bootstrap intervals; :class:`EstimatedPropensity`;
* :mod:`.click_models`: fitted click models (position-based, rank-only, document-only) with
  held-out log-likelihood and perplexity: which estimate to trust on a log without labels;
* ``_click_em``: EM of the position-based click model over cells.

The models themselves are imported from here too, as before the package existed.
"""

from .estimation import EstimatedPropensity, EstimatedTrustBias, IdentificationWarning, estimate_propensities, reestimate
from ..examination.propensity_models import (PositionBasedPropensity, TabularPropensity, TrustBiasPropensity, affine_parts,
                                as_propensity_model, check_propensities, is_affine, propensities_at)

__all__ = ["PositionBasedPropensity", "TabularPropensity", "TrustBiasPropensity", "check_propensities",
           "propensities_at", "as_propensity_model", "affine_parts", "is_affine",
           "estimate_propensities", "reestimate", "EstimatedPropensity", "EstimatedTrustBias", "IdentificationWarning"]
