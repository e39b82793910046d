"""Figure 5 of Agarwal et al. (2019): test avg DCG as click noise eps- grows (eta=1).

python -m experiments.fig5_noise [--quick] [--seeds N]
"""

from . import _cltr

NAME = "fig5_noise"


def main(argv=None):
    return _cltr.sweep(NAME, __doc__, [0.0, 0.1, 0.2, 0.3], lambda e: {"n_passes": 300, "eta": 1.0, "eps_minus": e},
                       quick_xs=[0.0, 0.3], xlabel="eps- (click probability of examined irrelevant docs)", argv=argv,
                       extra_settings={"eta": 1.0, "eps_plus": 1.0, "n_passes": 300})


if __name__ == "__main__":
    main()
