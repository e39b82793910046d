"""Figure 7 of Agarwal et al. (2019): CCP objective and training SNIPS-DCG per iteration, for several C.

MQ2008 Fold1, eta=1, eps-=0.1, eps+=1, about 17K training clicks (36 passes over the MQ2008
training queries), production ranker on 1% of the training queries.

python -m experiments.papers.fig7_ccp [--quick]
"""

from __future__ import annotations

import time

import numpy as np

from experiments import _cltr
from experiments._common import MQ2007_NOTE, figure_path, load_fold, parser, pyplot, save_results

NAME = "fig7_ccp"


def main(argv=None):
    args = parser(__doc__).parse_args(argv)
    started = time.time()
    train, vali, test = load_fold(1)
    passes = 10 if args.quick else 36
    C_grid = _cltr.QUICK_C_GRID if args.quick else _cltr.DEFAULT_C_GRID
    seed = 0
    _, train_log, _ = _cltr.simulate_run(train, vali, seed=seed, n_passes=passes)
    curves = {}
    for C in C_grid:
        t0 = time.perf_counter()
        model = _cltr.make_estimator("propdcg", C, max_ccp_iter=30, tol=1e-6).fit(train_log)
        curves[C] = {"objective": model.objective_history_, "train_snips_dcg": model.train_snips_history_,
                     "solver_iterations": model.n_iter_, "ccp_iterations": model.n_ccp_iter_,
                     "seconds": time.perf_counter() - t0,
                     "iterations_to_1e-3": int(np.argmax(np.abs(np.diff(model.objective_history_))
                                                         <= 1e-3 * np.abs(model.objective_history_[1:])) + 1)}
        print(f"C={C:g}: {model.n_ccp_iter_} CCP iterations, objective {model.objective_history_[0]:.5f} -> "
              f"{model.objective_history_[-1]:.5f}, train SNIPS-DCG {model.train_snips_history_[0]:.4f} -> "
              f"{model.train_snips_history_[-1]:.4f}", flush=True)
    results = {"curves": curves, "n_train_clicks": train_log.n_clicks}
    settings = {"data": "MQ2008 Fold1", "seed": seed, "n_passes": passes, "eta": 1.0, "eps_minus": 0.1,
                "eps_plus": 1.0, "tol": 1e-6, "max_ccp_iter": 30, "C_grid": C_grid, "note": MQ2007_NOTE,
                "objective": "0.5||w||^2 + (C/n) sum_j W_j lambda(1 + H_j(w)), lambda(r) = -1/log2(1+r); "
                             "entry 0 is w = 0, entry k after the k-th CCP iteration"}
    path = save_results(NAME, results, settings, args.out, started)
    print(f"wrote {path}")
    if not args.no_plot:
        plt = pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for C, c in curves.items():
            obj = np.asarray(c["objective"])
            axes[0].plot(np.arange(len(obj)), (obj - obj[-1]) / abs(obj[-1]) + 1e-12, marker="o", label=f"C={C:g}")
            axes[1].plot(np.arange(1, len(c["train_snips_dcg"]) + 1), c["train_snips_dcg"], marker="o", label=f"C={C:g}")
        axes[0].set_yscale("log")
        axes[0].set_xlabel("CCP iteration")
        axes[0].set_ylabel("relative objective above final")
        axes[1].set_xlabel("CCP iteration")
        axes[1].set_ylabel("training SNIPS-DCG")
        axes[0].legend(fontsize=7)
        fig.suptitle(f"Figure 7: CCP on MQ2008 Fold1 ({train_log.n_clicks} clicks; no MQ2007)", fontsize=9)
        fig.tight_layout()
        fig.savefig(figure_path(NAME, args.out), dpi=110)
        plt.close(fig)
    return results


if __name__ == "__main__":
    main()
