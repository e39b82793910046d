"""Figure 4 of Agarwal et al. (2019): test avg DCG as the position bias eta grows (eps-=0).

Two training sizes a factor 5 apart, as in the paper (n=45K and 225K clicks there; here the
passes are chosen so that MQ2008 alone gives a similar ratio).

python -m experiments.fig4_eta [--quick] [--seeds N]
"""

from . import _cltr

NAME = "fig4_eta"


def main(argv=None):
    series = {f"{p} passes": (lambda p: lambda eta: {"n_passes": p, "eta": eta, "eps_minus": 0.0})(p) for p in (20, 100)}
    return _cltr.sweep(NAME, __doc__, [0.5, 1.0, 1.5, 2.0], None, series=series, quick_xs=[0.5, 2.0],
                       xlabel="eta (severity of position bias)", argv=argv,
                       extra_settings={"eps_minus": 0.0, "eps_plus": 1.0, "passes": [20, 100]})


if __name__ == "__main__":
    main()
