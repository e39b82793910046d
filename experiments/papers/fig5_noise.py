"""Figure 5 of Agarwal et al. (2019): test avg DCG as click noise eps- grows (eta=1).

The paper fixes n = 170K training clicks; at that size both methods are saturated on MQ2008
(the earlier 300-pass run was flat), so the sweep is run at 5K clicks, where the amount of data
still limits them and noise can matter. The number of
clicks is fixed (noise clicks count), as in the paper.

python -m experiments.papers.fig5_noise [--quick] [--seeds N] [--jobs N]
"""

from experiments import _cltr

NAME = "fig5_noise"
CLICKS = (5_000,)


def main(argv=None):
    series = {f"{n // 1000}K clicks": (lambda n: lambda e: {"n_clicks": n, "eta": 1.0, "eps_minus": e})(n)
              for n in CLICKS}
    return _cltr.sweep(NAME, __doc__, [0.0, 0.1, 0.2, 0.3], None, series=series, quick_xs=[0.0, 0.3],
                       xlabel="eps- (click probability of examined irrelevant docs)", argv=argv, default_seeds=10,
                       extra_settings={"eta": 1.0, "eps_plus": 1.0, "n_clicks": CLICKS})


if __name__ == "__main__":
    main()
