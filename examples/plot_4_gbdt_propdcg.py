"""
Boosted trees from clicks: GBDTPropDCG on non-linear data
=========================================================

When relevance is not a linear function of the features, a linear SVM cannot follow it.
:class:`counterfactual_ltr.GBDTPropDCG` fits gradient-boosted trees (LightGBM is the engine) on
the same propensity-weighted objective as SVM PropDCG. We make data whose relevance has feature
interactions, log clicks from a weak production ranker, and follow the test NDCG at rank 10
against the number of boosting rounds.
"""

# %%
# Non-linear data and a click log
# -------------------------------
# ``interactions`` adds products of features to the hidden relevance model of
# :func:`click_sim.make_ranking`.
import matplotlib.pyplot as plt
import numpy as np

from click_sim import (PositionBasedClickModel, make_ranking, simulate_clicks,
                       train_production_ranker)
from counterfactual_ltr import GBDTPropDCG, SVMPropDCG

data = make_ranking(n_queries=500, interactions=1.0, random_state=0)
train, test = data.subset(np.arange(300)), data.subset(np.arange(300, 500))
production = train_production_ranker(train, fraction=0.01, random_state=0)
clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
log = simulate_clicks(train, production, clicks, n_passes=10, random_state=0)

# %%
# Trees against the linear SVM, both on the propensity-weighted objective
# -----------------------------------------------------------------------
rounds = [10, 25, 50, 100]
gbdt = [GBDTPropDCG(n_estimators=n, learning_rate=0.1, num_leaves=15, propensity=clicks.eta,
                    random_state=0).fit(log).score(test) for n in rounds]
svm = SVMPropDCG(C=1, propensity=clicks.eta).fit(log).score(test)
print("GBDTPropDCG:", ", ".join(f"{n} rounds {s:.3f}" for n, s in zip(rounds, gbdt)))
print(f"SVM PropDCG {svm:.3f}, logging ranker {production.score(test):.3f}")

fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(rounds, gbdt, marker="o", label="GBDTPropDCG")
ax.axhline(svm, color="tab:orange", label="SVM PropDCG (linear)")
ax.axhline(production.score(test), color="gray", linestyle="--", label="logging ranker")
ax.set_xlabel("boosting rounds")
ax.set_ylabel("test NDCG@10")
ax.legend()
fig.tight_layout()
