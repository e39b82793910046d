"""
Should we ship it? Comparing rankers offline
============================================

Before an A/B test, a click log can already tell whether a new ranker is better than the one that
wrote the log. :func:`counterfactual_ltr.compare_rankers` estimates *candidate minus logging
policy* on the same logged sessions (a paired estimate), with a confidence interval, a p-value, a
lower bound on the improvement and a verdict: better, worse, "no difference found" or "cannot
tell" with its reasons.

We fit two candidates on a training log and compare them with the logging ranker on a separate
validation log. The data are simulated, so the true NDCG at rank 10 of each ranker is known too.
"""

# %%
# A logging ranker, a training log and a validation log
# -----------------------------------------------------
import matplotlib.pyplot as plt
import numpy as np

from click_sim import (PositionBasedClickModel, make_ranking, simulate_clicks,
                       train_production_ranker)
from counterfactual_ltr import RankSVM, SVMPropDCG, compare_rankers

data = make_ranking(n_queries=600, random_state=0)
train, vali = data.subset(np.arange(300)), data.subset(np.arange(300, 600))
production = train_production_ranker(train, fraction=0.01, random_state=0)
clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
train_log = simulate_clicks(train, production, clicks, n_passes=5, random_state=0)
vali_log = simulate_clicks(vali, production, clicks, n_passes=5, random_state=1)

candidates = {
    "SVM PropDCG": SVMPropDCG(C=1, propensity=clicks.eta).fit(train_log),
    "RankSVM on clicks": RankSVM(C=1).fit(train_log),
}

# %%
# The comparisons
# ---------------
# One call compares every candidate with the logging policy; the intervals and bounds of the
# two are Bonferroni-corrected together, so all verdicts hold at once.
comparisons = compare_rankers(vali_log, candidates, baseline="logging", estimator="snips",
                              propensity=clicks.eta, n_bootstrap=500, random_state=0)
for name, comparison in comparisons.items():
    print(f"{name}:\n  {comparison.summary()}")

# %%
# Estimated improvements against the truth
# ----------------------------------------
# The estimate is of the DCG of clicks; on simulated data we can also look at the true NDCG at rank 10
# on the validation queries' labels, which the log never showed.
truth = {name: ranker.score(vali) - production.score(vali) for name, ranker in candidates.items()}
names = list(comparisons)
improvement = np.array([comparisons[n].improvement for n in names])
low, high = np.array([comparisons[n].improvement_interval for n in names]).T

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
ax1.errorbar(range(len(names)), improvement, yerr=[improvement - low, high - improvement],
             fmt="o", capsize=6)
ax1.axhline(0, color="gray", linestyle="--")
ax1.set_xlim(-0.5, len(names) - 0.5)
ax1.margins(y=0.15)
ax1.set_xticks(range(len(names)), names)
ax1.set_ylabel("SNIPS-DCG of clicks, minus logging")
ax1.set_title("estimated from the validation log")
for i, n in enumerate(names):
    ax1.annotate(comparisons[n].verdict, (i, high[i]), textcoords="offset points", xytext=(0, 6),
                 ha="center", fontsize=9)
ax2.bar(range(len(names)), [truth[n] for n in names], color="tab:green")
ax2.axhline(0, color="gray", linestyle="--")
ax2.set_xticks(range(len(names)), names)
ax2.set_ylabel("true NDCG@10, minus logging")
ax2.set_title("known only in simulation")
fig.tight_layout()
