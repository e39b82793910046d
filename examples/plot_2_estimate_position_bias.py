"""
Estimating the position bias of a click log
===========================================

The propensity-weighted learners and estimators need the examination propensity of each position:
how much more often a result is looked at in position 1 than in position ``r``. A real log does not
come with it. :func:`counterfactual_ltr.estimate_propensities` estimates it from the log itself,
with a bootstrap interval over queries.

Here the truth is known: we simulate clicks with examination ``(1/r)^eta`` and compare two
estimates with it, one from *intervention harvesting* (sessions served by several rankers, no
randomisation) and one from *swap experiments* (the top result swapped with a random lower one
in a share of the sessions).
"""

# %%
# Two simulated logs with the same click model
# --------------------------------------------
import matplotlib.pyplot as plt
import numpy as np

from click_sim import (PositionBasedClickModel, SwapIntervention, make_ranking, simulate_clicks,
                       train_production_ranker)
from counterfactual_ltr import estimate_propensities

data = make_ranking(n_queries=300, n_docs=(10, 30), random_state=0)
clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
rankers = [train_production_ranker(data, fraction=0.03, random_state=seed) for seed in range(3)]

# harvesting: each session is served by one of three production rankers
harvest_log = simulate_clicks(data, rankers, clicks, n_passes=30, random_state=0)
# swap: one ranker, the top result swapped with a random one of positions 2-10 in 25 % of sessions
swap_log = simulate_clicks(data, rankers[0], clicks, n_passes=60, random_state=1,
                           intervention=SwapIntervention(0.25))

# %%
# Estimates with their 95 % bootstrap intervals
# ---------------------------------------------
# Each estimate is a propensity model: it can be passed as ``propensity=`` to every learner,
# scorer and report of the toolkit. ``eta_`` is the fitted power law.
harvest = estimate_propensities(harvest_log, "harvest", max_position=10, n_bootstrap=100,
                                random_state=0)
swap = estimate_propensities(swap_log, "swap", max_position=10, n_bootstrap=100, random_state=0)
for estimate in (harvest, swap):
    print(f"{estimate.method_:8s} eta = {estimate.eta_:.2f} (true {clicks.eta}); "
          f"theta_10 / theta_1 = {estimate.relative_[-1]:.3f} (true {0.1 ** clicks.eta:.3f})")

truth = (1.0 / np.arange(1, 11)) ** clicks.eta
fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), sharey=True)
for ax, estimate, title in zip(axes, (harvest, swap), ("intervention harvesting", "swap experiments")):
    estimate.plot(ax=ax, truth=truth)
    ax.set_title(f"{title}: {estimate.n_sessions_:,} sessions")
fig.tight_layout()
