"""Observation propensities: the models, and their estimation from click logs.

The models (:class:`PositionBasedPropensity`, :class:`TabularPropensity`,
:class:`TrustBiasPropensity`) live in :mod:`counterfactual_ltr.propensity_models`,
which the click log itself uses; their estimation from a log
(:func:`estimate_propensities`) lives in
:mod:`counterfactual_ltr.propensity_estimation`. Both are imported from here.
"""

from .propensity_estimation import EstimatedPropensity, EstimatedTrustBias, IdentificationWarning, estimate_propensities
from .propensity_models import (PositionBasedPropensity, TabularPropensity, TrustBiasPropensity, affine_parts,
                                as_propensity_model, check_propensities, is_affine, propensities_at)

__all__ = ["PositionBasedPropensity", "TabularPropensity", "TrustBiasPropensity", "check_propensities",
           "propensities_at", "as_propensity_model", "affine_parts", "is_affine",
           "estimate_propensities", "EstimatedPropensity", "EstimatedTrustBias", "IdentificationWarning"]
