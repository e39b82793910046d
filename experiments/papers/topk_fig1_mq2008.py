"""Figure 1 of Chaudhuri & Tewari (AISTATS 2016) on MQ2008: online learning to rank from top-k feedback.

    python -m experiments.papers.topk_fig1_mq2008 [--quick] [--seeds N]

Time-averaged NDCG@10 over T rounds of RTop-kF (Algorithm 1) with the
squared (top-1), RankSVM (top-2), unnormalised-KL ListNet (top-1) and
SmoothDCG@1 (top-1, eps = 0.01) surrogates, against online ListNet with full
feedback and a uniformly random ranker, under both parameter settings:

* ``aistats`` -- the AISTATS version (paper 002): T = 250,000, constant
  ``eta = T^(-2/3)``, ``gamma = T^(-1/3)``; ListNet ``eta = T^(-1/2)``;
* ``early`` -- the earlier version (paper 000): ``eta_t = 0.01 / t^(2/3)``,
  ``gamma_t = 0.1 / t^(1/3)``; ListNet ``eta_t = 0.01 / t^(1/2)``; T = 100,000
  (the paper's Yandex horizon).

Data: all of MQ2008 (S1-S5 = 784 queries), the paper also streamed whole
data sets (Yandex, Yahoo; not available here), queries in random order,
every query once per epoch. The radius U of the weight ball is not given in
the paper; ``--radius`` (default 0.3) is used for every RTop-kF learner and a
radius sweep (seed 0) is stored as well. NDCG@10 of queries without relevant
documents is 0 (LETOR convention of ``run_online``).
"""

from __future__ import annotations

import inspect
import time

import numpy as np

from experiments._common import data_missing, figure_path, parser, pyplot, save_results

NAME = "topk_fig1_mq2008"
SURROGATES = ("squared", "ranksvm", "kl_listnet", "smooth_dcg")
LABELS = {"squared": "Squared (top-1)", "ranksvm": "RankSVM (top-2)", "kl_listnet": "KL (top-1)",
          "smooth_dcg": "SmoothDCG (top-1)", "listnet": "ListNet (full feedback)", "random": "Random"}
PAPER = ("paper (Yandex, Yahoo): ListNet with full feedback highest throughout; RankSVM > KL > Squared, "
         "all three well above Random and close to ListNet (very close on Yahoo); SmoothDCG poor")


def settings_for(name: str, T: int) -> dict:
    if name == "aistats":
        return {"T": T, "topk": {"eta": T ** (-2 / 3), "eta_power": 0.0, "gamma": T ** (-1 / 3), "gamma_power": 0.0},
                "listnet": {"eta": T ** -0.5, "eta_power": 0.0},
                "source": "AISTATS 2016 (002): eta = 1/T^(2/3), gamma = 1/T^(1/3), ListNet eta = 1/T^(1/2)"}
    return {"T": T, "topk": {"eta": 0.01, "eta_power": 2 / 3, "gamma": 0.1, "gamma_power": 1 / 3},
            "listnet": {"eta": 0.01, "eta_power": 0.5},
            "source": "earlier version (000): eta_t = 0.01/t^(2/3), gamma_t = 0.1/t^(1/3), ListNet eta_t = 0.01/t^(1/2)"}


def make_listnet(eta, eta_power, random_state):
    """The colleague's full-feedback OnlineListNet (None when it is not available yet)."""
    try:
        from counterfactual_ltr.online import OnlineListNet
    except ImportError:
        try:
            from counterfactual_ltr.online.listnet import OnlineListNet
        except ImportError:
            return None
    accepted = inspect.signature(OnlineListNet).parameters
    kwargs = {"eta": eta, "eta_power": eta_power, "random_state": random_state}
    return OnlineListNet(**{k: v for k, v in kwargs.items() if k in accepted})


def run_setting(data, setting: dict, seeds, radius: float, epsilon: float, n_points: int = 200):
    from click_sim import run_online
    from counterfactual_ltr.online import RandomRanker, TopKFeedbackRanker

    T = setting["T"]
    grid = np.unique(np.geomspace(1, T, n_points).astype(int)) - 1
    curves, finals, seconds = {}, {}, {}
    for seed in seeds:
        learners = {s: TopKFeedbackRanker(s, radius=radius, epsilon=epsilon, random_state=seed, **setting["topk"])
                    for s in SURROGATES}
        listnet = make_listnet(setting["listnet"]["eta"], setting["listnet"]["eta_power"], seed)
        if listnet is not None:
            learners["listnet"] = listnet
        learners["random"] = RandomRanker(random_state=seed)
        for name, learner in learners.items():
            res = run_online(learner, data, T, random_state=seed)  # same query stream for every learner
            avg = res.time_average(res.ndcg_at_10)
            curves.setdefault(name, []).append(avg[grid])
            finals.setdefault(name, []).append(float(avg[-1]))
            seconds.setdefault(name, []).append(res.seconds)
    return {"rounds": grid + 1, "curves": {k: np.mean(v, axis=0) for k, v in curves.items()},
            "final": {k: {"mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0,
                          "per_seed": v} for k, v in finals.items()},
            "rounds_per_second": {k: float(T / np.mean(v)) for k, v in seconds.items()}}


def sanity(final: dict) -> dict:
    """The regret sanity checks of the issue, on the final time-averaged NDCG@10."""
    f = {k: v["mean"] for k, v in final.items()}
    convex = ("squared", "ranksvm", "kl_listnet")
    out = {f"{s}_above_random_by": f[s] - f["random"] for s in convex}
    if "listnet" in f:
        out.update({f"{s}_minus_listnet": f[s] - f["listnet"] for s in convex})
    out["ranksvm_not_worst_convex"] = bool(f["ranksvm"] > min(f["squared"], f["kl_listnet"]))
    return out


def main(argv=None):
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--radius", type=float, default=0.3, help="U, radius of the weight ball (not in the paper)")
    p.add_argument("--epsilon", type=float, default=0.01, help="SmoothDCG smoothing (paper: 0.01)")
    p.add_argument("--no-sweep", action="store_true", help="skip the radius sweep (always skipped with --quick)")
    args = p.parse_args(argv)
    started = time.time()
    from experiments.benchmarks.bench_topk import mq2008_all

    data = mq2008_all()
    if data is None:
        raise data_missing("MQ2008 (S1-S5)")
    n_seeds = args.seeds or (1 if args.quick else 3)
    seeds = list(range(n_seeds))
    horizons = {"aistats": 8_000, "early": 8_000} if args.quick else {"aistats": 250_000, "early": 100_000}
    results, settings = {}, {}
    for name, T in horizons.items():
        setting = settings_for(name, T)
        settings[name] = setting
        res = run_setting(data, setting, seeds, args.radius, args.epsilon)
        res["sanity"] = sanity(res["final"])
        results[name] = res
        print(f"\n== {name}: {setting['source']}; T = {T}, U = {args.radius}, seeds {seeds}")
        for method, v in res["final"].items():
            print(f"  {LABELS[method]:26s} average NDCG@10 at T: {v['mean']:.4f} +- {v['sd']:.4f}"
                  f"   ({res['rounds_per_second'][method]:,.0f} rounds/s)")
        if "listnet" not in res["final"]:
            print("  (OnlineListNet not available: full-feedback baseline skipped)")
        print("  " + PAPER)
        print("  sanity:", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in res["sanity"].items()})
    if not (args.no_sweep or args.quick):
        sweep = {}
        for name, T in horizons.items():
            setting = settings_for(name, T)
            sweep[name] = {}
            for U in (0.1, 0.3, 1.0, 3.0, 10.0):
                from click_sim import run_online
                from counterfactual_ltr.online import TopKFeedbackRanker

                sweep[name][U] = {s: float(run_online(TopKFeedbackRanker(s, radius=U, epsilon=args.epsilon,
                                                                         random_state=0, **setting["topk"]),
                                                      data, T, random_state=0).ndcg_at_10.mean())
                                  for s in SURROGATES}
            print(f"\nradius sweep ({name}, seed 0, average NDCG@10 at T):")
            for U, row in sweep[name].items():
                print(f"  U = {U:5}: " + "  ".join(f"{s} {v:.4f}" for s, v in row.items()))
        results["radius_sweep"] = sweep
    meta = {"data": "MQ2008 S1-S5 (all 784 queries, 46 features), labels 0/1/2 as graded relevance",
            "seeds": seeds, "radius": args.radius, "epsilon": args.epsilon, "k": {"squared": 1, "ranksvm": 2,
            "kl_listnet": 1, "smooth_dcg": 1}, "quick": args.quick, "settings": settings, "paper": PAPER}
    path = save_results(NAME, results, meta, out=args.out, started=started)
    print(f"\nwrote {path}")
    if not args.no_plot:
        plt = pyplot()
        fig, axes = plt.subplots(1, len(horizons), figsize=(6 * len(horizons), 4.2), squeeze=False)
        colors = {"squared": "tab:blue", "ranksvm": "tab:green", "kl_listnet": "tab:purple",
                  "smooth_dcg": "tab:orange", "listnet": "c", "random": "r"}
        for ax, name in zip(axes[0], horizons):
            res = results[name]
            for method, curve in res["curves"].items():
                ax.plot(res["rounds"], curve, label=LABELS[method], color=colors[method])
            ax.set_xscale("log")
            ax.set_xlabel("round t")
            ax.set_ylabel("average NDCG@10 up to t")
            ax.set_title(f"MQ2008, {name} setting (T = {horizons[name]:,}, U = {args.radius})", fontsize=9)
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(figure_path(NAME, args.out), dpi=120)
        print(f"wrote {figure_path(NAME, args.out)}")


if __name__ == "__main__":
    main()
