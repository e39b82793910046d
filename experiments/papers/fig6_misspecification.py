"""Figure 6 of Agarwal et al. (2019): propensity misspecification (true eta=1, assumed eta on the x-axis).

Training and C selection both use the assumed propensities, as a user who does not know the
true eta would; "clipped" floors the assumed propensities at 0.05 (weights <= 20). The number of
training clicks is fixed at the paper's n = 170K.

python -m experiments.papers.fig6_misspecification [--quick] [--seeds N] [--seed-start S] [--jobs N]
python -m experiments.papers.fig6_misspecification --merge part1.json part2.json   # one result from seed ranges run apart
"""

from counterfactual_ltr import PositionBasedPropensity

from experiments import _cltr

NAME = "fig6_misspecification"
CLIP = 0.05
N_CLICKS = 170_000


def _conf(clip):
    return lambda eta: {"n_clicks": N_CLICKS, "eta": 1.0, "eps_minus": 0.1,
                        "propensity": PositionBasedPropensity(eta, clip=clip)}


def main(argv=None):
    return _cltr.sweep(NAME, __doc__, [0.0, 0.5, 1.0, 1.5, 2.0], None,
                       series={"unclipped": _conf(None), f"clipped at {CLIP}": _conf(CLIP)},
                       quick_xs=[0.5, 2.0], xlabel="assumed eta (true eta = 1)", argv=argv, default_seeds=10,
                       C_grid=_cltr.WIDE_C_GRID,
                       extra_settings={"true_eta": 1.0, "eps_minus": 0.1, "eps_plus": 1.0, "n_clicks": N_CLICKS,
                                       "clip": CLIP})


if __name__ == "__main__":
    main()
