"""Figures 2 and 3 of Agarwal et al. (2019): test avg DCG and avg rank against the number of training clicks.

eta=1, eps-=0.1, eps+=1; the x-axis is the number of passes over the training queries
(the JSON records the resulting number of clicks).

python -m experiments.papers.fig23_learning_curve [--quick] [--seeds N] [--seed-start S] [--jobs N]
python -m experiments.papers.fig23_learning_curve --merge part1.json part2.json   # one result from seed ranges run apart
"""

from experiments import _cltr

NAME = "fig23_learning_curve"


def main(argv=None):
    return _cltr.sweep(NAME, __doc__, [2, 20, 300], lambda x: {"n_passes": x},
                       quick_xs=[20, 100], xlabel="passes over the training queries (clicks in JSON)",
                       metrics=("avg_dcg", "avg_rank", "ndcg10"), argv=argv, default_seeds=10,
                       methods=("naive", "proprank", "propdcg"), C_grid=_cltr.WIDE_C_GRID,
                       extra_settings={"eta": 1.0, "eps_minus": 0.1, "eps_plus": 1.0})


if __name__ == "__main__":
    main()
