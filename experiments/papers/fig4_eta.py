"""Figure 4 of Agarwal et al. (2019): test avg DCG as the position bias eta grows (eps-=0).

Two training-set sizes a factor 5 apart with the number of training clicks fixed as in the
paper (n = 45K and 225K clicks): at every eta the log is simulated pass after pass until it
holds that many clicks, so stronger bias means more sessions, not fewer clicks.

python -m experiments.papers.fig4_eta [--quick] [--seeds N] [--seed-start S] [--jobs N]
python -m experiments.papers.fig4_eta --merge part1.json part2.json   # one result from seed ranges run apart
"""

from experiments import _cltr

NAME = "fig4_eta"
CLICKS = (45_000, 225_000)


def main(argv=None):
    series = {f"{n // 1000}K clicks": (lambda n: lambda eta: {"n_clicks": n, "eta": eta, "eps_minus": 0.0})(n)
              for n in CLICKS}
    return _cltr.sweep(NAME, __doc__, [0.5, 1.0, 2.0], None, series=series, quick_xs=[0.5, 2.0],
                       xlabel="eta (severity of position bias)", argv=argv, default_seeds=10,
                       methods=("naive", "proprank", "propdcg"), C_grid=_cltr.WIDE_C_GRID,
                       extra_settings={"eps_minus": 0.0, "eps_plus": 1.0, "n_clicks": CLICKS})


if __name__ == "__main__":
    main()
