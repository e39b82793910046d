"""Batch SLAM (regularised empirical SLAM risk, linear model) vs RankSVM on MQ2008 Fold1.

    python -m experiments.papers.slam_batch_table [--quick]

Trains :class:`counterfactual_ltr.estimators.slam.SLAMRanker` (weights v^NDCG, v^NDCG@10,
v^AP; margin 1) and a linear RankSVM on MQ2008 Fold1 ``train.txt``, picks ``C`` from a
log grid by NDCG@10 on ``vali.txt`` and reports test NDCG@10 (plus NDCG and AP) on
``test.txt``. Both objectives are ``0.5||w||^2 + C * mean over queries``; the RankSVM is
``counterfactual_ltr.estimators.RankSVM``. Queries without a relevant document score 0
(LETOR convention). Quick mode: a 3-value C grid, and 120
training queries.
"""

from __future__ import annotations

import time

import numpy as np

from experiments._common import figure_path, load_fold, parser, pyplot, save_results

NAME = "slam_batch_table"
C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
C_GRID_QUICK = (0.1, 10.0, 1000.0)
QUICK_QUERIES = 120          # training queries in quick mode


def _metrics(scores, data):
    from counterfactual_ltr.metrics import average_precision, ndcg

    off = data.query_offsets
    return {"ndcg10": float(ndcg(scores, data.y, off, k=10)), "ndcg": float(ndcg(scores, data.y, off)),
            "ap": float(average_precision(scores, data.y, off, threshold=1))}


def make_ranksvm(C):
    from counterfactual_ltr.estimators import RankSVM

    return RankSVM(C=C), "counterfactual_ltr.estimators.RankSVM"


def main(argv=None):
    from counterfactual_ltr.estimators.slam import SLAMRanker

    p = parser(__doc__.splitlines()[0])
    args = p.parse_args(argv)
    started = time.time()
    train, vali, test = load_fold(1)
    if args.quick:
        train = train.subset(np.arange(min(QUICK_QUERIES, train.n_queries)))
    grid = C_GRID_QUICK if args.quick else C_GRID
    methods = {
        "slam_ndcg": lambda C: (SLAMRanker(C=C, weights="ndcg"), "SLAMRanker(weights='ndcg')"),
        "slam_ndcg10": lambda C: (SLAMRanker(C=C, weights="ndcg@k", k=10), "SLAMRanker(weights='ndcg@k', k=10)"),
        "slam_ap": lambda C: (SLAMRanker(C=C, weights="ap"), "SLAMRanker(weights='ap')"),
        "ranksvm": make_ranksvm,
    }
    rows, impls = {}, {}
    for name, make in methods.items():
        vali_scores, models = {}, {}
        for C in grid:
            model, impl = make(C)
            t0 = time.perf_counter()
            model.fit(train)
            fit_s = time.perf_counter() - t0
            vali_scores[C] = _metrics(model.predict(vali.X), vali)["ndcg10"]
            models[C] = (model, fit_s)
            impls[name] = impl
        best = max(vali_scores, key=vali_scores.get)
        model, fit_s = models[best]
        rows[name] = {"C": best, "vali_ndcg10": vali_scores[best], "vali_by_C": vali_scores,
                      "test": _metrics(model.predict(test.X), test), "fit_seconds": fit_s,
                      "impl": impls[name], "n_iter": getattr(model, "n_iter_", None),
                      "converged": getattr(model, "converged_", None)}
        print(f"{name:12s} C={best:<7g} vali NDCG@10 {vali_scores[best]:.4f}  test NDCG@10 "
              f"{rows[name]['test']['ndcg10']:.4f}  NDCG {rows[name]['test']['ndcg']:.4f}  "
              f"AP {rows[name]['test']['ap']:.4f}  ({impls[name]})")
    settings = {"data": "MQ2008 Fold1 train/vali/test", "train_queries": train.n_queries, "C_grid": grid,
                "selection": "best vali NDCG@10", "margin": 1.0, "loss_normalisation": "mean over queries",
                "ranksvm_impl": impls["ranksvm"], "no_relevant_queries": "score 0"}
    save_results(NAME, {"rows": rows}, settings, args.out, started)
    if not args.no_plot:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        for name, row in rows.items():
            Cs = list(row["vali_by_C"])
            ax.plot(Cs, [row["vali_by_C"][c] for c in Cs], marker="o", label=f"{name} (test {row['test']['ndcg10']:.3f})")
        ax.set_xscale("log")
        ax.set_xlabel("C")
        ax.set_ylabel("validation NDCG@10")
        ax.set_title("MQ2008 Fold1: batch SLAM vs RankSVM")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(figure_path(NAME, args.out), dpi=120)
        plt.close(fig)
    return rows


if __name__ == "__main__":
    main()
