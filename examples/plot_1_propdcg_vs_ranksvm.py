"""
Counterfactual vs naive: SVM PropDCG against a RankSVM on clicks
================================================================

Clicks are biased by position: people click what they see, and they see the top. A Ranking SVM
fitted on clicks as if they were relevance labels learns the logging ranker's order back. SVM
PropDCG weights each click by the inverse of its examination propensity and so learns relevance.

We simulate a click log on synthetic graded data with :func:`click_sim.simulate_clicks`, fit both
on the same log, and score them by NDCG at rank 10 on held-out queries with true labels.
"""

# %%
# Data, a logging ranker and a click log
# --------------------------------------
# :func:`click_sim.make_ranking` draws graded queries from a hidden linear model (one call, split
# by query, so that training and test queries share that model);
# :func:`click_sim.train_production_ranker` is a Ranking SVM fitted on the labels of 1 % of the
# training queries, a mediocre "production" ranker that writes the log.
import matplotlib.pyplot as plt
import numpy as np

from click_sim import (PositionBasedClickModel, make_ranking, simulate_clicks,
                       train_production_ranker)
from counterfactual_ltr import RankSVM, SVMPropDCG

data = make_ranking(n_queries=600, n_features=10, random_state=0)
train, test = data.subset(np.arange(300)), data.subset(np.arange(300, 600))
production = train_production_ranker(train, fraction=0.01, random_state=0)
clicks = PositionBasedClickModel(eta=1, eps_minus=0.1, eps_plus=1)

# %%
# Fit on logs of growing size
# ---------------------------
# Both rankers see the same sessions. The propensity model given to SVM PropDCG is the one the log
# was simulated with (examination ``(1/rank)^eta``, ``eta = 1``).
n_passes = [2, 5, 10, 20]
scores = {"SVM PropDCG": [], "RankSVM on clicks": []}
for passes in n_passes:
    log = simulate_clicks(train, production, clicks, n_passes=passes, random_state=0)
    scores["SVM PropDCG"].append(SVMPropDCG(C=1, propensity=clicks.eta).fit(log).score(test))
    scores["RankSVM on clicks"].append(RankSVM(C=1).fit(log).score(test))
    print(f"{passes:3d} passes, {log.n_clicks} clicks: "
          + ", ".join(f"{name} {values[-1]:.3f}" for name, values in scores.items()))

# %%
# The logging ranker's own NDCG at rank 10 is the line to beat; a RankSVM fitted on the true labels of
# every training query (never available from clicks) is the ceiling.
logging_ndcg = production.score(test)
skyline_ndcg = RankSVM(C=1).fit(train).score(test)
print(f"logging ranker {logging_ndcg:.3f}, skyline {skyline_ndcg:.3f}")

fig, ax = plt.subplots(figsize=(6, 4))
for name, values in scores.items():
    ax.plot(n_passes, values, marker="o", label=name)
ax.axhline(logging_ndcg, color="gray", linestyle="--", label="logging ranker")
ax.axhline(skyline_ndcg, color="black", linestyle=":", label="skyline (true labels)")
ax.set_xscale("log")
ax.minorticks_off()
ax.set_xticks(n_passes, [str(p) for p in n_passes])
ax.set_ylim(logging_ndcg - 0.07, skyline_ndcg + 0.02)
ax.set_xlabel("passes over the training queries (sessions per query)")
ax.set_ylabel("test NDCG@10")
ax.set_title("Learning from position-biased clicks")
ax.legend(loc="lower center", ncol=2, fontsize=9)
fig.tight_layout()
