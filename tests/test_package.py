"""The package's face: ``import counterfactual_ltr`` gives what a user needs first, the objects of their modules."""

import importlib

import counterfactual_ltr

FIRST_NEEDS = {
    "counterfactual_ltr.datasets": ["RankingDataset", "binarize"],
    "counterfactual_ltr.clicklog": ["ClickLog"],
    "counterfactual_ltr.aggregate": ["ClickAggregate", "aggregate_clicks"],
    "counterfactual_ltr.propensity": ["PositionBasedPropensity", "TabularPropensity", "TrustBiasPropensity",
                                      "estimate_propensities", "EstimatedPropensity", "EstimatedTrustBias"],
    "counterfactual_ltr.estimators": ["RankSVM", "SVMPropRank", "SVMPropDCG", "SVMPropRBP", "SLAMRanker",
                                      "DeepPropDCG"],
    "counterfactual_ltr.evaluation": ["ips_estimate", "snips_estimate", "clipped_ips_estimate", "dr_estimate",
                                      "policy_aware_estimate", "Estimate", "fit_relevance", "ips_scorer",
                                      "snips_scorer", "clipped_ips_scorer", "dr_scorer", "policy_aware_scorer",
                                      "validation_report", "ValidationReport"],
    "counterfactual_ltr.persistence": ["save_model", "load_model"],
}


def test_top_level_exports_the_first_needs_as_the_same_objects():
    for module_name, names in FIRST_NEEDS.items():
        module = importlib.import_module(module_name)
        for name in names:
            assert name in counterfactual_ltr.__all__, name
            assert getattr(counterfactual_ltr, name) is getattr(module, name), f"{name} differs from {module_name}"


def test_every_exported_name_exists():
    missing = [name for name in counterfactual_ltr.__all__ if not hasattr(counterfactual_ltr, name)]
    assert not missing
    assert counterfactual_ltr.__version__ == importlib.import_module("counterfactual_ltr._version").__version__
