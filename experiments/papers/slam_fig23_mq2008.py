"""Figures 2-3 of Chaudhuri & Tewari (perceptron-like LTR) on MQ2008: time-averaged AP and NDCG@10.

    python -m experiments.papers.slam_fig23_mq2008 [--quick] [--seeds N]

Data: MQ2008 Fold1 ``train.txt`` (the paper used MSLR-WEB10K, Yahoo and Yandex, not
available here), queries streamed in random order, every query once per epoch, for
T = 50,000 rounds (quick: 3,000). Grades 0/1/2; AP binarises them at 1 (any positive
grade is relevant, as in the paper). Queries without a relevant document score 0
(``run_online``'s LETOR convention) -- the same for every learner.

Learners: Algorithm 2 (``SLAMPerceptron``; v^AP for Figure 2, v^NDCG and v^NDCG@10 for
Figure 3; the mistake rounds follow the same measure), Algorithm 3
(``MaxPairPerceptron``, measure AP resp. NDCG) and online ListNet.

Learning rate, as the paper describes it (section 8): for every algorithm and figure,
the rate with the best time-averaged measure (AP for Fig. 2, NDCG@10 for Fig. 3) over
the fixed horizon T among a grid, observed on the run itself (seed 0's stream) --
in-sample selection, as in the paper. Grids: perceptrons eta in {0.001, 0.01, 0.1, 1, 10}
(Algorithm 3 is eta-invariant: one run), ListNet eta in {0.001, 0.01, 0.1, 1} x
{constant, c/sqrt(t)}. The chosen rates are then run on the other seeds.
"""

from __future__ import annotations

import time

import numpy as np

from experiments._common import figure_path, load_fold, parser, pyplot, save_results

NAME = "slam_fig23_mq2008"
PAPER = ("paper (MSLR-WEB10K/Yahoo/Yandex): Alg. 2 competitive with online ListNet (better on MSLR: NDCG@10 "
         "0.25 vs 0.22, AP 0.49 vs 0.37; slightly worse on Yahoo; overlapping on Yandex); Alg. 3 clearly worse "
         "on Yahoo and Yandex")

PERCEPTRON_ETAS = (0.001, 0.01, 0.1, 1.0, 10.0)
LISTNET = [(e, sc) for e in (0.001, 0.01, 0.1, 1.0) for sc in ("constant", "sqrt")]


def candidates(figure: str):
    from counterfactual_ltr.online import MaxPairPerceptron, OnlineListNet, SLAMPerceptron

    if figure == "ap":
        alg2 = {"alg2_ap": [(f"eta={e}", (lambda e=e: SLAMPerceptron(eta=e, weights="ap"))) for e in PERCEPTRON_ETAS]}
        alg3 = {"alg3": [("eta=1 (eta-invariant)", lambda: MaxPairPerceptron(eta=1.0, measure="ap"))]}
    else:
        alg2 = {"alg2_ndcg": [(f"eta={e}", (lambda e=e: SLAMPerceptron(eta=e, weights="ndcg")))
                              for e in PERCEPTRON_ETAS],
                "alg2_ndcg10": [(f"eta={e}", (lambda e=e: SLAMPerceptron(eta=e, weights="ndcg@k", k=10)))
                                for e in PERCEPTRON_ETAS]}
        alg3 = {"alg3": [("eta=1 (eta-invariant)", lambda: MaxPairPerceptron(eta=1.0, measure="ndcg"))]}
    listnet = {"listnet": [(f"eta={e},{sc}", (lambda e=e, sc=sc: OnlineListNet(eta=e, schedule=sc)))
                           for e, sc in LISTNET]}
    return {**alg2, **alg3, **listnet}


LABELS = {"alg2_ap": "Alg. 2 (SLAM, v^AP)", "alg2_ndcg": "Alg. 2 (SLAM, v^NDCG)",
          "alg2_ndcg10": "Alg. 2 (SLAM, v^NDCG@10)", "alg3": "Alg. 3 (max-pair)", "listnet": "online ListNet"}
FIELD = {"ap": "ap", "ndcg10": "ndcg_at_10"}


def run_figure(data, figure: str, T: int, seeds, grid_t):
    from click_sim import run_online

    field = FIELD[figure]
    chosen, tuning, curves, finals, last10 = {}, {}, {}, {}, {}
    for method, grid in candidates(figure).items():
        scores, series = {}, {}
        for label, make in grid:
            res = run_online(make(), data, T, random_state=seeds[0])
            vals = getattr(res, field)
            scores[label] = float(vals.mean())
            series[label] = vals
        best = max(scores, key=scores.get)
        chosen[method], tuning[method] = best, scores
        runs = [series[best]]
        for seed in seeds[1:]:
            runs.append(getattr(run_online(dict(grid)[best](), data, T, random_state=seed), field))
        avgs = [np.cumsum(v) / np.arange(1, T + 1) for v in runs]
        curves[method] = np.mean([a[grid_t] for a in avgs], axis=0)
        finals[method] = [float(a[-1]) for a in avgs]
        last10[method] = float(np.mean([a[-10:].mean() for a in avgs]))
    summary = {m: {"time_avg_at_T": float(np.mean(v)), "sd": float(np.std(v)), "per_seed": v,
                   "avg_over_last_10_rounds": last10[m], "rate": chosen[m]} for m, v in finals.items()}
    return {"summary": summary, "tuning": tuning, "curves": {"rounds": grid_t + 1, **curves}}


def main(argv=None):
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--T", type=int, default=None, help="rounds (default 50,000; quick 3,000)")
    args = p.parse_args(argv)
    started = time.time()
    train, _, _ = load_fold(1)
    T = args.T or (3_000 if args.quick else 50_000)
    seeds = list(range(args.seeds or (1 if args.quick else 3)))
    grid_t = np.unique(np.geomspace(1, T, 200).astype(int)) - 1
    results = {}
    for figure, title in (("ap", "Figure 2: time-averaged AP"), ("ndcg10", "Figure 3: time-averaged NDCG@10")):
        res = run_figure(train, figure, T, seeds, grid_t)
        results[figure] = res
        print(f"\n{title} -- MQ2008 Fold1 train ({train.n_queries} queries), T = {T}, seeds {seeds}")
        for m, v in res["summary"].items():
            print(f"  {LABELS[m]:28s} {v['time_avg_at_T']:.4f} +- {v['sd']:.4f}   [{v['rate']}]")
    print("  " + PAPER)
    results["paper"] = PAPER
    settings = {"data": "MQ2008 Fold1 train.txt", "n_queries": train.n_queries, "T": T, "seeds": seeds,
                "rate_selection": "per algorithm and figure: best time-averaged measure at T on seed 0's stream "
                                  "(in-sample, as in the paper)",
                "perceptron_etas": PERCEPTRON_ETAS, "listnet_grid": LISTNET,
                "no_relevant_queries": "score 0 (run_online convention)", "ap_threshold": 1}
    save_results(NAME, results, settings, args.out, started)
    if not args.no_plot:
        plt = pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for ax, (figure, ylabel) in zip(axes, (("ap", "time-averaged AP"), ("ndcg10", "time-averaged NDCG@10"))):
            res = results[figure]
            for m, curve in res["curves"].items():
                if m == "rounds":
                    continue
                ax.plot(res["curves"]["rounds"], curve, label=f"{LABELS[m]} [{res['summary'][m]['rate']}]")
            ax.set_xscale("log")
            ax.set_xlabel("round t")
            ax.set_ylabel(ylabel)
            ax.legend(fontsize=7, loc="lower right")
        fig.suptitle(f"MQ2008 Fold1 train, T = {T}, mean of {len(seeds)} seed(s)")
        fig.tight_layout()
        fig.savefig(figure_path(NAME, args.out), dpi=120)
        plt.close(fig)
    return results


if __name__ == "__main__":
    main()
